package controller

import (
	"context"
	"maps"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// PortLoad is a port's measured load.
func (c *Controller) PortLoad(e models.Endpoint) (telemetry.PortLoad, bool) { return c.tele.Port(e) }

// LinkLoad returns the load of l from its two ends' counters.
func (c *Controller) LinkLoad(l models.Link) api.LinkLoad {
	a, okA := c.tele.Port(l.A)
	b, okB := c.tele.Port(l.B)
	ll := api.LinkLoad{ABbps: a.OutBps, BAbps: b.OutBps, ABDropBps: a.DropBps, BADropBps: b.DropBps, ABECNBps: a.ECNBps, BAECNBps: b.ECNBps, Up: true, Measured: okA && okB, Stale: a.Stale || b.Stale}
	switch {
	case reportedDown(a, okA) || reportedDown(b, okB):
		// Down carries nothing: 0 at once, not a decaying average.
		ll = api.LinkLoad{Up: false, Measured: ll.Measured, Stale: ll.Stale}
	case routedAround(c.current(), l.ID()):
		// Drained (or flapping, miswired): its traffic moves off at once,
		// and the average would show it for many intervals after the
		// drain says drained. What it carried over the last interval is
		// what it carries.
		if !a.RecentSince.IsZero() {
			ll.ABbps = a.RecentOutBps
		}
		if !b.RecentSince.IsZero() {
			ll.BAbps = b.RecentOutBps
		}
	}
	if l.Gbps > 0 {
		ll.Utilization = max(ll.ABbps, ll.BAbps) / (l.Gbps * 1e9)
	}
	return ll
}

// reportedDown says whether a port's last oper-status was down. Telemetry
// sees every counter sample before the controller's oper-status tracking
// (operDown) does, so it is never behind it.
func reportedDown(p telemetry.PortLoad, ok bool) bool { return ok && !p.OperUp }

// downLinksLocked derives the links to route around from the ports' last
// reported oper-status.
func (c *Controller) downLinksLocked(snap *topology.Snapshot) map[models.LinkID]bool {
	down := map[models.LinkID]bool{}
	for id := range drainedLinks(snap, c.drains) { // routed around like failed ones
		down[id] = true
	}
	for e, isDown := range c.operDown {
		if !isDown {
			continue
		}
		if l, ok := snap.LinkAt(e); ok {
			down[l.ID()] = true
		}
	}
	for _, id := range c.flaps.suppressed(c.cfg.Now()) { // flapping: kept out until it settles
		if _, err := snap.Link(id); err == nil {
			down[id] = true
		}
	}
	for id := range c.disc.miswired() { // cabled to something else: carries no routes
		down[id] = true
	}
	return down
}

// observeOperStatus follows gNMI oper-status: when the set of down links
// changes, the plan is recomputed around them (a new fabric state of the
// same topology revision) and every switch is queued. It only records and
// enqueues; reconciles do the work.
func (c *Controller) observeOperStatus(s models.CounterSample) {
	if s.Has != models.HasOperStatus {
		return
	}
	e := models.Endpoint{Switch: s.Switch, Port: s.Port}
	// Almost every sample repeats what is known: check under the read
	// lock, as every switch's stream does this for every port, and a
	// steady queue of writers would hold the reconcilers (readers) off.
	c.mu.RLock()
	same := c.operDown[e] == !s.OperUp
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	if c.operDown[e] == !s.OperUp {
		c.mu.Unlock()
		return
	}
	var l models.Link
	isLink := false
	if st := c.state; st != nil {
		l, isLink = st.snap.LinkAt(e)
	}
	wasDown := isLink && (c.operDown[l.A] || c.operDown[l.B])
	c.operDown[e] = !s.OperUp
	if isLink && !wasDown && !s.OperUp {
		c.flaps.failed(l.ID(), c.cfg.Now()) // once per failure, not once per end
	}
	c.mu.Unlock()
	c.refreshDown("link state changed", s.Timestamp, "port", e.String(), "up", s.OperUp)
}

// refreshDown recomputes the links to route around (failed, drained,
// dampened) and, if they changed, replans and queues every switch.
// reported, if set, is when the switch reported the change that prompts
// it (its notification's timestamp): how long ago that was when the
// reroute is decided is logged and measured.
func (c *Controller) refreshDown(why string, reported time.Time, args ...any) {
	ctx := c.plans.running()
	c.mu.Lock()
	st := c.state
	if st == nil || ctx == nil {
		c.mu.Unlock()
		return
	}
	down := c.downLinksLocked(st.snap)
	bias := c.congestion.biases()
	if maps.Equal(down, st.down) && maps.Equal(bias, st.bias) {
		c.mu.Unlock()
		return
	}
	// Every change rolls out in stages (see rollout.go). A link that
	// failed is first pruned from every switch's routes at once (its old
	// routes lose traffic already); planned changes and links coming back
	// roll out from the routes the switches have, and wait for a rollout
	// under way to finish.
	failed := false
	operDown := func(id models.LinkID) bool {
		l, err := st.snap.Link(id)
		return err == nil && (c.operDown[l.A] || c.operDown[l.B])
	}
	for id := range down {
		if !st.down[id] && operDown(id) {
			failed = true // a link failed
		}
	}
	// have is the state whose routes the switches have (or are being
	// given): the failure is pruned from its routes and the new ones are
	// made from them.
	have := st
	if failed && (!planReady(st) || !st.written()) {
		prev := st.setAside()
		if prev == nil {
			wait := st.planning()
			c.mu.Unlock()
			c.refreshOncePlanned(ctx, wait, why, reported, args)
			return
		}
		// The change just before this failure is still being planned, or
		// planned and not rolling out yet, so none of its routes were
		// written: prune what the switches have, and plan the new routes
		// (which include that change) from the routes before it, rather
		// than wait for its plan. (Taken as written, its routes would be
		// the base of this rollout, and the switches only it moved would
		// be left as they were until a resync.)
		have = prev
		st.abandonPlan()
		args = append(args, "pending_change_set_aside", true)
	}
	if !failed && st.ro != nil && st.ro.stageNow() != 0 {
		c.mu.Unlock()
		if !c.deferred.Swap(true) {
			c.log.Info(why+"; waiting for the rollout under way to finish first", args...)
		}
		return
	}
	c.deferred.Store(false)
	next := c.nextState(ctx, st, have, down, bias, failed, operDown)
	c.state = next
	drained := drainsSaid(st.snap, c.drains)
	c.mu.Unlock()
	if c.cfg.Overlay != nil {
		c.cfg.Overlay.SetFabric(st.snap, down, drained)
	}
	args = append(args, "links_avoided", len(down), "pruned_first", failed)
	if !reported.IsZero() {
		since := c.cfg.Now().Sub(reported)
		c.m.rerouteDelay.Observe(since.Seconds())
		args = append(args, "since_report", since.Round(time.Millisecond))
	}
	c.log.Info(why+"; rerouting", args...)
	c.m.linksDown.Set(float64(len(down)))
	if failed {
		c.urgency.begin(next.ro) // background work waits for this rollout
	}
	// What follows waits for plans (seconds at k=48), and refreshDown is
	// called from a switch's telemetry stream for every oper-status change
	// it reports: run in the stream, that wait would hold the switch's
	// later reports, and a k=48 switch failure's neighbours, each holding
	// its stream for a plan, would have their reports acted on 20-40 s
	// late.
	c.plans.beside(ctx, func(ctx context.Context) { c.rollOut(ctx, st, next, failed) })
}

// refreshOncePlanned is refreshDown for a failure that has nothing to
// prune from yet: it waits without the lock, which every switch's report
// and reconcile needs, then looks again (the state may have moved on).
// What is waited for is wait's plan (see planning).
func (c *Controller) refreshOncePlanned(ctx context.Context, wait *fabricState, why string, reported time.Time, args []any) {
	c.plans.beside(ctx, func(ctx context.Context) {
		if _, err := c.plans.planOf(ctx, wait); err != nil && ctx.Err() != nil {
			return
		}
		c.refreshDown(why, reported, args...)
	})
}

// planning is the state whose plan a failure with nothing to prune from
// waits for: the one st replaces, where it is still being planned (the
// pruning of a failure just before, far cheaper than st's new routes: a
// switch failing reports 48 links at once at k=48, and every report
// after the first would wait for a whole plan); st itself only for a
// topology's first routes. Called with c.mu held.
func (st *fabricState) planning() *fabricState {
	if st.ro != nil && st.ro.previous() != nil {
		return st.ro.previous()
	}
	return st
}

// nextState is the fabric state that avoids down (with bias), after st,
// whose rollout starts from have's routes: for a failure, a pruning of
// have's routes first (every switch drops the next hops that no longer
// lead anywhere: a subset of loop-free routes is loop-free), then the
// new routes in stages from there. Called with c.mu held.
func (c *Controller) nextState(ctx context.Context, st, have *fabricState, down map[models.LinkID]bool, bias map[models.Endpoint]float64, failed bool, operDown func(models.LinkID) bool) *fabricState {
	next := &fabricState{rev: st.rev, snap: st.snap, down: down, planned: map[models.LinkID]bool{}, bias: bias, basis: have.computed()}
	for id := range down {
		next.planned[id] = !operDown(id) // avoided by a drain or dampening, not a failure
	}
	if !failed {
		next.ro = newRollout(st, c.cfg.Now)
		return next
	}
	pruned := &fabricState{rev: st.rev, snap: st.snap, down: have.down, planned: have.planned, source: have.computed(), derive: func(ctx context.Context) (pathcalc.Result, error) {
		old, err := c.plans.planOf(ctx, have)
		if err != nil {
			return old, err
		}
		return pathcalc.PruneResult(st.snap, old, down), nil
	}}
	next.ro = newRollout(pruned, c.cfg.Now)
	if cur, err := c.plans.planOf(ctx, have); err == nil {
		next.ro.base = &cur.Plan // what the switches have: the pruning is a stage of its own
	}
	return next
}

// rollOut plans next against the state before it (st, or for a failure
// the pruning) and starts its rollout: for a failure, the pruned
// switches at once, while the new routes are computed.
func (c *Controller) rollOut(ctx context.Context, st, next *fabricState, failed bool) {
	if failed {
		// The switches the pruning changes, at once: they are
		// written while the new routes are computed.
		c.enqueuePruned(ctx, next.ro)
	}
	abandon := func() {
		next.ro.abandon()
		c.urgency.end(next.ro)
	}
	if c.current() != next {
		// Set aside by a failure while its pruning was planned: the
		// later state's rollout includes this change, and its new
		// routes would only take the cores that rollout needs.
		abandon()
		return
	}
	// Plan now, so only the switches whose routes change are
	// programmed, stage by stage; the pins of intents moved off the
	// links follow.
	from := st
	if failed {
		from = next.ro.previous()
	}
	oldPlan, errOld := c.plans.planOf(ctx, from)
	newPlan, errNew := c.plans.planOf(ctx, next)
	// A failure may have set this change aside while it was planned:
	// its routes were never written, and the later state's rollout
	// includes it.
	setAside := c.current() != next
	if setAside || errOld != nil || errNew != nil {
		abandon()
		if !setAside {
			c.queues.every(front)
		}
		return
	}
	next.ro.prepare(next, oldPlan, newPlan, next.ro.base)
	c.queues.stage(next.ro.begin())
	if next.ro.stageNow() == 0 {
		c.urgency.end(next.ro) // nothing to stage: over at once
	}
}

// enqueuePruned queues the switches whose pruned routes differ from what
// they have (every switch, if that cannot be told).
func (c *Controller) enqueuePruned(ctx context.Context, ro *rollout) {
	prev := ro.previous()
	if prev == nil || ro.base == nil {
		c.queues.every(front)
		return
	}
	pruned, err := c.plans.planOf(ctx, prev)
	if err != nil {
		c.queues.every(front)
		return
	}
	for sw, st := range pruned.Plan.Switches {
		// Prune shares the state of every switch it leaves alone, so this
		// compares slice headers for all but the few it changed.
		if !ro.base.Switches[sw].Equal(st) {
			c.Enqueue(sw)
		}
	}
}

// runDeferred applies a planned change that waited for a rollout, once
// that rollout's stages are done (even if a switch is unreachable: its
// stage timed out, and waiting for it would hold every change back).
func (c *Controller) runDeferred() {
	if !c.deferred.Load() {
		return
	}
	if st := c.current(); st != nil && (st.ro == nil || st.ro.stageNow() == 0) {
		c.plans.spawn(func(context.Context) { c.refreshDown("the rollout under way finished", time.Time{}) })
	}
}

// SetDrains sets the operators' drains: routes and intents move off the
// drained switches and links as off failed ones.
func (c *Controller) SetDrains(drains map[string]models.Drain) {
	c.mu.Lock()
	c.drains = maps.Clone(drains)
	c.mu.Unlock()
	c.refreshDown("drains changed", time.Time{}, "drains", len(drains))
}

// DownLinks returns the links the current routes avoid.
func (c *Controller) DownLinks() map[models.LinkID]bool {
	st := c.current()
	if st == nil {
		return nil
	}
	return maps.Clone(st.down)
}

// routedAround says routes in st avoid link id (down, drained, dampened
// or miswired).
func routedAround(st *fabricState, id models.LinkID) bool {
	return st != nil && st.down[id]
}
