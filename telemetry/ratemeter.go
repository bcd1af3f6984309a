package telemetry

import "time"

// RateMeter turns cumulative byte counters into rates: a key's rate is
// the bytes between its latest reading and the newest one at least Span
// older (or the oldest it has, until one is that old), over the time
// between them. Readings are timed by the controller, so each carries
// the jitter of an RPC and of scheduling; measured over a longer span
// that jitter weighs less (a 100 ms error is 10% of 1 s, 5% of 2 s). A
// counter that went backwards (an entry re-inserted, a switch restarted)
// starts over rather than report a negative or huge rate.
type RateMeter[K comparable] struct {
	Span time.Duration
	last map[K][]counterReading // oldest first
}

type counterReading struct {
	bytes uint64
	at    time.Time
}

// followedBy says whether a reading of bytes at at continues r: the
// counter did not go backwards and time moved on (else it starts over).
func (r counterReading) followedBy(bytes uint64, at time.Time) bool {
	return bytes >= r.bytes && at.After(r.at)
}

// gbpsTo is the rate in Gb/s from r to a reading of bytes at at.
func (r counterReading) gbpsTo(bytes uint64, at time.Time) float64 {
	return float64(bytes-r.bytes) * 8 / at.Sub(r.at).Seconds() / 1e9
}

// Observe records a reading and returns the rate in Gb/s over the span,
// and over the time since the previous reading alone (quicker to follow a
// change, noisier); ok is false for the first reading of a key, or the
// first after it started over.
func (r *RateMeter[K]) Observe(k K, bytes uint64, at time.Time) (gbps, latest float64, ok bool) {
	if r.last == nil {
		r.last = map[K][]counterReading{}
	}
	hist := r.last[k]
	if n := len(hist); n > 0 && !hist[n-1].followedBy(bytes, at) {
		hist = hist[:0] // started over
	}
	// Keep only what the next reading can need: the newest at least Span
	// old, and everything after it.
	// (Moved down in place, so a key's readings reuse one array.)
	drop := 0
	for len(hist)-drop > 1 && at.Sub(hist[drop+1].at) >= r.Span {
		drop++
	}
	hist = hist[:copy(hist, hist[drop:])]
	if len(hist) == 0 {
		r.last[k] = append(hist, counterReading{bytes: bytes, at: at})
		return 0, 0, false
	}
	oldest, previous := hist[0], hist[len(hist)-1]
	r.last[k] = append(hist, counterReading{bytes: bytes, at: at})
	return oldest.gbpsTo(bytes, at), previous.gbpsTo(bytes, at), true
}

// Retain forgets every key keep says no to.
func (r *RateMeter[K]) Retain(keep func(K) bool) {
	for k := range r.last {
		if !keep(k) {
			delete(r.last, k)
		}
	}
}

// Last is key k's newest reading, if it has one.
func (r *RateMeter[K]) Last(k K) (bytes uint64, at time.Time, ok bool) {
	hist := r.last[k]
	if len(hist) == 0 {
		return 0, time.Time{}, false
	}
	return hist[len(hist)-1].bytes, hist[len(hist)-1].at, true
}
