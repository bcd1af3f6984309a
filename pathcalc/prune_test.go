package pathcalc

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestPrune: for every fabric link of a k=4 fat-tree failing, the pruned
// plan only uses next hops the full plan had, and from every leaf, every
// prefix the old plan's routes can still deliver is delivered along the
// pruned routes without touching the failed link (checked by following
// every branch).
func TestPrune(t *testing.T) {
	snap := topotest.FatTree(t, 4)
	res, err := Compute(context.Background(), snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	nextHops := func(st models.ForwardingState, r models.Route) []uint32 {
		if r.MemberID != 0 {
			return []uint32{r.MemberID}
		}
		for _, g := range st.Groups {
			if g.ID == r.GroupID {
				var out []uint32
				for _, m := range g.Members {
					out = append(out, m.MemberID)
				}
				return out
			}
		}
		t.Fatalf("route %v: no group", r)
		return nil
	}
	routeTo := func(st models.ForwardingState, leaf models.Switch) (models.Route, bool) {
		for _, r := range st.Routes {
			if r.Prefix == leaf.Prefix {
				return r, true
			}
		}
		return models.Route{}, false
	}
	pruned, saved := 0, 0
	for _, l := range snap.FabricLinks() {
		down := map[models.LinkID]bool{l.ID(): true}
		p := Prune(snap, res.Plan, down)
		for sw, st := range p.Switches {
			if err := st.Validate(); err != nil {
				t.Fatalf("%s down: pruned state of %s: %v", l.ID(), sw, err)
			}
			old := res.Plan.Switches[sw]
			for _, r := range st.Routes {
				or, _ := routeTo(old, models.Switch{Prefix: r.Prefix})
				oldSet := map[uint32]bool{}
				for _, port := range nextHops(old, or) {
					oldSet[port] = true
				}
				for _, port := range nextHops(st, r) {
					if !oldSet[port] {
						t.Fatalf("%s down: %s routes %s over port %d, which the plan did not", l.ID(), sw, r.Prefix, port)
					}
				}
				if len(nextHops(st, r)) < len(nextHops(old, or)) {
					pruned++
				}
			}
		}
		// Follow every branch from every leaf to every other leaf.
		peer := func(sw models.SwitchID, port uint32) (models.SwitchID, models.LinkID, bool) {
			for _, a := range snap.Neighbors(sw) {
				if a.LocalPort == port {
					return a.Peer, a.Link, true
				}
			}
			return "", "", false
		}
		for _, src := range snap.Switches() {
			for _, dst := range snap.Switches() {
				if src.Role != models.RoleLeaf || dst.Role != models.RoleLeaf || src.Name == dst.Name || !dst.Prefix.IsValid() {
					continue
				}
				// Can the old plan's routes still deliver from src at all?
				var walk func(plan models.Plan, sw models.SwitchID, depth int, all bool) bool
				walk = func(plan models.Plan, sw models.SwitchID, depth int, all bool) bool {
					if sw == dst.Name {
						return true
					}
					if depth > 8 {
						t.Fatalf("%s down: a loop from %s to %s", l.ID(), src.Name, dst.Name)
					}
					r, ok := routeTo(plan.Switches[sw], dst)
					if !ok {
						return false
					}
					any := false
					for _, port := range nextHops(plan.Switches[sw], r) {
						nb, link, ok := peer(sw, port)
						okHop := ok && !down[link] && walk(plan, nb, depth+1, all)
						if all && !okHop {
							return false
						}
						any = any || okHop
					}
					return any
				}
				if walk(res.Plan, src.Name, 0, false) {
					if !walk(p, src.Name, 0, true) {
						t.Errorf("%s down: the plan can still deliver %s→%s, but not every pruned branch does", l.ID(), src.Name, dst.Name)
					}
					saved++
				}
			}
		}
	}
	if pruned == 0 || saved == 0 {
		t.Fatalf("pruned %d routes, checked %d deliveries: the test saw nothing", pruned, saved)
	}
}

// TestPruneKeepsAllButRoutes: a pruned switch keeps every entry of the
// plan but its routes, groups and members — its port MAC rewrites, hash
// seed and punts — or the pruning stage would delete them from the switch
// until the new plan put them back; and it keeps the members its routes
// and groups still use.
func TestPruneKeepsAllButRoutes(t *testing.T) {
	snap := topotest.FatTree(t, 4)
	res, err := Compute(context.Background(), snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	touched := 0
	for _, l := range snap.FabricLinks() {
		p := Prune(snap, res.Plan, map[models.LinkID]bool{l.ID(): true})
		for sw, st := range p.Switches {
			old := res.Plan.Switches[sw]
			if st.Equal(old) {
				continue
			}
			touched++
			rest := func(s models.ForwardingState) models.ForwardingState {
				s.Routes, s.Groups, s.Members = nil, nil, nil
				return s
			}
			if !rest(st).Equal(rest(old)) {
				t.Fatalf("%s down: %s pruned to %+v, was %+v outside its routes, groups and members", l.ID(), sw, rest(st), rest(old))
			}
			if err := st.Validate(); err != nil { // a member for every port routed over
				t.Fatalf("%s down: %s pruned: %v", l.ID(), sw, err)
			}
		}
	}
	if touched == 0 {
		t.Fatal("no switch was pruned")
	}
}

// TestPrunedGroupsNamedAsThePlanNamesThem: a switch whose pruned routes
// are the routes the new plan gives it (next hops and weights, toward
// every prefix) has the new plan's state: its pruned groups carry the IDs
// the plan gives them, so the rollout does not write it a second time to
// rename them. Every fabric link of a k=8 fat-tree fails in turn.
func TestPrunedGroupsNamedAsThePlanNamesThem(t *testing.T) {
	snap := topotest.FatTree(t, 8)
	ctx := context.Background()
	res, err := Compute(ctx, snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	// hops is a route's next hops and weights, by prefix.
	hops := func(st models.ForwardingState) map[netip.Prefix]string {
		groups := map[uint32]models.Group{}
		for _, g := range st.Groups {
			groups[g.ID] = g
		}
		out := map[netip.Prefix]string{}
		for _, r := range st.Routes {
			if r.GroupID == 0 {
				out[r.Prefix] = fmt.Sprint(r.MemberID)
			} else {
				out[r.Prefix] = fmt.Sprint(groups[r.GroupID].Members)
			}
		}
		return out
	}
	kept, prunedAlike := 0, 0
	for _, l := range snap.FabricLinks() {
		down := map[models.LinkID]bool{l.ID(): true}
		p := Prune(snap, res.Plan, down)
		next, err := Recompute(ctx, res, snap, Request{DownLinks: down})
		if err != nil {
			t.Fatal(err)
		}
		for sw, st := range p.Switches {
			if st.Equal(res.Plan.Switches[sw]) || !maps.Equal(hops(st), hops(next.Plan.Switches[sw])) {
				continue
			}
			prunedAlike++
			if !st.Equal(next.Plan.Switches[sw]) {
				t.Fatalf("%s down: %s is pruned to the new plan's routes, but as\n%+v\nnot as the plan's\n%+v", l.ID(), sw, st.Groups, next.Plan.Switches[sw].Groups)
			}
			kept++
		}
	}
	if prunedAlike == 0 {
		t.Fatal("no pruned switch had the new plan's routes: the test saw nothing")
	}
	t.Logf("%d pruned switches have the new plan's routes and state", kept)
}

// TestPruneTakesStatesInAnyOrder: a plan's states are canonical and
// Prune searches them; a plan whose routes and groups are in another
// order is pruned the same (found by scanning).
func TestPruneTakesStatesInAnyOrder(t *testing.T) {
	snap := topotest.FatTree(t, 4)
	res, err := Compute(context.Background(), snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	shuffled := models.Plan{Switches: map[models.SwitchID]models.ForwardingState{}}
	for sw, st := range res.Plan.Switches {
		st.Routes, st.Groups = slices.Clone(st.Routes), slices.Clone(st.Groups)
		slices.Reverse(st.Routes)
		slices.Reverse(st.Groups)
		shuffled.Switches[sw] = st
	}
	for _, l := range snap.FabricLinks() {
		down := map[models.LinkID]bool{l.ID(): true}
		want, got := Prune(snap, res.Plan, down), Prune(snap, shuffled, down)
		for sw, st := range want.Switches {
			if !got.Switches[sw].Canonical().Equal(st) {
				t.Fatalf("%s down: %s pruned from reversed routes and groups differs from the canonical plan's", l.ID(), sw)
			}
		}
	}
}

// TestPruneRewritesCanonicalStatesAsAnyOther: Prune rewrites a switch
// whose state is canonical (a plan's) without sorting it again; what it
// makes is exactly what its rewrite of the same state in another order
// makes (which sorts it), for a spine's, a leaf link's and a core link's
// failure on a k=8 fat-tree.
func TestPruneRewritesCanonicalStatesAsAnyOther(t *testing.T) {
	snap, base := fatTreePlan(t, 8)
	reversed := models.Plan{Switches: map[models.SwitchID]models.ForwardingState{}}
	for sw, st := range base.Plan.Switches {
		st.Routes = slices.Clone(st.Routes)
		slices.Reverse(st.Routes)
		reversed.Switches[sw] = st
	}
	spine := map[models.LinkID]bool{}
	for _, a := range snap.Neighbors("p2-spine1") {
		spine[a.Link] = true
	}
	leafLink, coreLink := map[models.LinkID]bool{}, map[models.LinkID]bool{}
	for _, l := range snap.FabricLinks() {
		if strings.HasPrefix(string(l.A.Switch), "core") || strings.HasPrefix(string(l.B.Switch), "core") {
			coreLink = map[models.LinkID]bool{l.ID(): true}
		} else {
			leafLink = map[models.LinkID]bool{l.ID(): true}
		}
	}
	for name, down := range map[string]map[models.LinkID]bool{"spine": spine, "leaf link": leafLink, "core link": coreLink} {
		fast, general := Prune(snap, base.Plan, down), Prune(snap, reversed, down)
		rewritten := 0
		for sw, st := range fast.Switches {
			if st.Equal(base.Plan.Switches[sw]) {
				continue
			}
			rewritten++
			if !reflect.DeepEqual(st, general.Switches[sw]) {
				t.Fatalf("%s: %s rewritten from its canonical state differs from its rewrite from reversed routes", name, sw)
			}
		}
		if rewritten == 0 {
			t.Fatalf("%s: nothing rewritten", name)
		}
	}
}
