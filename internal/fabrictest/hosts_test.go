package fabrictest_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// TestHostsNeedNoHandSetup: the topology gives no host MACs (the hosts'
// NICs have others than the 06:00 form), and no neighbour entry is
// written by hand. The leader learns every host's MAC by asking its port
// who has its address (before the host sends anything) and writes it
// into the leaf's port_macs; it keeps what it learned in etcd. A host
// resolving its gateway, or a host on its own leaf, gets the leaf port's
// MAC; a host probing its own address (duplicate address detection)
// gets no answer.
func TestHostsNeedNoHandSetup(t *testing.T) {
	topo := fabrictest.LeafSpine(2, 2, 2)
	nics := map[string]models.MAC{}
	for i := range topo.Hosts {
		mac := models.MAC{0x0a, 0xbc, 0, 0, 0, byte(i + 1)}
		topo.Hosts[i].MAC, nics[topo.Hosts[i].Name] = mac, mac
	}
	f := fabrictest.StartFabric(t, topo)
	declared := f.Topology()
	for i := range declared.Hosts {
		declared.Hosts[i].MAC = models.MAC{} // the operator knows only the addresses
	}
	h := fabrictest.NewServe(t, declared)
	converged(t, h)
	h.Eventually(t, 30*time.Second, "every host's MAC learned and on its leaf", func() bool {
		for _, host := range declared.Hosts {
			st, err := h.Driver.Read(t.Context(), host.Attach.Switch)
			if err != nil {
				return false
			}
			found := false
			for _, pm := range st.PortMACs {
				found = found || pm.Port == host.Attach.Port && pm.Dst == nics[host.Name]
			}
			if !found {
				return false
			}
		}
		return true
	})
	recs := map[string]models.MAC{}
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		_ = h.Store.HostMACs().Follow(ctx, func(all map[string]models.MAC) {
			if len(all) == len(declared.Hosts) {
				recs = all
				close(done)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(fabrictest.Backstop(30 * time.Second)):
		t.Fatal("the learned MACs are not all in etcd")
	}
	for name, mac := range nics {
		if recs[name] != mac {
			t.Errorf("etcd has %s for %s, want %s", recs[name], name, mac)
		}
	}

	snap, _ := h.Controller.Snapshot()
	host, _ := snap.Host("h1-1")
	leaf, _ := snap.Switch(host.Attach.Switch)
	gw := leaf.PortMAC(host.Attach.Port)
	other, _ := snap.Host("h1-2")
	for _, target := range []netip.Addr{netip.MustParseAddr("10.255.255.254"), other.IP} {
		if err := f.HostARP("h1-1", target); err != nil {
			t.Fatal(err)
		}
		h.Eventually(t, 20*time.Second, "h1-1 resolves "+target.String(), func() bool {
			mac, ok := f.HostNeighbor("h1-1", target)
			return ok && mac == gw
		})
	}
	// Duplicate address detection: asked last, and answered by nobody
	// (the answers above came in order on the same path).
	if err := f.HostARP("h1-1", host.IP); err != nil {
		t.Fatal(err)
	}
	if err := f.HostARP("h1-1", netip.MustParseAddr("10.255.255.253")); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "h1-1 resolves 10.255.255.253", func() bool {
		_, ok := f.HostNeighbor("h1-1", netip.MustParseAddr("10.255.255.253"))
		return ok
	})
	if mac, ok := f.HostNeighbor("h1-1", host.IP); ok {
		t.Errorf("h1-1's own address was answered with %s", mac)
	}
}
