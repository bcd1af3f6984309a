package pathcalc

import (
	"context"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestConnectedIsCandidatesNotEmpty: Connected says a pair has a path
// exactly when Candidates without constraints lists one: hosts of one
// leaf, of two leaves joined by spines, and of a leaf whose every uplink
// is down.
func TestConnectedIsCandidatesNotEmpty(t *testing.T) {
	snap := topotest.LeafSpine(t, 2, 3, 2)
	var cut *models.Switch
	down := map[models.LinkID]bool{}
	for _, sw := range snap.Switches() {
		if sw.Role == models.RoleLeaf {
			cut = &sw
			for _, a := range snap.Neighbors(sw.Name) {
				down[a.Link] = true
			}
			break
		}
	}
	b, err := NewBook(snap, down, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	cutOff := 0
	for _, src := range snap.Hosts() {
		for _, dst := range snap.Hosts() {
			if src.Name == dst.Name {
				continue
			}
			want := len(b.Candidates(src, dst, PathConstraints{})) > 0
			if got := b.Connected(src, dst); got != want {
				t.Errorf("%s → %s: connected %v, candidates say %v", src.Name, dst.Name, got, want)
			}
			if !want {
				cutOff++
			}
		}
	}
	if cutOff == 0 {
		t.Fatalf("no pair is cut off, though %s lost every uplink", cut.Name)
	}
}

// TestPlaceBestOutOfTimeKeepsThePreviousPaths: on a k=8 fat-tree with a
// leaf's uplink down (a colouring leaves a peak, and placing from scratch
// is a search), with flows placed before and
// flows new since, and no time left, PlaceBest answers with every
// previous path kept and the new flows placed on their own paths, not
// from scratch and not an error. With time, the same call also finishes
// the placement from scratch (OneShot).
func TestPlaceBestOutOfTimeKeepsThePreviousPaths(t *testing.T) {
	snap := topotest.FatTree(t, 8)
	down := map[models.LinkID]bool{}
	for _, sw := range snap.Switches() {
		if sw.Role == models.RoleLeaf {
			down[snap.Neighbors(sw.Name)[0].Link] = true // a peak colouring cannot lower to the hosts' own
			break
		}
	}
	b, err := NewBook(snap, down, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	hosts := snap.Hosts()
	var flows []Demand
	for i, h := range hosts {
		flows = append(flows, Demand{Src: h, Dst: hosts[(i+37)%len(hosts)], Gbps: h.NICGbps})
	}
	old := len(flows) * 3 / 4
	first, err := b.PlaceBest(t.Context(), flows[:old], nil)
	if err != nil || !first.Fresh {
		t.Fatalf("from scratch: %v (fresh %v)", err, first.Fresh)
	}
	previous := make([][]models.Endpoint, len(flows))
	copy(previous, first.Paths)

	withTime, err := b.PlaceBest(t.Context(), flows, previous)
	if err != nil || withTime.OneShot <= 0 {
		t.Fatalf("with time: %v, one-shot %v; want the placement from scratch finished too", err, withTime.OneShot)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // out of time before either search begins
	got, err := b.PlaceBest(ctx, flows, previous)
	if err != nil {
		t.Fatalf("out of time: %v, want the previous paths and the new flows placed", err)
	}
	if got.Fresh || got.OneShot != 0 || len(got.Paths) != len(flows) {
		t.Fatalf("out of time: fresh %v, one-shot %v, %d paths; want the incremental placement of all %d flows", got.Fresh, got.OneShot, len(got.Paths), len(flows))
	}
	if !equalPaths(got.Paths[:old], previous[:old]) {
		t.Error("out of time: flows placed before moved")
	}
	for i, p := range got.Paths[old:] {
		f := flows[old+i]
		if !slices.ContainsFunc(b.Candidates(f.Src, f.Dst, PathConstraints{}), func(c []models.Endpoint) bool { return slices.Equal(c, p) }) {
			t.Errorf("new flow %s → %s: path %v is not one of its candidates", f.Src.Name, f.Dst.Name, p)
		}
	}
	if got.Throughput <= 0 {
		t.Errorf("out of time: predicted throughput %v", got.Throughput)
	}
}
