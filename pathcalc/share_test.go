package pathcalc

import (
	"context"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestEqualRouteListsShared: switches that route alike hold one list (a
// k=8 fat-tree's 16 core switches one, each pod's aggregation switches
// one, every leaf its own), before and after a link fails; the plan's
// routes are what each switch's own computation gives.
func TestEqualRouteListsShared(t *testing.T) {
	topo, _ := topology.FatTree(8, 100)
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	distinct := func(p models.Plan) (lists int) {
		seen := map[*models.Route]bool{}
		for _, st := range p.Switches {
			if !seen[&st.Routes[0]] {
				seen[&st.Routes[0]] = true
				lists++
			}
		}
		var all [][]models.Route
		for _, st := range p.Switches {
			all = append(all, st.Routes)
		}
		for i, a := range all {
			for _, b := range all[i+1:] {
				if slices.Equal(a, b) && &a[0] != &b[0] {
					t.Errorf("two equal route lists not shared (%d routes)", len(a))
					return lists
				}
			}
		}
		return lists
	}
	res, err := Compute(context.Background(), snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	// 1 list for the cores, 8 for the pods' aggregation switches, 32 leaves.
	if lists := distinct(res.Plan); lists != 1+8+32 {
		t.Fatalf("%d route lists for %d switches, want 41", lists, len(res.Plan.Switches))
	}
	var core models.Link
	for _, l := range snap.Links() {
		if a, _ := snap.Switch(l.A.Switch); a.Role == models.RoleSpine {
			if b, _ := snap.Switch(l.B.Switch); b.Role == models.RoleCore {
				core = l
				break
			}
		}
	}
	if core.A.Switch == "" {
		t.Fatal("no aggregation–core link found")
	}
	req := Request{DownLinks: map[models.LinkID]bool{core.ID(): true}}
	next, err := Recompute(context.Background(), res, snap, req)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Compute(context.Background(), snap, req)
	if err != nil {
		t.Fatal(err)
	}
	for sw, st := range fresh.Plan.Switches {
		if !slices.Equal(next.Plan.Switches[sw].Routes, st.Routes) {
			t.Errorf("%s: recomputed routes differ from computed ones", sw)
		}
	}
	if lists := distinct(fresh.Plan); lists <= 41 {
		t.Errorf("%d route lists with a core link down: the switches routing around it should have lists of their own", lists)
	}
	distinct(next.Plan)
}
