package controller

import (
	"context"
	"time"

	"github.com/accelnet/accelnet/models"
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

func newReconciler(kind string, reconcile func(context.Context, models.SwitchID) (int, error), p4runtime bool) *reconciler {
	return &reconciler{kind: kind, queue: NewQueue(50*time.Millisecond, 30*time.Second), reconcile: reconcile, p4runtime: p4runtime}
}

// reconcilers are the controller's kinds of work.
func (c *Controller) reconcilers() []*reconciler {
	return []*reconciler{c.tables, c.config, c.sampling}
}

// idle says no reconcile of any kind is queued or running.
func (c *Controller) idle() bool {
	for _, r := range c.reconcilers() {
		if !r.queue.Idle() {
			return false
		}
	}
	return true
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
