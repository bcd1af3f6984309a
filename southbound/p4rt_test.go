package southbound_test

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

func TestMain(m *testing.M) { fabrictest.Main(m) }

func resolver(topo models.Topology) southbound.Resolver {
	return func(id models.SwitchID) (models.Switch, error) {
		for _, s := range topo.Switches {
			if s.Name == id {
				return s, nil
			}
		}
		return models.Switch{}, errors.New("unknown switch")
	}
}

func newDriver(t *testing.T, f *fabricsim.Fabric, election uint64) *southbound.P4RT {
	t.Helper()
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: resolver(f.Topology()), ElectionID: election})
	t.Cleanup(d.Close)
	return d
}

// smallFabric is an emulated 2-leaf, 2-spine fabric of one host a leaf
// and a driver of election ID 1 for it.
func smallFabric(t *testing.T) (*fabricsim.Fabric, *southbound.P4RT) {
	t.Helper()
	topo, err := topology.LeafSpine(2, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	return f, newDriver(t, f, 1)
}

func sampleState() models.ForwardingState {
	seed := uint32(0xfeed)
	return models.ForwardingState{
		HashSeed: &seed,
		PortMACs: []models.PortMAC{{Port: 2, Src: models.MAC{2, 0, 0, 1, 0, 2}, Dst: models.MAC{6, 0, 10, 0, 1, 1}},
			{Port: 3, Src: models.MAC{2, 0, 0, 1, 0, 3}, Dst: models.MAC{2, 0, 0, 9, 0, 1}}},
		Punts:   []uint16{models.EtherTypeLLDP},
		Members: []models.Member{{ID: 2, Port: 2}, {ID: 3, Port: 3}},
		Groups:  []models.Group{{ID: 7, Members: []models.GroupMember{{MemberID: 2, Weight: 1}, {MemberID: 3, Weight: 3}}}},
		Routes: []models.Route{
			{Prefix: netip.MustParsePrefix("10.0.2.0/24"), GroupID: 7},
			{Prefix: netip.MustParsePrefix("10.0.1.1/32"), MemberID: 2},
		},
		FlowPins: []models.FlowPin{{Key: models.FlowKey{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 49152}, Port: 3}},
	}.Canonical()
}

// TestApplyThenReadBack writes a diff over real P4Runtime and checks that
// reading back gives exactly what was written (a probe: the members,
// punts and seed, or all but flow pins), and that the second
// reconcile computes an empty diff and sends no Write.
func TestApplyThenReadBack(t *testing.T) {
	f, d := smallFabric(t)
	ctx := context.Background()

	got, err := d.Read(ctx, "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh switch has nothing but its hash seed's default entry (0).
	if got.HashSeed == nil || *got.HashSeed != 0 || got.Len() != 1 {
		t.Fatalf("fresh switch has %d entries, seed %v", got.Len(), got.HashSeed)
	}
	want := sampleState()
	if err := d.Apply(ctx, "leaf1", models.Compute(want, got)); err != nil {
		t.Fatal(err)
	}
	got, err = d.Read(ctx, "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Fatalf("read back (-want +got):\n%s", diff)
	}
	// A probe reads the members, punts and seed; all of it, but flow pins.
	for _, all := range []bool{false, true} {
		probed, err := d.Probe(ctx, "leaf1", all)
		if err != nil {
			t.Fatal(err)
		}
		small := want
		small.FlowPins = nil
		if !all {
			small = models.ForwardingState{Members: want.Members, Punts: want.Punts, HashSeed: want.HashSeed}
		}
		if diff := cmp.Diff(small, probed, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("probe, all %v (-want +got):\n%s", all, diff)
		}
	}
	rpcs, _ := f.Switch("leaf1").WriteStats()
	if diff := models.Compute(want, got); !diff.Empty() {
		t.Fatalf("second reconcile wants %d writes", diff.Len())
	}
	if err := d.Apply(ctx, "leaf1", models.Compute(want, got)); err != nil {
		t.Fatal(err)
	}
	if again, _ := f.Switch("leaf1").WriteStats(); again != rpcs {
		t.Errorf("empty diff sent %d Write RPCs", again-rpcs)
	}

	// Remove everything: deletes must go routes first, then groups, then members.
	if err := d.Apply(ctx, "leaf1", models.Compute(models.ForwardingState{}, got)); err != nil {
		t.Fatal(err)
	}
	got, err = d.Read(ctx, "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != 1 { // the seed's default entry stays: it is only ever modified
		t.Errorf("after deleting everything, %d entries remain", got.Len())
	}
}

// TestSwitchRejectsBadWrites checks the per-update errors of a batch come
// back decoded.
func TestSwitchRejectsBadWrites(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	d := newDriver(t, f, 1)
	ctx := context.Background()
	// A route to a group that does not exist: INVALID_ARGUMENT, as PI on
	// BMv2 answers a reference to an unknown group.
	bad := models.Diff{Insert: models.ForwardingState{Routes: []models.Route{{Prefix: netip.MustParsePrefix("10.9.0.0/16"), GroupID: 99}}}}
	err = d.Apply(ctx, "leaf1", bad)
	var we *southbound.WriteError
	if !errors.As(err, &we) || len(we.Failed) != 1 || we.Failed[0].Code.String() != "InvalidArgument" {
		t.Fatalf("want one InvalidArgument update error, got %v", err)
	}
	// Inserting the same member twice: ALREADY_EXISTS.
	m := models.Diff{Insert: models.ForwardingState{Members: []models.Member{{ID: 1, Port: 1}}}}
	if err := d.Apply(ctx, "leaf1", m); err != nil {
		t.Fatal(err)
	}
	err = d.Apply(ctx, "leaf1", m)
	if !errors.As(err, &we) || we.Failed[0].Code.String() != "AlreadyExists" {
		t.Fatalf("want AlreadyExists, got %v", err)
	}
}

// TestHigherElectionIDFencesOutTheOldPrimary: a second controller with a
// higher election ID becomes primary; the first one's writes are refused
// with models.ErrNotPrimary.
func TestHigherElectionIDFencesOutTheOldPrimary(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	ctx := context.Background()
	old := newDriver(t, f, 5)
	if _, err := old.Read(ctx, "leaf1"); err != nil {
		t.Fatal(err)
	}
	m := models.Diff{Insert: models.ForwardingState{Members: []models.Member{{ID: 1, Port: 1}}}}
	if err := old.Apply(ctx, "leaf1", m); err != nil {
		t.Fatal(err)
	}
	newer := newDriver(t, f, 6)
	if _, err := newer.Read(ctx, "leaf1"); err != nil {
		t.Fatal(err)
	}
	m2 := models.Diff{Insert: models.ForwardingState{Members: []models.Member{{ID: 2, Port: 2}}}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = old.Apply(ctx, "leaf1", m2)
		if errors.Is(err, models.ErrNotPrimary) || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, models.ErrNotPrimary) {
		t.Fatalf("old primary's write: want models.ErrNotPrimary, got %v", err)
	}
	if err := newer.Apply(ctx, "leaf1", m2); err != nil {
		t.Fatalf("new primary's write: %v", err)
	}
	// A lower election ID cannot take over.
	lower := newDriver(t, f, 3)
	if _, err := lower.Read(ctx, "leaf1"); !errors.Is(err, models.ErrNotPrimary) {
		t.Fatalf("lower election id: want models.ErrNotPrimary, got %v", err)
	}
	// A driver told it does not lead connects to nothing.
	newer.SetElectionID(0)
	if _, err := newer.Read(ctx, "leaf1"); !errors.Is(err, models.ErrNotPrimary) {
		t.Fatalf("election ID 0: want models.ErrNotPrimary, got %v", err)
	}
}

// TestGNMIMasterArbitration: gNMI Set carries the election ID; once a
// higher one has written, a lower one is refused, and a replica that does
// not lead does not write at all.
func TestGNMIMasterArbitration(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	ctx := context.Background()
	cfg := func(id uint64) *southbound.GNMIConfig {
		g := &southbound.GNMIConfig{Resolve: resolver(f.Topology())}
		t.Cleanup(g.Close)
		g.SetElectionID(id)
		return g
	}
	port := map[uint32]models.InterfaceConfig{1: {Enabled: true, MTU: 4200, Description: "to h1"}}
	if err := cfg(6).SetConfig(ctx, "leaf1", port); err != nil {
		t.Fatalf("set with election ID 6: %v", err)
	}
	if err := cfg(5).SetConfig(ctx, "leaf1", port); !errors.Is(err, models.ErrNotPrimary) {
		t.Fatalf("set with a lower election ID: want models.ErrNotPrimary, got %v", err)
	}
	if err := cfg(0).SetConfig(ctx, "leaf1", port); !errors.Is(err, models.ErrNotPrimary) {
		t.Fatalf("set while not leading: want models.ErrNotPrimary, got %v", err)
	}
	if err := cfg(7).SetConfig(ctx, "leaf1", port); err != nil {
		t.Fatalf("set with a higher election ID: %v", err)
	}
}

// TestDownSwitchIsNoDisconnect: a switch's established stream that ends
// is a disconnect (the controller resyncs the switch); a switch that is
// down, refusing every connection, is not one again at each attempt to
// reach it: those attempts fail to their callers, who back off. (Each
// was reported, and each report made the controller try again at once.)
func TestDownSwitchIsNoDisconnect(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	var disconnects atomic.Int32
	ended := make(chan struct{}, 16)
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: resolver(f.Topology()), ElectionID: 5,
		OnDisconnect: func(models.SwitchID) {
			disconnects.Add(1)
			select {
			case ended <- struct{}{}:
			default:
			}
		}})
	ctx := context.Background()
	if _, err := d.Read(ctx, "leaf1"); err != nil {
		t.Fatal(err)
	}
	if err := f.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultSwitchDown, Target: "leaf1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second): // a backstop: the stream ends at once
		t.Fatal("the stream of a switch that went down was not reported ended")
	}
	for range 5 {
		if _, err := d.Read(ctx, "leaf1"); err == nil {
			t.Fatal("read a switch that is down")
		}
	}
	d.Close() // waits for every stream's goroutine
	if n := disconnects.Load(); n != 1 {
		t.Errorf("%d disconnects reported, want 1: the attempts to reach the switch while down count as disconnects", n)
	}
}

// TestDialWaitsForItsOwnStaleStream: a switch still holding a stream of
// this driver's election ID (its connection cut, not yet seen gone)
// refuses the new arbitration; the driver asks again shortly and gets
// through once the old stream is gone, instead of failing the call.
func TestDialWaitsForItsOwnStaleStream(t *testing.T) {
	topo, err := topology.LeafSpine(1, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabric(t, topo)
	old := newDriver(t, f, 7)
	ctx := context.Background()
	if _, err := old.Read(ctx, "leaf1"); err != nil {
		t.Fatal(err)
	}
	// The old stream goes a moment after the new driver first asks.
	gone := time.AfterFunc(60*time.Millisecond, old.Close)
	defer gone.Stop()
	fresh := newDriver(t, f, 7)
	if _, err := fresh.Read(ctx, "leaf1"); err != nil {
		t.Fatalf("with its own old stream going away: %v", err)
	}
}

// TestPinCountersOfAPinNotThere: a switch answers a read of a direct
// counter named by an entry it does not have with an error for the whole
// read (as PI does); ReadPinCounters still returns the counters of the
// pins the switch has, and leaves out the one it does not.
func TestPinCountersOfAPinNotThere(t *testing.T) {
	_, d := smallFabric(t)
	ctx := context.Background()
	have, err := d.Read(ctx, "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	want := sampleState()
	if err := d.Apply(ctx, "leaf1", models.Compute(want, have)); err != nil {
		t.Fatal(err)
	}
	there := want.FlowPins[0].Key
	missing := there
	missing.SrcPort++
	got, err := d.ReadPinCounters(ctx, "leaf1", []models.FlowKey{there, missing})
	if err != nil {
		t.Fatalf("read the counters of a pin there and one not: %v", err)
	}
	if _, ok := got[there]; !ok || len(got) != 1 {
		t.Errorf("read %v, want the counter of %s alone", got, there)
	}
}
