package controller

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestQueueHoldsTheBackgroundLane: while the background lane is held only
// keys Add queued are handed out; a held key Add queues again moves to
// the front and is handed out; let go, the rest follow.
func TestQueueHoldsTheBackgroundLane(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	q.AddBackground("a")
	q.AddBackground("b")
	q.HoldBackground(true)
	q.Add("c")
	if key, ok := q.Get(t.Context()); !ok || key != "c" {
		t.Fatalf("Get = %q %v, want the front lane's c", key, ok)
	}
	q.Done("c")
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if key, ok := q.Get(done); ok {
		t.Fatalf("Get = %q while the background lane is held, want nothing", key)
	}
	q.Add("b") // a change for a switch the resync also queued
	if key, ok := q.Get(t.Context()); !ok || key != "b" {
		t.Fatalf("Get = %q %v, want b, moved to the front lane", key, ok)
	}
	q.Done("b")
	if q.Idle() {
		t.Fatal("idle with a held key waiting")
	}
	q.HoldBackground(false)
	if key, ok := q.Get(t.Context()); !ok || key != "a" {
		t.Fatalf("Get = %q %v after letting go, want a", key, ok)
	}
}

// TestUrgencyWaitsForTheFailuresRollout: background work waits from a
// failure's rollout's start until it ends (a later failure's rollout,
// if one began meanwhile), the queues' background lanes held as long;
// and at most urgentBackstop, whatever happens to the rollout.
func TestUrgencyWaitsForTheFailuresRollout(t *testing.T) {
	var holds []bool
	u := newUrgency(func(held bool) { holds = append(holds, held) })
	if err := u.await(t.Context()); err != nil {
		t.Fatalf("await with no failure: %v", err)
	}
	waits := func() bool {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return u.await(ctx) != nil
	}
	first, second := &rollout{}, &rollout{}
	u.begin(first)
	u.begin(second) // a failure during the first's rollout
	u.end(first)
	if !waits() {
		t.Fatal("background work goes on while the later failure's rollout runs")
	}
	u.end(second)
	if waits() {
		t.Fatal("background work still waits after the rollout ended")
	}
	if !slices.Equal(holds, []bool{true, false}) {
		t.Errorf("background lanes held and let go: %v, want [true false]", holds)
	}
	synctest.Test(t, func(t *testing.T) { // the bubble's clock: no real waiting
		u := newUrgency(func(bool) {})
		u.begin(&rollout{}) // a rollout that never ends
		began := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), urgentBackstop+time.Second)
		defer cancel()
		if err := u.await(ctx); err != nil {
			t.Fatalf("still held %s after a rollout that never ended began: %v", urgentBackstop+time.Second, err)
		}
		if waited := time.Since(began); waited < urgentBackstop {
			t.Fatalf("let go after %s, before the backstop (%s)", waited, urgentBackstop)
		}
	})
}

// TestProbesWaitWhileAFailureIsHandled: a probe round sends nothing while
// a failure is being handled, and goes on once it is over.
func TestProbesWaitWhileAFailureIsHandled(t *testing.T) {
	c, _, _ := discoveryController(t)
	ro := &rollout{}
	c.urgency.begin(ro)
	ended, cancel := context.WithCancel(t.Context())
	cancel() // the round gives up waiting at once
	c.disc.probe(ended, 0)
	if n := c.disc.ProbesSent(); n != 0 {
		t.Fatalf("%d probes sent while a failure is handled", n)
	}
	c.urgency.end(ro)
	c.disc.probe(t.Context(), 0)
	if n := c.disc.ProbesSent(); n != 12 { // 6 links, both ends
		t.Fatalf("%d probes sent once it is over, want 12", n)
	}
}
