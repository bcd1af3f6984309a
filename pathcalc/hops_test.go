package pathcalc

import (
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestHopsMatchDistances: the indexed search gives every switch the
// distance the map-based one does, on a fat-tree with links down.
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
		}
	}
	if _, ok := (Dist{}).Of("core1"); ok {
		t.Error("an empty Dist reaches something")
	}
}
