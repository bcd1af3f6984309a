package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store/storetest"
	"github.com/accelnet/accelnet/topology"
)

// heldReads is tableSwitches whose reads wait until released, counting
// how many are under way at once.
type heldReads struct {
	*tableSwitches
	mu           sync.Mutex
	now, most    int
	open         chan struct{} // closed: reads go through
	arrived      chan struct{} // one token per read that started
	holdingReads bool
}

func (h *heldReads) Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error) {
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	open := h.open
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}()
	select {
	case h.arrived <- struct{}{}:
	default:
	}
	select {
	case <-open:
	case <-ctx.Done():
		return models.ForwardingState{}, ctx.Err()
	}
	return h.tableSwitches.Read(ctx, sw)
}

func (h *heldReads) peak() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most
}

// TestFirstSweepReadsMoreSwitchesAtOnce: a new term reads every switch
// back with SweepWorkers reconciles at once (each a different switch);
// once every switch was tried, the tables go back to Workers at once.
// Real etcd and leader election.
func TestFirstSweepReadsMoreSwitchesAtOnce(t *testing.T) {
	st, cli := storetest.Etcd(t)
	topo, err := topology.LeafSpine(4, 4, 1, 100) // 8 switches
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutTopology(t.Context(), topo, 0); err != nil {
		t.Fatal(err)
	}
	sws := &heldReads{tableSwitches: &tableSwitches{tables: map[models.SwitchID]models.ForwardingState{}},
		open: make(chan struct{}), arrived: make(chan struct{}, 64)}
	c := startReplica(t, cli, "self", Config{Store: st, Driver: sws, Workers: 1, SweepWorkers: 4, ResyncInterval: time.Hour}).c

	backstop := time.After(time.Minute)
	for range 4 { // four switches read at once, none let through yet
		select {
		case <-sws.arrived:
		case <-backstop:
			t.Fatalf("%d reads at once after a minute, want 4", sws.peak())
		}
	}
	if p := sws.peak(); p != 4 {
		t.Fatalf("first sweep: %d reads at once, want SweepWorkers (4)", p)
	}
	close(sws.open)
	for !c.TriedAll() || c.Ready() != nil || c.sweepers.Load() > 0 {
		select {
		case <-backstop:
			t.Fatalf("the first sweep not over after a minute: %v", c.Ready())
		case <-time.After(10 * time.Millisecond):
		}
	}

	// After the sweep: every switch again, read in full, one at a time.
	sws.mu.Lock()
	sws.open, sws.most = make(chan struct{}), 0
	sws.mu.Unlock()
	for len(sws.arrived) > 0 { // the sweep's
		<-sws.arrived
	}
	c.mu.Lock()
	clear(c.known)
	c.mu.Unlock()
	for _, sw := range topo.Switches {
		c.Enqueue(sw.Name)
	}
	select {
	case <-sws.arrived:
	case <-backstop:
		t.Fatal("no read after the sweep")
	}
	for range 50 { // give a second worker every chance to show up
		select {
		case <-sws.arrived:
			t.Fatalf("a second read at once after the sweep (peak %d)", sws.peak())
		case <-time.After(2 * time.Millisecond):
		}
	}
	close(sws.open)
	if p := sws.peak(); p != 1 {
		t.Fatalf("after the sweep: %d reads at once, want Workers (1)", p)
	}
}
