package models

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Latency probes (accelnet.p4): a RoCEv2 packet whose BTH opcode is
// ProbeOpcode, one of the manufacturer-specific opcodes no NIC accepts,
// followed by a probe header (the controller's ID for it and a hop count)
// and one ProbeHop record per switch egress it crossed, the last first.
// The controller sends one as a packet-out at a leaf with a TTL that runs
// out at the destination leaf, which punts it back; on the way it hashes
// as RDMA traffic of the same addresses and ports does.

// ProbeOpcode is the BTH opcode that marks a latency probe.
const ProbeOpcode = 0xCA

// ProbeMaxHops is the most hop records a probe carries (the pipeline's
// header stack): a switch past them forwards it without a record.
const ProbeMaxHops = 8

// RoCEv2Port is RoCEv2's UDP destination port.
const RoCEv2Port = 4791

// Sizes of a probe's parts on the wire.
const (
	probeHopBytes = 14
	probeHdrBytes = 6
	bthBytes      = 12
	ipv4Bytes     = 20
	udpBytes      = 8
	// probeFixed is a probe's length with no hop records.
	probeFixed = 14 + ipv4Bytes + udpBytes + bthBytes + probeHdrBytes
)

// ProbeHop is what one switch's egress recorded of a probe, in the
// target's units (BMv2's timestamps are microseconds and its queue depth
// packets; fabricsim's the same).
type ProbeHop struct {
	EgressPort uint32
	// QueueDepth is the egress queue's depth when the probe was queued.
	QueueDepth uint32
	// QueueUs is the time it spent in that queue.
	QueueUs uint32
	// HopUs is the time from its ingress to its egress at the switch.
	HopUs uint32
}

// Probe is a probe frame's contents, its hops in path order.
type Probe struct {
	ID       uint32
	Src, Dst netip.Addr
	SrcPort  uint16
	TTL      uint8
	Hops     []ProbeHop
}

// ErrNotLatencyProbe means a frame is not a well-formed latency probe.
var ErrNotLatencyProbe = errors.New("not a latency probe")

// ProbeFrame builds a probe with no hop records: from src to dst
// (addresses whose routes lead where it should go), sent from srcPort,
// in the DSCP of lossless RDMA (26) so that it waits in RDMA's queue,
// with the TTL that runs out where it should be punted.
func ProbeFrame(p Probe) ([]byte, error) {
	if !p.Src.Is4() || !p.Dst.Is4() {
		return nil, fmt.Errorf("%w: probe addresses must be IPv4: %s -> %s", ErrNotLatencyProbe, p.Src, p.Dst)
	}
	f := make([]byte, probeFixed)
	binary.BigEndian.PutUint16(f[12:], EtherTypeIPv4)
	ip := f[14:]
	ip[0] = 0x45
	ip[1] = 26 << 2
	binary.BigEndian.PutUint16(ip[2:], ipv4Bytes+udpBytes+bthBytes+probeHdrBytes)
	ip[8] = p.TTL
	ip[9] = 17
	src, dst := p.Src.As4(), p.Dst.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	udp := ip[ipv4Bytes:]
	binary.BigEndian.PutUint16(udp[0:], p.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], RoCEv2Port)
	binary.BigEndian.PutUint16(udp[4:], udpBytes+bthBytes+probeHdrBytes)
	bth := udp[udpBytes:]
	bth[0] = ProbeOpcode
	binary.BigEndian.PutUint16(bth[2:], 0xffff) // the default partition
	probe := bth[bthBytes:]
	binary.BigEndian.PutUint32(probe[0:], p.ID)
	ipv4Checksum(ip)
	return f, nil
}

// ipv4Checksum sets a 20-byte IPv4 header's checksum.
func ipv4Checksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < ipv4Bytes; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}

// probeHeader checks that frame is a probe and returns its IPv4 header
// and hop count.
func probeHeader(frame []byte) (ip []byte, hops int, err error) {
	if len(frame) < probeFixed || binary.BigEndian.Uint16(frame[12:14]) != EtherTypeIPv4 {
		return nil, 0, ErrNotLatencyProbe
	}
	ip = frame[14:]
	if ip[0] != 0x45 || ip[9] != 17 {
		return nil, 0, ErrNotLatencyProbe
	}
	udp := ip[ipv4Bytes:]
	if binary.BigEndian.Uint16(udp[2:]) != RoCEv2Port || udp[udpBytes] != ProbeOpcode {
		return nil, 0, ErrNotLatencyProbe
	}
	hops = int(udp[udpBytes+bthBytes+4])
	if hops > ProbeMaxHops {
		return nil, 0, fmt.Errorf("%w: %d hop records, at most %d", ErrNotLatencyProbe, hops, ProbeMaxHops)
	}
	if len(frame) < probeFixed+hops*probeHopBytes {
		return nil, 0, fmt.Errorf("%w: %d hop records in %d bytes", ErrNotLatencyProbe, hops, len(frame))
	}
	return ip, hops, nil
}

// ParseProbe reads a probe frame (as a switch punts it).
func ParseProbe(frame []byte) (Probe, error) {
	ip, n, err := probeHeader(frame)
	if err != nil {
		return Probe{}, err
	}
	udp := ip[ipv4Bytes:]
	probe := udp[udpBytes+bthBytes:]
	p := Probe{
		ID:      binary.BigEndian.Uint32(probe[0:]),
		Src:     netip.AddrFrom4([4]byte(ip[12:16])),
		Dst:     netip.AddrFrom4([4]byte(ip[16:20])),
		SrcPort: binary.BigEndian.Uint16(udp[0:]),
		TTL:     ip[8],
		Hops:    make([]ProbeHop, n),
	}
	for i := range n {
		h := probe[probeHdrBytes+i*probeHopBytes:]
		p.Hops[n-1-i] = ProbeHop{ // the wire has the last hop first
			EgressPort: uint32(binary.BigEndian.Uint16(h[0:]) & 0x1ff),
			QueueDepth: binary.BigEndian.Uint32(h[2:]),
			QueueUs:    binary.BigEndian.Uint32(h[6:]),
			HopUs:      binary.BigEndian.Uint32(h[10:]),
		}
	}
	return p, nil
}

// ProbeTTL is a probe frame's TTL (false if it is no probe).
func ProbeTTL(frame []byte) (uint8, bool) {
	ip, _, err := probeHeader(frame)
	if err != nil {
		return 0, false
	}
	return ip[8], true
}

// ProbeEgress does to a probe frame what accelnet.p4's egress does as it
// leaves a switch by a fabric or host port: the TTL goes down by one and,
// below ProbeMaxHops records, the hop's record goes in front of the
// others. It returns the new frame (frame itself is left as it was).
func ProbeEgress(frame []byte, hop ProbeHop) ([]byte, error) {
	ip, n, err := probeHeader(frame)
	if err != nil {
		return nil, err
	}
	at := probeFixed // where the records start
	out := make([]byte, 0, len(frame)+probeHopBytes)
	out = append(out, frame[:at]...)
	if n < ProbeMaxHops {
		out = binary.BigEndian.AppendUint16(out, uint16(hop.EgressPort&0x1ff))
		out = binary.BigEndian.AppendUint32(out, hop.QueueDepth)
		out = binary.BigEndian.AppendUint32(out, hop.QueueUs)
		out = binary.BigEndian.AppendUint32(out, hop.HopUs)
	}
	out = append(out, frame[at:]...)
	ip = out[14:]
	ip[8] = max(ip[8], 1) - 1
	if n < ProbeMaxHops {
		udp := ip[ipv4Bytes:]
		binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+probeHopBytes)
		binary.BigEndian.PutUint16(udp[4:], binary.BigEndian.Uint16(udp[4:])+probeHopBytes)
		udp[udpBytes+bthBytes+4]++
	}
	ipv4Checksum(ip)
	return out, nil
}
