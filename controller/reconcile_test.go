package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// tableSwitches is a Driver over switches that keep what is written to
// them, recording every write.
type tableSwitches struct {
	mu     sync.Mutex
	tables map[models.SwitchID]models.ForwardingState
	writes []models.Diff
	reads  int
}

// change changes what sw holds behind the controller's back.
func (s *tableSwitches) change(sw models.SwitchID, fn func(*models.ForwardingState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tables[sw]
	fn(&st)
	s.tables[sw] = st
}

func (s *tableSwitches) Read(_ context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.tables[sw].Canonical(), nil
}

func (s *tableSwitches) Apply(_ context.Context, sw models.SwitchID, d models.Diff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, d)
	st := s.tables[sw]
	st.Members = upsert(st.Members, d.Insert.Members, d.Modify.Members, d.Delete.Members, func(m models.Member) uint32 { return m.ID })
	st.Groups = upsert(st.Groups, d.Insert.Groups, d.Modify.Groups, d.Delete.Groups, func(g models.Group) uint32 { return g.ID })
	st.Routes = upsert(st.Routes, d.Insert.Routes, d.Modify.Routes, d.Delete.Routes, func(r models.Route) netip.Prefix { return r.Prefix })
	st.FlowPins = upsert(st.FlowPins, d.Insert.FlowPins, d.Modify.FlowPins, d.Delete.FlowPins, func(p models.FlowPin) models.FlowKey { return p.Key })
	st.PortMACs = upsert(st.PortMACs, d.Insert.PortMACs, d.Modify.PortMACs, d.Delete.PortMACs, func(m models.PortMAC) uint32 { return m.Port })
	st.Punts = upsert(st.Punts, d.Insert.Punts, nil, d.Delete.Punts, func(t uint16) uint16 { return t })
	if d.Modify.HashSeed != nil {
		seed := *d.Modify.HashSeed
		st.HashSeed = &seed
	}
	s.tables[sw] = st
	return nil
}

// upsert is have with del removed and ins, mod written (by key).
func upsert[T any, K comparable](have, ins, mod, del []T, key func(T) K) []T {
	byKey := map[K]T{}
	var order []K
	for _, x := range have {
		byKey[key(x)] = x
		order = append(order, key(x))
	}
	for _, x := range del {
		delete(byKey, key(x))
	}
	for _, x := range slices.Concat(ins, mod) {
		if _, ok := byKey[key(x)]; !ok {
			order = append(order, key(x))
		}
		byKey[key(x)] = x
	}
	var out []T
	for _, k := range order {
		if x, ok := byKey[k]; ok {
			out = append(out, x)
			delete(byKey, k)
		}
	}
	return out
}

// tableController is a controller over a 2×2 leaf-spine (one host per
// leaf) of tableSwitches, its topology loaded.
func tableController(t *testing.T) (*Controller, *tableSwitches) {
	t.Helper()
	return tableControllerWith(t, 2, 2, Config{})
}

// tableControllerWith is a controller configured as cfg (its store and
// driver filled in) over a leaf-spine of tableSwitches, one host per
// leaf, its topology loaded.
func tableControllerWith(t *testing.T, spines, leaves int, cfg Config) (*Controller, *tableSwitches) {
	t.Helper()
	topo, err := topology.LeafSpine(spines, leaves, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	sws := &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}
	cfg.Store, cfg.Driver = &store.Store{}, sws
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.setTopology(t.Context(), topo, 1)
	return c, sws
}

// TestReconcileIsIncremental: a switch's first reconcile writes its
// routes; the next writes nothing; the controller trusts what it wrote
// (no table read per reconcile) until told to resync, and then writes back
// exactly the one entry that went missing behind its back.
func TestReconcileIsIncremental(t *testing.T) {
	c, sws := tableController(t)
	ctx := t.Context()
	const leaf = models.SwitchID("leaf1")

	n, err := c.Reconcile(ctx, leaf)
	if err != nil || n == 0 {
		t.Fatalf("first reconcile: %d writes, %v; want the switch's routes written", n, err)
	}
	plan, err := c.plans.planOf(ctx, c.current())
	if err != nil {
		t.Fatal(err)
	}
	if d := models.Compute(plan.Plan.Switches[leaf], sws.tables[leaf]); !d.Empty() {
		t.Fatalf("after the first reconcile the switch differs from the plan by %d entries", d.Len())
	}
	// The next reconcile reads the tables once (the driver cannot confirm
	// single pins) and writes nothing.
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 0 {
		t.Fatalf("second reconcile: %d writes, %v; want none", n, err)
	}
	writes, reads := len(sws.writes), sws.reads
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 0 || sws.reads != reads || len(sws.writes) != writes {
		t.Fatalf("third reconcile: %d writes, %v, %d reads and %d write calls more; want nothing at all", n, err, sws.reads-reads, len(sws.writes)-writes)
	}

	// An entry disappears behind the controller's back: it is not read
	// again until a resync, which finds and restores just that entry.
	var lost models.Route
	sws.change(leaf, func(s *models.ForwardingState) { lost, s.Routes = s.Routes[0], s.Routes[1:] })
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 0 {
		t.Fatalf("before a resync: %d writes, %v; want none (the controller trusts what it wrote)", n, err)
	}
	c.Resync(leaf)
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 1 {
		t.Fatalf("after a resync: %d writes, %v; want the one lost route", n, err)
	}
	last := sws.writes[len(sws.writes)-1]
	if len(last.Insert.Routes) != 1 || last.Insert.Routes[0] != lost || last.Len() != 1 {
		t.Fatalf("resync wrote %+v, want an insert of %v alone", last, lost)
	}
}

// TestResyncWaitsBehindAFailure: the periodic resync reads each switch in
// full at its next reconcile, except while a failure is handled: then a
// reconcile diffs against what the switch is known to hold and queues the
// full read behind the failure, which finds what went missing once the
// failure is over.
func TestResyncWaitsBehindAFailure(t *testing.T) {
	c, sws := tableController(t)
	ctx := t.Context()
	const leaf = models.SwitchID("leaf1")
	for range 2 { // written, then read once (the driver cannot confirm single pins)
		if _, err := c.Reconcile(ctx, leaf); err != nil {
			t.Fatal(err)
		}
	}
	var lost models.Route
	sws.change(leaf, func(s *models.ForwardingState) { lost, s.Routes = s.Routes[0], s.Routes[1:] })
	reads := sws.reads
	c.mu.Lock()
	c.resyncEpoch++ // as housekeeping's resync does
	c.mu.Unlock()

	q := c.queues.tables.queue
	for { // what setTopology queued, taken as a worker would
		done, cancel := context.WithCancel(ctx)
		cancel()
		key, ok := q.Get(done)
		if !ok {
			break
		}
		q.Done(key)
	}
	ro := &rollout{}
	c.urgency.begin(ro)
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 0 || sws.reads != reads {
		t.Fatalf("during a failure: %d writes, %v, %d reads; want none (the full read waits)", n, err, sws.reads-reads)
	}
	q.mu.Lock()
	queued := q.queued[string(leaf)]
	q.mu.Unlock()
	if queued != background {
		t.Fatalf("leaf1 queued in lane %d during the failure, want the background lane (%d)", queued, background)
	}
	c.urgency.end(ro)
	if n, err := c.Reconcile(ctx, leaf); err != nil || n != 1 || sws.reads != reads+1 {
		t.Fatalf("after the failure: %d writes, %v, %d reads; want the lost route found by one full read", n, err, sws.reads-reads)
	}
	if last := sws.writes[len(sws.writes)-1]; len(last.Insert.Routes) != 1 || last.Insert.Routes[0] != lost {
		t.Fatalf("resync wrote %+v, want an insert of %v", last, lost)
	}
}

// TestLoadExportSkipsAFailure: the links' load metrics are left for the
// next round while a failure is handled.
func TestLoadExportSkipsAFailure(t *testing.T) {
	c, _ := tableController(t)
	ro := &rollout{}
	c.urgency.begin(ro)
	if c.exportLoad() || testutil.CollectAndCount(c.m.linkUtilization) != 0 {
		t.Fatalf("exported during a failure: %d links' utilization", testutil.CollectAndCount(c.m.linkUtilization))
	}
	c.urgency.end(ro)
	snap, _ := c.Snapshot()
	if !c.exportLoad() || testutil.CollectAndCount(c.m.linkUtilization) != len(snap.Links()) {
		t.Fatalf("after the failure: %d links' utilization, want %d", testutil.CollectAndCount(c.m.linkUtilization), len(snap.Links()))
	}
}

// TestPruningDoesNotWaitForNewRoutes: after a failure, the pruning stage
// writes the old routes pruned while the new routes are still being
// computed (here: never finished). At k=48 the new routes take seconds
// of CPU; the pruning's reconciles must not wait for them and time out.
func TestPruningDoesNotWaitForNewRoutes(t *testing.T) {
	c, sws, leaf := pruningUnderWay(t)
	wait, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a backstop: waiting for the new routes never ends
	defer cancel()
	if _, err := c.Reconcile(wait, leaf); err != nil {
		t.Fatalf("the pruning stage's reconcile: %v", err)
	}
	checkPruned(t, sws, leaf)
}

// TestPruningWorkerDoesNotWaitForNewRoutes: the same through a tables
// worker, which waits for routes before it takes a slot: for the old
// routes it prunes, not the new ones.
func TestPruningWorkerDoesNotWaitForNewRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, sws, leaf := pruningUnderWay(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); c.work(ctx, c.queues.tables) }()
		defer func() { cancel(); <-done }()
		c.queues.tables.queue.Add(string(leaf))
		synctest.Wait() // the worker wrote leaf1, or waits for routes that never come
		sws.mu.Lock()
		written := len(sws.writes) > 1 // the first reconcile's, then the pruning's
		sws.mu.Unlock()
		if !written {
			t.Fatal("leaf1 not pruned: the worker waits for the new routes, which never come")
		}
		checkPruned(t, sws, leaf)
	})
}

// pruningUnderWay is a controller whose leaf1 was programmed, then lost
// its link to spine1: the rollout's pruning stage is under way, the new
// routes being computed and never done.
func pruningUnderWay(t *testing.T) (*Controller, *tableSwitches, models.SwitchID) {
	c, sws := tableController(t)
	ctx := t.Context()
	const leaf = models.SwitchID("leaf1")
	if _, err := c.Reconcile(ctx, leaf); err != nil {
		t.Fatal(err)
	}
	// leaf1's port 2 is its link to spine1: it fails.
	st := c.current()
	link, ok := st.snap.LinkAt(models.Endpoint{Switch: leaf, Port: 2})
	if !ok {
		t.Fatal("no link at leaf1:2")
	}
	down := map[models.LinkID]bool{link.ID(): true}
	cur, err := c.plans.planOf(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	pruned := &fabricState{rev: st.rev, snap: st.snap, down: st.down, derive: func(ctx context.Context) (pathcalc.Result, error) {
		return pathcalc.Result{Plan: pathcalc.Prune(st.snap, cur.Plan, down)}, nil
	}}
	next := &fabricState{rev: st.rev, snap: st.snap, down: down}
	next.once.Do(func() { next.ready = make(chan struct{}) }) // the new routes: being computed, never done
	next.ro = newRollout(pruned, c.cfg.Now)
	next.ro.base = &cur.Plan
	c.mu.Lock()
	c.state = next
	c.mu.Unlock()
	return c, sws, leaf
}

// checkPruned fails t unless leaf's tables send nothing out of port 2.
func checkPruned(t *testing.T, sws *tableSwitches, leaf models.SwitchID) {
	t.Helper()
	sws.mu.Lock()
	have := sws.tables[leaf]
	sws.mu.Unlock()
	for _, g := range have.Groups {
		for _, m := range g.Members {
			if m.MemberID == 2 {
				t.Errorf("%s's group %d still sends out of port 2, whose link failed: %+v", leaf, g.ID, have)
			}
		}
	}
	for _, r := range have.Routes {
		if r.MemberID == 2 {
			t.Errorf("%s's route %v still goes out of port 2, whose link failed", leaf, r.Prefix)
		}
	}
}

// TestCompromisesLoggedOncePerPlan: a plan whose switches give
// something up (more equal-cost ports than a group may hold) is one
// warning line, with the count, not one line per switch.
func TestCompromisesLoggedOncePerPlan(t *testing.T) {
	topo, err := topology.LeafSpine(4, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := New(Config{Store: &store.Store{}, Driver: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}},
		Logger: log, Limits: pathcalc.Limits{MaxGroupSize: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c.setTopology(t.Context(), topo, 1)
	plan, err := c.plans.planOf(t.Context(), c.current())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Warnings) < 2 {
		t.Fatalf("%d warnings; want several (every leaf has more equal-cost ports than a group of 1)", len(plan.Warnings))
	}
	var lines []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m["msg"].(string), "compromise") {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines about compromises, want 1:\n%s", len(lines), buf.String())
	}
	if got := lines[0]["count"]; got != float64(len(plan.Warnings)) {
		t.Fatalf("logged count %v, want %d", got, len(plan.Warnings))
	}
}

// planInBackground makes c compute plans in the background, as Run
// does, until the test ends; then it waits for them.
func planInBackground(t *testing.T, c *Controller) {
	c.plans.mu.Lock()
	c.plans.ctx = t.Context()
	c.plans.mu.Unlock()
	t.Cleanup(func() {
		c.plans.mu.Lock()
		c.plans.ctx = nil
		c.plans.mu.Unlock()
		c.plans.background.Wait()
	})
}

// plannedCurrent has c plan in the background (planInBackground) and
// returns its current state with that state's routes.
func plannedCurrent(t *testing.T, c *Controller) (*fabricState, pathcalc.Result) {
	t.Helper()
	planInBackground(t, c)
	st := c.current()
	routes, err := c.plans.planOf(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return st, routes
}

// TestReplanComesFromThePlanBefore: after a link fails, the new routes
// are made from the plan before (pathcalc.Recompute): the same routes as
// from scratch, the switches the failure leaves alone keep their states
// (shared, not made again) and their aggregated routes.
func TestReplanComesFromThePlanBefore(t *testing.T) {
	c, _ := tableController(t)
	ctx := t.Context()
	st, before := plannedCurrent(t, c)
	aggBefore := map[models.SwitchID][]models.Route{}
	for sw := range before.Plan.Switches {
		aggBefore[sw] = st.aggregated(sw)
	}
	// leaf1's port 2 is its link to spine1: it fails.
	c.observeOperStatus(models.CounterSample{Switch: "leaf1", Port: 2, Has: models.HasOperStatus})
	next := c.current()
	if next == st || len(next.down) != 1 {
		t.Fatalf("no new state routing around the failed link (down: %v)", next.down)
	}
	after, err := c.plans.planOf(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pathcalc.Compute(ctx, next.snap, pathcalc.Request{Limits: c.cfg.Limits, DownLinks: next.down, PortBias: next.bias})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Plan, want.Plan) {
		t.Fatalf("the new routes differ from the routes computed from scratch")
	}
	kept := 0
	for sw, s := range after.Plan.Switches {
		o := before.Plan.Switches[sw].Routes
		if len(s.Routes) == 0 || &s.Routes[0] != &o[0] {
			continue
		}
		kept++
		next.aggMu.Lock()
		agg, ok := next.agg[sw]
		next.aggMu.Unlock()
		if !ok || &agg[0] != &aggBefore[sw][0] {
			t.Errorf("%s keeps its state but not its aggregated routes", sw)
		}
	}
	if kept == 0 || kept == len(after.Plan.Switches) {
		t.Fatalf("%d of %d switch states kept; want those the failure leaves alone (spine2)", kept, len(after.Plan.Switches))
	}
}

// blockedPlan is a state like st, avoiding down, whose routes are being
// computed until free is called (at the latest when the test ends), and
// are then routes.
func blockedPlan(t *testing.T, st *fabricState, down map[models.LinkID]bool, routes pathcalc.Result) (blocked *fabricState, free func()) {
	release := make(chan struct{})
	free = sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the computations are waited for
	return &fabricState{rev: st.rev, snap: st.snap, down: down, planned: st.planned, bias: st.bias,
		derive: func(ctx context.Context) (pathcalc.Result, error) {
			select {
			case <-release:
				return routes, nil
			case <-ctx.Done():
				return pathcalc.Result{}, ctx.Err()
			}
		}}, free
}

// failureBeingPlanned makes current in c a failure of link from st
// (planned as routes) whose new routes are being computed until the test
// ends, pruned (its rollout's first stage) from routes; link's end is
// reported down.
func failureBeingPlanned(t *testing.T, c *Controller, st *fabricState, routes pathcalc.Result, pruned *fabricState, link models.LinkID) *fabricState {
	pending, _ := blockedPlan(t, st, map[models.LinkID]bool{link: true}, pathcalc.Result{})
	pending.ro = newRollout(pruned, c.cfg.Now)
	pending.ro.base = &routes.Plan
	l, _ := st.snap.Link(link)
	c.mu.Lock()
	c.state = pending
	c.operDown[l.A] = true
	c.mu.Unlock()
	return pending
}

// checkSetAside checks the state a failure of leaf1-spine1 made while
// the change before it was still being planned: it is current at once
// (nothing waited for that plan), avoids want, prunes base (what the
// switches have) and plans its routes as from scratch.
func checkSetAside(t *testing.T, c *Controller, pending *fabricState, base models.Plan, want map[models.LinkID]bool) models.Plan {
	t.Helper()
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		// leaf1's port 2 is its link to spine1: it fails.
		c.observeOperStatus(models.CounterSample{Switch: "leaf1", Port: 2, Has: models.HasOperStatus})
		close(done)
	}()
	synctest.Wait()
	select {
	case <-done:
	default:
		t.Fatal("the failure waits for the plan of the change before it")
	}
	next := c.current()
	if next == pending || next.ro == nil || next.ro.base == nil {
		t.Fatal("no new state pruned from the switches' routes")
	}
	if !maps.Equal(next.down, want) {
		t.Fatalf("the new state avoids %v; want %v", next.down, want)
	}
	if !reflect.DeepEqual(*next.ro.base, base) {
		t.Fatal("the pruning's base is not the routes the switches have")
	}
	pruned, err := c.plans.planOf(ctx, next.ro.previous())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pruned.Plan, pathcalc.Prune(next.snap, base, want)) {
		t.Fatal("the pruned routes are not the switches' routes less the failed links")
	}
	after, err := c.plans.planOf(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := pathcalc.Compute(ctx, next.snap, pathcalc.Request{Limits: c.cfg.Limits, DownLinks: want, PortBias: next.bias})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Plan, scratch.Plan) {
		t.Fatal("the new routes differ from the routes computed from scratch")
	}
	return after.Plan
}

// TestFailureSetsAsideAChangeBeingPlanned: a link fails while the change
// before it (here a link back up) is still being planned, or planned but
// not yet rolling out. None of that change's routes were written, so the
// failure is pruned from the routes the switches have, and the new
// routes (which include the change) are planned from those: nothing waits
// for the pending plan. Nor does the pending plan take the cores the
// failure needs: asking whether it is ready does not start it, and if it
// was under way it is stopped. (Pruned from the planned change's routes
// instead, the failure's rollout took the switches to have them: those
// only that change moved were left as they were until a resync, at k=48
// 48 spines and 24 cores a core switch's return had moved.)
func TestFailureSetsAsideAChangeBeingPlanned(t *testing.T) {
	for _, how := range []string{"not started", "under way", "planned"} {
		underWay := how == "under way"
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _ := tableController(t)
				ctx := t.Context()
				planInBackground(t, c)
				st := c.current()
				back := st.snap.Links()[len(st.snap.Links())-1].ID() // leaf2-spine2, down before
				before := &fabricState{rev: st.rev, snap: st.snap, down: map[models.LinkID]bool{back: true}, planned: map[models.LinkID]bool{}, bias: st.bias}
				have, err := c.plans.planOf(ctx, before)
				if err != nil {
					t.Fatal(err)
				}
				after, err := c.plans.planOf(ctx, &fabricState{rev: st.rev, snap: st.snap, down: map[models.LinkID]bool{}, planned: map[models.LinkID]bool{}, bias: st.bias})
				if err != nil {
					t.Fatal(err)
				}
				pending, free := blockedPlan(t, st, map[models.LinkID]bool{}, after) // back is up again
				pending.ro = newRollout(before, c.cfg.Now)
				if how == "planned" {
					free()
					if _, err := c.plans.planOf(ctx, pending); err != nil {
						t.Fatal(err)
					}
				}
				var started atomic.Bool
				derive := pending.derive
				pending.derive = func(ctx context.Context) (pathcalc.Result, error) {
					started.Store(true)
					return derive(ctx)
				}
				c.mu.Lock()
				c.state = pending
				c.mu.Unlock()
				// Under way: a reconcile of leaf1 waits for the pending
				// change's routes (and so starts them).
				var reconciled error
				done := make(chan struct{})
				if underWay {
					go func() {
						_, reconciled = c.Reconcile(ctx, "leaf1")
						close(done)
					}()
					synctest.Wait()
				}
				l1 := st.snap.Links()[0].ID()
				checkSetAside(t, c, pending, have.Plan, map[models.LinkID]bool{l1: true})
				synctest.Wait()
				switch {
				case how == "not started" && started.Load():
					t.Fatal("the failure started the plan of the change it set aside")
				case underWay && (!pending.done.Load() || !errors.Is(pending.err, context.Canceled)):
					t.Fatal("the set-aside change is still being planned")
				}
				if underWay {
					// The reconcile that waited is the current state's.
					<-done
					c.mu.RLock()
					status := c.status["leaf1"]
					c.mu.RUnlock()
					if reconciled != nil || status.LastError != "" {
						t.Fatalf("the reconcile that waited for the abandoned routes failed: %v (status: %q)", reconciled, status.LastError)
					}
				}
			})
		})
	}
}

// TestFailureDuringAFailureBeingPlanned: a second link fails while the
// first failure's routes are still being planned (its pruning being
// written): the second is pruned from the first's pruned routes, and the
// new routes, avoiding both, are planned from the routes before both.
func TestFailureDuringAFailureBeingPlanned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Four spines: two of them keep their routes through both failures.
		c, _ := tableControllerWith(t, 4, 4, Config{})
		ctx := t.Context()
		st, routes := plannedCurrent(t, c)
		at := func(sw models.SwitchID, port uint32) models.LinkID {
			l, ok := st.snap.LinkAt(models.Endpoint{Switch: sw, Port: port})
			if !ok {
				t.Fatalf("no link at %s port %d", sw, port)
			}
			return l.ID()
		}
		l1, l2 := at("leaf1", 2), at("leaf4", 5) // to spine1, to spine4
		first := map[models.LinkID]bool{l2: true}
		pruned := &fabricState{rev: st.rev, snap: st.snap, down: st.down, planned: st.planned, source: st,
			derive: func(context.Context) (pathcalc.Result, error) {
				return pathcalc.Result{Plan: pathcalc.Prune(st.snap, routes.Plan, first)}, nil
			}}
		have, err := c.plans.planOf(ctx, pruned)
		if err != nil {
			t.Fatal(err)
		}
		pending := failureBeingPlanned(t, c, st, routes, pruned, l2)
		after := checkSetAside(t, c, pending, have.Plan, map[models.LinkID]bool{l1: true, l2: true})
		// Recomputed from the routes before both (pathcalc's working is
		// there, not in the pruned routes): what neither failure touches
		// is shared, not made again.
		for _, sw := range []models.SwitchID{"spine2", "spine3"} {
			a, b := after.Switches[sw].Routes, routes.Plan.Switches[sw].Routes
			if len(a) == 0 || &a[0] != &b[0] {
				t.Errorf("%s's routes were made again; want them kept from the routes before both failures", sw)
			}
		}
	})
}

// TestFailureWaitsOnlyForThePruningBeforeIt: a second link fails while
// the first failure's pruning and its new routes are both still being
// planned. Nothing is written yet, but the pruning is what the switches
// are about to have: the second failure waits for it alone, not for the
// first's whole plan (at k=48 a switch failing reports 48 links at once,
// and each report after the first waited seconds for a plan).
func TestFailureWaitsOnlyForThePruningBeforeIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := tableControllerWith(t, 4, 4, Config{})
		ctx := t.Context()
		st, routes := plannedCurrent(t, c)
		l1, l2 := st.snap.Links()[0].ID(), st.snap.Links()[len(st.snap.Links())-1].ID()
		first := map[models.LinkID]bool{l2: true}
		pruned, freePruning := blockedPlan(t, st, st.down, pathcalc.Result{Plan: pathcalc.Prune(st.snap, routes.Plan, first)})
		pruned.source = st
		pending := failureBeingPlanned(t, c, st, routes, pruned, l2)
		done := make(chan struct{})
		go func() {
			l, _ := st.snap.Link(l1)
			c.observeOperStatus(models.CounterSample{Switch: l.A.Switch, Port: l.A.Port, Has: models.HasOperStatus})
			close(done)
		}()
		synctest.Wait()
		freePruning()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the second failure waits for the first failure's new routes, not its pruning")
		}
		next := c.current()
		if next == pending || next.ro == nil || !maps.Equal(next.down, map[models.LinkID]bool{l1: true, l2: true}) {
			t.Fatalf("no new state avoiding both links (down: %v)", next.down)
		}
		again, err := c.plans.planOf(ctx, next.ro.previous())
		if err != nil {
			t.Fatal(err)
		}
		if want := pathcalc.Prune(st.snap, routes.Plan, next.down); !reflect.DeepEqual(again.Plan, want) {
			t.Fatal("the second pruning is not the routes before both less both links")
		}
	})
}

// unreachableSwitch is tableSwitches with one switch that cannot be read.
type unreachableSwitch struct {
	*tableSwitches
	down models.SwitchID
}

func (s unreachableSwitch) Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	if sw == s.down {
		return models.ForwardingState{}, errors.New("connection refused")
	}
	return s.tableSwitches.Read(ctx, sw)
}

// TestTriedAllDoesNotWaitForADownSwitch: the first sweep is over once
// every switch was reconciled, a switch that cannot be reached included
// (Ready still says that one is not in sync).
func TestTriedAllDoesNotWaitForADownSwitch(t *testing.T) {
	topo, err := topology.LeafSpine(2, 2, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	sws := unreachableSwitch{&tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}, "spine2"}
	c, err := New(Config{Store: &store.Store{}, Driver: sws})
	if err != nil {
		t.Fatal(err)
	}
	c.setTopology(t.Context(), topo, 1)
	c.watching = true
	for i, sw := range []models.SwitchID{"leaf1", "leaf2", "spine1", "spine2"} {
		if c.TriedAll() {
			t.Fatalf("tried all after %d of 4 switches", i)
		}
		_, err := c.Reconcile(t.Context(), sw)
		if (err != nil) != (sw == sws.down) {
			t.Fatalf("reconcile %s: %v", sw, err)
		}
	}
	if !c.TriedAll() {
		t.Fatal("every switch reconciled (one failing), yet the sweep is not over")
	}
	if err := c.Ready(); err == nil {
		t.Fatal("ready with spine2 unreachable")
	}
}

// TestTablesWaitForRoutesOutsideTheirTimeout: routes that take longer
// than a reconcile may (a k=48 plan on a busy machine: over 10 s) are
// waited for before the reconcile starts its clock and takes a slot, so
// no reconcile fails for them, and none counts as a switch answering
// slowly.
func TestTablesWaitForRoutesOutsideTheirTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 20 * time.Millisecond
		c, sws := tableControllerWith(t, 2, 2, Config{ReconcileTimeout: timeout})
		bound := c.slots.bound()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		c.plans.mu.Lock()
		c.plans.ctx = ctx // as Run sets it: plans are computed in the background
		c.plans.mu.Unlock()
		defer c.plans.background.Wait()

		st := c.current()
		release := make(chan struct{})
		slow := &fabricState{rev: st.rev, snap: st.snap, down: st.down, derive: func(ctx context.Context) (pathcalc.Result, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return pathcalc.Result{}, ctx.Err()
			}
			return pathcalc.Compute(ctx, st.snap, pathcalc.Request{})
		}}
		c.mu.Lock()
		c.state = slow
		c.mu.Unlock()

		done := make(chan struct{})
		go func() { defer close(done); c.work(ctx, c.queues.tables) }()
		defer func() { cancel(); <-done }()
		c.queues.tables.queue.Add("leaf1")
		// Long past the reconcile's timeout, the routes still being made.
		<-time.After(50 * timeout) // virtual time inside the bubble
		close(release)
		// Past any retry's backoff (at most 30 s), then everything settled.
		<-time.After(time.Minute)
		synctest.Wait()
		sws.mu.Lock()
		written := len(sws.tables["leaf1"].Routes) > 0
		sws.mu.Unlock()
		if !written {
			t.Fatal("leaf1's routes not written after the plan was done")
		}
		if n := testutil.ToFloat64(c.m.reconcileTotal.WithLabelValues("switch", "error")); n != 0 {
			t.Fatalf("%v reconciles failed while the routes were being made", n)
		}
		if b := c.slots.bound(); b != bound {
			t.Fatalf("reconciles at once %d, was %d: waiting for routes counted as slow switches", b, bound)
		}
	})
}

// TestFailureWaitsForAPlanWithoutTheLock: a link that fails while the
// current routes are still being computed (a change just before it)
// waits for them, as its pruning starts from them, but without holding
// the controller's lock meanwhile: other switches' reports and the
// reconciles need it. Once they are there, the failure is routed around
// and pruned from them. (It held the lock for the whole wait: at k=48 a
// reroute decided 1.1 s after the report.) Nor does the report wait: it
// comes from its switch's telemetry stream, whose next reports would
// wait with it (at k=48 a switch failure's were acted on 20-40 s late).
func TestFailureWaitsForAPlanWithoutTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := tableController(t)
		st, routes := plannedCurrent(t, c)
		// A change whose routes are still being computed.
		slow, free := blockedPlan(t, st, st.down, routes)
		c.mu.Lock()
		c.state = slow
		c.mu.Unlock()
		done := make(chan struct{})
		go func() {
			// leaf1's port 2 is its link to spine1: it fails.
			c.observeOperStatus(models.CounterSample{Switch: "leaf1", Port: 2, Has: models.HasOperStatus})
			close(done)
		}()
		synctest.Wait() // the failure waits for slow's routes
		select {
		case <-done:
		default:
			t.Fatal("the report waits for the routes being computed, and its switch's stream with it")
		}
		if !c.mu.TryLock() {
			t.Fatal("the controller's lock is held while a failure waits for the routes being computed")
		}
		c.mu.Unlock()
		if c.current() != slow {
			t.Fatal("the failure was routed around before the routes it prunes were there")
		}
		free()
		<-done
		synctest.Wait() // the reroute, beside the report
		next := c.current()
		if next == slow || len(next.down) != 1 || next.ro == nil || next.ro.base == nil {
			t.Fatalf("after the routes came: no new state pruned from them (down %v)", next.down)
		}
		if !reflect.DeepEqual(*next.ro.base, routes.Plan) {
			t.Fatal("the pruning's base is not the routes the failure waited for")
		}
	})
}

// downSwitches is tableSwitches and interface configuration on switches
// that refuse every request while down.
type downSwitches struct {
	*tableSwitches
	tablesDown, configDown atomic.Bool
	configured             atomic.Int32
	config                 sync.Map // switch → map[uint32]models.InterfaceConfig
}

var errDown = errors.New("rpc error: code = Unavailable desc = switch is down")

func (s *downSwitches) Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	if s.tablesDown.Load() {
		return models.ForwardingState{}, errDown
	}
	return s.tableSwitches.Read(ctx, sw)
}

func (s *downSwitches) Apply(ctx context.Context, sw models.SwitchID, d models.Diff) error {
	if s.tablesDown.Load() {
		return errDown
	}
	return s.tableSwitches.Apply(ctx, sw, d)
}

func (s *downSwitches) GetConfig(_ context.Context, sw models.SwitchID) (map[uint32]models.InterfaceConfig, error) {
	if s.configDown.Load() {
		return nil, errDown
	}
	have, _ := s.config.Load(sw)
	out, _ := have.(map[uint32]models.InterfaceConfig)
	return maps.Clone(out), nil
}

func (s *downSwitches) SetConfig(ctx context.Context, sw models.SwitchID, ports map[uint32]models.InterfaceConfig) error {
	have, err := s.GetConfig(ctx, sw)
	if err != nil {
		return err
	}
	if have == nil {
		have = map[uint32]models.InterfaceConfig{}
	}
	maps.Copy(have, ports)
	s.config.Store(sw, have)
	s.configured.Add(1)
	return nil
}

// TestSwitchBackRetriesItsOtherWorkAtOnce: a switch is down long enough
// for its tables and its configuration to back off for seconds. It comes
// back; its tables go through first. Its configuration, still waiting out
// its backoff, is retried then, not when its backoff ends: the switch
// answers again (in the demo, configuration showed out of sync up to
// 30 s after a switch came back).
func TestSwitchBackRetriesItsOtherWorkAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topo, err := topology.LeafSpine(2, 2, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		for i := range topo.Switches {
			topo.Switches[i].GNMIAddr = "127.0.0.1:1" // configuration managed (by sws)
		}
		sws := &downSwitches{tableSwitches: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}}
		c, err := New(Config{Store: &store.Store{}, Driver: sws, Config: sws})
		if err != nil {
			t.Fatal(err)
		}
		c.setTopology(t.Context(), topo, 1)
		// Down before any worker starts: a reconcile that went through
		// first left nothing to fail (its tables known, no backoff to
		// hurry), and the test failed 1 run in 100.
		sws.tablesDown.Store(true)
		sws.configDown.Store(true)
		ctx, cancel := context.WithCancel(t.Context())
		var workers sync.WaitGroup
		for _, r := range []*reconciler{c.queues.tables, c.queues.config} {
			workers.Go(func() { c.work(ctx, r) })
		}
		defer func() { cancel(); workers.Wait() }()

		c.queues.tables.queue.Add("leaf1")
		c.queues.config.queue.Add("leaf1")
		<-time.After(20 * time.Second) // virtual: both fail, retry, and back off for seconds
		synctest.Wait()
		if sws.configured.Load() != 0 {
			t.Fatal("configured a switch that is down")
		}
		sws.configDown.Store(false)
		sws.tablesDown.Store(false)
		c.queues.tables.queue.Add("leaf1") // its stream came back, say
		synctest.Wait()                    // no virtual time passes
		sws.mu.Lock()
		written := len(sws.writes)
		sws.mu.Unlock()
		if written == 0 {
			t.Fatal("leaf1's tables not written once it came back")
		}
		if sws.configured.Load() == 0 {
			t.Fatal("leaf1's configuration waits out its backoff though its tables went through")
		}
	})
}

// TestStoppedPlansAreNotErrors: a change's routes stopped because a
// failure set the change aside are not an error in the log (a k=48 switch
// failure logged one ERROR a failure, misleading operators); a
// computation that fails otherwise is; and routes whose basis was
// stopped, and so computed from scratch, say so.
func TestStoppedPlansAreNotErrors(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, _ := tableControllerWith(t, 2, 2, Config{Logger: log})
	st := c.current()
	logged := func() map[string]int {
		levels := map[string]int{}
		for line := range strings.Lines(buf.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(m["msg"].(string), "route") {
				levels[m["level"].(string)+" "+m["msg"].(string)]++
			}
		}
		buf.Reset()
		return levels
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	change := func() *fabricState {
		return &fabricState{rev: st.rev, snap: st.snap, down: map[models.LinkID]bool{st.snap.Links()[0].ID(): true}, ready: make(chan struct{})}
	}

	stopped := change()
	stopped.abandonPlan()
	c.plans.computePlan(cancelled, stopped)
	if stopped.err == nil {
		t.Fatal("a computation under a cancelled context succeeded: nothing to check")
	}
	if got := logged(); len(got) != 0 {
		t.Errorf("a plan stopped by a failure logged %v, want nothing at info or above", got)
	}

	failed := change()
	c.plans.computePlan(cancelled, failed)
	if got := logged(); got["ERROR route computation failed"] != 1 {
		t.Errorf("a plan that failed logged %v, want one error", got)
	}

	fresh := change()
	fresh.basis = stopped
	c.plans.computePlan(t.Context(), fresh)
	if fresh.err != nil {
		t.Fatal(fresh.err)
	}
	if got := logged(); got["INFO routes computed from scratch: the plan they would be made from was stopped"] != 1 {
		t.Errorf("routes made from scratch for want of their basis logged %v, want one info line", got)
	}
}
