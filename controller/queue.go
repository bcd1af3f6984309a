package controller

import (
	"context"
	"sync"
	"time"
)

// Queue is a work queue of keys with controller-runtime's guarantees: a key
// queued many times is handed out once; a key is never handed to two
// workers at once (re-adding it while it is processed queues it again for
// after Done); failed keys come back after an exponential backoff.
type Queue struct {
	mu         sync.Mutex
	order      []string
	queued     map[string]bool
	processing map[string]bool
	again      map[string]bool // re-added while processing
	failures   map[string]int
	timers     map[string]*time.Timer
	wake       chan struct{}
	closed     bool

	baseDelay, maxDelay time.Duration
}

// NewQueue returns an empty queue; backoff runs from base to max.
func NewQueue(base, max time.Duration) *Queue {
	return &Queue{
		queued:     map[string]bool{},
		processing: map[string]bool{},
		again:      map[string]bool{},
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

// Add queues key now.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
	if q.closed {
		return
	}
	if q.processing[key] {
		q.again[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.order = append(q.order, key)
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
		q.addLocked(key)
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
		if len(q.order) > 0 {
			key := q.order[0]
			q.order = q.order[1:]
			delete(q.queued, key)
			q.processing[key] = true
			if len(q.order) > 0 {
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

// Done marks key finished; if it was re-added meanwhile it is queued again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.again[key] {
		delete(q.again, key)
		q.addLocked(key)
	}
}

// Len is the number of keys waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Idle says whether no key is waiting or being processed (keys added
// with a delay do not count until they are due).
func (q *Queue) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order) == 0 && len(q.processing) == 0
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
