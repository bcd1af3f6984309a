package fabricsim

import (
	"cmp"
	"net/netip"
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/southbound/p4"
)

type lpmRoute struct {
	prefix netip.Prefix
	// slots are the egress ports the selector picks among, in the order
	// BMv2 walks a group's member handles (a member of weight w fills w
	// slots); one for a route to a plain member.
	slots []uint32
}

// fib is a switch's tables decoded for lookups.
type fib struct {
	// st's flow-pin table is looked up as it is now, under its own lock,
	// not copied: a copy per recompile cost as much as writing the pins.
	// (A store replaced, at a restart or a new pipeline, marks the switch
	// for a recompile, which takes the new one.)
	st     *tableStore
	routes []lpmRoute // longest prefix first
	seed   uint32
	// byPrefix indexes routes for longest-prefix match: one map probe per
	// prefix length in use, longest first.
	byPrefix map[netip.Prefix]int
	lengths  []int
}

// index builds byPrefix and lengths from routes.
func (f *fib) index() {
	f.byPrefix = make(map[netip.Prefix]int, len(f.routes))
	f.lengths = f.lengths[:0]
	for i, r := range f.routes {
		f.byPrefix[r.prefix] = i
		if !slices.Contains(f.lengths, r.prefix.Bits()) {
			f.lengths = append(f.lengths, r.prefix.Bits())
		}
	}
	slices.SortFunc(f.lengths, func(a, b int) int { return cmp.Compare(b, a) })
}

func paramValue(a *p4v1.Action, id uint32) uint64 {
	for _, p := range a.GetParams() {
		if p.GetParamId() == id {
			return p4.Uint(p.GetValue())
		}
	}
	return 0
}

// compileFIB decodes the switch's installed entries. Callers hold sw.mu.
func (sw *Switch) compileFIBLocked() fib {
	st := sw.store
	f := fib{st: st}
	if st == nil {
		return f
	}
	f.seed = st.hashSeed // the hash_seed table's default entry
	s := st.schema
	portParamSet, _ := s.Param(p4.ActionSetEgress, p4.ParamPort)
	profID := s.ProfileID(p4.ProfileECMP)
	memberPort := map[uint32]uint32{}
	for id, m := range st.members[profID] {
		if m.GetAction().GetActionId() == s.ActionID(p4.ActionSetEgress) {
			memberPort[id] = uint32(paramValue(m.GetAction(), portParamSet.GetId()))
		}
	}
	dstID := s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst)
	var sel *selector
	var owner map[uint32]uint32 // the selector's handles' members, once needed
	for _, e := range st.entries[s.TableID(p4.TableIPv4LPM)] {
		var r lpmRoute
		for _, m := range e.GetMatch() {
			if m.GetFieldId() == dstID {
				r.prefix = netip.PrefixFrom(p4.Addr(m.GetLpm().GetValue()), int(m.GetLpm().GetPrefixLen()))
			}
		}
		switch {
		case e.GetAction().GetActionProfileMemberId() != 0:
			if port, ok := memberPort[e.GetAction().GetActionProfileMemberId()]; ok {
				r.slots = []uint32{port}
			}
		case e.GetAction().GetActionProfileGroupId() != 0:
			if owner == nil {
				sel = st.selectorOf(profID)
				owner = sel.owners()
			}
			for _, id := range sel.orderBy(owner, e.GetAction().GetActionProfileGroupId()) {
				// A member whose action is drop drops the flows it gets.
				r.slots = append(r.slots, memberPort[id])
			}
		}
		f.routes = append(f.routes, r) // a route with no usable member drops, like a member whose action is drop
	}
	slices.SortFunc(f.routes, func(a, b lpmRoute) int { return cmp.Compare(b.prefix.Bits(), a.prefix.Bits()) })
	f.index()
	return f
}

// lookup returns the egress port for a flow, or 0 when the tables drop it,
// and whether a flow-pin entry decided.
func (f fib) lookup(spec FlowSpec) (port uint32, pinned bool) {
	if f.st != nil {
		if port, ok := f.st.pin(spec.Key()); ok {
			return port, true
		}
	}
	if f.byPrefix == nil {
		f.index()
	}
	for _, bits := range f.lengths {
		i, ok := f.byPrefix[netip.PrefixFrom(spec.Dst, bits).Masked()]
		if !ok {
			continue
		}
		r := f.routes[i]
		if len(r.slots) == 0 {
			return 0, false
		}
		// As accelnet.p4 on BMv2: FlowHash with the switch's seed, modulo
		// the group's handles, in handle order.
		return r.slots[pathcalc.FlowHash(f.seed, spec.Src, spec.Dst, spec.SrcPort)%uint32(len(r.slots))], false
	}
	return 0, false
}

// flowKey decodes a flow_pin entry's match into the flow it pins.
func flowKey(s *p4.Schema, e *p4v1.TableEntry) models.FlowKey {
	var k models.FlowKey
	for _, m := range e.GetMatch() {
		switch m.GetFieldId() {
		case s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Src):
			k.Src = p4.Addr(m.GetExact().GetValue())
		case s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Dst):
			k.Dst = p4.Addr(m.GetExact().GetValue())
		case s.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort):
			k.SrcPort = uint16(p4.Uint(m.GetExact().GetValue()))
		}
	}
	return k
}
