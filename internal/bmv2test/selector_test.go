package bmv2test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

// selectorTopology is one leaf (two hosts, four uplinks) and, for
// fabricsim to trace flows to, the spines and two more leaves with eight
// hosts each. Only leaf1 runs on BMv2.
func selectorTopology(t *testing.T) models.Topology {
	t.Helper()
	var topo models.Topology
	topo.Name = "selector"
	leaf := func(n int) models.SwitchID { return models.SwitchID(fmt.Sprintf("leaf%d", n)) }
	for n := 1; n <= 3; n++ {
		topo.Switches = append(topo.Switches, models.Switch{Name: leaf(n), Role: models.RoleLeaf, DeviceID: uint64(n),
			Prefix: netip.MustParsePrefix(fmt.Sprintf("10.0.%d.0/24", n))})
	}
	for s := 1; s <= 4; s++ {
		spine := models.SwitchID(fmt.Sprintf("spine%d", s))
		topo.Switches = append(topo.Switches, models.Switch{Name: spine, Role: models.RoleSpine, DeviceID: uint64(10 + s)})
		for n := 1; n <= 3; n++ {
			topo.Links = append(topo.Links, models.Link{A: models.Endpoint{Switch: leaf(n), Port: uint32(8 + s)}, B: models.Endpoint{Switch: spine, Port: uint32(n)}, Gbps: 100})
		}
	}
	hosts := map[int]int{1: 2, 2: 8, 3: 8}
	for n := 1; n <= 3; n++ {
		for i := 1; i <= hosts[n]; i++ {
			topo.Hosts = append(topo.Hosts, models.Host{Name: fmt.Sprintf("h%d-%d", n, i), IP: netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", n, i)),
				Attach: models.Endpoint{Switch: leaf(n), Port: uint32(i)}, NICGbps: 100})
		}
	}
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	return topo
}

// driverFor is a P4Runtime driver for the switches of topo.
func driverFor(t *testing.T, topo models.Topology) *southbound.P4RT {
	t.Helper()
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: snap.Switch})
	t.Cleanup(d.Close)
	return d
}

// selectorWrites are the writes both switches get, in order: groups
// created, re-weighted (weighted copies made and dropped), a second group
// sharing members, so that member handles are allocated as BMv2 does in
// a switch's life rather than once in order.
func selectorWrites() []models.Diff {
	seed := uint32(0x5eed0001)
	members := []models.Member{{ID: 9, Port: 9}, {ID: 10, Port: 10}, {ID: 11, Port: 11}, {ID: 12, Port: 12}}
	g := func(id uint32, w map[uint32]int32) models.Group {
		out := models.Group{ID: id}
		for _, m := range []uint32{9, 10, 11, 12} {
			if w[m] > 0 {
				out.Members = append(out.Members, models.GroupMember{MemberID: m, Weight: w[m]})
			}
		}
		return out
	}
	to2, to3 := netip.MustParsePrefix("10.0.2.0/24"), netip.MustParsePrefix("10.0.3.0/24")
	return []models.Diff{
		{Insert: models.ForwardingState{Members: members, Groups: []models.Group{g(1, map[uint32]int32{9: 1, 10: 1, 11: 1, 12: 1})},
			Routes: []models.Route{{Prefix: to2, GroupID: 1}}}, Modify: models.ForwardingState{HashSeed: &seed}},
		{Modify: models.ForwardingState{Groups: []models.Group{g(1, map[uint32]int32{9: 2, 10: 1, 12: 3})}}},
		{Insert: models.ForwardingState{Groups: []models.Group{g(2, map[uint32]int32{10: 2, 11: 1})}, Routes: []models.Route{{Prefix: to3, GroupID: 2}}}},
		{Modify: models.ForwardingState{Groups: []models.Group{g(1, map[uint32]int32{9: 1, 10: 3, 11: 1, 12: 2})}}},
	}
}

// TestSelectorMatchesFabricsim sends the same 1,000 random RoCEv2 flows
// through leaf1 on BMv2 and in fabricsim, both programmed with the same
// writes (two weighted groups, re-weighted, the switch's hash seed), and
// compares every flow's egress port: fabricsim must pick exactly the
// member BMv2 picks (FlowHash as accelnet.p4 computes it, BMv2's member
// handles in order, weights as PI makes them).
func TestSelectorMatchesFabricsim(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	topo := selectorTopology(t)
	lab := NewLab(t, bin)
	in := lab.Stub(models.Endpoint{Switch: "leaf1", Port: 1})
	out := map[uint32]string{}
	for port := uint32(9); port <= 12; port++ {
		out[port] = lab.Stub(models.Endpoint{Switch: "leaf1", Port: port})
	}
	bmv2 := topo
	bmv2.Switches = []models.Switch{topo.Switches[0]}
	bmv2.Switches[0].Target = models.TargetBMv2
	bmv2.Switches[0].P4RTAddr = lab.Start(bmv2.Switches[0])
	bmv2.Links, bmv2.Hosts = nil, nil
	hw := driverFor(t, bmv2)
	fab := fabrictest.StartFabric(t, topo)
	sim := driverFor(t, fab.Topology())
	ctx := context.Background()
	for i, d := range selectorWrites() {
		if err := hw.Apply(ctx, "leaf1", d); err != nil {
			t.Fatalf("write %d to BMv2: %v", i, err)
		}
		if err := sim.Apply(ctx, "leaf1", d); err != nil {
			t.Fatalf("write %d to fabricsim: %v", i, err)
		}
	}

	send, err := OpenSocket("", in)
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	type arrival struct {
		port uint32
		p    Parsed
	}
	arrivals := make(chan arrival, 64)
	for port, ifc := range out {
		s, err := OpenSocket("", ifc)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if f := s.Recv(100*time.Millisecond, func(f []byte) bool { return Parse(f).OK }); f != nil {
					arrivals <- arrival{port, Parse(f)}
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-done; s.Close() })
	}

	rng := rand.New(rand.NewPCG(7, 11))
	srcs := []netip.Addr{netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.1.2")}
	mismatches, compared := 0, 0
	for i := range 1000 {
		src := srcs[rng.IntN(2)]
		dst := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", 2+rng.IntN(2), 1+rng.IntN(8)))
		sport := uint16(49152 + rng.IntN(16384))
		want := fab.Trace(fabricsim.FlowSpec{Src: src, Dst: dst, SrcPort: sport, DemandGbps: 1})
		if len(want.Hops) == 0 {
			t.Fatalf("fabricsim does not forward %s -> %s:%d: %s", src, dst, sport, want.DropAt)
		}
		frame := RoCEv2(models.MAC{0x06, 0, 0, 0, 0, 1}, models.MAC{0x02, 0, 0, 1, 0, 1}, src, dst, sport, uint32(i), 64)
		if err := send.Send(frame); err != nil {
			t.Fatal(err)
		}
		var got arrival
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case a := <-arrivals:
				if a.p.Src == src && a.p.Dst == dst && a.p.SrcPort == sport {
					got = a
					break wait
				}
			case <-timeout:
				t.Fatalf("flow %d (%s -> %s:%d) did not leave BMv2's leaf1", i, src, dst, sport)
			}
		}
		compared++
		if got.port != want.Hops[0].OutPort {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("%s -> %s:%d: BMv2 sent it out of port %d, fabricsim out of %d (FlowHash %#x)", src, dst, sport,
					got.port, want.Hops[0].OutPort, pathcalc.FlowHash(0x5eed0001, src, dst, sport))
			}
		}
	}
	t.Logf("%d of %d flows left BMv2 and fabricsim by the same port", compared-mismatches, compared)
	if mismatches > 0 {
		t.Fatalf("%d of %d flows differ", mismatches, compared)
	}
}
