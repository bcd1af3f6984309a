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
// Keys come in two lanes. Add queues a change (a failure's pruning, a
// rollout's stage, a new topology): it is handed out before any key
// AddBackground queued (the periodic resync of every switch), whatever
// their order, and a key waiting in the background lane that is added
// again by Add moves to the front lane. At k=48 a resync is 2,880
// reconciles that take longer than the interval between failures; in one
// lane a failure's few switches waited behind all of them.
type Queue struct {
	mu         sync.Mutex
	order      []string // the front lane
	later      []string // the background lane
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

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// lane is where a key waits: front (a change) or background (a resync).
type lane uint8

const (
	noLane lane = iota
	front
	background
)

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
	switch q.queued[key] {
	case front:
		return
	case background:
		if l == background {
			return
		}
		i := slices.Index(q.later, key)
		q.later = slices.Delete(q.later, i, i+1)
	}
	q.queued[key] = l
	if l == front {
		q.order = append(q.order, key)
	} else {
		q.later = append(q.later, key)
	}
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

// Forget resets key's backoff after a success.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
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
			if len(q.order) > 0 || len(q.later) > 0 && !q.held {
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

// popLocked takes the next key, the front lane's first (only the front
// lane's while the background lane is held).
func (q *Queue) popLocked() (string, bool) {
	for _, keys := range []*[]string{&q.order, &q.later} {
		if keys == &q.later && q.held {
			break
		}
		if len(*keys) > 0 {
			key := (*keys)[0]
			*keys = (*keys)[1:]
			delete(q.queued, key)
			return key, true
		}
	}
	return "", false
}

// HoldBackground keeps the background lane's keys waiting (held) until
// it is let go: only keys Add queued are handed out meanwhile (a failure
// being handled, see urgency). A background key Add queues again moves
// to the front lane and is handed out as before.
func (q *Queue) HoldBackground(held bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held = held
	if !held && len(q.later) > 0 {
		q.signal()
	}
}

// Done marks key finished; if it was re-added meanwhile it is queued again,
// in the lane it was re-added to (the front one if both).
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if l := q.again[key]; l != noLane {
		delete(q.again, key)
		q.addLocked(key, l)
	}
}

// Len is the number of keys waiting, in both lanes.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order) + len(q.later)
}

// Idle says whether no key is waiting or being processed (keys added
// with a delay do not count until they are due).
func (q *Queue) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)+len(q.later) == 0 && len(q.processing) == 0
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
