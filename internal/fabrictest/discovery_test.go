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
)

// discoveryOf reads every link's discovery state from the API.
func discoveryOf(t *testing.T, h *fabrictest.Harness) (map[models.LinkID]string, api.TopologyView) {
	t.Helper()
	var v api.TopologyView
	if code := h.GetJSON(t, "/api/v1/topology", &v); code != http.StatusOK {
		t.Fatalf("GET /api/v1/topology: %d", code)
	}
	out := map[models.LinkID]string{}
	for _, l := range v.Links {
		if l.Discovery != nil {
			out[l.ID] = string(l.Discovery.State)
		}
	}
	return out, v
}

// everyLinkConfirmed waits for discovery to confirm all links of h's
// fabric, as the API says.
func everyLinkConfirmed(t *testing.T, h *fabrictest.Harness, links int) {
	t.Helper()
	h.Eventually(t, 20*time.Second, "every link confirmed", func() bool {
		d, _ := discoveryOf(t, h)
		n := 0
		for _, s := range d {
			if s == "confirmed" {
				n++
			}
		}
		return n == links
	})
}

// TestLinkDiscoveryFindsSwappedCables: the controller's LLDP probes
// (packet-out on every fabric port, packet-in where they arrive) confirm
// every declared link, and so do the switches' own LLDP agents (their
// OpenConfig lldp state over gNMI); two cables swapped in fabricsim make
// both links miswired in the API (both witnesses say so) and the metrics, routes stop using them (every
// host pair is still delivered, never across them), and once the cables
// are put back the links are confirmed and carry routes again.
func TestLinkDiscoveryFindsSwappedCables(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(3, 2, 2), func(o *stack.Config) { o.DiscoveryInterval = 200 * time.Millisecond })
	converged(t, h)
	everyLinkConfirmed(t, h, len(h.Fabric.Topology().Links))
	// leaf1:3–spine1:1 and leaf2:4–spine2:2 become leaf1:3–spine2:2 and
	// leaf2:4–spine1:1; spine3 still joins the leaves.
	l1, l2 := models.Link{A: ep("leaf1", 3), B: ep("spine1", 1)}.ID(), models.Link{A: ep("leaf2", 4), B: ep("spine2", 2)}.ID()
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultSwapCables, Target: string(l1), With: string(l2)}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "both links miswired, and routes around them", func() bool {
		d, v := discoveryOf(t, h)
		if d[l1] != "miswired" || d[l2] != "miswired" || !h.Controller.Settled() {
			return false
		}
		// Both witnesses: the probes, and the switches' own LLDP agents
		// (OpenConfig lldp state over gNMI).
		for _, l := range v.Links {
			if l.ID == l1 && (!slices.ContainsFunc(l.Discovery.Seen, func(s string) bool { return !strings.Contains(s, "LLDP agent") }) ||
				!slices.ContainsFunc(l.Discovery.Seen, func(s string) bool { return strings.Contains(s, "LLDP agent") })) {
				return false
			}
		}
		return true
	})
	if v, _ := metric(t, h, "accelnet_links_discovered", "state", "miswired"); v != 2 {
		t.Errorf("accelnet_links_discovered{state=miswired} = %v, want 2", v)
	}
	deliveredAvoiding(t, h.Fabric, []models.Endpoint{ep("leaf1", 3), ep("leaf2", 4), ep("spine1", 1), ep("spine2", 2)})
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultRestoreCables}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the links confirmed and routed again", func() bool {
		d, _ := discoveryOf(t, h)
		return d[l1] == "confirmed" && d[l2] == "confirmed" && len(h.Controller.Miswired()) == 0 && h.Controller.Settled()
	})
	if down := h.Controller.DownLinks(); down[l1] || down[l2] {
		t.Errorf("restored links still avoided: %v", down)
	}
}

func ep(sw string, port uint32) models.Endpoint {
	return models.Endpoint{Switch: models.SwitchID(sw), Port: port}
}

// deliveredAvoiding traces a flow between every pair of hosts on
// different leaves: each must be delivered without leaving through any
// of the ports in avoid.
func deliveredAvoiding(t *testing.T, f *fabricsim.Fabric, avoid []models.Endpoint) {
	t.Helper()
	hosts := f.Topology().Hosts
	for _, a := range hosts {
		for _, b := range hosts {
			if a.Attach.Switch == b.Attach.Switch {
				continue
			}
			for port := uint16(49152); port < 49160; port++ {
				tr := f.Trace(fabricsim.FlowSpec{Src: a.IP, Dst: b.IP, SrcPort: port, DemandGbps: 1})
				if !tr.Delivered {
					t.Fatalf("%s -> %s:%d not delivered: %s %s", a.Name, b.Name, port, tr.Drop, tr.DropAt)
				}
				for _, hop := range tr.Hops {
					if slices.Contains(avoid, models.Endpoint{Switch: hop.Switch, Port: hop.OutPort}) {
						t.Fatalf("%s -> %s:%d leaves through %s:%d, a miswired port", a.Name, b.Name, port, hop.Switch, hop.OutPort)
					}
				}
			}
		}
	}
}

// TestLivenessFindsACutLinkWithDefaults: switches declared without a
// gNMI address report no oper-status (BMv2's case), and with the default
// flags the controller finds a cut link itself within a few liveness
// ticks (no discovery round needed, at 5 s each), routes around it,
// confirms it once it is back, and never loses it again afterwards.
func TestLivenessFindsACutLinkWithDefaults(t *testing.T) {
	f := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 2, 2))
	topo := f.Topology()
	for i := range topo.Switches {
		topo.Switches[i].GNMIAddr = ""
	}
	h := fabrictest.NewServe(t, topo)
	converged(t, h)
	everyLinkConfirmed(t, h, len(topo.Links))
	cut := models.Link{A: ep("leaf1", 3), B: ep("spine1", 1)}.ID()
	if err := f.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(cut)}); err != nil {
		t.Fatal(err)
	}
	from := h.Controller.LivenessTicks()
	h.Eventually(t, 20*time.Second, "the cut link lost and routed around", func() bool {
		d, _ := discoveryOf(t, h)
		return d[cut] == "lost" && h.Controller.DownLinks()[cut] && h.Controller.Settled()
	})
	// Three to four ticks, and a few more where packet-ins were late.
	if ticks := h.Controller.LivenessTicks() - from; ticks > 12 {
		t.Errorf("the cut was found %d liveness ticks later, want a few", ticks)
	}
	deliveredAvoiding(t, f, []models.Endpoint{ep("leaf1", 3), ep("spine1", 1)})
	if err := f.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkUp, Target: string(cut)}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the link confirmed and routed again", func() bool {
		d, _ := discoveryOf(t, h)
		return d[cut] == "confirmed" && !h.Controller.DownLinks()[cut] && h.Controller.Settled()
	})
	back := h.Controller.LivenessTicks()
	h.Eventually(t, 20*time.Second, "ten more liveness ticks, the link confirmed at each look", func() bool {
		if d, _ := discoveryOf(t, h); d[cut] != "confirmed" {
			t.Fatalf("the link is %s %d ticks after it was confirmed again", d[cut], h.Controller.LivenessTicks()-back)
		}
		return h.Controller.LivenessTicks() >= back+10
	})
}
