package fabricsim

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/big"
	"net/netip"
	"slices"
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

// Hop is one switch on a flow's path.
type Hop struct {
	Switch  models.SwitchID `json:"switch"`
	InPort  uint32          `json:"in_port"`
	OutPort uint32          `json:"out_port"`
}

// FlowStatus is a flow as the dataplane currently forwards it.
type FlowStatus struct {
	ID        uint64   `json:"id"`
	Spec      FlowSpec `json:"spec"`
	Hops      []Hop    `json:"hops"`
	Delivered bool     `json:"delivered"`
	Drop      string   `json:"drop,omitempty"` // why it is not delivered
	RateGbps  float64  `json:"rate_gbps"`
}

type flowState struct {
	FlowStatus
	resources []string // capacity constraints the flow uses (directional links, NICs)
}

type portCounters struct {
	inOctets, outOctets, dropOctets float64
}

type portRates struct {
	inBps, outBps, dropBps float64
}

type lpmRoute struct {
	prefix  netip.Prefix
	members []weighted // one entry for a plain member
}

type weighted struct {
	memberID uint32
	port     uint32
	weight   int32
}

// fib is a switch's tables decoded for lookups.
type fib struct {
	pins   map[models.FlowKey]uint32
	routes []lpmRoute // longest prefix first
	seed   uint32
}

func bytesToUint(b []byte) uint64 {
	return new(big.Int).SetBytes(b).Uint64()
}

func addrFromBytes(b []byte) netip.Addr {
	var a [4]byte
	v := uint32(bytesToUint(b))
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}

func paramValue(a *p4v1.Action, id uint32) uint64 {
	for _, p := range a.GetParams() {
		if p.GetParamId() == id {
			return bytesToUint(p.GetValue())
		}
	}
	return 0
}

// compileFIB decodes the switch's installed entries. Callers hold sw.mu.
func (sw *Switch) compileFIBLocked() fib {
	f := fib{pins: map[models.FlowKey]uint32{}, seed: uint32(sw.deviceID)}
	st := sw.store
	if st == nil {
		return f
	}
	s := st.schema
	portParamSet, _ := s.Param(p4.ActionSetEgress, p4.ParamPort)
	portParamPin, _ := s.Param(p4.ActionPinEgress, p4.ParamPort)
	profID := s.ProfileID(p4.ProfileECMP)
	memberPort := map[uint32]uint32{}
	for id, m := range st.members[profID] {
		if m.GetAction().GetActionId() == s.ActionID(p4.ActionSetEgress) {
			memberPort[id] = uint32(paramValue(m.GetAction(), portParamSet.GetId()))
		}
	}
	dstID := s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst)
	for _, e := range st.entries[s.TableID(p4.TableIPv4LPM)] {
		var r lpmRoute
		for _, m := range e.GetMatch() {
			if m.GetFieldId() == dstID {
				r.prefix = netip.PrefixFrom(addrFromBytes(m.GetLpm().GetValue()), int(m.GetLpm().GetPrefixLen()))
			}
		}
		switch {
		case e.GetAction().GetActionProfileMemberId() != 0:
			id := e.GetAction().GetActionProfileMemberId()
			if port, ok := memberPort[id]; ok {
				r.members = []weighted{{memberID: id, port: port, weight: 1}}
			}
		case e.GetAction().GetActionProfileGroupId() != 0:
			g := st.groups[profID][e.GetAction().GetActionProfileGroupId()]
			for _, gm := range g.GetMembers() {
				if port, ok := memberPort[gm.GetMemberId()]; ok {
					r.members = append(r.members, weighted{memberID: gm.GetMemberId(), port: port, weight: gm.GetWeight()})
				}
			}
			slices.SortFunc(r.members, func(a, b weighted) int { return cmp.Compare(a.memberID, b.memberID) })
		}
		f.routes = append(f.routes, r) // a route with no usable member drops, like a member whose action is drop
	}
	slices.SortFunc(f.routes, func(a, b lpmRoute) int { return cmp.Compare(b.prefix.Bits(), a.prefix.Bits()) })
	srcID := s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Src)
	pdstID := s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Dst)
	sportID := s.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort)
	for _, e := range st.entries[s.TableID(p4.TableFlowPin)] {
		var k models.FlowKey
		for _, m := range e.GetMatch() {
			switch m.GetFieldId() {
			case srcID:
				k.Src = addrFromBytes(m.GetExact().GetValue())
			case pdstID:
				k.Dst = addrFromBytes(m.GetExact().GetValue())
			case sportID:
				k.SrcPort = uint16(bytesToUint(m.GetExact().GetValue()))
			}
		}
		f.pins[k] = uint32(paramValue(e.GetAction().GetAction(), portParamPin.GetId()))
	}
	return f
}

// FlowHash is the selector hash fabricsim uses, documented so that results
// can be reproduced: CRC-32 (IEEE) over the switch's seed (its device ID, 4
// bytes big-endian), IPv4 source, IPv4 destination, protocol (17), UDP
// source port and UDP destination port, all big-endian. The member is the
// hash modulo the sum of weights, walking members in member-ID order.
func FlowHash(seed uint32, src, dst netip.Addr, srcPort uint16) uint32 {
	var b [4 + 4 + 4 + 1 + 2 + 2]byte
	binary.BigEndian.PutUint32(b[0:], seed)
	s4, d4 := src.As4(), dst.As4()
	copy(b[4:], s4[:])
	copy(b[8:], d4[:])
	b[12] = 17
	binary.BigEndian.PutUint16(b[13:], srcPort)
	binary.BigEndian.PutUint16(b[15:], RoCEv2UDPPort)
	return crc32.ChecksumIEEE(b[:])
}

// lookup returns the egress port for a flow, or 0 when the tables drop it.
func (f fib) lookup(spec FlowSpec) uint32 {
	if port, ok := f.pins[models.FlowKey{Src: spec.Src, Dst: spec.Dst, SrcPort: spec.SrcPort}]; ok {
		return port
	}
	for _, r := range f.routes {
		if !r.prefix.Contains(spec.Dst) {
			continue
		}
		if len(r.members) == 0 {
			return 0
		}
		total := int64(0)
		for _, m := range r.members {
			total += int64(m.weight)
		}
		pick := int64(FlowHash(f.seed, spec.Src, spec.Dst, spec.SrcPort)) % total
		for _, m := range r.members {
			if pick < int64(m.weight) {
				return m.port
			}
			pick -= int64(m.weight)
		}
	}
	return 0
}

// trace follows a flow hop by hop through the compiled tables.
func (f *Fabric) traceLocked(fibs map[models.SwitchID]fib, spec FlowSpec) (hops []Hop, drop string, resources []string) {
	src, err := f.snap.HostByIP(spec.Src)
	if err != nil {
		return nil, "unknown source host", nil
	}
	dst, err := f.snap.HostByIP(spec.Dst)
	if err != nil {
		return nil, "unknown destination host", nil
	}
	resources = append(resources, "nic-tx:"+src.Name)
	at := src.Attach
	for len(hops) < maxHops {
		if f.switches[at.Switch].down.Load() {
			return hops, "switch " + string(at.Switch) + " down", resources
		}
		out := fibs[at.Switch].lookup(spec)
		if out == 0 {
			return append(hops, Hop{Switch: at.Switch, InPort: at.Port}), "no route at " + string(at.Switch), resources
		}
		hops = append(hops, Hop{Switch: at.Switch, InPort: at.Port, OutPort: out})
		egress := models.Endpoint{Switch: at.Switch, Port: out}
		if h, ok := f.snap.HostAt(egress); ok {
			if h.Name != dst.Name {
				return hops, fmt.Sprintf("delivered to the wrong host %s", h.Name), resources
			}
			return hops, "", append(resources, "nic-rx:"+dst.Name)
		}
		l, ok := f.snap.LinkAt(egress)
		if !ok {
			return hops, fmt.Sprintf("port %s is not connected", egress), resources
		}
		if f.linkDown[l.ID()] {
			return hops, fmt.Sprintf("link %s down", l.ID()), resources
		}
		resources = append(resources, "link:"+egress.String())
		if l.A == egress {
			at = l.B
		} else {
			at = l.A
		}
	}
	return hops, "TTL expired (forwarding loop)", resources
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

// maxMinFair assigns delivered flows their max-min fair rates (progressive
// filling): all flows grow together; a flow stops growing when it reaches
// its demand or when a resource it uses is full.
func maxMinFair(flows []*flowState, capacity func(string) float64) {
	remaining := map[string]float64{}
	users := map[string][]*flowState{}
	active := map[*flowState]bool{}
	for _, fl := range flows {
		fl.RateGbps = 0
		if !fl.Delivered || fl.Spec.DemandGbps <= 0 {
			continue
		}
		active[fl] = true
		for _, r := range fl.resources {
			if _, ok := remaining[r]; !ok {
				remaining[r] = capacity(r)
			}
			users[r] = append(users[r], fl)
		}
	}
	const eps = 1e-9
	for len(active) > 0 {
		inc := math.Inf(1)
		for r, us := range users {
			n := 0
			for _, u := range us {
				if active[u] {
					n++
				}
			}
			if n > 0 {
				inc = min(inc, remaining[r]/float64(n))
			}
		}
		for fl := range active {
			inc = min(inc, fl.Spec.DemandGbps-fl.RateGbps)
		}
		if math.IsInf(inc, 1) {
			break
		}
		for fl := range active {
			fl.RateGbps += inc
			for _, r := range fl.resources {
				remaining[r] -= inc
			}
		}
		for fl := range active {
			if fl.Spec.DemandGbps-fl.RateGbps <= eps {
				delete(active, fl)
				continue
			}
			for _, r := range fl.resources {
				if remaining[r] <= eps {
					delete(active, fl)
					break
				}
			}
		}
	}
}

// recomputeLocked re-traces every flow and reassigns rates and per-port rates.
func (f *Fabric) recomputeLocked() {
	fibs := make(map[models.SwitchID]fib, len(f.order))
	for _, sw := range f.order {
		sw.mu.Lock()
		fibs[sw.name] = sw.compileFIBLocked()
		sw.mu.Unlock()
	}
	all := make([]*flowState, 0, len(f.flows))
	for _, fl := range f.flows {
		fl.Hops, fl.Drop, fl.resources = f.traceLocked(fibs, fl.Spec)
		fl.Delivered = fl.Drop == ""
		all = append(all, fl)
	}
	maxMinFair(all, f.capacityGbps)
	for e := range f.portRate {
		delete(f.portRate, e)
	}
	rate := func(e models.Endpoint) *portRates {
		r := f.portRate[e]
		if r == nil {
			r = &portRates{}
			f.portRate[e] = r
		}
		return r
	}
	for _, fl := range all {
		bps := fl.RateGbps * 1e9
		if !fl.Delivered {
			if len(fl.Hops) > 0 {
				last := fl.Hops[len(fl.Hops)-1]
				rate(models.Endpoint{Switch: last.Switch, Port: last.InPort}).dropBps += fl.Spec.DemandGbps * 1e9
			}
			continue
		}
		for _, h := range fl.Hops {
			rate(models.Endpoint{Switch: h.Switch, Port: h.InPort}).inBps += bps
			rate(models.Endpoint{Switch: h.Switch, Port: h.OutPort}).outBps += bps
		}
	}
}

// tick advances counters to now, recomputes forwarding if anything changed,
// and publishes counters over gNMI.
func (f *Fabric) tick(now time.Time) {
	f.mu.Lock()
	dt := now.Sub(f.last).Seconds()
	if dt < 0 {
		dt = 0
	}
	f.last = now
	for e, r := range f.portRate {
		c := f.counters[e]
		if c == nil {
			continue
		}
		c.inOctets += r.inBps * dt / 8
		c.outOctets += r.outBps * dt / 8
		c.dropOctets += r.dropBps * dt / 8
	}
	if f.dirty.Swap(false) {
		f.recomputeLocked()
	}
	type pub struct {
		port uint32
		c    portCounters
		up   bool
	}
	snapshot := map[*Switch][]pub{}
	for _, sw := range f.order {
		for _, port := range f.snap.Ports(sw.name) {
			e := models.Endpoint{Switch: sw.name, Port: port}
			up := !sw.down.Load()
			if l, ok := f.snap.LinkAt(e); ok && f.linkDown[l.ID()] {
				up = false
			}
			snapshot[sw] = append(snapshot[sw], pub{port: port, c: *f.counters[e], up: up})
		}
	}
	f.mu.Unlock()
	ts := now.UnixNano()
	for sw, ps := range snapshot {
		for _, p := range ps {
			if err := sw.gnmi.publish(ts, p.port, p.c, p.up); err != nil {
				f.log.Warn("publish counters", "switch", sw.name, "err", err)
			}
		}
		sw.gnmi.sync()
	}
}

// readCounters answers P4Runtime reads of the per-port counters.
func (sw *Switch) readCounters(s *p4.Schema, q *p4v1.CounterEntry) ([]*p4v1.Entity, error) {
	rx, tx := s.CounterID(p4.CounterPortRx), s.CounterID(p4.CounterPortTx)
	ids := []uint32{rx, tx}
	if q.GetCounterId() != 0 {
		if q.GetCounterId() != rx && q.GetCounterId() != tx {
			return nil, errf(codes.NotFound, "unknown counter id %d", q.GetCounterId())
		}
		ids = []uint32{q.GetCounterId()}
	}
	f := sw.fabric
	f.mu.Lock()
	defer f.mu.Unlock()
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
