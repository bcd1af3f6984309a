package pathcalc

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Prune is the first, immediate step of rerouting around failed links:
// plan with every next hop taken out that crosses a link in down or leads
// to a switch that, by plan's own routes, can no longer deliver to the
// destination. What remains is a subset of plan's next hops: plan routes
// without loops, so the pruned plan does too, whatever mix of pruned and
// unpruned switches the fabric goes through while it is written. A route
// left with no next hop keeps its old ones (it loses its traffic either
// way, until the new plan reaches it). Member weights are kept; a pruned
// group gets an ID no group of that switch had.
//
// The work is proportional to what the failure touches: it starts from
// the routes over the failed links and walks back only from switches left
// with no next hop; other switches keep their state as is.
func Prune(snap *topology.Snapshot, plan models.Plan, down map[models.LinkID]bool) models.Plan {
	out := models.Plan{Switches: maps.Clone(plan.Switches)}
	if len(down) == 0 {
		return out
	}
	p := &pruner{snap: snap, plan: plan, down: down, sorted: map[models.SwitchID]bool{}, gone: map[routeAt][]uint32{}, bad: map[routeAt]bool{}}
	p.seed()
	p.spread()
	// Rewrite the switches touched.
	bySwitch := map[models.SwitchID][]netip.Prefix{}
	for a := range p.gone {
		if !p.bad[a] { // a route with nothing left keeps its old next hops
			bySwitch[a.sw] = append(bySwitch[a.sw], a.p)
		}
	}
	for sw, prefixes := range bySwitch {
		out.Switches[sw] = p.rewrite(sw, prefixes)
	}
	return out
}

// routeAt is a switch's route toward a prefix.
type routeAt struct {
	sw models.SwitchID
	p  netip.Prefix
}

// pruner is one Prune: the next hops to take out of each route (gone: a
// port or two, looked up once per route, then scanned), the routes left
// with none (bad), and the routes whose next hops to look at (queue).
type pruner struct {
	snap  *topology.Snapshot
	plan  models.Plan
	down  map[models.LinkID]bool
	gone  map[routeAt][]uint32
	bad   map[routeAt]bool
	queue []routeAt
	// Routes and groups are found in the switches' states as they are:
	// a plan's are canonical (sorted by prefix and by ID), so searched;
	// others are scanned (sorted says which). (Indexed in maps, a leaf
	// link's 1,152 pruned switches at k=48 would take 450 MB and half a
	// second.)
	sorted map[models.SwitchID]bool
	// one holds a route's one member for hops.
	one [1]models.GroupMember
}

func (p *pruner) isSorted(sw models.SwitchID) bool {
	ok, seen := p.sorted[sw]
	if !seen {
		st := p.plan.Switches[sw]
		ok = slices.IsSortedFunc(st.Routes, models.CompareRoutes) &&
			slices.IsSortedFunc(st.Groups, models.CompareGroups)
		p.sorted[sw] = ok
	}
	return ok
}

func (p *pruner) routeOf(sw models.SwitchID, pfx netip.Prefix) (models.Route, bool) {
	rs := p.plan.Switches[sw].Routes
	i, ok := models.SearchRoute(rs, pfx)
	if !ok && !p.isSorted(sw) {
		i = slices.IndexFunc(rs, func(r models.Route) bool { return r.Prefix == pfx })
		ok = i >= 0
	}
	if !ok {
		return models.Route{}, false
	}
	return rs[i], true
}

func (p *pruner) groupOf(sw models.SwitchID, id uint32) models.Group {
	gs := p.plan.Switches[sw].Groups
	i, ok := slices.BinarySearchFunc(gs, id, func(g models.Group, id uint32) int { return cmp.Compare(g.ID, id) })
	if !ok && !p.isSorted(sw) {
		i = slices.IndexFunc(gs, func(g models.Group) bool { return g.ID == id })
		ok = i >= 0
	}
	if !ok {
		return models.Group{}
	}
	return gs[i]
}

// hops is r's next hops: its group's members, or its one member (in
// p.one, reused: read before the next call). Asked for every route at
// both ends of every failed link (a spine's 48 links at k=48 are
// 115,000 routes), so nothing is allocated to ask.
func (p *pruner) hops(sw models.SwitchID, r models.Route) []models.GroupMember {
	if r.GroupID == 0 {
		p.one[0] = models.GroupMember{MemberID: r.MemberID}
		return p.one[:]
	}
	return p.groupOf(sw, r.GroupID).Members
}

func (p *pruner) uses(sw models.SwitchID, r models.Route, port uint32) bool {
	return slices.ContainsFunc(p.hops(sw, r), func(m models.GroupMember) bool { return m.MemberID == port })
}

// remove takes port out of a's next hops.
func (p *pruner) remove(a routeAt, port uint32) {
	ps := p.gone[a]
	if slices.Contains(ps, port) {
		return
	}
	if len(ps) == 0 {
		p.queue = append(p.queue, a)
	}
	p.gone[a] = append(ps, port)
}

// seed takes out the routes' next hops over a failed link, at either end.
func (p *pruner) seed() {
	for id := range p.down {
		l, err := p.snap.Link(id)
		if err != nil {
			continue
		}
		for _, e := range []models.Endpoint{l.A, l.B} {
			if _, ok := p.plan.Switches[e.Switch]; !ok {
				continue
			}
			for _, r := range p.plan.Switches[e.Switch].Routes {
				if p.uses(e.Switch, r, e.Port) {
					p.remove(routeAt{e.Switch, r.Prefix}, e.Port)
				}
			}
		}
	}
}

// spread walks back from the routes left with no next hop: a switch
// that cannot deliver a prefix takes itself out of the next hops of the
// neighbours routing it there.
func (p *pruner) spread() {
	for len(p.queue) > 0 {
		a := p.queue[0]
		p.queue = p.queue[1:]
		if p.bad[a] {
			continue
		}
		left, ps := 0, p.gone[a]
		r, _ := p.routeOf(a.sw, a.p)
		for _, m := range p.hops(a.sw, r) {
			if !slices.Contains(ps, m.MemberID) {
				left++
			}
		}
		if left > 0 {
			continue
		}
		p.bad[a] = true
		for _, nb := range p.snap.Neighbors(a.sw) {
			if p.down[nb.Link] {
				continue
			}
			if _, ok := p.plan.Switches[nb.Peer]; !ok {
				continue
			}
			r, ok := p.routeOf(nb.Peer, a.p)
			if ok && p.uses(nb.Peer, r, nb.PeerPort) {
				n := routeAt{nb.Peer, a.p}
				p.remove(n, nb.PeerPort)
				if len(p.gone[n]) > 1 { // seen before: look at it again
					p.queue = append(p.queue, n)
				}
			}
		}
	}
}

// rewrite is sw's state with prefixes' routes pruned: each keeps the
// next hops not gone, as one member or a group (one of sw's, or a new
// one with an ID no group of sw had).
func (p *pruner) rewrite(sw models.SwitchID, prefixes []netip.Prefix) models.ForwardingState {
	st := p.plan.Switches[sw]
	taken := map[uint32]bool{}
	groupFor := map[string]uint32{} // by groupKey: the switch's groups, and those added
	for _, g := range st.Groups {
		taken[g.ID] = true
		k, _ := groupKey(g.Members)
		groupFor[k] = g.ID
	}
	pruned := make(map[netip.Prefix]models.Route, len(prefixes))
	var extra []models.Group
	// The prefixes a failure prunes at a switch mostly lose the same
	// next hops of the same group (a spine's failure: a leaf's routes
	// toward that spine's pod): each group and set of lost members is
	// worked out once.
	type lost struct {
		group   uint32
		members uint64 // by index in the group
	}
	seen := map[lost]models.Route{}
	var left []models.GroupMember
	for _, pfx := range prefixes {
		r, _ := p.routeOf(sw, pfx)
		members := p.groupOf(sw, r.GroupID).Members
		key, ps := lost{group: r.GroupID}, p.gone[routeAt{sw, pfx}]
		left = left[:0]
		for i, m := range members {
			switch {
			case !slices.Contains(ps, m.MemberID):
				left = append(left, m)
			case i < 64:
				key.members |= 1 << i
			}
		}
		once := len(members) <= 64
		if to, ok := seen[key]; ok && once {
			to.Prefix = pfx
			pruned[pfx] = to
			continue
		}
		var to models.Route
		if len(left) == 1 {
			to.MemberID = left[0].MemberID
		} else {
			k, left := groupKey(left) // a copy of its own
			id, ok := groupFor[k]
			if !ok {
				id = groupID(k, taken)
				taken[id] = true
				groupFor[k] = id
				extra = append(extra, models.Group{ID: id, Members: left})
			}
			to.GroupID = id
		}
		if once {
			seen[key] = to
		}
		to.Prefix = pfx
		pruned[pfx] = to
	}
	// The rest of the state (port MACs, hash seed, punts, pins) stays as
	// it is; members stay while a route or group uses them, as in a plan.
	// A plan's states are canonical already; another is made so first,
	// and its result again (the groups added take their members in the
	// order of the state's groups).
	canonical := st.IsCanonical()
	if !canonical {
		st = st.Canonical()
	}
	ns := rewriteCanonical(st, pruned, extra)
	if !canonical {
		ns = ns.Canonical()
	}
	return ns
}

// groupKey is the key the plan names a group by (portSetKey: the ID the
// plan gives it is groupID of it), for members as Prune leaves them, and
// those members with their weights divided by their greatest common
// divisor (all 1 when equal), as the plan reduces them: a pruned group
// with the members and weights of a group the new plan has is that group,
// under its ID, and a switch whose routes the new plan keeps as pruned is
// not written again. Members are in port order, as the plan keeps them.
func groupKey(members []models.GroupMember) (string, []models.GroupMember) {
	g := int32(0)
	for _, m := range members {
		g = gcd(g, m.Weight)
	}
	ports := make([]uint32, len(members))
	weights := make([]int32, len(members))
	out := make([]models.GroupMember, len(members))
	equal := true // then every weight is 1
	for i, m := range members {
		m.Weight /= max(g, 1)
		out[i], ports[i], weights[i] = m, m.MemberID, m.Weight
		equal = equal && m.Weight == 1
	}
	if equal {
		weights = nil // an ECMP group: keyed by its ports alone
	}
	return portSetKey(ports, weights), out
}

func gcd(a, b int32) int32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// rewriteCanonical is a canonical state st with its routes to the
// prefixes of pruned replaced, the groups extra added, and the groups and
// members no route uses any more left out, without a map of every route
// or a copy and sort of every list (at k=48 a spine's pruning rewrites
// 1,151 switches of about 1,200 routes each: over half of its time went
// to that, when every state was rewritten and sorted again).
func rewriteCanonical(st models.ForwardingState, pruned map[netip.Prefix]models.Route, extra []models.Group) models.ForwardingState {
	ns := st // port MACs, hash seed, punts and pins stay as they are (shared: states are not changed in place)
	ns.Routes = slices.Clone(st.Routes)
	for p, r := range pruned {
		i, _ := models.SearchRoute(ns.Routes, p)
		ns.Routes[i] = r
	}
	// A group stays while a route uses it; a member while a route or a
	// group does. (Neighbouring routes mostly share a group: it is
	// looked up once for a run of them.)
	groups := map[uint32]bool{}
	var members idSet
	last := uint32(0)
	for _, r := range ns.Routes {
		switch {
		case r.GroupID == 0:
			members.add(r.MemberID)
		case r.GroupID != last:
			groups[r.GroupID], last = true, r.GroupID
		}
	}
	ns.Groups = make([]models.Group, 0, len(st.Groups)+len(extra))
	for _, g := range st.Groups {
		if groups[g.ID] {
			ns.Groups = append(ns.Groups, g)
		}
	}
	for _, g := range extra {
		if groups[g.ID] {
			ns.Groups = append(ns.Groups, g)
		}
	}
	slices.SortFunc(ns.Groups, models.CompareGroups)
	for _, g := range ns.Groups {
		for _, m := range g.Members {
			members.add(m.MemberID)
		}
	}
	ns.Members = nil
	for _, m := range st.Members {
		if members.has(m.ID) {
			ns.Members = append(ns.Members, m)
		}
	}
	return ns
}

// idSet is a set of member IDs: a bitmap for the ports a pipeline can
// address (the plan's member IDs), a map beyond.
type idSet struct {
	bits [(models.MaxPort + 64) / 64]uint64
	big  map[uint32]bool
}

func (s *idSet) add(id uint32) {
	if id <= models.MaxPort {
		s.bits[id/64] |= 1 << (id % 64)
		return
	}
	if s.big == nil {
		s.big = map[uint32]bool{}
	}
	s.big[id] = true
}

func (s *idSet) has(id uint32) bool {
	if id <= models.MaxPort {
		return s.bits[id/64]&(1<<(id%64)) != 0
	}
	return s.big[id]
}
