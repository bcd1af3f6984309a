package fabricsim

import (
	"encoding/binary"
	"math"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// packetOut sends a controller packet out of the port its packet_out header
// names. If a switch is at the other end of that port and its punt_table
// matches the frame's EtherType, that switch sends it to its controller as a
// packet-in (how link discovery probes travel); otherwise the frame is
// counted and leaves the fabric.
func (sw *Switch) packetOut(from *stream, pkt *p4v1.PacketOut) error {
	sw.mu.Lock()
	if sw.store == nil {
		sw.mu.Unlock()
		return errf(codes.FailedPrecondition, "no forwarding pipeline is set")
	}
	if sw.primaryLocked() != from {
		sw.mu.Unlock()
		return errf(codes.PermissionDenied, "only the primary client may send packets")
	}
	schema := sw.store.schema
	sw.mu.Unlock()
	portID := schema.ControllerMetadataID("packet_out", "egress_port")
	var port uint32
	found := false
	for _, m := range pkt.GetMetadata() {
		if m.GetMetadataId() == portID {
			v, err := canonical(m.GetValue(), p4.PortBits)
			if err != nil {
				return errf(codes.InvalidArgument, "packet_out egress_port: %v", err)
			}
			port, found = uint32(p4.Uint(v)), true
		}
	}
	if !found {
		return errf(codes.InvalidArgument, "packet_out needs its egress_port metadata")
	}
	f := sw.fabric
	egress := models.Endpoint{Switch: sw.name, Port: port}
	if probe, err := models.ParseProbe(pkt.GetPayload()); err == nil {
		if !f.carryProbe(egress, probe, pkt.GetPayload()) {
			return errf(codes.InvalidArgument, "port %d is not connected", port)
		}
		sw.packetOuts.Add(1)
		return nil
	}
	f.mu.Lock()
	c := f.counters[egress]
	if c == nil {
		f.mu.Unlock()
		return errf(codes.InvalidArgument, "port %d is not connected", port)
	}
	sw.packetOuts.Add(1)
	up := f.operUpLocked(egress)
	c.outOctets += float64(len(pkt.GetPayload()))
	peer, _, isLink := f.peerLocked(egress)
	host, isHost := f.snap.HostAt(egress)
	f.mu.Unlock()
	if up && isHost {
		f.toHost(host, pkt.GetPayload())
		return nil
	}
	if !up || !isLink {
		return nil // lost on a down port
	}
	f.switches[peer.Switch].receive(peer.Port, pkt.GetPayload())
	return nil
}

// probeSwitchUs is the time fabricsim's switches take to forward a
// packet, ingress to egress, without its queueing: what a latency probe's
// hop records beside the queue.
const probeSwitchUs = 1

// carryProbe takes a latency probe the controller sent out of egress
// through the fabric as accelnet.p4 would (see models.Probe): each
// egress records the hop (its queue's depth and delay from the queue
// model, in packets and microseconds as BMv2 counts them) and takes one
// off the TTL; the switch it reaches with a TTL of 1 punts it to its
// controller; a switch routes it by its tables, with the hash RDMA
// traffic of its addresses and ports gets. A probe that meets a down
// link or switch, no route, or a host is lost, as a packet would be.
// False if egress, where it is sent from, is no port.
func (f *Fabric) carryProbe(egress models.Endpoint, probe models.Probe, frame []byte) bool {
	spec := FlowSpec{Src: probe.Src, Dst: probe.Dst, SrcPort: probe.SrcPort}
	f.mu.Lock()
	if f.counters[egress] == nil {
		f.mu.Unlock()
		return false
	}
	var punt *Switch
	var at uint32
	for range maxHops {
		c := f.counters[egress]
		if c == nil {
			break
		}
		c.outOctets += float64(len(frame))
		hop := models.ProbeHop{EgressPort: egress.Port, HopUs: probeSwitchUs}
		if g := f.snap.PortGbps(egress); g > 0 && c.queueBytes > 0 {
			hop.QueueDepth = uint32(math.Ceil(c.queueBytes / packetBytes))
			hop.QueueUs = uint32(math.Round(c.queueBytes * 8 / (g * 1e3)))
			hop.HopUs += hop.QueueUs
		}
		next, err := models.ProbeEgress(frame, hop)
		if err != nil {
			break
		}
		frame = next
		peer, l, isLink := f.peerLocked(egress)
		if !isLink || !f.operUpLocked(egress) || !f.linkUpLocked(l) {
			break // to a host (whose NIC drops the opcode), or lost
		}
		sw := f.switches[peer.Switch]
		if sw.down.Load() {
			break
		}
		if pc := f.counters[peer]; pc != nil {
			pc.inOctets += float64(len(frame))
		}
		if ttl, _ := models.ProbeTTL(frame); ttl <= 1 {
			punt, at = sw, peer.Port
			break
		}
		out, _ := f.fibs[peer.Switch].lookup(spec)
		if out == 0 {
			break
		}
		egress = models.Endpoint{Switch: peer.Switch, Port: out}
	}
	f.mu.Unlock()
	if punt != nil {
		punt.punt(at, frame)
	}
	return true
}

// receive handles a frame arriving from a neighbour: punted to the
// controller if the punt table matches its EtherType.
func (sw *Switch) receive(port uint32, frame []byte) {
	if sw.down.Load() || len(frame) < 14 {
		return
	}
	sw.fabric.mu.Lock()
	if c := sw.fabric.counters[models.Endpoint{Switch: sw.name, Port: port}]; c != nil {
		c.inOctets += float64(len(frame))
	}
	sw.fabric.mu.Unlock()
	etherType := binary.BigEndian.Uint16(frame[12:14])
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store == nil {
		return
	}
	s := sw.store.schema
	q := &p4v1.TableEntry{TableId: s.TableID(p4.TablePunt), Match: []*p4v1.FieldMatch{{
		FieldId:        s.MatchFieldID(p4.TablePunt, "ether_type"),
		FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{byte(etherType >> 8), byte(etherType)}}},
	}}}
	hits, err := sw.store.readTable(q)
	if err != nil || len(hits) == 0 || hits[0].GetTableEntry().GetAction().GetAction().GetActionId() != s.ActionID(p4.ActionSendToCPU) {
		return
	}
	sw.puntLocked(port, frame)
}

// punt sends a frame that arrived at port to the switch's controller.
func (sw *Switch) punt(port uint32, frame []byte) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store != nil {
		sw.puntLocked(port, frame)
	}
}

// puntLocked sends a frame that arrived at port to the primary
// controller as a packet-in (sw.mu held, its pipeline set).
func (sw *Switch) puntLocked(port uint32, frame []byte) {
	s := sw.store.schema
	primary := sw.primaryLocked()
	if primary == nil {
		return
	}
	in := &p4v1.PacketIn{Payload: frame, Metadata: []*p4v1.PacketMetadata{
		{MetadataId: s.ControllerMetadataID("packet_in", "ingress_port"), Value: u16(uint16(port))},
		{MetadataId: s.ControllerMetadataID("packet_in", "_pad"), Value: []byte{0}},
	}}
	select {
	case primary.out <- &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: in}}:
	default: // a controller that does not read loses packet-ins, as on hardware
	}
}

func u16(v uint16) []byte {
	if v < 256 {
		return []byte{byte(v)}
	}
	return []byte{byte(v >> 8), byte(v)}
}

// packetOutError reports a failed packet-out back on its stream
// (P4Runtime's StreamError with PacketOutError details), without ending it.
func (sw *Switch) packetOutError(st *stream, err error) {
	c, msg := codes.Unknown, err.Error()
	if pe, ok := err.(*p4err); ok {
		c, msg = pe.code, pe.msg
	}
	se := &p4v1.StreamError{CanonicalCode: int32(c), Message: msg, Space: "fabricsim",
		Details: &p4v1.StreamError_PacketOut{PacketOut: &p4v1.PacketOutError{}}}
	select {
	case st.out <- &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: se}}:
	default:
	}
}

// reconcileLocked realizes a new pipeline while keeping the forwarding state
// (RECONCILE_AND_COMMIT): every existing member, group and entry must be
// valid under the new P4Info, or nothing changes.
func (sw *Switch) reconcileLocked(cfg *p4v1.ForwardingPipelineConfig, schema *p4.Schema) error {
	next := newTableStore(schema, sw.faults.tableLimit)
	if sw.store != nil {
		var updates []*p4v1.Update
		add := func(es []*p4v1.Entity, err error) {
			for _, e := range es {
				updates = append(updates, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: e})
			}
		}
		add(sw.store.readMembers(&p4v1.ActionProfileMember{}))
		add(sw.store.readGroups(&p4v1.ActionProfileGroup{}))
		add(sw.store.readTable(&p4v1.TableEntry{}))
		for _, u := range updates {
			if err := next.apply(proto.Clone(u).(*p4v1.Update)); err != nil {
				return errf(codes.FailedPrecondition, "forwarding state does not fit the new pipeline: %v", err).grpc()
			}
		}
	}
	sw.config = cfg
	sw.store = next
	sw.tablesChanged()
	return nil
}

func (e *p4err) grpc() error { return status.Error(e.code, e.msg) }
