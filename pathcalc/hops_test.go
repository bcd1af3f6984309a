package pathcalc

import (
	"context"
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

// TestPlanDistancesAreSearched: a plan's distances (Result.Distances)
// are the hop distances a search over the links but down finds, for a
// plan computed, recomputed after a switch fails, and pruned (the plan it
// was pruned from's); none are given for another set of links down.
func TestPlanDistancesAreSearched(t *testing.T) {
	snap, base := fatTreePlan(t, 8)
	ctx := context.Background()
	down := map[models.LinkID]bool{}
	snap.EachNeighbor("p3-spine2", func(a topology.Adjacency) { down[a.Link] = true })
	failed, err := Recompute(ctx, base, snap, Request{DownLinks: down})
	if err != nil {
		t.Fatal(err)
	}
	pruned := PruneResult(snap, base, down)
	for _, c := range []struct {
		name string
		res  Result
		down map[models.LinkID]bool
	}{{"computed", base, nil}, {"recomputed", failed, down}, {"pruned", pruned, nil}} {
		hops := NewHops(snap, c.down)
		leaves := 0
		for _, sw := range snap.Switches() {
			got, ok := c.res.Distances(sw.Name, c.down)
			if sw.Role != models.RoleLeaf {
				if ok {
					t.Errorf("%s: distances toward %s, not a destination", c.name, sw.Name)
				}
				continue
			}
			if !ok {
				t.Fatalf("%s: no distances toward %s", c.name, sw.Name)
			}
			leaves++
			want := hops.To(sw.Name)
			for _, s := range snap.Switches() {
				a, okA := got.Of(s.Name)
				b, okB := want.Of(s.Name)
				if a != b || okA != okB {
					t.Fatalf("%s: %s toward %s: %d (%v), searched %d (%v)", c.name, s.Name, sw.Name, a, okA, b, okB)
				}
			}
		}
		if leaves == 0 {
			t.Fatalf("%s: no leaf", c.name)
		}
		other := map[models.LinkID]bool{snap.FabricLinks()[0].ID(): true}
		if _, ok := c.res.Distances("p1-leaf1", other); ok {
			t.Errorf("%s: distances for links down it was not made around", c.name)
		}
	}
	if _, ok := (Result{Plan: pruned.Plan}).Distances("p1-leaf1", nil); ok {
		t.Error("distances from a plan without its working")
	}
}
