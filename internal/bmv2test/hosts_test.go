package bmv2test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
)

// TestBMv2PlainHosts: servers set up with nothing known of the fabric —
// an address, a /24, a default route via an address nobody holds, the
// MAC their kernel gave their NIC, no neighbour entry, none of it in the
// topology but the address — reach each other across the BMv2 fabric
// with kernel UDP sockets: their kernels resolve the gateway with ARP,
// the controller answers for the leaf and learns their MACs into the
// leaves' port_macs.
func TestBMv2PlainHosts(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	nics := map[string]models.MAC{}
	lab, topo, h := labFabric(t, bin, func(lab *Lab, h models.Host) {
		gw := netip.MustParseAddr(fmt.Sprintf("10.0.%s.254", h.Name[1:2]))
		nics[h.Name] = lab.PlainHost(h, 24, gw)
	}, nil)

	h11, h21 := topo.Hosts[0], topo.Hosts[2]
	a, err := OpenUDP(lab.Namespace(h11.Name), h11.IP, 9000)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenUDP(lab.Namespace(h21.Name), h21.IP, 9000)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The first datagrams may go while a MAC is still being learned (a
	// host's kernel drops a frame for another MAC): send until one
	// arrives, then both ways must work at once.
	msg := []byte("from h1-1")
	h.Eventually(t, time.Minute, "a datagram from h1-1 reaches h2-1", func() bool {
		if err := a.SendTo(msg, h21.IP, 9000); err != nil {
			t.Fatal(err)
		}
		return bytes.Equal(b.Recv(200*time.Millisecond), msg)
	})
	for range 5 {
		if err := b.SendTo([]byte("from h2-1"), h11.IP, 9000); err != nil {
			t.Fatal(err)
		}
		if got := a.Recv(5 * time.Second); !bytes.Equal(got, []byte("from h2-1")) {
			t.Fatalf("h1-1 got %q from h2-1, want its datagram", got)
		}
		if err := a.SendTo(msg, h21.IP, 9000); err != nil {
			t.Fatal(err)
		}
		if got := b.Recv(5 * time.Second); !bytes.Equal(got, msg) {
			t.Fatalf("h2-1 got %q from h1-1, want its datagram", got)
		}
	}
	// Every host's MAC is on its leaf, as its kernel gave it.
	for _, host := range topo.Hosts {
		h.Eventually(t, time.Minute, host.Name+"'s MAC on its leaf", func() bool {
			st, err := h.Driver.Read(Context(t), host.Attach.Switch)
			if err != nil {
				return false
			}
			for _, pm := range st.PortMACs {
				if pm.Port == host.Attach.Port {
					return pm.Dst == nics[host.Name]
				}
			}
			return false
		})
	}
}
