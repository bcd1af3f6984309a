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
