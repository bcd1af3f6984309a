package fabricsim

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/accelnet/accelnet/models"
)

// Hosts speak ARP as a Linux host does: a host answers a request for its
// own address (an ordinary request or a duplicate address probe from
// 0.0.0.0) with its NIC's MAC, and keeps the answers to its own requests
// in its neighbour table. A host's frames enter its leaf at its port (and
// are punted when the punt table matches ARP); the leaf's packet-outs to
// a host port reach the host. Nothing else of a host's is modelled here.

// hostNeighbors are the hosts' neighbour tables: host name → address →
// MAC.
type hostNeighbors struct {
	mu sync.Mutex
	m  map[string]map[netip.Addr]models.MAC
}

// toHost takes a frame a leaf sent out of a host port (a packet-out).
func (f *Fabric) toHost(h models.Host, frame []byte) {
	p, ok := models.ParseARP(frame)
	if !ok || p.TPA != h.IP {
		return
	}
	switch p.Op {
	case models.ARPRequest:
		mac := h.NICMAC()
		reply := models.ARP{Op: models.ARPReply, SHA: mac, SPA: h.IP, THA: p.SHA, TPA: p.SPA}
		f.fromHost(h, reply.Frame(p.SHA, mac))
	case models.ARPReply:
		f.neighbors.mu.Lock()
		defer f.neighbors.mu.Unlock()
		if f.neighbors.m == nil {
			f.neighbors.m = map[string]map[netip.Addr]models.MAC{}
		}
		if f.neighbors.m[h.Name] == nil {
			f.neighbors.m[h.Name] = map[netip.Addr]models.MAC{}
		}
		f.neighbors.m[h.Name][p.SPA] = p.SHA
	}
}

// fromHost delivers a frame h sends to its leaf.
func (f *Fabric) fromHost(h models.Host, frame []byte) {
	if sw := f.switches[h.Attach.Switch]; sw != nil {
		sw.receive(h.Attach.Port, frame)
	}
}

// HostARP makes a host ask who has target, as a host resolving its
// gateway does.
func (f *Fabric) HostARP(host string, target netip.Addr) error {
	h, err := f.snap.Host(host)
	if err != nil {
		return fmt.Errorf("host %q: %w", host, ErrUnknown)
	}
	mac := h.NICMAC()
	req := models.ARP{Op: models.ARPRequest, SHA: mac, SPA: h.IP, TPA: target}
	f.fromHost(h, req.Frame(models.BroadcastMAC, mac))
	return nil
}

// HostNeighbor is the MAC host's neighbour table holds for addr.
func (f *Fabric) HostNeighbor(host string, addr netip.Addr) (models.MAC, bool) {
	f.neighbors.mu.Lock()
	defer f.neighbors.mu.Unlock()
	m, ok := f.neighbors.m[host][addr]
	return m, ok
}
