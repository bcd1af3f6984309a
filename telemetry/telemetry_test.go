package telemetry

import (
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
)

func TestTelemetryRates(t *testing.T) {
	tele := NewTelemetry(time.Minute)
	tele.Alpha = 1 // no smoothing: check the arithmetic
	t0 := time.Unix(100, 0)
	sample := func(ts time.Time, out uint64) models.CounterSample {
		return models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: ts, OutOctets: out, Has: models.HasOutOctets}
	}
	tele.Observe(sample(t0, 1000))
	tele.Observe(sample(t0.Add(500*time.Millisecond), 1000+125_000_000)) // 1 Gbit in 0.5 s
	l, ok := tele.Port(models.Endpoint{Switch: "leaf1", Port: 3})
	if !ok || l.OutBps != 2e9 {
		t.Fatalf("rate = %v, want 2e9", l.OutBps)
	}
	// An older or repeated sample changes nothing.
	tele.Observe(sample(t0.Add(500*time.Millisecond), 1000+125_000_000))
	if l, _ := tele.Port(models.Endpoint{Switch: "leaf1", Port: 3}); l.OutBps != 2e9 {
		t.Fatalf("repeated sample changed the rate to %v", l.OutBps)
	}
	// A counter reset (switch restart) does not produce a huge negative rate.
	tele.Observe(sample(t0.Add(time.Second), 10))
	if l, _ := tele.Port(models.Endpoint{Switch: "leaf1", Port: 3}); l.OutBps != 0 {
		t.Fatalf("after a counter reset rate = %v, want 0", l.OutBps)
	}
	tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: t0.Add(time.Second), Has: models.HasOperStatus, OperUp: false})
	if l, _ := tele.Port(models.Endpoint{Switch: "leaf1", Port: 3}); l.OperUp {
		t.Fatal("oper-status DOWN not recorded")
	}
	tele.MarkStale("leaf1")
	if l, _ := tele.Port(models.Endpoint{Switch: "leaf1", Port: 3}); !l.Stale {
		t.Fatal("MarkStale did not mark the port stale")
	}
}

// TestDownPortAndRecentRate: a port reported down carries nothing from
// that sample on (its smoothed rate does not decay over many intervals),
// and starts afresh when it is back; the last interval's own rate shows
// a stop at the first reading after it, while the smoothed rate lags.
func TestDownPortAndRecentRate(t *testing.T) {
	tele := NewTelemetry(time.Minute)
	now := time.Unix(100, 0)
	tele.now = func() time.Time { return now }
	port := models.Endpoint{Switch: "leaf1", Port: 3}
	octets := uint64(0)
	read := func(gbps float64) PortLoad {
		t.Helper()
		now = now.Add(time.Second)
		octets += uint64(gbps * 1e9 / 8)
		tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: now, OutOctets: octets, Has: models.HasOutOctets})
		l, _ := tele.Port(port)
		return l
	}
	for range 5 {
		read(80)
	}
	start := now
	l := read(0)
	if l.RecentOutBps != 0 || l.OutBps < 1e9 || !l.RecentSince.Equal(start) {
		t.Fatalf("first reading after the stop: recent %v since %v (want 0 since %v), smoothed %v (want still high)", l.RecentOutBps, l.RecentSince, start, l.OutBps)
	}
	for range 3 {
		read(80)
	}
	tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: now, Has: models.HasOperStatus, OperUp: false})
	if l, _ := tele.Port(port); l.OutBps != 0 || l.RecentOutBps != 0 {
		t.Fatalf("a port reported down shows %v b/s (recent %v), want 0 at once", l.OutBps, l.RecentOutBps)
	}
	tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: now, Has: models.HasOperStatus, OperUp: true})
	if l := read(40); l.OutBps != 40e9 {
		t.Fatalf("back up at 40 Gb/s: %v b/s, want 40e9 (no memory of before the failure)", l.OutBps)
	}
}

// TestECNByQueue: each egress queue's ECN-marked counter is its own
// rate, the port's ECN rate their sum, and a port reported down marks
// nothing until its queues are read again.
func TestECNByQueue(t *testing.T) {
	tele := NewTelemetry(time.Minute)
	tele.Alpha = 1
	port := models.Endpoint{Switch: "leaf1", Port: 3}
	t0 := time.Unix(100, 0)
	ecn := func(queue string, at time.Duration, octets uint64) {
		tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Queue: queue, Timestamp: t0.Add(at), ECNOctets: octets, Has: models.HasECNOctets})
	}
	ecn("q0", 0, 0)
	ecn("q3", 0, 1_000_000)
	ecn("q0", time.Second, 125_000_000)           // 1 Gb/s
	ecn("q3", time.Second, 1_000_000+375_000_000) // 3 Gb/s, its counter apart from q0's
	if l, _ := tele.Port(port); l.ECNBps != 4e9 {
		t.Fatalf("ECN %v b/s over two queues, want 4e9", l.ECNBps)
	}
	ecn("q0", 2*time.Second, 125_000_000) // q0 stops marking; q3's rate stands
	if l, _ := tele.Port(port); l.ECNBps != 3e9 {
		t.Fatalf("ECN %v b/s after q0 stopped, want 3e9", l.ECNBps)
	}
	tele.Observe(models.CounterSample{Switch: "leaf1", Port: 3, Timestamp: t0.Add(2 * time.Second), Has: models.HasOperStatus, OperUp: false})
	if l, _ := tele.Port(port); l.ECNBps != 0 {
		t.Fatalf("a port reported down marks %v b/s", l.ECNBps)
	}
}
