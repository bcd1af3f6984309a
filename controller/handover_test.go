package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/storetest"
	"github.com/accelnet/accelnet/topology"
)

// markedSwitches is tableSwitches that can be probed, counting full reads
// and probes per switch; a write to hold waits until its context ends
// (a leader that dies while writing).
type markedSwitches struct {
	*tableSwitches
	mu                    sync.Mutex
	reads, probes, writes map[models.SwitchID]int
	hold                  models.SwitchID
	held                  chan struct{} // closed once a write to hold started
}

func (m *markedSwitches) Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	m.mu.Lock()
	m.reads[sw]++
	m.mu.Unlock()
	return m.tableSwitches.Read(ctx, sw)
}

func (m *markedSwitches) Probe(ctx context.Context, sw models.SwitchID, all bool) (models.ForwardingState, error) {
	m.mu.Lock()
	m.probes[sw]++
	m.mu.Unlock()
	st, err := m.tableSwitches.Read(ctx, sw)
	st.FlowPins = nil
	if !all {
		st = probed(st)
	}
	return st, err
}

func (m *markedSwitches) Apply(ctx context.Context, sw models.SwitchID, d models.Diff) error {
	m.mu.Lock()
	m.writes[sw]++
	hold := sw == m.hold
	if hold {
		close(m.held)
		m.hold = ""
	}
	m.mu.Unlock()
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	return m.tableSwitches.Apply(ctx, sw, d)
}

// counted returns the full reads, probes and writes per switch so far,
// and starts counting again.
func (m *markedSwitches) counted() (reads, probes, writes map[models.SwitchID]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	reads, probes, writes = m.reads, m.probes, m.writes
	m.reads, m.probes, m.writes = map[models.SwitchID]int{}, map[models.SwitchID]int{}, map[models.SwitchID]int{}
	return reads, probes, writes
}

func (m *markedSwitches) table(sw models.SwitchID) models.ForwardingState {
	m.tableSwitches.mu.Lock()
	defer m.tableSwitches.mu.Unlock()
	return m.tables[sw].Canonical()
}

// markedReplica is one controller replica with its leader election, over
// the shared switches and etcd.
type markedReplica struct {
	c    *Controller
	reg  *prometheus.Registry
	lead *election.Leadership
	stop func()
}

func startMarkedReplica(t *testing.T, st *store.Store, cli *clientv3.Client, name string, sws markedDriver, limits pathcalc.Limits) *markedReplica {
	t.Helper()
	return startReplica(t, cli, name, Config{Store: st, Driver: sws, Can: markedCan(sws), Marks: st.Marks(128), ResyncInterval: time.Hour, Limits: limits})
}

// markedDriver is a markedSwitches, or a stub wrapping one: it probes and
// reads pins back.
type markedDriver interface {
	Driver
	Prober
	PinReader
}

// markedCan is what a markedDriver can do.
func markedCan(d markedDriver) Capabilities { return Capabilities{Prober: d, PinReader: d} }

// startReplica runs a controller configured as cfg with a leader
// election of its own (named name) until the test ends or stop.
func startReplica(t *testing.T, cli *clientv3.Client, name string, cfg Config) *markedReplica {
	t.Helper()
	lead := election.NewLeadership(cli, "http://"+name, 2*time.Second, slog.New(slog.DiscardHandler), nil)
	reg := prometheus.NewRegistry()
	cfg.Leadership, cfg.Registerer = lead, reg
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = lead.Run(ctx) })
	wg.Go(func() { _ = c.Run(ctx) })
	r := &markedReplica{c: c, reg: reg, lead: lead, stop: func() { cancel(); wg.Wait() }}
	t.Cleanup(r.stop)
	return r
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	backstop := time.After(time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-backstop:
			t.Fatalf("%s: not after a minute: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waitMarks(t *testing.T, marks *store.Marks, want func(map[models.SwitchID]models.SwitchMark) error) {
	t.Helper()
	waitFor(t, "handover marks", func() error {
		got, err := marks.Load(t.Context())
		if err != nil {
			return err
		}
		return want(got)
	})
}

// TestNewTermTakesSwitchesAsMarked: a leader records a mark per switch
// once the switches are in sync and quiet, and removes a switch's mark
// before it writes to it. The next leader takes the marked switches as
// marked: probed, not read, when it wants what they have; read but for
// their flow pins when it wants other routes (here it writes routes per
// leaf, its predecessor aggregated them). It reads in full a switch its
// leader was writing when it stopped (a route missing, which a probe
// does not see) and one whose tables are gone (a reboot), and repairs
// both. Real etcd and leader election.
func TestNewTermTakesSwitchesAsMarked(t *testing.T) {
	for _, tc := range []struct {
		name        string
		next        pathcalc.Limits // the next leader's
		otherRoutes bool            // next wants other routes on some switches
	}{
		{name: "same plan"},
		{name: "other routes", next: pathcalc.Limits{PerLeafRoutes: true}, otherRoutes: true},
	} {
		t.Run(tc.name, func(t *testing.T) { testTakeoverAsMarked(t, tc.next, tc.otherRoutes) })
	}
}

// markedFabric is a real etcd holding a 2×4 leaf-spine's topology, and
// its switches (markedSwitches, empty).
func markedFabric(t *testing.T) (*store.Store, *clientv3.Client, models.Topology, *markedSwitches) {
	t.Helper()
	return markedFabricWith(t, func(*models.Topology) {})
}

// markedFabricWith is markedFabric with its topology changed by edit
// before it is stored.
func markedFabricWith(t *testing.T, edit func(*models.Topology)) (*store.Store, *clientv3.Client, models.Topology, *markedSwitches) {
	t.Helper()
	st, cli := storetest.Etcd(t)
	topo, err := topology.LeafSpine(2, 4, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	edit(&topo)
	if _, err := st.PutTopology(t.Context(), topo, 0); err != nil {
		t.Fatal(err)
	}
	sws := &markedSwitches{tableSwitches: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}},
		reads: map[models.SwitchID]int{}, probes: map[models.SwitchID]int{}, writes: map[models.SwitchID]int{}}
	return st, cli, topo, sws
}

func testTakeoverAsMarked(t *testing.T, next pathcalc.Limits, otherRoutes bool) {
	st, cli, topo, sws := markedFabric(t)
	marks := st.Marks(128)
	all := func(got map[models.SwitchID]models.SwitchMark) error {
		if len(got) != len(topo.Switches) {
			return fmt.Errorf("%d marks, want one per switch (%d)", len(got), len(topo.Switches))
		}
		return nil
	}

	a := startMarkedReplica(t, st, cli, "a", sws, pathcalc.Limits{})
	waitFor(t, "the first leader's switches in sync", func() error {
		if !a.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return a.c.Ready()
	})
	waitMarks(t, marks, all)

	// leaf1 loses a route; its leader finds out and is writing it back
	// when it stops.
	const writing, rebooted = models.SwitchID("leaf1"), models.SwitchID("leaf3")
	sws.mu.Lock()
	sws.hold, sws.held = writing, make(chan struct{})
	sws.mu.Unlock()
	sws.change(writing, func(s *models.ForwardingState) { s.Routes = s.Routes[1:] })
	a.c.Resync(writing)
	select {
	case <-sws.held:
	case <-time.After(time.Minute):
		t.Fatal("no write to leaf1 after a minute")
	}
	got, err := marks.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[writing]; ok {
		t.Fatal("leaf1 is being written and still has its mark")
	}
	a.stop()
	sws.change(rebooted, func(s *models.ForwardingState) { *s = models.ForwardingState{} })
	sws.counted()

	b := startMarkedReplica(t, st, cli, "b", sws, next)
	waitFor(t, "the next leader's switches in sync", func() error {
		if !b.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return b.c.Ready()
	})
	reads, probes, writes := sws.counted()
	for _, sw := range topo.Switches {
		repaired := sw.Name == writing || sw.Name == rebooted
		if wantReads := map[bool]int{true: 1}[repaired]; reads[sw.Name] != wantReads {
			t.Errorf("%s read in full %d times, want %d", sw.Name, reads[sw.Name], wantReads)
		}
		if written := writes[sw.Name] > 0; !otherRoutes && written != repaired {
			t.Errorf("%s written %d times by the new leader", sw.Name, writes[sw.Name])
		}
	}
	if probes[writing] != 0 || probes[rebooted] != 1 {
		t.Errorf("probes %v: want none of leaf1 (unmarked), one of leaf3", probes)
	}
	result := func(r string) float64 { return testutil.ToFloat64(b.c.m.handover.WithLabelValues(r)) }
	for r, want := range map[string]float64{"unmarked": 1, "probe_differs": 1} {
		if got := result(r); got != want {
			t.Errorf("accelnet_handover_switches_total{result=%q} = %v, want %v", r, got, want)
		}
	}
	// Switches whose routes the other plan leaves alone are trusted whole.
	if trusted, pinsTrusted := result("trusted"), result("pins_trusted"); trusted+pinsTrusted != 4 || otherRoutes != (pinsTrusted > 0) {
		t.Errorf("taken as marked: %v whole, %v but for their routes; want 4 in all, some but for their routes: %v", trusted, pinsTrusted, otherRoutes)
	}
	// Every switch has what the new leader wants: read in full now, none
	// needs a write.
	b.c.mu.Lock()
	clear(b.c.known)
	b.c.mu.Unlock()
	for _, sw := range topo.Switches {
		if n, err := b.c.Reconcile(t.Context(), sw.Name); n != 0 || err != nil {
			t.Errorf("%s read back after the takeover: %d updates to write (%v)", sw.Name, n, err)
		}
	}
	// The new term marks the switches it repaired, once they are quiet.
	waitMarks(t, marks, all)
}

// TestMarkingWaitsForAWrite: a mark is never put while a write to its
// switch is under way, and a write waits for a put under way, then
// removes the mark: etcd never says "as marked" of a switch being
// written.
func TestMarkingWaitsForAWrite(t *testing.T) {
	st, tm := leadingMarks(t)
	known := func(models.SwitchID) (knownState, bool) {
		return knownState{st: models.ForwardingState{Routes: []models.Route{{Prefix: netip.MustParsePrefix("10.0.1.0/24"), MemberID: 1}}}}, true
	}
	one := func(fn func(models.SwitchID)) { fn("leaf1") }
	inTopology := func(models.SwitchID) bool { return true }
	marked := func() bool {
		got, err := st.Marks(128).Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, ok := got["leaf1"]
		return ok
	}

	done, err := tm.beforeWrite(t.Context(), "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tm.mark(t.Context(), time.Now().Add(time.Hour), known, one, inTopology); n != 0 || err != nil || marked() {
		t.Fatalf("marked a switch being written: %d, %v", n, err)
	}
	done()
	if n, err := tm.mark(t.Context(), time.Now(), known, one, inTopology); n != 0 || err != nil || marked() {
		t.Fatalf("marked a switch written a moment ago: %d, %v", n, err)
	}
	if n, err := tm.mark(t.Context(), time.Now().Add(markQuiet), known, one, inTopology); n != 1 || err != nil || !marked() {
		t.Fatalf("a quiet switch: %d marks put (%v), want 1", n, err)
	}
	done, err = tm.beforeWrite(t.Context(), "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	if marked() {
		t.Fatal("a write went ahead with the switch's mark in etcd")
	}
	done()

	// A write that begins while a put is on its way to etcd.
	slow := &slowMarks{MarkStore: st.Marks(128), entered: make(chan struct{}), release: make(chan struct{})}
	tm.store = slow
	var putting sync.WaitGroup
	putting.Go(func() {
		if n, err := tm.mark(t.Context(), time.Now().Add(time.Hour), known, one, inTopology); n != 1 || err != nil {
			t.Errorf("a quiet switch: %d marks put (%v), want 1", n, err)
		}
	})
	<-slow.entered
	wrote := make(chan func())
	go func() {
		done, err := tm.beforeWrite(t.Context(), "leaf1")
		if err != nil {
			t.Error(err)
		}
		wrote <- done
	}()
	close(slow.release)
	putting.Wait()
	done = <-wrote
	if marked() {
		t.Fatal("a write went ahead while a put of its switch's mark landed")
	}
	done()
}

// slowMarks holds its first put until released.
type slowMarks struct {
	MarkStore
	entered, release chan struct{}
	once             sync.Once
}

func (s *slowMarks) Commit(ctx context.Context, fence clientv3.Cmp, put map[models.SwitchID]models.SwitchMark, del []models.SwitchID) error {
	if len(put) > 0 {
		s.once.Do(func() {
			close(s.entered)
			<-s.release
		})
	}
	return s.MarkStore.Commit(ctx, fence, put, del)
}

// leadingMarks is a term's marks, loaded (none), over a real etcd.
func leadingMarks(tb testing.TB) (*store.Store, *termMarks) {
	st, cli := storetest.Etcd(tb)
	lead := election.NewLeadership(cli, "http://self", 2*time.Second, slog.New(slog.DiscardHandler), nil)
	ctx, cancel := context.WithCancel(tb.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = lead.Run(ctx) })
	tb.Cleanup(func() { cancel(); wg.Wait() })
	backstop := time.After(time.Minute)
	for lead.Term() == nil {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-backstop:
			tb.Fatal("not leading after a minute")
		}
	}
	tm := newTermMarks(st.Marks(128), lead.Term(), prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"op"}), time.Now)
	tm.trust = map[models.SwitchID]models.SwitchMark{}
	close(tm.loaded)
	return st, tm
}

// BenchmarkUnmark is what a mark costs the first write to a quiet switch:
// removing the mark from etcd (one embedded member, in the test's
// temporary directory) before the write may go.
func BenchmarkUnmark(b *testing.B) {
	_, tm := leadingMarks(b)
	known := func(models.SwitchID) (knownState, bool) { return knownState{}, true }
	one := func(fn func(models.SwitchID)) { fn("leaf1") }
	inTopology := func(models.SwitchID) bool { return true }
	for b.Loop() {
		b.StopTimer()
		if n, err := tm.mark(b.Context(), time.Now().Add(time.Hour), known, one, inTopology); n != 1 || err != nil {
			b.Fatalf("%d marks put (%v)", n, err)
		}
		b.StartTimer()
		done, err := tm.beforeWrite(b.Context(), "leaf1")
		if err != nil {
			b.Fatal(err)
		}
		done()
	}
}

// ReadPins reads the pins of keys sw holds.
func (m *markedSwitches) ReadPins(ctx context.Context, sw models.SwitchID, keys []models.FlowKey) ([]models.FlowPin, error) {
	want := map[models.FlowKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	st, err := m.tableSwitches.Read(ctx, sw)
	var out []models.FlowPin
	for _, p := range st.FlowPins {
		if want[p.Key] {
			out = append(out, p)
		}
	}
	return out, err
}

// pinOverlay gives switches fixed flow pins, some of them unsettled (of
// intents not yet Installed).
type pinOverlay struct {
	pins      map[models.SwitchID][]models.FlowPin
	unsettled map[models.SwitchID][]models.FlowKey
}

func (o *pinOverlay) PinsFor(sw models.SwitchID) ([]models.FlowPin, uint64) {
	return slices.Clone(o.pins[sw]), 1
}
func (o *pinOverlay) UnsettledPins(sw models.SwitchID) []models.FlowKey { return o.unsettled[sw] }
func (o *pinOverlay) Synced(models.SwitchID, uint64)                    {}
func (o *pinOverlay) SetFabric(*topology.Snapshot, map[models.LinkID]bool, map[models.LinkID]string) {
}
func (o *pinOverlay) ProgramFailed(models.SwitchID, error)                       {}
func (o *pinOverlay) PinsRefused(models.SwitchID, []models.FlowKey, string, int) {}
func (o *pinOverlay) PinsReady() bool                                            { return true }

func testPin(i int, port uint32) models.FlowPin {
	return models.FlowPin{Key: models.FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: uint16(49152 + i)}, Port: port}
}

// TestNewTermReadsUnsettledPinsByKey: the intents admitted just before a
// leader died have pins the next term computes but the switches may not
// hold yet. Their keys are read from the switch; with the switch's other
// pins as the mark says, the switch is taken as marked and only the
// missing pins are written. A switch whose settled pins differ from its
// mark is read in full. Real etcd and leader election.
func TestNewTermReadsUnsettledPinsByKey(t *testing.T) {
	st, cli, topo, sws := markedFabric(t)
	settled := []models.FlowPin{testPin(1, 1), testPin(2, 2), testPin(3, 1), testPin(4, 2)}
	first := &pinOverlay{pins: map[models.SwitchID][]models.FlowPin{"leaf1": settled, "leaf2": settled}}
	can := markedCan(sws)
	can.Unsettled = first
	a := startReplica(t, cli, "a", Config{Store: st, Driver: sws, Can: can, Marks: st.Marks(128), ResyncInterval: time.Hour, Overlay: first})
	waitFor(t, "the first leader's switches in sync", func() error {
		if !a.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return a.c.Ready()
	})
	waitMarks(t, st.Marks(128), func(got map[models.SwitchID]models.SwitchMark) error {
		if len(got) != len(topo.Switches) {
			return fmt.Errorf("%d marks", len(got))
		}
		return nil
	})
	a.stop()
	sws.counted()

	// Two intents were admitted before the leader died, their pins not
	// written; on leaf2 a settled pin also moved behind the mark's back.
	fresh := []models.FlowPin{testPin(5, 1), testPin(6, 2)}
	next := &pinOverlay{
		pins: map[models.SwitchID][]models.FlowPin{
			"leaf1": slices.Concat(settled, fresh),
			"leaf2": slices.Concat([]models.FlowPin{testPin(1, 2)}, settled[1:], fresh),
		},
		unsettled: map[models.SwitchID][]models.FlowKey{"leaf1": {fresh[0].Key, fresh[1].Key}, "leaf2": {fresh[0].Key, fresh[1].Key}},
	}
	can.Unsettled = next
	b := startReplica(t, cli, "b", Config{Store: st, Driver: sws, Can: can, Marks: st.Marks(128), ResyncInterval: time.Hour, Overlay: next})
	waitFor(t, "the next leader's switches in sync", func() error {
		if !b.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return b.c.Ready()
	})
	reads, _, _ := sws.counted()
	if reads["leaf1"] != 0 {
		t.Errorf("leaf1, two pins unsettled: %d full reads, want none", reads["leaf1"])
	}
	if reads["leaf2"] != 1 {
		t.Errorf("leaf2, a settled pin moved: %d full reads, want 1", reads["leaf2"])
	}
	if got := testutil.ToFloat64(b.c.m.handoverUnsettled); got != 1 {
		t.Errorf("accelnet_handover_unsettled_reads_total = %v, want 1", got)
	}
	for sw, want := range next.pins {
		if got := sws.table(sw).FlowPins; !reflect.DeepEqual(got, models.ForwardingState{FlowPins: want}.Canonical().FlowPins) {
			t.Errorf("%s holds pins %v, want %v", sw, got, want)
		}
	}
}

// TestTermStartsTheResyncOver: the periodic resync (which reads every
// switch in full and drops the marks' trust) comes a whole interval
// after a term began, not a moment into its first sweep.
func TestTermStartsTheResyncOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the bubble's clock
		c, _ := tableControllerWith(t, 2, 2, Config{ResyncInterval: 30 * time.Second})
		believed := func() bool { // not stale: no resync since
			c.mu.RLock()
			defer c.mu.RUnlock()
			k, ok := c.known["leaf1"]
			return ok && k.epoch == c.resyncEpoch
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.housekeeping(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		advance := func(d time.Duration) { // the bubble's clock: no real waiting
			<-time.After(d)
			synctest.Wait()
		}
		c.mu.Lock()
		c.known["leaf1"] = knownState{}
		c.mu.Unlock()
		advance(20 * time.Second)
		c.termBegan <- struct{}{} // a term begins 20 s into the interval
		advance(15 * time.Second)
		if !believed() {
			t.Fatal("a resync 15 s into a term: the interval did not start over")
		}
		advance(16 * time.Second)
		if believed() {
			t.Fatal("no resync a whole interval after the term began")
		}
	})
}

// configCounter is switches' interface configuration in memory, counting
// the Gets per switch.
type configCounter struct {
	mu     sync.Mutex
	config map[models.SwitchID]map[uint32]models.InterfaceConfig
	gets   map[models.SwitchID]int
}

func (c *configCounter) GetConfig(_ context.Context, sw models.SwitchID) (map[uint32]models.InterfaceConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets[sw]++
	return maps.Clone(c.config[sw]), nil
}

func (c *configCounter) SetConfig(_ context.Context, sw models.SwitchID, ports map[uint32]models.InterfaceConfig) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config[sw] == nil {
		c.config[sw] = map[uint32]models.InterfaceConfig{}
	}
	maps.Copy(c.config[sw], ports)
	return nil
}

func (c *configCounter) counted() map[models.SwitchID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.gets
	c.gets = map[models.SwitchID]int{}
	return out
}

// brokenSwitch is markedSwitches that fails every read of one switch
// (while broken says so).
type brokenSwitch struct {
	*markedSwitches
	mu     sync.Mutex
	broken models.SwitchID
	failed int // reads failed
}

var errBroken = errors.New("rpc error: code = Unavailable desc = broken")

func (p *brokenSwitch) breaks(sw models.SwitchID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sw == p.broken {
		p.failed++
		return errBroken
	}
	return nil
}

func (p *brokenSwitch) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

func (p *brokenSwitch) set(sw models.SwitchID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = sw
}

func (p *brokenSwitch) Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	if err := p.breaks(sw); err != nil {
		return models.ForwardingState{}, err
	}
	return p.markedSwitches.Read(ctx, sw)
}

func (p *brokenSwitch) Probe(ctx context.Context, sw models.SwitchID, all bool) (models.ForwardingState, error) {
	if err := p.breaks(sw); err != nil {
		return models.ForwardingState{}, err
	}
	return p.markedSwitches.Probe(ctx, sw, all)
}

// TestTakeoverChecksConfigAfterTheTables: a new term checks the interface
// configuration of the switches its predecessor left marked only once
// every switch's tables are in sync (the tables are what a takeover must
// confirm first, and the config Gets took the emulator's cores from the
// probes). A switch without a mark, or resynced meanwhile, has its
// configuration checked at once; every switch's is checked once the
// tables are in sync.
func TestTakeoverChecksConfigAfterTheTables(t *testing.T) {
	st, cli, topo, sws, cfgs, marks := configuredMarkedFabric(t)
	a := startReplica(t, cli, "a", configuredConfig(st, sws, cfgs, marks, time.Hour))
	leadConfigured(t, a, topo, marks)
	a.stop()
	const unmarked, broken = models.SwitchID("leaf2"), models.SwitchID("spine1")
	if _, err := cli.Delete(t.Context(), store.KeyHandover+string(unmarked)); err != nil {
		t.Fatal(err)
	}
	cfgs.counted()

	p := &brokenSwitch{markedSwitches: sws, broken: broken}
	b := startReplica(t, cli, "b", configuredConfig(st, p, cfgs, marks, time.Hour))
	gets := map[models.SwitchID]int{}
	waitFor(t, "the new leader's first sweep over, the unmarked switch's config checked", func() error {
		maps.Copy(gets, cfgs.counted())
		if !b.c.TriedAll() {
			return fmt.Errorf("not every switch tried yet")
		}
		if gets[unmarked] == 0 {
			return fmt.Errorf("no Get of %s's config", unmarked)
		}
		return nil
	})
	// spine1 cannot be read: its tables are not in sync, so no marked
	// switch's config may be read, not even three retries of spine1
	// after the sweep (its backoff: 350 ms at least).
	failed := p.failures()
	waitFor(t, "spine1 retried three times", func() error {
		if n := p.failures() - failed; n < 3 {
			return fmt.Errorf("%d retries", n)
		}
		return nil
	})
	maps.Copy(gets, cfgs.counted())
	delete(gets, unmarked)
	if len(gets) > 0 {
		t.Fatalf("config read before every switch's tables were in sync: %v", gets)
	}
	// A switch resynced meanwhile (it reconnected: it may have lost its
	// state) is held no longer.
	const resynced = models.SwitchID("leaf1")
	b.c.Resync(resynced)
	waitFor(t, "the resynced switch's config checked", func() error {
		maps.Copy(gets, cfgs.counted())
		if gets[resynced] == 0 {
			return fmt.Errorf("no Get of %s's config", resynced)
		}
		return nil
	})
	delete(gets, resynced)
	if len(gets) > 0 {
		t.Fatalf("config read before every switch's tables were in sync: %v", gets)
	}
	p.set("") // spine1 answers again: its tables come in sync
	waitFor(t, "every switch's config checked once the tables are in sync", func() error {
		for _, sw := range topo.Switches {
			if s := b.c.Status()[sw.Name]; !s.ConfigInSync {
				return fmt.Errorf("%s: config not in sync (%s)", sw.Name, s.ConfigError)
			}
		}
		return nil
	})
}

// TestTakeoverConfigHeldNoLongerThanTablesFirstMax: a switch whose tables
// cannot be brought in sync holds the other switches' configuration
// checks only TablesFirstMax after the new term's first sweep.
func TestTakeoverConfigHeldNoLongerThanTablesFirstMax(t *testing.T) {
	st, cli, topo, sws, cfgs, marks := configuredMarkedFabric(t)
	a := startReplica(t, cli, "a", configuredConfig(st, sws, cfgs, marks, time.Hour))
	leadConfigured(t, a, topo, marks)
	a.stop()
	cfgs.counted()
	// spine2's tables cannot be read: the new leader never has every
	// switch in sync, yet checks every switch's configuration.
	p := &brokenSwitch{markedSwitches: sws, broken: "spine2"}
	b := startReplica(t, cli, "b", configuredConfig(st, p, cfgs, marks, 100*time.Millisecond))
	waitFor(t, "every switch's config checked", func() error {
		for _, sw := range topo.Switches {
			if s := b.c.Status()[sw.Name]; !s.ConfigInSync {
				return fmt.Errorf("%s: config not in sync (%s)", sw.Name, s.ConfigError)
			}
		}
		return nil
	})
	if err := b.c.Ready(); err == nil {
		t.Fatal("ready with spine2's tables unreadable")
	}
}

// configuredMarkedFabric is markedFabric with every switch's interface
// configuration managed (configCounter) and the marks' store.
func configuredMarkedFabric(t *testing.T) (*store.Store, *clientv3.Client, models.Topology, *markedSwitches, *configCounter, *store.Marks) {
	t.Helper()
	st, cli, topo, sws := markedFabricWith(t, func(topo *models.Topology) {
		for i := range topo.Switches {
			topo.Switches[i].GNMIAddr = "127.0.0.1:1" // configured over gNMI (configCounter here)
		}
	})
	cfgs := &configCounter{config: map[models.SwitchID]map[uint32]models.InterfaceConfig{}, gets: map[models.SwitchID]int{}}
	return st, cli, topo, sws, cfgs, st.Marks(128)
}

func configuredConfig(st *store.Store, d markedDriver, cfgs *configCounter, marks *store.Marks, tablesFirstMax time.Duration) Config {
	return Config{Store: st, Driver: d, Can: markedCan(d), Config: cfgs, Marks: marks, ResyncInterval: time.Hour, ReconcileTimeout: time.Hour, TablesFirstMax: tablesFirstMax}
}

// leadConfigured waits for r to lead with every switch in sync, marked,
// and configured.
func leadConfigured(t *testing.T, r *markedReplica, topo models.Topology, marks *store.Marks) {
	t.Helper()
	waitFor(t, "the first leader's switches in sync", func() error {
		if !r.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return r.c.Ready()
	})
	waitMarks(t, marks, func(got map[models.SwitchID]models.SwitchMark) error {
		if len(got) != len(topo.Switches) {
			return fmt.Errorf("%d marks, want %d", len(got), len(topo.Switches))
		}
		return nil
	})
	waitFor(t, "the first leader's config in sync", func() error {
		for _, sw := range topo.Switches {
			if s := r.c.Status()[sw.Name]; !s.ConfigInSync {
				return fmt.Errorf("%s: config not in sync (%s)", sw.Name, s.ConfigError)
			}
		}
		return nil
	})
}

// TestNewTermTakesForeignRecordsAsItsOwn: a switch its predecessor
// recorded in etcd as taken by another controller is, for a new term, a
// switch to take back: once its reconcile goes through the record is
// removed (every replica's event subscribers hear "switch-primary").
func TestNewTermTakesForeignRecordsAsItsOwn(t *testing.T) {
	st, cli, _, sws := markedFabric(t)
	always := clientv3.Compare(clientv3.Version(store.KeyTopology), ">", 0) // the predecessor's fence, long gone
	if err := st.Foreign().Put(t.Context(), always, models.ForeignPrimary{Switch: "leaf2", Since: time.Now(), Error: "not primary"}); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, cli, "a", Config{Store: st, Driver: sws, Can: markedCan(sws), Foreign: st.Foreign(), ResyncInterval: time.Hour})
	waitFor(t, "the leader's switches in sync", func() error {
		if !a.c.Leading() {
			return fmt.Errorf("not leading")
		}
		return a.c.Ready()
	})
	waitFor(t, "leaf2's record removed", func() error {
		recs, err := st.Foreign().Load(t.Context())
		if err == nil && len(recs) > 0 {
			err = fmt.Errorf("still recorded: %v", recs)
		}
		return err
	})
}
