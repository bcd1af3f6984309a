package controller

import (
	"context"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
	"github.com/prometheus/client_golang/prometheus"
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

// hostLearner answers the hosts' ARP and learns their MACs. It reads
// the configuration (Now, Packets, HostMACs, Leadership), the current
// fabric, and whether this replica leads, and queues the leaves whose
// hosts' MACs changed; nothing else of the controller. What it knows of
// hosts beyond the topology is under mu; out and learn are the ARP
// answers to send and the MACs to record.
type hostLearner struct {
	cfg     *Config
	log     *slog.Logger
	arp     *prometheus.CounterVec
	fabric  func() *fabricState
	leading func() bool
	enqueue func(models.SwitchID)
	// urgency: probing waits while a failure is handled.
	urgency *urgency

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

func newHostLearner(cfg *Config, log *slog.Logger, arp *prometheus.CounterVec, fabric func() *fabricState, leading func() bool, enqueue func(models.SwitchID), u *urgency) *hostLearner {
	return &hostLearner{cfg: cfg, log: log, arp: arp, fabric: fabric, leading: leading, enqueue: enqueue, urgency: u,
		learned: map[string]models.MAC{}, asked: map[string]time.Time{}, tries: map[string]int{},
		answered: map[models.Endpoint]int{}, warned: map[models.Endpoint]netip.Addr{},
		out: make(chan packetOut, 1024), learn: make(chan learnedMAC, 1024)}
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
func (hl *hostLearner) arpIn(sw models.SwitchID, port uint32, payload []byte) {
	p, ok := models.ParseARP(payload)
	st := hl.fabric()
	if !ok || st == nil {
		return
	}
	at := models.Endpoint{Switch: sw, Port: port}
	h, ok := st.snap.HostAt(at)
	if !ok {
		hl.arp.WithLabelValues("not_a_host_port").Inc()
		return
	}
	if p.SPA.IsUnspecified() {
		return // another host's duplicate address probe: nothing to learn, nothing to say
	}
	if p.SPA != h.IP {
		hl.arp.WithLabelValues("wrong_address").Inc()
		hl.mu.Lock()
		first := hl.warned[at] != p.SPA
		hl.warned[at] = p.SPA
		hl.mu.Unlock()
		if first {
			hl.log.Warn("ARP from a host port with an address the topology does not give it: not answered, not learned",
				"port", at, "address", p.SPA, "mac", p.SHA, "host", h.Name, "host_address", h.IP)
		}
		return
	}
	if p.SHA != hl.hostMAC(h) {
		select {
		case hl.learn <- learnedMAC{host: h.Name, mac: p.SHA}:
		default:
			hl.arp.WithLabelValues("dropped").Inc()
		}
	}
	if p.Op != models.ARPRequest || p.TPA == h.IP || !p.TPA.Is4() {
		return
	}
	now := hl.cfg.Now()
	hl.mu.Lock()
	if now.Sub(hl.second) >= time.Second {
		clear(hl.answered)
		hl.second = now
	}
	hl.answered[at]++
	over := hl.answered[at] > arpPerPort
	hl.mu.Unlock()
	sws, err := st.snap.Switch(sw)
	if over || err != nil {
		hl.arp.WithLabelValues("dropped").Inc()
		return
	}
	gw := sws.PortMAC(port)
	reply := models.ARP{Op: models.ARPReply, SHA: gw, SPA: p.TPA, THA: p.SHA, TPA: p.SPA}
	select {
	case hl.out <- packetOut{sw: sw, port: port, payload: reply.Frame(p.SHA, gw)}:
	default:
		hl.arp.WithLabelValues("dropped").Inc()
	}
}

// hostMAC is h's MAC: learned, else the topology's.
func (hl *hostLearner) hostMAC(h models.Host) models.MAC {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if m, ok := hl.learned[h.Name]; ok {
		return m
	}
	return h.NICMAC()
}

// withLearnedMACs is macs (sw's port_macs) with the learned MACs of the
// hosts on sw written in; macs itself is not changed.
func (hl *hostLearner) withLearnedMACs(snap *topology.Snapshot, sw models.SwitchID, macs []models.PortMAC) []models.PortMAC {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	if len(hl.learned) == 0 {
		return macs
	}
	var out []models.PortMAC
	for i, pm := range macs {
		h, ok := snap.HostAt(models.Endpoint{Switch: sw, Port: pm.Port})
		if !ok {
			continue
		}
		if m, ok := hl.learned[h.Name]; ok && m != pm.Dst {
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
func (hl *hostLearner) setLearned(all map[string]models.MAC) {
	hl.mu.Lock()
	var changed []string
	for h, m := range all {
		if was, ok := hl.learned[h]; !ok || was != m {
			changed = append(changed, h)
		}
	}
	hl.learned = maps.Clone(all)
	hl.mu.Unlock()
	st := hl.fabric()
	if st == nil || len(changed) == 0 {
		return
	}
	queued := map[models.SwitchID]bool{}
	for _, name := range changed {
		h, err := st.snap.Host(name)
		if err != nil {
			continue // no longer in the topology
		}
		hl.log.Info("host MAC learned", "host", h.Name, "mac", all[h.Name], "port", h.Attach)
		if !queued[h.Attach.Switch] {
			queued[h.Attach.Switch] = true
			hl.enqueue(h.Attach.Switch)
		}
	}
}

// serve sends the ARP answers, records the MACs learned, and probes
// the host ports as the leader, until ctx ends.
func (hl *hostLearner) serve(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	hl.probe(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-hl.out:
			if hl.leading() && hl.sendARP(ctx, p) {
				hl.arp.WithLabelValues("answered").Inc()
			}
		case l := <-hl.learn:
			// With what else was learned meanwhile: a fabric's hosts
			// answer the first probes together, and one transaction
			// (and one change for the replicas following) takes many.
			batch := map[string]models.MAC{l.host: l.mac}
		more:
			for len(batch) < learnBatch {
				select {
				case l := <-hl.learn:
					batch[l.host] = l.mac
				default:
					break more
				}
			}
			if hl.leading() {
				hl.recordMACs(ctx, batch)
			}
		case <-tick.C:
			hl.probe(ctx)
		}
	}
}

// sendARP sends an ARP frame; false if it could not.
func (hl *hostLearner) sendARP(ctx context.Context, p packetOut) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := hl.cfg.Packets.SendPacket(pctx, p.sw, p.port, p.payload); err != nil {
		hl.log.Debug("ARP not sent", "switch", p.sw, "port", p.port, "err", err)
		return false
	}
	return true
}

// recordMACs keeps learned MACs: in etcd, for every replica to follow,
// or here only when there is no store.
func (hl *hostLearner) recordMACs(ctx context.Context, batch map[string]models.MAC) {
	hl.arp.WithLabelValues("learned").Add(float64(len(batch)))
	if hl.cfg.HostMACs == nil {
		hl.mu.Lock()
		all := maps.Clone(hl.learned)
		hl.mu.Unlock()
		if all == nil {
			all = map[string]models.MAC{}
		}
		maps.Copy(all, batch)
		hl.setLearned(all)
		return
	}
	var fence []clientv3.Cmp
	if hl.cfg.Leadership != nil {
		t := hl.cfg.Leadership.Term()
		if t == nil {
			return
		}
		fence = []clientv3.Cmp{t.Fence()}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := hl.cfg.HostMACs.Put(pctx, fence, batch); err != nil {
		hl.log.Warn("host MACs not recorded in etcd: learned again at their next ARP", "hosts", len(batch), "err", err)
	}
}

// probe asks, as the leader, the hosts due for it who has their
// address; not while a failure is handled (at k=48 about 900 ARP
// packet-outs a second, and a walk of 27,648 hosts), when they wait for
// the next round.
func (hl *hostLearner) probe(ctx context.Context) {
	st := hl.fabric()
	if st == nil || !hl.leading() || hl.urgency.handling() {
		return
	}
	now := hl.cfg.Now()
	for h := range st.snap.AllHosts() {
		hl.mu.Lock()
		_, known := hl.learned[h.Name]
		every := hostProbeKnown
		if !known {
			every = min(hostProbeKnown, hostProbeUnknown<<min(hl.tries[h.Name], 8))
		}
		due := now.Sub(hl.asked[h.Name]) >= every
		if due {
			hl.asked[h.Name] = now
			if known {
				delete(hl.tries, h.Name)
			} else {
				hl.tries[h.Name]++
			}
		}
		hl.mu.Unlock()
		sw, err := st.snap.Switch(h.Attach.Switch)
		if !due || err != nil || !h.IP.Is4() {
			continue
		}
		src := sw.PortMAC(h.Attach.Port)
		probe := models.ARP{Op: models.ARPRequest, SHA: src, SPA: netip.IPv4Unspecified(), TPA: h.IP}
		if !hl.sendARP(ctx, packetOut{sw: sw.Name, port: h.Attach.Port, payload: probe.Frame(models.BroadcastMAC, src)}) {
			continue
		}
		hl.arp.WithLabelValues("probe_sent").Inc()
	}
}

// follow follows the learned MACs in etcd until ctx ends.
func (hl *hostLearner) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := hl.cfg.HostMACs.Follow(ctx, hl.setLearned)
		if ctx.Err() != nil {
			return
		}
		hl.log.Warn("following the learned host MACs in etcd failed; again in a second", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
