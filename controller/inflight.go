package controller

import (
	"context"
	"sync"
	"time"
)

// inflight bounds how many reconciles (of every kind) run at once, and
// adapts the bound to what the switches absorb. It starts at its maximum
// (every worker) and is halved when reconciles time out the way an
// overload makes them: on several switches (overloadSwitches) and at
// least as often as they complete, within one spacing — at most one cut
// per spacing, since the reconciles in flight together time out together.
// One silent switch, whose reconciles time out while the rest complete,
// cuts nothing. Every reconcile that completes in time adds 1/limit
// (about one a round of limit reconciles). Without it, a fabric whose
// switches (or whose emulator) answer slower than the workers ask keeps
// every worker busy with writes that time out and are sent again from
// the start: at k=48 on two cores, minutes with nothing programmed.
type inflight struct {
	mu       sync.Mutex
	limit    float64
	min, max float64
	running  int
	wake     chan struct{} // closed and replaced at every release
	lastCut  time.Time
	spacing  time.Duration
	now      func() time.Time
	// window counts, since it began, reconciles that timed out (and on
	// which switches) and that completed.
	window struct {
		start          time.Time
		timeouts, done int
		switches       map[string]bool
	}
}

// overloadSwitches is how many switches' reconciles must time out within
// a spacing before the bound is cut.
const overloadSwitches = 4

func newInflight(maxRunning int, spacing time.Duration, now func() time.Time) *inflight {
	m := float64(max(1, maxRunning))
	return &inflight{limit: m, min: 1, max: m, wake: make(chan struct{}), spacing: spacing, now: now}
}

// acquire waits for room, or for ctx to end.
func (l *inflight) acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.running < int(l.limit) {
			l.running++
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// release ends a reconcile of sw; timedOut says it ran out its timeout.
// It reports whether the bound was cut, and the bound.
func (l *inflight) release(sw string, timedOut bool) (cut bool, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	now := l.now()
	w := &l.window
	if w.switches == nil || now.Sub(w.start) >= l.spacing {
		w.start, w.timeouts, w.done, w.switches = now, 0, 0, map[string]bool{}
	}
	if timedOut {
		w.timeouts++
		w.switches[sw] = true
		if len(w.switches) >= overloadSwitches && w.timeouts >= w.done && l.limit > l.min && (l.lastCut.IsZero() || now.Sub(l.lastCut) >= l.spacing) {
			l.limit, l.lastCut, cut = max(l.min, l.limit/2), now, true
			w.start, w.timeouts, w.done, w.switches = now, 0, 0, map[string]bool{}
		}
	} else {
		w.done++
		l.limit = min(l.max, l.limit+1/l.limit)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return cut, int(l.limit)
}

// widen raises the bound and its maximum by n (lowers them, n < 0): a
// first sweep's extra workers come with their own room, and take it
// back when they end, so the bound at other times is as before.
func (l *inflight) widen(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.max = max(1, l.max+float64(n))
	l.limit = min(l.max, max(l.min, l.limit+float64(n)))
	close(l.wake)
	l.wake = make(chan struct{})
}

// bound is the number of reconciles allowed at once now.
func (l *inflight) bound() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}
