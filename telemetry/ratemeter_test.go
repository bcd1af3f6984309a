package telemetry

import (
	"math"
	"testing"
	"time"
)

// TestRateMeterSpan: readings a second apart, each timed up to 150 ms
// late, of a 40 Gb/s counter; measured over two seconds (once there are
// two) the rate errs by under 8%, where over one it would err by up to
// 15%. A counter that goes backwards starts over.
func TestRateMeterSpan(t *testing.T) {
	m := RateMeter[string]{Span: 2 * time.Second}
	start := time.Unix(1000, 0)
	const bps = 40e9
	late := []time.Duration{0, 150, 0, 150, 20, 0, 150, 0} // ms
	worst := 0.0
	var prevBytes uint64
	var prevAt time.Time
	for i, l := range late {
		truth := start.Add(time.Duration(i) * time.Second)
		bytes := uint64(bps / 8 * truth.Sub(start).Seconds())
		at := truth.Add(l * time.Millisecond)
		g, latest, ok := m.Observe("f", bytes, at)
		lastBytes, lastAt := prevBytes, prevAt
		prevBytes, prevAt = bytes, at
		if i == 0 {
			if ok {
				t.Fatalf("a rate from one reading")
			}
			continue
		}
		if !ok {
			t.Fatalf("reading %d: no rate", i)
		}
		if i >= 2 { // a span of two seconds to measure over
			worst = max(worst, math.Abs(g/40-1))
		}
		if want := float64(bytes-lastBytes) * 8 / at.Sub(lastAt).Seconds() / 1e9; math.Abs(latest-want) > 1e-9 {
			t.Errorf("reading %d: latest %.3f Gb/s, want %.3f (since the previous reading)", i, latest, want)
		}
	}
	if worst > 0.08 {
		t.Errorf("worst error %.3f over a 2 s span, want under 0.08", worst)
	}
	if n := len(m.last["f"]); n > 4 {
		t.Errorf("%d readings kept for a 2 s span read each second", n)
	}
	// Re-inserted entry: the counter restarts near zero.
	if _, _, ok := m.Observe("f", 100, start.Add(9*time.Second)); ok {
		t.Errorf("a rate across a counter that went backwards")
	}
	if g, _, ok := m.Observe("f", 100+uint64(bps/8), start.Add(10*time.Second)); !ok || math.Abs(g-40) > 0.01 {
		t.Errorf("after starting over: %.2f Gb/s (ok %v), want 40", g, ok)
	}
	m.Retain(func(string) bool { return false })
	if len(m.last) != 0 {
		t.Errorf("retain kept %d keys", len(m.last))
	}
}
