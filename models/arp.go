package models

import (
	"encoding/binary"
	"net/netip"
)

// ARP is an Ethernet/IPv4 ARP packet's fields: how a host resolves its
// next hop, and how the controller answers for the fabric.
type ARP struct {
	Op       uint16 // ARPRequest or ARPReply
	SHA, THA MAC    // sender's and target's hardware addresses
	SPA, TPA netip.Addr
}

// ARP operations.
const (
	ARPRequest = 1
	ARPReply   = 2
)

// BroadcastMAC is Ethernet's broadcast address.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ParseARP reads an Ethernet frame carrying IPv4 ARP.
func ParseARP(frame []byte) (ARP, bool) {
	if len(frame) < 42 || binary.BigEndian.Uint16(frame[12:14]) != EtherTypeARP {
		return ARP{}, false
	}
	b := frame[14:]
	if binary.BigEndian.Uint16(b[0:2]) != 1 || binary.BigEndian.Uint16(b[2:4]) != 0x0800 || b[4] != 6 || b[5] != 4 {
		return ARP{}, false
	}
	p := ARP{Op: binary.BigEndian.Uint16(b[6:8])}
	copy(p.SHA[:], b[8:14])
	p.SPA = netip.AddrFrom4([4]byte(b[14:18]))
	copy(p.THA[:], b[18:24])
	p.TPA = netip.AddrFrom4([4]byte(b[24:28]))
	return p, true
}

// Frame is p in an Ethernet frame from src to dst.
func (p ARP) Frame(dst, src MAC) []byte {
	f := make([]byte, 0, 42)
	f = append(f, dst[:]...)
	f = append(f, src[:]...)
	f = binary.BigEndian.AppendUint16(f, EtherTypeARP)
	f = binary.BigEndian.AppendUint16(f, 1)      // Ethernet
	f = binary.BigEndian.AppendUint16(f, 0x0800) // IPv4
	f = append(f, 6, 4)
	f = binary.BigEndian.AppendUint16(f, p.Op)
	spa, tpa := p.SPA.As4(), p.TPA.As4()
	f = append(f, p.SHA[:]...)
	f = append(f, spa[:]...)
	f = append(f, p.THA[:]...)
	f = append(f, tpa[:]...)
	return f
}
