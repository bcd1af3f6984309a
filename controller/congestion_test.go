package controller

import (
	"maps"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
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
