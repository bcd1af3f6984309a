package controller

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
)

// TestElephantEstimates: samples of 1 in N packets estimate each flow's
// rate; flows at the threshold or more (with enough samples) are
// elephants; a flow that stops fades and is forgotten.
func TestElephantEstimates(t *testing.T) {
	e := NewElephants(1024, 10, nil)
	now := time.Unix(1000, 0)
	e.now = func() time.Time { return now }
	big := models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 49152}
	small := models.FlowKey{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 49153}
	// 40 Gb/s and 2 Gb/s of 4,000-byte packets, sampled 1 in 1,024, for
	// 5 s in 10 ms steps.
	const pkt = 4000
	owed := map[models.FlowKey]float64{}
	for step := 0; step < 500; step++ {
		now = now.Add(10 * time.Millisecond)
		for key, gbps := range map[models.FlowKey]float64{big: 40, small: 2} {
			owed[key] += gbps * 1e9 / 8 * 0.01 / pkt / 1024
			var batch []southbound.FlowSample
			for ; owed[key] >= 1; owed[key]-- {
				batch = append(batch, southbound.FlowSample{Port: 1, Key: key, Bytes: pkt})
			}
			e.Observe("leaf1", batch)
		}
	}
	got := e.Detected()
	if len(got) != 1 || got[0].Key != big || got[0].Leaf != "leaf1" {
		t.Fatalf("detected %+v, want only the 40 Gb/s flow", got)
	}
	if math.Abs(got[0].Gbps-40) > 4 {
		t.Errorf("estimated %.1f Gb/s, want 40 within 10%%", got[0].Gbps)
	}
	// It stops: a few time constants later it is under the threshold,
	// and after five without samples it is forgotten.
	now = now.Add(3 * time.Second)
	if d := e.Detected(); len(d) != 0 {
		t.Errorf("3 s after stopping still detected: %+v", d)
	}
	now = now.Add(3 * time.Second)
	e.Detected()
	e.mu.Lock()
	n := len(e.flows)
	e.mu.Unlock()
	if n != 0 {
		t.Errorf("%d flows remembered 6 s after the last sample", n)
	}
}

// TestEstimateDemands: demands as the hosts' NICs share them out, with a
// congested receiver's fair share handed back to its senders' other flows.
func TestEstimateDemands(t *testing.T) {
	nic := func(src, dst string) hostPair { return hostPair{src: src, dst: dst, srcGbps: 100, dstGbps: 100} }
	for name, c := range map[string]struct {
		flows []hostPair
		want  []float64
	}{
		"permutation": {[]hostPair{nic("a", "b"), nic("b", "c"), nic("c", "a")}, []float64{100, 100, 100}},
		"incast":      {[]hostPair{nic("a", "x"), nic("b", "x"), nic("c", "x"), nic("d", "x")}, []float64{25, 25, 25, 25}},
		// x is shared three ways; a's other flow gets what x leaves it.
		"leftover": {[]hostPair{nic("a", "x"), nic("a", "y"), nic("b", "x"), nic("c", "x")}, []float64{100.0 / 3, 200.0 / 3, 100.0 / 3, 100.0 / 3}},
		// A slower receiver NIC limits only its own flow.
		"mixed speeds": {[]hostPair{{src: "a", dst: "x", srcGbps: 400, dstGbps: 100}, {src: "a", dst: "y", srcGbps: 400, dstGbps: 400}}, []float64{100, 300}},
	} {
		got := estimateDemands(c.flows)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-6 {
				t.Errorf("%s: demands %v, want %v", name, got, c.want)
				break
			}
		}
	}
}
