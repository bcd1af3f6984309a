package fabrictest_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// TestDrainSpine: a dry run says which intents would move or degrade;
// draining a spine moves intents and ECMP traffic off it until it is
// empty; undraining lets traffic back. A leaf with hosts needs force.
func TestDrainSpine(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	op := h.OperatorToken
	var a, b models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("a", "h1-1", "h2-1", 60, 49152, 1), &a)
	h.Do(t, "POST", "/api/v1/intents", tok, spec("b", "h1-2", "h2-2", 60, 49152, 1), &b)
	onSpine1 := a
	if a.Status.Flows[0].Path[1].Switch != "spine1" {
		onSpine1 = b
	}
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternAllToAll, Gbps: 20, QPsPerConnection: 4, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	h.Eventually(t, 10*time.Second, "traffic measured on spine1", func() bool {
		for _, a := range snap.Neighbors("spine1") {
			l, _ := snap.Link(a.Link)
			if h.Controller.LinkLoad(l).Utilization > 0.01 {
				return true
			}
		}
		return false
	})

	var preview api.DrainPreview
	if r := h.Do(t, "POST", "/api/v1/drains?dryRun=true", op, models.Drain{Switch: "spine1"}, &preview); r.StatusCode != http.StatusOK {
		t.Fatalf("dry run: HTTP %d", r.StatusCode)
	}
	// Both 60G intents cannot share spine2's uplinks (95 reservable).
	if preview.Links != 2 || len(preview.Degraded) != 1 || preview.Degraded[0] != onSpine1.ID || len(preview.HostsCutOff) != 0 {
		t.Errorf("preview %+v: want spine1's 2 links and %s degraded", preview, onSpine1.ID)
	}
	var drains api.IntentList
	h.Do(t, "GET", "/api/v1/drains", op, nil, &drains)
	if len(drains.Items) != 0 {
		t.Fatalf("a dry run stored a drain")
	}

	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/drains", op, models.Drain{Switch: "leaf1"}, &p); r.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) == 0 || p.Errors[0].Field != "force" {
		t.Errorf("draining a leaf with hosts without force: HTTP %d %+v", r.StatusCode, p)
	}
	if r := h.Do(t, "POST", "/api/v1/drains", tok, models.Drain{Switch: "spine1"}, &p); r.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant drained a spine: HTTP %d", r.StatusCode)
	}
	var d api.DrainView
	if r := h.Do(t, "POST", "/api/v1/drains", op, models.Drain{Switch: "spine1", Reason: "optics swap"}, &d); r.StatusCode != http.StatusCreated {
		t.Fatalf("drain: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "spine1 drained", func() bool {
		var v api.DrainView
		h.Do(t, "GET", "/api/v1/drains/"+d.ID, op, nil, &v)
		return v.State == "drained" && v.TrafficGbps < 0.01
	})
	for _, f := range h.Fabric.Flows() {
		for _, hop := range f.Hops {
			if hop.Switch == "spine1" {
				t.Fatalf("flow %v still crosses drained spine1", f.Spec)
			}
		}
	}
	// It says the drain moved it (it said a link went down).
	if got := intentState(t, h, tok, onSpine1.ID); got.Status.State != models.StateDegraded ||
		!strings.Contains(got.Status.Reason, "was drained (drain "+d.ID+" of spine1: optics swap)") {
		t.Errorf("intent on spine1 after the drain: %s %q", got.Status.State, got.Status.Reason)
	}

	if r := h.Do(t, "DELETE", "/api/v1/drains/"+d.ID, op, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("undrain: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "traffic back on spine1 and the intent restored", func() bool {
		crosses := false
		for _, f := range h.Fabric.Flows() {
			for _, hop := range f.Hops {
				crosses = crosses || hop.Switch == "spine1"
			}
		}
		return crosses && intentState(t, h, tok, onSpine1.ID).Status.State == models.StateInstalled
	})
	if r := h.Do(t, "DELETE", "/api/v1/drains/"+d.ID, op, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("second undrain: HTTP %d", r.StatusCode)
	}
}

// TestConcurrentDrainsNeverPartition: sixteen drain requests at once, two
// for each of the eight spines of a leaf-spine, half through the leader
// and half through the follower. Drains are decided one at a time against
// every stored drain: seven spines are drained, the second request for
// each of them is refused as a duplicate (409), and both requests for the
// last spine are refused because it would leave the leaves no path (422).
func TestConcurrentDrainsNeverPartition(t *testing.T) {
	_, a, b := twoReplicas(t, fabrictest.LeafSpine(8, 3, 1))
	type answer struct {
		spine string
		code  int
	}
	answers := make(chan answer, 16)
	var wg sync.WaitGroup
	for i := range 16 {
		h := a
		if i%2 == 1 {
			h = b
		}
		spine := fmt.Sprintf("spine%d", i/2+1)
		wg.Go(func() {
			req, err := fabrictest.NewRequest(t.Context(), http.MethodPost, h.API.URL+"/api/v1/drains", a.OperatorToken, models.Drain{Switch: models.SwitchID(spine)})
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			answers <- answer{spine, resp.StatusCode}
		})
	}
	wg.Wait()
	close(answers)
	codes := map[int]int{}
	created := map[string]int{}
	for ans := range answers {
		codes[ans.code]++
		if ans.code == http.StatusCreated {
			created[ans.spine]++
		}
	}
	if codes[http.StatusCreated] != 7 || codes[http.StatusConflict] != 7 || codes[http.StatusUnprocessableEntity] != 2 || len(created) != 7 {
		t.Fatalf("answers by status %v, drained spines %v: want 7 created (one per spine), 7 duplicates (409), 2 refused (422)", codes, created)
	}
	var stored struct{ Items []api.DrainView }
	a.Do(t, "GET", "/api/v1/drains", a.OperatorToken, nil, &stored)
	if len(stored.Items) != 7 {
		t.Fatalf("%d drains stored, want 7", len(stored.Items))
	}
	// One at a time, later, the same holds.
	var p api.Problem
	if r := b.Do(t, "POST", "/api/v1/drains", a.OperatorToken, models.Drain{Switch: stored.Items[0].Switch}, &p); r.StatusCode != http.StatusConflict {
		t.Errorf("draining %s again: HTTP %d %+v, want 409", stored.Items[0].Switch, r.StatusCode, p)
	}
}

// TestDrainedFollowsLastEmptySample: a drain reads "drained" at the first
// counter readings that find its links empty once traffic has moved, not
// once a smoothed average has decayed (12-15 s, over a hundred readings
// at 100 ms). Counted in readings of the drained link's ends.
func TestDrainedFollowsLastEmptySample(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternAllToAll, Gbps: 20, QPsPerConnection: 4, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	var ends []models.Endpoint
	for _, a := range snap.Neighbors("spine1") {
		l, _ := snap.Link(a.Link)
		ends = append(ends, l.A, l.B)
	}
	h.Eventually(t, 10*time.Second, "traffic measured on spine1", func() bool {
		p, ok := h.Controller.PortLoad(ends[0])
		q, _ := h.Controller.PortLoad(ends[1])
		return ok && p.OutBps+q.OutBps > 1e9
	})
	var d api.DrainView
	if r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: "spine1"}, &d); r.StatusCode != http.StatusCreated {
		t.Fatalf("drain: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "no flow crossing spine1 and the rollout over", func() bool {
		for _, f := range h.Fabric.Flows() {
			for _, hop := range f.Hops {
				if hop.Switch == "spine1" {
					return false
				}
			}
		}
		return h.Controller.Settled()
	})
	// From here, count the readings of the drained links' ends until the
	// drain says drained (polled far faster than readings come).
	seen := map[models.Endpoint]time.Time{}
	readings := 0
	h.Eventually(t, 30*time.Second, "spine1 drained", func() bool {
		for _, e := range ends {
			if p, ok := h.Controller.PortLoad(e); ok && !p.RecentSince.Equal(seen[e]) {
				seen[e] = p.RecentSince
				readings++
			}
		}
		var v api.DrainView
		h.Do(t, "GET", "/api/v1/drains/"+d.ID, h.OperatorToken, nil, &v)
		return v.State == "drained"
	})
	// Each end's reading in flight when traffic left, then one clean one.
	if perEnd := float64(readings) / float64(len(ends)); perEnd > 4 {
		t.Fatalf("drained after %.1f readings per link end once traffic was gone, want at most 4", perEnd)
	}
	// The topology agrees: a drained switch's links show no load (they
	// showed the decaying average for seconds after "drained").
	var topo api.TopologyView
	h.GetJSON(t, "/api/v1/topology", &topo)
	for _, l := range topo.Links {
		if l.A.Switch == "spine1" || l.B.Switch == "spine1" {
			if l.Load.ABbps+l.Load.BAbps > 1e6 {
				t.Errorf("drained link %s shows %.0f + %.0f b/s", l.ID, l.Load.ABbps, l.Load.BAbps)
			}
		}
	}
}

// TestDownLinkShowsNoLoad: a link known to be down shows no load from the
// moment it is known down (not its old load decaying for seconds):
// every view of it as down has zero load.
func TestDownLinkShowsNoLoad(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternAllToAll, Gbps: 20, QPsPerConnection: 4, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	var busiest models.Link
	h.Eventually(t, 10*time.Second, "traffic on a leaf-spine link", func() bool {
		for _, l := range snap.Links() {
			if h.Controller.LinkLoad(l).Utilization > 0.05 {
				busiest = l
				return true
			}
		}
		return false
	})
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(busiest.ID())}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the link seen down over the API", func() bool {
		var topo api.TopologyView
		h.GetJSON(t, "/api/v1/topology", &topo)
		for _, l := range topo.Links {
			if l.ID != busiest.ID() || l.Load.Up {
				continue
			}
			if l.Load.Utilization != 0 || l.Load.ABbps != 0 || l.Load.BAbps != 0 {
				t.Fatalf("link %s is down and shows utilization %.2f (%.0f / %.0f b/s)", l.ID, l.Load.Utilization, l.Load.ABbps, l.Load.BAbps)
			}
			return true
		}
		return false
	})
}
