package pathcalc

import (
	"context"
	"maps"
	"math"
	"net/netip"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// What Compute works out per destination leaf — every switch's distance
// and WCMP capacity toward it, and the weighted next hops each switch
// takes — is kept with the plan (routing), so that the plan after a
// change of links (a failure, a return, a drain, congestion weights) is
// made by Recompute from the one before. Per destination, a changed link
// between two switches equally far from it changes nothing; otherwise the
// capacities are redone upstream of it, nearest first, as far as they
// change, and only where a switch lost its last next hop toward the
// destination (or a returning link shortens a path), or where the change
// reaches more than half the switches, is the destination searched again
// in full. (A core link's change reaches every leaf: their capacities
// move by a fraction of a percent.) A switch's choice counts as changed only when its ports or its
// integer weights do (capacities that make the same group keep the old
// ones), and only switches with changed choices are rebuilt; the others
// keep the previous plan's states, shared. Recompute's plan is exactly
// Compute's (TestRecomputeIsCompute); of its warnings, only a WCMP error
// figure can differ (that of the capacities the choice was kept with).

// hop is a working link out of a switch: the switch at its other end (by
// index), the local port, and what the link counts for in WCMP (its speed,
// scaled by the port's congestion bias).
type hop struct {
	peer int
	port uint32
	gbps float64
}

// routing is a plan's per-destination working (see above).
type routing struct {
	snap     *topology.Snapshot
	req      Request
	switches []models.Switch
	index    map[models.SwitchID]int
	adj      [][]hop
	// dests are the destination leaves (switch indices), in the order
	// routes are made; prefixes are what each is routed as.
	dests    []int
	prefixes [][]netip.Prefix
	// dist and capTo are by destination, then switch (dist -1: cannot
	// reach it; capTo of the destination itself: +Inf); carries says
	// whether traffic toward it can reach the switch (see full).
	dist    [][]int32
	capTo   [][]float64
	carries [][]bool
	// source says which switches traffic starts at: those with hosts.
	source []bool
	// tables and choice are by switch: its interned next-hop sets (with
	// its routes), and for each destination the set it takes (-1: none).
	tables []*routeTable
	choice [][]int32
	// warnings are by switch.
	warnings [][]Warning
}

// kept is req as a plan keeps it: its maps copied, so that a caller
// changing them later does not change what the next Recompute compares.
func kept(req Request) Request {
	req.DownLinks, req.PortBias = maps.Clone(req.DownLinks), maps.Clone(req.PortBias)
	return req
}

// bias is what the link out of e counts for in WCMP, as a share of its
// speed: its PortBias when that is in (0, 1), else 1.
func (req Request) bias(e models.Endpoint) float64 {
	if b, ok := req.PortBias[e]; ok && b > 0 && b < 1 {
		return b
	}
	return 1
}

// adjacency is every switch's working links (not down), by index.
func adjacency(snap *topology.Snapshot, switches []models.Switch, index map[models.SwitchID]int, req Request) [][]hop {
	adj := make([][]hop, len(switches))
	for i, sw := range switches {
		for _, a := range snap.Neighbors(sw.Name) {
			if req.DownLinks[a.Link] {
				continue
			}
			gbps := a.Gbps * req.bias(models.Endpoint{Switch: sw.Name, Port: a.LocalPort})
			adj[i] = append(adj[i], hop{peer: index[a.Peer], port: a.LocalPort, gbps: gbps})
		}
	}
	return adj
}

// scratch is what one destination's working reuses from the last.
type scratch struct {
	queue    []int
	next     []hop
	from, to []int
	fanIn    []int
	ports    []uint32
	weights  []float64
	dirty    []bool
	buckets  [][]int
	// fanInAt says which propagate call counted fanIn[s] (its stamp).
	fanInAt []uint64
	stamp   uint64
}

func newScratch(n int) *scratch {
	return &scratch{
		queue: make([]int, 0, n), from: make([]int, n), to: make([]int, n),
		fanIn: make([]int, n), dirty: make([]bool, n), fanInAt: make([]uint64, n),
	}
}

// full searches toward destination d over adj, filling dist (every
// element set) and capTo, and calls emit for every switch that reaches d
// (d excluded), nearest first, with its next hops' ports and capacities.
//
// WCMP: each next hop is weighted by what it can carry onward for this
// switch — its link, or its own capacity toward the leaf shared among the
// switches that send to it, whichever is less — computed nearest switches
// first. On a symmetric Clos every weight is equal (plain ECMP); after a
// failure, switches send less toward next hops with less left beyond them.
// The switches that send to a next hop are those traffic toward the leaf
// can reach (carries: a switch with hosts, or one a switch carrying it
// sends to): a core whose link into the leaf's pod failed has the other
// pods' aggregation switches as next hops, but nothing sends it that
// traffic, and counting it as a sender took a share from every pod's
// leaves (at k=48 it made 1,128 leaves weigh one uplink 1:2, rewritten on
// the failure's path). A switch that carries nothing gets its next hops'
// shares as one sender more.
func (sc *scratch) full(adj [][]hop, source []bool, d int, dist []int32, capTo []float64, carries []bool, emit func(s int, ports []uint32, caps []float64)) {
	for i := range dist {
		dist[i] = -1
	}
	dist[d] = 0
	queue := append(sc.queue[:0], d)
	for head := 0; head < len(queue); head++ { // queue keeps the BFS order
		cur := queue[head]
		for _, h := range adj[cur] {
			if dist[h.peer] < 0 {
				dist[h.peer] = dist[cur] + 1
				queue = append(queue, h.peer)
			}
		}
	}
	sc.queue = queue
	// Next hops of every switch, gathered once for the pass below.
	next := sc.next[:0]
	for _, s := range queue {
		sc.fanIn[s] = 0
		sc.from[s] = len(next)
		if s != d {
			for _, h := range adj[s] {
				if dist[h.peer] == dist[s]-1 {
					next = append(next, h)
				}
			}
		}
		sc.to[s] = len(next)
	}
	sc.next = next
	for i := range carries {
		carries[i] = false
	}
	for i := len(queue) - 1; i >= 0; i-- { // farthest first: every sender is known
		s := queue[i]
		carries[s] = carries[s] || source[s]
		if carries[s] {
			for _, h := range next[sc.from[s]:sc.to[s]] {
				sc.fanIn[h.peer]++
				carries[h.peer] = true
			}
		}
	}
	capTo[d] = math.Inf(1)
	for _, s := range queue[1:] { // nearest first: every next hop's capTo is known
		ports, weights := sc.ports[:0], sc.weights[:0]
		capTo[s] = 0
		for _, h := range next[sc.from[s]:sc.to[s]] {
			w := min(capTo[h.peer]/float64(sc.fanIn[h.peer]+notCarrying(carries, s)), h.gbps)
			capTo[s] += w
			ports = append(ports, h.port)
			weights = append(weights, w)
		}
		sc.ports, sc.weights = ports, weights
		emit(s, ports, weights)
	}
}

// notCarrying is 1 for a switch that carries no traffic toward the
// destination (see full): it takes a share as one sender more.
func notCarrying(carries []bool, s int) int {
	if carries[s] {
		return 0
	}
	return 1
}

// carriedInto says whether a switch that carries traffic toward the
// destination of dist sends to s (or s has hosts): what carries[s] is.
func carriedInto(adj [][]hop, source []bool, dist []int32, carries []bool, s int) bool {
	if source[s] {
		return true
	}
	for _, h := range adj[s] {
		if dist[h.peer] == dist[s]+1 && carries[h.peer] {
			return true
		}
	}
	return false
}

// upstream calls f for every switch that sends to s toward the
// destination of dist (one hop farther, over a working link), once per
// link.
func upstream(adj [][]hop, dist []int32, s int, f func(x int)) {
	for _, h := range adj[s] {
		if dist[h.peer] == dist[s]+1 {
			f(h.peer)
		}
	}
}

// propagate redoes, toward the destination of dist (whose distances the
// change keeps: see Recompute), the WCMP capacities of the seed switches
// and of every switch upstream whose inputs they change, nearest first,
// updating capTo and calling emit for each switch redone. It reports
// false, having stopped, when a switch has no next hop left (distances
// change) or when more than half the switches would be redone (a search
// in full costs less; a core link's change reaches every leaf, about 40%
// of a fat-tree's switches, and redoing them is still cheaper: at k=48
// 1.8 s for all destinations against 2.5 s from scratch): the
// destination must then be searched again in full.
func (sc *scratch) propagate(adj [][]hop, dist []int32, capTo []float64, carries []bool, seeds []int, emit func(s int, ports []uint32, caps []float64)) bool {
	var maxDist int32
	marked, limit := 0, len(adj)/2
	mark := func(s int) {
		if sc.dirty[s] || dist[s] <= 0 {
			return
		}
		marked++
		sc.dirty[s] = true
		for int(dist[s]) >= len(sc.buckets) {
			sc.buckets = append(sc.buckets, nil)
		}
		sc.buckets[dist[s]] = append(sc.buckets[dist[s]], s)
		maxDist = max(maxDist, dist[s])
	}
	defer func() { // leave the scratch clean, even when stopped early
		for i := range sc.buckets {
			for _, s := range sc.buckets[i] {
				sc.dirty[s] = false
			}
			sc.buckets[i] = sc.buckets[i][:0]
		}
	}()
	for _, s := range seeds {
		mark(s)
	}
	// Fan-ins (unchanged distances and carriers: counted over the new
	// links) are counted once per switch per call, when first needed.
	sc.stamp++
	fanIn := func(p int) int {
		if sc.fanInAt[p] != sc.stamp {
			n := 0
			upstream(adj, dist, p, func(x int) {
				if carries[x] {
					n++
				}
			})
			sc.fanIn[p], sc.fanInAt[p] = n, sc.stamp
		}
		return sc.fanIn[p]
	}
	for b := int32(1); b <= maxDist; b++ {
		for i := 0; i < len(sc.buckets[b]); i++ {
			if marked > limit {
				return false
			}
			s := sc.buckets[b][i]
			ports, weights := sc.ports[:0], sc.weights[:0]
			total := 0.0
			for _, h := range adj[s] {
				if dist[h.peer] != dist[s]-1 {
					continue
				}
				w := min(capTo[h.peer]/float64(fanIn(h.peer)+notCarrying(carries, s)), h.gbps)
				total += w
				ports = append(ports, h.port)
				weights = append(weights, w)
			}
			sc.ports, sc.weights = ports, weights
			if len(ports) == 0 {
				return false
			}
			emit(s, ports, weights)
			if total != capTo[s] {
				capTo[s] = total
				upstream(adj, dist, s, mark)
			}
		}
	}
	return true
}

// newRouting is Compute, keeping the working for Recompute.
func newRouting(ctx context.Context, snap *topology.Snapshot, req Request) (*routing, error) {
	switches := snap.Switches()
	r := &routing{snap: snap, req: kept(req), switches: switches, index: make(map[models.SwitchID]int, len(switches))}
	for i, sw := range switches {
		r.index[sw.Name] = i
	}
	r.adj = adjacency(snap, switches, r.index, req)
	r.tables = make([]*routeTable, len(switches))
	r.choice = make([][]int32, len(switches))
	for i := range r.tables {
		r.tables[i] = &routeTable{byHash: map[uint64][]int{}}
	}
	r.source = make([]bool, len(switches))
	for d, leaf := range switches {
		if leaf.Role != models.RoleLeaf || len(snap.HostsOn(leaf.Name)) == 0 {
			continue
		}
		r.source[d] = true
		r.dests = append(r.dests, d)
		r.prefixes = append(r.prefixes, destPrefixes(snap, leaf))
	}
	for s := range r.choice {
		r.choice[s] = make([]int32, len(r.dests))
		for j := range r.choice[s] {
			r.choice[s][j] = -1
		}
	}
	sc := newScratch(len(switches))
	r.dist = make([][]int32, len(r.dests))
	r.capTo = make([][]float64, len(r.dests))
	r.carries = make([][]bool, len(r.dests))
	for j, d := range r.dests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.dist[j], r.capTo[j], r.carries[j] = make([]int32, len(switches)), make([]float64, len(switches)), make([]bool, len(switches))
		sc.full(r.adj, r.source, d, r.dist[j], r.capTo[j], r.carries[j], func(s int, ports []uint32, caps []float64) {
			r.choice[s][j] = int32(r.tables[s].internWeighted(ports, caps))
		})
	}
	for s := range switches {
		r.addRoutes(s)
	}
	return r, nil
}

// destPrefixes is what a destination leaf is routed as: its prefix, or
// each of its hosts' /32 when it has none.
func destPrefixes(snap *topology.Snapshot, leaf models.Switch) []netip.Prefix {
	if leaf.Prefix.IsValid() {
		return []netip.Prefix{leaf.Prefix}
	}
	var out []netip.Prefix
	for _, h := range snap.HostsOn(leaf.Name) {
		out = append(out, netip.PrefixFrom(h.IP, 32))
	}
	return out
}

// addRoutes makes switch s's routes from its choices, destination by
// destination; a destination leaf's own hosts at its turn.
func (r *routing) addRoutes(s int) {
	t := r.tables[s]
	t.routes = t.routes[:0]
	for j, d := range r.dests {
		if d == s {
			for _, h := range r.snap.HostsOn(r.switches[d].Name) {
				t.routes = append(t.routes, prefixRoute{prefix: netip.PrefixFrom(h.IP, 32), set: t.intern([]uint32{h.Attach.Port})})
			}
			continue
		}
		if c := r.choice[s][j]; c >= 0 {
			for _, p := range r.prefixes[j] {
				t.routes = append(t.routes, prefixRoute{prefix: p, set: int(c)})
			}
		}
	}
}

// result builds the plan: every switch's state from its table, or, for
// switches not in rebuild (when rebuild is non-nil), prev's state as is.
func (r *routing) result(prev *Result, rebuild []bool) (Result, error) {
	res := Result{Plan: models.Plan{Switches: make(map[models.SwitchID]models.ForwardingState, len(r.switches))}, routing: r}
	if r.warnings == nil {
		r.warnings = make([][]Warning, len(r.switches))
	}
	lists := routeLists{} // the rebuilt switches' equal lists, shared
	for i, sw := range r.switches {
		if rebuild != nil && !rebuild[i] {
			res.Plan.Switches[sw.Name] = prev.Plan.Switches[sw.Name]
		} else {
			state, warnings, err := buildState(sw.Name, r.tables[i], r.req.Limits)
			if err != nil {
				return Result{}, err
			}
			// What Recompute reads of a built table is its sets and the
			// choices: the routes (a thousand per switch at k=48) and the
			// interning index go, or every plan kept would hold them.
			r.tables[i].routes, r.tables[i].byHash = nil, nil
			state.Routes = lists.share(state.Routes)
			state.PortMACs = PortMACs(r.snap, sw)
			seed := HashSeed(sw)
			state.HashSeed = &seed
			state.Punts = []uint16{models.EtherTypeLLDP} // link discovery's probes
			res.Plan.Switches[sw.Name] = state
			r.warnings[i] = warnings
		}
		res.Warnings = append(res.Warnings, r.warnings[i]...)
	}
	return res, nil
}

// Recompute is Compute(ctx, snap, req) made from prev, a plan of the same
// snapshot and limits (see the comment at the top of this file); any
// other prev is computed afresh. The states of switches whose routes do
// not change are prev's.
func Recompute(ctx context.Context, prev Result, snap *topology.Snapshot, req Request) (Result, error) {
	old := prev.routing
	if old == nil || old.snap != snap || old.req.Limits != req.Limits {
		return Compute(ctx, snap, req)
	}
	// A link that went down or came back, or (biased) whose weight out of
	// a changed (its congestion bias).
	type change struct {
		a, b   int // switch indices
		biased bool
	}
	var changes []change
	ends := func(id models.LinkID) (int, int, bool) {
		l, err := snap.Link(id)
		if err != nil {
			return 0, 0, false
		}
		a, okA := old.index[l.A.Switch]
		b, okB := old.index[l.B.Switch]
		return a, b, okA && okB
	}
	for id := range old.req.DownLinks {
		if !req.DownLinks[id] {
			if a, b, ok := ends(id); ok {
				changes = append(changes, change{a: a, b: b})
			}
		}
	}
	for id := range req.DownLinks {
		if !old.req.DownLinks[id] {
			if a, b, ok := ends(id); ok {
				changes = append(changes, change{a: a, b: b})
			}
		}
	}
	for _, m := range []map[models.Endpoint]float64{old.req.PortBias, req.PortBias} {
		for e := range m {
			if old.req.bias(e) == req.bias(e) {
				continue
			}
			l, ok := snap.LinkAt(e)
			if !ok {
				continue
			}
			a, b, ok := ends(l.ID())
			if !ok {
				continue
			}
			if l.B == e {
				a, b = b, a
			}
			changes = append(changes, change{a: a, b: b, biased: true})
		}
	}
	r := &routing{
		snap: snap, req: kept(req), switches: old.switches, index: old.index,
		adj:   adjacency(snap, old.switches, old.index, req),
		dests: old.dests, prefixes: old.prefixes,
		dist: slices.Clone(old.dist), capTo: slices.Clone(old.capTo), carries: slices.Clone(old.carries), source: old.source,
		tables: slices.Clone(old.tables), choice: slices.Clone(old.choice),
		warnings: slices.Clone(old.warnings),
	}
	n := len(r.switches)
	// moved[s]: switch s's new choices, by destination in order, as
	// ports and capacities (nil ports: none). A destination's are staged
	// in pending until its working is done (a propagation given up for a
	// full search leaves nothing behind).
	type choice struct {
		j     int
		ports []uint32
		w     []float64
	}
	moved := make([][]choice, n)
	type pendingChoice struct {
		s int
		c choice
	}
	var pending []pendingChoice
	reduced := weightMemo{lim: req.Limits, at: map[uint64][]int{}}
	record := func(s, j int, ports []uint32, caps []float64) {
		ports, w := normalize(ports, caps) // the scratch's: copied if kept
		if c := old.choice[s][j]; c >= 0 {
			t := old.tables[s]
			if slices.Equal(t.sets[c], ports) {
				if slices.Equal(t.weights[c], w) {
					return
				}
				// Capacities that become the same integer weights (within
				// the tolerance or not, as before) make the same group: the
				// choice keeps its old capacities. A core link's change
				// moves every leaf's by a fraction of a percent, toward
				// almost every destination. (A warning's error figure is
				// then the old capacities'.)
				var iw []int32
				e := 0.0
				if w != nil {
					iw, e = reduced.of(w)
				}
				if slices.Equal(iw, t.reduced[c]) && (e > WeightTolerance) == t.inexact[c] {
					return
				}
			}
		}
		pending = append(pending, pendingChoice{s, choice{j, slices.Clone(ports), slices.Clone(w)}})
	}
	sc := newScratch(n)
	var seeds []int
	for j, d := range r.dests {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		dist := old.dist[j]
		seeds, pending = seeds[:0], pending[:0]
		search := false
		for _, ch := range changes {
			da, db := dist[ch.a], dist[ch.b]
			switch {
			case ch.biased:
				if da >= 0 && da == db+1 {
					seeds = append(seeds, ch.a)
				}
			case da == db: // not on a shortest path, before or after
			case da < 0 || db < 0 || max(da, db)-min(da, db) > 1:
				search = true // an added link: reachability or distances change
			default:
				u, v := ch.a, ch.b
				if da < db {
					u, v = v, u
				}
				seeds = append(seeds, u)                                           // its next hops change
				upstream(r.adj, dist, v, func(x int) { seeds = append(seeds, x) }) // v's fan-in changes
				if carriedInto(r.adj, r.source, dist, old.carries[j], v) != old.carries[j][v] {
					search = true // what v carries changes, and with it the fan-ins below it
				}
			}
		}
		if !search && len(seeds) == 0 {
			continue
		}
		emit := func(s int, ports []uint32, caps []float64) { record(s, j, ports, caps) }
		if capTo := slices.Clone(old.capTo[j]); search || !sc.propagate(r.adj, dist, capTo, old.carries[j], seeds, emit) {
			// Distances change: search again, and compare every switch.
			pending = pending[:0]
			r.dist[j], r.capTo[j], r.carries[j] = make([]int32, n), make([]float64, n), make([]bool, n)
			sc.full(r.adj, r.source, d, r.dist[j], r.capTo[j], r.carries[j], emit)
			for s, was := range dist {
				if was > 0 && r.dist[j][s] < 0 { // no longer reaches it
					moved[s] = append(moved[s], choice{j: j})
				}
			}
		} else {
			r.capTo[j] = capTo
		}
		for _, p := range pending {
			moved[p.s] = append(moved[p.s], p.c)
		}
	}
	rebuild := make([]bool, n)
	for s, m := range moved {
		if len(m) == 0 {
			continue
		}
		rebuild[s] = true
		t := &routeTable{byHash: map[uint64][]int{}}
		cs := make([]int32, len(r.dests))
		for j := range r.dests {
			cs[j] = -1
			if len(m) > 0 && m[0].j == j {
				if m[0].ports != nil {
					cs[j] = int32(t.internNormalized(m[0].ports, m[0].w))
				}
				m = m[1:]
			} else if c := old.choice[s][j]; c >= 0 {
				cs[j] = int32(t.internNormalized(old.tables[s].sets[c], old.tables[s].weights[c]))
			}
		}
		r.tables[s], r.choice[s] = t, cs
		r.addRoutes(s)
	}
	return r.result(&prev, rebuild)
}

// weightMemo is integerWeights remembered by capacities: after a change
// many switches see the same capacities toward many destinations (a
// pod's leaves, all alike), and reducing them is the costly part of
// comparing a choice with the one before.
type weightMemo struct {
	lim  Limits
	at   map[uint64][]int // by hash of the capacities, into seen
	seen []reducedWeights
}

type reducedWeights struct {
	caps []float64
	w    []int32
	e    float64
}

func (m *weightMemo) of(caps []float64) ([]int32, float64) {
	h := setHash(nil, caps)
	for _, i := range m.at[h] {
		if slices.Equal(m.seen[i].caps, caps) {
			return m.seen[i].w, m.seen[i].e
		}
	}
	w, e := integerWeights(caps, m.lim)
	m.at[h] = append(m.at[h], len(m.seen))
	m.seen = append(m.seen, reducedWeights{caps: slices.Clone(caps), w: w, e: e})
	return w, e
}
