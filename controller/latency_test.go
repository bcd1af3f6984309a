package controller

import (
	"sync"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// TestLatencyServesConcurrentCallers: the matrix (its ticker) and pair
// requests (the API) ask for paths at once, each time on a fabric state
// the latency cache has not listed yet. Each answer has every spine's
// path; under -race, a ledger listed by two callers at once fails here.
func TestLatencyServesConcurrentCallers(t *testing.T) {
	const spines = 4
	topo, err := topology.LeafSpine(4, spines, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Store: &store.Store{}, Driver: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}}})
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(1); rev <= 5; rev++ {
		c.setTopology(t.Context(), topo, rev) // a new state: the cache starts afresh
		hosts := c.current().snap.Hosts()
		var wg sync.WaitGroup
		for _, src := range hosts {
			for _, dst := range hosts {
				if src.Attach.Switch == dst.Attach.Switch {
					continue
				}
				wg.Go(func() {
					p, err := c.PairLatency(src.Name, dst.Name, 0)
					if err != nil {
						t.Errorf("%s → %s: %v", src.Name, dst.Name, err)
					} else if len(p.Paths) != spines {
						t.Errorf("%s → %s: %d paths, want %d", src.Name, dst.Name, len(p.Paths), spines)
					}
				})
			}
			wg.Go(func() {
				m, err := c.LatencyMatrix()
				if err != nil {
					t.Errorf("matrix: %v", err)
				} else if len(m.Leaves) != 4 {
					t.Errorf("matrix: %d leaves, want 4", len(m.Leaves))
				}
			})
		}
		wg.Wait()
	}
}
