package controller

import (
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
