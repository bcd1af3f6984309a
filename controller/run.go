package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.plans.mu.Lock()
	c.plans.ctx = ctx
	c.plans.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range c.queues.all() {
		for range c.cfg.Workers {
			wg.Go(func() { c.work(ctx, r) })
		}
	}
	wg.Go(func() { c.housekeeping(ctx) })
	wg.Go(func() { c.keepLatency(ctx) })
	if c.cfg.DiscoveryInterval > 0 && c.cfg.Packets != nil {
		wg.Go(func() { c.disc.discover(ctx) })
	}
	if c.disc.livenessOn() {
		wg.Go(func() { c.disc.watchLiveness(ctx) })
	}
	if c.mesh.on() {
		wg.Go(func() { c.mesh.run(ctx) })
	}
	if c.cfg.Packets != nil {
		wg.Go(func() { c.hosts.serve(ctx) })
	}
	if c.cfg.HostMACs != nil {
		wg.Go(func() { c.hosts.follow(ctx) })
	}
	if c.cfg.Leadership != nil {
		wg.Go(func() { c.followLeadership(ctx) })
	}
	err := c.watchTopology(ctx)
	cancel()
	for _, r := range c.queues.all() {
		r.queue.Close()
	}
	wg.Wait()
	c.subs.Stop()
	c.plans.mu.Lock()
	c.plans.ctx = nil // later plans are computed by their callers
	c.plans.mu.Unlock()
	c.plans.background.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// watchTopology lists the topology then watches it from the next revision,
// re-listing after compaction or a broken watch. It only loads state and
// enqueues; reconciles do the work.
func (c *Controller) watchTopology(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		t, modRev, rev, err := c.cfg.Store.Topology(ctx)
		switch {
		case errors.Is(err, store.ErrNoTopology):
			c.log.Info("no topology in etcd yet; waiting for one", "key", store.KeyTopology)
		case err != nil:
			c.log.Warn("cannot read topology from etcd", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		default:
			if st := c.current(); st == nil || st.rev != modRev {
				c.setTopology(ctx, t, modRev)
			}
		}
		backoff = 100 * time.Millisecond
		c.mu.Lock()
		c.watching = true
		c.mu.Unlock()
		err = c.cfg.Store.WatchKey(ctx, store.KeyTopology, rev+1, func(kv store.KV) {
			if kv.Deleted {
				c.log.Warn("topology deleted from etcd; keeping the last one programmed")
				return
			}
			// The head changed: read the topology its parts make up, at
			// the head's revision.
			next, modRev, _, err := c.cfg.Store.TopologyAt(ctx, kv.Revision)
			if err != nil {
				c.log.Error("cannot read the topology etcd now holds; keeping the last one programmed", "revision", kv.Revision, "err", err)
				return
			}
			c.setTopology(ctx, next, modRev)
		})
		if err != nil && ctx.Err() == nil {
			c.log.Warn("topology watch ended; re-listing", "err", err)
		}
		c.mu.Lock()
		c.watching = false
		c.mu.Unlock()
	}
	return ctx.Err()
}

// writeSummaryEvery is how often what reconciles wrote is logged, summed.
const writeSummaryEvery = 2 * time.Second

// housekeeping periodically resyncs every switch and exports link load.
func (c *Controller) housekeeping(ctx context.Context) {
	resync := time.NewTicker(c.cfg.ResyncInterval)
	defer resync.Stop()
	export := time.NewTicker(c.cfg.TelemetryInterval)
	defer export.Stop()
	damp := time.NewTicker(c.cfg.FlapHalfLife / 4)
	defer damp.Stop()
	var congestion <-chan time.Time
	if c.cfg.CongestionInterval > 0 {
		t := time.NewTicker(c.cfg.CongestionInterval)
		defer t.Stop()
		congestion = t.C
	}
	summary := time.NewTicker(writeSummaryEvery)
	defer summary.Stop()
	for {
		select {
		case <-ctx.Done():
			c.logWrites(ctx)
			return
		case <-summary.C:
			c.logWrites(ctx)
		case <-damp.C:
			c.runDeferred()
			c.refreshDown("flap dampening changed", time.Time{})
			if st := c.current(); st != nil && st.ro != nil {
				stage := st.ro.stageNow()
				if left, next := st.ro.stuck(); next != nil {
					c.log.Warn("rollout stage timed out; moving on without switches that did not take it", "stage", stage, "switches", left)
					c.queues.stage(next)
					st.ro.logFinished(c.log, c.urgency)
				}
			}
		case <-congestion:
			c.adjustWeights()
		case <-c.termBegan:
			// A resync a moment into a new term would drop its handover
			// marks and read most switches in full: the period starts
			// over with the term.
			resync.Reset(c.cfg.ResyncInterval)
		case <-resync.C:
			c.mu.Lock()
			c.resyncEpoch++ // each switch's next reconcile reads it in full (staleKnown)
			c.mu.Unlock()
			if tm := c.handover.current(); tm != nil {
				tm.distrust("") // a resync reads every switch
			}
			// Behind any change: a resync finds nothing to do almost
			// always, and takes longer than a failure may wait.
			c.queues.every(background)
			c.queues.configs(background)
		case <-export.C:
			c.exportLoad()
		}
	}
}

// exportLoad sets every link's utilization and ECN metrics, unless a
// failure is being handled (see urgency.go): that round is left out. It
// says whether it exported.
func (c *Controller) exportLoad() bool {
	if c.urgency.handling() {
		return false
	}
	snap, _ := c.Snapshot()
	if snap == nil {
		return false
	}
	for l := range snap.AllLinks() {
		ll := c.LinkLoad(l)
		c.m.linkUtilization.WithLabelValues(string(l.ID())).Set(ll.Utilization)
		c.m.linkECN.WithLabelValues(string(l.ID())).Set(max(ll.ABECNBps, ll.BAECNBps))
	}
	return true
}

// work runs r's reconciles until ctx ends: one switch at a time from r's
// queue, retried with backoff on error, only while this replica leads.
func (c *Controller) work(ctx context.Context, r *reconciler) {
	for {
		key, ok := r.queue.Get(ctx)
		if !ok {
			return
		}
		sw := models.SwitchID(key)
		tctx, leading := c.term(ctx)
		if !leading {
			// Followers write nothing; a new term queues every switch.
			r.queue.Forget(key)
			r.queue.Done(key)
			continue
		}
		if r.await != nil {
			r.await(tctx, sw) // outside the reconcile's timeout, without a slot
		}
		if c.slots.acquire(tctx) != nil {
			r.queue.Forget(key) // the term or the controller ended
			r.queue.Done(key)
			continue
		}
		err := c.run(tctx, r, sw)
		if cut, bound := c.slots.release(key, errors.As(err, new(timedOut))); cut {
			c.log.Warn("switches answer slower than reconciles are sent; fewer at once", "switch", key, "reconciler", r.kind, "reconciles_at_once", bound)
		}
		c.runDeferred()
		switch {
		case err == nil:
			if r.queue.Forget(key) {
				// It failed before: the switch answers again. The other
				// kinds of work that failed on it retry now, not after
				// their backoff (up to 30 s of configuration shown out of
				// sync after a switch came back).
				for _, o := range c.queues.all() {
					if o != r {
						o.queue.Hurry(key)
					}
				}
			}
			if r.p4runtime {
				// A P4Runtime reconcile went through: we are primary there.
				// (Interface config goes over gNMI, which says nothing of it.)
				c.m.foreignPrimary.DeleteLabelValues(key)
			}
		case tctx.Err() != nil:
			r.queue.Forget(key) // the term or the controller ended
		case errors.Is(err, models.ErrNotPrimary) && c.cfg.Leadership != nil:
			if t := c.cfg.Leadership.Term(); t != nil && c.cfg.Leadership.Holds(tctx, t) {
				// etcd says we lead: a controller that is not one of our
				// replicas took this switch. Report it for this switch and
				// try again later; the rest of the fabric is ours.
				c.foreignPrimary(tctx, sw, err)
				d := r.queue.Retry(key)
				c.log.Warn("another controller is primary for this switch", "switch", key, "reconciler", r.kind, "err", err, "retry_in", d)
				break
			}
			// A switch knows a newer leader: stop, don't retry.
			r.queue.Forget(key)
			c.cfg.Leadership.StepDown(fmt.Sprintf("%s refused our election ID: %v", key, err))
		default:
			d := r.queue.Retry(key)
			c.log.Warn("reconcile failed", "switch", key, "reconciler", r.kind, "err", err, "retry_in", d)
		}
		r.queue.Done(key)
	}
}

// timedOut marks a reconcile error that came with the reconcile's own
// timeout running out; its message is the error's.
type timedOut struct{ error }

func (t timedOut) Unwrap() error { return t.error }

// ForeignStore keeps the switches another controller took, in etcd
// (store.Foreign): every write carries the writer's term's fence.
type ForeignStore interface {
	Put(ctx context.Context, fence clientv3.Cmp, rec models.ForeignPrimary) error
	Delete(ctx context.Context, fence clientv3.Cmp, sw models.SwitchID) error
	Load(ctx context.Context) (map[models.SwitchID]models.ForeignPrimary, error)
}

// foreignPrimary records that a controller other than our replicas holds
// the primary role on a switch.
func (c *Controller) foreignPrimary(ctx context.Context, sw models.SwitchID, err error) {
	c.m.foreignPrimary.WithLabelValues(string(sw)).Set(1)
	c.mu.Lock()
	was := c.foreign[sw]
	c.foreign[sw] = true
	st := c.status[sw]
	st.InSync = false
	st.LastError = "another controller holds the primary role (a higher election ID): " + err.Error()
	st.LastReconcile = c.cfg.Now()
	c.status[sw] = st
	c.mu.Unlock()
	if !was {
		recordForeign(ctx, &c.cfg, c.log, sw, &models.ForeignPrimary{Switch: sw, Since: st.LastReconcile, Error: err.Error()})
	}
}

// recordForeign records in etcd, fenced by this term, that another
// controller took sw (rec) or that it is ours again (nil), for every
// replica's event subscribers (see Config.Foreign).
func recordForeign(ctx context.Context, cfg *Config, log *slog.Logger, sw models.SwitchID, rec *models.ForeignPrimary) {
	if cfg.Foreign == nil {
		return
	}
	t := cfg.Leadership.Term()
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if rec != nil {
		err = cfg.Foreign.Put(ctx, t.Fence(), *rec)
	} else {
		err = cfg.Foreign.Delete(ctx, t.Fence(), sw)
	}
	if err != nil {
		log.Warn("the switch's primary role not recorded in etcd: event subscribers are not told", "switch", sw, "taken", rec != nil, "err", err)
	}
}

// run runs one of r's reconciles of sw with a timeout, a panic turned
// into an error, and metrics; r's skip and after hooks around it.
func (c *Controller) run(ctx context.Context, r *reconciler, sw models.SwitchID) (err error) {
	if r.skip != nil && r.skip(sw) {
		return nil
	}
	if r.after != nil {
		defer func() { r.after(sw, err) }()
	}
	return c.safely(ctx, r.kind, sw, r.reconcile)
}

// safely runs one reconcile of kind ("switch", "config", "sampling") with
// a timeout, a panic turned into an error, and metrics.
func (c *Controller) safely(ctx context.Context, kind string, sw models.SwitchID, reconcile func(context.Context, models.SwitchID) (int, error)) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReconcileTimeout)
	defer cancel()
	start := time.Now()
	writes := 0
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s reconcile of %s panicked: %v\n%s", kind, sw, r, debug.Stack())
		}
		result := "ok"
		switch {
		case err != nil:
			result = "error"
		case writes == 0:
			result = "noop"
		}
		c.m.reconcileTotal.WithLabelValues(kind, result).Inc()
		c.m.reconcileDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	}()
	writes, err = reconcile(ctx, sw)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = timedOut{err} // ran out its own timeout (see inflight)
	}
	return err
}
