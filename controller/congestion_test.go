package controller

import (
	"maps"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkAdjustWeights: one congestion interval's look at a k=48
// fat-tree's 221,184 link directions, every port carrying 40% of its
// capacity (nothing hot, nothing biased: what runs every 5 s at steady
// state).
//
//	go test ./controller -run '^$' -bench AdjustWeights -benchmem -cpu 1
func BenchmarkAdjustWeights(b *testing.B) {
	topo, err := topology.FatTree(48, 100)
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Store: &store.Store{}, Driver: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}})
	if err != nil {
		b.Fatal(err)
	}
	c.setTopology(b.Context(), topo, 1)
	t0 := time.Now()
	for l := range c.current().snap.AllFabricLinks() {
		for _, e := range []models.Endpoint{l.A, l.B} {
			for i, at := range []time.Time{t0, t0.Add(time.Second)} {
				c.tele.Observe(models.CounterSample{Switch: e.Switch, Port: e.Port, Timestamp: at,
					OutOctets: uint64(i) * uint64(0.4*l.Gbps*1e9/8), Has: models.HasOutOctets})
			}
		}
	}
	for b.Loop() {
		c.adjustWeights()
	}
	if n := len(c.Biases()); n != 0 {
		b.Fatalf("%d ports biased at 40%% load", n)
	}
}

// TestRepinnedDirectionCountsAfresh: a link direction measured at 100%
// against alternatives at 40% is cut after congestionPersist hot
// intervals when its load stays hashed. When its pinned load changes
// between two of them (the placement moved flows: its reading may still
// show the ones that left), the count starts again, and it takes
// congestionPersist more hot intervals with that pinned load.
func TestRepinnedDirectionCountsAfresh(t *testing.T) {
	topo, err := topology.FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[models.Endpoint]float64{}
	c, err := New(Config{Store: &store.Store{}, Driver: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}},
		PinnedLoad: func() map[models.Endpoint]float64 { return maps.Clone(pinned) }})
	if err != nil {
		t.Fatal(err)
	}
	c.setTopology(t.Context(), topo, 1)
	var hot models.Endpoint
	t0 := time.Now()
	for l := range c.current().snap.AllFabricLinks() {
		for _, e := range []models.Endpoint{l.A, l.B} {
			share := 0.4
			if hot == (models.Endpoint{}) {
				hot, share = e, 1
			}
			for i, at := range []time.Time{t0, t0.Add(time.Second)} {
				c.tele.Observe(models.CounterSample{Switch: e.Switch, Port: e.Port, Timestamp: at,
					OutOctets: uint64(float64(i) * share * l.Gbps * 1e9 / 8), Has: models.HasOutOctets})
			}
		}
	}
	intervals := func(n int) {
		for range n {
			c.adjustWeights()
		}
	}
	intervals(congestionPersist - 1)
	pinned[hot] = 30 // pinned flows moved onto it: 70 Gb/s still hashed
	intervals(1)
	if _, cut := c.Biases()[hot]; cut {
		t.Fatalf("%s cut in the interval its pinned load changed", hot)
	}
	intervals(congestionPersist - 1)
	if _, cut := c.Biases()[hot]; cut {
		t.Fatalf("%s cut after %d hot intervals with its new pinned load, want %d", hot, congestionPersist-1, congestionPersist)
	}
	intervals(1)
	if _, cut := c.Biases()[hot]; !cut {
		t.Fatalf("%s not cut after %d hot intervals with its pinned load steady (biases %v)", hot, congestionPersist, c.Biases())
	}
}

// congestionFixture is a leader's controller on a k=4 fat-tree whose
// fabric ports all carry 40% of their capacity, and read, which feeds
// one more interval's readings: hot carrying share of its capacity, with
// its queue (bytes) reported if queue is not nil.
func congestionFixture(t *testing.T) (c *Controller, hot models.Endpoint, read func(share float64, queue *uint64)) {
	t.Helper()
	topo, err := topology.FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	c, err = New(Config{Store: &store.Store{}, Driver: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}})
	if err != nil {
		t.Fatal(err)
	}
	c.setTopology(t.Context(), topo, 1)
	var ports []models.Endpoint
	for l := range c.current().snap.AllFabricLinks() {
		ports = append(ports, l.A, l.B)
	}
	hot = ports[0]
	octets := map[models.Endpoint]uint64{}
	at := time.Now()
	read = func(share float64, queue *uint64) {
		at = at.Add(time.Second)
		for _, e := range ports {
			s := 0.4
			if e == hot {
				s = share
			}
			octets[e] += uint64(s * 100e9 / 8)
			c.tele.Observe(models.CounterSample{Switch: e.Switch, Port: e.Port, Timestamp: at, OutOctets: octets[e], Has: models.HasOutOctets})
			if e == hot && queue != nil {
				c.tele.Observe(models.CounterSample{Switch: e.Switch, Port: e.Port, Timestamp: at, Queue: "RDMA", QueueBytes: *queue, Has: models.HasQueueLen})
			}
		}
	}
	read(0.4, nil) // the first reading: a rate from the next on
	read(0.4, nil)
	return c, hot, read
}

// cutAfter feeds readings of hot at share with queue until its weight is
// cut and says after how many congestion intervals (0: not in 10).
func cutAfter(c *Controller, hot models.Endpoint, read func(float64, *uint64), share float64, queue *uint64) int {
	for i := 1; i <= 10; i++ {
		read(share, queue)
		c.adjustWeights()
		if _, cut := c.Biases()[hot]; cut {
			return i
		}
	}
	return 0
}

// TestQueueJudgesCongestion: where the switch reports a direction's
// queue, its delay judges beside utilization. A direction that fills
// with a queue (8 µs, the ECN threshold) is cut after congestionPersist
// intervals, one sooner than when only its smoothed utilization is known
// (it needs a second reading to reach 90%). One at 95% with no standing
// queue is left alone (cut when its queue is not reported); one at 70%
// with a standing queue is cut.
func TestQueueJudgesCongestion(t *testing.T) {
	kmin := uint64(100_000) // 8 µs at 100 Gb/s
	empty := uint64(0)
	for _, c := range []struct {
		name  string
		share float64
		queue *uint64
		want  int
	}{
		{"fills, queue reported", 1, &kmin, congestionPersist},
		{"fills, utilization alone", 1, nil, congestionPersist + 1},
		{"95%, no standing queue", 0.95, &empty, 0},
		{"95%, queue not reported", 0.95, nil, congestionPersist + 2}, // its average reaches 90% at the third reading
		{"70%, standing queue", 0.7, &kmin, congestionPersist},
		{"70%, utilization alone", 0.7, nil, 0},
	} {
		ctl, hot, read := congestionFixture(t)
		if got := cutAfter(ctl, hot, read, c.share, c.queue); got != c.want {
			t.Errorf("%s: cut after %d intervals, want %d (0: never)", c.name, got, c.want)
		}
	}
}

// pinLog stands in for the intents' pin table: changes of pins, each at
// a generation, confirmed or not.
type pinLog struct {
	gen       uint64
	confirmed map[uint64]bool
}

// change makes n changes and returns their generations.
func (l *pinLog) change(n int) []uint64 {
	var out []uint64
	for range n {
		l.gen++
		l.confirmed[l.gen] = false
		out = append(out, l.gen)
	}
	return out
}

func (l *pinLog) pending(after, upTo uint64) (int, uint64) {
	n := 0
	for g, ok := range l.confirmed {
		if !ok && g > after && g <= upTo {
			n++
		}
	}
	return n, l.gen
}

// TestWeightsWaitForPins: weights move hashed traffic, and a direction
// reads hot with flows whose pins are not written yet. While changes of
// pins are on their way, the congestion loop leaves every weight alone:
// for as long as the switches keep confirming them, however long that
// takes (a thousand intents moved at once on a starved machine), and for
// telemetry.PinWaitLooks intervals once none is confirmed (a switch that
// keeps failing does not hold the weights for ever, and is not waited
// for again). It waits for the changes under way when it began to wait,
// not for later ones: where pins come and go all the time it still
// judges. Once the pins are confirmed, a port whose own pins changed is
// judged only by a reading whose interval began an interval or more
// after the confirmation.
func TestWeightsWaitForPins(t *testing.T) {
	c, hot, read := congestionFixture(t)
	pins := &pinLog{confirmed: map[uint64]bool{}}
	c.cfg.PinsPending = pins.pending
	moved := pins.change(3 * telemetry.PinWaitLooks) // confirmed one an interval
	for i, g := range moved {
		read(1, nil)
		c.adjustWeights()
		if len(c.Biases()) != 0 {
			t.Fatalf("interval %d with pins on their way: biases %v", i+1, c.Biases())
		}
		pins.confirmed[g] = true
	}
	if n := cutAfter(c, hot, read, 1, nil); n != congestionPersist {
		t.Fatalf("pins confirmed: %s cut after %d intervals, want %d", hot, n, congestionPersist)
	}

	// A switch that confirms nothing holds the weights telemetry.PinWaitLooks
	// intervals, once.
	c, hot, read = congestionFixture(t)
	pins = &pinLog{confirmed: map[uint64]bool{}}
	c.cfg.PinsPending = pins.pending
	pins.change(1)
	for i := range telemetry.PinWaitLooks {
		read(1, nil)
		c.adjustWeights()
		if len(c.Biases()) != 0 {
			t.Fatalf("interval %d with a pin pending: biases %v", i+1, c.Biases())
		}
	}
	if n := cutAfter(c, hot, read, 1, nil); n != congestionPersist {
		t.Fatalf("a pin pending past %d intervals: %s cut after %d more, want %d", telemetry.PinWaitLooks, hot, n, congestionPersist)
	}

	// Pins changed every interval and confirmed by the next: the loop
	// judges every other interval.
	c, hot, read = congestionFixture(t)
	pins = &pinLog{confirmed: map[uint64]bool{}}
	c.cfg.PinsPending = pins.pending
	var last []uint64
	n := 0
	for i := 1; i <= 4*congestionPersist && n == 0; i++ {
		for _, g := range last {
			pins.confirmed[g] = true
		}
		last = pins.change(1)
		read(1, nil)
		c.adjustWeights()
		if _, cut := c.Biases()[hot]; cut {
			n = i
		}
	}
	if n == 0 || n > 2*congestionPersist {
		t.Fatalf("pins changing every interval: %s cut after %d intervals, want at most %d", hot, n, 2*congestionPersist)
	}

	c, hot, read = congestionFixture(t)
	c.cfg.PinsPending = nil
	after := false // every reading of hot is taken before its pins' change took effect
	c.cfg.ReadAfterPins = func(e models.Endpoint, _, _ time.Time) bool { return e != hot || after }
	if n := cutAfter(c, hot, read, 1, nil); n != 0 {
		t.Fatalf("cut by readings taken before its pins' change: after %d intervals", n)
	}
	after = true // the change long past
	if n := cutAfter(c, hot, read, 1, nil); n != congestionPersist {
		t.Fatalf("with its pins' change long past, %s cut after %d intervals, want %d", hot, n, congestionPersist)
	}
}
