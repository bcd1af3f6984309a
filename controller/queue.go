package controller

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Queue is a work queue of keys with controller-runtime's guarantees: a key
// queued many times is handed out once; a key is never handed to two
// workers at once (re-adding it while it is processed queues it again for
// after Done); failed keys come back after an exponential backoff.
//
// Keys come in three lanes, handed out in this order: AddFirst's (a
// rollout's stage), Add's (a change: a failure's pruning, a new
// topology) and AddBackground's (the periodic resync of every switch).
// A key added again to a more urgent lane moves there. At k=48 a resync is
// 2,880 reconciles that take longer than the interval between failures;
// in one lane a failure's few switches waited behind all of them. And a
// failure's pruning writes 1,152 switches: when its stage timed out with
// hundreds still queued, the next stages' switches (one, then 47) waited
// behind them and timed out in turn (a 7.3 s rollout whose last two
// stages had 48 switches to write).
type Queue struct {
	mu         sync.Mutex
	lanes      [background][]string // by lane, first first
	queued     map[string]lane
	processing map[string]bool
	again      map[string]lane // re-added while processing
	failures   map[string]int
	timers     map[string]*time.Timer
	wake       chan struct{}
	closed     bool
	// held keeps the background lane's keys waiting (HoldBackground).
	held bool

	baseDelay, maxDelay time.Duration
}

// NewQueue returns an empty queue; backoff runs from base to max.
func NewQueue(base, max time.Duration) *Queue {
	return &Queue{
		queued:     map[string]lane{},
		processing: map[string]bool{},
		again:      map[string]lane{},
		failures:   map[string]int{},
		timers:     map[string]*time.Timer{},
		wake:       make(chan struct{}, 1),
		baseDelay:  base,
		maxDelay:   max,
	}
}

// signal wakes one blocked Get. Callers hold mu; after Close the wake
// channel is closed and every Get is awake already, so it does nothing
// (a failure's hold can end after the controller stopped: urgency's
// backstop timer, or a rollout given up late).
func (q *Queue) signal() {
	if q.closed {
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// lane is where a key waits: first (a rollout's stage), front (a
// change) or background (a resync); a lower lane is handed out first.
type lane uint8

const (
	noLane lane = iota
	first
	front
	background
)

// AddFirst queues key now, ahead of every key Add queued.
func (q *Queue) AddFirst(key string) { q.addIn(key, first) }

// Add queues key now, in the front lane.
func (q *Queue) Add(key string) { q.addIn(key, front) }

// AddBackground queues key behind every key Add queued (see Queue).
func (q *Queue) AddBackground(key string) { q.addIn(key, background) }

func (q *Queue) addIn(key string, l lane) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key, l)
}

func (q *Queue) addLocked(key string, l lane) {
	if q.closed {
		return
	}
	if q.processing[key] {
		if a := q.again[key]; a == noLane || l < a {
			q.again[key] = l
		}
		return
	}
	if a := q.queued[key]; a != noLane {
		if a <= l {
			return
		}
		keys := &q.lanes[a-1]
		i := slices.Index(*keys, key)
		*keys = slices.Delete(*keys, i, i+1)
	}
	q.queued[key] = l
	q.lanes[l-1] = append(q.lanes[l-1], key)
	q.signal()
}

// AddAfter queues key after d, unless it is queued sooner.
func (q *Queue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if t := q.timers[key]; t != nil {
		t.Stop()
	}
	q.timers[key] = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.timers, key)
		q.addLocked(key, front)
	})
}

// Retry queues key after its next backoff delay and returns the delay.
func (q *Queue) Retry(key string) time.Duration {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.baseDelay << min(n, 20)
	if d > q.maxDelay || d <= 0 {
		d = q.maxDelay
	}
	q.AddAfter(key, d)
	return d
}

// Forget resets key's backoff after a success; it reports whether key
// had failed since its last success.
func (q *Queue) Forget(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	failed := q.failures[key] > 0
	delete(q.failures, key)
	return failed
}

// Hurry queues key now if it failed and waits out its backoff: another
// kind of work on the same switch just went through after failing, so
// the switch answers again (it restarted, its link came back) and this
// one need not wait up to the longest backoff to find out. A key with no
// failures is left alone.
func (q *Queue) Hurry(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failures[key] == 0 {
		return
	}
	if t := q.timers[key]; t != nil {
		t.Stop()
		delete(q.timers, key)
	}
	q.addLocked(key, front)
}

// Get blocks until a key is available or ctx ends; the caller must call
// Done(key) when finished.
func (q *Queue) Get(ctx context.Context) (string, bool) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return "", false
		}
		if key, ok := q.popLocked(); ok {
			q.processing[key] = true
			if q.waitingLocked() {
				q.signal()
			}
			q.mu.Unlock()
			return key, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-q.wake:
		}
	}
}

// popLocked takes the next key, the first of the most urgent lane that
// has one (the background lane's only while it is not held).
func (q *Queue) popLocked() (string, bool) {
	for l := first; l <= background; l++ {
		keys := &q.lanes[l-1]
		if l == background && q.held || len(*keys) == 0 {
			continue
		}
		key := (*keys)[0]
		*keys = (*keys)[1:]
		delete(q.queued, key)
		return key, true
	}
	return "", false
}

// waitingLocked says whether a key can be handed out now.
func (q *Queue) waitingLocked() bool {
	return len(q.lanes[first-1]) > 0 || len(q.lanes[front-1]) > 0 || len(q.lanes[background-1]) > 0 && !q.held
}

// HoldBackground keeps the background lane's keys waiting (held) until
// it is let go: only keys Add and AddFirst queued are handed out
// meanwhile (a failure being handled, see urgency). A background key Add
// queues again moves to the front lane and is handed out as before.
func (q *Queue) HoldBackground(held bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held = held
	if q.waitingLocked() {
		q.signal()
	}
}

// Done marks key finished; if it was re-added meanwhile it is queued again,
// in the most urgent lane it was re-added to.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if l := q.again[key]; l != noLane {
		delete(q.again, key)
		q.addLocked(key, l)
	}
}

// Len is the number of keys waiting, in every lane.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Idle says whether no key is waiting or being processed (keys added
// with a delay do not count until they are due).
func (q *Queue) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued) == 0 && len(q.processing) == 0
}

// Close stops handing out keys and cancels pending delayed adds.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, t := range q.timers {
		t.Stop()
		delete(q.timers, k)
	}
	if !q.closed {
		q.closed = true
		close(q.wake) // wakes every blocked Get
	}
}
