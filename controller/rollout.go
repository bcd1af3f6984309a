package controller

import (
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
)

// Make-before-break. When the links to route around change (a drain or
// undrain, dampening, a link failing or coming back), switches do not all
// take their new routes at once: the change rolls out in stages by
// distance to each destination. At stage k a switch uses the new route
// toward a destination only if its new distance to it is at most k, so a
// switch on a new route always forwards to switches that are on the new
// route too, down to the destination; a switch still on the old route
// forwards along the old, consistent routes until it reaches one that
// moved. No mix of old and new can loop, and a drained link keeps carrying
// what is still routed over it until nothing is. Destinations whose new
// next hops are all nearer by the old distances need no stages (old and
// new routes descend one potential) and move at the first. After a
// failure, a first stage of its own prunes every switch's next hops that
// lead nowhere (pathcalc.Prune), so traffic that has another way by the
// old routes takes it at once. Each stage waits until every switch it
// changes confirmed it; see stageTimeout for a switch that does not.

// stageTimeout is how long a stage waits for a switch whose write at
// that stage failed (it cannot be reached, or refuses the write) before
// moving on without it. A switch that has not failed is waited for up to
// stageBackstop: moving on while it still has its previous stage's routes
// can loop traffic between it and switches already on the next stage
// (TestLinkReturnIsMakeBeforeBreak saw 9 of 896 flows loop so beside two
// CPU burners, and up to 42 with this timeout at 1 ms), so only a switch
// that cannot take the stage is left behind.
const stageTimeout = 2 * time.Second

// stageBackstop bounds a stage's wait for a switch that neither confirms
// nor fails (each write has its own deadline, so this is for a controller
// stalled that long).
const stageBackstop = 30 * time.Second

type rollout struct {
	prev *fabricState // the state being replaced
	// oldDown are the links the old routes avoid.
	oldDown map[models.LinkID]bool
	// base, if set, is what the switches have when that is not prev's
	// routes (prev is then derived from it: the pruned routes).
	base *models.Plan
	mu   sync.Mutex
	// stage is the current stage (1..last); done once past last.
	stage, last int
	started     time.Time
	now         func() time.Time
	synced      map[models.SwitchID]int // stage each switch last confirmed
	failed      map[models.SwitchID]int // stage at which each switch's write last failed
	dist        map[netip.Prefix]distances
	early       map[models.SwitchID]map[netip.Prefix]bool // moves at the first stage, by switch
	affected    []map[models.SwitchID]bool                // by stage: switches whose routes change then
	changed     map[models.SwitchID]bool                  // switches whose state changes at all
	// offset is 1 when the rollout starts with a stage of its own that
	// takes every switch from base to the old state (the pruned routes
	// after a failure): distance d then moves at stage d+1.
	offset int
	once   sync.Once
	// began is when the rollout was created; spans the stages it went
	// through (for the log line when it finishes); reported once.
	began    time.Time
	begun    time.Time // when its stages began: planned and prepared
	spans    []stageSpan
	reported bool
}

// stageSpan is one stage a rollout went through: how many switches it
// changed and how long it took from its start to its last confirmation
// (or its timeout).
type stageSpan struct {
	stage, switches int
	took            time.Duration
}

// finished returns, once, how long the rollout took, how much of that
// was before its stages began (the new routes computed, the stages
// prepared), and its stages, when it is over.
func (r *rollout) finished() (took, planned time.Duration, stages string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage <= r.last || r.reported || r.affected == nil {
		return 0, 0, "", false
	}
	r.reported = true
	var b strings.Builder
	for i, s := range r.spans {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%dsw/%s", s.stage, s.switches, s.took.Round(time.Millisecond))
	}
	took = r.now().Sub(r.began)
	planned = took // no stage began: it ended before (nothing to stage)
	if !r.begun.IsZero() {
		planned = r.begun.Sub(r.began)
	}
	return took, planned, b.String(), true
}

// prepare computes, once, which switches move at which stage and, for the
// destinations that need stages, every switch's new distance toward them;
// it returns those distances and, per switch, the prefixes it moves at the
// first stage (see below). With base (what the switches have, when that
// is not oldPlan), a first stage takes every switch that differs to
// oldPlan and is waited for.
//
// A switch whose new next hops toward a destination are a subset of its
// old ones (a failed or drained next hop dropped, weights changed) moves
// at the first stage: its new next hops are old ones, nearer to the
// destination by the old distances, like every old route. A destination
// whose every moving switch has its new next hops nearer by the old
// distances moves entirely at the first stage too. Only the other moves (a
// route that climbs, round a failure or a drain) wait for their new
// distance's stage. No mix can loop: traffic descends the old distances
// through switches on old routes and early movers until it reaches a
// switch that moved at its stage, and from there descends the new
// distances on new routes only (each of its next hops is nearer and so
// has moved too). Distances are computed only toward the destinations
// some staged move needs.
func (r *rollout) prepare(st *fabricState, oldRes, newRes pathcalc.Result, base *models.Plan) (map[netip.Prefix]distances, map[models.SwitchID]map[netip.Prefix]bool) {
	oldPlan, newPlan := oldRes.Plan, newRes.Plan
	r.once.Do(func() {
		offset := 0
		if base != nil {
			offset = 1
		}
		owner := prefixOwners(st.snap)
		changed, pruning, early, waiting := classifyMoves(oldPlan, newPlan, base)
		// Destinations whose every waiting move descends the old distances
		// move entirely at the first stage.
		descends := map[netip.Prefix]bool{}
		oldDist := &planDistances{res: oldRes, snap: st.snap, down: r.oldDown}
		for _, m := range waiting {
			if ok, seen := descends[m.p]; seen && !ok {
				continue
			}
			leaf, known := owner[m.p]
			good := known
			if known {
				good = nearer(st.snap, oldDist.to(leaf), m.sw, m.next)
			}
			descends[m.p] = good
		}
		// The rest wait for the stage of their new distance.
		dist := map[netip.Prefix]distances{}
		newDist := &planDistances{res: newRes, snap: st.snap, down: st.down}
		last := 1
		var staged []routeMove
		for _, m := range waiting {
			if descends[m.p] {
				if early[m.sw] == nil {
					early[m.sw] = map[netip.Prefix]bool{}
				}
				early[m.sw][m.p] = true
				continue
			}
			leaf, known := owner[m.p]
			if !known {
				continue // no distance: takes its new route when written
			}
			dist[m.p] = newDist.to(leaf)
			if d, ok := dist[m.p].Of(m.sw); ok {
				last = max(last, d)
				staged = append(staged, m)
			}
		}
		affected := make([]map[models.SwitchID]bool, last+offset+1)
		for i := range affected {
			affected[i] = map[models.SwitchID]bool{}
		}
		if base != nil {
			affected[offset] = pruning
		}
		for sw := range early {
			affected[offset+1][sw] = true // the first stage after the pruning, if any
		}
		waits := map[models.SwitchID]bool{}
		for _, m := range waiting {
			waits[m.sw] = true
		}
		for sw := range changed {
			if !pruning[sw] && early[sw] == nil && !waits[sw] {
				affected[offset+1][sw] = true // only renamed groups: no move, so at once
			}
		}
		for _, m := range staged {
			d, _ := dist[m.p].Of(m.sw)
			affected[d+offset][m.sw] = true
		}
		// A switch that failed (every link of it down, none by choice)
		// carries no traffic, so its routes cannot loop anyone's, and it
		// cannot confirm a stage: a stage that waited for it waited out
		// stageTimeout, and every later stage behind it. It is written
		// with the rest once the rollout is over (changed).
		for sw := range changed {
			if cutOff(st, sw) {
				for _, set := range affected {
					delete(set, sw)
				}
			}
		}
		r.mu.Lock()
		r.dist, r.early, r.last, r.affected, r.changed, r.offset = dist, early, last+offset, affected, changed, offset
		r.mu.Unlock()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dist, r.early
}

// routeMove is a switch's route toward a destination prefix that moves
// to new next hops.
type routeMove struct {
	sw   models.SwitchID
	p    netip.Prefix
	next []uint32 // the new next-hop ports
}

// classifyMoves compares two plans switch by switch: the switches whose
// state changes (changed), those base's pruning moved from oldPlan
// (pruning), each switch's routes whose new next hops are a subset of
// its old ones (early: they move at the first stage), and the other
// moves (waiting).
func classifyMoves(oldPlan, newPlan models.Plan, base *models.Plan) (changed, pruning map[models.SwitchID]bool, early map[models.SwitchID]map[netip.Prefix]bool, waiting []routeMove) {
	changed, pruning = map[models.SwitchID]bool{}, map[models.SwitchID]bool{}
	early = map[models.SwitchID]map[netip.Prefix]bool{}
	for sw, newSt := range newPlan.Switches {
		oldSt := oldPlan.Switches[sw]
		// Plans hold canonical states: compare them as they are.
		differs := !oldSt.Equal(newSt)
		if differs {
			changed[sw] = true
		}
		if base != nil && !base.Switches[sw].Equal(oldSt) {
			pruning[sw], changed[sw] = true, true // the first stage: to oldPlan
		}
		if !differs {
			// The same state (most often the very same: see
			// pathcalc.Recompute), or the pruning's alone: nothing
			// moves (a leaf link's pruning is 1,152 switches at k=48).
			continue
		}
		moved := changedPrefixes(oldSt, newSt)
		if len(moved) == 0 {
			continue
		}
		oldHops, newHops := hopsOf(oldSt, moved), hopsOf(newSt, moved)
		for _, p := range moved {
			old, ok := oldHops[p]
			if ok && isSubset(newHops[p], old) {
				if early[sw] == nil {
					early[sw] = map[netip.Prefix]bool{}
				}
				early[sw][p] = true
				continue
			}
			waiting = append(waiting, routeMove{sw, p, newHops[p]})
		}
	}
	return changed, pruning, early, waiting
}

// planDistances gives every switch's hop distance toward a destination
// leaf over the links but down, on demand, once each: the plan's own (its
// working has them: at k=48 a rollout's preparation would otherwise
// search up to 2,304 destinations afresh), else searched.
type planDistances struct {
	res  pathcalc.Result
	snap *topology.Snapshot
	down map[models.LinkID]bool
	hops *pathcalc.Hops
	by   map[models.SwitchID]pathcalc.Dist
}

func (p *planDistances) to(leaf models.SwitchID) pathcalc.Dist {
	if d, ok := p.by[leaf]; ok {
		return d
	}
	d, ok := p.res.Distances(leaf, p.down)
	if !ok {
		if p.hops == nil {
			p.hops = pathcalc.NewHops(p.snap, p.down)
		}
		d = p.hops.To(leaf)
	}
	if p.by == nil {
		p.by = map[models.SwitchID]pathcalc.Dist{}
	}
	p.by[leaf] = d
	return d
}

// distances is every switch's hop distance toward one destination
// (pathcalc.Dist).
type distances interface {
	Of(models.SwitchID) (int, bool)
}

// prefixOwners maps every leaf's prefix and host route to the leaf.
func prefixOwners(snap *topology.Snapshot) map[netip.Prefix]models.SwitchID {
	owner := map[netip.Prefix]models.SwitchID{}
	for _, sw := range snap.Switches() {
		if sw.Role != models.RoleLeaf {
			continue
		}
		if sw.Prefix.IsValid() {
			owner[sw.Prefix] = sw.Name
		}
		for _, h := range snap.HostsOn(sw.Name) {
			owner[netip.PrefixFrom(h.IP, 32)] = sw.Name
		}
	}
	return owner
}

// nearer says whether every next hop of sw (by egress port) is a host or
// a switch strictly nearer the destination than sw by dist.
func nearer(snap *topology.Snapshot, dist distances, sw models.SwitchID, ports []uint32) bool {
	mine, ok := dist.Of(sw)
	if !ok {
		return false
	}
	good := true
	snap.EachNeighbor(sw, func(a topology.Adjacency) {
		if !slices.Contains(ports, a.LocalPort) {
			return
		}
		if d, ok := dist.Of(a.Peer); !ok || d >= mine {
			good = false
		}
	})
	return good
}

// hopsOf is the next-hop ports, sorted, of the routes to prefixes.
func hopsOf(st models.ForwardingState, prefixes []netip.Prefix) map[netip.Prefix][]uint32 {
	want := make(map[netip.Prefix]bool, len(prefixes))
	for _, p := range prefixes {
		want[p] = true
	}
	var groups map[uint32][]uint32 // each group's ports, once it is asked for
	out := make(map[netip.Prefix][]uint32, len(prefixes))
	for _, r := range st.Routes {
		switch {
		case !want[r.Prefix]:
		case r.GroupID == 0:
			out[r.Prefix] = []uint32{r.MemberID}
		default:
			if groups == nil {
				groups = map[uint32][]uint32{}
			}
			ports, ok := groups[r.GroupID]
			if !ok {
				if i := slices.IndexFunc(st.Groups, func(g models.Group) bool { return g.ID == r.GroupID }); i >= 0 {
					for _, m := range st.Groups[i].Members {
						ports = append(ports, m.MemberID)
					}
					slices.Sort(ports)
				}
				groups[r.GroupID] = ports
			}
			out[r.Prefix] = ports
		}
	}
	return out
}

// isSubset says whether every element of a (sorted) is in b (sorted); an
// empty a is not (a route that lost every next hop is not a narrowing).
func isSubset(a, b []uint32) bool {
	if len(a) == 0 {
		return false
	}
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}

// changedPrefixes lists, in prefix order, the prefixes whose route (or
// its group's members) differs between two states of a switch
// (routePairs walks the routes).
func changedPrefixes(oldSt, newSt models.ForwardingState) []netip.Prefix {
	members := func(st models.ForwardingState) map[uint32][]models.GroupMember {
		out := make(map[uint32][]models.GroupMember, len(st.Groups))
		for _, g := range st.Groups {
			out[g.ID] = g.Members
		}
		return out
	}
	oldGroups, newGroups := members(oldSt), members(newSt)
	var out []netip.Prefix
	routePairs(oldSt.Routes, newSt.Routes, func(o, n models.Route, hadOld, hasNew bool) {
		if hasNew && (!hadOld || !forwardsAlike(o, n, oldGroups[o.GroupID], newGroups[n.GroupID])) {
			out = append(out, n.Prefix)
		}
	})
	return out
}

// routePairs calls visit with two states' routes side by side in prefix
// order: toward each prefix the old route and the new one, hadOld or
// hasNew false where a side has none. Plans' states are canonical
// (sorted) and walked as they are; others are put in order first.
func routePairs(oldRoutes, newRoutes []models.Route, visit func(o, n models.Route, hadOld, hasNew bool)) {
	if !slices.IsSortedFunc(oldRoutes, models.CompareRoutes) {
		oldRoutes = slices.SortedFunc(slices.Values(oldRoutes), models.CompareRoutes)
	}
	if !slices.IsSortedFunc(newRoutes, models.CompareRoutes) {
		newRoutes = slices.SortedFunc(slices.Values(newRoutes), models.CompareRoutes)
	}
	models.WalkSorted(oldRoutes, newRoutes, models.CompareRoutes, visit)
}

// forwardsAlike says whether old route o and new route n send to the same
// next hops, given the members of the groups they name (a pruned group
// renamed keeps its members).
func forwardsAlike(o, n models.Route, oldMembers, newMembers []models.GroupMember) bool {
	return o.MemberID == n.MemberID && (o.GroupID == 0) == (n.GroupID == 0) &&
		(n.GroupID == 0 || slices.Equal(oldMembers, newMembers))
}

// cutOff says whether every link of sw is down in st and none of them
// by choice (drained or dampened links still carry what is routed over
// them until the rollout moves it).
func cutOff(st *fabricState, sw models.SwitchID) bool {
	links, off := false, true
	st.snap.EachNeighbor(sw, func(a topology.Adjacency) {
		links = true
		off = off && st.down[a.Link] && !st.planned[a.Link]
	})
	return links && off
}

// pruning says whether stage is the rollout's first stage of taking
// every switch to the pruned routes (nothing else moves then: no
// distances are needed, so it can be written before they are known).
func (r *rollout) pruning(stage int) bool { return r.base != nil && stage == 1 }

// touches says whether sw's state differs between the old and the new
// routes (true until prepared): a switch it does not touch takes the new
// state without staging.
func (r *rollout) touches(sw models.SwitchID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed == nil || r.changed[sw]
}

// distanceStage is the stage toward whose distances switches move at the
// current stage (the stage less the offset).
func (r *rollout) distanceStage(stage int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return stage - r.offset
}

// previous is the state being replaced, nil once the rollout is over.
func (r *rollout) previous() *fabricState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prev
}

// stageNow is the stage to program, or 0 when the rollout is over.
func (r *rollout) stageNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage > r.last {
		return 0
	}
	return r.stage
}

// confirmed records that sw was programmed at stage. When that completes
// the stage (every switch whose routes change at it confirmed), the
// rollout moves to the next stage with changes; it returns the switches to
// program then (nil if the stage is not complete), or all of them once the
// rollout is over, for the routes the new plan drops.
//
// A confirmation of the pruning that comes before the stages are
// prepared is kept: after a failure the pruned switches are written
// while the new routes are planned, and the pruning stage then waits
// only for those not confirmed yet (see nextLocked).
func (r *rollout) confirmed(sw models.SwitchID, stage int) []models.SwitchID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stage != r.stage || r.stage > r.last {
		return nil
	}
	if r.affected == nil { // not prepared yet: only the pruning is written before
		if r.pruning(stage) {
			r.synced[sw] = stage
		}
		return nil
	}
	r.synced[sw] = stage
	if r.waitingLocked() {
		return nil
	}
	return r.nextLocked()
}

// failedAt records that sw's write at stage failed: past stageTimeout the
// stage no longer waits for it.
func (r *rollout) failedAt(sw models.SwitchID, stage int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stage == r.stage {
		r.failed[sw] = stage
	}
}

// waitingLocked says whether the current stage still waits for a switch:
// one that has not confirmed it, unless its write at the stage failed and
// stageTimeout passed, or stageBackstop passed.
func (r *rollout) waitingLocked() bool {
	waited := r.now().Sub(r.started)
	for s := range r.affected[r.stage] {
		if r.synced[s] >= r.stage {
			continue
		}
		if waited < stageTimeout || waited < stageBackstop && r.failed[s] < r.stage {
			return true
		}
	}
	return false
}

// abandon ends a rollout that cannot be planned: switches take the new
// state at once.
func (r *rollout) abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.stage, r.prev = 0, 1, nil
}

// begin returns the switches to program first: the first stage with
// changes (or, if no route changes, whatever else changed).
func (r *rollout) begin() []models.SwitchID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.affected == nil {
		return nil
	}
	r.begun = r.now()
	r.stage-- // nextLocked moves to the first stage with changes
	return r.nextLocked()
}

// hasBegun says whether begin was called: the stages are being written.
func (r *rollout) hasBegun() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.begun.IsZero()
}

// nextLocked advances past the current stage and any with no switch
// left to confirm it (no change, or every switch confirmed it already),
// and returns the switches the stage it stops at waits for. Only the
// pruning has switches confirmed before it begins (written while the
// new routes were planned): at k=48 a leaf link's failure prunes 1,152
// switches, and reconciling them all again once planned, to confirm
// what they had confirmed, took 0.25-0.9 s before the next stage could
// start.
func (r *rollout) nextLocked() []models.SwitchID {
	for {
		r.advanceLocked()
		if r.stage > r.last { // done: what the stages left (dropped routes, unused groups)
			return slices.Collect(maps.Keys(r.changed))
		}
		var out []models.SwitchID
		for s := range r.affected[r.stage] {
			if r.synced[s] < r.stage {
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
}

func (r *rollout) advanceLocked() {
	now := r.now()
	if r.stage >= 1 && r.stage < len(r.affected) && len(r.affected[r.stage]) > 0 {
		r.spans = append(r.spans, stageSpan{stage: r.stage, switches: len(r.affected[r.stage]), took: now.Sub(r.started)})
	}
	r.stage++
	r.started = now
	if r.stage > r.last {
		r.prev = nil // done: let the old plan go
	}
}

// stuck moves a rollout past a stage that waited too long for switches
// that cannot take it (see stageTimeout), returning them (left behind)
// and the switches to program next.
func (r *rollout) stuck() (left, next []models.SwitchID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage > r.last || r.affected == nil || r.waitingLocked() {
		return nil, nil
	}
	for s := range r.affected[r.stage] {
		if r.synced[s] < r.stage {
			left = append(left, s)
		}
	}
	slices.Sort(left)
	return left, r.nextLocked()
}

func newRollout(prev *fabricState, now func() time.Time) *rollout {
	t := now()
	return &rollout{prev: prev, oldDown: prev.down, stage: 1, last: 1 << 30, now: now, started: t, began: t, synced: map[models.SwitchID]int{}, failed: map[models.SwitchID]int{}}
}

// staged is what sw should have at stage: per destination prefix, the new
// route where the switch's new distance is within the stage, else the old
// one, with the groups and members those routes use. A group whose members
// differ between the old and the new state while old routes still use it
// is installed in its new form under a stand-in ID (stagedGroupID) for the
// new routes; the rollout's last write gives the real ID the new members
// and moves the routes back to it.
func staged(sw models.SwitchID, stage int, oldSt, newSt models.ForwardingState, dist map[netip.Prefix]distances, early map[netip.Prefix]bool) models.ForwardingState {
	oldGroups := make(map[uint32]models.Group, len(oldSt.Groups))
	for _, g := range oldSt.Groups {
		oldGroups[g.ID] = g
	}
	newGroups := make(map[uint32]models.Group, len(newSt.Groups))
	conflict := map[uint32]bool{}
	for _, g := range newSt.Groups {
		newGroups[g.ID] = g
		if o, ok := oldGroups[g.ID]; ok && !slices.Equal(o.Members, g.Members) {
			conflict[g.ID] = true
		}
	}
	// keepsOld says whether the stage keeps the old route toward n's
	// prefix. A route whose next hops are the same under another group ID
	// (a pruned group renamed) forwards alike either way: take the new.
	keepsOld := func(old, n models.Route) bool {
		var d int
		reaches := false
		if dp, ok := dist[n.Prefix]; ok {
			d, reaches = dp.Of(sw)
		}
		return reaches && d > stage && !early[n.Prefix] && !forwardsAlike(old, n, oldGroups[old.GroupID].Members, newGroups[n.GroupID].Members)
	}
	walk := func(visit func(old, n models.Route, hadOld, hasNew bool)) {
		routePairs(oldSt.Routes, newSt.Routes, visit)
	}
	// Most switches at most stages take the new state whole: no old route
	// is kept, none is dropped. It is the plan's, as it is.
	whole := true
	walk(func(old, n models.Route, hadOld, hasNew bool) {
		whole = whole && hasNew && (!hadOld || !keepsOld(old, n))
	})
	if whole {
		return newSt
	}
	// Which version of each prefix's route this stage uses.
	type choice struct {
		r   models.Route
		old bool
	}
	chosen := make([]choice, 0, max(len(oldSt.Routes), len(newSt.Routes)))
	oldInUse := map[uint32]bool{}
	walk(func(old, n models.Route, hadOld, hasNew bool) {
		if !hasNew || hadOld && keepsOld(old, n) { // dropped, or kept at this stage
			chosen = append(chosen, choice{old, true})
			if old.GroupID != 0 {
				oldInUse[old.GroupID] = true
			}
			return
		}
		chosen = append(chosen, choice{n, false})
	})
	out := models.ForwardingState{FlowPins: newSt.FlowPins, PortMACs: newSt.PortMACs, HashSeed: newSt.HashSeed, Punts: newSt.Punts,
		Routes: make([]models.Route, 0, len(chosen))}
	have := map[uint32]bool{}
	for _, c := range chosen {
		r := c.r
		if r.GroupID != 0 {
			g := oldGroups[r.GroupID]
			if !c.old {
				g = newGroups[r.GroupID]
				if conflict[r.GroupID] && oldInUse[r.GroupID] {
					g.ID = stagedGroupID(g.ID)
					r.GroupID = g.ID
				}
			}
			if !have[g.ID] {
				have[g.ID] = true
				out.Groups = append(out.Groups, g)
			}
		}
		out.Routes = append(out.Routes, r)
	}
	ports := map[uint32]bool{}
	for _, r := range out.Routes {
		if r.MemberID != 0 {
			ports[r.MemberID] = true
		}
	}
	for _, g := range out.Groups {
		for _, m := range g.Members {
			ports[m.MemberID] = true
		}
	}
	for _, m := range append(slices.Clone(newSt.Members), oldSt.Members...) {
		if ports[m.ID] && !slices.ContainsFunc(out.Members, func(x models.Member) bool { return x.ID == m.ID }) {
			out.Members = append(out.Members, m)
		}
	}
	return out.Canonical()
}

// logFinished says, once, that a rollout finished: how long it took from
// the change, how much of it went to planning before the first stage
// (after a failure the pruning is written meanwhile), and each stage's
// switches and time; background work held back for it goes on.
func (ro *rollout) logFinished(log *slog.Logger, u *urgency) {
	if took, planned, stages, ok := ro.finished(); ok {
		log.Info("rollout finished", "took", took.Round(time.Millisecond), "planned", planned.Round(time.Millisecond), "stages", stages)
		u.end(ro) // a failure's: background work goes on
	}
}

// stagedGroupID is the stand-in ID of a group's new form during a rollout
// (the top bit set: pathcalc's group IDs stay far below it).
func stagedGroupID(id uint32) uint32 { return id | 1<<31 }

// Settled reports whether the current routes are fully rolled out, every
// switch is in sync with them, no planned change waits for its turn, no
// reconcile is queued or running (a rollout's last writes, which drop
// what the old routes used, are queued as its last stage completes), and
// no congestion weight is on its way back up.
func (c *Controller) Settled() bool { return c.Unsettled() == "" }

// UnsettledWeights is what Unsettled says when only a congestion weight
// on its way back up keeps the controller from Settled.
const UnsettledWeights = "a congestion weight is on its way back up"

// Unsettled says what keeps the controller from Settled ("" when nothing
// does): for tests and logs that wait on it.
func (c *Controller) Unsettled() string {
	st := c.current()
	if st == nil {
		return "no topology"
	}
	if c.deferred.Load() {
		return "a planned change waits for its turn"
	}
	if err := c.Ready(); err != nil {
		return "not ready: " + err.Error()
	}
	switch {
	case !c.queues.idle():
		var queued []string
		for _, r := range c.queues.all() {
			if !r.queue.Idle() {
				queued = append(queued, fmt.Sprintf("%s: %d queued", r.kind, r.queue.Len()))
			}
		}
		return "reconciles queued or running (" + strings.Join(queued, ", ") + ")"
	case c.congestion.moving():
		return UnsettledWeights
	case st.ro != nil && st.ro.stageNow() != 0:
		return fmt.Sprintf("a rollout is at stage %d", st.ro.stageNow())
	}
	return ""
}

// RollingOut says whether this leader is changing the fabric's routes: a
// change (a failure, a return, a drain, new weights) whose routes are
// being planned or written stage by stage, or a planned change waiting
// for the rollout before it. A failure's pruning and the stages after it
// are one rollout; the writes of its last stage's cleanup follow at once
// (accelnet_rollout_in_progress).
func (c *Controller) RollingOut() bool {
	if !c.Leading() {
		return false // a follower plans, but writes nothing
	}
	if c.deferred.Load() {
		return true
	}
	st := c.current()
	if st == nil {
		return false
	}
	stage, _, _ := st.rollingOut()
	return stage != 0
}
