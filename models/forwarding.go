package models

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Member is an action-profile member of the route selector: "send out of Port".
type Member struct {
	ID   uint32 `json:"id"`
	Port uint32 `json:"port"`
}

// GroupMember is one weighted member of a selector group (WCMP weight; 1 for ECMP).
type GroupMember struct {
	MemberID uint32 `json:"member_id"`
	Weight   int32  `json:"weight"`
}

// Group is an action-selector group: the hash picks one member, in
// proportion to the weights.
type Group struct {
	ID      uint32        `json:"id"`
	Members []GroupMember `json:"members"`
}

// Route is an IPv4 LPM entry pointing at a selector member or a group
// (exactly one of MemberID, GroupID is non-zero).
type Route struct {
	Prefix   netip.Prefix `json:"prefix"`
	MemberID uint32       `json:"member_id,omitempty"`
	GroupID  uint32       `json:"group_id,omitempty"`
}

// FlowKey identifies a RoCEv2 flow for pinning: IP pair plus UDP source
// port, which carries RoCEv2's entropy (the destination port is always 4791).
type FlowKey struct {
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	SrcPort uint16     `json:"src_port"`
}

func (k FlowKey) String() string { return fmt.Sprintf("%s:%d->%s", k.Src, k.SrcPort, k.Dst) }

// FlowPin is an exact-match entry that pins one flow to an egress port,
// overriding the LPM route.
type FlowPin struct {
	Key  FlowKey `json:"key"`
	Port uint32  `json:"port"`
}

// MAC is an Ethernet address; its text form is "02:00:00:00:00:01".
type MAC [6]byte

func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// MarshalText writes the colon form.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads the colon form.
func (m *MAC) UnmarshalText(b []byte) error {
	hw, err := net.ParseMAC(string(b))
	if err != nil || len(hw) != 6 {
		return invalidf("%q is not a MAC address like 02:00:00:00:00:01", b)
	}
	copy(m[:], hw)
	return nil
}

// IsZero reports whether m is 00:00:00:00:00:00.
func (m MAC) IsZero() bool { return m == MAC{} }

// PortMAC is a routed port's Ethernet rewrite: a packet leaving through
// Port gets Src (the port's own MAC) as its source and Dst (the MAC of
// what the port is cabled to: the next switch's port, or the host's
// NIC) as its destination.
type PortMAC struct {
	Port uint32 `json:"port"`
	Src  MAC    `json:"src"`
	Dst  MAC    `json:"dst"`
}

// ForwardingState is what one switch has (read back) or should have
// (computed): the entries of accelnet.p4's tables, in P4-neutral terms.
// Canonical form is sorted by key; Canonical() produces it.
type ForwardingState struct {
	Members  []Member  `json:"members"`
	Groups   []Group   `json:"groups"`
	Routes   []Route   `json:"routes"`
	FlowPins []FlowPin `json:"flow_pins"`
	// PortMACs are the routed ports' MAC rewrites.
	PortMACs []PortMAC `json:"port_macs,omitempty"`
	// HashSeed is the switch's ECMP hash seed (the hash_seed table's
	// default entry); nil where it is not known or not managed.
	HashSeed *uint32 `json:"hash_seed,omitempty"`
	// Punts are the EtherTypes the switch sends to its controller (the
	// punt table): link discovery's probes, and on a switch with hosts
	// their ARP.
	Punts []uint16 `json:"punts,omitempty"`
}

// Equal says whether s and o hold the same entries in the same order (of
// two canonical states: whether they are the same state); a table nil in
// one and empty in the other counts as the same. It is what a rollout
// compares thousands of switch states of a thousand routes each with,
// without reflection, and at once for states that share their tables.
func (s ForwardingState) Equal(o ForwardingState) bool {
	groupEqual := func(a, b Group) bool { return a.ID == b.ID && same(a.Members, b.Members) }
	return same(s.Members, o.Members) && sameFunc(s.Groups, o.Groups, groupEqual) && same(s.Routes, o.Routes) &&
		same(s.FlowPins, o.FlowPins) && same(s.PortMACs, o.PortMACs) && same(s.Punts, o.Punts) &&
		(s.HashSeed == nil) == (o.HashSeed == nil) && (s.HashSeed == nil || *s.HashSeed == *o.HashSeed)
}

// same is slices.Equal, at once for slices that share their elements.
func same[T comparable](a, b []T) bool { return shared(a, b) || slices.Equal(a, b) }

// sameFunc is slices.EqualFunc, at once for slices that share their
// elements.
func sameFunc[T any](a, b []T, eq func(T, T) bool) bool {
	return shared(a, b) || slices.EqualFunc(a, b, eq)
}

// shared says whether a and b are the same elements (or both empty).
func shared[T any](a, b []T) bool { return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) }

// EtherTypeLLDP is the EtherType of LLDP frames, which link discovery's
// probes are.
const EtherTypeLLDP = 0x88cc

// EtherTypeARP is the EtherType of ARP frames: a leaf punts its hosts'
// ARP to the controller, which answers for the fabric and learns the
// hosts' MACs (see controller/hosts.go).
const EtherTypeARP = 0x0806

// EtherTypeIPv4 is the EtherType of IPv4 packets (a latency probe is one).
const EtherTypeIPv4 = 0x0800

// Len is the number of entities in the state.
func (s ForwardingState) Len() int {
	n := len(s.Members) + len(s.Groups) + len(s.Routes) + len(s.FlowPins) + len(s.PortMACs) + len(s.Punts)
	if s.HashSeed != nil {
		n++
	}
	return n
}

// ComparePrefix is the order of a canonical state's routes: by address,
// then length.
func ComparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// CompareRoutes orders routes as a canonical state does (ComparePrefix).
func CompareRoutes(a, b Route) int { return ComparePrefix(a.Prefix, b.Prefix) }

// CompareGroups orders groups as a canonical state does (by ID).
func CompareGroups(a, b Group) int { return cmp.Compare(a.ID, b.ID) }

// The rest of a canonical state's orders: each list by its key (Compute
// walks two lists in these orders side by side).
func compareMembers(a, b Member) int           { return cmp.Compare(a.ID, b.ID) }
func compareGroupMembers(a, b GroupMember) int { return cmp.Compare(a.MemberID, b.MemberID) }
func comparePortMACs(a, b PortMAC) int         { return cmp.Compare(a.Port, b.Port) }
func compareFlowPins(a, b FlowPin) int         { return compareFlowKey(a.Key, b.Key) }

// SearchRoute finds the route toward p in routes ordered as a canonical
// state orders them: its index, or where it would go, and whether it is
// there.
func SearchRoute(routes []Route, p netip.Prefix) (int, bool) {
	return slices.BinarySearchFunc(routes, p, func(r Route, p netip.Prefix) int { return ComparePrefix(r.Prefix, p) })
}

func compareFlowKey(a, b FlowKey) int {
	if c := a.Src.Compare(b.Src); c != 0 {
		return c
	}
	if c := a.Dst.Compare(b.Dst); c != 0 {
		return c
	}
	return cmp.Compare(a.SrcPort, b.SrcPort)
}

// Canonical returns a copy sorted by key, with group members sorted by ID,
// so that equal states compare equal.
func (s ForwardingState) Canonical() ForwardingState {
	out := ForwardingState{
		Members:  slices.Clone(s.Members),
		Routes:   slices.Clone(s.Routes),
		FlowPins: slices.Clone(s.FlowPins),
		Groups:   make([]Group, len(s.Groups)),
		PortMACs: slices.Clone(s.PortMACs),
		HashSeed: s.HashSeed,
		Punts:    slices.Clone(s.Punts),
	}
	slices.Sort(out.Punts)
	slices.SortFunc(out.PortMACs, comparePortMACs)
	for i, g := range s.Groups {
		g.Members = slices.Clone(g.Members)
		slices.SortFunc(g.Members, compareGroupMembers)
		out.Groups[i] = g
	}
	slices.SortFunc(out.Members, compareMembers)
	slices.SortFunc(out.Groups, CompareGroups)
	slices.SortFunc(out.Routes, CompareRoutes)
	slices.SortFunc(out.FlowPins, compareFlowPins)
	return out
}

// IsCanonical says whether s is as Canonical would make it: every list in
// its order (a plan's states are).
func (s ForwardingState) IsCanonical() bool {
	if !slices.IsSorted(s.Punts) || !slices.IsSortedFunc(s.PortMACs, comparePortMACs) ||
		!slices.IsSortedFunc(s.Members, compareMembers) || !slices.IsSortedFunc(s.Groups, CompareGroups) ||
		!slices.IsSortedFunc(s.Routes, CompareRoutes) || !slices.IsSortedFunc(s.FlowPins, compareFlowPins) {
		return false
	}
	for _, g := range s.Groups {
		if !slices.IsSortedFunc(g.Members, compareGroupMembers) {
			return false
		}
	}
	return true
}

// Validate checks the entries and that every reference resolves within the
// state: routes to existing members or groups, groups to existing members.
func (s ForwardingState) Validate() error {
	members := make(map[uint32]bool, len(s.Members))
	for _, m := range s.Members {
		if m.ID == 0 {
			return invalidf("member id must be non-zero")
		}
		if members[m.ID] {
			return invalidf("member %d defined twice", m.ID)
		}
		if m.Port == 0 || m.Port > MaxPort {
			return invalidf("member %d: port %d out of range", m.ID, m.Port)
		}
		members[m.ID] = true
	}
	groups := make(map[uint32]bool, len(s.Groups))
	for _, g := range s.Groups {
		if g.ID == 0 {
			return invalidf("group id must be non-zero")
		}
		if groups[g.ID] {
			return invalidf("group %d defined twice", g.ID)
		}
		if len(g.Members) == 0 {
			return invalidf("group %d has no members", g.ID)
		}
		seen := make(map[uint32]bool, len(g.Members))
		for _, gm := range g.Members {
			if !members[gm.MemberID] {
				return invalidf("group %d: unknown member %d", g.ID, gm.MemberID)
			}
			if seen[gm.MemberID] {
				return invalidf("group %d: member %d listed twice", g.ID, gm.MemberID)
			}
			if gm.Weight < 1 {
				return invalidf("group %d: member %d weight %d < 1", g.ID, gm.MemberID, gm.Weight)
			}
			seen[gm.MemberID] = true
		}
		groups[g.ID] = true
	}
	prefixes := make(map[netip.Prefix]bool, len(s.Routes))
	for _, r := range s.Routes {
		if !r.Prefix.IsValid() || !r.Prefix.Addr().Is4() || r.Prefix != r.Prefix.Masked() {
			return invalidf("route %s: want a masked IPv4 prefix", r.Prefix)
		}
		if prefixes[r.Prefix] {
			return invalidf("route %s defined twice", r.Prefix)
		}
		prefixes[r.Prefix] = true
		switch {
		case (r.MemberID == 0) == (r.GroupID == 0):
			return invalidf("route %s: want exactly one of member_id, group_id", r.Prefix)
		case r.MemberID != 0 && !members[r.MemberID]:
			return invalidf("route %s: unknown member %d", r.Prefix, r.MemberID)
		case r.GroupID != 0 && !groups[r.GroupID]:
			return invalidf("route %s: unknown group %d", r.Prefix, r.GroupID)
		}
	}
	macs := make(map[uint32]bool, len(s.PortMACs))
	for _, m := range s.PortMACs {
		if m.Port == 0 || m.Port > MaxPort {
			return invalidf("port MAC: port %d out of range", m.Port)
		}
		if macs[m.Port] {
			return invalidf("port %d's MACs defined twice", m.Port)
		}
		macs[m.Port] = true
	}
	pins := make(map[FlowKey]bool, len(s.FlowPins))
	for _, p := range s.FlowPins {
		if !p.Key.Src.Is4() || !p.Key.Dst.Is4() {
			return invalidf("flow pin %s: want IPv4 addresses", p.Key)
		}
		if pins[p.Key] {
			return invalidf("flow pin %s defined twice", p.Key)
		}
		pins[p.Key] = true
		if p.Port == 0 || p.Port > MaxPort {
			return invalidf("flow pin %s: port %d out of range", p.Key, p.Port)
		}
	}
	return nil
}

// Diff is the change that turns an actual ForwardingState into a desired
// one. Apply it in dependency order: members and groups are written before
// the routes that use them and deleted after (see Phases).
type Diff struct {
	Insert ForwardingState `json:"insert"`
	Modify ForwardingState `json:"modify"`
	Delete ForwardingState `json:"delete"`
}

// Len is the number of writes the diff needs.
func (d Diff) Len() int { return d.Insert.Len() + d.Modify.Len() + d.Delete.Len() }

// Empty reports whether the diff needs no writes.
func (d Diff) Empty() bool { return d.Len() == 0 }

// Compute returns the minimal diff from actual to desired: entries only in
// desired are inserted, entries in both that differ are modified, entries
// only in actual are deleted. Entries are keyed by member ID, group ID,
// route prefix and flow key.
func Compute(desired, actual ForwardingState) Diff {
	var d Diff
	d.Insert.Members, d.Modify.Members, d.Delete.Members = diffBy(desired.Members, actual.Members,
		func(m Member) uint32 { return m.ID }, compareMembers, func(a, b Member) bool { return a == b })
	d.Insert.Groups, d.Modify.Groups, d.Delete.Groups = diffBy(desired.Groups, actual.Groups,
		func(g Group) uint32 { return g.ID }, CompareGroups, sameGroup)
	d.Insert.Routes, d.Modify.Routes, d.Delete.Routes = diffBy(desired.Routes, actual.Routes,
		func(r Route) netip.Prefix { return r.Prefix }, CompareRoutes, func(a, b Route) bool { return a == b })
	d.Insert.FlowPins, d.Modify.FlowPins, d.Delete.FlowPins = diffBy(desired.FlowPins, actual.FlowPins,
		func(p FlowPin) FlowKey { return p.Key }, compareFlowPins, func(a, b FlowPin) bool { return a == b })
	d.Insert.PortMACs, d.Modify.PortMACs, d.Delete.PortMACs = diffBy(desired.PortMACs, actual.PortMACs,
		func(m PortMAC) uint32 { return m.Port }, comparePortMACs, func(a, b PortMAC) bool { return a == b })
	d.Insert.Punts, _, d.Delete.Punts = diffBy(desired.Punts, actual.Punts,
		func(t uint16) uint16 { return t }, cmp.Compare[uint16], func(a, b uint16) bool { return a == b })
	// The seed is a default entry, always there: it is only ever modified.
	if desired.HashSeed != nil && (actual.HashSeed == nil || *actual.HashSeed != *desired.HashSeed) {
		seed := *desired.HashSeed
		d.Modify.HashSeed = &seed
	}
	return d
}

// sameGroup says whether two groups have the same ID and members with
// the same weights, in whatever order.
func sameGroup(a, b Group) bool {
	if a.ID != b.ID || len(a.Members) != len(b.Members) {
		return false
	}
	if strictlySorted(a.Members, compareGroupMembers) && strictlySorted(b.Members, compareGroupMembers) { // canonical: side by side
		return slices.Equal(a.Members, b.Members)
	}
	weights := make(map[uint32]int32, len(a.Members))
	for _, m := range a.Members {
		weights[m.MemberID] = m.Weight
	}
	for _, m := range b.Members {
		if w, ok := weights[m.MemberID]; !ok || w != m.Weight {
			return false
		}
	}
	return true
}

// diffBy splits desired against actual by key: entries to insert and to
// modify (in desired's order) and to delete (in actual's). order compares
// keys as Canonical orders them; when both lists are in that order, one
// entry per key, they are walked side by side — a reconcile diffs every
// switch's whole state, at k=48 about 1,200 routes, and two maps per
// table and reconcile would be most of its cost — and otherwise looked
// up through a map.
func diffBy[T any, K comparable](desired, actual []T, key func(T) K, order func(a, b T) int, equal func(a, b T) bool) (ins, mod, del []T) {
	if strictlySorted(desired, order) && strictlySorted(actual, order) {
		WalkSorted(desired, actual, order, func(d, a T, inDesired, inActual bool) {
			switch {
			case !inActual:
				ins = append(ins, d)
			case !inDesired:
				del = append(del, a)
			case !equal(d, a):
				mod = append(mod, d)
			}
		})
		return ins, mod, del
	}
	have := make(map[K]T, len(actual))
	for _, a := range actual {
		have[key(a)] = a
	}
	want := make(map[K]bool, len(desired))
	for _, d := range desired {
		k := key(d)
		want[k] = true
		a, ok := have[k]
		switch {
		case !ok:
			ins = append(ins, d)
		case !equal(d, a):
			mod = append(mod, d)
		}
	}
	for _, a := range actual {
		if !want[key(a)] {
			del = append(del, a)
		}
	}
	return ins, mod, del
}

// WalkSorted calls visit with two lists, both in order's order, side by
// side: for each key the entry of each list that has it (inA, inB say
// which do; the other is the zero value), keys in order.
func WalkSorted[T any](a, b []T, order func(x, y T) int, visit func(x, y T, inA, inB bool)) {
	var zero T
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case j == len(b):
			c = -1
		case i == len(a):
			c = 1
		default:
			c = order(a[i], b[j])
		}
		switch {
		case c < 0:
			visit(a[i], zero, true, false)
			i++
		case c > 0:
			visit(zero, b[j], false, true)
			j++
		default:
			visit(a[i], b[j], true, true)
			i, j = i+1, j+1
		}
	}
}

// strictlySorted says whether xs is in order's order with no two equal.
func strictlySorted[T any](xs []T, order func(a, b T) int) bool {
	for i := 1; i < len(xs); i++ {
		if order(xs[i-1], xs[i]) >= 0 {
			return false
		}
	}
	return true
}

// Phase is one step of applying a Diff: its updates have no dependencies on
// each other and may be sent as one batch; each phase depends on the one
// before it (P4Runtime does not order the updates of one WriteRequest).
type Phase struct {
	Name   string
	Insert ForwardingState
	Modify ForwardingState
	Delete ForwardingState
}

// Len is the number of writes in the phase.
func (p Phase) Len() int { return p.Insert.Len() + p.Modify.Len() + p.Delete.Len() }

// Phases splits the diff into dependency-ordered batches: flow pins that
// go (nothing references them, and a flow without its pin follows the
// routes, so removing them first frees table room for the new ones
// without blackholing anything), members, groups, table entries (which
// may reference them), then group deletions, then member deletions.
// Empty phases are left out.
//
// Routes may nest (an aggregate and more-specific routes inside it), and
// P4Runtime does not order the updates of one request, so route writes
// are layered: new routes go in before any route that contains them
// (innermost first), modified routes after every new one, and removed
// routes after those, each before any route inside it (outermost first).
// While a switch goes from one table to the other, every address then
// matches either its old route or its new one, never a third (see
// pathcalc.Aggregate). Routes that do not nest share one batch, as
// before: a cold start or a change of per-leaf routes is not split.
func (d Diff) Phases() []Phase {
	ins := routeLayers(d.Insert.Routes, false)
	dels := routeLayers(d.Delete.Routes, true)
	entries := Phase{Name: "entries",
		Insert: ForwardingState{FlowPins: d.Insert.FlowPins, PortMACs: d.Insert.PortMACs, Punts: d.Insert.Punts},
		Modify: ForwardingState{Routes: d.Modify.Routes, FlowPins: d.Modify.FlowPins, PortMACs: d.Modify.PortMACs, HashSeed: d.Modify.HashSeed},
		Delete: ForwardingState{PortMACs: d.Delete.PortMACs, Punts: d.Delete.Punts}}
	// The last layer of inserts may share the entries' batch when no
	// route is modified there; the first layer of deletes, when no route
	// is written there at all.
	if len(ins) > 0 && len(d.Modify.Routes) == 0 {
		entries.Insert.Routes, ins = ins[len(ins)-1], ins[:len(ins)-1]
	}
	if len(dels) > 0 && len(entries.Insert.Routes) == 0 && len(ins) == 0 && len(d.Modify.Routes) == 0 {
		entries.Delete.Routes, dels = dels[0], dels[1:]
	}
	all := []Phase{
		{Name: "pin deletes", Delete: ForwardingState{FlowPins: d.Delete.FlowPins}},
		{Name: "members", Insert: ForwardingState{Members: d.Insert.Members}, Modify: ForwardingState{Members: d.Modify.Members}},
		{Name: "groups", Insert: ForwardingState{Groups: d.Insert.Groups}, Modify: ForwardingState{Groups: d.Modify.Groups}},
	}
	for _, l := range ins {
		all = append(all, Phase{Name: "nested route inserts", Insert: ForwardingState{Routes: l}})
	}
	all = append(all, entries)
	for _, l := range dels {
		all = append(all, Phase{Name: "nested route deletes", Delete: ForwardingState{Routes: l}})
	}
	all = append(all,
		Phase{Name: "group deletes", Delete: ForwardingState{Groups: d.Delete.Groups}},
		Phase{Name: "member deletes", Delete: ForwardingState{Members: d.Delete.Members}})
	out := all[:0]
	for _, p := range all {
		if p.Len() > 0 {
			out = append(out, p)
		}
	}
	return out
}

// routeLayers splits routes into batches none of which holds two routes
// of which one contains the other: innermost first (a route's layer is
// one past the highest layer of the routes inside it), or outermost
// first (one past the number of routes containing it). Routes that do
// not nest come back as one layer, in their order.
func routeLayers(routes []Route, outermostFirst bool) [][]Route {
	if len(routes) == 0 {
		return nil
	}
	order := make([]int, len(routes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return ComparePrefix(routes[a].Prefix, routes[b].Prefix) })
	layer := make([]int, len(routes))
	// Sorted by address then length, the routes inside a prefix follow it:
	// a stack holds the prefixes containing the current one.
	var stack []int
	pop := func() {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !outermostFirst && len(stack) > 0 {
			parent := stack[len(stack)-1]
			layer[parent] = max(layer[parent], layer[top]+1)
		}
	}
	nested := false
	for _, i := range order {
		p := routes[i].Prefix
		for len(stack) > 0 && !routes[stack[len(stack)-1]].Prefix.Overlaps(p) {
			pop()
		}
		if outermostFirst {
			layer[i] = len(stack)
		}
		nested = nested || len(stack) > 0
		stack = append(stack, i)
	}
	for len(stack) > 0 {
		pop()
	}
	if !nested {
		return [][]Route{routes}
	}
	var out [][]Route
	for _, i := range order {
		for len(out) <= layer[i] {
			out = append(out, nil)
		}
		out[layer[i]] = append(out[layer[i]], routes[i])
	}
	return out
}

// Plan is pathcalc's output: the forwarding state every switch should have.
type Plan struct {
	Switches map[SwitchID]ForwardingState `json:"switches"`
}
