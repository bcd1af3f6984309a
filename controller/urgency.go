package controller

import (
	"context"
	"sync"
	"time"
)

// A failure comes first. From the moment a link failure is seen until its
// rollout is over (traffic on the failed link is lost until the pruning is
// written, and routes stay short of capacity until the new plan is), the
// controller's background work waits: the periodic resync's reconciles
// (the queues' background lane) and link discovery's probe rounds (a
// packet-out per fabric port and an LLDP read per switch) and the
// hosts' ARP probes; the links' load exported as metrics and recorded for
// the dashboard's history skip their rounds (at k=48 each reads 55,296
// links' load, a quarter of a second of CPU: execution traces showed
// both beside a failure's pruning); a switch the periodic resync would
// read in full is read after the failure (staleKnown). Over a k=48
// run of failures they take up to a third of the controller's CPU
// (discovery 9–16%, the resync's reconciles most of the rest) and a
// sixth of the emulator's (answering those reads and probes), on the two
// cores where a failure's new routes (about 1.3 s of CPU) need 1.0–9 s
// to plan beside them. The wait ends when the failure's rollout finishes or
// is given up, or urgentBackstop after it began whatever happens, so a
// rollout that never finishes cannot starve them. Planned changes (drains,
// links coming back, congestion weights) do not hold anything up.

// urgentBackstop bounds how long background work waits for one failure.
const urgentBackstop = 30 * time.Second

// urgency is whether a failure is being handled, and the wait on it.
type urgency struct {
	mu sync.Mutex
	// ro is the failure's rollout being waited for (nil: none).
	ro *rollout
	// quiet is closed while no failure is being handled.
	quiet chan struct{}
	timer *time.Timer
	// hold holds (true) or lets go (false) the queues' background lanes.
	hold func(bool)
}

func newUrgency(hold func(bool)) *urgency {
	quiet := make(chan struct{})
	close(quiet)
	return &urgency{quiet: quiet, hold: hold}
}

// begin says a failure's rollout ro is under way: background work waits
// until it ends (end), or for urgentBackstop. A failure during another's
// rollout waits for the later rollout.
func (u *urgency) begin(ro *rollout) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ro == nil {
		u.quiet = make(chan struct{})
		u.hold(true)
	}
	u.ro = ro
	if u.timer != nil {
		u.timer.Stop()
	}
	u.timer = time.AfterFunc(urgentBackstop, func() { u.end(ro) })
}

// end says ro finished or was given up: background work goes on, unless
// ro is not the rollout waited for (a later failure's is, or none).
func (u *urgency) end(ro *rollout) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ro == nil || u.ro != ro {
		return
	}
	u.ro = nil
	u.timer.Stop()
	close(u.quiet)
	u.hold(false)
}

// HandlingFailure says whether a link failure's rollout is under way
// (accelnet_failure_handling): periodic work that can skip a round, such
// as the dashboard's load history, does while it is.
func (c *Controller) HandlingFailure() bool { return c.urgency.handling() }

// handling says whether a failure is being handled.
func (u *urgency) handling() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ro != nil
}

// await returns at once when no failure is being handled, else once none
// is, or with ctx's error when it ends first.
func (u *urgency) await(ctx context.Context) error {
	u.mu.Lock()
	quiet := u.quiet
	u.mu.Unlock()
	select {
	case <-quiet:
		return nil
	default:
	}
	select {
	case <-quiet:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
