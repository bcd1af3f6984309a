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
	p := newPlacement(&Config{}, nil, nil, map[string]*entry{})
	touched := map[models.SwitchID]bool{}
	settle := func() []string {
		ids, _ := p.toSettle(touched)
		return ids
	}
	p.await("a")
	p.await("b")
	if got, fresh := p.toSettle(touched); !slices.Equal(got, []string{"a", "b"}) || !fresh["a"] || !fresh["b"] {
		t.Fatalf("first look: %v (fresh %v), want both new ones, fresh", got, fresh)
	}
	p.waitOn("a", []models.SwitchID{"s1", "s2"}) // not confirmed yet
	p.waitOn("b", []models.SwitchID{"s2"})
	if got := settle(); len(got) != 0 {
		t.Fatalf("nothing changed, yet %v looked at", got)
	}
	touched["s1"] = true
	if got, fresh := p.toSettle(touched); !slices.Equal(got, []string{"a"}) || len(fresh) != 0 {
		t.Fatalf("s1 read back: %v (fresh %v), want only a, already indexed", got, fresh)
	}
	touched["s2"], touched["s1"] = true, true
	if got := settle(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("s1 and s2 read back: %v, want a and b once each", got)
	}
	delete(p.awaiting, "a") // installed
	touched["s1"] = true
	if got := settle(); len(got) != 0 || len(p.awaitingOn["s1"]) != 0 {
		t.Fatalf("after a was met: looked at %v, s1's index %v; want nothing", got, p.awaitingOn["s1"])
	}
	p.await("b") // waits again (moved): looked at again
	if got := settle(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b waiting again: %v", got)
	}
}

// TestFullBatchCarriesMetIntents: a batch settles what fits in one
// transaction; the met intents left over are taken by the next batch as
// they are, not as intents that started waiting again (which made every
// batch check and index all of them once more under the lock), and one
// not met stays indexed by its switch without being carried.
func TestFullBatchCarriesMetIntents(t *testing.T) {
	m := &Manager{p: newPlacement(&Config{}, nil, nil, map[string]*entry{}), trouble: newSwitchTrouble()}
	m.trouble.synced["s1"] = 1 // read back
	add := func(id string, sw models.SwitchID) {
		m.p.all[id] = &entry{in: models.Intent{ID: id, Tenant: "t", Status: models.IntentStatus{State: models.StateAdmitted}}, gen: 1, switches: []models.SwitchID{sw}}
		m.p.await(id)
	}
	for i := range 10 {
		add(fmt.Sprintf("i%d", i), "s1") // s1 was read back: met
	}
	add("u", "s2") // s2 was not: waits
	installed := func() (n int) {
		for _, e := range m.p.all {
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
		if !m.p.awaitingOn["s2"]["u"] || slices.Contains(m.p.settleNext, "u") {
			t.Fatalf("after batch %d: u indexed %v, carried %v; want indexed, not carried", batches, m.p.awaitingOn["s2"]["u"], m.p.settleNext)
		}
		if want >= 10 {
			break
		}
		if len(m.p.awaitNew) != 0 || len(m.p.settleNext) != 10-want {
			t.Fatalf("after batch %d: %d carried as waiting anew, %d as met; want 0 and %d", batches, len(m.p.awaitNew), len(m.p.settleNext), 10-want)
		}
		want += 4
	}
	if ids, fresh := m.p.toSettle(m.trouble.touched); len(ids) != 0 || len(fresh) != 0 {
		t.Fatalf("all met intents settled, yet %v left to look at", ids)
	}
}
