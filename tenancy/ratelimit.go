package tenancy

import (
	"sync"
	"time"
)

// RateLimiter is a token bucket per key (an API token): rate requests a
// second, in bursts of up to twice that.
type RateLimiter struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter allows rate requests a second per key; rate <= 0 allows
// everything.
func NewRateLimiter(rate float64) *RateLimiter {
	return &RateLimiter{rate: rate, burst: 2 * rate, buckets: map[string]*bucket{}}
}

// Allow takes one request of key at time now, if its bucket has room.
func (l *RateLimiter) Allow(key string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.sweepLocked(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = l.level(b, now)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Has says whether key's bucket holds a request at time now, taking none.
func (l *RateLimiter) Has(key string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	return b == nil || l.level(b, now) >= 1
}

// level is what b holds at time now, refilled since it was last used.
func (l *RateLimiter) level(b *bucket, now time.Time) float64 {
	return min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
}

// maxBuckets bounds the keys kept (client addresses can be many): past it,
// the buckets that have refilled, whose keys are as good as new, go.
const maxBuckets = 1 << 14

func (l *RateLimiter) sweepLocked(now time.Time) {
	for k, b := range l.buckets {
		if l.level(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
}
