package pathcalc

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/topology/topotest"
)

// fluidLoad spreads one unit from every leaf to every other leaf over the
// plan's groups in proportion to their weights and returns the load on
// each link direction (by egress endpoint).
func fluidLoad(t *testing.T, snap *topology.Snapshot, plan models.Plan) map[models.Endpoint]float64 {
	t.Helper()
	load := map[models.Endpoint]float64{}
	var leaves []models.Switch
	for _, sw := range snap.Switches() {
		if sw.Role == models.RoleLeaf && sw.Prefix.IsValid() {
			leaves = append(leaves, sw)
		}
	}
	var send func(at models.SwitchID, dst models.Switch, amount float64, depth int)
	send = func(at models.SwitchID, dst models.Switch, amount float64, depth int) {
		if at == dst.Name || depth > 8 {
			return
		}
		st := plan.Switches[at]
		var route *models.Route
		for i, r := range st.Routes {
			if r.Prefix == dst.Prefix {
				route = &st.Routes[i]
			}
		}
		if route == nil {
			t.Fatalf("%s has no route to %s", at, dst.Prefix)
		}
		members := []models.GroupMember{{MemberID: route.MemberID, Weight: 1}}
		for _, g := range st.Groups {
			if route.GroupID != 0 && g.ID == route.GroupID {
				members = g.Members
			}
		}
		total := 0.0
		for _, m := range members {
			total += float64(m.Weight)
		}
		for _, m := range members {
			e := models.Endpoint{Switch: at, Port: m.MemberID}
			part := amount * float64(m.Weight) / total
			load[e] += part
			l, _ := snap.LinkAt(e)
			next := l.B.Switch
			if l.B == e {
				next = l.A.Switch
			}
			send(next, dst, part, depth+1)
		}
	}
	for _, a := range leaves {
		for _, b := range leaves {
			if a.Name != b.Name {
				send(a.Name, b, 1, 0)
			}
		}
	}
	return load
}

func maxLoad(m map[models.Endpoint]float64) float64 {
	out := 0.0
	for _, v := range m {
		out = math.Max(out, v)
	}
	return out
}

// TestWCMPAfterAFailure: with one aggregation–core link down in a k=4
// fat-tree, equal weights overload the surviving core path into that pod;
// WCMP weights (1:2 at the other pods' edges) spread it evenly.
func TestWCMPAfterAFailure(t *testing.T) {
	snap := topotest.FatTree(t, 4)
	failed := coreLink(t, snap, "").ID()
	ctx := context.Background()
	sym, err := Compute(ctx, snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	for sw, st := range sym.Plan.Switches {
		for _, g := range st.Groups {
			for _, m := range g.Members {
				if m.Weight != 1 {
					t.Fatalf("symmetric fabric: %s group %d has weight %d", sw, g.ID, m.Weight)
				}
			}
		}
	}
	down := map[models.LinkID]bool{failed: true}
	wcmp, err := Compute(ctx, snap, Request{DownLinks: down})
	if err != nil {
		t.Fatal(err)
	}
	skewed := 0
	equal := Result{Plan: models.Plan{Switches: map[models.SwitchID]models.ForwardingState{}}}
	for sw, st := range wcmp.Plan.Switches {
		flat := st
		flat.Groups = nil
		for _, g := range st.Groups {
			fg := models.Group{ID: g.ID}
			for _, m := range g.Members {
				if m.Weight != g.Members[0].Weight {
					skewed++
				}
				fg.Members = append(fg.Members, models.GroupMember{MemberID: m.MemberID, Weight: 1})
			}
			flat.Groups = append(flat.Groups, fg)
		}
		equal.Plan.Switches[sw] = flat
	}
	if skewed == 0 {
		t.Fatalf("no group has unequal weights after %s failed", failed)
	}
	w, e := maxLoad(fluidLoad(t, snap, wcmp.Plan)), maxLoad(fluidLoad(t, snap, equal.Plan))
	if !(w < e-1e-9) {
		t.Errorf("busiest link under an all-to-all: WCMP %.3f, equal weights %.3f; WCMP should be lower", w, e)
	}
	t.Logf("after %s failed, busiest link: WCMP %.3f vs equal weights %.3f", failed, w, e)
}

func TestReduceWeights(t *testing.T) {
	for _, c := range []struct {
		name string
		caps []float64
		max  int
		want []int32
	}{
		{"one to two", []float64{100, 200}, 64, []int32{1, 2}},
		{"thirds", []float64{33.3, 66.7, 100}, 64, []int32{1, 2, 3}},
		{"within tolerance stays small", []float64{100, 105}, 64, []int32{1, 1}},
		// 3:4 gives the 120 4/7 of the traffic for its 6/11: 4.8% over.
		{"fine ratio needs more slots", []float64{100, 120}, 64, []int32{3, 4}},
		// A k=16 leaf uplink down, seen from another pod's leaf: equal
		// weights oversubscribe the fourteens by 0.9% (and give the
		// fifteen 5.8% less than its share, which costs no throughput).
		{"a shortfall is not oversubscription", []float64{15, 14, 14, 14, 14, 14, 14, 14}, 64, []int32{1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, e := reduceWeights(c.caps, c.max)
			sum := int32(0)
			for _, x := range w {
				sum += x
			}
			if e > WeightTolerance || int(sum) > c.max {
				t.Fatalf("weights %v: error %.3f, total %d", w, e, sum)
			}
			if c.want != nil && len(w) == len(c.want) {
				for i := range w {
					if w[i] != c.want[i] {
						t.Errorf("weights %v, want %v", w, c.want)
						break
					}
				}
			}
		})
	}
	// A ratio no small total can match is reported, not hidden.
	if _, e := reduceWeights([]float64{1, 1000}, 8); e <= WeightTolerance {
		t.Errorf("1:1000 in 8 slots reported error %.3f", e)
	}
	// Whatever the capacities, the error reported is the worst
	// oversubscription of the weights chosen, and no smaller total has
	// one within the tolerance.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		caps := make([]float64, 2+rng.IntN(7))
		for i := range caps {
			caps[i] = 10 + rng.Float64()*90
		}
		w, e := reduceWeights(caps, 64)
		if got := oversubscription(caps, w); math.Abs(got-e) > 1e-9 {
			t.Fatalf("caps %v: weights %v oversubscribe by %.4f, reported %.4f", caps, w, got, e)
		}
		total := int32(0)
		for _, x := range w {
			total += x
		}
		if smaller := int(total) - 1; e <= WeightTolerance && smaller >= len(caps) {
			if sw, se := reduceWeights(caps, smaller); se <= WeightTolerance {
				t.Fatalf("caps %v: %v (%.4f) in a total of %d, but %v (%.4f) fits in %d", caps, w, e, total, sw, se, smaller)
			}
		}
	}
}

// oversubscription is the most any member's share of the traffic under
// weights w exceeds its share of caps, relatively.
func oversubscription(caps []float64, w []int32) float64 {
	var capSum, wSum float64
	for i := range caps {
		capSum += caps[i]
		wSum += float64(w[i])
	}
	worst := math.Inf(-1)
	for i := range caps {
		worst = math.Max(worst, (float64(w[i])/wSum)/(caps[i]/capSum)-1)
	}
	return worst
}

// TestEveryReachableDestinationRouted: with any two fabric links of a k=4
// fat-tree down (every pair), every switch that can still reach a leaf
// has a route to its prefix, and every group member it routes over leads
// to a switch that has one too. (Two next-hop sets whose capacities
// differ but reduce to the same integer weights once lost their routes.)
func TestEveryReachableDestinationRouted(t *testing.T) {
	snap := topotest.FatTree(t, 4)
	var fabric []models.LinkID
	for _, l := range snap.FabricLinks() {
		fabric = append(fabric, l.ID())
	}
	for i := range fabric {
		for j := i + 1; j < len(fabric); j++ {
			down := map[models.LinkID]bool{fabric[i]: true, fabric[j]: true}
			res, err := Compute(context.Background(), snap, Request{DownLinks: down})
			if err != nil {
				t.Fatal(err)
			}
			for _, leaf := range snap.Switches() {
				if leaf.Role != models.RoleLeaf || !leaf.Prefix.IsValid() {
					continue
				}
				for sw := range Distances(snap, leaf.Name, down) {
					if sw == leaf.Name {
						continue
					}
					if !routed(res.Plan.Switches[sw], leaf.Prefix.String()) {
						t.Fatalf("links %v down: %s can reach %s but has no route to %s", []models.LinkID{fabric[i], fabric[j]}, sw, leaf.Name, leaf.Prefix)
					}
				}
			}
		}
	}
}

func routed(st models.ForwardingState, prefix string) bool {
	for _, r := range st.Routes {
		if r.Prefix.String() == prefix {
			return r.MemberID != 0 || slices.ContainsFunc(st.Groups, func(g models.Group) bool { return g.ID == r.GroupID })
		}
	}
	return false
}

// TestWeightsShareAmongSendersThatCarry: when a core's link into pod 1
// of a k=8 fat-tree fails, the other pods' leaves weigh the uplink whose
// cores lost a quarter of their ways into pod 1 at three quarters of the
// others: 3:4:4:4. The core that lost its link reaches pod 1 through the
// other pods' aggregation switches, but nothing sends it that traffic;
// counted as one more sender sharing their capacity, it made that 2:3:3:3.
func TestWeightsShareAmongSendersThatCarry(t *testing.T) {
	snap := topotest.FatTree(t, 8)
	failed := coreLink(t, snap, "p1-spine1")
	res, err := Compute(context.Background(), snap, Request{DownLinks: map[models.LinkID]bool{failed.ID(): true}})
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := snap.Switch("p1-leaf1")
	st := res.Plan.Switches["p2-leaf1"]
	var weights []int32
	for _, r := range st.Routes {
		if !r.Prefix.Contains(dst.Prefix.Addr()) {
			continue
		}
		for _, g := range st.Groups {
			if g.ID == r.GroupID {
				for _, m := range g.Members {
					weights = append(weights, m.Weight)
				}
			}
		}
	}
	slices.Sort(weights)
	if !slices.Equal(weights, []int32{3, 4, 4, 4}) {
		t.Errorf("p2-leaf1's uplinks toward p1-leaf1 weigh %v, want 3:4:4:4", weights)
	}
}

// coreLink is the first link between a core switch and sw (any switch,
// when sw is empty).
func coreLink(t *testing.T, snap *topology.Snapshot, sw models.SwitchID) models.Link {
	t.Helper()
	for _, l := range snap.Links() {
		a, _ := snap.Switch(l.A.Switch)
		b, _ := snap.Switch(l.B.Switch)
		if a.Role == models.RoleCore && (sw == "" || b.Name == sw) || b.Role == models.RoleCore && (sw == "" || a.Name == sw) {
			return l
		}
	}
	t.Fatalf("no core link to %q", sw)
	return models.Link{}
}
