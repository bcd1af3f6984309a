package intents

import (
	"context"
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
	in := models.Intent{ID: "i1", Tenant: "t"}
	in.Status.State = models.StateInstalled
	in.Status.Flows = []models.FlowStatus{{Path: path}}
	m.mu.Lock()
	m.all["i1"] = &entry{in: in, flows: []flow{{key: intentFlow}}}
	m.elephants[elephantFlow] = &elephant{flow: DetectedFlow{Key: elephantFlow}, path: path}
	m.mu.Unlock()

	r := &countingReader{asked: map[models.FlowKey]int{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Observe(ctx, r, 10*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()

	wait := func(what string, cond func() bool) {
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
	wait("the elephant read five times", func() bool { return r.times(elephantFlow) >= 5 })
	if n := r.times(intentFlow); n != 0 {
		t.Fatalf("the intent's counters read %d times before the first sweep was over", n)
	}
	swept.Store(true)
	wait("the intent read once swept", func() bool { return r.times(intentFlow) >= 2 })
}
