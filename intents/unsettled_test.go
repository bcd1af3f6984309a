package intents

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
)

// TestUnsettledPins: a switch's pins that no Installed intent vouches for
// — an Admitted intent's, an elephant's (no intent) — are unsettled; an
// Installed intent's are not.
func TestUnsettledPins(t *testing.T) {
	key := func(i byte) models.FlowKey {
		return models.FlowKey{Src: netip.AddrFrom4([4]byte{10, 0, 0, i}), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: 49152}
	}
	m := &Manager{p: newPlacement(&Config{}, nil, nil, map[string]*entry{
		"installed": {in: models.Intent{ID: "installed", Status: models.IntentStatus{State: models.StateInstalled}}},
		"admitted":  {in: models.Intent{ID: "admitted", Status: models.IntentStatus{State: models.StateAdmitted}}},
	})}
	m.p.flowOwner = map[models.FlowKey]string{key(1): "installed", key(2): "admitted"}
	m.p.pins.at = map[models.SwitchID]map[models.FlowKey]uint32{"leaf1": {key(1): 1, key(2): 2, key(3): 1}, "leaf2": {key(1): 3}}
	got := m.Overlay().UnsettledPins("leaf1")
	slices.SortFunc(got, func(a, b models.FlowKey) int { return a.Src.Compare(b.Src) })
	if want := []models.FlowKey{key(2), key(3)}; !slices.Equal(got, want) {
		t.Errorf("leaf1's unsettled pins %v, want the admitted intent's and the elephant's %v", got, want)
	}
	if got := m.Overlay().UnsettledPins("leaf2"); len(got) != 0 {
		t.Errorf("leaf2 holds only an Installed intent's pin, yet %v are unsettled", got)
	}
}
