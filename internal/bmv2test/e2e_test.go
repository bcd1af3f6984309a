package bmv2test

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// leafSpine2x2 is 2 leaves × 2 spines, two hosts per leaf, every switch a
// BMv2: leaves have hosts on ports 1-2 and uplinks 3 (spine1), 4
// (spine2); spines have leaf1 on port 1, leaf2 on 2.
func leafSpine2x2() models.Topology {
	t := models.Topology{Name: "bmv2-lab"}
	for n := 1; n <= 2; n++ {
		t.Switches = append(t.Switches, models.Switch{Name: models.SwitchID(fmt.Sprintf("leaf%d", n)), Role: models.RoleLeaf,
			DeviceID: uint64(n), Target: models.TargetBMv2, Prefix: netip.MustParsePrefix(fmt.Sprintf("10.0.%d.0/24", n))})
		for i := 1; i <= 2; i++ {
			t.Hosts = append(t.Hosts, models.Host{Name: fmt.Sprintf("h%d-%d", n, i), IP: netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", n, i)),
				Attach: models.Endpoint{Switch: models.SwitchID(fmt.Sprintf("leaf%d", n)), Port: uint32(i)}, NICGbps: 10})
		}
	}
	for s := 1; s <= 2; s++ {
		spine := models.SwitchID(fmt.Sprintf("spine%d", s))
		t.Switches = append(t.Switches, models.Switch{Name: spine, Role: models.RoleSpine, DeviceID: uint64(10 + s), Target: models.TargetBMv2})
		for n := 1; n <= 2; n++ {
			t.Links = append(t.Links, models.Link{A: models.Endpoint{Switch: models.SwitchID(fmt.Sprintf("leaf%d", n)), Port: uint32(2 + s)},
				B: models.Endpoint{Switch: spine, Port: uint32(n)}, Gbps: 10})
		}
	}
	return t
}

// labFabric is the 2×2 lab (leafSpine2x2) of BMv2 switches, each host
// added with addHost, and accelnet serving it (options tuned by tune, if
// set), every switch programmed and read back in sync.
func labFabric(t *testing.T, bin string, addHost func(*Lab, models.Host), tune func(*stack.Config)) (*Lab, models.Topology, *fabrictest.Harness) {
	t.Helper()
	topo := leafSpine2x2()
	lab := NewLab(t, bin)
	for _, l := range topo.Links {
		lab.Wire(l.A, l.B)
	}
	for _, h := range topo.Hosts {
		addHost(lab, h)
	}
	for i := range topo.Switches {
		topo.Switches[i].P4RTAddr = lab.Start(topo.Switches[i])
	}
	h := fabrictest.NewServeWith(t, topo, tune)
	h.Eventually(t, 2*time.Minute, "every BMv2 programmed and read back in sync", func() bool { return h.Converged() == nil })
	return lab, topo, h
}

// hostSocket is a raw socket in a host's namespace.
func hostSocket(t *testing.T, lab *Lab, host string) *Socket {
	t.Helper()
	s, err := OpenSocket(lab.Namespace(host), lab.Iface(host))
	if err != nil {
		t.Fatalf("socket in %s: %v", host, err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestBMv2EndToEnd runs the controller against four simple_switch_grpc
// instances that start with no program: it pushes accelnet.p4 (the BMv2
// JSON compiled from it), programs routes, groups, MACs, seeds and punt
// entries and reads them back; RoCEv2 packets built in Go go from host
// namespaces to the right host with their MACs rewritten; different
// source ports spread over both spines; an intent's pin moves its flow
// to the spine it names; leaf1's flow_sample digests reach the elephant
// detector; a cable cut (no gNMI on BMv2: the controller's own link
// discovery notices its probes stop) is routed around; and once the
// cable is back the link is confirmed and used again.
func TestBMv2EndToEnd(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	lab, topo, h := labFabric(t, bin, (*Lab).Host, func(o *stack.Config) {
		o.Elephants.SampleOneIn = 1 // BMv2 forwards a few thousand packets a second: every one is a sample
	}) // discovery and link liveness at their defaults
	for _, sw := range topo.Switches {
		st, err := h.Driver.Read(Context(t), sw.Name)
		if err != nil {
			t.Fatalf("read %s: %v", sw.Name, err)
		}
		if len(st.Routes) == 0 || len(st.PortMACs) == 0 || st.HashSeed == nil || *st.HashSeed != uint32(sw.DeviceID) || !slices.Contains(st.Punts, models.EtherTypeLLDP) {
			t.Fatalf("%s read back %d routes, %d port MACs, seed %v, punts %v", sw.Name, len(st.Routes), len(st.PortMACs), st.HashSeed, st.Punts)
		}
	}
	h.Eventually(t, time.Minute, "link discovery confirms the four links", func() bool {
		d, _ := h.Controller.LinkDiscovery()
		n := 0
		for _, s := range d {
			if s.State == "confirmed" {
				n++
			}
		}
		return n == len(topo.Links)
	})

	h11, h21 := topo.Hosts[0], topo.Hosts[2]
	send := hostSocket(t, lab, h11.Name)
	recv := hostSocket(t, lab, h21.Name)
	leaf1, leaf2 := topo.Switches[0], topo.Switches[1]
	// deliver sends one packet of the flow and returns it as h2-1 got it.
	deliver := func(sport uint16) (Parsed, bool) {
		t.Helper()
		f := RoCEv2(h11.NICMAC(), leaf1.PortMAC(1), h11.IP, h21.IP, sport, 7, 256)
		if err := send.Send(f); err != nil {
			t.Fatal(err)
		}
		got := recv.Recv(5*time.Second, func(b []byte) bool {
			p := Parse(b)
			return p.OK && p.Src == h11.IP && p.SrcPort == sport
		})
		if got == nil {
			return Parsed{}, false
		}
		return Parse(got), true
	}
	p, ok := deliver(49152)
	if !ok {
		t.Fatal("a RoCEv2 packet from h1-1 never reached h2-1")
	}
	if p.DstMAC != h21.NICMAC() || p.SrcMAC != leaf2.PortMAC(1) || p.TTL != 64-3 {
		t.Errorf("arrived with %s → %s, TTL %d; want %s → %s (rewritten at every routed hop), TTL 61", p.SrcMAC, p.DstMAC, p.TTL, leaf2.PortMAC(1), h21.NICMAC())
	}

	// Different source ports spread over both spines (read from the
	// spines' port counters through the controller's driver).
	spineRx := func() [2]int64 {
		var out [2]int64
		for s := range 2 {
			n, err := rxPackets(t, h, models.SwitchID(fmt.Sprintf("spine%d", s+1)), 1)
			if err != nil {
				t.Fatal(err)
			}
			out[s] = n
		}
		return out
	}
	before := spineRx()
	for sport := uint16(50000); sport < 50032; sport++ {
		if _, ok := deliver(sport); !ok {
			t.Fatalf("flow :%d not delivered", sport)
		}
	}
	after := spineRx()
	via := [2]int64{after[0] - before[0], after[1] - before[1]}
	if via[0] == 0 || via[1] == 0 || via[0]+via[1] < 32 {
		t.Errorf("32 flows crossed spine1 %d and spine2 %d times: want both used", via[0], via[1])
	}
	t.Logf("32 flows: %d over spine1, %d over spine2", via[0], via[1])

	// leaf1 sampled them (flow_sample digests over the stream): the
	// elephant detector has a rate for each.
	h.Eventually(t, time.Minute, "leaf1's samples reach the elephant detector", func() bool {
		for sport := uint16(50000); sport < 50032; sport++ {
			if _, ok := h.Elephants.Sampled(models.FlowKey{Src: h11.IP, Dst: h21.IP, SrcPort: sport}); !ok {
				return false
			}
		}
		return true
	})

	// An intent pins one flow; its packets follow the pin's spine.
	tok := tenantToken(t, h)
	var in models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, models.IntentSpec{Name: "pinned", Src: h11.Name, Dst: h21.Name, Gbps: 5,
		SrcPorts: models.PortRange{First: 51000, Last: 51000}}, &in); r.StatusCode != http.StatusCreated {
		t.Fatalf("create intent: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, time.Minute, "the intent installed", func() bool {
		var got models.Intent
		h.Do(t, "GET", "/api/v1/intents/"+in.ID, tok, nil, &got)
		in = got
		return got.Status.State == models.StateInstalled
	})
	pinnedSpine := 0
	if in.Status.Flows[0].Path[1].Switch == "spine2" {
		pinnedSpine = 1
	}
	before = spineRx()
	for range 10 {
		if _, ok := deliver(51000); !ok {
			t.Fatal("the pinned flow was not delivered")
		}
	}
	after = spineRx()
	if got := after[pinnedSpine] - before[pinnedSpine]; got < 10 {
		t.Errorf("the pinned flow crossed spine%d %d times of 10", pinnedSpine+1, got)
	}

	// leaf1's uplink to spine1 goes down: discovery's probes stop, the
	// link is lost, routes and the pin move to spine2, flows get through.
	lost := models.Link{A: models.Endpoint{Switch: "leaf1", Port: 3}, B: models.Endpoint{Switch: "spine1", Port: 1}}.ID()
	cut, ticks := time.Now(), h.Controller.LivenessTicks()
	lab.SetLink(models.Endpoint{Switch: "leaf1", Port: 3}, false)
	h.Eventually(t, time.Minute, "the link lost", func() bool {
		d, _ := h.Controller.LinkDiscovery()
		return d[lost].State == api.DiscoveryLost
	})
	t.Logf("the cut link was lost %s (%d liveness ticks) after the cable was pulled", time.Since(cut).Round(time.Millisecond), h.Controller.LivenessTicks()-ticks)
	// Liveness ticks, not discovery rounds (5 s each), found it.
	if n := h.Controller.LivenessTicks() - ticks; n > 12 {
		t.Errorf("the cut link was lost after %d liveness ticks, want a few", n)
	}
	h.Eventually(t, time.Minute, "the link routed around", func() bool {
		return h.Controller.DownLinks()[lost] && h.Controller.Settled()
	})
	before = spineRx()
	for sport := uint16(52000); sport < 52016; sport++ {
		if _, ok := deliver(sport); !ok {
			d, _ := h.Controller.LinkDiscovery()
			t.Fatalf("flow :%d not delivered with leaf1–spine1 cut; links down %v; discovery %+v", sport, h.Controller.DownLinks(), d)
		}
	}
	var v api.TopologyView
	h.GetJSON(t, "/api/v1/topology", &v)
	for _, l := range v.Links {
		if l.ID == lost && (l.Discovery == nil || l.Discovery.State != "lost") {
			t.Errorf("the downed link shows %+v in the topology", l.Discovery)
		}
	}
	if after = spineRx(); after[0] != before[0] {
		t.Errorf("%d packets crossed spine1 while leaf1's cable to it was cut", after[0]-before[0])
	}

	// The cable goes back in: probes are heard again, the link is
	// confirmed, and flows use spine1 again.
	lab.SetLink(models.Endpoint{Switch: "leaf1", Port: 3}, true)
	h.Eventually(t, time.Minute, "the link confirmed and used again", func() bool {
		d, _ := h.Controller.LinkDiscovery()
		return d[lost].State == "confirmed" && !h.Controller.DownLinks()[lost] && h.Controller.Settled()
	})
	// And it stays confirmed: never lost after it is back.
	back := h.Controller.LivenessTicks()
	h.Eventually(t, time.Minute, "ten more liveness ticks with the link confirmed at each look", func() bool {
		if d, _ := h.Controller.LinkDiscovery(); d[lost].State != api.DiscoveryConfirmed {
			t.Fatalf("the link is %s %d ticks after it was confirmed again", d[lost].State, h.Controller.LivenessTicks()-back)
		}
		return h.Controller.LivenessTicks() >= back+10
	})
	before = spineRx()
	for sport := uint16(53000); sport < 53032; sport++ {
		if _, ok := deliver(sport); !ok {
			t.Fatalf("flow :%d not delivered after the cable went back in", sport)
		}
	}
	after = spineRx()
	if after[0] == before[0] || after[1] == before[1] {
		t.Errorf("after the repair 32 flows crossed spine1 %d and spine2 %d times: want both used", after[0]-before[0], after[1]-before[1])
	}
}

// tenantToken makes a tenant and returns its token.
func tenantToken(t *testing.T, h *fabrictest.Harness) string {
	t.Helper()
	if r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "lab"}, nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("create tenant: HTTP %d", r.StatusCode)
	}
	var tok api.NewTokenView
	if r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "lab", Role: models.RoleTenant}, &tok); r.StatusCode != http.StatusCreated {
		t.Fatalf("token: HTTP %d", r.StatusCode)
	}
	return tok.Secret
}

// rxPackets is the packets a switch's port has received, from its P4
// port counter.
func rxPackets(t *testing.T, h *fabrictest.Harness, sw models.SwitchID, port uint32) (int64, error) {
	t.Helper()
	c, err := h.Driver.ReadPortCounters(Context(t), sw, false)
	if err != nil {
		return 0, err
	}
	return c[port].Packets, nil
}
