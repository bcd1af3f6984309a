package pathcalc

import (
	"context"
	"maps"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// What Compute works out per destination leaf — every switch's distance,
// WCMP capacity and fan-in toward it, and the weighted next hops each
// switch takes — is kept with the plan (routing), so that the plan after
// a change of links (a failure, a return, a drain, congestion weights) is
// made by Recompute from the one before. Per destination, a changed link
// between two switches equally far from it changes nothing; otherwise the
// capacities are redone upstream of it, nearest first, as far as they
// change (switches with the same links, one of each: see classes), and
// only where a switch lost its last next hop toward the destination (or
// a returning link shortens a path), or where the change reaches more
// than half the switches, is the destination searched again in full. (A
// core link's change reaches every leaf: their capacities move by a
// fraction of a percent.) A switch's choice counts as changed only when
// its ports or its integer weights do (capacities that make the same
// group keep the old ones), and only switches with changed choices are
// rebuilt — those with a few, by patching their old state (see patch);
// the others keep the previous plan's states, shared. Recompute's plan is
// exactly Compute's (TestRecomputeIsCompute); of its warnings, only a
// WCMP error figure can differ (that of the capacities the choice was
// kept with).

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
	// fanIn is by destination, then switch: how many switches carrying
	// traffic toward it send to the switch (over how many links).
	fanIn [][]int32
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
	ports    []uint32
	weights  []float64
	dirty    []bool
	buckets  [][]int
	// stamp numbers propagate's calls.
	stamp uint64
	// class numbers the switches as classes does; alike is propagate's
	// working of one switch of each class (see alike).
	class []int32
	alike alike
}

// alike is what propagate worked out for one switch of a class, by class
// and whether the switch carries (2*class + notCarrying): its next hops'
// ports and capacities, and their total. Every other switch of the class
// redone in the same call takes the same. id names each working (never
// 0, never reused), so that what emit makes of it can be kept too.
type alike struct {
	at       []uint64 // the propagate call's stamp, where valid
	from, to []int32  // into ports and caps
	total    []float64
	id       []uint64
	ports    []uint32
	caps     []float64
	ids      uint64
}

func newScratch(n int) *scratch {
	return &scratch{
		queue: make([]int, 0, n), from: make([]int, n), to: make([]int, n),
		dirty: make([]bool, n),
	}
}

// classify readies the scratch for propagate over the links classes
// numbered (n of them).
func (sc *scratch) classify(class []int32, n int) {
	sc.class = class
	sc.alike = alike{at: make([]uint64, 2*n), from: make([]int32, 2*n), to: make([]int32, 2*n),
		total: make([]float64, 2*n), id: make([]uint64, 2*n)}
}

// classes numbers the switches by their working links: switches whose
// links go to the same peers over the same ports and capacities (a pod's
// leaves in a fat-tree, the leaves of a leaf-spine) see every destination
// alike, so propagate works one of them out and the others take it (at
// k=48 a core link's change redoes 1,104 leaves toward each destination:
// 46 distinct workings). It returns the classes and how many there are.
func classes(adj [][]hop) ([]int32, int) {
	class := make([]int32, len(adj))
	var reps []int                 // a switch of each class
	byHash := map[uint64][]int32{} // classes, by hash of the links
	for s, hs := range adj {
		h := uint64(fnvOffset)
		for _, x := range hs {
			h = fnvAdd(fnvAdd(fnvAdd(h, uint64(x.peer)), uint64(x.port)), math.Float64bits(x.gbps))
		}
		c := int32(-1)
		for _, k := range byHash[h] {
			if slices.Equal(adj[reps[k]], hs) {
				c = k
				break
			}
		}
		if c < 0 {
			c = int32(len(reps))
			reps = append(reps, s)
			byHash[h] = append(byHash[h], c)
		}
		class[s] = c
	}
	return class, len(reps)
}

// full searches toward destination d over adj, filling dist, carries and
// fanIn (every element set) and capTo, and calls emit for every switch
// that reaches d (d excluded), nearest first, with its next hops' ports
// and capacities.
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
// traffic, and counting it as a sender would take a share from every
// pod's leaves (at k=48, 1,128 leaves would weigh one uplink 1:2, and be
// rewritten on the failure's path). A switch that carries nothing gets
// its next hops' shares as one sender more.
func (sc *scratch) full(adj [][]hop, source []bool, d int, dist []int32, capTo []float64, carries []bool, fanIn []int32, emit func(s int, ports []uint32, caps []float64, id uint64)) {
	for i := range dist {
		dist[i] = -1
	}
	clear(fanIn)
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
				fanIn[h.peer]++
				carries[h.peer] = true
			}
		}
	}
	capTo[d] = math.Inf(1)
	for _, s := range queue[1:] { // nearest first: every next hop's capTo is known
		ports, weights := sc.ports[:0], sc.weights[:0]
		capTo[s] = 0
		for _, h := range next[sc.from[s]:sc.to[s]] {
			w := min(capTo[h.peer]/float64(fanIn[h.peer]+int32(notCarrying(carries, s))), h.gbps)
			capTo[s] += w
			ports = append(ports, h.port)
			weights = append(weights, w)
		}
		sc.ports, sc.weights = ports, weights
		emit(s, ports, weights, 0)
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

// countFanIn is fanIn[s] (see routing) as the links of adj make it.
func countFanIn(adj [][]hop, dist []int32, carries []bool, s int) int32 {
	n := int32(0)
	upstream(adj, dist, s, func(x int) {
		if carries[x] {
			n++
		}
	})
	return n
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
// destination must then be searched again in full. Switches of a class
// (classify must have been given classes(adj)) are worked out
// once per call, and emit is given the same id for each of them.
func (sc *scratch) propagate(adj [][]hop, dist []int32, capTo []float64, carries []bool, fanIn []int32, seeds []int, emit func(s int, ports []uint32, caps []float64, id uint64)) bool {
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
		sc.alike.ports, sc.alike.caps = sc.alike.ports[:0], sc.alike.caps[:0]
	}()
	for _, s := range seeds {
		mark(s)
	}
	sc.stamp++
	for b := int32(1); b <= maxDist; b++ {
		for i := 0; i < len(sc.buckets[b]); i++ {
			if marked > limit {
				return false
			}
			s := sc.buckets[b][i]
			// A switch of the same class (its next hops' capacities
			// and fan-ins final: they are nearer) was worked out in
			// this call, or this one is.
			k := 2*int(sc.class[s]) + notCarrying(carries, s)
			a := &sc.alike
			if a.at[k] != sc.stamp {
				from := len(a.ports)
				total := 0.0
				for _, h := range adj[s] {
					if dist[h.peer] != dist[s]-1 {
						continue
					}
					w := min(capTo[h.peer]/float64(fanIn[h.peer]+int32(notCarrying(carries, s))), h.gbps)
					total += w
					a.ports = append(a.ports, h.port)
					a.caps = append(a.caps, w)
				}
				a.ids++
				a.at[k], a.from[k], a.to[k], a.total[k], a.id[k] = sc.stamp, int32(from), int32(len(a.ports)), total, a.ids
			}
			if a.from[k] == a.to[k] {
				return false
			}
			total := a.total[k]
			// emit's own copy: it may reorder what it is given.
			sc.ports = append(sc.ports[:0], a.ports[a.from[k]:a.to[k]]...)
			sc.weights = append(sc.weights[:0], a.caps[a.from[k]:a.to[k]]...)
			emit(s, sc.ports, sc.weights, a.id[k])
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
	r.fanIn = make([][]int32, len(r.dests))
	for j, d := range r.dests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.dist[j], r.capTo[j], r.carries[j], r.fanIn[j] = make([]int32, len(switches)), make([]float64, len(switches)), make([]bool, len(switches)), make([]int32, len(switches))
		sc.full(r.adj, r.source, d, r.dist[j], r.capTo[j], r.carries[j], r.fanIn[j], func(s int, ports []uint32, caps []float64, _ uint64) {
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
// switches not in rebuild (when rebuild is non-nil), prev's state as is,
// or the one built (when built is non-nil and has it).
func (r *routing) result(prev *Result, rebuild []bool, built []*builtState) (Result, error) {
	res := Result{Plan: models.Plan{Switches: make(map[models.SwitchID]models.ForwardingState, len(r.switches))}, routing: r,
		Searched: len(r.dests), Destinations: len(r.dests)}
	if r.warnings == nil {
		r.warnings = make([][]Warning, len(r.switches))
	}
	lists := routeLists{} // the rebuilt switches' equal lists, shared
	for i, sw := range r.switches {
		switch {
		case rebuild != nil && !rebuild[i]:
			res.Plan.Switches[sw.Name] = prev.Plan.Switches[sw.Name]
		case built != nil && built[i] != nil:
			built[i].state.Routes = lists.share(built[i].state.Routes)
			res.Plan.Switches[sw.Name] = built[i].state
			r.warnings[i] = built[i].warnings
		default:
			state, warnings, err := buildState(sw.Name, r.tables[i], r.req.Limits)
			if err != nil {
				return Result{}, err
			}
			// What Recompute reads of a built table is its sets and the
			// choices: the routes (a thousand per switch at k=48) and the
			// interning index go, or every plan kept would hold them.
			r.tables[i].routes, r.tables[i].byHash = nil, nil
			state.Routes = lists.share(state.Routes)
			if prev != nil { // the same snapshot's
				state.PortMACs = prev.Plan.Switches[sw.Name].PortMACs
			} else {
				state.PortMACs = PortMACs(r.snap, sw)
			}
			seed := HashSeed(sw)
			state.HashSeed = &seed
			state.Punts = Punts(r.snap, sw)
			res.Plan.Switches[sw.Name] = state
			r.warnings[i] = warnings
		}
		res.Warnings = append(res.Warnings, r.warnings[i]...)
	}
	return res, nil
}

// linkChanges is what changed from old's request to req: links down or
// up again, and link directions whose bias moved.
func linkChanges(old *routing, snap *topology.Snapshot, req Request) []change {
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
				changes = append(changes, change{a: a, b: b, up: true})
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
	return changes
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
	changes := linkChanges(old, snap, req)
	r := &routing{
		snap: snap, req: kept(req), switches: old.switches, index: old.index,
		adj:   adjacency(snap, old.switches, old.index, req),
		dests: old.dests, prefixes: old.prefixes,
		dist: slices.Clone(old.dist), capTo: slices.Clone(old.capTo), carries: slices.Clone(old.carries), fanIn: slices.Clone(old.fanIn), source: old.source,
		tables: slices.Clone(old.tables), choice: slices.Clone(old.choice),
		warnings: slices.Clone(old.warnings),
	}
	n := len(r.switches)
	// Destinations are worked out apart, by replanWorkers goroutines:
	// each one's new choices are kept by destination (byDest[j]) and
	// gathered by switch, in destination order, after.
	class, classes := classes(r.adj)
	gone := dropOut(old, r, changes)
	byDest := make([][]movedAt, len(r.dests))
	var next, searched atomic.Int64
	var wg sync.WaitGroup
	for range min(replanWorkers(), len(r.dests)) {
		w := &replan{r: r, old: old, changes: changes, sc: newScratch(n), reduced: weightMemo{lim: req.Limits, at: map[uint64][]int{}},
			gone: gone, moved: make([]bool, n), searched: &searched}
		w.sc.classify(class, classes)
		wg.Go(func() {
			for j := int(next.Add(1) - 1); j < len(r.dests) && ctx.Err() == nil; j = int(next.Add(1) - 1) {
				byDest[j] = w.destination(j)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	// moved[s]: switch s's new choices, by destination in order.
	moved := make([][]movedChoice, n)
	for _, ms := range byDest {
		for _, m := range ms {
			moved[m.s] = append(moved[m.s], m.c)
		}
	}
	rebuild := make([]bool, n)
	built := make([]*builtState, n)
	for s, m := range moved {
		if len(m) == 0 {
			continue
		}
		rebuild[s] = true
		changed := len(m)
		t := &routeTable{byHash: map[uint64][]int{}}
		cs := make([]int32, len(r.dests))
		remap := map[int32]int32{} // old set → new, interned once each
		// The old table's sets the new one keeps, each with a destination
		// that keeps it: see patch.
		kept := map[int32]int{}
		for j := range r.dests {
			cs[j] = -1
			if len(m) > 0 && m[0].j == j {
				if m[0].ports != nil {
					cs[j] = int32(t.internNormalized(m[0].ports, m[0].w))
				}
				m = m[1:]
			} else if c := old.choice[s][j]; c >= 0 {
				to, ok := remap[c]
				if !ok {
					to = int32(t.internNormalized(old.tables[s].sets[c], old.tables[s].weights[c]))
					remap[c] = to
					kept[to] = j
				}
				cs[j] = to
			}
		}
		r.tables[s], r.choice[s] = t, cs
		if changed <= len(r.dests)/4 {
			if b, ok := r.patch(s, prev.Plan.Switches[r.switches[s].Name], moved[s], kept); ok {
				built[s] = b
				continue
			}
		}
		r.addRoutes(s)
	}
	res, err := r.result(&prev, rebuild, built)
	res.Searched = int(searched.Load())
	return res, err
}

// replanWorkers is how many goroutines Recompute works destinations out
// on: every core but one, which the controller's other work (writing the
// pruning, taking telemetry in) keeps. On a 2-core machine that is one:
// two were measured no faster there (each worked at half the speed).
var replanWorkers = func() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// change is a link that went down or came back (up), between switches
// a and b, or (biased) one whose weight out of a changed (its congestion
// bias). gone says one of its ends drops out (see dropOut).
type change struct {
	a, b   int
	biased bool
	up     bool
	gone   bool
}

// dropOut returns the switches a change of links leaves with no working
// link (a switch that failed: every link of it down), and marks the
// changes at them. Toward each destination such a switch drops out of
// the routing as it is, without a search in full, as long as no other
// switch's distance grows (see replan.reshape): at k=48 a spine's or a
// core's 48 links sent every destination to a search in full (1.3 s of a
// core against 2.1 s from scratch), as neither the switch nor the fan-in
// of its next hops could be propagated.
func dropOut(old, r *routing, changes []change) (gone []int) {
	seen := map[int]bool{}
	for i, ch := range changes {
		if ch.biased {
			continue
		}
		for _, e := range []int{ch.a, ch.b} {
			if len(r.adj[e]) > 0 || len(old.adj[e]) == 0 {
				continue
			}
			changes[i].gone = true
			if !seen[e] {
				seen[e] = true
				gone = append(gone, e)
			}
		}
	}
	return gone
}

// replan works destinations out for Recompute: r, the new routing, from
// old, over the changes. Each goroutine has its own.
type replan struct {
	r, old  *routing
	changes []change
	sc      *scratch
	reduced weightMemo
	// last is the working record was last given with an id, normalized
	// (and reduced, once needed): the switches of a class come one after
	// another, and each takes it as it is.
	last struct {
		id      uint64
		ports   []uint32
		w, buf  []float64
		iw      []int32
		e       float64
		reduced bool
	}
	seeds, recount []int
	pending        []movedAt
	// gone are the switches that drop out (dropOut).
	gone []int
	// moved marks the switches whose distance toward the destination
	// being worked out shrinks (movedList: in order), and near is
	// reshape's working, by distance.
	moved     []bool
	movedList []int
	near      [][]int
	// nd and carries are the destination's distances and carries after
	// the change: old's until written (copied: see write).
	nd      []int32
	carries []bool
	copied  bool
	// searched counts the destinations searched in full (every worker's).
	searched *atomic.Int64
}

// write copies nd and carries, once, before they change.
func (w *replan) write() {
	if !w.copied {
		w.nd, w.carries, w.copied = slices.Clone(w.nd), slices.Clone(w.carries), true
	}
}

func (w *replan) seed(x int) { w.seeds = append(w.seeds, x) }

// sender notes that y has a sender more or fewer: its fan-in is counted
// again and the switches that send to it are redone; if what it carries
// changes with it (a switch nothing reached before, or nothing reaches
// now), it is a sender more or fewer to its own next hops in turn (which
// redoes y's share too, y being one of their senders). A spine coming
// back link by link carries nothing until a leaf's link is back: at k=48
// that sent every destination to a search in full.
func (w *replan) sender(y int) {
	r := w.r
	if w.nd[y] < 0 {
		return // reaches nothing (it dropped out too): carries nothing, counts no fan-in
	}
	w.recount = append(w.recount, y)
	upstream(r.adj, w.nd, y, w.seed)
	if c := carriedInto(r.adj, r.source, w.nd, w.carries, y); c != w.carries[y] {
		w.write()
		w.carries[y] = c
		for _, h := range r.adj[y] {
			if w.nd[h.peer] == w.nd[y]-1 {
				w.sender(h.peer)
			}
		}
	}
}

// movedAt is switch s's new choice.
type movedAt struct {
	s int
	c movedChoice
}

// destination works out destination j (see the comment at the top of
// this file), setting its working in w.r, and returns the switches whose
// choices toward it change, with them. A propagation given up for a full
// search leaves nothing of its own behind.
func (w *replan) destination(j int) []movedAt {
	r, old := w.r, w.old
	n := len(r.switches)
	dist := old.dist[j]
	w.seeds, w.recount, w.pending = w.seeds[:0], w.recount[:0], nil
	// The distances and carries after the switches that drop out or come
	// nearer (w.nd, w.carries: see reshape).
	search := w.reshape(j)
	defer func() {
		for _, m := range w.movedList {
			w.moved[m] = false
		}
	}()
	for _, ch := range w.changes {
		if search {
			break // searched in full: nothing to propagate
		}
		da, db := dist[ch.a], dist[ch.b]
		switch {
		case ch.gone || w.moved[ch.a] || w.moved[ch.b]: // reshape's
		case ch.biased:
			if da >= 0 && da == db+1 {
				w.seeds = append(w.seeds, ch.a)
			}
		case da == db: // not on a shortest path, before or after
		case da < 0 || db < 0 || max(da, db)-min(da, db) > 1:
			search = true // an added link: reachability or distances change
		default:
			u, v := ch.a, ch.b
			if da < db {
				u, v = v, u
			}
			w.seed(u) // its next hops change
			w.sender(v)
		}
	}
	if !search && len(w.seeds) == 0 && len(w.pending) == 0 {
		return nil
	}
	nd, carries := w.nd, w.carries // with what reshape and sender changed
	emit := func(s int, ports []uint32, caps []float64, id uint64) { w.record(s, j, ports, caps, id) }
	fanIn := old.fanIn[j] // copied before it changes
	for _, v := range w.recount {
		if c := countFanIn(r.adj, nd, carries, v); c != fanIn[v] {
			if &fanIn[0] == &old.fanIn[j][0] {
				fanIn = slices.Clone(fanIn)
			}
			fanIn[v] = c
		}
	}
	capTo := slices.Clone(old.capTo[j])
	for _, s := range w.gone {
		capTo[s] = 0 // as a search leaves a switch that does not reach j
	}
	if search || !w.sc.propagate(r.adj, nd, capTo, carries, fanIn, w.seeds, emit) {
		// Distances change: search again, and compare every switch.
		w.searched.Add(1)
		w.pending = nil
		r.dist[j], r.capTo[j], r.carries[j], r.fanIn[j] = make([]int32, n), make([]float64, n), make([]bool, n), make([]int32, n)
		w.sc.full(r.adj, r.source, r.dests[j], r.dist[j], r.capTo[j], r.carries[j], r.fanIn[j], emit)
		for s, was := range dist {
			if was > 0 && r.dist[j][s] < 0 { // no longer reaches it
				w.pending = append(w.pending, movedAt{s, movedChoice{j: j}})
			}
		}
	} else {
		r.dist[j], r.carries[j], r.capTo[j], r.fanIn[j] = nd, carries, capTo, fanIn
	}
	return w.pending
}

// reshape takes the switches that drop out (w.gone) out of destination
// j's routing and moves those that come nearer to it (when links come
// back: a switch that had none joins), setting j's distances and carries
// after them (w.nd, w.carries: old's, copied where they change), and
// queues what changes around them (seeds, recounts, and the routes of
// the switches that drop out), or reports that j must be searched in full
// instead: when j drops out, or when more than a quarter of the
// switches come nearer.
//
// A switch that drops out leaves its next hops a sender fewer (if it
// carried traffic toward j) and the switches that sent to it a next hop
// fewer; propagate finds any left with none (their distance grows) and
// gives up. Distances that shrink are found from the links that came
// back, nearest first, as a search would; a switch that comes nearer
// has new next hops, is a sender fewer to its old ones and one more to
// its new ones, and a next hop fewer or more to the switches one farther.
// Links may fail in the same change (a failure while a return is still
// planned: at k=48 every destination was searched in full then): the
// distances found are then the old ones where links came back, as
// though none grew. Should one grow, the nearest switch whose distance
// is wrong has no next hop one nearer (any nearer switch's is right), so
// it lost one, to a failed link or a switch dropped out, and is a seed:
// propagate finds it with none and gives up.
// A spine coming back link by link at k=48 (one link, then its other 47,
// as the switches report them) first joins through one leaf, three hops
// farther than its cores; without this, every destination but its pod's
// would go to a search in full.
func (w *replan) reshape(j int) (search bool) {
	r, old := w.r, w.old
	dist := old.dist[j]
	w.nd, w.carries, w.copied = dist, old.carries[j], false
	w.movedList = w.movedList[:0]
	d := r.dests[j]
	for _, s := range w.gone {
		if s == d {
			return true
		}
		if w.nd[s] >= 0 {
			w.write()
			w.nd[s], w.carries[s] = -1, false
		}
	}
	// Nearest first, as a search: w.near[x] holds the switches that
	// may be x from j.
	near := w.near[:0]
	defer func() {
		for i := range near {
			near[i] = near[i][:0]
		}
		w.near = near
	}()
	offer := func(s int, x int32) {
		if w.nd[s] >= 0 && w.nd[s] <= x {
			return
		}
		for int(x) >= len(near) {
			near = append(near, nil)
		}
		near[x] = append(near[x], s)
	}
	for _, ch := range w.changes {
		if ch.up {
			if dist[ch.b] >= 0 {
				offer(ch.a, dist[ch.b]+1)
			}
			if dist[ch.a] >= 0 {
				offer(ch.b, dist[ch.a]+1)
			}
		}
	}
	for x := int32(0); int(x) < len(near); x++ {
		for i := 0; i < len(near[x]); i++ {
			s := near[x][i]
			if w.nd[s] >= 0 && w.nd[s] <= x {
				continue
			}
			if len(w.movedList) >= len(r.adj)/4 {
				return true
			}
			w.write()
			w.nd[s] = x
			w.moved[s] = true
			w.movedList = append(w.movedList, s)
			for _, h := range r.adj[s] {
				offer(h.peer, x+1)
			}
		}
	}
	if !w.copied {
		return false
	}
	nd, carries := w.nd, w.carries
	// What the switches that came nearer carry, farthest first: what
	// reaches a switch comes from farther.
	slices.SortFunc(w.movedList, func(a, b int) int { return int(nd[b] - nd[a]) })
	for _, s := range w.movedList {
		carries[s] = carriedInto(r.adj, r.source, nd, carries, s)
	}
	// Around each, what it was, then what it is.
	around := func(s int, adj [][]hop, dist []int32, carried bool) {
		if dist[s] < 0 {
			return
		}
		for _, h := range adj[s] {
			switch y := h.peer; {
			case dist[y] == dist[s]-1 && carried:
				w.sender(y)
			case dist[y] == dist[s]+1:
				w.seed(y) // a next hop more or fewer
			}
		}
	}
	for _, s := range w.gone {
		if dist[s] > 0 {
			w.recount = append(w.recount, s)
			w.pending = append(w.pending, movedAt{s, movedChoice{j: j}}) // no route toward j
			around(s, old.adj, dist, old.carries[j][s])
		}
	}
	for _, s := range w.movedList {
		w.seed(s)
		w.recount = append(w.recount, s)
		around(s, old.adj, dist, old.carries[j][s])
		around(s, r.adj, nd, carries[s])
	}
	return false
}

// record compares switch s's choice toward destination j, its next hops'
// ports and capacities, with the old one, and keeps it when it differs.
func (w *replan) record(s, j int, ports []uint32, caps []float64, id uint64) {
	last := &w.last
	var cw []float64
	if id != 0 && id == last.id {
		ports, cw = last.ports, last.w
	} else {
		ports, cw = normalize(ports, caps) // the scratch's: copied if kept
		if id != 0 {
			last.id, last.ports, last.reduced = id, append(last.ports[:0], ports...), false
			last.buf = append(last.buf[:0], cw...)
			last.w = nil
			if cw != nil {
				last.w = last.buf
			}
		}
	}
	if c := w.old.choice[s][j]; c >= 0 {
		t := w.old.tables[s]
		if slices.Equal(t.sets[c], ports) {
			if slices.Equal(t.weights[c], cw) {
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
			switch {
			case id != 0 && id == last.id && last.reduced:
				iw, e = last.iw, last.e
			case cw != nil:
				iw, e = w.reduced.of(cw)
			}
			if id != 0 && id == last.id {
				last.iw, last.e, last.reduced = iw, e, true
			}
			if slices.Equal(iw, t.reduced[c]) && (e > WeightTolerance) == t.inexact[c] {
				return
			}
		}
	}
	w.pending = append(w.pending, movedAt{s, movedChoice{j, slices.Clone(ports), slices.Clone(cw)}})
}

// movedChoice is a switch's new choice toward destination j, as ports
// and capacities (nil ports: none).
type movedChoice struct {
	j     int
	ports []uint32
	w     []float64
}

// builtState is a switch's state and warnings, made before result.
type builtState struct {
	state    models.ForwardingState
	warnings []Warning
}

// patch makes switch s's state from was, its state in the plan before,
// when a few destinations' choices moved: their routes are pointed at
// their new sets' groups, and every other route stays. Its table (sets
// and choices) is made; kept gives, for each of its sets the old table
// had, a destination whose route keeps it. It reports false where the
// state must be built in full: a route is added or removed, a set kept
// gets another group (IDs probe past collisions), or a limit is near.
func (r *routing) patch(s int, was models.ForwardingState, moved []movedChoice, kept map[int32]int) (*builtState, bool) {
	t, lim, sw := r.tables[s], r.req.Limits, r.switches[s]
	for _, m := range moved {
		if m.ports == nil || r.choice[s][m.j] < 0 {
			return nil, false // a route removed, or one added
		}
	}
	if lim.RouteEntries > 0 && len(was.Routes) > lim.RouteEntries {
		return nil, false // its check counts the routes aggregated
	}
	// The table's sets as addRoutes would leave them: a destination
	// leaf's hosts (source: it is one), one port each, after the choices.
	var hostsOf []models.Host
	if r.source[s] {
		hostsOf = r.snap.HostsOn(sw.Name)
	}
	hostSet := make([]int, len(hostsOf))
	for i, h := range hostsOf {
		hostSet[i] = t.intern([]uint32{h.Attach.Port})
	}
	used := make([]bool, len(t.sets))
	for i := range used {
		used[i] = true
	}
	g := planGroups(sw.Name, t, lim, used, maxWeightTotal(lim))
	if g.fits(sw.Name, lim) != nil {
		return nil, false // built in full, with weights coarsened to fit
	}
	same := func(set int, p netip.Prefix) bool {
		at, ok := models.SearchRoute(was.Routes, p)
		if !ok {
			return false
		}
		to := was.Routes[at]
		to.Prefix = netip.Prefix{}
		return to == g.target[set]
	}
	for set, j := range kept {
		if !same(int(set), r.prefixes[j][0]) {
			return nil, false
		}
	}
	for i, h := range hostsOf {
		if !same(hostSet[i], netip.PrefixFrom(h.IP, 32)) {
			return nil, false
		}
	}
	routes := slices.Clone(was.Routes)
	for _, m := range moved {
		to := g.target[r.choice[s][m.j]]
		if to == (models.Route{}) {
			return nil, false // no route
		}
		for _, p := range r.prefixes[m.j] {
			at, ok := models.SearchRoute(was.Routes, p)
			if !ok {
				return nil, false
			}
			to.Prefix = p
			routes[at] = to
		}
	}
	st := g.state()
	st.Routes = routes
	st.PortMACs, st.HashSeed, st.Punts = was.PortMACs, was.HashSeed, was.Punts
	return &builtState{state: st, warnings: g.warnings}, true
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
	w, e := integerWeights(caps, m.lim, maxWeightTotal(m.lim))
	m.at[h] = append(m.at[h], len(m.seen))
	m.seen = append(m.seen, reducedWeights{caps: slices.Clone(caps), w: w, e: e})
	return w, e
}
