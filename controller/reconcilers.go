package controller

import (
	"context"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// reconciler is one kind of work on switches: their tables (P4Runtime),
// their interface configuration (gNMI) or their packet sampling
// (P4Runtime). Each kind has its own queue and workers, keyed by switch
// name alone, so a slow gNMI push never waits behind table writes (or the
// other way round) and a switch's tables and config are worked on at once.
type reconciler struct {
	kind      string // the metrics' "controller" label
	queue     *Queue
	reconcile func(ctx context.Context, sw models.SwitchID) (writes int, err error)
	// p4runtime: a success says this replica is primary on the switch.
	p4runtime bool
	// skip, if set, says a switch has nothing of this kind to reconcile;
	// after, if set, sees every outcome.
	skip  func(sw models.SwitchID) bool
	after func(sw models.SwitchID, err error)
	// await, if set, waits for what a reconcile of sw needs that is not
	// the switch's doing, before it takes a slot and starts its timeout.
	await func(ctx context.Context, sw models.SwitchID)
}

// workQueues are the controller's three kinds of work on switches, and
// how switches are queued on them: one, a stage's ahead of the rest,
// every switch, every switch's configuration. They read the current
// fabric; configured says interface configuration is managed (a
// ConfigDriver), sampled that leaves sample (a Sampler and SampleOneIn).
type workQueues struct {
	tables, config, sampling *reconciler
	fabric                   func() *fabricState
	configured, sampled      bool
}

// all are the kinds of work.
func (w *workQueues) all() []*reconciler {
	return []*reconciler{w.tables, w.config, w.sampling}
}

// idle says no reconcile of any kind is queued or running.
func (w *workQueues) idle() bool {
	for _, r := range w.all() {
		if !r.queue.Idle() {
			return false
		}
	}
	return true
}

// stage queues the switches a rollout's stage changes ahead of every
// other change: a stage that timed out leaves its stragglers queued, and
// the next stage must not wait behind them.
func (w *workQueues) stage(switches []models.SwitchID) {
	for _, sw := range switches {
		w.tables.queue.AddFirst(string(sw))
	}
}

// every queues every switch's tables in lane l.
func (w *workQueues) every(l lane) {
	st := w.fabric()
	if st == nil {
		return
	}
	for _, sw := range st.snap.Switches() {
		w.tables.queue.addIn(string(sw.Name), l)
	}
}

// configs queues every switch's configuration, in lane l: interfaces
// (gNMI) and, on leaves, packet sampling (P4Runtime).
func (w *workQueues) configs(l lane) {
	st := w.fabric()
	if st == nil {
		return
	}
	for _, sw := range st.snap.Switches() {
		w.configOf(st.snap, sw.Name, l)
	}
}

// configOf queues sw's configuration in lane l.
func (w *workQueues) configOf(snap *topology.Snapshot, sw models.SwitchID, l lane) {
	if w.configured {
		w.config.queue.addIn(string(sw), l)
	}
	if w.sampled && len(snap.HostsOn(sw)) > 0 {
		w.sampling.queue.addIn(string(sw), l)
	}
}

func newReconciler(kind string, reconcile func(context.Context, models.SwitchID) (int, error), p4runtime bool) *reconciler {
	return &reconciler{kind: kind, queue: NewQueue(50*time.Millisecond, 30*time.Second), reconcile: reconcile, p4runtime: p4runtime}
}

// reconcileSampling makes a leaf sample its host-facing ports, all of
// them at SampleOneIn. (Without sampling nothing is queued: entries an
// earlier run wrote stay, and their digests are dropped unread.)
func (c *Controller) reconcileSampling(ctx context.Context, sw models.SwitchID) (int, error) {
	st := c.current()
	sampler := c.cfg.Can.Sampler
	if st == nil || sampler == nil {
		return 0, nil
	}
	var ports []uint32
	for _, h := range st.snap.HostsOn(sw) {
		ports = append(ports, h.Attach.Port)
	}
	return 0, sampler.SetSampling(ctx, sw, ports, c.cfg.SampleOneIn)
}
