package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
	"github.com/prometheus/client_golang/prometheus"
)

// fabricState is one topology revision and, computed on first use, its routes.
type fabricState struct {
	rev  int64
	snap *topology.Snapshot
	// down are the links gNMI reports down (either end's oper-status);
	// routes avoid them.
	down map[models.LinkID]bool
	// once starts the routes' computation; ready closes when plan and err
	// are set (see planOf), and done says so without a wait (planReady).
	once  sync.Once
	ready chan struct{}
	done  atomic.Bool
	plan  pathcalc.Result
	err   error
	// stop cancels the routes' computation once abandoned (see
	// abandonPlan): set by the goroutine computing them.
	stop      atomic.Pointer[context.CancelFunc]
	abandoned atomic.Bool
	// ro, when set, rolls the change from the state it replaced out in
	// stages (make-before-break); see rollout.go.
	ro *rollout
	// planned marks the avoided links that are avoided by choice (drained,
	// dampened) rather than because they failed.
	planned map[models.LinkID]bool
	// derive, if set, makes the state's routes from another state's
	// instead of computing them (the pruned step after a failure).
	derive func(ctx context.Context) (pathcalc.Result, error)
	// source, for a derived state, is the computed state its routes come
	// from: a later change's routes are recomputed from source's (see
	// computed), as a pruned plan has none of pathcalc's working.
	source *fabricState
	// basis, if set, is the state of the same topology this one replaces:
	// its routes are made from basis's (pathcalc.Recompute), redoing only
	// what the change of links or weights touches. Cleared once used, so
	// states do not chain.
	basis *fabricState
	// bias are the congestion-aware WCMP weight biases the routes use.
	bias map[models.Endpoint]float64
	// agg are the plan's routes aggregated (pathcalc.Aggregate), by
	// switch, made on first use: a switch's every reconcile needs them.
	aggMu sync.Mutex
	agg   map[models.SwitchID][]models.Route
}

// computed is the state whose computed routes st's come from: st itself,
// or, for a derived state, its source.
func (st *fabricState) computed() *fabricState {
	if st.source != nil {
		return st.source
	}
	return st
}

// setAside returns, when st is a change whose routes are still being
// planned, the state whose routes the switches have instead (the one st
// replaces, planned), or nil when there is none: st's rollout has not
// begun (it needs st's routes), so a failure now can be pruned from that
// state's routes without waiting for st's. Called with c.mu held.
func (st *fabricState) setAside() *fabricState {
	if st.ro == nil {
		return nil // the first routes of a topology: the switches have none of them
	}
	prev := st.ro.previous()
	if prev == nil || !planReady(prev) {
		return nil
	}
	return prev
}

// aggregated is sw's routes in st's plan (computed: see planOf) with
// sibling prefixes that go the same way merged.
// The aggregation runs outside the lock: every worker asks at once after
// a change (a rollout's stage of a hundred switches), and one lock around
// it made them take turns (half a second of waiting over a k=16 failure
// benchmark, mutex profile); two asking for one switch at once may both
// aggregate it, and the first one kept is the answer.
func (st *fabricState) aggregated(sw models.SwitchID) []models.Route {
	st.aggMu.Lock()
	r, ok := st.agg[sw]
	st.aggMu.Unlock()
	if ok {
		return r
	}
	r = pathcalc.Aggregate(st.plan.Plan.Switches[sw].Routes)
	st.aggMu.Lock()
	defer st.aggMu.Unlock()
	if kept, ok := st.agg[sw]; ok {
		return kept
	}
	if st.agg == nil {
		st.agg = map[models.SwitchID][]models.Route{}
	}
	st.agg[sw] = r
	return r
}

// inheritAggregated takes from's aggregated routes for every switch whose
// routes st's plan shares with from's (Recompute keeps the states of the
// switches a change leaves alone): at k=48 aggregating every switch again
// costs half a second.
func (st *fabricState) inheritAggregated(from *fabricState) {
	from.aggMu.Lock()
	defer from.aggMu.Unlock()
	st.aggMu.Lock()
	defer st.aggMu.Unlock()
	for sw, agg := range from.agg {
		a, b := st.plan.Plan.Switches[sw].Routes, from.plan.Plan.Switches[sw].Routes
		if len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] {
			if st.agg == nil {
				st.agg = map[models.SwitchID][]models.Route{}
			}
			st.agg[sw] = agg
		}
	}
}

func (c *Controller) current() *fabricState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state
}

// Snapshot returns the topology the controller acts on, and its revision;
// nil before one is loaded.
func (c *Controller) Snapshot() (*topology.Snapshot, int64) {
	st := c.current()
	if st == nil {
		return nil, 0
	}
	return st.snap, st.rev
}

// running is Run's context while Run runs, else nil.
func (pl *planner) running() context.Context {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.ctx
}

// planOf returns st's routes, computed on first use. The computation
// serves every caller, so it runs under Run's context (one caller giving
// up does not abort it for the others; Run ending does), in a goroutine
// Run waits for; each caller waits only as long as its own ctx allows.
// Outside Run it is computed by the caller, under the caller's ctx.
func (pl *planner) planOf(ctx context.Context, st *fabricState) (pathcalc.Result, error) {
	pl.startPlan(ctx, st)
	select {
	case <-st.ready:
		return st.plan, st.err
	case <-ctx.Done():
		return pathcalc.Result{}, fmt.Errorf("routes of revision %d: %w", st.rev, ctx.Err())
	}
}

// planReady says whether st's routes are computed (or failed). It
// neither waits nor starts them: a failure asks about the change before
// it, which it then sets aside, and starting that change's plan only took
// a core from the pruning everything waits for (a k=48 switch failure's
// first reports started two such plans beside it).
func planReady(st *fabricState) bool { return st.done.Load() }

// written says whether st's routes are being written: its rollout's
// stages began (a topology's first routes, with no rollout, are written
// as soon as they are planned).
func (st *fabricState) written() bool { return st.ro == nil || st.ro.hasBegun() }

// startPlan starts computing st's routes, if nobody has yet.
func (pl *planner) startPlan(ctx context.Context, st *fabricState) {
	st.once.Do(func() {
		st.ready = make(chan struct{})
		pl.beside(ctx, func(ctx context.Context) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st.stop.Store(&cancel)
			if st.abandoned.Load() {
				cancel()
			}
			pl.computePlan(ctx, st)
		})
	})
}

// abandonPlan stops computing st's routes, a change a failure set aside
// (see setAside): nothing will write them, and at k=48 a change of a
// switch's 48 links is a second or more of a core the failure's pruning
// and new routes need. Whoever still waits for them gets an error.
func (st *fabricState) abandonPlan() {
	st.abandoned.Store(true)
	if stop := st.stop.Load(); stop != nil {
		(*stop)()
	}
}

// planner computes fabric states' routes, each once, for every caller
// that waits for them: while Run runs, under its context (ctx) in a
// goroutine Run waits for (background); else in the caller's goroutine.
// It runs the controller's other background work the same way (spawn,
// beside).
type planner struct {
	limits  pathcalc.Limits
	log     *slog.Logger
	seconds prometheus.Observer

	mu         sync.Mutex
	ctx        context.Context
	background sync.WaitGroup
}

// beside runs f in a goroutine under Run's context while Run runs (see
// spawn), else in the caller's goroutine under ctx.
func (pl *planner) beside(ctx context.Context, f func(ctx context.Context)) {
	if !pl.spawn(f) {
		f(ctx)
	}
}

// spawn runs f in a goroutine under Run's context, which Run waits for;
// it reports false, running nothing, when Run is not running.
func (pl *planner) spawn(f func(ctx context.Context)) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.ctx == nil {
		return false
	}
	ctx := pl.ctx
	pl.background.Go(func() { f(ctx) })
	return true
}

// slowPlan is how long a recomputation takes before it is logged.
const slowPlan = time.Second

func (pl *planner) computePlan(ctx context.Context, st *fabricState) {
	defer func() {
		st.done.Store(true)
		close(st.ready)
	}()
	if st.derive != nil {
		st.plan, st.err = st.derive(ctx)
		return
	}
	start := time.Now()
	req := pathcalc.Request{Limits: pl.limits, DownLinks: st.down, PortBias: st.bias}
	basis := st.basis
	st.basis = nil
	var prev pathcalc.Result // none: Recompute computes from scratch
	planned := false         // basis's plan is done, and can be read
	if basis != nil {
		var err error
		prev, err = pl.planOf(ctx, basis)
		planned = err == nil
	}
	began := time.Now() // after the wait for basis's plan
	st.plan, st.err = pathcalc.Recompute(ctx, prev, st.snap, req)
	pl.seconds.Observe(time.Since(start).Seconds())
	if st.err == nil && planned {
		st.inheritAggregated(basis)
	}
	pl.logCompromises(st)
	switch {
	case st.err != nil && st.abandoned.Load():
		// Set aside by a failure (abandonPlan): expected, nothing lost.
		pl.log.Debug("route computation stopped: a failure set its change aside", "revision", st.rev)
	case st.err != nil:
		pl.log.Error("route computation failed", "revision", st.rev, "err", st.err)
	case basis != nil && !planned:
		// Its basis was set aside and stopped: computed from scratch, which
		// at k=48 takes seconds where a recomputation takes a fraction.
		pl.log.Info("routes computed from scratch: the plan they would be made from was stopped", "revision", st.rev, "took", time.Since(start).Round(time.Millisecond))
	case planned && time.Since(began) >= slowPlan:
		// What a slow replan searched in full, and how long it took on
		// the machine as it was (a k=48 replan is a fraction of a second
		// of one core).
		pl.log.Info("routes recomputed slowly", "revision", st.rev, "took", time.Since(began).Round(time.Millisecond),
			"searched_in_full", st.plan.Searched, "destinations", st.plan.Destinations, "links_avoided", len(st.down))
	}
}

// logCompromises logs what a plan gave up as one line (at k=32 a failed
// core link leaves hundreds of leaves with inexact WCMP weights: one
// line each drowned the log), each switch's at debug level.
func (pl *planner) logCompromises(st *fabricState) {
	ws := st.plan.Warnings
	if len(ws) == 0 {
		return
	}
	switches := map[models.SwitchID]bool{}
	for _, w := range ws {
		switches[w.Switch] = true
		pl.log.Debug("route compromise", "switch", w.Switch, "detail", w.Message)
	}
	pl.log.Warn("route compromises", "revision", st.rev, "count", len(ws), "switches", len(switches),
		"first_switch", ws[0].Switch, "first", ws[0].Message, "each", "at debug level")
}

// setTopology installs a new topology revision and queues every switch.
func (c *Controller) setTopology(ctx context.Context, t models.Topology, rev int64) {
	snap, err := topology.New(t)
	if err != nil {
		c.log.Error("stored topology is invalid; keeping the previous one", "revision", rev, "err", err)
		c.mu.Lock()
		c.topoErr = err
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	st := &fabricState{rev: rev, snap: snap, down: c.downLinksLocked(snap), bias: c.congestion.biases()}
	c.state = st
	c.topoErr = nil
	drained := drainsSaid(snap, c.drains)
	c.mu.Unlock()
	if c.cfg.Overlay != nil {
		c.cfg.Overlay.SetFabric(snap, st.down, drained)
	}
	c.m.topologyRevision.Set(float64(rev))
	c.log.Info("topology loaded", "revision", rev, "switches", len(t.Switches), "links", len(t.Links), "hosts", len(t.Hosts))
	c.subs.Sync(ctx, snap.Switches())
	c.plans.warm(ctx, st)
	c.queues.every(front)
	c.queues.configs(front)
}

// warm computes a fabric state's routes in the background, so a follower
// that takes over (or a leader's first reconcile) finds them ready.
func (pl *planner) warm(ctx context.Context, st *fabricState) {
	pl.startPlan(ctx, st)
}

// Status returns every switch's last reconcile outcome.
func (c *Controller) Status() map[models.SwitchID]api.SwitchStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[models.SwitchID]api.SwitchStatus, len(c.status))
	for k, v := range c.status {
		out[k] = v
	}
	return out
}

// TriedAll says every switch of the topology was reconciled at least
// once in this term (read back and brought in sync, or found failing):
// a new leader's first sweep is over. Unlike Ready, it does not wait
// for switches that are down.
func (c *Controller) TriedAll() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil || !c.Leading() {
		return false
	}
	for sw := range c.state.snap.AllSwitches() {
		if c.status[sw.Name].LastReconcile.IsZero() {
			return false
		}
	}
	return true
}

// Ready is nil once a topology is loaded, etcd is watched and every switch
// has been brought in sync at least once; otherwise it says what is missing.
func (c *Controller) Ready() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		if c.topoErr != nil {
			return fmt.Errorf("%w", c.topoErr)
		}
		return store.ErrNoTopology
	}
	if !c.watching {
		return errors.New("not watching etcd")
	}
	if c.cfg.Leadership != nil && c.cfg.Leadership.Term() == nil {
		// A follower serves reads and forwards writes, once it knows
		// where to.
		if url, _ := c.cfg.Leadership.Leader(); url == "" {
			return errors.New("following, and no leader is known yet")
		}
		return nil
	}
	pending := 0
	// Polled (every 50 ms while accelnet starts): the switches are
	// walked, not copied.
	for sw := range c.state.snap.AllSwitches() {
		if st, ok := c.status[sw.Name]; !ok || !st.InSync {
			pending++
		}
	}
	if pending > 0 {
		return fmt.Errorf("%d of %d switches not yet in sync", pending, c.state.snap.NumSwitches())
	}
	return nil
}
