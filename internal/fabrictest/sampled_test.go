package fabrictest_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// TestSampledIntentPinsItsFlows: an intent with sampled_flows reserves
// bandwidth between two hosts without naming a UDP source port: it is
// Installed at once (nothing to program), and the RoCEv2 flows sampling
// then finds between those hosts, whatever their ports, are its flows:
// pinned on its reserved path (the dataplane carries them there), listed
// as its own, its observed rate theirs. A flow between other hosts is an
// ordinary elephant. Deleted, its flows become ordinary elephants again.
// Two intents cannot both sample one pair.
func TestSampledIntentPinsItsFlows(t *testing.T) {
	topo, err := topology.Load("leafspine:4x2x2@100")
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.NewWith(t, topo, func(o *stack.Config) { o.Elephants.SampleOneIn = 1024 })
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	sampled := models.IntentSpec{Name: "job-7", Src: "h1-1", Dst: "h2-1", Gbps: 60, SampledFlows: true}
	var in models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, sampled, &in); r.StatusCode != http.StatusCreated {
		t.Fatalf("create a sampled intent: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 20*time.Second, "the sampled intent Installed", func() bool {
		in = intentState(t, h, tok, in.ID)
		return in.Status.State == models.StateInstalled
	})
	if len(in.Status.Flows) != 1 || in.Status.Flows[0].SrcPort != 0 || len(in.Status.Flows[0].Path) != 3 {
		t.Fatalf("its reservation: %+v", in.Status.Flows)
	}
	reserved := in.Status.Flows[0].Path
	spine := reserved[1].Switch
	// Nothing is programmed for it: no flow pin anywhere.
	pins := 0
	for _, sw := range topo.Switches {
		pins += h.Switch(string(sw.Name)).Entries(p4.TableFlowPin)
	}
	if pins != 0 {
		t.Fatalf("%d flow pins on the switches for an intent with no flows yet", pins)
	}
	// Refused for a second intent on the same pair, said plainly.
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, models.IntentSpec{Name: "again", Src: "h1-1", Dst: "h2-1", Gbps: 10, SampledFlows: true}, &p); r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "sampled_flows") {
		t.Errorf("a second sampled intent on the pair: HTTP %d %q", r.StatusCode, p.Detail)
	}

	// A collective reserves one path per ring pair, no pin either.
	var ring models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, models.IntentSpec{Name: "ring", SampledFlows: true,
		Collective: &models.Collective{Pattern: models.PatternRingAllReduce, Endpoints: []string{"h3-1", "h4-1", "h3-2"}, GbpsPerGPU: 20}}, &ring); r.StatusCode != http.StatusCreated {
		t.Fatalf("a sampled ring: HTTP %d", r.StatusCode)
	}
	if len(ring.Status.Flows) != 3 || ring.Status.Flows[0].SrcPort != 0 || ring.Status.Flows[2].Dst != "h3-1" {
		t.Errorf("the sampled ring's reservation: %+v", ring.Status.Flows)
	}

	// Two QPs of the job, ports the NICs chose, and a flow of others.
	h1, h2 := host(t, topo, "h1-1"), host(t, topo, "h2-1")
	other1, other2 := host(t, topo, "h1-2"), host(t, topo, "h2-2")
	if _, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{
		{Src: h1.IP, Dst: h2.IP, SrcPort: 61011, DemandGbps: 25},
		{Src: h1.IP, Dst: h2.IP, SrcPort: 58123, DemandGbps: 25},
		{Src: other1.IP, Dst: other2.IP, SrcPort: 50000, DemandGbps: 100},
	}); err != nil {
		t.Fatal(err)
	}
	claimed := func() (mine, others int) {
		for _, d := range h.Intents.DetectedFlows() {
			switch {
			case d.Intent == in.ID && d.Pinned && slices.Equal(d.Path, reserved):
				mine++
			case d.Intent == "" && d.Pinned:
				others++
			}
		}
		return
	}
	h.Eventually(t, 30*time.Second, "the job's two flows pinned on its reserved path, the other flow an ordinary elephant", func() bool {
		mine, others := claimed()
		return mine == 2 && others == 1
	})
	// The dataplane carries them through the reserved spine, by their pins
	// (once the switches hold them: a pin is marked placed when decided).
	h.Eventually(t, 30*time.Second, "the dataplane carries the job's flows pinned through "+string(spine), func() bool {
		for _, f := range h.Fabric.Flows() {
			if f.Spec.Src == h1.IP && f.Spec.Dst == h2.IP && (len(f.Hops) != 3 || f.Hops[1].Switch != spine || !f.Hops[0].Pinned) {
				return false
			}
		}
		return true
	})
	var listed struct{ Items []api.DetectedStatus }
	if code := h.GetJSON(t, "/api/v1/elephants", &listed); code != http.StatusOK {
		t.Fatalf("GET /api/v1/elephants: %d", code)
	}
	n := 0
	for _, d := range listed.Items {
		if d.Intent == in.ID {
			n++
		}
	}
	if n != 2 {
		t.Errorf("/api/v1/elephants lists %d flows of the intent, want 2", n)
	}
	h.Eventually(t, 30*time.Second, "the intent's observed rate is its flows'", func() bool {
		g := intentState(t, h, tok, in.ID).Status.ObservedGbps
		return g > 40 && g < 60
	})

	// Its path loses a link: the intent moves, and its flows with it.
	up, ok := linkBetween(topo, reserved[0].Switch, spine)
	if !ok {
		t.Fatalf("no link %s <-> %s", reserved[0].Switch, spine)
	}
	if err := h.Fabric.SetLinkUp(up.ID(), false); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 30*time.Second, "the intent moved off the dead link, its flows with it", func() bool {
		now := intentState(t, h, tok, in.ID).Status.Flows
		if len(now) != 1 || len(now[0].Path) != 3 || now[0].Path[1].Switch == spine {
			return false
		}
		reserved = now[0].Path
		mine, _ := claimed()
		return mine == 2
	})

	// Deleted: its flows are ordinary elephants again.
	if r := h.Do(t, "DELETE", "/api/v1/intents/"+in.ID, tok, nil, nil); r.StatusCode >= 300 {
		t.Fatalf("delete: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 30*time.Second, "its flows placed as ordinary elephants", func() bool {
		mine, others := claimed()
		return mine == 0 && others == 3
	})
}

func host(t *testing.T, topo models.Topology, name string) models.Host {
	t.Helper()
	for _, h := range topo.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s", name)
	return models.Host{}
}

// linkBetween is the link between switches a and b.
func linkBetween(topo models.Topology, a, b models.SwitchID) (models.Link, bool) {
	for _, l := range topo.Links {
		if l.A.Switch == a && l.B.Switch == b || l.A.Switch == b && l.B.Switch == a {
			return l, true
		}
	}
	return models.Link{}, false
}
