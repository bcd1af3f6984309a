package intents

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
)

// TestHotIntentsAreTheIntentsOnHotLinks: adapt finds the intents it may
// move through the hot ports' pins. They must be exactly the ones looking
// at every intent finds: Installed, pinned, not moved lately, with a
// fabric hop (not the host's own port) measured at adaptHot or more,
// hottest first.
func TestHotIntentsAreTheIntentsOnHotLinks(t *testing.T) {
	snap, auth, stored := storedIntents(t, 3000)
	rng := rand.New(rand.NewPCG(1, 2))
	load := map[models.Endpoint]float64{}
	for l := range snap.AllFabricLinks() {
		for _, e := range [2]models.Endpoint{l.A, l.B} {
			load[e] = 0.95 * rng.Float64() // about one port in twenty hot
		}
	}
	for _, h := range snap.Hosts() {
		load[h.Attach] = 0.99 // every host's own port: no reason to move
	}
	util := func(e models.Endpoint) float64 { return load[e] }
	m := settledManager(t, snap, auth, stored, func(e models.Endpoint) (float64, bool) { return util(e), true })

	m.mu.Lock()
	defer m.mu.Unlock()
	for i, in := range stored {
		switch i % 7 {
		case 1:
			m.moved[in.ID] = movedAt{round: m.round, detectedRound: -jointHoldRounds}
		case 2:
			m.all[in.ID].in.Status.State = models.StateAdmitted
		}
	}
	var want []hot
	for id, e := range m.all {
		if e.in.Status.State != models.StateInstalled || !e.pinned || m.movedLately(id) {
			continue
		}
		worst := 0.0
		for _, f := range e.in.Status.Flows {
			for _, hop := range f.Path[:len(f.Path)-1] {
				worst = max(worst, util(hop))
			}
		}
		if worst >= adaptHot {
			want = append(want, hot{e, worst})
		}
	}
	slices.SortFunc(want, func(x, y hot) int {
		if x.worst != y.worst {
			if x.worst > y.worst {
				return -1
			}
			return 1
		}
		return strings.Compare(x.e.in.ID, y.e.in.ID)
	})
	if len(want) == 0 || len(want) > len(stored)/2 {
		t.Fatalf("the fixture has %d of %d intents on hot links: pick another", len(want), len(stored))
	}
	got := m.hotIntents(util)
	if len(got) != len(want) {
		t.Fatalf("%d intents found on hot links, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].e != want[i].e || got[i].worst != want[i].worst {
			t.Fatalf("hot intent %d: %s at %.3f, want %s at %.3f", i, got[i].e.in.ID, got[i].worst, want[i].e.in.ID, want[i].worst)
		}
	}
}
