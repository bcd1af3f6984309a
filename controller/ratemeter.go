package controller

import "time"

// rateMeter turns cumulative byte counters into rates: a key's rate is
// the bytes between its latest reading and the newest one at least Span
// older (or the oldest it has, until one is that old), over the time
// between them. Readings are timed by the controller, so each carries
// the jitter of an RPC and of scheduling; measured over a longer span
// that jitter weighs less (a 100 ms error is 10% of 1 s, 5% of 2 s). A
// counter that went backwards (an entry re-inserted, a switch restarted)
// starts over rather than report a negative or huge rate.
type rateMeter[K comparable] struct {
	Span time.Duration
	last map[K][]counterReading // oldest first
}

type counterReading struct {
	bytes uint64
	at    time.Time
}

// observe records a reading and returns the rate in Gb/s over the span,
// and over the time since the previous reading alone (quicker to follow a
// change, noisier); ok is false for the first reading of a key, or the
// first after it started over.
func (r *rateMeter[K]) observe(k K, bytes uint64, at time.Time) (gbps, latest float64, ok bool) {
	if r.last == nil {
		r.last = map[K][]counterReading{}
	}
	hist := r.last[k]
	if n := len(hist); n > 0 && (bytes < hist[n-1].bytes || !at.After(hist[n-1].at)) {
		hist = hist[:0] // started over
	}
	// Keep only what the next reading can need: the newest at least Span
	// old, and everything after it.
	for len(hist) > 1 && at.Sub(hist[1].at) >= r.Span {
		hist = hist[1:]
	}
	r.last[k] = append(hist, counterReading{bytes: bytes, at: at})
	if len(hist) == 0 {
		return 0, 0, false
	}
	rate := func(from counterReading) float64 {
		return float64(bytes-from.bytes) * 8 / at.Sub(from.at).Seconds() / 1e9
	}
	return rate(hist[0]), rate(hist[len(hist)-1]), true
}

// retain forgets every key keep says no to.
func (r *rateMeter[K]) retain(keep func(K) bool) {
	for k := range r.last {
		if !keep(k) {
			delete(r.last, k)
		}
	}
}
