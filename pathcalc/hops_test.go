package pathcalc

import (
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestHopsMatchDistances: the search gives every switch its hop distance
// over the working links of a fat-tree with links down — the destination
// 0, every other reachable switch one more than its nearest working
// neighbour, an unreachable one no reachable working neighbour — and
// Distances, the same as a map.
func TestHopsMatchDistances(t *testing.T) {
	topo, err := topology.FatTree(8, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := topology.New(topo)
	down := map[models.LinkID]bool{}
	for i, l := range snap.FabricLinks() {
		if i%7 == 0 {
			down[l.ID()] = true
		}
	}
	h := NewHops(snap, down)
	for _, dst := range snap.Switches() {
		want := Distances(snap, dst.Name, down)
		got := h.To(dst.Name)
		for _, sw := range snap.Switches() {
			d, ok := got.Of(sw.Name)
			w, wok := want[sw.Name]
			if ok != wok || d != w {
				t.Fatalf("%s → %s: %d (%v), want %d (%v)", sw.Name, dst.Name, d, ok, w, wok)
			}
			nearest, reached := -1, false
			snap.EachNeighbor(sw.Name, func(a topology.Adjacency) {
				if pd, pok := got.Of(a.Peer); pok && !down[a.Link] && (!reached || pd < nearest) {
					nearest, reached = pd, true
				}
			})
			switch {
			case sw.Name == dst.Name:
				if !ok || d != 0 {
					t.Fatalf("%s → itself: %d (%v), want 0", sw.Name, d, ok)
				}
			case ok && (!reached || d != nearest+1):
				t.Fatalf("%s → %s: %d, but its nearest working neighbour is at %d (%v)", sw.Name, dst.Name, d, nearest, reached)
			case !ok && reached:
				t.Fatalf("%s → %s: unreachable, but a working neighbour is at %d", sw.Name, dst.Name, nearest)
			}
		}
	}
	if _, ok := (Dist{}).Of("core1"); ok {
		t.Error("an empty Dist reaches something")
	}
}
