package intents

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// countingReader answers every pin counter read with a growing count and
// records which keys were asked for.
type countingReader struct {
	mu    sync.Mutex
	asked map[models.FlowKey]int
}

func (r *countingReader) ReadPinCounters(_ context.Context, _ models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[models.FlowKey]uint64, len(keys))
	for _, k := range keys {
		r.asked[k]++
		out[k] = uint64(r.asked[k]) * 1000
	}
	return out, nil
}

func (r *countingReader) times(k models.FlowKey) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[k]
}

// observing runs m.Observe with r until the test ends; stop ends it
// sooner (and waits for it).
func observing(t *testing.T, m *Manager, r PinCounterReader, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Observe(ctx, r, interval)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	backstop := time.After(time.Minute)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-backstop:
			t.Fatalf("%s: not within a minute", what)
		case <-poll.C:
		}
	}
}

// installIntent adds an installed intent with one flow on path.
func installIntent(m *Manager, id string, key models.FlowKey, path []models.Endpoint) {
	in := models.Intent{ID: id, Tenant: "t"}
	in.Status.State = models.StateInstalled
	in.Status.Flows = []models.FlowStatus{{Path: path}}
	m.mu.Lock()
	m.p.all[id] = &entry{in: in, flows: []flow{{key: key}}}
	m.mu.Unlock()
}

// TestObserveWaitsForTheFirstSweep: until the switches were read back in
// this term, Observe reads no installed intent's counters (a new leader
// with 100,000 intents would read as much again, beside the read-back);
// detected elephants are read all along, and intents once swept.
func TestObserveWaitsForTheFirstSweep(t *testing.T) {
	var swept atomic.Bool
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}, Swept: swept.Load})
	if err != nil {
		t.Fatal(err)
	}
	flowKey := func(port uint16) models.FlowKey {
		return models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: port}
	}
	path := []models.Endpoint{{Switch: "leaf1", Port: 3}, {Switch: "spine1", Port: 2}}
	intentFlow, elephantFlow := flowKey(1000), flowKey(2000)
	installIntent(m, "i1", intentFlow, path)
	m.mu.Lock()
	m.p.elephants[elephantFlow] = &elephant{flow: DetectedFlow{Key: elephantFlow}, path: path}
	m.mu.Unlock()

	r := &countingReader{asked: map[models.FlowKey]int{}}
	observing(t, m, r, 10*time.Millisecond)
	waitUntil(t, "the elephant read five times", func() bool { return r.times(elephantFlow) >= 5 })
	if n := r.times(intentFlow); n != 0 {
		t.Fatalf("the intent's counters read %d times before the first sweep was over", n)
	}
	swept.Store(true)
	waitUntil(t, "the intent read once swept", func() bool { return r.times(intentFlow) >= 2 })
}

// barrierReader answers a round of pin counter reads only once all n
// switches' reads are in flight together (else each waits out its
// deadline): a reader that asks one switch after another never gets an
// answer.
type barrierReader struct {
	n       int
	mu      sync.Mutex
	waiting int
	release chan struct{}
	counted map[models.FlowKey]uint64
}

func (r *barrierReader) ReadPinCounters(ctx context.Context, _ models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error) {
	r.mu.Lock()
	r.waiting++
	release := r.release
	if r.waiting == r.n {
		close(release)
		r.release, r.waiting = make(chan struct{}), 0
	}
	r.mu.Unlock()
	select {
	case <-release:
	case <-ctx.Done():
		r.mu.Lock()
		if r.release == release {
			r.waiting-- // gave up: it is not in flight with the next ones
		}
		r.mu.Unlock()
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return countUp(r.counted, keys), nil
}

// countUp advances each key's counter by a gigabyte and returns them.
func countUp(counted map[models.FlowKey]uint64, keys []models.FlowKey) map[models.FlowKey]uint64 {
	out := make(map[models.FlowKey]uint64, len(keys))
	for _, k := range keys {
		counted[k] += 1e9
		out[k] = counted[k]
	}
	return out
}

// pinnedOnLeaves is a manager with n pinned elephants, one on each of
// leaf0…leaf(n-1), and their keys.
func pinnedOnLeaves(t *testing.T, n int) (*Manager, []models.FlowKey) {
	t.Helper()
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []models.FlowKey
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range n {
		k := models.FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), Dst: netip.MustParseAddr("10.0.9.1"), SrcPort: 1000}
		leaf := models.SwitchID(fmt.Sprintf("leaf%d", i))
		m.p.elephants[k] = &elephant{flow: DetectedFlow{Key: k}, path: []models.Endpoint{{Switch: leaf, Port: 3}}}
		keys = append(keys, k)
	}
	return m, keys
}

// TestObserveReadsSwitchesTogether: the switches' pin counters are read
// at once, each read with its own deadline, so a round takes about its
// slowest read, not the sum: read one after another, a round of slow
// switches would leave the first ones' readings stale (and their pinned
// elephants judged without them) by the time the last answered.
func TestObserveReadsSwitchesTogether(t *testing.T) {
	m, keys := pinnedOnLeaves(t, 4)
	r := &barrierReader{n: len(keys), release: make(chan struct{}), counted: map[models.FlowKey]uint64{}}
	observing(t, m, r, time.Second)
	for _, k := range keys {
		waitUntil(t, fmt.Sprintf("%v measured (the switches read together)", k), func() bool {
			_, _, ok := m.MeasuredRate(k)
			return ok
		})
		if g, _, _ := m.MeasuredRate(k); g <= 0 {
			t.Fatalf("%v measured at %.1f Gb/s, want its counter's rate", k, g)
		}
	}
}

// slowReader answers every pin counter read after delay (a starved
// machine), unless its deadline comes first.
type slowReader struct {
	delay   time.Duration
	mu      sync.Mutex
	counted map[models.FlowKey]uint64
}

func (r *slowReader) ReadPinCounters(ctx context.Context, _ models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error) {
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return countUp(r.counted, keys), nil
}

// TestReadsOutlastAStarvedMachine: when every switch takes longer than
// the read deadline to answer (a starved machine), the deadline grows
// until the reads complete and the pinned elephants are measured,
// rather than every read being cut short round after round.
func TestReadsOutlastAStarvedMachine(t *testing.T) {
	m, keys := pinnedOnLeaves(t, 2)
	observing(t, m, &slowReader{delay: pinReadDeadline * 3 / 2, counted: map[models.FlowKey]uint64{}}, 100*time.Millisecond)
	for _, k := range keys {
		waitUntil(t, fmt.Sprintf("%v measured though each read takes 1.5 deadlines", k), func() bool {
			_, _, ok := m.MeasuredRate(k)
			return ok
		})
	}
}

// TestOneSilentSwitchKeepsTheDeadline: one switch of several that never
// answers does not stretch the read deadline (the others' readings would
// go stale waiting for it); most switches timing out together does.
func TestOneSilentSwitchKeepsTheDeadline(t *testing.T) {
	d := readDeadline{base: time.Second}
	ok, late := pinRead{took: 10 * time.Millisecond}, pinRead{took: time.Second, timedOut: true}
	d.adapt([]pinRead{ok, ok, ok, late})
	if got := d.now(); got != time.Second {
		t.Errorf("one switch of four timed out: deadline %s, want 1s", got)
	}
	d.adapt([]pinRead{ok, late, late, late})
	if got := d.now(); got != 2*time.Second {
		t.Errorf("three of four timed out: deadline %s, want 2s", got)
	}
	for range 5 {
		d.adapt([]pinRead{late, late})
	}
	if got := d.now(); got != pinReadDeadlineMax {
		t.Errorf("timed out round after round: deadline %s, want at most %s", got, pinReadDeadlineMax)
	}
	d.adapt([]pinRead{{took: 1500 * time.Millisecond}, ok})
	if got := d.now(); got != 3*time.Second {
		t.Errorf("answered within 1.5 s: deadline %s, want twice that", got)
	}
	d.adapt([]pinRead{ok, ok})
	if got := d.now(); got != time.Second {
		t.Errorf("answered at once: deadline %s, want back to 1s", got)
	}
}

// failingReader answers no pin counter read, and counts them.
type failingReader struct{ reads atomic.Int64 }

func (r *failingReader) ReadPinCounters(context.Context, models.SwitchID, []models.FlowKey) (map[models.FlowKey]uint64, error) {
	r.reads.Add(1)
	return nil, errors.New("unavailable")
}

// TestUnreadIntentHasNoRate: an intent whose switch does not answer has
// no observed rate, rather than one of 0 Gb/s (the hot-link mover does
// not move an intent whose own traffic it cannot count, and would count
// none).
func TestUnreadIntentHasNoRate(t *testing.T) {
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	key := models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 1000}
	installIntent(m, "i1", key, []models.Endpoint{{Switch: "leaf1", Port: 3}, {Switch: "spine1", Port: 2}})
	r := &failingReader{}
	stop := observing(t, m, r, 10*time.Millisecond)
	waitUntil(t, "three reads tried", func() bool { return r.reads.Load() >= 3 })
	stop()
	m.obs.mu.Lock()
	g, ok := m.obs.byIntent["i1"]
	m.obs.mu.Unlock()
	if ok {
		t.Errorf("an intent whose switch never answered observed at %.1f Gb/s, want no rate", g)
	}
}

// intentAndClock is a manager with two installed intents of one flow
// each: id (its flow key) and "other" (clock: its reads count the
// rounds of Observe).
func intentAndClock(t *testing.T, id string) (m *Manager, key, clock models.FlowKey) {
	t.Helper()
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	key = models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 1000}
	clock = models.FlowKey{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.1.2"), SrcPort: 1000}
	installIntent(m, id, key, []models.Endpoint{{Switch: "leaf1", Port: 3}, {Switch: "spine1", Port: 2}})
	installIntent(m, "other", clock, []models.Endpoint{{Switch: "leaf1", Port: 4}, {Switch: "spine2", Port: 2}})
	return m, key, clock
}

// TestMovingIntentKeepsItsRate: an intent moved to another path is not
// read until its new pins are confirmed, and its new counters give a
// rate only at their second read; all along it keeps the rate it had
// (its traffic moved with it: counted as nobody's, congestion weights
// took it for hashed load).
func TestMovingIntentKeepsItsRate(t *testing.T) {
	m, key, clock := intentAndClock(t, "moving")
	r := &countingReader{asked: map[models.FlowKey]int{}}
	observing(t, m, r, 10*time.Millisecond)
	rate := func() (float64, bool) {
		m.obs.mu.Lock()
		defer m.obs.mu.Unlock()
		g, ok := m.obs.byIntent["moving"]
		return g, ok
	}
	waitUntil(t, "the intent measured", func() bool { g, ok := rate(); return ok && g > 0 })
	m.mu.Lock()
	e := m.p.all["moving"]
	e.pinned = true
	e.in.Status.State = models.StateAdmitted // moved: its new pins not yet confirmed
	e.in.Status.Flows = []models.FlowStatus{{Path: []models.Endpoint{{Switch: "leaf2", Port: 3}, {Switch: "spine2", Port: 2}}}}
	m.mu.Unlock()
	reads := r.times(clock)
	waitUntil(t, "three more reads", func() bool { return r.times(clock) >= reads+3 })
	if g, ok := rate(); !ok || g <= 0 {
		t.Fatalf("while moving: rate %.3f (known %v), want the one it had", g, ok)
	}
	m.mu.Lock()
	e.in.Status.State = models.StateInstalled // confirmed: read on leaf2 from now on
	m.mu.Unlock()
	first := r.times(key)
	waitUntil(t, "three reads on its new path", func() bool {
		if g, ok := rate(); !ok || g <= 0 {
			t.Fatalf("read on its new path %d times: rate %.3f (known %v), want the one it had until measured there", r.times(key)-first, g, ok)
		}
		return r.times(key) >= first+3
	})
}

// TestNeverMeasuredIntentIsUnmeasured: an intent pinned but never read
// (admitted, its pins not yet confirmed) has no rate to keep; Observe
// lists it as unmeasured, so that its reservation stands for its load
// (TestPinnedLoadCountsUnmeasuredIntentsAtTheirReservation), until its
// own counters give a rate.
func TestNeverMeasuredIntentIsUnmeasured(t *testing.T) {
	m, _, _ := intentAndClock(t, "new")
	m.mu.Lock()
	m.p.all["new"].pinned = true
	m.p.all["new"].in.Status.State = models.StateAdmitted
	m.mu.Unlock()
	unmeasured := func() bool {
		m.obs.mu.Lock()
		defer m.obs.mu.Unlock()
		return m.obs.unmeasured["new"]
	}
	r := &countingReader{asked: map[models.FlowKey]int{}}
	observing(t, m, r, 10*time.Millisecond)
	waitUntil(t, "the other intent measured", func() bool {
		m.obs.mu.Lock()
		defer m.obs.mu.Unlock()
		_, ok := m.obs.byIntent["other"]
		return ok
	})
	if !unmeasured() {
		t.Fatal("an admitted intent never read is not listed as unmeasured")
	}
	m.mu.Lock()
	m.p.all["new"].in.Status.State = models.StateInstalled
	m.mu.Unlock()
	waitUntil(t, "the intent measured on its pins", func() bool { return !unmeasured() })
	m.obs.mu.Lock()
	_, ok := m.obs.byIntent["new"]
	m.obs.mu.Unlock()
	if !ok {
		t.Fatal("no longer listed as unmeasured, and no rate either")
	}
}
