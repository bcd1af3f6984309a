package pathcalc

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// RoCEv2UDPPort is the UDP destination port of every RoCEv2 packet.
const RoCEv2UDPPort = 4791

// FlowHash is the selector hash fabricsim uses, documented so results can
// be reproduced: CRC-32 (IEEE) over the IPv4 source, IPv4 destination,
// protocol (17), UDP source port and UDP destination port (4791), all
// big-endian; then XOR with the switch's seed (its device ID) and the
// MurmurHash3 32-bit finalizer. The member is the hash modulo the sum of
// weights, walking members in member-ID order.
//
// The finalizer matters: CRC is affine, so with the seed merely mixed into
// its input every switch's choice would be a fixed permutation of every
// other's, and paths would polarize whatever the seeds. With it, switches
// with different seeds choose independently, and switches given the same
// seed polarize, as on hardware.
func FlowHash(seed uint32, src, dst netip.Addr, srcPort uint16) uint32 {
	var b [4 + 4 + 1 + 2 + 2]byte
	s4, d4 := src.As4(), dst.As4()
	copy(b[0:], s4[:])
	copy(b[4:], d4[:])
	b[8] = 17
	binary.BigEndian.PutUint16(b[9:], srcPort)
	binary.BigEndian.PutUint16(b[11:], RoCEv2UDPPort)
	h := crc32.ChecksumIEEE(b[:]) ^ seed
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
