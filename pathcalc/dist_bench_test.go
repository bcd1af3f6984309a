package pathcalc

import (
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkDistancesK16 is what a rollout's preparation spends on
// distances at k=16: the switches numbered once (NewHops), one BFS per
// leaf (128) with a link down.
//
//	go test ./pathcalc -run '^$' -bench DistancesK16 -benchtime 20x
func BenchmarkDistancesK16(b *testing.B) {
	topo, _ := topology.FatTree(16, 100)
	snap, _ := topology.New(topo)
	down := map[models.LinkID]bool{snap.Links()[500].ID(): true}
	for b.Loop() {
		h := NewHops(snap, down)
		for _, sw := range snap.Switches() {
			if sw.Role == models.RoleLeaf {
				h.To(sw.Name)
			}
		}
	}
}
