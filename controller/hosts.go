package controller

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Hosts need no hand setup. A GPU server's NIC resolves its gateway with
// ARP; the pipeline routes IPv4 and nothing else, so a leaf punts the
// ARP its hosts send (punt_table, EtherType 0x0806) and the controller
// answers it: every request from a declared host (its port, its address)
// for any address but the host's own gets the leaf port's MAC (proxy
// ARP: the leaf routes every packet, so whatever the host's subnet and
// gateway, the leaf is the next hop). A request for the host's own
// address (duplicate address detection) is not answered.
//
// The leaf writes a host's MAC into the packets it routes to it
// (port_macs), so the controller learns it: from what the host sends,
// and by asking each host port, as the leader, who has the host's
// address (an ARP probe, sender 0.0.0.0, which a host answers to defend
// its address), so that a host that has sent nothing yet is known before
// traffic comes for it. Unlearned hosts are asked after
// hostProbeUnknown, doubling up to hostProbeKnown; learned ones every
// hostProbeKnown (a NIC replaced).
// A learned MAC is kept in etcd (Config.HostMACs), which every replica
// follows, so a new term writes the same port_macs; it overrides the
// topology's (mac:, or 06:00 and the IPv4 address when none is given).

const (
	hostProbeUnknown = 2 * time.Second
	hostProbeKnown   = 30 * time.Second
	// arpPerPort is the most ARP answers a host port gets per second: a
	// host flooding ARP costs the controller no more than that.
	arpPerPort = 50
	// learnBatch is the most learned MACs recorded in one transaction
	// (etcd's --max-txn-ops is 128 by default).
	learnBatch = 128
)

// HostMACStore keeps the hosts' learned MACs in etcd (store.HostMACs):
// writes carry the writer's term's fence (none without leadership), and
// every replica follows them.
type HostMACStore interface {
	Put(ctx context.Context, fence []clientv3.Cmp, macs map[string]models.MAC) error
	// Follow calls fn with every host's learned MAC, at first and after
	// each change, until ctx ends.
	Follow(ctx context.Context, fn func(map[string]models.MAC)) error
}

// hostState is what the controller knows of hosts beyond the topology,
// under mu, and the ARP answers to send and the MACs to record (out,
// learn).
type hostState struct {
	mu      sync.Mutex
	out     chan packetOut
	learn   chan learnedMAC
	learned map[string]models.MAC // by host name
	// asked is when each host was last probed (the leader's), and tries
	// how many times running it went unanswered: an unlearned host is
	// asked again after hostProbeUnknown, doubling up to hostProbeKnown
	// (a host that never answers costs little).
	asked map[string]time.Time
	tries map[string]int
	// answered counts, per host port, the ARP answers of the current
	// second (since second).
	answered map[models.Endpoint]int
	second   time.Time
	// warned are the (port, address) pairs already reported as a wrong
	// address.
	warned map[models.Endpoint]netip.Addr
}

// packetOut is a frame to send out of a switch's port.
type packetOut struct {
	sw      models.SwitchID
	port    uint32
	payload []byte
}

// learnedMAC is a host's MAC as it said it.
type learnedMAC struct {
	host string
	mac  models.MAC
}

// arpIn takes an ARP packet a leaf punted from port: it answers a
// declared host's request, and learns the host's MAC.
func (c *Controller) arpIn(sw models.SwitchID, port uint32, payload []byte) {
	p, ok := models.ParseARP(payload)
	st := c.current()
	if !ok || st == nil {
		return
	}
	at := models.Endpoint{Switch: sw, Port: port}
	h, ok := st.snap.HostAt(at)
	if !ok {
		c.m.arp.WithLabelValues("not_a_host_port").Inc()
		return
	}
	if p.SPA.IsUnspecified() {
		return // another host's duplicate address probe: nothing to learn, nothing to say
	}
	if p.SPA != h.IP {
		c.m.arp.WithLabelValues("wrong_address").Inc()
		c.hosts.mu.Lock()
		first := c.hosts.warned[at] != p.SPA
		c.hosts.warned[at] = p.SPA
		c.hosts.mu.Unlock()
		if first {
			c.log.Warn("ARP from a host port with an address the topology does not give it: not answered, not learned",
				"port", at, "address", p.SPA, "mac", p.SHA, "host", h.Name, "host_address", h.IP)
		}
		return
	}
	if p.SHA != c.hostMAC(h) {
		select {
		case c.hosts.learn <- learnedMAC{host: h.Name, mac: p.SHA}:
		default:
			c.m.arp.WithLabelValues("dropped").Inc()
		}
	}
	if p.Op != models.ARPRequest || p.TPA == h.IP || !p.TPA.Is4() {
		return
	}
	now := c.cfg.Now()
	c.hosts.mu.Lock()
	if now.Sub(c.hosts.second) >= time.Second {
		clear(c.hosts.answered)
		c.hosts.second = now
	}
	c.hosts.answered[at]++
	over := c.hosts.answered[at] > arpPerPort
	c.hosts.mu.Unlock()
	sws, err := st.snap.Switch(sw)
	if over || err != nil {
		c.m.arp.WithLabelValues("dropped").Inc()
		return
	}
	gw := sws.PortMAC(port)
	reply := models.ARP{Op: models.ARPReply, SHA: gw, SPA: p.TPA, THA: p.SHA, TPA: p.SPA}
	select {
	case c.hosts.out <- packetOut{sw: sw, port: port, payload: reply.Frame(p.SHA, gw)}:
	default:
		c.m.arp.WithLabelValues("dropped").Inc()
	}
}

// hostMAC is h's MAC: learned, else the topology's.
func (c *Controller) hostMAC(h models.Host) models.MAC {
	c.hosts.mu.Lock()
	defer c.hosts.mu.Unlock()
	if m, ok := c.hosts.learned[h.Name]; ok {
		return m
	}
	return h.NICMAC()
}

// withLearnedMACs is macs (sw's port_macs) with the learned MACs of the
// hosts on sw written in; macs itself is not changed.
func (c *Controller) withLearnedMACs(snap *topology.Snapshot, sw models.SwitchID, macs []models.PortMAC) []models.PortMAC {
	c.hosts.mu.Lock()
	defer c.hosts.mu.Unlock()
	if len(c.hosts.learned) == 0 {
		return macs
	}
	var out []models.PortMAC
	for i, pm := range macs {
		h, ok := snap.HostAt(models.Endpoint{Switch: sw, Port: pm.Port})
		if !ok {
			continue
		}
		if m, ok := c.hosts.learned[h.Name]; ok && m != pm.Dst {
			if out == nil {
				out = slices.Clone(macs)
			}
			out[i].Dst = m
		}
	}
	if out == nil {
		return macs
	}
	return out
}

// setLearned takes every host's learned MAC and queues the leaves whose
// hosts' MACs changed.
func (c *Controller) setLearned(all map[string]models.MAC) {
	c.hosts.mu.Lock()
	var changed []string
	for h, m := range all {
		if was, ok := c.hosts.learned[h]; !ok || was != m {
			changed = append(changed, h)
		}
	}
	c.hosts.learned = maps.Clone(all)
	c.hosts.mu.Unlock()
	st := c.current()
	if st == nil || len(changed) == 0 {
		return
	}
	queued := map[models.SwitchID]bool{}
	for _, name := range changed {
		h, err := st.snap.Host(name)
		if err != nil {
			continue // no longer in the topology
		}
		c.log.Info("host MAC learned", "host", h.Name, "mac", all[h.Name], "port", h.Attach)
		if !queued[h.Attach.Switch] {
			queued[h.Attach.Switch] = true
			c.Enqueue(h.Attach.Switch)
		}
	}
}

// serveHosts sends the ARP answers, records the MACs learned, and probes
// the host ports as the leader, until ctx ends.
func (c *Controller) serveHosts(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	c.probeHosts(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-c.hosts.out:
			if c.Leading() && c.sendARP(ctx, p) {
				c.m.arp.WithLabelValues("answered").Inc()
			}
		case l := <-c.hosts.learn:
			// With what else was learned meanwhile: a fabric's hosts
			// answer the first probes together, and one transaction
			// (and one change for the replicas following) takes many.
			batch := map[string]models.MAC{l.host: l.mac}
		more:
			for len(batch) < learnBatch {
				select {
				case l := <-c.hosts.learn:
					batch[l.host] = l.mac
				default:
					break more
				}
			}
			if c.Leading() {
				c.recordMACs(ctx, batch)
			}
		case <-tick.C:
			c.probeHosts(ctx)
		}
	}
}

// sendARP sends an ARP frame; false if it could not.
func (c *Controller) sendARP(ctx context.Context, p packetOut) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.cfg.Packets.SendPacket(pctx, p.sw, p.port, p.payload); err != nil {
		c.log.Debug("ARP not sent", "switch", p.sw, "port", p.port, "err", err)
		return false
	}
	return true
}

// recordMACs keeps learned MACs: in etcd, for every replica to follow,
// or here only when there is no store.
func (c *Controller) recordMACs(ctx context.Context, batch map[string]models.MAC) {
	c.m.arp.WithLabelValues("learned").Add(float64(len(batch)))
	if c.cfg.HostMACs == nil {
		c.hosts.mu.Lock()
		all := maps.Clone(c.hosts.learned)
		c.hosts.mu.Unlock()
		if all == nil {
			all = map[string]models.MAC{}
		}
		maps.Copy(all, batch)
		c.setLearned(all)
		return
	}
	var fence []clientv3.Cmp
	if c.cfg.Leadership != nil {
		t := c.cfg.Leadership.Term()
		if t == nil {
			return
		}
		fence = []clientv3.Cmp{t.Fence()}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.cfg.HostMACs.Put(pctx, fence, batch); err != nil {
		c.log.Warn("host MACs not recorded in etcd: learned again at their next ARP", "hosts", len(batch), "err", err)
	}
}

// probeHosts asks, as the leader, the hosts due for it who has their
// address.
func (c *Controller) probeHosts(ctx context.Context) {
	st := c.current()
	if st == nil || !c.Leading() {
		return
	}
	now := c.cfg.Now()
	for _, h := range st.snap.Hosts() {
		c.hosts.mu.Lock()
		_, known := c.hosts.learned[h.Name]
		every := hostProbeKnown
		if !known {
			every = min(hostProbeKnown, hostProbeUnknown<<min(c.hosts.tries[h.Name], 8))
		}
		due := now.Sub(c.hosts.asked[h.Name]) >= every
		if due {
			c.hosts.asked[h.Name] = now
			if known {
				delete(c.hosts.tries, h.Name)
			} else {
				c.hosts.tries[h.Name]++
			}
		}
		c.hosts.mu.Unlock()
		sw, err := st.snap.Switch(h.Attach.Switch)
		if !due || err != nil || !h.IP.Is4() {
			continue
		}
		src := sw.PortMAC(h.Attach.Port)
		probe := models.ARP{Op: models.ARPRequest, SHA: src, SPA: netip.IPv4Unspecified(), TPA: h.IP}
		if !c.sendARP(ctx, packetOut{sw: sw.Name, port: h.Attach.Port, payload: probe.Frame(models.BroadcastMAC, src)}) {
			continue
		}
		c.m.arp.WithLabelValues("probe_sent").Inc()
	}
}

// followHostMACs follows the learned MACs in etcd until ctx ends.
func (c *Controller) followHostMACs(ctx context.Context) {
	for ctx.Err() == nil {
		err := c.cfg.HostMACs.Follow(ctx, c.setLearned)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("following the learned host MACs in etcd failed; again in a second", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
