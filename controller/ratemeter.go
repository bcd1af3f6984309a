package controller

import "time"

// rateMeter turns cumulative byte counters into rates: a key's rate is
// the bytes between its last two readings over the time between them. A
// counter that went backwards (an entry re-inserted, a switch restarted)
// starts over rather than report a negative or huge rate.
type rateMeter[K comparable] struct {
	last map[K]counterReading
}

type counterReading struct {
	bytes uint64
	at    time.Time
}

// observe records a reading and returns the rate in Gb/s since the
// previous one (ok false for the first reading of a key).
func (r *rateMeter[K]) observe(k K, bytes uint64, at time.Time) (gbps float64, ok bool) {
	if r.last == nil {
		r.last = map[K]counterReading{}
	}
	prev, had := r.last[k]
	r.last[k] = counterReading{bytes: bytes, at: at}
	if !had || bytes < prev.bytes || !at.After(prev.at) {
		return 0, false
	}
	return float64(bytes-prev.bytes) * 8 / at.Sub(prev.at).Seconds() / 1e9, true
}

// retain forgets every key keep says no to.
func (r *rateMeter[K]) retain(keep func(K) bool) {
	for k := range r.last {
		if !keep(k) {
			delete(r.last, k)
		}
	}
}
