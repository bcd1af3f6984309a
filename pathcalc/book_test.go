package pathcalc

import (
	"context"
	"math"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// bookOn is a ledger for a leaf-spine with the given fabric links down.
func bookOn(t *testing.T, spines, leaves, hosts int, down func(models.Link) bool) (*Book, *topology.Snapshot) {
	t.Helper()
	topo, err := topology.LeafSpine(spines, leaves, hosts, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	off := map[models.LinkID]bool{}
	for _, l := range snap.FabricLinks() {
		if down != nil && down(l) {
			off[l.ID()] = true
		}
	}
	b, err := NewBook(snap, off, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	return b, snap
}

// TestQPHint: three 60 Gb/s connections from leaf1 to leaf2 with one of
// leaf1's three uplinks down do not fit whole (two would share a 95 Gb/s
// link); split over 2 QPs each, six 30 Gb/s flows fit three to a link.
func TestQPHint(t *testing.T) {
	b, snap := bookOn(t, 3, 2, 3, func(l models.Link) bool {
		return l.A.Switch == "leaf1" && l.B.Switch == "spine1" || l.B.Switch == "leaf1" && l.A.Switch == "spine1"
	})
	hosts := snap.Hosts()
	var conns []Demand
	for i := range 3 {
		conns = append(conns, Demand{Src: hosts[i], Dst: hosts[3+i], Gbps: 60})
	}
	h := b.QPHint(context.Background(), conns, 1, 4096)
	if h.DeclaredFits || !h.Fits || h.QPs != 2 || !h.Better() || math.Abs(h.MLU-0.9) > 1e-9 {
		t.Fatalf("hint %+v: want 2 QPs per connection to fit at 0.90 where 1 does not", h)
	}
	if got := h.String(); got != "with 2 QPs per connection (source ports) it would fit, max reserved utilization 0.90" {
		t.Errorf("hint says %q", got)
	}
	// With every uplink working, one QP per connection is as good as any.
	b, _ = bookOn(t, 3, 2, 3, nil)
	if h := b.QPHint(context.Background(), conns, 1, 4096); h.Better() || !h.DeclaredFits || h.QPs != 1 {
		t.Errorf("hint %+v on a healthy fabric: want the declared 1 QP", h)
	}
}

// TestBookCheck: the ledger's invariant holds after reservations that
// fit and reports a resource reserved beyond capacity less headroom.
func TestBookCheck(t *testing.T) {
	b, snap := bookOn(t, 2, 2, 2, nil)
	hosts := snap.Hosts()
	f := b.Fit([]Demand{{Src: hosts[0], Dst: hosts[2], Gbps: 90}}, PathConstraints{})
	if !f.Fits {
		t.Fatal(f.Reason)
	}
	_ = b.Reserve(hosts[0], f.Paths[0], 90)
	if err := b.Check(); err != nil {
		t.Fatalf("a fitted reservation: %v", err)
	}
	_ = b.Reserve(hosts[0], f.Paths[0], 10) // 100 > 95 on the NIC and the path
	if err := b.Check(); err == nil {
		t.Fatal("100 Gb/s reserved against a 95 Gb/s cap passed the check")
	}
}

// TestPlaceBestLeavesALocalOptimum: two line-rate flows from leaf1 to
// leaf2 share spine1 (each gets half). PlaceBest, given that as the
// previous placement, reaches full throughput; placing again with its
// own result as previous moves nothing (the loop settles).
func TestPlaceBestLeavesALocalOptimum(t *testing.T) {
	b, snap := bookOn(t, 2, 2, 2, nil)
	hosts := snap.Hosts()
	flows := []Demand{{Src: hosts[0], Dst: hosts[2], Gbps: 100}, {Src: hosts[1], Dst: hosts[3], Gbps: 100}}
	spine1 := b.Candidates(hosts[0], hosts[2], PathConstraints{})[0]
	spine1b := b.Candidates(hosts[1], hosts[3], PathConstraints{})[0]
	if b.Throughput(flows, [][]models.Endpoint{spine1, spine1b}) > 0.51 {
		t.Fatal("both flows on spine1 should share it")
	}
	p, err := b.PlaceBest(context.Background(), flows, [][]models.Endpoint{spine1, spine1b})
	if err != nil {
		t.Fatal(err)
	}
	if p.Throughput < 0.999 || p.OneShot < 0.999 {
		t.Fatalf("placed %+v: want full throughput", p)
	}
	again, err := b.PlaceBest(context.Background(), flows, p.Paths)
	if err != nil {
		t.Fatal(err)
	}
	if again.Fresh || !equalPaths(again.Paths, p.Paths) {
		t.Errorf("placing again moved flows: %v -> %v", p.Paths, again.Paths)
	}
}

func equalPaths(a, b [][]models.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// TestPlaceJointMovesStackedReservations: two 40 Gb/s reservations from
// leaf1 to leaf2 both sit on spine1; two line-rate best-effort flows
// between the other hosts then get at most 60 Gb/s on one spine. Placed
// together, each reservation takes one spine beside one flow: the
// flows' predicted throughput rises, and every reservation still fits.
func TestPlaceJointMovesStackedReservations(t *testing.T) {
	b, snap := bookOn(t, 2, 2, 4, nil)
	hosts := snap.Hosts() // leaf1: 0-3, leaf2: 4-7
	var movable []Reserved
	for i := range 2 {
		path := b.Candidates(hosts[i], hosts[4+i], PathConstraints{})[0] // spine1
		if err := b.Reserve(hosts[i], path, 40); err != nil {
			t.Fatal(err)
		}
		movable = append(movable, Reserved{Demand: Demand{Src: hosts[i], Dst: hosts[4+i], Gbps: 40}, Path: path})
	}
	flows := []Demand{{Src: hosts[2], Dst: hosts[6], Gbps: 100}, {Src: hosts[3], Dst: hosts[7], Gbps: 100}}
	alone, err := b.PlaceBest(context.Background(), flows, nil)
	if err != nil {
		t.Fatal(err)
	}
	joint, ok, err := b.PlaceJoint(context.Background(), movable, flows)
	if err != nil || !ok {
		t.Fatalf("joint placement: ok %v, %v", ok, err)
	}
	if joint.Throughput < alone.Throughput+0.05 {
		t.Fatalf("joint %.3f, elephants alone %.3f: moving the reservations should pay", joint.Throughput, alone.Throughput)
	}
	if joint.Reserved[0][0] == joint.Reserved[1][0] {
		t.Errorf("the reservations still share an uplink: %v", joint.Reserved)
	}
	if err := b.Check(); err != nil { // PlaceJoint changes nothing
		t.Fatal(err)
	}
}
