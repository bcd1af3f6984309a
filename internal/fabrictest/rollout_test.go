package fabrictest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
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
	var specs []fabricsim.FlowSpec
	for _, a := range snap.Hosts() {
		for _, b := range snap.Hosts() {
			if a.Attach.Switch != b.Attach.Switch {
				for p := range 8 {
					specs = append(specs, fabricsim.FlowSpec{Src: a.IP, Dst: b.IP, SrcPort: uint16(50000 + p), DemandGbps: 1})
				}
			}
		}
	}
	// The leaves that must stop using spine1 first are slow to program.
	for _, leaf := range []string{"leaf2", "leaf3"} {
		h.Switch(leaf).SetWriteDelay(300 * time.Millisecond)
	}
	var mu sync.Mutex
	var worst fabricsim.Audit
	states := 0
	h.Fabric.OnWrite(func(models.SwitchID) {
		a := h.Fabric.AuditFlows(specs)
		mu.Lock()
		defer mu.Unlock()
		states++
		if a.Loops+a.NoRoute+a.LinkDown > worst.Loops+worst.NoRoute+worst.LinkDown {
			worst = a
		}
	})
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
	h.Fabric.OnWrite(nil)
	mu.Lock()
	defer mu.Unlock()
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
