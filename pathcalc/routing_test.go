package pathcalc

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestRecomputeIsCompute walks random sequences of changes — links
// failing (one or several at once, including every uplink of a switch, so
// that distances change and destinations become unreachable), links
// returning, ports' congestion biases changing — over fat-trees, a
// leaf-spine and a rail-optimized fabric, and checks that each plan
// Recompute makes from the one before is exactly the plan Compute makes
// from scratch, warnings included (but for the error figure of WCMP
// weights: see withoutErrorFigures). It does so with destinations worked
// out by one goroutine and by three.
func TestRecomputeIsCompute(t *testing.T) {
	ft4, _ := topology.FatTree(4, 100)
	ft8, _ := topology.FatTree(8, 100)
	ls, _ := topology.LeafSpine(4, 6, 2, 100)
	rail, _ := topology.RailOptimized(4, 4, 2, 100)
	defer func(f func() int) { replanWorkers = f }(replanWorkers)
	for _, workers := range []int{1, 3} {
		replanWorkers = func() int { return workers }
		for name, topo := range map[string]models.Topology{"fattree:4": ft4, "fattree:8": ft8, "leafspine": ls, "rail": rail} {
			t.Run(fmt.Sprintf("%s/workers:%d", name, workers), func(t *testing.T) {
				snap, err := topology.New(topo)
				if err != nil {
					t.Fatal(err)
				}
				links := snap.FabricLinks()
				rng := rand.New(rand.NewPCG(uint64(len(links)), 7))
				ctx := context.Background()
				req := Request{Limits: Limits{MaxGroupSize: 8}, DownLinks: map[models.LinkID]bool{}, PortBias: map[models.Endpoint]float64{}}
				prev, err := Compute(ctx, snap, req)
				if err != nil {
					t.Fatal(err)
				}
				var isolated []models.SwitchID // switches that lost every link
				for step := range 60 {
					next := Request{Limits: req.Limits, DownLinks: maps.Clone(req.DownLinks), PortBias: maps.Clone(req.PortBias)}
					switch what := rng.IntN(6); {
					case what == 0 && len(next.DownLinks) > 0: // everything returns
						clear(next.DownLinks)
						isolated = nil
					case what == 1: // a switch loses every link
						sw := links[rng.IntN(len(links))].A.Switch
						snap.EachNeighbor(sw, func(a topology.Adjacency) { next.DownLinks[a.Link] = true })
						isolated = append(isolated, sw)
					case what == 5 && len(isolated) > 0: // one that did gets one link back, or all; or they all return
						back := isolated
						if rng.IntN(3) > 0 {
							i := rng.IntN(len(isolated))
							back = isolated[i : i+1]
							isolated = slices.Delete(isolated, i, i+1)
						} else {
							isolated = nil
						}
						all := rng.IntN(2) == 0
						for _, sw := range back {
							var its []models.LinkID
							snap.EachNeighbor(sw, func(a topology.Adjacency) {
								if next.DownLinks[a.Link] {
									its = append(its, a.Link)
								}
							})
							if !all && len(its) > 0 {
								its = its[rng.IntN(len(its)):][:1] // one link first, as switches report it
							}
							for _, id := range its {
								delete(next.DownLinks, id)
							}
						}
					case what == 2: // biases change
						for range 1 + rng.IntN(4) {
							l := links[rng.IntN(len(links))]
							e := l.A
							if rng.IntN(2) == 0 {
								e = l.B
							}
							if rng.IntN(3) == 0 {
								delete(next.PortBias, e)
							} else {
								next.PortBias[e] = []float64{0.3, 0.5, 0.7}[rng.IntN(3)]
							}
						}
					default: // a few links flip
						for range 1 + rng.IntN(3) {
							id := links[rng.IntN(len(links))].ID()
							next.DownLinks[id] = !next.DownLinks[id]
							if !next.DownLinks[id] {
								delete(next.DownLinks, id)
							}
						}
					}
					prev, req = recomputeAsCompute(t, fmt.Sprintf("step %d", step), prev, snap, next), next
				}
			})
		}
	}
}

// fatTreePlan is a k-ary fat-tree of 100 Gb/s links and its routes.
func fatTreePlan(t *testing.T, k int) (*topology.Snapshot, Result) {
	t.Helper()
	topo, err := topology.FatTree(k, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Compute(context.Background(), snap, Request{})
	if err != nil {
		t.Fatal(err)
	}
	return snap, base
}

// recomputeAsCompute is Recompute(prev, snap, req), failing t unless it
// is Compute's plan, with Compute's warnings (but for their error
// figures) and Compute's working for the next Recompute.
func recomputeAsCompute(t *testing.T, what string, prev Result, snap *topology.Snapshot, req Request) Result {
	t.Helper()
	ctx := context.Background()
	got, err := Recompute(ctx, prev, snap, req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Compute(ctx, snap, req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Plan, want.Plan) {
		for sw, w := range want.Plan.Switches {
			if g := got.Plan.Switches[sw]; !reflect.DeepEqual(g, w) {
				t.Fatalf("%s (%d links down, %d biases): %s differs from Compute's:\n got %+v\nwant %+v", what, len(req.DownLinks), len(req.PortBias), sw, g, w)
			}
		}
		t.Fatalf("%s: plans differ in their switches", what)
	}
	if g, w := withoutErrorFigures(got.Warnings), withoutErrorFigures(want.Warnings); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: warnings differ:\n got %v\nwant %v", what, g, w)
	}
	g, w := got.routing, want.routing
	for j := range w.dests {
		if !slices.Equal(g.dist[j], w.dist[j]) || !slices.Equal(g.carries[j], w.carries[j]) || !slices.Equal(g.fanIn[j], w.fanIn[j]) || !slices.Equal(g.capTo[j], w.capTo[j]) {
			t.Fatalf("%s: the working toward %s differs from Compute's", what, w.switches[w.dests[j]].Name)
		}
	}
	return got
}

// TestRecomputeSwitchFailsAndReturns: a switch of each kind fails (every
// link at once, or link by link as its neighbours report it) and comes
// back link by link; every plan on the way is Compute's.
func TestRecomputeSwitchFailsAndReturns(t *testing.T) {
	ft8, _ := topology.FatTree(8, 100)
	ls, _ := topology.LeafSpine(4, 6, 2, 100)
	for name, topo := range map[string]models.Topology{"fattree:8": ft8, "leafspine": ls} {
		snap, err := topology.New(topo)
		if err != nil {
			t.Fatal(err)
		}
		lim := Limits{MaxGroupSize: 8}
		base, err := Compute(context.Background(), snap, Request{Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		for _, sw := range []models.SwitchID{"p2-spine1", "core3", "p1-leaf2", "spine2", "leaf3"} {
			if _, err := snap.Switch(sw); err != nil {
				continue
			}
			var links []models.LinkID
			snap.EachNeighbor(sw, func(a topology.Adjacency) { links = append(links, a.Link) })
			for _, stepwise := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/link-by-link:%v", name, sw, stepwise), func(t *testing.T) {
					prev, down := base, map[models.LinkID]bool{}
					for i, id := range links {
						down[id] = true
						if stepwise || i == len(links)-1 {
							prev = recomputeAsCompute(t, fmt.Sprintf("%d links of %s down", i+1, sw), prev, snap, Request{Limits: lim, DownLinks: maps.Clone(down)})
						}
					}
					for i, id := range links {
						delete(down, id)
						prev = recomputeAsCompute(t, fmt.Sprintf("%d links of %s back", i+1, sw), prev, snap, Request{Limits: lim, DownLinks: maps.Clone(down)})
					}
				})
			}
		}
	}
}

// TestRecomputeSearchesLittleForASwitch: on a k=16 fat-tree, a spine
// that fails has only its pod's eight destinations searched in full (a
// core's group no longer reaches the pod directly), and a core's failure
// none; coming back link by link, as their neighbours report it, neither
// has any; nor has a spine's return and another's failure in one change
// more than their pods'. (Before, every one of the 128 was searched.)
func TestRecomputeSearchesLittleForASwitch(t *testing.T) {
	snap, base := fatTreePlan(t, 16)
	ctx := context.Background()
	for sw, most := range map[models.SwitchID]int{"p2-spine1": 8, "core3": 0} {
		var links []models.LinkID
		down := map[models.LinkID]bool{}
		snap.EachNeighbor(sw, func(a topology.Adjacency) {
			links = append(links, a.Link)
			down[a.Link] = true
		})
		prev, err := Recompute(ctx, base, snap, Request{DownLinks: maps.Clone(down)})
		if err != nil {
			t.Fatal(err)
		}
		if prev.Destinations != 128 || prev.Searched > most {
			t.Errorf("%s fails: %d of %d destinations searched in full, want at most %d", sw, prev.Searched, prev.Destinations, most)
		}
		for i, id := range links {
			delete(down, id)
			if prev, err = Recompute(ctx, prev, snap, Request{DownLinks: maps.Clone(down)}); err != nil {
				t.Fatal(err)
			}
			if prev.Searched > 0 {
				t.Errorf("%s's link %d of %d back: %d destinations searched in full", sw, i+1, len(links), prev.Searched)
			}
		}
	}
	// A spine fails while another's return is still being planned: one's
	// links come back and the other's fail in one change. At most the
	// two pods' destinations are searched (at k=16 the changes reach
	// past half the switches for those; at k=48 they do not).
	back, fails := map[models.LinkID]bool{}, map[models.LinkID]bool{}
	snap.EachNeighbor("p2-spine1", func(a topology.Adjacency) { back[a.Link] = true })
	snap.EachNeighbor("p5-spine3", func(a topology.Adjacency) { fails[a.Link] = true })
	spineDown, err := Recompute(ctx, base, snap, Request{DownLinks: back})
	if err != nil {
		t.Fatal(err)
	}
	if both := recomputeAsCompute(t, "a spine back as another fails", spineDown, snap, Request{DownLinks: fails}); both.Searched > 16 {
		t.Errorf("a spine back as another fails: %d destinations searched in full, want at most 16", both.Searched)
	}
}

// withoutErrorFigures is warnings with the WCMP error figure left out: a
// choice whose capacities changed but make the same integer weights keeps
// its old capacities (Recompute), and with them the error figure they had.
func withoutErrorFigures(ws []Warning) []Warning {
	out := slices.Clone(ws)
	for i := range out {
		out[i].Message = errorFigure.ReplaceAllString(out[i].Message, "by up to N%")
	}
	return out
}

var errorFigure = regexp.MustCompile(`by up to [^%]+%`)

// TestRecomputeTouchesFew: one link of a k=8 fat-tree failing, then
// returning, rebuilds only the switch states that change (about half:
// WCMP weights toward the failed link's leaves shift fabric-wide); every
// other switch's state is the previous plan's, shared, not made again.
func TestRecomputeTouchesFew(t *testing.T) {
	snap, base := fatTreePlan(t, 8)
	ctx := context.Background()
	check := func(what string, next, prev Result) {
		t.Helper()
		kept, same := 0, 0
		for sw, st := range next.Plan.Switches {
			o := prev.Plan.Switches[sw]
			if &st.Routes[0] == &o.Routes[0] {
				kept++
			}
			if reflect.DeepEqual(st, o) {
				same++
			}
		}
		if kept != same || same == len(next.Plan.Switches) {
			t.Errorf("%s: %d switch states kept, %d unchanged (of %d); want every unchanged one kept, and some changed", what, kept, same, len(next.Plan.Switches))
		}
	}
	for _, l := range []models.Link{snap.FabricLinks()[0], snap.FabricLinks()[len(snap.FabricLinks())-1]} {
		down := map[models.LinkID]bool{l.ID(): true}
		failed, err := Recompute(ctx, base, snap, Request{DownLinks: down})
		if err != nil {
			t.Fatal(err)
		}
		back, err := Recompute(ctx, failed, snap, Request{})
		if err != nil {
			t.Fatal(err)
		}
		check(string(l.ID())+" failing", failed, base)
		check(string(l.ID())+" returning", back, failed)
		if !reflect.DeepEqual(back.Plan, base.Plan) {
			t.Errorf("%s failing and returning: the plan is not the one before", l.ID())
		}
	}
}
