package intents

import (
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
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
			var batch []models.FlowSample
			for ; owed[key] >= 1; owed[key]-- {
				batch = append(batch, models.FlowSample{Port: 1, Key: key, Bytes: pkt})
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

// TestElephantsSilenceOnLeafClock: whether a flow stopped is judged on
// the leaf's clock. Lists that waited in a busy controller's queue and
// arrive together silence nobody; a flow missing from lists the leaf kept
// sending is silent within a fraction of a second; samples standing for
// dropped lists keep the estimate whole.
func TestElephantsSilenceOnLeafClock(t *testing.T) {
	e := NewElephants(1024, 10, nil)
	now := time.Unix(1000, 0)
	leaf := time.Unix(50, 0) // the leaf's own clock: another epoch
	e.now = func() time.Time { return now }
	a := models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 49152}
	b := models.FlowKey{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 49153}
	const pkt = 4000
	// 40 Gb/s each: 1,220 samples a second, 61 per 50 ms list.
	perList := 40e9 / 8 * 0.05 / pkt / 1024
	list := func(stands float64, keys ...models.FlowKey) []models.FlowSample {
		var out []models.FlowSample
		for _, k := range keys {
			for range int(perList) {
				out = append(out, models.FlowSample{Port: 1, Key: k, Bytes: pkt, At: leaf, Stands: stands})
			}
		}
		return out
	}
	rate := func(k models.FlowKey) float64 {
		for _, d := range e.Detected() {
			if d.Key == k {
				return d.Gbps
			}
		}
		return 0
	}
	// Six seconds of both flows, one list each 50 ms as made; every
	// other list dropped by the driver (the taken ones stand for two).
	for i := range 120 {
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		if i%2 == 1 {
			e.Observe("leaf1", list(2, a, b))
		}
	}
	// Each list taken holds 100 ms of samples: counted from the middle of
	// that, the estimate is unbiased.
	want := math.Floor(perList) * pkt * 1024 * 8 / 0.05 / 1e9
	if g := rate(a); math.Abs(g/want-1) > 0.01 {
		t.Fatalf("a estimated at %.2f Gb/s from half the lists standing for all, want %.2f within 1%%", g, want)
	}
	// The controller stalls for 1.5 s; the lists made meanwhile arrive
	// together. Nobody stopped on the leaf's clock.
	now = now.Add(1500 * time.Millisecond)
	var backlog [][]models.FlowSample
	for range 30 {
		leaf = leaf.Add(50 * time.Millisecond)
		backlog = append(backlog, list(1, a, b))
	}
	if g := rate(a); g < 34 {
		t.Errorf("a at %.1f Gb/s during a controller stall (the leaf sent lists all along), want 40 within 15%%", g)
	}
	for _, l := range backlog {
		e.Observe("leaf1", l)
	}
	if rate(a) == 0 || rate(b) == 0 {
		t.Fatalf("a or b silenced after the backlog arrived: %+v", e.Detected())
	}
	// Now b stops while a goes on: within half a second of leaf time, b is
	// no elephant (though its decaying estimate is still above 10 Gb/s).
	for range 10 {
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		e.Observe("leaf1", list(1, a))
	}
	if rate(b) != 0 || rate(a) == 0 {
		t.Errorf("after 500 ms of lists without b: a %.1f, b %.1f Gb/s; want b silent, a on", rate(a), rate(b))
	}
	// counter is a's pin counter reading g Gb/s, read just now.
	counter := func(g float64) func(models.FlowKey) (float64, time.Time, bool) {
		return func(k models.FlowKey) (float64, time.Time, bool) { return g, now, k == a }
	}
	// a is pinned and its counter reads 40 Gb/s; the leaf's lists go on
	// without a for a second (lost on the way): the counter says it runs.
	e.Measured = counter(40)
	e.Observe("leaf1", list(1, a)) // b is back, a is the one missing now
	for range 20 {
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		e.Observe("leaf1", list(1, b))
	}
	if g := rate(a); g != 40 {
		t.Errorf("a at %.1f Gb/s, missing from a second of lists while its counter reads 40, want 40", g)
	}
	// Its counter falls to nothing (it stopped): it goes.
	e.Measured = counter(0)
	if g := rate(a); g != 0 {
		t.Errorf("a at %.1f Gb/s with its counter at 0 and no samples for a second, want gone", g)
	}
	// a's pin counter stops moving (read at 0) while its samples go on
	// at 40 Gb/s: the samples are believed, and a stays an elephant.
	e.Measured = counter(0)
	for range 100 { // five seconds: its estimate back to 40 after the gap above
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		e.Observe("leaf1", list(1, a))
	}
	if g := rate(a); g < 34 {
		t.Errorf("a at %.1f Gb/s with its counter stuck at 0 and its samples at 40, want the samples' rate", g)
	}
	// No lists at all from the leaf: a is pinned and its pin counter
	// still measures it (the leaf's stream stalled, or the controller
	// dropped its lists): it stays, for as long as the counter says so.
	e.Measured = counter(40)
	now = now.Add(6 * e.Tau)
	if g := rate(a); g != 40 {
		t.Errorf("a at %.1f Gb/s after %v without lists while its pin counter reads 40, want 40", g, 6*e.Tau)
	}
	// Then its counter cannot be read either (the reads time out on a
	// starved machine): the last reading grows old, and with no list
	// from the leaf nothing says a stopped. It stays, on its samples'
	// estimate, until unreadBackstop; b, never pinned, is gone.
	readAt := now
	e.Measured = func(k models.FlowKey) (float64, time.Time, bool) { return 40, readAt, k == a }
	now = now.Add(e.Fresh + silenceBackstop)
	if g := rate(a); g < e.Threshold/2 {
		t.Errorf("a at %.1f Gb/s, %v after its counter's last read and the leaf's last list, want it kept until %v", g, now.Sub(readAt), unreadBackstop)
	}
	if g := rate(b); g != 0 {
		t.Errorf("b at %.1f Gb/s after %v without lists and no counter, want gone", g, now.Sub(readAt))
	}
	now = readAt.Add(unreadBackstop + time.Second)
	if g := rate(a); g != 0 {
		t.Errorf("a at %.1f Gb/s %v after its counter's last read and the leaf's last list, want gone", g, now.Sub(readAt))
	}
	// Every flow of the leaf stops (a's pin removed with it): no lists
	// and no counter, and the controller's clock says so after the
	// backstop.
	e.Measured = nil
	now = now.Add(silenceBackstop + time.Second)
	if d := e.Detected(); len(d) != 0 {
		t.Errorf("%v without any list from the leaf, still detected: %+v", silenceBackstop+time.Second, d)
	}
}

// TestElephantsKeptWhileTheirLeafIsQuiet: a leaf that sends no list at
// all (its stream stalled on a starved machine) says nothing of its
// flows, pinned or not, counted or not: they stay elephants until
// unreadBackstop rather than all going at silenceBackstop. Once the leaf
// speaks again, a flow missing from its lists goes within a silence.
func TestElephantsKeptWhileTheirLeafIsQuiet(t *testing.T) {
	e := NewElephants(1024, 10, nil)
	now, leaf := time.Unix(1000, 0), time.Unix(50, 0)
	e.now = func() time.Time { return now }
	a := models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 49152}
	b := models.FlowKey{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 49153}
	const pkt = 4000
	perList := int(math.Floor(40e9 / 8 * 0.05 / pkt / 1024)) // 40 Gb/s each
	list := func(keys ...models.FlowKey) []models.FlowSample {
		var out []models.FlowSample
		for _, k := range keys {
			for range perList {
				out = append(out, models.FlowSample{Port: 1, Key: k, Bytes: pkt, At: leaf, Stands: 1})
			}
		}
		return out
	}
	detected := func(k models.FlowKey) bool {
		return slices.ContainsFunc(e.Detected(), func(d DetectedFlow) bool { return d.Key == k })
	}
	for range 100 { // five seconds of both
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		e.Observe("leaf1", list(a, b))
	}
	if !detected(a) || !detected(b) {
		t.Fatalf("a and b not detected: %+v", e.Detected())
	}
	now = now.Add(silenceBackstop + time.Second) // the leaf sends nothing
	if !detected(a) || !detected(b) {
		t.Errorf("%v without any list from the leaf, a or b gone: %+v; want both kept until %v", silenceBackstop+time.Second, e.Detected(), unreadBackstop)
	}
	// The leaf speaks again, without b: b goes within a silence.
	for range 10 {
		now, leaf = now.Add(50*time.Millisecond), leaf.Add(50*time.Millisecond)
		e.Observe("leaf1", list(a))
	}
	if !detected(a) || detected(b) {
		t.Errorf("after the leaf's lists came back without b: %+v; want a only", e.Detected())
	}
	now = now.Add(unreadBackstop + time.Second) // quiet past the backstop
	if detected(a) {
		t.Errorf("%v without any list from the leaf, a still detected", unreadBackstop+time.Second)
	}
}
