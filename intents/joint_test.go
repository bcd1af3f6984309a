package intents

import (
	"fmt"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
)

// stackedIntents is a leader's manager on a two-leaf, two-spine fabric
// (four hosts a leaf, 100 Gb/s) holding two 40 Gb/s intents from leaf1's
// first two hosts to leaf2's, both pinned through the same spine, and two
// line-rate elephants between the other hosts: placed around the
// intents, the elephants get less than full throughput (current); placed
// with them, all fits. m.mu is held until the test ends.
func stackedIntents(t *testing.T) (m *Manager, ids []string, demands []pathcalc.Demand, current float64) {
	t.Helper()
	topo, err := topology.Load("leafspine:2x4x2@100")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	auth := tenantList{"jobs": {Name: "jobs"}}
	m = placedManager(t, Config{Auth: auth}, snap)
	m.mu.Lock()
	t.Cleanup(m.mu.Unlock)
	hosts := snap.Hosts() // leaf1: 0-3, leaf2: 4-7
	b := &batch{m: m, ctx: t.Context(), touched: map[models.SwitchID]bool{}, maxOps: 1 << 20, maxBytes: 1 << 30}
	for i := range 2 {
		out, err := m.decideCreate(b, CreateRequest{Tenant: "jobs", Spec: models.IntentSpec{Name: fmt.Sprintf("i%d", i), Src: hosts[i].Name, Dst: hosts[4+i].Name, Gbps: 40,
			SrcPorts: models.PortRange{First: 1000, Last: 1000}}}, auth["jobs"])
		if err != nil {
			t.Fatalf("admitting intent %d: %v", i, err)
		}
		e := m.p.all[out.Intent.ID]
		m.unpin(b, e)
		m.p.pin(b, e, [][]models.Endpoint{m.p.book.Candidates(hosts[i], hosts[4+i], pathcalc.PathConstraints{})[0]})
		ids = append(ids, out.Intent.ID)
	}
	if a, c := m.p.all[ids[0]].in.Status.Flows[0].Path, m.p.all[ids[1]].in.Status.Flows[0].Path; a[1].Switch != c[1].Switch {
		t.Fatalf("the intents are not stacked: %v, %v", a, c)
	}
	demands = []pathcalc.Demand{{Src: hosts[2], Dst: hosts[6], Gbps: 100}, {Src: hosts[3], Dst: hosts[7], Gbps: 100}}
	alone, err := m.p.book.PlaceBest(t.Context(), demands, nil)
	if err != nil {
		t.Fatal(err)
	}
	if alone.Throughput >= 1-pathcalc.ReplaceMargin {
		t.Fatalf("the elephants alone get %.3f: the fixture should squeeze them", alone.Throughput)
	}
	return m, ids, demands, alone.Throughput
}

// spines is the spine each of ids' intents goes through.
func spines(m *Manager, ids []string) []models.SwitchID {
	var out []models.SwitchID
	for _, id := range ids {
		out = append(out, m.p.all[id].in.Status.Flows[0].Path[1].Switch)
	}
	return out
}

// TestJointPlacementWaitsForIntentsToBeMeasured: the joint placement
// does not move intents it has not measured yet (what they send beyond
// their reservations is load the elephants are placed around, and a
// placement made before it is known is made again once it is): it waits,
// counting the rounds it waited, and moves them once they are measured.
func TestJointPlacementWaitsForIntentsToBeMeasured(t *testing.T) {
	m, ids, demands, current := stackedIntents(t)
	b := m.p.scratch()
	for round := 1; round <= 3; round++ {
		m.stats.DetectedRounds = round
		if moved, _ := m.placeJoint(t.Context(), b, demands, current); moved {
			t.Fatalf("round %d: the joint placement moved intents never measured", round)
		}
	}
	if m.stats.JointWaits != 3 || m.stats.JointMoves != 0 {
		t.Fatalf("%d rounds waited and %d intents moved, want 3 and 0", m.stats.JointWaits, m.stats.JointMoves)
	}
	if s := spines(m, ids); s[0] != s[1] {
		t.Fatalf("the intents moved while the placement waited: %v", s)
	}
	// Measured (one of them sending nothing): the placement goes ahead.
	m.obs.mu.Lock()
	m.obs.byIntent = map[string]float64{ids[0]: 40, ids[1]: 0}
	m.obs.mu.Unlock()
	m.stats.DetectedRounds++
	moved, paths := m.placeJoint(t.Context(), b, demands, current)
	if !moved || len(paths) != len(demands) {
		t.Fatalf("measured, the joint placement did not go ahead (%v, %d paths)", moved, len(paths))
	}
	if s := spines(m, ids); s[0] == s[1] || m.stats.JointMoves == 0 {
		t.Fatalf("the intents still share spine %s (%d moved)", s[0], m.stats.JointMoves)
	}
	if m.stats.JointWaits != 3 || m.jointWaitFrom != 0 {
		t.Fatalf("%d rounds waited, waiting since round %d: the wait should be over", m.stats.JointWaits, m.jointWaitFrom)
	}
}

// TestJointPlacementWaitsBoundedly: intents that stay unmeasured (their
// switch cannot be read) hold the joint placement for maxJointWait
// rounds, no more; then it goes ahead with them at their reservations.
func TestJointPlacementWaitsBoundedly(t *testing.T) {
	m, ids, demands, current := stackedIntents(t)
	b := m.p.scratch()
	for round := 1; ; round++ {
		if round > maxJointWait+1 {
			t.Fatalf("still waiting after %d rounds", round-1)
		}
		m.stats.DetectedRounds = round
		if moved, _ := m.placeJoint(t.Context(), b, demands, current); moved {
			break
		}
	}
	if m.stats.JointWaits != maxJointWait {
		t.Fatalf("waited %d rounds, want %d", m.stats.JointWaits, maxJointWait)
	}
	if s := spines(m, ids); s[0] == s[1] {
		t.Fatalf("the intents still share spine %s", s[0])
	}
}
