package intents

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
)

// TestAwaitingLookedAtWhenTouched: a batch looks at an awaiting intent
// when it starts waiting and then only when a switch it waits on is read
// back or fails — not at every awaiting intent every batch (100,000 of
// them after a restart).
func TestAwaitingLookedAtWhenTouched(t *testing.T) {
	m := &Manager{awaiting: map[string]bool{}, awaitNew: map[string]bool{},
		awaitingOn: map[models.SwitchID]map[string]bool{}, touched: map[models.SwitchID]bool{}}
	m.await("a")
	m.await("b")
	if got, fresh := m.toSettle(); !slices.Equal(got, []string{"a", "b"}) || !fresh["a"] || !fresh["b"] {
		t.Fatalf("first look: %v (fresh %v), want both new ones, fresh", got, fresh)
	}
	m.waitOn("a", []models.SwitchID{"s1", "s2"}) // not confirmed yet
	m.waitOn("b", []models.SwitchID{"s2"})
	if got := settle(m); len(got) != 0 {
		t.Fatalf("nothing changed, yet %v looked at", got)
	}
	m.touch("s1")
	if got, fresh := m.toSettle(); !slices.Equal(got, []string{"a"}) || len(fresh) != 0 {
		t.Fatalf("s1 read back: %v (fresh %v), want only a, already indexed", got, fresh)
	}
	m.touch("s2")
	m.touch("s1")
	if got := settle(m); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("s1 and s2 read back: %v, want a and b once each", got)
	}
	delete(m.awaiting, "a") // installed
	m.touch("s1")
	if got := settle(m); len(got) != 0 || len(m.awaitingOn["s1"]) != 0 {
		t.Fatalf("after a was met: looked at %v, s1's index %v; want nothing", got, m.awaitingOn["s1"])
	}
	m.await("b") // waits again (moved): looked at again
	if got := settle(m); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b waiting again: %v", got)
	}
}

// settle is the intents toSettle takes, without which are fresh.
func settle(m *Manager) []string {
	ids, _ := m.toSettle()
	return ids
}

// TestFullBatchCarriesMetIntents: a batch settles what fits in one
// transaction; the met intents left over are taken by the next batch as
// they are, not as intents that started waiting again (which made every
// batch check and index all of them once more under the lock), and one
// not met stays indexed by its switch without being carried.
func TestFullBatchCarriesMetIntents(t *testing.T) {
	m := &Manager{awaiting: map[string]bool{}, awaitNew: map[string]bool{},
		awaitingOn: map[models.SwitchID]map[string]bool{}, touched: map[models.SwitchID]bool{},
		all: map[string]*entry{}, synced: map[models.SwitchID]uint64{"s1": 1}, failures: map[models.SwitchID]string{}}
	add := func(id string, sw models.SwitchID) {
		m.all[id] = &entry{in: models.Intent{ID: id, Tenant: "t", Status: models.IntentStatus{State: models.StateAdmitted}}, gen: 1, switches: []models.SwitchID{sw}}
		m.await(id)
	}
	for i := range 10 {
		add(fmt.Sprintf("i%d", i), "s1") // s1 was read back: met
	}
	add("u", "s2") // s2 was not: waits
	installed := func() (n int) {
		for _, e := range m.all {
			if e.in.Status.State == models.StateInstalled {
				n++
			}
		}
		return n
	}
	now := time.Unix(1000, 0)
	for batches, want := 1, 4; ; batches++ {
		b := &batch{m: m, touched: map[models.SwitchID]bool{}, maxOps: 6, maxBytes: 1 << 20} // full at 4
		m.settleAwaiting(b, now)
		if got := installed(); got != min(want, 10) {
			t.Fatalf("after batch %d: %d installed, want %d", batches, got, min(want, 10))
		}
		if !m.awaitingOn["s2"]["u"] || slices.Contains(m.settleNext, "u") {
			t.Fatalf("after batch %d: u indexed %v, carried %v; want indexed, not carried", batches, m.awaitingOn["s2"]["u"], m.settleNext)
		}
		if want >= 10 {
			break
		}
		if len(m.awaitNew) != 0 || len(m.settleNext) != 10-want {
			t.Fatalf("after batch %d: %d carried as waiting anew, %d as met; want 0 and %d", batches, len(m.awaitNew), len(m.settleNext), 10-want)
		}
		want += 4
	}
	if ids, fresh := m.toSettle(); len(ids) != 0 || len(fresh) != 0 {
		t.Fatalf("all met intents settled, yet %v left to look at", ids)
	}
}
