package telemetry

import (
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
)

// TestPathLatencyFromQueueDepths: a path's latency is its hops' fixed
// costs plus each queue's depth at its port's rate, now and as
// percentiles over the window's intervals; an interval with no sample
// repeats the depth before it; a port that reports no queue counts as
// empty and says so.
func TestPathLatencyFromQueueDepths(t *testing.T) {
	tele := NewTelemetry(0)
	tele.Step = time.Second
	base := time.Unix(1_000_000, 0)
	tele.now = func() time.Time { return base.Add(99 * time.Second) }
	up := models.Endpoint{Switch: "leaf1", Port: 9}
	down := models.Endpoint{Switch: "spine1", Port: 2}
	quiet := models.Endpoint{Switch: "leaf2", Port: 1}
	depth := func(e models.Endpoint, at time.Duration, bytes uint64) {
		tele.Observe(models.CounterSample{Switch: e.Switch, Port: e.Port, Timestamp: base.Add(at), Queue: "RDMA", QueueBytes: bytes, Has: models.HasQueueLen})
	}
	// The uplink: empty for 90 intervals, then 100 KB (8 µs at 100 Gb/s)
	// for the last ten, reported only when it changes.
	depth(up, 0, 0)
	depth(up, 90*time.Second, 100_000)
	depth(up, 99*time.Second, 100_000)
	// The spine's port: 300 bytes throughout, under queueFloor: no ring.
	for s := range 100 {
		depth(down, time.Duration(s)*time.Second, 300)
	}
	gbps := func(models.Endpoint) float64 { return 100 }
	m := LatencyModel{SwitchDelay: time.Microsecond, LinkDelay: time.Microsecond, PacketBytes: 1250} // 0.1 µs at 100 Gb/s
	got := pathLatency(tele, []models.Endpoint{up, down, quiet}, gbps, m, 100*time.Second)

	fixed := 3 * 2100 * time.Nanosecond
	if got.Hops[0].Queueing != 8*time.Microsecond || !got.Hops[0].Measured || got.Hops[0].Fixed != 2100*time.Nanosecond {
		t.Errorf("the uplink: %+v, want 8 µs queueing and 2.1 µs fixed, measured", got.Hops[0])
	}
	if got.Hops[1].Queueing != 24*time.Nanosecond {
		t.Errorf("the spine's port: %v queueing, want 24 ns (300 bytes)", got.Hops[1].Queueing)
	}
	if got.Hops[2].Measured || got.Hops[2].Queueing != 0 {
		t.Errorf("a port that reports no queue: %+v", got.Hops[2])
	}
	if want := fixed + 8*time.Microsecond + 24*time.Nanosecond; got.Now != want {
		t.Errorf("now %v, want %v", got.Now, want)
	}
	// What the matrix sums: each hop's cost now, read at once.
	var sum time.Duration
	for _, d := range tele.HopsNow([]models.Endpoint{up, down, quiet}, gbps, m) {
		sum += d
	}
	if sum != got.Now {
		t.Errorf("the hops' costs now sum to %v, the path's now is %v", sum, got.Now)
	}
	// Of the window's 64 intervals (the ring's length), the last ten
	// carry the 8 µs queue: the median is without it, the 99th
	// percentile with it. The spine's small queue keeps no history.
	if got.Intervals != queueSteps {
		t.Fatalf("%d intervals, want %d", got.Intervals, queueSteps)
	}
	if got.P50 != fixed || got.P99 != fixed+8*time.Microsecond {
		t.Errorf("p50 %v, p99 %v; want %v and %v", got.P50, got.P99, fixed, fixed+8*time.Microsecond)
	}
	// A window of five intervals sees only the queue.
	if short := pathLatency(tele, []models.Endpoint{up}, gbps, m, 5*time.Second); short.Intervals != 5 || short.P50 != 2100*time.Nanosecond+8*time.Microsecond {
		t.Errorf("five intervals: %d, p50 %v", short.Intervals, short.P50)
	}
	// Thirty intervals on with nothing sent (the depth did not change,
	// suppress_redundant): the window ends now, the depth holds.
	tele.now = func() time.Time { return base.Add(130 * time.Second) }
	if later := pathLatency(tele, []models.Endpoint{up}, gbps, m, 5*time.Second); later.P50 != 2100*time.Nanosecond+8*time.Microsecond {
		t.Errorf("thirty intervals after the last depth: p50 %v, want it held", later.P50)
	}
	// The port goes down: it holds no queue.
	tele.Observe(models.CounterSample{Switch: up.Switch, Port: up.Port, Timestamp: base.Add(100 * time.Second), OperUp: false, Has: models.HasOperStatus})
	if l, _ := tele.Port(up); l.QueueBytes != 0 {
		t.Errorf("a down port's queue: %v bytes", l.QueueBytes)
	}
}

// TestPortDepthIsItsDeepestQueue: a port reporting several queues has the
// deepest one's depth, now and at worst.
func TestPortDepthIsItsDeepestQueue(t *testing.T) {
	tele := NewTelemetry(0)
	e := models.Endpoint{Switch: "leaf1", Port: 3}
	at := time.Unix(1_000_000, 0)
	for _, s := range []models.CounterSample{
		{Queue: "RDMA", QueueBytes: 5000, Has: models.HasQueueLen},
		{Queue: "BE", QueueBytes: 9000, Has: models.HasQueueLen},
		{Queue: "BE", QueueMaxBytes: 20000, Has: models.HasQueueMax},
		{Queue: "BE", QueueBytes: 1000, Has: models.HasQueueLen},
	} {
		s.Switch, s.Port, s.Timestamp = e.Switch, e.Port, at
		tele.Observe(s)
	}
	l, _ := tele.Port(e)
	if l.QueueBytes != 5000 || l.QueueMaxBytes != 20000 || !l.QueueMeasured {
		t.Errorf("depth %v, worst %v (measured %v); want 5000 and 20000", l.QueueBytes, l.QueueMaxBytes, l.QueueMeasured)
	}
}

// TestProbedQueueStandsInForAnUnreportedOne: a queue a latency probe
// met counts for a port whose switch reports none, for ProbedHold after
// the probe and in the intervals it spans; a later probe that met no
// queue clears it; a depth reported over gNMI wins over any probe.
func TestProbedQueueStandsInForAnUnreportedOne(t *testing.T) {
	tele := NewTelemetry(0)
	tele.Step = time.Second
	now := time.Unix(1_000_000, 0)
	tele.now = func() time.Time { return now }
	probed, reported := models.Endpoint{Switch: "leaf1", Port: 9}, models.Endpoint{Switch: "leaf2", Port: 9}
	gbps := func(models.Endpoint) float64 { return 100 }
	m := LatencyModel{SwitchDelay: time.Microsecond, LinkDelay: time.Microsecond, PacketBytes: 1250}
	hop := func(e models.Endpoint) HopLatency {
		return pathLatency(tele, []models.Endpoint{e}, gbps, m, 100*time.Second).Hops[0]
	}

	tele.ObserveProbed(probed, 5*time.Microsecond, 100) // 62,500 bytes at 100 Gb/s
	h := hop(probed)
	if !h.Measured || !h.Probed || h.Queueing != 5*time.Microsecond || h.QueueBytes != 62_500 {
		t.Fatalf("after a probe met 5 µs: %+v", h)
	}
	now = now.Add(ProbedHold - time.Second)
	pl, samples := tele.PathSamples([]models.Endpoint{probed}, gbps, m, 100*time.Second)
	queued := 0
	for _, d := range samples {
		if d > pl.Hops[0].Fixed {
			queued++
		}
	}
	if want := int(ProbedHold / time.Second); pl.Hops[0].Queueing != 5*time.Microsecond || queued != want {
		t.Errorf("%v after the probe: now %v queueing, %d of %d intervals queued; want 5 µs and %d", ProbedHold-time.Second, pl.Hops[0].Queueing, queued, len(samples), want)
	}
	now = now.Add(2 * time.Second)
	if h := hop(probed); h.Measured || h.Queueing != 0 {
		t.Errorf("past ProbedHold: %+v, want unknown and empty", h)
	}
	tele.ObserveProbed(probed, 5*time.Microsecond, 100)
	tele.ObserveProbed(probed, 0, 100)
	if h := hop(probed); !h.Probed || h.Queueing != 0 {
		t.Errorf("after a probe met no queue: %+v", h)
	}

	tele.Observe(models.CounterSample{Switch: reported.Switch, Port: reported.Port, Timestamp: now, Queue: "RDMA", QueueBytes: 1250, Has: models.HasQueueLen})
	tele.ObserveProbed(reported, 50*time.Microsecond, 100)
	if h := hop(reported); !h.Measured || h.Probed || h.Queueing != 100*time.Nanosecond {
		t.Errorf("a port reporting its queue, probed too: %+v, want the reported 0.1 µs", h)
	}
	if _, ok := tele.Port(probed); ok {
		t.Error("a probed port shows up among the ports' loads")
	}
}

// pathLatency is PathSamples' path latency alone.
func pathLatency(tele *Telemetry, path []models.Endpoint, gbps func(models.Endpoint) float64, m LatencyModel, window time.Duration) PathLatency {
	pl, _ := tele.PathSamples(path, gbps, m, window)
	return pl
}
