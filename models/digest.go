package models

import (
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"net/netip"
)

// Digest fingerprints a switch's entries in any order: two states with
// the same entries (as sets) have the same digest, whatever their lists'
// order. A term records one per switch it confirmed, and the next term
// compares the state it computes with it to know whether the switch can
// be taken as the previous term left it (see controller/handover.go).
// It is not a MAC: it guards against mistakes, not against someone who
// can write the switch (who could do more harm than that).
//
// Each entry is hashed (FNV-1a, 64 bits, with a tag for its table) and
// the hashes are summed twice, once as they are and once mixed: 128 bits,
// stable across processes and versions as long as the encoding below is.
type Digest struct {
	a, b uint64
}

// String is the digest in hex, 32 characters.
func (d Digest) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], d.a)
	binary.BigEndian.PutUint64(b[8:], d.b)
	return hex.EncodeToString(b[:])
}

// Entry tags: which table an encoded entry is of.
const (
	digestMember byte = iota + 1
	digestGroup
	digestRoute
	digestPin
	digestPortMAC
	digestPunt
	digestSeed
)

// entryDigest is one entry's part of a digest.
func entryDigest(entry []byte) Digest {
	h := fnv.New64a()
	_, _ = h.Write(entry)
	x := h.Sum64()
	d := Digest{a: x}
	// splitmix64's finalizer: a second, independent-looking sum.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	d.b = x
	return d
}

func (d *Digest) add(entry []byte) { *d = d.Plus(entryDigest(entry)) }

// Plus is the digest of d's entries and o's together.
func (d Digest) Plus(o Digest) Digest { return Digest{a: d.a + o.a, b: d.b + o.b} }

// AddPin adds one flow pin.
func (d *Digest) AddPin(p FlowPin) { *d = d.Plus(pinDigest(p)) }

// RemovePin takes away a flow pin added before: a switch's digest follows
// its pins as they change, without going over the others.
func (d *Digest) RemovePin(p FlowPin) {
	x := pinDigest(p)
	d.a -= x.a
	d.b -= x.b
}

func pinDigest(p FlowPin) Digest {
	var buf [64]byte
	b := append(buf[:0], digestPin)
	b = appendAddr(b, p.Key.Src)
	b = appendAddr(b, p.Key.Dst)
	b = binary.BigEndian.AppendUint16(b, p.Key.SrcPort)
	b = binary.BigEndian.AppendUint32(b, p.Port)
	return entryDigest(b)
}

// AddState adds every entry of s, flow pins included.
func (d *Digest) AddState(s ForwardingState) {
	var buf [64]byte
	for _, m := range s.Members {
		b := append(buf[:0], digestMember)
		b = binary.BigEndian.AppendUint32(b, m.ID)
		b = binary.BigEndian.AppendUint32(b, m.Port)
		d.add(b)
	}
	for _, g := range s.Groups {
		// A group is one entry: its members (as a set) with their weights.
		var members Digest
		for _, m := range g.Members {
			b := binary.BigEndian.AppendUint32(buf[:0], m.MemberID)
			b = binary.BigEndian.AppendUint32(b, uint32(m.Weight))
			members.add(b)
		}
		b := append(buf[:0], digestGroup)
		b = binary.BigEndian.AppendUint32(b, g.ID)
		b = binary.BigEndian.AppendUint32(b, uint32(len(g.Members)))
		b = binary.BigEndian.AppendUint64(b, members.a)
		b = binary.BigEndian.AppendUint64(b, members.b)
		d.add(b)
	}
	for _, r := range s.Routes {
		b := append(buf[:0], digestRoute)
		b = appendAddr(b, r.Prefix.Addr())
		b = append(b, byte(r.Prefix.Bits()))
		b = binary.BigEndian.AppendUint32(b, r.MemberID)
		b = binary.BigEndian.AppendUint32(b, r.GroupID)
		d.add(b)
	}
	for _, p := range s.FlowPins {
		d.AddPin(p)
	}
	for _, m := range s.PortMACs {
		b := append(buf[:0], digestPortMAC)
		b = binary.BigEndian.AppendUint32(b, m.Port)
		b = append(b, m.Src[:]...)
		b = append(b, m.Dst[:]...)
		d.add(b)
	}
	for _, t := range s.Punts {
		d.add(binary.BigEndian.AppendUint16(append(buf[:0], digestPunt), t))
	}
	if s.HashSeed != nil {
		d.add(binary.BigEndian.AppendUint32(append(buf[:0], digestSeed), *s.HashSeed))
	}
}

// StateDigest is the digest of s's entries.
func StateDigest(s ForwardingState) Digest {
	var d Digest
	d.AddState(s)
	return d
}

// appendAddr appends an address as 16 bytes and its zone-free family
// (an IPv4 address and its IPv4-mapped IPv6 form differ).
func appendAddr(b []byte, a netip.Addr) []byte {
	v := a.As16()
	b = append(b, v[:]...)
	if a.Is4() {
		return append(b, 4)
	}
	return append(b, 6)
}
