package pathcalc

import (
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestWeightsCoarsenToFitTheSelector: congestion biases that give every
// destination its own WCMP weighting make more groups than a small
// selector holds; the plan coarsens the weights until the groups fit
// (and says so) instead of failing, and keeps them as they are when they
// fit.
func TestWeightsCoarsenToFitTheSelector(t *testing.T) {
	snap := topotest.LeafSpine(t, 4, 8, 1)
	// Each of spine1's links down to a leaf counts for a different share:
	// toward every destination leaf, the other leaves weigh spine1 apart.
	bias := map[models.Endpoint]float64{}
	i := 0
	for _, a := range snap.Neighbors("spine1") {
		bias[models.Endpoint{Switch: "spine1", Port: a.LocalPort}] = 0.3 + 0.08*float64(i)
		i++
	}
	groupsOf := func(res Result, sw models.SwitchID) int { return len(res.Plan.Switches[sw].Groups) }
	coarsened := func(res Result) bool {
		for _, w := range res.Warnings {
			if strings.Contains(w.Message, "coarsened") {
				return true
			}
		}
		return false
	}

	roomy, err := Compute(t.Context(), snap, Request{Limits: Limits{MaxGroupSize: 16, SelectorSize: 4096}, PortBias: bias})
	if err != nil {
		t.Fatal(err)
	}
	leaf := snap.Hosts()[0].Attach.Switch
	if n := groupsOf(roomy, leaf); n < 4 || coarsened(roomy) {
		t.Fatalf("with room: %s has %d groups (coarsened %v); want a group per weighting, as planned", leaf, n, coarsened(roomy))
	}
	tight, err := Compute(t.Context(), snap, Request{Limits: Limits{MaxGroupSize: 16, SelectorSize: 12}, PortBias: bias})
	if err != nil {
		t.Fatalf("a selector of 12 entries: %v; want coarser weights that fit", err)
	}
	if !coarsened(tight) {
		t.Error("weights coarsened without a warning")
	}
	for sw, st := range tight.Plan.Switches {
		used := len(st.Members)
		for _, g := range st.Groups {
			used += len(g.Members)
		}
		if used > 12 {
			t.Errorf("%s uses %d selector entries of 12", sw, used)
		}
	}
}
