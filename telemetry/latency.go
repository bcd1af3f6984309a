package telemetry

import (
	"slices"
	"time"

	"github.com/accelnet/accelnet/models"
)

// Queue depths are kept per port for a window of sampling intervals, so a
// path's latency has percentiles over time, not only a value now. Each
// port with a queue keeps one depth per interval (the sample's
// avg-queue-len; the interval is the switch's timestamp divided by
// Telemetry.Step), in a ring of queueSteps; an interval with no sample
// repeats the one before (a SAMPLE subscription with suppress_redundant
// sends a depth only when it changed). A port whose queue never held
// queueFloor bytes keeps no ring: its depth counts as empty.
const (
	queueSteps = 64
	queueFloor = 512 // bytes: 41 ns at 100 Gb/s
)

// queueRing is one port's depths over the last queueSteps intervals.
type queueRing struct {
	bytes [queueSteps]float32
	last  int64 // the newest interval held (step number)
	// hold is how many intervals a depth is carried past its sample
	// (0: until the next; a switch sends a depth only when it changed).
	hold int64
}

// at is the depth in interval step (0 outside what the ring holds).
func (r *queueRing) at(step int64) float64 {
	switch {
	case r == nil || step <= r.last-queueSteps:
		return 0
	case step > r.last:
		if r.expired(step) {
			return 0
		}
		return float64(r.bytes[r.last%queueSteps]) // carried forward
	}
	return float64(r.bytes[step%queueSteps])
}

// expired says whether the newest depth is no longer carried to step
// (past its hold).
func (r *queueRing) expired(step int64) bool { return r.hold > 0 && step > r.last+r.hold }

// record sets the depth of interval step, carrying the last depth over
// the intervals between (at most the ring, or its hold).
func (r *queueRing) record(step int64, bytes float64) {
	if step < r.last {
		return // late: the ring has moved on
	}
	if r.last > 0 {
		held := r.bytes[r.last%queueSteps]
		for s := r.last + 1; s < step && s <= r.last+queueSteps; s++ {
			if r.expired(s) {
				held = 0
			}
			r.bytes[s%queueSteps] = held
		}
	}
	r.bytes[step%queueSteps] = float32(bytes)
	r.last = step
}

// observeQueue folds a queue-depth sample into p (t.mu held): a port's
// depth is its deepest queue's.
func (t *Telemetry) observeQueue(p *portStat, s models.CounterSample) {
	if q := p.queueOf(s.Queue); s.Has == models.HasQueueMax {
		q.worst = float64(s.QueueMaxBytes)
	} else {
		q.now = float64(s.QueueBytes)
	}
	p.load.QueueBytes, p.load.QueueMaxBytes = 0, 0
	for _, q := range p.queues {
		p.load.QueueBytes, p.load.QueueMaxBytes = max(p.load.QueueBytes, q.now), max(p.load.QueueMaxBytes, q.worst)
	}
	if s.Has != models.HasQueueLen {
		return
	}
	depth := p.load.QueueBytes
	p.load.QueueMeasured = true
	if t.Step <= 0 || p.queue == nil && depth < queueFloor {
		return
	}
	if p.queue == nil {
		p.queue = &queueRing{}
	}
	p.queue.record(s.Timestamp.UnixNano()/int64(t.Step), depth)
}

// ProbedHold is how long a queue a latency probe met is taken for the
// port's depth where its switch reports none over gNMI: a probe crosses
// a given port only now and then, and one that saw no queue clears it.
const ProbedHold = 30 * time.Second

// probedQueue is what the latency probes met at a port's egress queue.
type probedQueue struct {
	bytes float64
	at    time.Time // local time
	ring  *queueRing
}

// ObserveProbed folds in the time a latency probe spent in a port's
// egress queue, as bytes at the port's rate (gbps). It stands for the
// port's depth, in latency only, where the switch reports no depth over
// gNMI (BMv2 exports none), for ProbedHold after the probe.
func (t *Telemetry) ObserveProbed(e models.Endpoint, queueing time.Duration, gbps float64) {
	if gbps <= 0 {
		return
	}
	bytes := float64(queueing) * gbps / 8 // ns × bytes/ns
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.probed[e]
	if q == nil {
		if bytes < queueFloor {
			return // nothing met yet: nothing to keep
		}
		q = &probedQueue{}
		if t.probed == nil {
			t.probed = map[models.Endpoint]*probedQueue{}
		}
		t.probed[e] = q
	}
	q.bytes, q.at = bytes, t.now()
	if t.Step > 0 {
		if q.ring == nil {
			q.ring = &queueRing{hold: max(1, int64(ProbedHold/t.Step))}
		}
		q.ring.record(q.at.UnixNano()/int64(t.Step), bytes)
	}
}

// queueAt is e's queue for latency (t.mu held): as its switch reports it
// over gNMI, else as a probe met it within ProbedHold; measured is false
// if neither knows it.
func (t *Telemetry) queueAt(e models.Endpoint) (bytes float64, ring *queueRing, measured, probed bool) {
	if p := t.ports[e]; p != nil && p.load.QueueMeasured {
		return p.load.QueueBytes, p.queue, true, false
	}
	if q := t.probed[e]; q != nil && t.now().Sub(q.at) <= ProbedHold {
		return q.bytes, q.ring, true, true
	}
	return 0, nil, false, false
}

// LatencyModel is what a hop costs besides its queue: the switch's own
// forwarding time, the cable's propagation and putting one packet on the
// wire (store and forward) at the egress port's rate. These are
// configured, not measured.
type LatencyModel struct {
	SwitchDelay time.Duration // per switch; default 800 ns
	LinkDelay   time.Duration // per link; default 500 ns (100 m of fibre)
	PacketBytes int           // on the wire; default 4,154 (a 4 KiB RoCEv2 MTU packet)
}

// fixed is what leaving by a port of gbps costs besides its queue, and
// the port's rate in bytes a nanosecond (0 if its speed is unknown: then
// no serialization, and its queue cannot be timed); m has its defaults.
func (m LatencyModel) fixed(gbps float64) (time.Duration, float64) {
	d := m.SwitchDelay + m.LinkDelay
	if gbps <= 0 {
		return d, 0
	}
	rate := gbps / 8
	return d + time.Duration(float64(m.PacketBytes)/rate), rate
}

// WithDefaults is m with every unset cost at its default.
func (m LatencyModel) WithDefaults() LatencyModel {
	if m.SwitchDelay <= 0 {
		m.SwitchDelay = 800 * time.Nanosecond
	}
	if m.LinkDelay <= 0 {
		m.LinkDelay = 500 * time.Nanosecond
	}
	if m.PacketBytes <= 0 {
		m.PacketBytes = 4154
	}
	return m
}

// HopLatency is one hop of a path: the egress port a packet leaves by,
// its queue and what the hop costs.
type HopLatency struct {
	Port       models.Endpoint
	QueueBytes float64       // the queue's depth now
	Queueing   time.Duration // the depth at the port's rate
	Fixed      time.Duration // switch, cable and serialization (LatencyModel)
	Measured   bool          // the port's queue is known (reported, or probed)
	Probed     bool          // known from a latency probe (ObserveProbed), not the switch
}

// PathLatency is a path's one-way latency: now, and its median and 99th
// percentile over the intervals of the window asked (each interval's
// latency the sum of its hops' then).
type PathLatency struct {
	Hops     []HopLatency
	Now      time.Duration
	P50, P99 time.Duration
	// Intervals is how many sampling intervals the percentiles span.
	Intervals int
}

// HopsNow is what leaving by each of ports costs now, its fixed cost
// and its queue (a path's latency now is the sum over its hops), read
// under one lock.
func (t *Telemetry) HopsNow(ports []models.Endpoint, gbps func(models.Endpoint) float64, m LatencyModel) []time.Duration {
	m = m.WithDefaults()
	out := make([]time.Duration, len(ports))
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i, e := range ports {
		var rate float64
		out[i], rate = m.fixed(gbps(e))
		if bytes, _, ok, _ := t.queueAt(e); ok && rate > 0 {
			out[i] += time.Duration(bytes / rate)
		}
	}
	return out
}

// PathSamples assembles the latency of a path (egress ports, the source
// leaf's first) from its hops' queue depths over the window before now:
// each hop's fixed cost (m) and its queue at the port's rate (gbps). It
// returns the path's latency and its latency in each interval of the
// window, sorted (for percentiles over several paths).
func (t *Telemetry) PathSamples(path []models.Endpoint, gbps func(models.Endpoint) float64, m LatencyModel, window time.Duration) (PathLatency, []time.Duration) {
	m = m.WithDefaults()
	out := PathLatency{Hops: make([]HopLatency, len(path))}
	rings := make([]*queueRing, len(path))
	rate := make([]float64, len(path)) // bytes per nanosecond
	var fixed time.Duration
	t.mu.RLock()
	for i, e := range path {
		h := HopLatency{Port: e}
		h.Fixed, rate[i] = m.fixed(gbps(e))
		h.QueueBytes, rings[i], h.Measured, h.Probed = t.queueAt(e)
		if rate[i] > 0 {
			h.Queueing = time.Duration(h.QueueBytes / rate[i])
		}
		fixed += h.Fixed
		out.Now += h.Fixed + h.Queueing
		out.Hops[i] = h
	}
	var samples []time.Duration
	if t.Step > 0 {
		// Up to now by this clock: a depth that did not change was not
		// sent again (suppress_redundant) and holds until now.
		newest := t.now().UnixNano() / int64(t.Step)
		steps := max(1, min(int64(window/t.Step), queueSteps))
		for s := newest - steps + 1; s <= newest; s++ {
			d := fixed
			for i, r := range rings {
				if rate[i] > 0 {
					d += time.Duration(r.at(s) / rate[i])
				}
			}
			samples = append(samples, d)
		}
	}
	t.mu.RUnlock()
	out.Intervals = len(samples)
	if len(samples) == 0 {
		samples = []time.Duration{out.Now}
	}
	slices.Sort(samples)
	out.P50, out.P99 = Percentile(samples, 0.5), Percentile(samples, 0.99)
	return out, samples
}

// Percentile is the q-quantile of sorted durations (nearest rank).
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
