package pathcalc

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
)

// Aggregate returns routes with every pair of sibling prefixes that share
// an action (the same member or group) replaced by their parent prefix,
// repeatedly, so a pod whose leaves' /24s fill an aligned block and go
// the same way takes one entry. It is exact: every address is forwarded
// as by routes, unrouted addresses stay unrouted (a parent is made only
// from two siblings that cover it whole), and more-specific routes inside
// a merged prefix still win by longest-prefix match. A parent that is a
// route of its own already is left alone. The result is sorted as
// ForwardingState.Canonical sorts routes; routes is not modified.
//
// Why it is safe to write while traffic flows: models.Diff.Phases orders
// route inserts longest prefix first and deletes shortest first, so while
// one switch goes from one aggregated table to another every address is
// forwarded either as before or as after, never by a third entry.
func Aggregate(routes []models.Route) []models.Route {
	type action struct{ member, group uint32 }
	// A prefix is keyed by its address and length (addr<<8 | bits), which
	// also sorts as ForwardingState.Canonical sorts routes.
	key := func(addr uint32, bits int) uint64 { return uint64(addr)<<8 | uint64(bits) }
	by := make(map[uint64]action, len(routes))
	var byLen [33][]uint32
	for _, r := range routes {
		if !r.Prefix.Addr().Is4() {
			return models.ForwardingState{Routes: routes}.Canonical().Routes
		}
		a4 := r.Prefix.Masked().Addr().As4()
		addr := binary.BigEndian.Uint32(a4[:])
		by[key(addr, r.Prefix.Bits())] = action{r.MemberID, r.GroupID}
		byLen[r.Prefix.Bits()] = append(byLen[r.Prefix.Bits()], addr)
	}
	for bits := 32; bits > 0; bits-- {
		bit := uint32(1) << (32 - bits) // the prefix's last bit
		for _, addr := range byLen[bits] {
			a, ok := by[key(addr, bits)]
			if !ok {
				continue // merged already, as the sibling of one before it
			}
			sib, parent := addr^bit, addr&^bit
			if b, ok := by[key(sib, bits)]; !ok || b != a {
				continue
			}
			if _, taken := by[key(parent, bits-1)]; taken {
				continue
			}
			delete(by, key(addr, bits))
			delete(by, key(sib, bits))
			by[key(parent, bits-1)] = a
			byLen[bits-1] = append(byLen[bits-1], parent)
		}
	}
	keys := make([]uint64, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]models.Route, len(keys))
	for i, k := range keys {
		var a4 [4]byte
		binary.BigEndian.PutUint32(a4[:], uint32(k>>8))
		a := by[k]
		out[i] = models.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4(a4), int(k&0xff)), MemberID: a.member, GroupID: a.group}
	}
	return out
}
