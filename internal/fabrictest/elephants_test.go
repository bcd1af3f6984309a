package fabrictest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// TestUndeclaredElephantsPinned: a line-rate permutation nobody declared
// starts on ECMP hashing and collides. Leaves sample the RoCEv2 packets
// their hosts send (flow_sample digests over P4Runtime), the controller
// estimates every flow's rate, finds the elephants, pins them on paths
// chosen together, and the workload's throughput ratio rises to 0.95 or
// more; the API lists them. When the workload stops they fade and their
// pins are removed from the switches.
func TestUndeclaredElephantsPinned(t *testing.T) {
	topo, err := topology.Load("leafspine:4x4x4@100")
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.NewWith(t, topo, func(o *stack.Config) { o.Elephants.SampleOneIn = 1024 })
	h.Eventually(t, 30*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
	// A permutation whose flows collide on hashing (seeded: the ratio is
	// checked before anything is pinned).
	var id string
	var before float64
	for seed := uint64(1); ; seed++ {
		if seed > 20 {
			t.Fatal("no seed in 1..20 gives a colliding permutation")
		}
		id, err = h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if before = workloadRatio(t, h, id)(); before < 0.9 {
			break
		}
		if err := h.Fabric.StopWorkload(id); err != nil {
			t.Fatal(err)
		}
	}
	ratio := workloadRatio(t, h, id)
	start := time.Now()
	h.Eventually(t, 30*time.Second, fmt.Sprintf("throughput ratio from %.2f to 0.95", before), func() bool { return ratio() >= 0.95 })
	t.Logf("throughput ratio %.2f -> %.2f in %s", before, ratio(), time.Since(start).Round(time.Millisecond))

	// It settles within a few placement rounds (every flow detected and
	// placed), and then three more rounds move nothing.
	settled := false
	for rounds := 0; rounds < 10 && !settled; rounds++ {
		moves, round := h.Intents.Stats().DetectedMoves, h.Intents.Stats().DetectedRounds
		h.Eventually(t, 30*time.Second, "three placement rounds", func() bool { return h.Intents.Stats().DetectedRounds >= round+3 })
		settled = h.Intents.Stats().DetectedMoves == moves
	}
	if !settled || ratio() < 0.95 {
		t.Errorf("still moving flows after ten rounds (settled %v), ratio %.2f: the flows should stay put", settled, ratio())
	}

	var resp struct{ Items []api.DetectedStatus }
	if code := h.GetJSON(t, "/api/v1/elephants", &resp); code != http.StatusOK {
		t.Fatalf("GET /api/v1/elephants: %d", code)
	}
	listed := resp.Items
	pinned := 0
	for _, d := range listed {
		if d.Pinned && len(d.Path) > 0 {
			pinned++
		}
		if d.Gbps < 10 {
			t.Errorf("%s -> %s:%d listed at %.1f Gb/s, under the 10 Gb/s threshold", d.Src, d.Dst, d.SrcPort, d.Gbps)
		}
	}
	if pinned < 12 { // 16 hosts, a permutation with no intra-leaf pairs
		t.Errorf("%d detected elephants pinned, want every flow of the permutation: %+v", pinned, listed)
	}

	// A tenant declares one of them: the intent takes the flow over (its
	// pins, its reservation); it is no longer a detected elephant.
	taken := listed[0]
	tok := tenant(t, h, "jobs", 0, 0)
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("declared", taken.Src, taken.Dst, 40, int(taken.SrcPort), 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("declare %s -> %s:%d: HTTP %d", taken.Src, taken.Dst, taken.SrcPort, r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "the declared flow no longer listed as detected", func() bool {
		for _, d := range h.Intents.DetectedFlows() {
			if d.Src == taken.Src && d.Dst == taken.Dst && d.SrcPort == taken.SrcPort {
				return false
			}
		}
		return ratio() >= 0.95
	})
	// The declared flow sends 100 Gb/s on a 40 Gb/s reservation: the
	// intent and the elephants settle (15 placement rounds in a row
	// without an intent moving), rather than move it off the link its
	// excess makes hot and back to make room for them in turn.
	intentMoves := func() int { return h.Intents.Stats().AdaptMoves + h.Intents.Stats().JointMoves }
	quiet, last := 0, intentMoves()
	for rounds := 0; quiet < 15; rounds++ {
		if rounds == 90 {
			t.Fatalf("the intent moved %d times in 90 placement rounds, last %d rounds ago: it should settle", intentMoves(), quiet)
		}
		round := h.Intents.Stats().DetectedRounds
		h.Eventually(t, 30*time.Second, "a placement round", func() bool { return h.Intents.Stats().DetectedRounds > round })
		if n := intentMoves(); n != last {
			quiet, last = 0, n
		} else {
			quiet++
		}
	}
	// The ratio is a reading of the live fabric: waited for, not read
	// once (beside CPU burners an elephant may be re-pinned just then).
	h.Eventually(t, 30*time.Second, "throughput ratio 0.95 once the intent settled", func() bool { return ratio() >= 0.95 })

	// The workload stops: the flows fade, their pins go (the intent's stay).
	if err := h.Fabric.StopWorkload(id); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 30*time.Second, "detected flows' pins removed", func() bool {
		pins := 0
		for _, sw := range topo.Switches {
			pins += h.Switch(string(sw.Name)).Entries(p4.TableFlowPin)
		}
		return pins == 3 && len(h.Intents.DetectedFlows()) == 0 // the intent's flow: leaf, spine, leaf
	})
}

// oneElephant starts a 100 Gb/s flow from the first host to the fourth
// (UDP source port 50000) on a fabric that samples, and waits until the
// controller has detected and pinned it; it returns the topology.
func oneElephant(t *testing.T, h *fabrictest.Harness) models.Topology {
	t.Helper()
	topo := h.Fabric.Topology()
	if _, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{{Src: topo.Hosts[0].IP, Dst: topo.Hosts[3].IP, SrcPort: 50000, DemandGbps: 100}}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the flow detected and pinned", func() bool {
		d := h.Intents.DetectedFlows()
		return len(d) == 1 && d[0].Pinned
	})
	return topo
}

// TestElephantsKeptAcrossALeaseLoss: the leader's etcd session expires
// (its lease revoked, as a machine too busy to renew it sees) while
// undeclared elephants are pinned and the loop is settled. The replica
// campaigns again and leads a new term, which starts from etcd — and
// keeps the elephants it placed a moment ago: the new term reads every
// switch back, finds every pin where it was, and writes nothing; no flow
// is hashed onto a colliding path meanwhile.
func TestElephantsKeptAcrossALeaseLoss(t *testing.T) {
	topo, err := topology.Load("leafspine:4x4x4@100")
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.NewWith(t, topo, func(o *stack.Config) { o.Elephants.SampleOneIn = 1024 })
	converged(t, h)
	id, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ratio := workloadRatio(t, h, id)
	pinned := func() int {
		n := 0
		for _, d := range h.Intents.DetectedFlows() {
			if d.Pinned {
				n++
			}
		}
		return n
	}
	h.Eventually(t, 30*time.Second, "the elephants pinned", func() bool { return ratio() >= 0.95 && pinned() >= 12 })
	// Settled: three placement rounds in a row move nothing.
	for moves, round := h.Intents.Stats().DetectedMoves, h.Intents.Stats().DetectedRounds; ; moves, round = h.Intents.Stats().DetectedMoves, h.Intents.Stats().DetectedRounds {
		h.Eventually(t, 30*time.Second, "three placement rounds", func() bool { return h.Intents.Stats().DetectedRounds >= round+3 })
		if h.Intents.Stats().DetectedMoves == moves && h.Controller.Settled() {
			break
		}
	}
	elephants, moves, writes := pinned(), h.Intents.Stats().DetectedMoves, h.Fabric.WriteRPCs()
	term := h.Leadership.Term()
	resp, err := h.Etcd.Get(context.Background(), term.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the term's key: %v %v", resp, err)
	}
	if _, err := h.Etcd.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 30*time.Second, "a new term, every switch read back", func() bool {
		n := h.Leadership.Term()
		return term.Context().Err() != nil && n != nil && n.ID != term.ID && h.Controller.TriedAll() && h.Converged() == nil && h.Intents.Overlay().PinsReady()
	})
	round := h.Intents.Stats().DetectedRounds
	h.Eventually(t, 30*time.Second, "two placement rounds in the new term", func() bool { return h.Intents.Stats().DetectedRounds >= round+2 })
	if w := h.Fabric.WriteRPCs() - writes; w != 0 {
		t.Errorf("%d Write RPCs across the term change, want none (the elephants' pins kept)", w)
	}
	if m := h.Intents.Stats().DetectedMoves - moves; m != 0 || pinned() != elephants {
		t.Errorf("%d elephants moved across the term change, %d pinned (%d before)", m, pinned(), elephants)
	}
	if r := ratio(); r < 0.95 {
		t.Errorf("throughput ratio %.2f after the term change", r)
	}
}
