package controller

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestStagedGroupStandIn: when a group keeps its ID but changes members,
// routes already on the new plan use its new form under a stand-in ID
// while routes still on the old plan keep the old form; once none is on
// the old plan, the real ID carries the new members.
func TestStagedGroupStandIn(t *testing.T) {
	p1, p2 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24")
	members := []models.Member{{ID: 1, Port: 1}, {ID: 2, Port: 2}, {ID: 3, Port: 3}}
	oldSt := models.ForwardingState{Members: members[:2],
		Groups: []models.Group{{ID: 7, Members: []models.GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 2, Weight: 1}}}},
		Routes: []models.Route{{Prefix: p1, GroupID: 7}, {Prefix: p2, GroupID: 7}}}
	newSt := models.ForwardingState{Members: []models.Member{members[0], members[2]},
		Groups: []models.Group{{ID: 7, Members: []models.GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 3, Weight: 1}}}},
		Routes: []models.Route{{Prefix: p1, GroupID: 7}, {Prefix: p2, GroupID: 7}}}
	dist := map[netip.Prefix]distances{p1: fixedDist{"s": 1}, p2: fixedDist{"s": 3}}

	mid := staged("s", 1, oldSt, newSt, dist, nil)
	groups := map[uint32][]models.GroupMember{}
	for _, g := range mid.Groups {
		groups[g.ID] = g.Members
	}
	route := map[netip.Prefix]uint32{}
	for _, r := range mid.Routes {
		route[r.Prefix] = r.GroupID
	}
	standIn := stagedGroupID(7)
	if route[p1] != standIn || route[p2] != 7 || len(groups[7]) != 2 || groups[7][1].MemberID != 2 || groups[standIn][1].MemberID != 3 {
		t.Fatalf("stage 1: routes %v groups %v; want p1 on the stand-in {1,3}, p2 on 7 {1,2}", route, groups)
	}
	if err := mid.Validate(); err != nil {
		t.Fatalf("stage 1 state invalid: %v", err)
	}
	done := staged("s", 3, oldSt, newSt, dist, nil)
	if len(done.Groups) != 1 || done.Groups[0].ID != 7 || done.Groups[0].Members[1].MemberID != 3 {
		t.Fatalf("stage 3: groups %v; want only 7 with {1,3}", done.Groups)
	}
	// A switch that takes the new state whole gets it as it is: at k=48
	// a link's return stages 1,128 switches, and building each one's
	// state again at every stage was a fifth of what the controller
	// allocated.
	if &done.Routes[0] != &newSt.Routes[0] {
		t.Error("stage 3 built a copy of the new state")
	}
	if n := testing.AllocsPerRun(10, func() { staged("s", 3, oldSt, newSt, dist, nil) }); n > 4 {
		t.Errorf("stage 3: %.0f allocations to hand out the new state, want at most 4", n)
	}
}

// TestStagedEarlyAndRenamed: a prefix marked early takes its new route at
// any stage, and so does one whose next hops are the same under another
// group ID; others keep the old route until their distance's stage.
func TestStagedEarlyAndRenamed(t *testing.T) {
	p1, p2, p3 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24"), netip.MustParsePrefix("10.0.3.0/24")
	members := []models.Member{{ID: 1, Port: 1}, {ID: 2, Port: 2}, {ID: 3, Port: 3}}
	both := []models.GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 2, Weight: 1}}
	oldSt := models.ForwardingState{Members: members,
		Groups: []models.Group{{ID: 5, Members: both}, {ID: 6, Members: both}},
		Routes: []models.Route{{Prefix: p1, GroupID: 5}, {Prefix: p2, GroupID: 5}, {Prefix: p3, GroupID: 6}}}
	newSt := models.ForwardingState{Members: members,
		Groups: []models.Group{{ID: 8, Members: both}},
		Routes: []models.Route{{Prefix: p1, MemberID: 1}, {Prefix: p2, MemberID: 3}, {Prefix: p3, GroupID: 8}}}
	dist := map[netip.Prefix]distances{p1: fixedDist{"s": 3}, p2: fixedDist{"s": 3}, p3: fixedDist{"s": 3}}
	got := map[netip.Prefix]models.Route{}
	for _, r := range staged("s", 1, oldSt, newSt, dist, map[netip.Prefix]bool{p1: true}).Routes {
		got[r.Prefix] = r
	}
	if got[p1].MemberID != 1 {
		t.Errorf("early p1 at stage 1: %+v, want its new route (member 1)", got[p1])
	}
	if got[p2].GroupID != 5 {
		t.Errorf("staged p2 at stage 1: %+v, want its old route (group 5) until stage 3", got[p2])
	}
	if got[p3].GroupID != 8 {
		t.Errorf("renamed p3 at stage 1: %+v, want group 8 (same next hops as 6)", got[p3])
	}
}

func TestIsSubset(t *testing.T) {
	for _, c := range []struct {
		a, b []uint32
		want bool
	}{
		{[]uint32{2, 3}, []uint32{1, 2, 3}, true},
		{[]uint32{1, 2, 3}, []uint32{1, 2, 3}, true},
		{[]uint32{2, 4}, []uint32{1, 2, 3}, false},
		{[]uint32{4}, []uint32{1, 2, 3}, false},
		{nil, []uint32{1}, false}, // losing every next hop is not a narrowing
		{[]uint32{1}, nil, false},
	} {
		if got := isSubset(c.a, c.b); got != c.want {
			t.Errorf("isSubset(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestAdoptGroupIDs: a re-weighted group whose routes all move with it
// keeps the ID the switch has (one group modify, no route touched); one
// whose routes split does not, and nothing is renamed onto an ID the
// desired state still uses.
func TestAdoptGroupIDs(t *testing.T) {
	p1, p2, p3 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24"), netip.MustParsePrefix("10.0.3.0/24")
	members := []models.Member{{ID: 1, Port: 1}, {ID: 2, Port: 2}}
	even := []models.GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 2, Weight: 1}}
	skewed := []models.GroupMember{{MemberID: 1, Weight: 3}, {MemberID: 2, Weight: 1}}
	actual := models.ForwardingState{Members: members, Groups: []models.Group{{ID: 5, Members: even}, {ID: 6, Members: even}},
		Routes: []models.Route{{Prefix: p1, GroupID: 5}, {Prefix: p2, GroupID: 5}, {Prefix: p3, GroupID: 6}}}.Canonical()

	// p1 and p2 move together to a re-weighted group 9: it becomes 5.
	desired := models.ForwardingState{Members: members, Groups: []models.Group{{ID: 9, Members: skewed}, {ID: 6, Members: even}},
		Routes: []models.Route{{Prefix: p1, GroupID: 9}, {Prefix: p2, GroupID: 9}, {Prefix: p3, GroupID: 6}}}.Canonical()
	got, renames := adoptGroupIDs(desired, actual)
	if !reflect.DeepEqual(renames, map[uint32]uint32{9: 5}) || !renameGroups(desired, renames).Equal(got) {
		t.Errorf("renames %v do not make %+v of the plan's state", renames, got)
	}
	d := models.Compute(got, actual)
	if d.Len() != 1 || len(d.Modify.Groups) != 1 || d.Modify.Groups[0].ID != 5 {
		t.Errorf("re-weighting: diff %+v, want one modify of group 5", d)
	}
	if again, _ := adoptGroupIDs(desired, got); models.Compute(again, got).Len() != 0 {
		t.Error("once written, the same desired state is not what the switch has")
	}

	// Only p1 moves to 9 (p2 stays on 5's members under 5): no rename.
	split := models.ForwardingState{Members: members, Groups: []models.Group{{ID: 9, Members: skewed}, {ID: 5, Members: even}, {ID: 6, Members: even}},
		Routes: []models.Route{{Prefix: p1, GroupID: 9}, {Prefix: p2, GroupID: 5}, {Prefix: p3, GroupID: 6}}}.Canonical()
	if got, _ := adoptGroupIDs(split, actual); !slices.ContainsFunc(got.Groups, func(g models.Group) bool { return g.ID == 9 }) {
		t.Errorf("a split group was renamed: %+v", got.Groups)
	}
}

// TestRolloutTimeline: a finished rollout reports, once, how long it took,
// how much of that was planning before its first stage, and each stage
// that changed switches (how many, how long), for the log line operators
// read; stages without changes are not listed. One given up before its
// stages began was all planning.
func TestRolloutTimeline(t *testing.T) {
	now := time.Unix(100, 0)
	r := newRollout(&fabricState{}, func() time.Time { return now })
	r.affected = []map[models.SwitchID]bool{{}, {"a": true, "b": true}, {}, {"c": true}}
	r.last, r.changed = 3, map[models.SwitchID]bool{"a": true, "b": true, "c": true}
	now = now.Add(5 * time.Millisecond) // planning
	if got := r.begin(); len(got) != 2 {
		t.Fatalf("first stage: %v, want a and b", got)
	}
	if _, _, _, ok := r.finished(); ok {
		t.Fatal("finished before any stage completed")
	}
	now = now.Add(40 * time.Millisecond)
	r.confirmed("a", 1)
	if next := r.confirmed("b", 1); !slices.Equal(next, []models.SwitchID{"c"}) {
		t.Fatalf("after stage 1: %v, want c (stage 2 has no change)", next)
	}
	now = now.Add(15 * time.Millisecond)
	if next := r.confirmed("c", 3); len(next) != 3 {
		t.Fatalf("after the last stage: %v, want every changed switch for the cleanup", next)
	}
	took, planned, stages, ok := r.finished()
	if !ok || took != 60*time.Millisecond || planned != 5*time.Millisecond || stages != "1:2sw/40ms 3:1sw/15ms" {
		t.Fatalf("finished() = %s %s %q %v, want 60ms 5ms \"1:2sw/40ms 3:1sw/15ms\" true", took, planned, stages, ok)
	}
	if _, _, _, again := r.finished(); again {
		t.Fatal("reported twice")
	}
	// One given up before any stage began (it could not be planned): all
	// of its time was before the stages, and none is listed.
	r = newRollout(&fabricState{}, func() time.Time { return now })
	r.affected = []map[models.SwitchID]bool{{}, {"a": true}}
	now = now.Add(70 * time.Millisecond)
	r.abandon()
	if took, planned, stages, ok := r.finished(); !ok || took != 70*time.Millisecond || planned != took || stages != "" {
		t.Fatalf("abandoned: finished() = %s %s %q %v, want 70ms 70ms \"\" true", took, planned, stages, ok)
	}
}

// TestStageWaitsForASlowSwitch: a stage does not move on past a switch
// that has neither confirmed nor failed it once stageTimeout has passed
// (its previous routes beside the next stage's could loop), neither when
// another switch confirms nor when the housekeeping looks for stuck
// stages; only stageBackstop ends that wait. A switch whose write failed
// is left behind after stageTimeout.
func TestStageWaitsForASlowSwitch(t *testing.T) {
	now := time.Unix(100, 0)
	fresh := func() *rollout {
		r := newRollout(&fabricState{}, func() time.Time { return now })
		r.affected = []map[models.SwitchID]bool{{}, {"a": true, "slow": true, "c": true}, {"d": true}}
		r.last, r.changed = 2, map[models.SwitchID]bool{"a": true, "slow": true, "c": true, "d": true}
		r.begin()
		return r
	}
	r := fresh()
	now = now.Add(stageTimeout + time.Second)
	r.confirmed("a", 1)
	if next := r.confirmed("c", 1); next != nil || r.stageNow() != 1 {
		t.Fatalf("past stageTimeout a confirmation moved on without the slow switch: next %v, stage %d", next, r.stageNow())
	}
	if left, next := r.stuck(); next != nil {
		t.Fatalf("stuck() left %v behind, a switch that has not failed", left)
	}
	now = now.Add(stageBackstop)
	left, next := r.stuck()
	if !slices.Equal(left, []models.SwitchID{"slow"}) || !slices.Equal(next, []models.SwitchID{"d"}) || r.stageNow() != 2 {
		t.Fatalf("past stageBackstop: left %v, next %v, stage %d; want [slow], [d], 2", left, next, r.stageNow())
	}

	now = time.Unix(100, 0)
	r = fresh()
	r.confirmed("a", 1)
	r.confirmed("c", 1)
	r.failedAt("slow", 1)
	if _, next := r.stuck(); next != nil {
		t.Fatal("a failed switch left behind before stageTimeout")
	}
	now = now.Add(stageTimeout)
	if left, next := r.stuck(); !slices.Equal(left, []models.SwitchID{"slow"}) || !slices.Equal(next, []models.SwitchID{"d"}) {
		t.Fatalf("a switch whose write failed, past stageTimeout: left %v, next %v; want [slow], [d]", left, next)
	}
}

// fixedDist is a distance table written out by a test.
type fixedDist map[models.SwitchID]int

func (f fixedDist) Of(sw models.SwitchID) (int, bool) {
	d, ok := f[sw]
	return d, ok
}

// TestChangedPrefixes: a prefix has moved when its route points
// elsewhere: another member, a group where there was a member (or the
// reverse), a group of other members — not a group renamed with the same
// members — or it is new; hopsOf gives the moved prefixes' ports, sorted.
func TestChangedPrefixes(t *testing.T) {
	p := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16) }
	ab := []models.GroupMember{{MemberID: 2, Weight: 1}, {MemberID: 1, Weight: 1}}
	abc := []models.GroupMember{{MemberID: 1, Weight: 1}, {MemberID: 2, Weight: 1}, {MemberID: 3, Weight: 1}}
	oldSt := models.ForwardingState{Groups: []models.Group{{ID: 5, Members: ab}, {ID: 6, Members: ab}},
		Routes: []models.Route{{Prefix: p(1), GroupID: 5}, {Prefix: p(2), GroupID: 6}, {Prefix: p(3), MemberID: 1}, {Prefix: p(4), MemberID: 1}, {Prefix: p(5), GroupID: 5}}}
	newSt := models.ForwardingState{Groups: []models.Group{{ID: 7, Members: ab}, {ID: 6, Members: abc}},
		Routes: []models.Route{
			{Prefix: p(1), GroupID: 7},  // renamed, the same members: not moved
			{Prefix: p(2), GroupID: 6},  // the same ID, other members
			{Prefix: p(3), MemberID: 2}, // another member
			{Prefix: p(4), GroupID: 7},  // a group where there was a member
			{Prefix: p(5), GroupID: 7},  // renamed: not moved
			{Prefix: p(6), MemberID: 3}, // new
		}}
	moved := changedPrefixes(oldSt, newSt)
	if want := []netip.Prefix{p(2), p(3), p(4), p(6)}; !slices.Equal(moved, want) {
		t.Fatalf("changedPrefixes = %v, want %v", moved, want)
	}
	// The same, from states whose routes are not sorted.
	shuffled := func(st models.ForwardingState) models.ForwardingState {
		st.Routes = slices.Clone(st.Routes)
		slices.Reverse(st.Routes)
		return st
	}
	got := changedPrefixes(shuffled(oldSt), newSt)
	if want := []netip.Prefix{p(2), p(3), p(4), p(6)}; !slices.Equal(got, want) {
		t.Fatalf("changedPrefixes from unsorted old routes = %v, want %v", got, want)
	}
	got = changedPrefixes(oldSt, shuffled(newSt))
	if want := []netip.Prefix{p(2), p(3), p(4), p(6)}; !slices.Equal(got, want) {
		t.Fatalf("changedPrefixes to unsorted new routes = %v, want %v", got, want)
	}
	hops := hopsOf(newSt, moved)
	want := map[netip.Prefix][]uint32{p(2): {1, 2, 3}, p(3): {2}, p(4): {1, 2}, p(6): {3}}
	if len(hops) != len(want) {
		t.Fatalf("hopsOf = %v, want %v", hops, want)
	}
	for q, ports := range want {
		if !slices.Equal(hops[q], ports) {
			t.Errorf("hopsOf[%s] = %v, want %v", q, hops[q], ports)
		}
	}
}

// BenchmarkRolloutPrepare: preparing the rollout after a k=48 fat-tree's
// link fails (which switches move at which stage, their distances), from
// the pruned plan to the new one, for a leaf–spine link (the pruning
// changes 1,152 switches) and a core link, and back when it returns.
//
//	go test ./controller -run '^$' -bench RolloutPrepare -cpu 1 -benchtime 5x
func BenchmarkRolloutPrepare(b *testing.B) {
	snap, base := fatTreeRoutes(b, 48)
	links := snap.FabricLinks()
	for _, l := range []models.Link{links[0], links[len(links)-1]} {
		down := map[models.LinkID]bool{l.ID(): true}
		pruned := pathcalc.PruneResult(snap, base, down)
		next, err := pathcalc.Recompute(b.Context(), base, snap, pathcalc.Request{DownLinks: down})
		if err != nil {
			b.Fatal(err)
		}
		st := &fabricState{snap: snap, down: down}
		name := strings.SplitN(string(l.ID()), ":", 2)[0]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := newRollout(&fabricState{snap: snap}, time.Now)
				r.prepare(st, pruned, next, &base.Plan)
				if r.last < 1 {
					b.Fatal("nothing staged")
				}
			}
		})
		// And when the link comes back: from its plan to the first one.
		b.Run(name+"/returns", func(b *testing.B) {
			for b.Loop() {
				r := newRollout(&fabricState{snap: snap, down: down}, time.Now)
				r.prepare(&fabricState{snap: snap}, next, base, nil)
				if r.last < 1 {
					b.Fatal("nothing staged")
				}
			}
		})
	}
}

// TestRolloutDoesNotWaitForAFailedSwitch: a spine of a leaf-spine fails
// (every link of it reported down). The rollout round it — the pruning,
// then the new routes — completes as soon as the switches that answer
// confirm each stage, with no time passing: the failed spine, which
// cannot confirm, is written once the rollout is over and not waited for
// (before, each stage it was in waited out stageTimeout). A spine whose
// links are all drained instead still carries traffic and is waited for.
func TestRolloutDoesNotWaitForAFailedSwitch(t *testing.T) {
	const failed = models.SwitchID("spine1")
	snap, down, base, pruned, next := failurePlans(t, 3, 3, func(snap *topology.Snapshot) map[models.LinkID]bool {
		down := map[models.LinkID]bool{}
		for _, a := range snap.Neighbors(failed) {
			down[a.Link] = true
		}
		return down
	})
	for _, drained := range []bool{false, true} {
		now := time.Unix(100, 0)
		r := newRollout(&fabricState{snap: snap}, func() time.Time { return now })
		st := &fabricState{snap: snap, down: down}
		if drained {
			st.planned = down
		}
		r.prepare(st, pruned, next, &base.Plan)
		if !r.changed[failed] {
			t.Fatal("the failed spine's state does not change: nothing to check")
		}
		waitedFor := false
		for todo := r.begin(); r.stageNow() != 0; {
			stage := r.stageNow()
			if len(todo) == 0 {
				t.Fatalf("drained %v: stage %d has no switch to program", drained, stage)
			}
			var next []models.SwitchID
			for _, sw := range todo {
				if sw == failed {
					waitedFor = true
					if !drained {
						t.Fatalf("stage %d waits for the failed spine", stage)
					}
				}
				next = r.confirmed(sw, stage)
			}
			if r.stageNow() == stage {
				t.Fatalf("drained %v: stage %d not complete once every switch it waits for confirmed", drained, stage)
			}
			todo = next
		}
		if drained && !waitedFor {
			t.Error("a drained spine (it still carries traffic) is not waited for")
		}
	}
}

// TestRolloutStagesFromThePlansDistances: a rollout prepared with the
// distances the plans' working has (pathcalc.Result.Distances) stages
// every switch as one prepared with distances searched afresh, for a
// link's and a switch's failure on a fat-tree (from the pruned plan) and
// their returns.
func TestRolloutStagesFromThePlansDistances(t *testing.T) {
	snap, base := fatTreeRoutes(t, 8)
	spine := map[models.LinkID]bool{}
	for _, a := range snap.Neighbors("p2-spine1") {
		spine[a.Link] = true
	}
	for name, down := range map[string]map[models.LinkID]bool{"core link": {snap.FabricLinks()[0].ID(): true}, "spine": spine} {
		next, err := pathcalc.Recompute(t.Context(), base, snap, pathcalc.Request{DownLinks: down})
		if err != nil {
			t.Fatal(err)
		}
		pruned := pathcalc.PruneResult(snap, base, down)
		for _, c := range []struct {
			what           string
			from           *fabricState
			st             *fabricState
			oldRes, newRes pathcalc.Result
			base           *models.Plan
		}{
			{name + " fails", &fabricState{snap: snap}, &fabricState{snap: snap, down: down}, pruned, next, &base.Plan},
			{name + " returns", &fabricState{snap: snap, down: down}, &fabricState{snap: snap}, next, base, nil},
		} {
			withPlans := newRollout(c.from, time.Now)
			dist, early := withPlans.prepare(c.st, c.oldRes, c.newRes, c.base)
			searched := newRollout(c.from, time.Now)
			sDist, sEarly := searched.prepare(c.st, pathcalc.Result{Plan: c.oldRes.Plan}, pathcalc.Result{Plan: c.newRes.Plan}, c.base)
			if withPlans.last < 1 {
				t.Fatalf("%s: nothing staged", c.what)
			}
			if !reflect.DeepEqual(withPlans.affected, searched.affected) || !reflect.DeepEqual(early, sEarly) || withPlans.last != searched.last {
				t.Errorf("%s: staged otherwise than with the distances searched", c.what)
			}
			if len(dist) != len(sDist) {
				t.Fatalf("%s: %d destinations staged, %d with the distances searched", c.what, len(dist), len(sDist))
			}
			for p, d := range sDist {
				for _, sw := range snap.Switches() {
					a, okA := dist[p].Of(sw.Name)
					b, okB := d.Of(sw.Name)
					if a != b || okA != okB {
						t.Fatalf("%s: %s toward %s: %d (%v), searched %d (%v)", c.what, sw.Name, p, a, okA, b, okB)
					}
				}
			}
		}
	}
}

// fatTreeRoutes is a k-ary fat-tree of 100 Gb/s links and its routes.
func fatTreeRoutes(tb testing.TB, k int) (*topology.Snapshot, pathcalc.Result) {
	tb.Helper()
	snap := topotest.FatTree(tb, k)
	routes, err := pathcalc.Compute(tb.Context(), snap, pathcalc.Request{})
	if err != nil {
		tb.Fatal(err)
	}
	return snap, routes
}

// TestPruningConfirmedWhilePlanned: after a link fails, the pruned
// switches are written (and confirm the pruning stage) while the new
// routes are planned. Once planned, the pruning stage waits only for the
// pruned switches that have not confirmed yet, and with none left the
// rollout goes straight on to the new routes' first stage.
func TestPruningConfirmedWhilePlanned(t *testing.T) {
	snap, down, base, pruned, next := failurePlans(t, 3, 4, func(snap *topology.Snapshot) map[models.LinkID]bool {
		return map[models.LinkID]bool{snap.Neighbors("leaf1")[0].Link: true}
	})
	var prunedSwitches []models.SwitchID
	for sw, st := range pruned.Plan.Switches {
		if !base.Plan.Switches[sw].Equal(st) {
			prunedSwitches = append(prunedSwitches, sw)
		}
	}
	slices.Sort(prunedSwitches)
	if len(prunedSwitches) < 2 {
		t.Fatalf("the failure prunes %v: too few to check", prunedSwitches)
	}
	for _, confirmedFirst := range []int{len(prunedSwitches), len(prunedSwitches) - 1, 0} {
		r := newRollout(&fabricState{snap: snap}, time.Now)
		r.base = &base.Plan
		for _, sw := range prunedSwitches[:confirmedFirst] {
			if got := r.confirmed(sw, 1); got != nil {
				t.Fatalf("a confirmation before the stages are prepared moved the rollout on: %v", got)
			}
		}
		r.prepare(&fabricState{snap: snap, down: down}, pruned, next, &base.Plan)
		todo := r.begin()
		waiting := prunedSwitches[confirmedFirst:]
		if len(waiting) == 0 {
			if r.stageNow() == 1 {
				t.Fatalf("every pruned switch confirmed: the rollout still waits at the pruning, for %v", todo)
			}
			continue
		}
		slices.Sort(todo)
		if r.stageNow() != 1 || !slices.Equal(todo, waiting) {
			t.Fatalf("%d of %d pruned switches confirmed while planned: stage %d programs %v, want the pruning's %v", confirmedFirst, len(prunedSwitches), r.stageNow(), todo, waiting)
		}
	}
}

// failurePlans are a leaf-spine's routes before the links failing(snap)
// fail (base), the same pruned around them, and the routes that avoid
// them (next).
func failurePlans(t *testing.T, spines, leaves int, failing func(*topology.Snapshot) map[models.LinkID]bool) (snap *topology.Snapshot, down map[models.LinkID]bool, base, pruned, next pathcalc.Result) {
	t.Helper()
	topo, err := topology.LeafSpine(spines, leaves, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = topology.New(topo); err != nil {
		t.Fatal(err)
	}
	down = failing(snap)
	if base, err = pathcalc.Compute(t.Context(), snap, pathcalc.Request{}); err != nil {
		t.Fatal(err)
	}
	pruned = pathcalc.PruneResult(snap, base, down)
	if next, err = pathcalc.Compute(t.Context(), snap, pathcalc.Request{DownLinks: down}); err != nil {
		t.Fatal(err)
	}
	return snap, down, base, pruned, next
}
