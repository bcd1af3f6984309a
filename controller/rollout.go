package controller

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
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
// changes confirmed it (or stageTimeout, for a switch that cannot be
// reached).

// stageTimeout bounds how long a rollout waits for one stage.
const stageTimeout = 2 * time.Second

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
	synced      map[models.SwitchID]int // stage each switch last confirmed
	dist        map[netip.Prefix]map[models.SwitchID]int
	affected    []map[models.SwitchID]bool // by stage: switches whose routes change then
	changed     map[models.SwitchID]bool   // switches whose state changes at all
	// offset is 1 when the rollout starts with a stage of its own that
	// takes every switch from base to the old state (the pruned routes
	// after a failure): distance d then moves at stage d+1.
	offset int
	once   sync.Once
}

// prepare computes, once, every switch's new distance toward each
// destination prefix and, per stage, the switches whose routes change at
// it: only those are waited for. With base (what the switches have, when
// that is not oldPlan), a first stage takes every switch that differs to
// oldPlan and is waited for.
func (r *rollout) prepare(st *fabricState, oldPlan, newPlan models.Plan, base *models.Plan) map[netip.Prefix]map[models.SwitchID]int {
	r.once.Do(func() {
		dist, last := map[netip.Prefix]map[models.SwitchID]int{}, 0
		for _, sw := range st.snap.Switches() {
			hosts := st.snap.HostsOn(sw.Name)
			if sw.Role != models.RoleLeaf || len(hosts) == 0 {
				continue
			}
			d := pathcalc.Distances(st.snap, sw.Name, st.down)
			for _, v := range d {
				last = max(last, v)
			}
			if sw.Prefix.IsValid() {
				dist[sw.Prefix] = d
			}
			for _, h := range hosts {
				dist[netip.PrefixFrom(h.IP, 32)] = d
			}
		}
		offset := 0
		if base != nil {
			offset = 1
		}
		affected := make([]map[models.SwitchID]bool, last+offset+1)
		for i := range affected {
			affected[i] = map[models.SwitchID]bool{}
		}
		changed := map[models.SwitchID]bool{}
		moves := map[models.SwitchID][]netip.Prefix{}
		for sw, newSt := range newPlan.Switches {
			oldSt := oldPlan.Switches[sw]
			// Plans hold canonical states: compare them as they are.
			if !reflect.DeepEqual(oldSt, newSt) {
				changed[sw] = true
			}
			if base != nil && !reflect.DeepEqual(base.Switches[sw], oldSt) {
				affected[offset][sw], changed[sw] = true, true // the first stage: to oldPlan
			}
			moves[sw] = changedPrefixes(oldSt, newSt)
		}
		// A destination whose every new next hop is nearer to it by the old
		// routes than the switch routing there needs no stages: old and
		// new routes both lead strictly downhill by the old distance, so
		// no mix of them can loop. Those move at the first stage; only the
		// others (a new route that climbs, round a failure or a drain)
		// wait for their distance's stage.
		downhill := r.downhill(st, newPlan, moves)
		first := offset + 1 // after the pruning, if any
		for sw, prefixes := range moves {
			for _, p := range prefixes {
				if downhill[p] {
					affected[first][sw] = true
				} else if d, ok := dist[p][sw]; ok && d <= last {
					affected[d+offset][sw] = true
				}
			}
		}
		for p := range downhill {
			if downhill[p] {
				delete(dist, p) // staged: no distance, the new route at once
			}
		}
		r.mu.Lock()
		r.dist, r.last, r.affected, r.changed, r.offset = dist, last+offset, affected, changed, offset
		r.mu.Unlock()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dist
}

// downhill says, for every destination prefix some switch moves, whether
// each of its new next hops is strictly nearer the destination than the
// switch itself by the distances the old routes follow (over the links
// down before the change).
func (r *rollout) downhill(st *fabricState, newPlan models.Plan, moves map[models.SwitchID][]netip.Prefix) map[netip.Prefix]bool {
	owner := map[netip.Prefix]models.SwitchID{}
	for _, sw := range st.snap.Switches() {
		if sw.Role != models.RoleLeaf {
			continue
		}
		if sw.Prefix.IsValid() {
			owner[sw.Prefix] = sw.Name
		}
		for _, h := range st.snap.HostsOn(sw.Name) {
			owner[netip.PrefixFrom(h.IP, 32)] = sw.Name
		}
	}
	oldDist := map[models.SwitchID]map[models.SwitchID]int{} // by destination leaf, on demand
	out := map[netip.Prefix]bool{}
	for sw, prefixes := range moves {
		if len(prefixes) == 0 {
			continue
		}
		peers := map[uint32]models.SwitchID{}
		for _, a := range st.snap.Neighbors(sw) {
			peers[a.LocalPort] = a.Peer
		}
		newSt := newPlan.Switches[sw]
		routes := map[netip.Prefix]models.Route{}
		for _, rt := range newSt.Routes {
			routes[rt.Prefix] = rt
		}
		for _, p := range prefixes {
			if ok, seen := out[p]; seen && !ok {
				continue
			}
			leaf, known := owner[p]
			if !known {
				out[p] = false
				continue
			}
			if oldDist[leaf] == nil {
				oldDist[leaf] = pathcalc.Distances(st.snap, leaf, r.oldDown)
			}
			d := oldDist[leaf]
			mine, ok := d[sw]
			good := ok
			for _, port := range nextHopPorts(newSt, routes[p]) {
				peer, isSwitch := peers[port]
				if !isSwitch {
					continue // a host: delivered
				}
				if pd, ok := d[peer]; !ok || pd >= mine {
					good = false
				}
			}
			if seen, had := out[p]; !had || seen {
				out[p] = good
			}
		}
	}
	return out
}

// nextHopPorts are the egress ports of a route.
func nextHopPorts(st models.ForwardingState, r models.Route) []uint32 {
	if r.GroupID == 0 {
		return []uint32{r.MemberID}
	}
	for _, g := range st.Groups {
		if g.ID == r.GroupID {
			out := make([]uint32, len(g.Members))
			for i, m := range g.Members {
				out[i] = m.MemberID
			}
			return out
		}
	}
	return nil
}

// changedPrefixes lists the prefixes whose route (or its group's members)
// differs between two states of a switch.
func changedPrefixes(oldSt, newSt models.ForwardingState) []netip.Prefix {
	keys := func(st models.ForwardingState) map[uint32]string {
		out := make(map[uint32]string, len(st.Groups))
		for _, g := range st.Groups {
			out[g.ID] = fmt.Sprint(g.Members)
		}
		return out
	}
	oldKeys, newKeys := keys(oldSt), keys(newSt)
	type hop struct {
		member uint32
		group  string
	}
	old := make(map[netip.Prefix]hop, len(oldSt.Routes))
	for _, r := range oldSt.Routes {
		old[r.Prefix] = hop{r.MemberID, oldKeys[r.GroupID]}
	}
	var out []netip.Prefix
	for _, r := range newSt.Routes {
		if o, ok := old[r.Prefix]; !ok || o != (hop{r.MemberID, newKeys[r.GroupID]}) {
			out = append(out, r.Prefix)
		}
	}
	return out
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
func (r *rollout) confirmed(sw models.SwitchID, stage int, all []models.Switch) []models.SwitchID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stage != r.stage || r.stage > r.last || r.affected == nil {
		return nil
	}
	r.synced[sw] = stage
	for s := range r.affected[r.stage] {
		if r.synced[s] < r.stage && time.Since(r.started) < stageTimeout {
			return nil
		}
	}
	return r.nextLocked(all)
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
	r.stage-- // nextLocked moves to the first stage with changes
	return r.nextLocked(nil)
}

// nextLocked advances past the current stage and any without changes.
func (r *rollout) nextLocked(_ []models.Switch) []models.SwitchID {
	r.advanceLocked()
	for r.stage <= r.last && len(r.affected[r.stage]) == 0 {
		r.advanceLocked()
	}
	var out []models.SwitchID
	if r.stage > r.last { // done: what the stages left (dropped routes, unused groups)
		for s := range r.changed {
			out = append(out, s)
		}
		return out
	}
	for s := range r.affected[r.stage] {
		out = append(out, s)
	}
	return out
}

func (r *rollout) advanceLocked() {
	r.stage++
	r.started = time.Now()
	if r.stage > r.last {
		r.prev = nil // done: let the old plan go
	}
}

// stuck moves a rollout past a stage that waited too long, returning the
// switches to program next.
func (r *rollout) stuck(all []models.Switch) []models.SwitchID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stage > r.last || r.affected == nil || time.Since(r.started) < stageTimeout {
		return nil
	}
	return r.nextLocked(all)
}

func newRollout(prev *fabricState) *rollout {
	return &rollout{prev: prev, oldDown: prev.down, stage: 1, last: 1 << 30, started: time.Now(), synced: map[models.SwitchID]int{}}
}

// staged is what sw should have at stage: per destination prefix, the new
// route where the switch's new distance is within the stage, else the old
// one, with the groups and members those routes use. A group whose members
// differ between the old and the new state while old routes still use it
// is installed in its new form under a stand-in ID (stagedGroupID) for the
// new routes; the rollout's last write gives the real ID the new members
// and moves the routes back to it.
func staged(sw models.SwitchID, stage int, oldSt, newSt models.ForwardingState, dist map[netip.Prefix]map[models.SwitchID]int) models.ForwardingState {
	oldGroups := map[uint32]models.Group{}
	for _, g := range oldSt.Groups {
		oldGroups[g.ID] = g
	}
	newGroups := map[uint32]models.Group{}
	conflict := map[uint32]bool{}
	for _, g := range newSt.Groups {
		newGroups[g.ID] = g
		if o, ok := oldGroups[g.ID]; ok && !slices.Equal(o.Members, g.Members) {
			conflict[g.ID] = true
		}
	}
	oldRoutes := map[netip.Prefix]models.Route{}
	for _, r := range oldSt.Routes {
		oldRoutes[r.Prefix] = r
	}
	// Which version of each prefix's route this stage uses.
	type choice struct {
		r   models.Route
		old bool
	}
	var chosen []choice
	seen := map[netip.Prefix]bool{}
	for _, r := range newSt.Routes {
		seen[r.Prefix] = true
		old, hadOld := oldRoutes[r.Prefix]
		d, reaches := dist[r.Prefix][sw]
		if hadOld && reaches && d > stage {
			chosen = append(chosen, choice{old, true})
		} else {
			chosen = append(chosen, choice{r, false})
		}
	}
	for _, r := range oldSt.Routes { // routes the new plan drops go last
		if !seen[r.Prefix] {
			chosen = append(chosen, choice{r, true})
		}
	}
	oldInUse := map[uint32]bool{}
	for _, c := range chosen {
		if c.old && c.r.GroupID != 0 {
			oldInUse[c.r.GroupID] = true
		}
	}
	out := models.ForwardingState{FlowPins: newSt.FlowPins}
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

// stagedGroupID is the stand-in ID of a group's new form during a rollout
// (the top bit set: pathcalc's group IDs stay far below it).
func stagedGroupID(id uint32) uint32 { return id | 1<<31 }

// Settled reports whether the current routes are fully rolled out, every
// switch is in sync with them, and no planned change waits for its turn.
func (c *Controller) Settled() bool {
	st := c.current()
	if st == nil || c.deferred.Load() || c.Ready() != nil {
		return false
	}
	return st.ro == nil || st.ro.stageNow() == 0
}
