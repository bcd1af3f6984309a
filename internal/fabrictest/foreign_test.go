package fabrictest_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestForeignEntries: entries in accelnet's tables that something else
// wrote (no accelnet tag) are removed as drift by default and left alone
// with KeepForeignEntries; either way, a route the controller needs that
// something else overwrote is put right (taken over when kept).
func TestForeignEntries(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "remove", true: "keep"}[keep], func(t *testing.T) {
			f := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 2, 1))
			h := fabrictest.NewServeWith(t, f.Topology(), func(o *stack.Config) { o.KeepForeignEntries = keep })
			converged(t, h)
			schema, err := p4.LoadSchema()
			if err != nil {
				t.Fatal(err)
			}
			route := func(prefix string, member uint32) *p4v1.TableEntry {
				p := netip.MustParsePrefix(prefix)
				a := p.Addr().As4()
				return &p4v1.TableEntry{
					TableId: schema.TableID(p4.TableIPv4LPM),
					Match: []*p4v1.FieldMatch{{FieldId: schema.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst),
						FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: a[:], PrefixLen: int32(p.Bits())}}}},
					Action: &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: member}},
				}
			}
			find := func(prefix string) *p4v1.TableEntry {
				want := netip.MustParsePrefix(prefix)
				for _, e := range f.Switch("leaf1").TableEntries(p4.TableIPv4LPM) {
					lpm := e.GetMatch()[0].GetLpm()
					if netip.PrefixFrom(p4.Addr(lpm.GetValue()), int(lpm.GetPrefixLen())) == want {
						return e
					}
				}
				return nil
			}
			ours := find("10.0.2.0/24")
			if ours == nil || !bytes.Equal(ours.GetMetadata(), []byte("accelnet")) {
				t.Fatalf("leaf1's route to leaf2 is missing or untagged: %v", ours)
			}
			// Another application adds a route of its own and overwrites
			// one of the controller's with a wrong next hop (the host port).
			if err := f.Switch("leaf1").WriteDirect(
				&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: route("192.168.99.0/24", 1)}}},
				&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: route("10.0.2.0/24", 1)}}},
			); err != nil {
				t.Fatal(err)
			}
			h.Controller.Resync("leaf1")
			h.Eventually(t, 10*time.Second, "leaf1's route to leaf2 put right and tagged", func() bool {
				e := find("10.0.2.0/24")
				return e != nil && bytes.Equal(e.GetMetadata(), []byte("accelnet")) && e.GetAction().GetActionProfileGroupId() == ours.GetAction().GetActionProfileGroupId()
			})
			if keep {
				if e := find("192.168.99.0/24"); e == nil {
					t.Error("the foreign route was removed although foreign entries are kept")
				}
				// It stays on later resyncs too.
				h.Controller.Resync("leaf1")
				h.Eventually(t, 10*time.Second, "leaf1 in sync", func() bool { return h.Converged() == nil })
				if e := find("192.168.99.0/24"); e == nil {
					t.Error("the foreign route was removed by a later resync")
				}
			} else {
				h.Eventually(t, 10*time.Second, "the foreign route removed", func() bool { return find("192.168.99.0/24") == nil })
			}
		})
	}
}
