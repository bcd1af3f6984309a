package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
)

// knownState is what a switch has: the routes part and the flow pins (a
// map, updated in place by incremental reconciles of that switch only)
// at an overlay generation.
type knownState struct {
	st     models.ForwardingState // without flow pins
	pins   map[models.FlowKey]uint32
	pinGen uint64
	// pinDigest is the digest of pins as of this knownState (pins itself
	// is changed in place by the switch's next reconcile before it is
	// stored again, which a handover mark must not read).
	pinDigest models.Digest
	pinCount  int
	// renames are the plan's group IDs st holds under other IDs (the
	// switch's, adopted: adoptGroupIDs), for its handover mark.
	renames map[uint32]uint32
	// epoch is the controller's resyncEpoch when the switch was last read
	// in full (or taken as its handover mark vouched).
	epoch uint64
}

func (k knownState) full() models.ForwardingState {
	st := k.st
	st.FlowPins = make([]models.FlowPin, 0, len(k.pins))
	for key, port := range k.pins {
		st.FlowPins = append(st.FlowPins, models.FlowPin{Key: key, Port: port})
	}
	return st
}

// pinRefusal is a write error that names the flow pins a switch refused
// for good, and why (southbound.WriteError).
type pinRefusal interface {
	RefusedPins() (keys []models.FlowKey, why string)
}

// reportRefusedPins tells the overlay which flow pins sw refused for good
// in a write of diff, and how many pins sw holds after it (it held before
// of them; the deletions went first, the inserts it did not refuse went in).
func reportRefusedPins(ov Overlay, sw models.SwitchID, err error, diff models.Diff, before int) {
	var we pinRefusal
	if !errors.As(err, &we) {
		return
	}
	keys, why := we.RefusedPins()
	if len(keys) == 0 {
		return
	}
	refused := make(map[models.FlowKey]bool, len(keys))
	for _, k := range keys {
		refused[k] = true
	}
	held := before - len(diff.Delete.FlowPins)
	for _, p := range diff.Insert.FlowPins {
		if !refused[p.Key] {
			held++
		}
	}
	ov.PinsRefused(sw, keys, why, held)
}

// confirm reads back the flow pins a diff wrote or removed and checks
// the switch has exactly that: what makes an intent Installed or its
// deletion done. Without a PinReader the next reconcile reads in full.
func (c *Controller) confirm(ctx context.Context, sw models.SwitchID, diff models.Diff) error {
	pr := c.cfg.Can.PinReader
	if pr == nil {
		c.mu.Lock()
		delete(c.known, sw)
		c.mu.Unlock()
		return nil
	}
	want := map[models.FlowKey]uint32{}
	var keys []models.FlowKey
	for _, part := range []models.ForwardingState{diff.Insert, diff.Modify} {
		for _, p := range part.FlowPins {
			want[p.Key] = p.Port
			keys = append(keys, p.Key)
		}
	}
	for _, p := range diff.Delete.FlowPins {
		keys = append(keys, p.Key)
	}
	if len(keys) == 0 {
		return nil
	}
	got, err := pr.ReadPins(ctx, sw, keys)
	if err != nil {
		return fmt.Errorf("confirm %d flow pins on %s: %w", len(keys), sw, err)
	}
	have := make(map[models.FlowKey]uint32, len(got))
	for _, p := range got {
		have[p.Key] = p.Port
	}
	for _, k := range keys {
		w, wanted := want[k]
		h, present := have[k]
		if wanted != present || w != h {
			return fmt.Errorf("read-back of %s on %s disagrees with the write (want present=%v port %d, have present=%v port %d)", k, sw, wanted, w, present, h)
		}
	}
	return nil
}

// desiredOf is what sw should have now: its routes in st's plan, or
// during a rollout what the current stage gives it (planned false), and
// the stage (0: none). The pruning stage after a failure needs only the
// old routes pruned, so it does not wait for the new routes, which are
// computed meanwhile (at k=48 that is seconds of CPU, more than a
// reconcile's timeout on a busy machine).
func (c *Controller) desiredOf(ctx context.Context, st *fabricState, sw models.SwitchID) (desired models.ForwardingState, stage int, planned bool, err error) {
	stage, prev, pruning := st.rollingOut()
	if pruning {
		old, err := c.plans.planOf(ctx, prev)
		if err == nil {
			return old.Plan.Switches[sw], stage, false, nil
		}
	}
	plan, err := c.plans.planOf(ctx, st)
	if err != nil {
		return desired, stage, false, err
	}
	desired = plan.Plan.Switches[sw]
	if prev == nil || !st.ro.touches(sw) {
		return desired, stage, true, nil
	}
	old, err := c.plans.planOf(ctx, prev)
	if err != nil {
		return desired, stage, true, nil // the new routes at once
	}
	dist, early := st.ro.prepare(st, old, plan, st.ro.base)
	return staged(sw, st.ro.distanceStage(stage), old.Plan.Switches[sw], desired, dist, early[sw]), stage, false, nil
}

// rollingOut is st's rollout stage now (0: none), the state it rolls
// out from (nil: none), and whether the stage is the pruning, which needs
// only that state's routes.
func (st *fabricState) rollingOut() (stage int, prev *fabricState, pruning bool) {
	if st.ro == nil {
		return 0, nil, false
	}
	if stage = st.ro.stageNow(); stage > 0 {
		prev = st.ro.previous()
	}
	return stage, prev, prev != nil && st.ro.pruning(stage)
}

// awaitRoutes waits for the routes a tables reconcile needs first (see
// routesFirst). A k=48 plan on a busy machine takes over 10 s: waited
// for inside the reconcile, every worker's first reconcile timed out,
// and the wait counted as the switches answering slowly. An error is
// left for the reconcile to meet.
func (c *Controller) awaitRoutes(ctx context.Context, _ models.SwitchID) {
	if st := c.current(); st != nil {
		_, _ = c.plans.planOf(ctx, st.routesFirst())
	}
}

// routesFirst is the state whose routes a tables reconcile of st needs
// before anything else: the old routes during a rollout's pruning, else
// st's own.
func (st *fabricState) routesFirst() *fabricState {
	if _, prev, pruning := st.rollingOut(); pruning {
		return prev
	}
	return st
}

// Reconcile makes one switch match the plan: read desired, read actual,
// diff, write the minimal batch, record status. It returns the number of
// updates written.
func (c *Controller) Reconcile(ctx context.Context, sw models.SwitchID) (int, error) {
	st := c.current()
	if st == nil {
		return 0, store.ErrNoTopology
	}
	record := func(s api.SwitchStatus) { c.recordTables(st, sw, s) }
	if c.cfg.Overlay != nil && !c.cfg.Overlay.PinsReady() {
		return 0, nil // queued again once the intents are placed
	}
	if _, err := st.snap.Switch(sw); err != nil {
		c.mu.Lock()
		delete(c.status, sw)
		c.mu.Unlock()
		return 0, nil // no longer in the topology
	}
	desired, stage, planned, err := c.desiredOf(ctx, st, sw)
	if err != nil && ctx.Err() == nil && c.current() != st {
		// A change set aside while this waited for its routes (their
		// computation abandoned): the switch's reconcile is the
		// current state's.
		return c.Reconcile(ctx, sw)
	}
	if err != nil {
		record(api.SwitchStatus{LastError: err.Error()})
		return 0, err
	}
	desired.PortMACs = c.hosts.withLearnedMACs(st.snap, sw, desired.PortMACs)
	switch {
	case c.cfg.Limits.PerLeafRoutes:
	case planned:
		desired.Routes = st.aggregated(sw)
	default: // a rollout's mix, for this switch and stage only
		desired.Routes = pathcalc.Aggregate(desired.Routes)
	}
	defer func() {
		if stage == 0 {
			return
		}
		c.mu.RLock()
		status := c.status[sw]
		c.mu.RUnlock()
		switch {
		case status.InSync:
			c.queues.stage(st.ro.confirmed(sw, stage)) // the next stage's switches
			st.ro.logFinished(c.log, c.urgency)
		case status.LastError != "":
			st.ro.failedAt(sw, stage) // past stageTimeout the stage goes on without it
		}
	}()
	k, cached, epoch := c.staleKnown(sw)
	cmp, incremental := incrementalDiff(c.cfg.Can.PinsDelta, sw, desired, k, cached)
	if !incremental {
		if cmp, err = c.fullDiff(ctx, sw, desired, k, cached); err != nil {
			record(api.SwitchStatus{LastError: err.Error()})
			return 0, fmt.Errorf("read %s: %w", sw, err)
		}
		if !cached {
			k.epoch = epoch // read in full now
		}
	}
	desired, diff, pins, pinGen, pinDigest, renames, pinsBefore := cmp.desired, cmp.diff, cmp.pins, cmp.pinGen, cmp.pinDigest, cmp.renames, cmp.pinsBefore
	entries := desired.Len() - len(desired.FlowPins) + len(pins)
	remember := func() {
		routes := desired
		routes.FlowPins = nil
		c.mu.Lock()
		c.known[sw] = knownState{st: routes, pins: pins, pinGen: pinGen, pinDigest: pinDigest, pinCount: len(pins), renames: renames, epoch: k.epoch}
		c.mu.Unlock()
		if c.cfg.Overlay != nil {
			c.cfg.Overlay.Synced(sw, pinGen)
		}
	}
	forget := func() {
		c.mu.Lock()
		delete(c.known, sw)
		c.mu.Unlock()
	}
	if diff.Empty() {
		remember()
		c.tookBack(ctx, sw, diff)
		record(api.SwitchStatus{InSync: true, Entries: entries})
		return 0, nil
	}
	done, err := c.write(ctx, sw, diff, pinsBefore)
	if err != nil {
		forget()
		record(api.SwitchStatus{LastError: err.Error()})
		return 0, err
	}
	defer done() // after what the controller believes of sw is updated
	remember()
	c.m.writes.WithLabelValues("insert").Add(float64(diff.Insert.Len()))
	c.m.writes.WithLabelValues("modify").Add(float64(diff.Modify.Len()))
	c.m.writes.WithLabelValues("delete").Add(float64(diff.Delete.Len()))
	// One line per switch at debug; at info, housekeeping sums them up
	// (logWrites): a fabric of hundreds of switches would log hundreds of
	// lines per change.
	c.log.Debug("switch programmed", "switch", sw, "insert", diff.Insert.Len(), "modify", diff.Modify.Len(), "delete", diff.Delete.Len())
	c.writeLog.add(sw, diff)
	c.tookBack(ctx, sw, diff)
	record(api.SwitchStatus{InSync: true, Entries: entries, LastWrites: diff.Len()})
	return diff.Len(), nil
}

// recordTables records the outcome of a reconcile of sw's tables under
// st (the config reconciler's part of its status stays).
func (c *Controller) recordTables(st *fabricState, sw models.SwitchID, s api.SwitchStatus) {
	s.LastReconcile = c.cfg.Now()
	s.Revision = st.rev
	c.mu.Lock()
	prev := c.status[sw]
	s.ConfigInSync, s.ConfigError = prev.ConfigInSync, prev.ConfigError
	c.status[sw] = s
	c.mu.Unlock()
	v := 0.0
	if s.InSync {
		v = 1
	}
	c.m.switchInSync.WithLabelValues(string(sw)).Set(v)
}

// write applies diff to sw and confirms it, its handover mark removed
// first; done, once what the controller believes of sw is updated, lets
// the mark be recorded again. A refused write is reported to the
// overlay (pinsBefore: how many pins sw held).
func (c *Controller) write(ctx context.Context, sw models.SwitchID, diff models.Diff, pinsBefore int) (done func(), err error) {
	done = func() {}
	if tm := c.handover.current(); tm != nil {
		if done, err = tm.beforeWrite(ctx, sw); err != nil {
			return nil, err
		}
	}
	if err := c.cfg.Driver.Apply(ctx, sw, diff); err != nil {
		done()
		if c.cfg.Overlay != nil {
			reportRefusedPins(c.cfg.Overlay, sw, err, diff, pinsBefore)
			c.cfg.Overlay.ProgramFailed(sw, err)
		}
		return nil, err
	}
	if err := c.confirm(ctx, sw, diff); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// comparison is what a reconcile compared: desired (under the switch's
// group IDs, renames), the switch's pins and their digest as they will be
// once the diff is written (and the overlay's generation they are of),
// and how many pins the switch held before.
type comparison struct {
	desired    models.ForwardingState
	diff       models.Diff
	pins       map[models.FlowKey]uint32
	pinGen     uint64
	pinDigest  models.Digest
	renames    map[uint32]uint32
	pinsBefore int
}

// staleKnown is what the controller knows sw holds (cached false: to be
// read in full) and the resync epoch now. What was known before the
// latest periodic resync is read in full again, except while a failure
// is handled: then a switch the failure changes (at k=48 a leaf link's
// pruning writes 1,152) is diffed against what it is known to hold, as
// it was until the resync, and queued behind the failure in the
// background lane, whose reconcile reads it in full: a failure in the
// seconds after a resync no longer reads each switch it prunes first.
func (c *Controller) staleKnown(sw models.SwitchID) (k knownState, cached bool, epoch uint64) {
	c.mu.RLock()
	k, cached = c.known[sw]
	epoch = c.resyncEpoch
	c.mu.RUnlock()
	if !cached || k.epoch == epoch {
		return k, cached, epoch
	}
	if c.urgency.handling() {
		c.queues.tables.queue.AddBackground(string(sw))
		return k, true, epoch
	}
	return k, false, epoch
}

// incrementalDiff compares only the pins changed since the generation
// the controller knows sw at, and the routes (a few per destination
// leaf): O(change), not O(table). ok is false where it cannot (no pin
// deltas, sw not known, or a generation too old to answer).
func incrementalDiff(delta DeltaOverlay, sw models.SwitchID, desired models.ForwardingState, k knownState, cached bool) (cmp comparison, ok bool) {
	d := delta
	if d == nil || !cached || k.pins == nil {
		return cmp, false
	}
	changed, pinGen, ok := d.PinsDelta(sw, k.pinGen)
	if !ok {
		return cmp, false
	}
	cmp.pinGen = pinGen
	cmp.desired, cmp.renames = adoptGroupIDs(desired, k.st)
	cmp.diff = models.Compute(cmp.desired, k.st)
	for key, port := range changed {
		have, present := k.pins[key]
		switch {
		case port == 0 && present:
			cmp.diff.Delete.FlowPins = append(cmp.diff.Delete.FlowPins, models.FlowPin{Key: key, Port: have})
		case port != 0 && !present:
			cmp.diff.Insert.FlowPins = append(cmp.diff.Insert.FlowPins, models.FlowPin{Key: key, Port: port})
		case port != 0 && have != port:
			cmp.diff.Modify.FlowPins = append(cmp.diff.Modify.FlowPins, models.FlowPin{Key: key, Port: port})
		}
	}
	cmp.pins = k.pins
	cmp.pinsBefore = len(cmp.pins)
	cmp.pinDigest = k.pinDigest
	for key, port := range changed {
		if have, present := cmp.pins[key]; present {
			cmp.pinDigest.RemovePin(models.FlowPin{Key: key, Port: have})
		}
		if port == 0 {
			delete(cmp.pins, key)
		} else {
			cmp.pins[key] = port
			cmp.pinDigest.AddPin(models.FlowPin{Key: key, Port: port})
		}
	}
	return cmp, true
}

// fullDiff compares desired, with the overlay's pins, against what sw
// holds: as the controller knows it, else as its handover mark vouches,
// else read back in full (the read's error is returned as it is).
func (c *Controller) fullDiff(ctx context.Context, sw models.SwitchID, desired models.ForwardingState, k knownState, cached bool) (cmp comparison, err error) {
	if c.cfg.Overlay != nil {
		desired.FlowPins, cmp.pinGen = c.cfg.Overlay.PinsFor(sw)
	}
	cmp.pins = make(map[models.FlowKey]uint32, len(desired.FlowPins))
	for _, p := range desired.FlowPins {
		cmp.pins[p.Key] = p.Port
	}
	for key, port := range cmp.pins { // the pins kept (desired's, without duplicates)
		cmp.pinDigest.AddPin(models.FlowPin{Key: key, Port: port})
	}
	actual := k.full()
	if !cached {
		var trusted bool
		if actual, trusted = c.handover.trusted(ctx, sw, desired, cmp.pinDigest); !trusted {
			actual, err = c.cfg.Driver.Read(ctx, sw)
			if err != nil {
				return cmp, err // the switch's read failed
			}
			c.m.fullReads.Inc()
		}
	}
	cmp.desired, cmp.renames = adoptGroupIDs(desired, actual)
	cmp.diff = models.Compute(cmp.desired, actual)
	cmp.pinsBefore = len(actual.FlowPins)
	return cmp, nil
}

// tookBack says, once, that a switch another controller held is ours
// again, and what of that controller's was undone: the entries it added
// (deleted now), changed (written back) or removed (inserted again).
func (c *Controller) tookBack(ctx context.Context, sw models.SwitchID, diff models.Diff) {
	c.mu.Lock()
	was := c.foreign[sw]
	delete(c.foreign, sw)
	c.mu.Unlock()
	if !was {
		return
	}
	recordForeign(ctx, &c.cfg, c.log, sw, nil)
	tables := func(f models.ForwardingState) string {
		return fmt.Sprintf("routes=%d flow_pins=%d groups=%d members=%d", len(f.Routes), len(f.FlowPins), len(f.Groups), len(f.Members))
	}
	c.log.Info("primary role back: another controller's changes undone", "switch", sw,
		"deleted", tables(diff.Delete), "rewritten", tables(diff.Modify), "inserted_again", tables(diff.Insert))
}

// writeSummary sums up what reconciles wrote between two log lines.
type writeSummary struct {
	mu                      sync.Mutex
	switches                map[models.SwitchID]bool
	insert, modify, delete_ int
	pinsOnly                bool
	configs, ports          int // switches whose interfaces were configured, ports set
}

func (w *writeSummary) addConfig(ports int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.configs++
	w.ports += ports
}

func (w *writeSummary) add(sw models.SwitchID, diff models.Diff) {
	if diff.Empty() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.switches == nil {
		w.switches, w.pinsOnly = map[models.SwitchID]bool{}, true
	}
	w.switches[sw] = true
	w.insert += diff.Insert.Len()
	w.modify += diff.Modify.Len()
	w.delete_ += diff.Delete.Len()
	w.pinsOnly = w.pinsOnly && diff.Len() == len(diff.Insert.FlowPins)+len(diff.Modify.FlowPins)+len(diff.Delete.FlowPins)
}

// logWrites logs one line for what was written since the last one (none
// if nothing was): at info, or debug when only flow pins changed (intents
// come and go by the thousand).
func (c *Controller) logWrites(ctx context.Context) {
	w := &c.writeLog
	w.mu.Lock()
	n, ins, mod, del, pinsOnly := len(w.switches), w.insert, w.modify, w.delete_, w.pinsOnly
	configs, ports := w.configs, w.ports
	w.switches, w.insert, w.modify, w.delete_, w.configs, w.ports = nil, 0, 0, 0, 0, 0
	w.mu.Unlock()
	if configs > 0 {
		c.log.Info("interface config applied", "switches", configs, "ports", ports, "mtu", c.cfg.MTU)
	}
	if n == 0 {
		return
	}
	level := slog.LevelInfo
	if pinsOnly {
		level = slog.LevelDebug
	}
	c.log.Log(ctx, level, "switches programmed", "switches", n, "insert", ins, "modify", mod, "delete", del, "in_sync", c.Ready() == nil)
}
