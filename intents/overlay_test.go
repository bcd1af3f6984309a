package intents

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// TestReconcilersDoNotWaitForDecisions: while the decision loop holds
// the manager's lock (a batch deciding), the reconcilers still read
// their pins and report read-backs and failures; the loop takes the
// reports in at its next batch.
func TestReconcilersDoNotWaitForDecisions(t *testing.T) {
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	key := models.FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 49152}
	gen := m.p.pins.lock()
	m.p.pins.set("leaf1", key, 3)
	m.p.pins.unlock()
	o := m.Overlay()

	m.mu.Lock() // the loop, deciding
	calls := []struct {
		name string
		call func()
	}{
		{"pins", func() {
			if pins, g := o.PinsFor("leaf1"); len(pins) != 1 || pins[0].Port != 3 || g != gen {
				t.Errorf("pins %v at %d, want port 3 at %d", pins, g, gen)
			}
		}},
		{"delta", func() {
			if d, _, ok := o.PinsDelta("leaf1", 0); !ok || d[key] != 3 {
				t.Errorf("delta %v (%v), want the pin", d, ok)
			}
		}},
		{"synced", func() { o.Synced("leaf1", gen) }},
		{"failed", func() { o.ProgramFailed("leaf2", errors.New("unreachable")) }},
		{"refused", func() { o.PinsRefused("leaf2", []models.FlowKey{key}, "table full", 0) }},
	}
	for _, c := range calls {
		done := make(chan struct{})
		go func() { c.call(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s waited for the decision loop", c.name)
		}
	}
	m.mu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	m.news.take(&m.trouble)
	if got := m.trouble.synced["leaf1"]; got != gen {
		t.Errorf("leaf1 confirmed %d, want %d", got, gen)
	}
	if !m.trouble.touched["leaf1"] || !m.trouble.touched["leaf2"] || m.trouble.failures["leaf2"] != "unreachable" || len(m.trouble.refused["leaf2"].keys) != 1 {
		t.Errorf("the loop took in %+v, want leaf1 and leaf2 touched, leaf2 failed and its refused pin", m.trouble)
	}
	if _, failed := m.trouble.failures["leaf1"]; failed {
		t.Error("leaf1 was read back, yet counted as failing")
	}
}
