package controller

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/accelnet/accelnet/models"
)

// arpFrom is what a host at at sends asking who has target, from addr.
func arpFrom(addr, target netip.Addr, mac models.MAC) []byte {
	return models.ARP{Op: models.ARPRequest, SHA: mac, SPA: addr, TPA: target}.Frame(models.BroadcastMAC, mac)
}

// queuedARP takes the ARP answers arpIn queued.
func queuedARP(c *Controller) []packetOut {
	var out []packetOut
	for {
		select {
		case p := <-c.hosts.out:
			out = append(out, p)
		default:
			return out
		}
	}
}

// TestARPAnswersDeclaredHostsOnly: a declared host's request for any
// address but its own is answered, from its leaf port's MAC, out of its
// port; its own address (duplicate address detection), a port with no
// host, an address the topology does not give the port, and requests past
// arpPerPort a second are not answered. A host's new MAC is learned.
func TestARPAnswersDeclaredHostsOnly(t *testing.T) {
	c, _, _ := cabledController(t, 0)
	snap := c.current().snap
	host, _ := snap.Host("h1-1")
	leaf, _ := snap.Switch(host.Attach.Switch)
	nic := models.MAC{0x0a, 0, 0, 0, 0, 1}
	gw := netip.MustParseAddr("10.0.1.254")
	c.PacketIn(host.Attach.Switch, host.Attach.Port, arpFrom(host.IP, gw, nic))
	got := queuedARP(c)
	if len(got) != 1 {
		t.Fatalf("%d answers to h1-1's request, want 1", len(got))
	}
	reply, ok := models.ParseARP(got[0].payload)
	port := leaf.PortMAC(host.Attach.Port)
	if !ok || got[0].sw != host.Attach.Switch || got[0].port != host.Attach.Port || reply.Op != models.ARPReply ||
		reply.SHA != port || reply.SPA != gw || reply.THA != nic || reply.TPA != host.IP {
		t.Errorf("answer %+v out of %s:%d, want %s is at %s, to h1-1 out of its port", reply, got[0].sw, got[0].port, gw, port)
	}
	select {
	case l := <-c.hosts.learn:
		if l.host != "h1-1" || l.mac != nic {
			t.Errorf("learned %s at %s, want h1-1 at %s", l.host, l.mac, nic)
		}
	default:
		t.Error("h1-1's MAC was not learned")
	}
	for name, frame := range map[string]func() (models.SwitchID, uint32, []byte){
		"its own address": func() (models.SwitchID, uint32, []byte) {
			return host.Attach.Switch, host.Attach.Port, arpFrom(host.IP, host.IP, nic)
		},
		"another address": func() (models.SwitchID, uint32, []byte) {
			return host.Attach.Switch, host.Attach.Port, arpFrom(netip.MustParseAddr("10.9.9.9"), gw, nic)
		},
		"a fabric port": func() (models.SwitchID, uint32, []byte) {
			a := snap.Neighbors(leaf.Name)[0]
			return leaf.Name, a.LocalPort, arpFrom(host.IP, gw, nic)
		},
	} {
		c.PacketIn(frame())
		if got := queuedARP(c); len(got) != 0 {
			t.Errorf("a request from %s was answered", name)
		}
	}
	for range arpPerPort + 10 {
		c.PacketIn(host.Attach.Switch, host.Attach.Port, arpFrom(host.IP, gw, nic))
	}
	if got := queuedARP(c); len(got) != arpPerPort-1 { // one answered above, this second
		t.Errorf("%d answers to %d requests in a second, want %d", len(got), arpPerPort+10, arpPerPort-1)
	}
}

// TestHostProbesWaitForAFailure: no host is probed while a failure is
// handled; the round after it probes every host.
func TestHostProbesWaitForAFailure(t *testing.T) {
	c, _, _ := cabledController(t, 0)
	sent := func() float64 { return testutil.ToFloat64(c.m.arp.WithLabelValues("probe_sent")) }
	ro := &rollout{}
	c.urgency.begin(ro)
	c.hosts.probe(t.Context())
	if n := sent(); n != 0 {
		t.Fatalf("%v hosts probed during a failure, want none", n)
	}
	c.urgency.end(ro)
	c.hosts.probe(t.Context())
	if n, want := sent(), float64(len(c.current().snap.Hosts())); n != want {
		t.Fatalf("%v hosts probed after the failure, want every one (%v)", n, want)
	}
}
