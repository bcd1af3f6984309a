package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestQueueDeduplicates(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	defer q.Close()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	if q.Len() != 2 {
		t.Fatalf("len = %d, want 2", q.Len())
	}
	ctx := context.Background()
	k1, _ := q.Get(ctx)
	k2, _ := q.Get(ctx)
	if k1 != "a" || k2 != "b" {
		t.Fatalf("got %s, %s; want FIFO a, b", k1, k2)
	}
}

// TestQueueNeverHandsOutAKeyTwice: a key re-added while a worker holds it
// waits until Done, then comes back once.
func TestQueueNeverHandsOutAKeyTwice(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	defer q.Close()
	ctx := context.Background()
	q.Add("sw")
	k, _ := q.Get(ctx)
	q.Add("sw")
	q.Add("sw")
	if q.Len() != 0 {
		t.Fatalf("key queued while being processed")
	}
	q.Done(k)
	if q.Len() != 1 {
		t.Fatalf("re-added key not queued after Done (len %d)", q.Len())
	}
}

func TestQueueConcurrentWorkers(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	inFlight := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k, ok := q.Get(ctx)
				if !ok {
					return
				}
				mu.Lock()
				if inFlight[k] {
					t.Errorf("%s handed to two workers", k)
				}
				inFlight[k] = true
				mu.Unlock()
				q.Add(k) // re-add while processing
				mu.Lock()
				inFlight[k] = false
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	for i := range 200 {
		q.Add(string(rune('a' + i%5)))
	}
	cancel()
	q.Close()
	wg.Wait()
}

func TestQueueBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(100*time.Millisecond, time.Second)
		defer q.Close()
		var delays []time.Duration
		for range 6 {
			delays = append(delays, q.Retry("sw"))
		}
		want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
		for i := range want {
			if delays[i] != want[i] {
				t.Fatalf("delays = %v, want %v", delays, want)
			}
		}
		// The last Retry's timer decides: the key appears after 1s, not before.
		<-time.After(999 * time.Millisecond) // virtual time inside the bubble
		synctest.Wait()
		if q.Len() != 0 {
			t.Fatal("retried key queued before its backoff")
		}
		<-time.After(2 * time.Millisecond)
		synctest.Wait()
		if q.Len() != 1 {
			t.Fatal("retried key not queued after its backoff")
		}
		q.Forget("sw")
		if d := q.Retry("sw"); d != 100*time.Millisecond {
			t.Fatalf("after Forget the backoff should restart, got %v", d)
		}
	})
}

// handOut takes the next key from q and marks it done.
func handOut(t *testing.T, q *Queue) string {
	t.Helper()
	k, ok := q.Get(context.Background())
	if !ok {
		t.Fatal("queue closed")
	}
	q.Done(k)
	return k
}

// TestQueueChangesGoBeforeResync: keys Add queues are handed out before
// every key AddBackground queued, a background key added again by Add
// moves to the front lane, and a key re-added while processing comes back
// in the most urgent lane it was re-added to.
func TestQueueChangesGoBeforeResync(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	defer q.Close()
	ctx := context.Background()
	next := func() string { return handOut(t, q) }
	for _, k := range []string{"a", "b", "c"} {
		q.AddBackground(k)
	}
	q.Add("d")
	q.Add("b")
	q.AddBackground("d") // already in the front lane: stays there
	if q.Len() != 4 {
		t.Fatalf("len = %d, want 4 (each key once)", q.Len())
	}
	var got []string
	for range 4 {
		got = append(got, next())
	}
	if want := []string{"d", "b", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}

	q.AddBackground("e")
	k, _ := q.Get(ctx)
	q.AddBackground(k) // a resync while it runs: after Done, behind changes
	q.Add("f")
	q.Done(k)
	if a, b := next(), next(); a != "f" || b != "e" {
		t.Fatalf("handed out %s, %s; want f, then e again from the background lane", a, b)
	}
	q.AddBackground("g")
	q.AddBackground("h")
	k, _ = q.Get(ctx)
	q.AddBackground(k)
	q.Add(k) // a change while it runs too: after Done, in front
	q.Done(k)
	if a, b := next(), next(); a != "g" || b != "h" {
		t.Fatalf("handed out %s, %s; want g (re-added by a change), then h", a, b)
	}
	if !q.Idle() {
		t.Fatalf("queue not idle: %d waiting", q.Len())
	}
}

// TestQueueStageGoesFirst: keys AddFirst queues (a rollout's next stage)
// are handed out before the front lane's (a timed-out stage's
// stragglers), a front-lane key added again by AddFirst moves ahead, and
// a key AddFirst re-adds while it is processed comes back ahead too.
func TestQueueStageGoesFirst(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	defer q.Close()
	ctx := context.Background()
	next := func() string { return handOut(t, q) }
	q.AddBackground("resync")
	for _, k := range []string{"s1", "s2", "s3"} {
		q.Add(k) // a stage's stragglers
	}
	q.AddFirst("n1") // the next stage's switches
	q.AddFirst("s3") // a straggler the next stage changes too
	q.Add("n1")      // already ahead: stays there
	if q.Len() != 5 {
		t.Fatalf("len = %d, want 5 (each key once)", q.Len())
	}
	var got []string
	for range 5 {
		got = append(got, next())
	}
	if want := []string{"n1", "s3", "s1", "s2", "resync"}; !slices.Equal(got, want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}

	q.Add("a")
	k, _ := q.Get(ctx) // a is being processed
	q.Add("b")
	q.AddFirst(k)
	q.Done(k)
	if a, b := next(), next(); a != k || b != "b" {
		t.Fatalf("handed out %s, %s; want %s (re-added to the first lane), then b", a, b, k)
	}
	if !q.Idle() {
		t.Fatalf("queue not idle: %d waiting", q.Len())
	}
}

// TestQueueAfterClose: every call on a closed queue returns quietly. A
// failure's hold is let go by a timer or a late rollout, which can come
// after the controller closed its queues (it panicked with a send on the
// closed wake channel).
func TestQueueAfterClose(t *testing.T) {
	q := NewQueue(time.Millisecond, time.Second)
	q.AddBackground("a")
	q.HoldBackground(true)
	q.Close()
	q.HoldBackground(false)
	q.HoldBackground(true)
	q.Add("b")
	q.AddFirst("c")
	q.AddBackground("d")
	q.AddAfter("e", 0)
	q.Retry("f")
	q.Done("a")
	q.Close()
	if k, ok := q.Get(context.Background()); ok {
		t.Fatalf("closed queue handed out %q", k)
	}
}

// TestQueueHurry: a key waiting out its backoff after failures is queued
// at once by Hurry; a key that never failed is not queued by it. Forget
// says whether the key had failed.
func TestQueueHurry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(time.Minute, time.Hour)
		defer q.Close()
		q.Retry("down")
		q.Hurry("healthy")
		synctest.Wait()
		if q.Len() != 0 {
			t.Fatal("a key queued before its backoff, or one that never failed queued by Hurry")
		}
		q.Hurry("down")
		if q.Len() != 1 || handOut(t, q) != "down" {
			t.Fatal("Hurry did not queue the failed key at once")
		}
		<-time.After(2 * time.Minute) // its backoff's timer would have fired by now
		synctest.Wait()
		if q.Len() != 0 {
			t.Fatal("the hurried key's backoff timer queued it again")
		}
		if !q.Forget("down") {
			t.Error("Forget of a failed key says it had not failed")
		}
		if q.Forget("down") || q.Forget("healthy") {
			t.Error("Forget of a key with no failures says it had failed")
		}
	})
}
