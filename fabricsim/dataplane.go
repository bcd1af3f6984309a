package fabricsim

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// RoCEv2UDPPort is the UDP destination port of every RoCEv2 packet.
const RoCEv2UDPPort = 4791

// packetBytes is the wire size of a full RoCEv2 packet at 4096-byte MTU:
// payload + Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4. Packet counters
// are octets / packetBytes.
const packetBytes = 4096 + 14 + 20 + 8 + 12 + 4

// maxHops models the IPv4 TTL: a flow still in the fabric after this many
// switches is looping and is dropped.
const maxHops = 64

// FlowSpec is a RoCEv2 flow a workload offers.
type FlowSpec struct {
	Src        netip.Addr `json:"src"`
	Dst        netip.Addr `json:"dst"`
	SrcPort    uint16     `json:"src_port"`
	DestQP     uint32     `json:"dest_qp,omitempty"`
	DemandGbps float64    `json:"demand_gbps"`
}

// Key is the part of the spec the flow-pin table matches.
func (s FlowSpec) Key() models.FlowKey {
	return models.FlowKey{Src: s.Src, Dst: s.Dst, SrcPort: s.SrcPort}
}

// Hop is one switch on a flow's path.
type Hop struct {
	Switch  models.SwitchID `json:"switch"`
	InPort  uint32          `json:"in_port"`
	OutPort uint32          `json:"out_port"`
	Pinned  bool            `json:"pinned,omitempty"` // a flow-pin entry chose the port
}

// Drop reasons.
const (
	DropNoRoute   = "no-route"
	DropTTL       = "ttl-expired"
	DropLinkDown  = "link-down"
	DropSwitch    = "switch-down"
	DropWrongHost = "wrong-host"
	DropNoHost    = "unknown-host"
)

// FlowStatus is a flow as the dataplane currently forwards it.
type FlowStatus struct {
	ID        uint64   `json:"id"`
	Workload  string   `json:"workload,omitempty"`
	Spec      FlowSpec `json:"spec"`
	Hops      []Hop    `json:"hops"`
	Delivered bool     `json:"delivered"`
	Drop      string   `json:"drop,omitempty"`        // reason, one of the Drop constants
	DropAt    string   `json:"drop_detail,omitempty"` // where and what
	RateGbps  float64  `json:"rate_gbps"`
}

type flowState struct {
	FlowStatus
	resources []string // capacity constraints the flow uses (directional links, NICs)
	// sampleCarry is the fraction of a flow_sample digest owed to the
	// next tick.
	sampleCarry float64
	// sample is the flow's flow_sample digest datum, the same for each
	// of its packets sampled on samplePort (built once, not per sample:
	// a leaf of 100 Gb/s flows sends thousands a second).
	sample     *p4v1.P4Data
	samplePort uint32
}

// portCounters are a port's cumulative counters.
type portCounters struct {
	inOctets, outOctets, ecnOctets float64
	// drops by reason, at the port where the packet was dropped: ingress for
	// no-route and TTL, egress for link down.
	inDiscardOctets, outDiscardOctets float64
	drops                             map[string]float64
	// queueBytes is the egress queue's depth now (gauge, see
	// queueBytes), queueMaxBytes the highest since the port's counters
	// were last published.
	queueBytes, queueMaxBytes float64
}

type portRates struct {
	inBps, outBps, ecnBps, inDiscardBps, outDiscardBps float64
	dropBps                                            map[string]float64
	// counters are the port's (nil for an endpoint that has none),
	// which advanceLocked moves on without a lookup per port: it runs
	// every phase (counterPhases) over 138,240 ports at k=48.
	counters *portCounters
}

func (f *Fabric) rate(e models.Endpoint) *portRates {
	r := f.portRate[e]
	if r == nil {
		r = &portRates{dropBps: map[string]float64{}, counters: f.counters[e]}
		f.portRate[e] = r
	}
	return r
}

// linkUpLocked: a link carries traffic if no fault holds it down, both ends
// are administratively enabled and both switches are up.
func (f *Fabric) linkUpLocked(l models.Link) bool {
	if f.faulted(l.ID()) || f.adminDown[l.A] || f.adminDown[l.B] {
		return false
	}
	return !f.switches[l.A.Switch].down.Load() && !f.switches[l.B.Switch].down.Load()
}

// traceLocked follows a flow hop by hop through the compiled tables.
func (f *Fabric) traceLocked(spec FlowSpec) (hops []Hop, drop, detail string, resources []string) {
	src, err := f.snap.HostByIP(spec.Src)
	if err != nil {
		return nil, DropNoHost, "unknown source " + spec.Src.String(), nil
	}
	dst, err := f.snap.HostByIP(spec.Dst)
	if err != nil {
		return nil, DropNoHost, "unknown destination " + spec.Dst.String(), nil
	}
	resources = append(resources, "nic-tx:"+src.Name)
	at := src.Attach
	if f.adminDown[at] {
		return nil, DropLinkDown, fmt.Sprintf("host port %s disabled", at), resources
	}
	for len(hops) < maxHops {
		if f.switches[at.Switch].down.Load() {
			return hops, DropSwitch, "switch " + string(at.Switch) + " down", resources
		}
		out, pinned := f.fibs[at.Switch].lookup(spec)
		if out == 0 {
			return append(hops, Hop{Switch: at.Switch, InPort: at.Port}), DropNoRoute, "no route at " + string(at.Switch), resources
		}
		hops = append(hops, Hop{Switch: at.Switch, InPort: at.Port, OutPort: out, Pinned: pinned})
		egress := models.Endpoint{Switch: at.Switch, Port: out}
		if h, ok := f.snap.HostAt(egress); ok {
			if f.adminDown[egress] {
				return hops, DropLinkDown, fmt.Sprintf("host port %s disabled", egress), resources
			}
			if h.Name != dst.Name {
				return hops, DropWrongHost, fmt.Sprintf("delivered to %s instead of %s", h.Name, dst.Name), resources
			}
			return hops, "", "", append(resources, "nic-rx:"+dst.Name)
		}
		peer, l, ok := f.peerLocked(egress)
		if !ok {
			return hops, DropNoRoute, fmt.Sprintf("port %s is not connected", egress), resources
		}
		if !f.linkUpLocked(l) {
			return hops, DropLinkDown, fmt.Sprintf("link %s down", l.ID()), resources
		}
		resources = append(resources, "link:"+egress.String())
		at = peer // where the cable really goes
	}
	return hops, DropTTL, "TTL expired after " + fmt.Sprint(maxHops) + " hops (forwarding loop)", resources
}

// capacityGbps of a resource named by traceLocked.
func (f *Fabric) capacityGbps(res string) float64 {
	switch {
	case len(res) > 7 && res[:7] == "nic-tx:":
		h, _ := f.snap.Host(res[7:])
		return h.NICGbps
	case len(res) > 7 && res[:7] == "nic-rx:":
		h, _ := f.snap.Host(res[7:])
		return h.NICGbps
	default:
		e, _ := models.ParseEndpoint(res[5:])
		return f.snap.PortGbps(e)
	}
}

// offeredGbps is what a flow's sender puts on the wire before congestion
// control: its demand, capped by its NIC.
func (f *Fabric) offeredGbps(spec FlowSpec) float64 {
	src, err := f.snap.HostByIP(spec.Src)
	if err != nil {
		return 0
	}
	return min(spec.DemandGbps, src.NICGbps)
}

// recomputeLocked brings forwarding and rates up to date. Only switches
// whose tables changed are recompiled, and only flows that are new or pass
// through a changed switch are traced again (all of them after a link or
// switch state change); rates are then shared out afresh.
func (f *Fabric) recomputeLocked() {
	changed := f.takeDirty()
	if !changed.any() {
		return
	}
	start := time.Now()
	for _, sw := range f.order {
		if changed.switches[sw.name] || f.fibs[sw.name] == nil {
			sw.mu.Lock()
			fb := sw.compileFIBLocked()
			sw.mu.Unlock()
			f.fibs[sw.name] = &fb
		}
	}
	all := make([]*flowState, 0, len(f.flows))
	retraced := 0
	for _, fl := range f.flows {
		if changed.all || fl.resources == nil && fl.Drop == "" || passes(fl.Hops, changed.switches) {
			fl.Hops, fl.Drop, fl.DropAt, fl.resources = f.traceLocked(fl.Spec)
			fl.Delivered = fl.Drop == ""
			retraced++
		}
		all = append(all, fl)
	}
	maxMinFair(all, f.capacityGbps)
	clear(f.portRate)
	for sw := range f.pinRate {
		clear(f.pinRate[sw])
	}
	arriving := map[portPair]float64{} // offered bit/s from each ingress to each egress port
	for _, fl := range all {
		offeredBps := f.offeredGbps(fl.Spec) * 1e9
		if !fl.Delivered {
			// A dropped flow is counted where it dies at its offered rate;
			// it is not modelled as using capacity before that point.
			bps := offeredBps
			if len(fl.Hops) == 0 {
				continue
			}
			last := fl.Hops[len(fl.Hops)-1]
			if fl.Drop == DropLinkDown && last.OutPort != 0 {
				r := f.rate(models.Endpoint{Switch: last.Switch, Port: last.OutPort})
				r.outDiscardBps += bps
				r.dropBps[fl.Drop] += bps
			} else {
				r := f.rate(models.Endpoint{Switch: last.Switch, Port: last.InPort})
				r.inDiscardBps += bps
				r.dropBps[fl.Drop] += bps
			}
			continue
		}
		bps := fl.RateGbps * 1e9
		for _, h := range fl.Hops {
			f.rate(models.Endpoint{Switch: h.Switch, Port: h.InPort}).inBps += bps
			out := models.Endpoint{Switch: h.Switch, Port: h.OutPort}
			f.rate(out).outBps += bps
			arriving[portPair{in: models.Endpoint{Switch: h.Switch, Port: h.InPort}, out: out}] += offeredBps
			if h.Pinned {
				if f.pinRate[h.Switch] == nil {
					f.pinRate[h.Switch] = map[models.FlowKey]float64{}
				}
				f.pinRate[h.Switch][fl.Spec.Key()] += bps
			}
		}
	}
	offers := f.egressOffers(arriving)
	// ECN: where more is offered than the port can send, the switch marks
	// the excess fraction of what it sends (DCQCN's steady state keeps the
	// queue at the marking threshold).
	for e, o := range offers {
		capacity := f.snap.PortGbps(e) * 1e9
		if o.offered > capacity && capacity > 0 {
			r := f.rate(e)
			r.ecnBps = r.outBps * (o.offered - capacity) / o.offered
		}
	}
	f.setQueuesLocked(offers)
	f.stats.recomputes++
	f.stats.lastRecompute = time.Since(start)
	f.stats.lastRetraced = retraced
}

func passes(hops []Hop, switches map[models.SwitchID]bool) bool {
	for _, h := range hops {
		if switches[h.Switch] {
			return true
		}
	}
	return false
}

// advanceLocked moves every counter forward to now at the current rates
// (f.last is the time they are at: now, or later if a read moved them on
// already).
func (f *Fabric) advanceLocked(now time.Time) {
	dt := now.Sub(f.last).Seconds()
	if dt <= 0 {
		return
	}
	f.last = now
	for _, r := range f.portRate {
		c := r.counters
		if c == nil {
			continue
		}
		c.inOctets += r.inBps * dt / 8
		c.outOctets += r.outBps * dt / 8
		c.ecnOctets += r.ecnBps * dt / 8
		c.inDiscardOctets += r.inDiscardBps * dt / 8
		c.outDiscardOctets += r.outDiscardBps * dt / 8
		for reason, bps := range r.dropBps {
			if c.drops == nil {
				c.drops = map[string]float64{}
			}
			c.drops[reason] += bps * dt / 8
		}
	}
	for sw, rates := range f.pinRate {
		for k, bps := range rates {
			if f.pinOctets[sw] == nil {
				f.pinOctets[sw] = map[models.FlowKey]float64{}
			}
			f.pinOctets[sw][k] += bps * dt / 8
		}
	}
}

// tick advances counters to now, recomputes forwarding if anything changed,
// and publishes every switch's counters over gNMI.
func (f *Fabric) tick(now time.Time) { f.tickPhase(now, 0, 1) }

// counterPhases is how many groups a fabric's switches publish their
// counters in: one group every interval/phases, so each switch still
// publishes every interval, but not all at the same moment. Real
// switches' gNMI sample timers start when each one's subscription does;
// an emulator publishing a k=48 fabric's 2,880 switches (138,240 ports)
// at once sends its collector a burst of about a second of CPU in each
// process every interval, and a link failure landing in it waited that
// long for its reroute. A phase is no shorter than a second: each one
// also advances every counter.
func counterPhases(interval time.Duration, switches int) int {
	return max(1, min(int(interval/time.Second), 20, switches))
}

// tickPhase is tick publishing only the switches of one phase of phases
// (f.order's every phases-th switch from phase on).
func (f *Fabric) tickPhase(now time.Time, phase, phases int) {
	f.mu.Lock()
	// The counters go out stamped with the time they were advanced to. A
	// read of counters over P4Runtime (a pin's, every second) advances
	// them too, and may have done so past this tick's time (it waited
	// for the lock, or came late off a busy ticker): stamped with that
	// time, they would be ahead of their stamp, and a collector would
	// read a spike, then a dip (seen beside CPU burners: links read at up
	// to 27 times their capacity, and intents moved off them).
	f.advanceLocked(now)
	now = f.last
	if f.interval <= sampleEvery {
		f.sampleSinceLocked(now) // no sampler of its own: see Run
	}
	if phase == 0 {
		// Forwarding is recomputed once an interval, as when every
		// switch published at once, not once a phase: during a
		// reroute every phase would find it changed, and at k=48 each
		// recomputation costs the emulator far more than a phase's
		// publication (and the controller beside it the same cores).
		f.recomputeLocked()
	}
	type pub struct {
		port uint32
		up   bool
		peer models.Endpoint // what the port is cabled to, if a switch
	}
	type sample struct {
		pubs   []pub
		ports  []uint32
		values []portCounters
	}
	snapshot := map[*Switch]*sample{}
	for i := phase; i < len(f.order); i += phases {
		sw := f.order[i]
		if sw.down.Load() {
			continue // a switch that is down publishes nothing
		}
		ports := f.snap.Ports(sw.name)
		smp := &sample{ports: ports, values: make([]portCounters, len(ports))}
		for i, port := range ports {
			e := models.Endpoint{Switch: sw.name, Port: port}
			p := pub{port: port, up: f.operUpLocked(e)}
			if peer, _, ok := f.peerLocked(e); ok {
				p.peer = peer
			}
			smp.pubs = append(smp.pubs, p)
			c := f.counters[e]
			smp.values[i] = *c
			c.queueMaxBytes = c.queueBytes // the highest since this publication
		}
		snapshot[sw] = smp
	}
	f.mu.Unlock()
	ts := now.UnixNano()
	for sw, smp := range snapshot {
		sw.gnmi.setCounters(ts, smp.ports, smp.values)
		for _, p := range smp.pubs {
			if p.peer.Switch != "" {
				if peer, err := f.snap.Switch(p.peer.Switch); err == nil {
					if err := sw.gnmi.publishLLDP(ts, p.port, peer, p.peer.Port); err != nil {
						f.log.Debug("publish lldp", "switch", sw.name, "err", err)
					}
				}
			}
			if err := sw.gnmi.publish(ts, p.port, p.up); err != nil {
				// A sample overtaken by an oper-status change is refused
				// as stale and sent again next tick: not worth a warning.
				level := slog.LevelWarn
				if strings.Contains(err.Error(), "stale") {
					level = slog.LevelDebug
				}
				f.log.Log(context.Background(), level, "publish counters", "switch", sw.name, "err", err)
			}
		}
	}
}

// operUpLocked is a port's oper-status: up if enabled and whatever is
// plugged into it works.
func (f *Fabric) operUpLocked(e models.Endpoint) bool {
	if f.adminDown[e] || f.switches[e.Switch].down.Load() {
		return false
	}
	if l, ok := f.snap.LinkAt(e); ok {
		return f.linkUpLocked(l)
	}
	return true
}

// readCounters answers P4Runtime reads of the per-port counters.
func (sw *Switch) readCounters(s *p4.Schema, q *p4v1.CounterEntry) ([]*p4v1.Entity, error) {
	rx, tx := s.CounterID(p4.CounterPortRx), s.CounterID(p4.CounterPortTx)
	ids := []uint32{rx, tx}
	if q.GetCounterId() != 0 {
		if q.GetCounterId() != rx && q.GetCounterId() != tx { // as PI answers
			return nil, errf(codes.InvalidArgument, "unknown counter id %d", q.GetCounterId())
		}
		ids = []uint32{q.GetCounterId()}
	}
	if i := q.GetIndex(); i != nil && q.GetCounterId() != 0 && (i.GetIndex() < 0 || i.GetIndex() >= s.CounterSize(q.GetCounterId())) {
		// As BMv2 answers (UNKNOWN): an index past the counter's size.
		return nil, errf(codes.Unknown, "counter index %d is out of range", i.GetIndex())
	}
	f := sw.fabric
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(time.Now())
	var out []*p4v1.Entity
	for _, id := range ids {
		for _, port := range f.snap.Ports(sw.name) {
			if q.GetIndex() != nil && q.GetIndex().GetIndex() != int64(port) {
				continue
			}
			c := f.counters[models.Endpoint{Switch: sw.name, Port: port}]
			octets := c.inOctets
			if id == tx {
				octets = c.outOctets
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
				CounterId: id,
				Index:     &p4v1.Index{Index: int64(port)},
				Data:      &p4v1.CounterData{ByteCount: int64(octets), PacketCount: int64(octets / packetBytes)},
			}}})
		}
	}
	return out, nil
}

// pinCounters are the direct counters of flow-pin entries, read at one
// instant: the dataplane's lock is taken once for a Read's entries, not
// once for each (a Read of a thousand pins queued behind every other
// switch's, and outlived the fabric's shutdown on a loaded machine).
func (sw *Switch) pinCounters(keys []models.FlowKey) []*p4v1.CounterData {
	if len(keys) == 0 {
		return nil
	}
	f := sw.fabric
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(time.Now())
	out := make([]*p4v1.CounterData, len(keys))
	for i, k := range keys {
		octets := f.pinOctets[sw.name][k]
		out[i] = &p4v1.CounterData{ByteCount: int64(octets), PacketCount: int64(octets / packetBytes)}
	}
	return out
}
