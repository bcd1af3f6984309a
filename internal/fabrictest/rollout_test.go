package fabrictest_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestDrainIsMakeBeforeBreak drains a leaf–spine link, which turns that
// spine's route to the leaf into a detour through other leaves. Reprogrammed
// all at once, a spine already detouring through a leaf that still sends
// the leaf's traffic to that spine would loop it. Every state the switches
// pass through is checked by tracing every host pair on 8 source ports:
// nothing loops and nothing is dropped (the link is drained, not down).
func TestDrainIsMakeBeforeBreak(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 3, 2))
	converged(t, h)
	snap, _ := h.Controller.Snapshot()
	specs := interLeafFlows(snap, 8)
	// The leaves that must stop using spine1 first are slow to program.
	for _, leaf := range []string{"leaf2", "leaf3"} {
		h.Switch(leaf).SetWriteDelay(300 * time.Millisecond)
	}
	audit := auditEveryWrite(h, specs)
	var link models.LinkID
	for _, a := range snap.Neighbors("spine1") {
		if a.Peer == "leaf1" {
			link = a.Link
		}
	}
	if r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Link: link}, nil); r.StatusCode != 201 {
		t.Fatalf("drain: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "rollout finished", func() bool {
		return h.Converged() == nil && h.Fabric.AuditFlows(specs).Delivered == len(specs) && spine1Detours(h, specs)
	})
	worst, states := audit()
	if states < 3 {
		t.Fatalf("only %d intermediate states seen", states)
	}
	if worst.Loops+worst.NoRoute+worst.LinkDown > 0 {
		t.Errorf("an intermediate state lost traffic: %+v", worst)
	}
}

// spine1Detours reports whether no flow crosses the drained link any more.
func spine1Detours(h *fabrictest.Harness, specs []fabricsim.FlowSpec) bool {
	for _, s := range specs {
		hops := h.Fabric.Trace(s).Hops
		for i := 0; i+1 < len(hops); i++ {
			if hops[i].Switch == "spine1" && hops[i+1].Switch == "leaf1" {
				return false
			}
		}
	}
	return true
}

// TestRandomDrainsNeverLoseTraffic drains and undrains random links of a
// k=4 fat-tree one after another (up to three drained at once), tracing every
// host pair on 4 source ports after every write the switches receive: no
// intermediate state may loop or drop. ACCELNET_LONG=1 runs 300 changes
// (about 10,000 audited writes) instead of 16. Up to three drains overlap
// (two once found WCMP groups losing routes: see
// pathcalc.TestEveryReachableDestinationRouted).
func TestRandomDrainsNeverLoseTraffic(t *testing.T) {
	h, snap, specs := auditedFatTree(t)
	fabricLinks := linkIDs(snap.FabricLinks())
	audit := auditEveryWrite(h, specs)
	changes := 16
	if os.Getenv("ACCELNET_LONG") != "" {
		changes = 300
	}
	rng := rand.New(rand.NewPCG(7, 7))
	active := map[models.LinkID]string{} // link → drain ID
	for i := range changes {
		if len(active) == maxActiveDrains() || (len(active) > 0 && rng.IntN(2) == 0) {
			for id, drain := range active { // undrain one
				if r := h.Do(t, "DELETE", "/api/v1/drains/"+drain, h.OperatorToken, nil, nil); r.StatusCode != 204 {
					t.Fatalf("change %d: undrain %s: HTTP %d", i, id, r.StatusCode)
				}
				delete(active, id)
				break
			}
		} else {
			id := fabricLinks[rng.IntN(len(fabricLinks))]
			if _, ok := active[id]; ok {
				continue
			}
			var d struct {
				ID string `json:"id"`
			}
			r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Link: id}, &d)
			if r.StatusCode == http.StatusUnprocessableEntity {
				continue // it would cut a leaf off: refused, as it should be
			}
			if r.StatusCode != 201 {
				t.Fatalf("change %d: drain %s: HTTP %d", i, id, r.StatusCode)
			}
			active[id] = d.ID
		}
		h.Eventually(t, 20*time.Second, fmt.Sprintf("change %d rolled out", i), h.Controller.Settled)
	}
	worst, writes := audit()
	if writes < changes {
		t.Fatalf("only %d writes for %d changes: the audit saw too little", writes, changes)
	}
	if worst.Loops+worst.NoRoute+worst.LinkDown > 0 {
		t.Errorf("an intermediate state lost traffic: %+v", worst)
	}
	t.Logf("%d changes, %d writes audited, %d flows each", changes, writes, len(specs))
}

// interLeafFlows is one 1 Gb/s flow per source port (ports per pair) for
// every pair of hosts on different leaves.
func interLeafFlows(snap *topology.Snapshot, ports int) []fabricsim.FlowSpec {
	var specs []fabricsim.FlowSpec
	for _, a := range snap.Hosts() {
		for _, b := range snap.Hosts() {
			if a.Attach.Switch != b.Attach.Switch {
				for p := range ports {
					specs = append(specs, fabricsim.FlowSpec{Src: a.IP, Dst: b.IP, SrcPort: uint16(50000 + p), DemandGbps: 1})
				}
			}
		}
	}
	return specs
}

// auditEveryWrite traces specs after every write any switch receives; the
// returned function stops auditing and reports the worst state seen (most
// flows looping or dropped) and how many states were audited.
func auditEveryWrite(h *fabrictest.Harness, specs []fabricsim.FlowSpec) func() (fabricsim.Audit, int) {
	var mu sync.Mutex
	var worst fabricsim.Audit
	states := 0
	lost := func(a fabricsim.Audit) int { return a.Loops + a.NoRoute + a.LinkDown }
	h.Fabric.OnWrite(func(models.SwitchID) {
		a := h.Fabric.AuditFlows(specs)
		mu.Lock()
		defer mu.Unlock()
		states++
		if lost(a) > lost(worst) {
			worst = a
		}
	})
	return func() (fabricsim.Audit, int) {
		h.Fabric.OnWrite(nil)
		mu.Lock()
		defer mu.Unlock()
		return worst, states
	}
}

// maxActiveDrains is how many drains may overlap in the random drain test.
func maxActiveDrains() int { return 3 }

// TestLinkReturnIsMakeBeforeBreak: when a failed fabric link comes back,
// routes move back onto it in stages, like an undrain: tracing every host
// pair after every write, nothing loops or drops while they do. (Applied
// at once, up to 7 of 896 flows looped for a moment.)
func TestLinkReturnIsMakeBeforeBreak(t *testing.T) {
	h, snap, specs := auditedFatTree(t)
	rng := rand.New(rand.NewPCG(3, 3))
	fabricLinks := linkIDs(snap.FabricLinks())
	rng.Shuffle(len(fabricLinks), func(i, j int) { fabricLinks[i], fabricLinks[j] = fabricLinks[j], fabricLinks[i] })
	for _, id := range fabricLinks[:6] {
		if err := h.Fabric.SetLinkUp(id, false); err != nil {
			t.Fatal(err)
		}
		h.Eventually(t, 20*time.Second, "routed around "+string(id), func() bool { return h.Controller.DownLinks()[id] && h.Controller.Settled() })
		audit := auditEveryWrite(h, specs)
		if err := h.Fabric.SetLinkUp(id, true); err != nil {
			t.Fatal(err)
		}
		h.Eventually(t, 30*time.Second, "routes back on "+string(id), func() bool { return !h.Controller.DownLinks()[id] && h.Controller.Settled() })
		worst, writes := audit()
		if writes == 0 {
			t.Fatalf("%s came back without a write", id)
		}
		if worst.Loops+worst.NoRoute+worst.LinkDown > 0 {
			t.Errorf("%s coming back: an intermediate state lost traffic: %+v", id, worst)
		}
	}
}

// TestLinkFailureNeverLoops: when a fabric link fails, flows that crossed
// it are lost until rerouted (nothing can help that), but no write on the
// way may make any flow loop or find no route: switches first drop the
// next hops that lead nowhere, then take the new routes in stages. (Done
// at once, a leaf–spine failure looped 33 of 896 flows for a moment.)
func TestLinkFailureNeverLoops(t *testing.T) {
	h, snap, specs := auditedFatTree(t)
	for _, l := range snap.FabricLinks() {
		id := l.ID()
		audit := auditEveryWrite(h, specs)
		if err := h.Fabric.SetLinkUp(id, false); err != nil {
			t.Fatal(err)
		}
		h.Eventually(t, 20*time.Second, "routed around "+string(id), func() bool { return h.Controller.DownLinks()[id] && h.Controller.Settled() })
		worst, writes := audit()
		if writes == 0 {
			t.Fatalf("%s failed without a write", id)
		}
		if worst.Loops+worst.NoRoute > 0 {
			t.Errorf("%s failing: a state looped or lost routes: %+v", id, worst)
		}
		if a := h.Fabric.AuditFlows(specs); a.Loops+a.NoRoute+a.LinkDown > 0 {
			t.Errorf("%s failed: after rerouting flows are still lost: %+v", id, a)
		}
		if err := h.Fabric.SetLinkUp(id, true); err != nil {
			t.Fatal(err)
		}
		h.Eventually(t, 30*time.Second, "routes back on "+string(id), func() bool { return !h.Controller.DownLinks()[id] && h.Controller.Settled() })
	}
}

func linkIDs(links []models.Link) []models.LinkID {
	out := make([]models.LinkID, len(links))
	for i, l := range links {
		out[i] = l.ID()
	}
	return out
}

// auditedFatTree runs a k=4 fat-tree of 100 Gb/s links, in sync, with the
// flows the audits trace: every inter-leaf host pair on 4 source ports.
func auditedFatTree(t *testing.T) (*fabrictest.Harness, *topology.Snapshot, []fabricsim.FlowSpec) {
	t.Helper()
	topo, err := topology.FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.New(t, topo)
	converged(t, h)
	snap, _ := h.Controller.Snapshot()
	return h, snap, interLeafFlows(snap, 4)
}
