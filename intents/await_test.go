package intents

import (
	"slices"
	"testing"

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
