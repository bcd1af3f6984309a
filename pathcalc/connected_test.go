package pathcalc

import (
	"context"
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

// TestPlaceBestOutOfTimeKeepsTheFreshPlacement: when the search around
// the previous paths runs out of time, the placement from scratch (an
// edge colouring, which needs no search) is the answer, not an error.
func TestPlaceBestOutOfTimeKeepsTheFreshPlacement(t *testing.T) {
	snap := topotest.LeafSpine(t, 4, 4, 4)
	b, err := NewBook(snap, nil, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	hosts := snap.Hosts()
	var flows []Demand
	for i, h := range hosts {
		dst := hosts[(i+4)%len(hosts)] // the next leaf's host of the same rank
		flows = append(flows, Demand{Src: h, Dst: dst, Gbps: h.NICGbps})
	}
	fresh, err := b.PlaceBest(t.Context(), flows, nil)
	if err != nil || !fresh.Fresh {
		t.Fatalf("from scratch: %v (fresh %v)", err, fresh.Fresh)
	}
	previous := make([][]models.Endpoint, len(flows))
	previous[0] = fresh.Paths[0]
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // out of time before the search begins
	got, err := b.PlaceBest(ctx, flows, previous)
	if err != nil {
		t.Fatalf("out of time: %v, want the placement from scratch", err)
	}
	if !got.Fresh || len(got.Paths) != len(flows) || got.Throughput != fresh.Throughput {
		t.Errorf("out of time: fresh %v, %d paths, throughput %v; want the placement from scratch (%v)", got.Fresh, len(got.Paths), got.Throughput, fresh.Throughput)
	}
}
