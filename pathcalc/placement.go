package pathcalc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// ErrNoPath means a demand's endpoints are not connected (down links).
var ErrNoPath = errors.New("no path")

// Demand is bandwidth to place from one host to another.
type Demand struct {
	Src, Dst models.Host
	Gbps     float64
}

// PlaceRequest is what Place routes.
type PlaceRequest struct {
	Demands   []Demand
	DownLinks map[models.LinkID]bool
	// Previous, if set, holds each demand's current path (as Placement.Paths
	// gives it); demands keep a still-usable path unless moving it lowers the
	// maximum utilization, so small changes move few flows. With it, the
	// context's end stops the search for lower peaks where it got to,
	// once every demand has a path.
	Previous [][]models.Endpoint
}

// Placement is a path per demand.
type Placement struct {
	// Paths[i] is demand i's route as the switch egress ports it leaves
	// through, from its source leaf to its destination host's port.
	Paths [][]models.Endpoint
	// MLU is the maximum utilization over every link direction and NIC.
	MLU float64
	// Bottleneck names the resource at MLU.
	Bottleneck string
	// Moved counts demands whose path differs from Previous.
	Moved int
	// Method says how it was solved: "edge-coloring" or "greedy+local-search".
	Method string
}

// Place assigns each demand a shortest path so that the maximum link
// utilization is as low as it can find.
//
//   - On a two-tier Clos where every leaf pair has the same spines to choose
//     from and demands are equal (a permutation, a stride, rings), it colours
//     the bipartite multigraph of leaf-to-leaf demands with Δ colours
//     (König's theorem; alternating-path recolouring) and sends colour c
//     through spine c mod S: no link carries more than ⌈Δ/S⌉ demands, the
//     optimum — MLU 1.0 for a permutation on a non-blocking leaf-spine.
//   - Otherwise it places demands largest first on the path whose most
//     loaded link stays least loaded (global first fit), then repeatedly
//     moves a demand off the most utilized link while that lowers it.
func Place(ctx context.Context, snap *topology.Snapshot, req PlaceRequest) (Placement, error) {
	n := newNetwork(snap, req.DownLinks)
	routes, method, moved, err := n.place(ctx, req.Demands, req.Previous)
	if err != nil {
		return Placement{}, err
	}
	p := Placement{Method: method, Moved: moved, Paths: n.egressPaths(routes)}
	var at int
	p.MLU, at = n.maxUtilization(routes, func(i int) float64 { return req.Demands[i].Gbps })
	if at >= 0 {
		p.Bottleneck = n.resources[at].String()
	}
	return p, nil
}

// place returns each demand's resources (NIC, inter-leaf path, host port).
func (n *network) place(ctx context.Context, demands []Demand, previous [][]models.Endpoint) ([][]int, string, int, error) {
	candidates := make([][][]int, len(demands))
	local := [][]int{nil}
	var lastA, lastB models.SwitchID
	var last [][]int
	for i, d := range demands {
		a, b := d.Src.Attach.Switch, d.Dst.Attach.Switch
		if a == b {
			candidates[i] = local
			continue
		}
		if last == nil || a != lastA || b != lastB { // demands come grouped by leaf pair
			last, lastA, lastB = n.leafPaths(a, b), a, b
		}
		candidates[i] = last
		if len(candidates[i]) == 0 {
			return nil, "", 0, fmt.Errorf("%w from %s to %s", ErrNoPath, d.Src.Name, d.Dst.Name)
		}
	}
	choice := make([]int, len(demands))
	if previous == nil && n.colorClos(demands, candidates, choice) {
		// Colouring is optimal when it leaves the hosts' own links as the
		// bottleneck (always, for equal demands on a non-blocking Clos; for
		// unequal ones when they are close: elephants beside an intent
		// that sends a little under line rate); otherwise (a shape it
		// cannot fully exploit, demands far apart) the greedy search may
		// still do better.
		colored := n.mlu(demands, candidates, choice)
		if colored <= n.hostBound(demands)+1e-9 {
			return n.routes(demands, candidates, choice), "edge-coloring", 0, nil
		}
		// Its peak is forced higher than the hosts' links (a failed link,
		// an oversubscribed tier, a link an intent fills that it could not
		// go around): spread what lies under the peak too.
		if err := n.balance(ctx, demands, candidates, choice, n.loads(demands, candidates, choice)); err != nil {
			return nil, "", 0, err
		}
		greedy := make([]int, len(demands))
		if err := n.greedy(ctx, demands, candidates, greedy, nil); err != nil {
			return nil, "", 0, err
		}
		if g := n.mlu(demands, candidates, greedy); colored < g-1e-9 || (colored <= g+1e-9 && n.spread(demands, candidates, choice) <= n.spread(demands, candidates, greedy)) {
			return n.routes(demands, candidates, choice), "edge-coloring", 0, nil
		}
		return n.routes(demands, candidates, greedy), "greedy+local-search", 0, nil
	}
	method := "greedy+local-search"
	if err := n.greedy(ctx, demands, candidates, choice, previous); err != nil {
		return nil, "", 0, err
	}
	routes := n.routes(demands, candidates, choice)
	moved := 0
	for i := range demands {
		if previous != nil && i < len(previous) && !samePath(n, previous[i], routes[i]) {
			moved++
		}
	}
	return routes, method, moved, nil
}

func (n *network) routes(demands []Demand, candidates [][][]int, choice []int) [][]int {
	out := make([][]int, len(demands))
	total := 0
	for i := range demands {
		total += len(candidates[i][choice[i]]) + 2
	}
	flat := make([]int, 0, total) // one allocation for a million routes, not a million
	for i, d := range demands {
		start := len(flat)
		flat = append(flat, n.nicTx[d.Src.Name])
		flat = append(flat, candidates[i][choice[i]]...)
		flat = append(flat, n.egress[d.Dst.Attach])
		out[i] = flat[start:len(flat):len(flat)]
	}
	return out
}

// hostBound is the utilization of the hosts' own links (NIC out, leaf port
// in), which no choice of paths changes.
func (n *network) hostBound(demands []Demand) float64 {
	load := make([]float64, len(n.capacity))
	for _, d := range demands {
		load[n.nicTx[d.Src.Name]] += d.Gbps
		load[n.egress[d.Dst.Attach]] += d.Gbps
	}
	return n.peak(load)
}

// mlu is the maximum utilization of a choice of paths.
func (n *network) mlu(demands []Demand, candidates [][][]int, choice []int) float64 {
	return n.peak(n.loads(demands, candidates, choice))
}

// loads is the load a choice of paths puts on every resource.
func (n *network) loads(demands []Demand, candidates [][][]int, choice []int) []float64 {
	load := make([]float64, len(n.capacity))
	for i, d := range demands {
		load[n.nicTx[d.Src.Name]] += d.Gbps
		for _, x := range candidates[i][choice[i]] {
			load[x] += d.Gbps
		}
		load[n.egress[d.Dst.Attach]] += d.Gbps
	}
	return load
}

// spread is Σ u² of a choice of paths, what balance lowers.
func (n *network) spread(demands []Demand, candidates [][][]int, choice []int) float64 {
	sum := 0.0
	for r, l := range n.loads(demands, candidates, choice) {
		u := l / n.capacity[r]
		sum += u * u
	}
	return sum
}

// peak is the highest utilization of loads by resource.
func (n *network) peak(load []float64) float64 {
	m := 0.0
	for r, l := range load {
		m = max(m, l/n.capacity[r])
	}
	return m
}

func samePath(n *network, prev []models.Endpoint, route []int) bool {
	if len(prev) != len(route)-1 {
		return false
	}
	for i, e := range prev {
		if n.resources[route[i+1]].egress != e {
			return false
		}
	}
	return true
}

// firstHopGroups splits a leaf pair's candidate paths by their first hop,
// in port order: groups[g] lists the candidates leaving through the g-th
// uplink, ordered by their second hop.
func (n *network) firstHopGroups(paths [][]int) [][]int {
	var groups [][]int
	var firsts []int
	for i, p := range paths {
		g := slices.Index(firsts, p[0])
		if g < 0 {
			firsts = append(firsts, p[0])
			groups = append(groups, nil)
			g = len(groups) - 1
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// colorClos routes equal demands on a two- or three-tier Clos by bipartite
// edge colouring, stage by stage: colour c of the (source leaf, destination
// leaf) multigraph picks the c-th uplink (the c-th spine, or the c-th
// aggregation switch of a fat-tree pod, which reaches the destination pod's
// c-th aggregation switch); then, among demands of one colour leaving the
// pod, colour j of the (source aggregation, destination aggregation)
// multigraph picks the j-th core. Each stage puts at most ⌈Δ/width⌉
// demands on a link. It reports false when the fabric is not shaped so.
func (n *network) colorClos(demands []Demand, candidates [][][]int, choice []int) bool {
	switches := len(n.swIndex)
	idx, groups, edges, ok := n.closEdges(demands, candidates)
	if !ok {
		return false
	}
	if len(idx) == 0 {
		return true
	}
	width := func(k int) int { return len(groups[k]) }
	// A link the demands do not fit on (what an intent reserves and sends
	// fills it) blocks its colour at its leaf: the colouring goes around
	// it where it can. Colour c at a source leaf is its c-th uplink; at a
	// destination leaf, the c-th spine's (or aggregation switch's) link
	// down to it.
	var blocked1 map[[2]int]bool
	size := n.blocking(demands)
	if size > 0 {
		blocked1 = map[[2]int]bool{}
		seen := map[[2]int]bool{}
		for k, e := range edges {
			if seen[e] {
				continue // a leaf pair's links are looked at once
			}
			seen[e] = true
			for c, grp := range groups[k] {
				p := candidates[idx[k]][grp[0]]
				if n.capacity[p[0]] < size {
					blocked1[[2]int{e[0], c}] = true
				}
				if n.capacity[p[len(p)-1]] < size {
					blocked1[[2]int{e[1], c}] = true
				}
			}
		}
	}
	stage1 := colorsFor(edges, 2*switches, len(idx), width, blocked1)
	// Stage 2: per first-hop colour, the demands that go up to the core.
	type second struct{ k, c int }
	byColor := map[int][]second{}
	for k, i := range idx {
		g := groups[k]
		c := stage1[k] % len(g)
		if len(candidates[i][g[c][0]]) == 4 {
			byColor[c] = append(byColor[c], second{k, c})
		} else {
			choice[i] = g[c][0]
		}
	}
	for _, members := range byColor {
		e2 := make([][2]int, 0, len(members))
		var blocked2 map[[2]int]bool
		seen := map[[2]int]bool{} // aggregation pairs looked at
		if blocked1 != nil {
			blocked2 = map[[2]int]bool{}
		}
		for _, m := range members {
			i := idx[m.k]
			p := candidates[i][groups[m.k][m.c][0]]
			srcAgg := n.resPeer[p[0]]                            // after leaf → aggregation
			dstAgg := n.swIndex[n.resources[p[3]].egress.Switch] // aggregation → destination leaf
			e := [2]int{srcAgg, switches + dstAgg}
			e2 = append(e2, e)
			if blocked2 != nil && !seen[e] { // colour x: the x-th core, up and down
				seen[e] = true
				for x, cand := range groups[m.k][m.c] {
					q := candidates[i][cand]
					if n.capacity[q[1]] < size {
						blocked2[[2]int{srcAgg, x}] = true
					}
					if n.capacity[q[2]] < size {
						blocked2[[2]int{switches + dstAgg, x}] = true
					}
				}
			}
		}
		stage2 := colorsFor(e2, 2*switches, len(members), func(x int) int { return len(groups[members[x].k][members[x].c]) }, blocked2)
		for x, m := range members {
			grp := groups[m.k][m.c]
			choice[idx[m.k]] = grp[stage2[x]%len(grp)]
		}
	}
	return true
}

// closEdges is the demands between two leaves (idx: their indexes) as
// edges of a bipartite graph, source leaves on one side and destination
// leaves on the other, each with its candidates grouped by first hop
// (groups); ok is false when the candidates are not a Clos's (groups of
// unequal size, paths of other than 2 or 4 hops).
func (n *network) closEdges(demands []Demand, candidates [][][]int) (idx []int, groups [][][]int, edges [][2]int, ok bool) {
	// Switches by number, not name: this runs over up to a million demands.
	switches := len(n.swIndex)
	leafOf := func(sw models.SwitchID, last *models.SwitchID, lastIdx *int) int {
		if sw != *last { // demands come grouped: most repeat the last one
			*last, *lastIdx = sw, n.swIndex[sw]
		}
		return *lastIdx
	}
	var lastSrc, lastDst models.SwitchID
	srcIdx, dstIdx := -1, -1
	idx = make([]int, 0, len(demands))
	groups = make([][][]int, 0, len(demands))
	edges = make([][2]int, 0, len(demands))
	// Candidates are shared per leaf pair: split them once per pair.
	split := make([][][]int, switches*switches)
	done := make([]bool, switches*switches)
	for i, d := range demands {
		if d.Src.Attach.Switch == d.Dst.Attach.Switch {
			continue
		}
		s, t := leafOf(d.Src.Attach.Switch, &lastSrc, &srcIdx), leafOf(d.Dst.Attach.Switch, &lastDst, &dstIdx)
		key := s*switches + t
		if !done[key] {
			g := n.firstHopGroups(candidates[i])
			for _, grp := range g {
				if len(grp) != len(g[0]) {
					return nil, nil, nil, false
				}
				for _, c := range grp {
					if l := len(candidates[i][c]); l != 2 && l != 4 {
						return nil, nil, nil, false
					}
				}
			}
			split[key], done[key] = g, true
		}
		idx = append(idx, i)
		groups = append(groups, split[key])
		edges = append(edges, [2]int{s, switches + t}) // sources and destinations apart
	}
	return idx, groups, edges, true
}

// colorsFor colours a bipartite multigraph's edges for spreading over
// width(e) choices each: when every edge has the same width and it is a
// power of two, by repeated Euler splits (each node's edges end up within
// one of ⌈deg/width⌉ per colour, in O(E log width)); otherwise by a proper
// Δ-colouring, whose colours the caller takes modulo the width. Blocked
// (node, colour) pairs, if any, are avoided where one colour per choice
// is enough (colorAround); elsewhere they are not looked at.
func colorsFor(edges [][2]int, nodes, count int, width func(int) int, blocked map[[2]int]bool) []int {
	w := 0
	for e := range count {
		if e == 0 {
			w = width(0)
		} else if width(e) != w {
			w = 0
			break
		}
	}
	if w > 0 && len(blocked) > 0 {
		if color, ok := colorAround(edges, nodes, w, blocked); ok {
			return color
		}
	}
	if w > 0 && w&(w-1) == 0 {
		return equitableColors(edges, nodes, w)
	}
	return colorBipartite(edges, nodes)
}

// blocking is the demand size a link must hold to take a demand whole
// (the largest demand), or 0 if every link and NIC of n can: then nothing
// is blocked and colouring need not look.
func (n *network) blocking(demands []Demand) float64 {
	size := 0.0
	for _, d := range demands {
		size = max(size, d.Gbps)
	}
	for _, c := range n.capacity {
		if c < size-1e-9 {
			return size - 1e-9
		}
	}
	return 0
}

// colorAround colours a bipartite multigraph's edges with w colours so
// that no node has two edges of one colour nor an edge of a colour
// blocked at it: König's alternating-path method with each blocked pair
// a fixed edge at its node that no path may recolour. That is not always
// possible; an edge it cannot colour so takes a colour free at its left
// node (or 0), and place weighs the result against its greedy search. The
// order edges are coloured in decides which ones fail: it tries the given
// order, then the edges at nodes with blocked colours first, then a few
// shuffles, and keeps the colouring with the fewest failed edges. It
// reports false, colouring nothing, when a node has more edges and
// blocked colours than w: then colours repeat anyway.
func colorAround(edges [][2]int, nodes, w int, blocked map[[2]int]bool) ([]int, bool) {
	deg := make([]int, nodes)
	for _, e := range edges {
		deg[e[0]]++
		deg[e[1]]++
	}
	fixedAt := make([]int, nodes)
	for nc := range blocked {
		if v, c := nc[0], nc[1]; c < w && deg[v] > 0 {
			fixedAt[v]++
		}
	}
	for v := range deg {
		if deg[v]+fixedAt[v] > w {
			return nil, false
		}
	}
	order := make([]int, len(edges))
	for i := range order {
		order[i] = i
	}
	best, failed := colorAroundIn(edges, nodes, w, blocked, order)
	for attempt := 0; failed > 0 && attempt < colorAroundAttempts; attempt++ {
		if attempt == 0 {
			slices.SortStableFunc(order, func(x, y int) int {
				fx := fixedAt[edges[x][0]] + fixedAt[edges[x][1]]
				fy := fixedAt[edges[y][0]] + fixedAt[edges[y][1]]
				return cmp.Compare(fy, fx)
			})
		} else {
			rand.New(rand.NewPCG(uint64(attempt), uint64(len(edges)))).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		if color, f := colorAroundIn(edges, nodes, w, blocked, order); f < failed {
			best, failed = color, f
		}
	}
	return best, true
}

// colorAroundAttempts is how many more orders colorAround tries while
// some edge fails: each costs one colouring, and only fabrics with
// blocked links pay it.
const colorAroundAttempts = 8

// colorAroundIn is one colouring of colorAround, edges taken in order; it
// returns the colours and how many edges failed.
func colorAroundIn(edges [][2]int, nodes, w int, blocked map[[2]int]bool, order []int) ([]int, int) {
	const fixed = -2
	at := make([][]int, nodes)
	for _, e := range edges {
		for _, v := range e {
			if at[v] == nil {
				at[v] = slices.Repeat([]int{-1}, w)
			}
		}
	}
	for nc := range blocked {
		if v, c := nc[0], nc[1]; c < w && at[v] != nil {
			at[v][c] = fixed
		}
	}
	color := slices.Repeat([]int{-1}, len(edges))
	other := func(x, node int) int {
		if edges[x][0] == node {
			return edges[x][1]
		}
		return edges[x][0]
	}
	var path []int
	// flip swaps a and b along the a/b path from v (v has no b edge)
	// unless the path ends at a node where its last edge's new colour is
	// fixed. The path cannot reach the edge's other end (bipartite: it
	// would arrive by the colour that end has free).
	flip := func(v, a, b int) bool {
		path = path[:0]
		node, want, alt := v, a, b
		for {
			x := at[node][want]
			if x == fixed {
				return false
			}
			if x < 0 {
				break
			}
			path = append(path, x)
			node = other(x, node)
			want, alt = alt, want
		}
		recolour(path, edges, color, at, a, b, nil)
		return true
	}
	// try colours edge e (u–v) a, freeing a at v by a flip from v if need be.
	try := func(u, v, a int) bool {
		if at[u][a] != -1 || at[v][a] == fixed {
			return false
		}
		if at[v][a] == -1 {
			return true
		}
		for b := 0; b < w; b++ {
			if at[v][b] == -1 && flip(v, a, b) {
				return true
			}
		}
		return false
	}
	failed := 0
	for _, e := range order {
		u, v := edges[e][0], edges[e][1]
		done := false
		for c := 0; c < w && !done; c++ {
			if try(u, v, c) {
				color[e], done = c, true
			} else if try(v, u, c) { // the other way round: freed at u
				color[e], done = c, true
			}
		}
		if !done {
			// Left for the search, not recorded: the colouring of the
			// rest stays proper.
			color[e] = max(slices.Index(at[u], -1), 0)
			failed++
			continue
		}
		at[u][color[e]] = e
		at[v][color[e]] = e
	}
	return color, failed
}

// equitableColors splits the edges into w colour classes (w a power of
// two) so that at every node each class has ⌊deg/w⌋ or ⌈deg/w⌉ edges.
func equitableColors(edges [][2]int, nodes, w int) []int {
	color := make([]int, len(edges))
	all := make([]int, len(edges))
	for i := range all {
		all[i] = i
	}
	var split func(ids []int, base, w int)
	split = func(ids []int, base, w int) {
		if w == 1 || len(ids) == 0 {
			for _, e := range ids {
				color[e] = base
			}
			return
		}
		a, b := eulerSplit(edges, nodes, ids)
		split(a, base, w/2)
		split(b, base+w/2, w/2)
	}
	split(all, 0, w)
	return color
}

// eulerSplit halves a multigraph's edges so every node's degree splits as
// evenly as possible: odd-degree nodes are joined to a dummy node, each
// component's edges are walked as one closed trail (Hierholzer), and
// consecutive edges go to alternate halves. A trail passing through a node
// enters and leaves it by edges of different halves; a trail is odd only
// if it uses the dummy node, and then it starts there.
func eulerSplit(edges [][2]int, nodes int, ids []int) (a, b []int) {
	type arc struct{ to, e int }
	dummy := nodes
	// Adjacency in one array (offsets by node), sized by a degree count
	// first: this runs once per colour split over up to a million edges.
	deg := make([]int, nodes+1)
	for _, id := range ids {
		deg[edges[id][0]]++
		deg[edges[id][1]]++
	}
	for v := range nodes {
		if deg[v]%2 == 1 {
			deg[v]++
			deg[dummy]++
		}
	}
	off := make([]int, nodes+2)
	for v := range nodes + 1 {
		off[v+1] = off[v] + deg[v]
	}
	flat := make([]arc, off[nodes+1])
	fill := slices.Clone(off[:nodes+1])
	add := func(u, v, e int) {
		flat[fill[u]] = arc{v, e}
		fill[u]++
	}
	for i, id := range ids {
		u, v := edges[id][0], edges[id][1]
		add(u, v, i)
		add(v, u, i)
	}
	n := len(ids)
	for v := range nodes {
		if (fill[v]-off[v])%2 == 1 {
			add(v, dummy, n)
			add(dummy, v, n)
			n++
		}
	}
	adj := make([][]arc, nodes+1)
	for v := range adj {
		adj[v] = flat[off[v]:fill[v]]
	}
	a, b = make([]int, 0, len(ids)/2+1), make([]int, 0, len(ids)/2+1)
	used := make([]bool, n)
	next := make([]int, nodes+1)
	type step struct{ node, e int }
	stack := make([]step, 0, n+1)
	trail := make([]int, 0, n)
	walk := func(start int) {
		trail = trail[:0]
		stack = append(stack[:0], step{start, -1})
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			v := top.node
			for next[v] < len(adj[v]) && used[adj[v][next[v]].e] {
				next[v]++
			}
			if next[v] == len(adj[v]) {
				if top.e >= 0 {
					trail = append(trail, top.e)
				}
				stack = stack[:len(stack)-1]
				continue
			}
			x := adj[v][next[v]]
			used[x.e] = true
			stack = append(stack, step{x.to, x.e})
		}
		for i, e := range trail {
			if e >= len(ids) {
				continue // a dummy edge
			}
			if i%2 == 0 {
				a = append(a, ids[e])
			} else {
				b = append(b, ids[e])
			}
		}
	}
	walk(dummy)
	for v := range nodes {
		if next[v] < len(adj[v]) {
			walk(v)
		}
	}
	return a, b
}

// recolour swaps colours a and b on the edges of an alternating path,
// keeping at (each node's edge of each colour, -1 for none) in step;
// freed, if set, is told of each colour a node gives up on the way.
func recolour(path []int, edges [][2]int, color []int, at [][]int, a, b int, freed func(v, c int)) {
	for _, x := range path {
		for _, v := range edges[x] {
			at[v][color[x]] = -1
			if freed != nil {
				freed(v, color[x])
			}
		}
	}
	for _, x := range path {
		if color[x] == a {
			color[x] = b
		} else {
			color[x] = a
		}
		at[edges[x][0]][color[x]] = x
		at[edges[x][1]][color[x]] = x
	}
}

// colorBipartite properly colours the edges of a bipartite multigraph (left
// and right node IDs share one numbering here but never one edge end) with
// Δ colours, by König's alternating-path method, and returns each edge's
// colour.
func colorBipartite(edges [][2]int, nodes int) []int {
	deg := make([]int, nodes)
	for _, e := range edges {
		deg[e[0]]++
		deg[e[1]]++
	}
	delta := slices.Max(append(deg, 0))
	color := slices.Repeat([]int{-1}, len(edges))
	if delta == 0 {
		return color
	}
	// at[node][c] = edge of colour c at node, or -1.
	at := make([][]int, nodes)
	for v := range at {
		at[v] = slices.Repeat([]int{-1}, delta)
	}
	// lowest[v] is at or below v's lowest free colour: scanning from it
	// keeps free() amortized constant instead of O(Δ) per edge.
	lowest := make([]int, nodes)
	free := func(v int) int {
		for lowest[v] < delta && at[v][lowest[v]] >= 0 {
			lowest[v]++
		}
		if lowest[v] == delta {
			return -1
		}
		return lowest[v]
	}
	freed := func(v, c int) { lowest[v] = min(lowest[v], c) }
	var path []int
	for e, uv := range edges {
		u, v := uv[0], uv[1]
		a, b := free(u), free(v)
		if at[v][a] >= 0 {
			// Swap a and b along the a/b path from v; it cannot reach u
			// (a is free at u), so a becomes free at v.
			path = path[:0]
			node, want, other := v, a, b
			for x := at[node][want]; x >= 0; x = at[node][want] {
				path = append(path, x)
				if edges[x][0] == node {
					node = edges[x][1]
				} else {
					node = edges[x][0]
				}
				want, other = other, want
			}
			recolour(path, edges, color, at, a, b, freed)
		}
		color[e] = a
		at[u][a] = e
		at[v][a] = e
	}
	return color
}

// greedy places largest demands first on the path with the lowest
// resulting bottleneck, then lowers the peak (search.improve).
func (n *network) greedy(ctx context.Context, demands []Demand, candidates [][][]int, choice []int, previous [][]models.Endpoint) error {
	s := newSearch(n, demands, candidates, choice)
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(demands[b].Gbps, demands[a].Gbps) })
	placed := make([]bool, len(demands))
	// Demands with a usable previous path keep it.
	for i := range demands {
		if previous == nil || i >= len(previous) {
			continue
		}
		for c, p := range candidates[i] {
			if samePath(n, previous[i], n.route(demands[i].Src, demands[i].Dst, p)) {
				choice[i], placed[i] = c, true
				s.add(i, 1)
				break
			}
		}
	}
	for _, i := range order {
		d := demands[i]
		s.load[n.nicTx[d.Src.Name]] += d.Gbps
		s.load[n.egress[d.Dst.Attach]] += d.Gbps
		if placed[i] {
			continue
		}
		// Around previous paths the demands new since are placed whatever
		// the time (a look at each one's paths); only the search for lower
		// peaks is cut short.
		if err := ctx.Err(); err != nil && previous == nil {
			return err
		}
		choice[i] = s.best(i)
		s.add(i, 1)
	}
	return s.improve(ctx, previous == nil)
}

// search is a placement being improved: each resource's load and the
// demands on it.
type search struct {
	n          *network
	demands    []Demand
	candidates [][][]int
	choice     []int
	load       []float64
	users      [][]int
	// chain logs the moves of a chain (eject) so a failed one is undone;
	// inChain marks the demands it moved.
	chain   []move
	inChain []bool
}

type move struct{ i, from int }

// newSearch starts with nothing placed: add puts demands on their paths.
func newSearch(n *network, demands []Demand, candidates [][][]int, choice []int) *search {
	return &search{n: n, demands: demands, candidates: candidates, choice: choice,
		load: make([]float64, len(n.capacity)), users: make([][]int, len(n.capacity)), inChain: make([]bool, len(demands))}
}

// add puts demand i on (sign 1) or takes it off (sign -1) its chosen path.
func (s *search) add(i int, sign float64) {
	for _, r := range s.candidates[i][s.choice[i]] {
		s.load[r] += sign * s.demands[i].Gbps
		if sign > 0 {
			s.users[r] = append(s.users[r], i)
		} else {
			s.users[r] = slices.DeleteFunc(s.users[r], func(x int) bool { return x == i })
		}
	}
}

// worst is the highest utilization path p would have with demand i on
// it, and the sum of its utilizations.
func (s *search) worst(i int, p []int) (float64, float64) {
	m, sum := 0.0, 0.0
	for _, r := range p {
		u := (s.load[r] + s.demands[i].Gbps) / s.n.capacity[r]
		m = max(m, u)
		sum += u
	}
	return m, sum
}

// best is demand i's candidate with the lowest worst utilization.
func (s *search) best(i int) int {
	bi, bm, bs := 0, 0.0, 0.0
	for c, p := range s.candidates[i] {
		m, sum := s.worst(i, p)
		if c == 0 || m < bm-1e-12 || (m < bm+1e-12 && sum < bs) {
			bi, bm, bs = c, m, sum
		}
	}
	return bi
}

func (s *search) moveTo(i, c int) {
	s.chain = append(s.chain, move{i, s.choice[i]})
	s.add(i, -1)
	s.choice[i] = c
	s.add(i, 1)
}

// undo takes back the chain's moves after mark.
func (s *search) undo(mark int) {
	for len(s.chain) > mark {
		m := s.chain[len(s.chain)-1]
		s.chain = s.chain[:len(s.chain)-1]
		s.add(m.i, -1)
		s.choice[m.i] = m.from
		s.add(m.i, 1)
	}
}

// eject moves demand i to another path on which every resource stays
// under limit, or, depth allowing, to one where up to ejectBlocked
// resources reach limit, each then relieved by ejecting one of its other
// demands in turn (a Kempe chain, in colouring's terms, or a tree of
// them). It reports whether it succeeded; a failed attempt is undone.
// Demands already moved stay put; *budget bounds the paths tried.
func (s *search) eject(i int, limit float64, depth int, budget *int) bool {
	s.inChain[i] = true
	defer func() { s.inChain[i] = false }()
	d := s.demands[i].Gbps
	cur := s.candidates[i][s.choice[i]]
	var blocked [ejectBlocked]int
	for c, p := range s.candidates[i] {
		if c == s.choice[i] {
			continue
		}
		if *budget--; *budget < 0 {
			return false
		}
		nb, ok := 0, true
		for _, r := range p {
			l := s.load[r] + d
			if slices.Contains(cur, r) {
				l -= d
			}
			if l/s.n.capacity[r] >= limit-1e-9 {
				if nb == ejectBlocked || depth == 0 {
					ok = false
					break
				}
				blocked[nb] = r
				nb++
			}
		}
		if !ok {
			continue
		}
		mark := len(s.chain)
		s.moveTo(i, c)
		for _, r := range blocked[:nb] {
			relieved := s.load[r]/s.n.capacity[r] < limit-1e-9
			for _, j := range slices.Clone(s.users[r]) {
				if relieved {
					break
				}
				if s.inChain[j] || (s.load[r]-s.demands[j].Gbps)/s.n.capacity[r] >= limit-1e-9 {
					continue
				}
				at := len(s.chain)
				if relieved = s.eject(j, limit, depth-1, budget); !relieved {
					s.undo(at)
				}
			}
			if !relieved {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
		s.undo(mark)
	}
	return false
}

// improve repeatedly lowers the most utilized link of the switch fabric:
// by moving one of its demands where that helps, else by a chain of
// moves (eject); then, if fresh, balances what lies under the peak.
// Around previous paths (not fresh) a move must lower the peak by
// keepMargin: what is left for best-effort flows is partly measured
// (intents' traffic beyond their reservations), and a peak lowered by
// less is that measurement's noise, which a flow moved each round would
// chase. Out of time around previous paths, it stops where it got to
// (each round's placement is whole, and no worse than the last);
// from scratch, running out of time is an error.
func (s *search) improve(ctx context.Context, fresh bool) error {
	gain := 1e-9
	if !fresh {
		gain = keepMargin
	}
	budget := ejectBudget
	for round := 0; round < 4*len(s.demands)+100; round++ {
		if err := ctx.Err(); err != nil {
			if !fresh {
				// Around previous paths, every round only lowered the
				// peak of a placement that kept them: out of time, it
				// stands as far as it got.
				return nil
			}
			return err
		}
		hot, hotU := -1, 0.0
		for r, l := range s.load {
			if len(s.users[r]) == 0 {
				continue // NICs and host ports: nothing to move
			}
			if u := l / s.n.capacity[r]; u > hotU {
				hot, hotU = r, u
			}
		}
		if hot < 0 {
			break
		}
		moved := false
		us := slices.Clone(s.users[hot])
		slices.SortFunc(us, func(a, b int) int { return cmp.Compare(s.demands[b].Gbps, s.demands[a].Gbps) })
		for _, i := range us {
			s.add(i, -1)
			old := s.choice[i]
			c := s.best(i)
			if m, _ := s.worst(i, s.candidates[i][c]); c != old && m < hotU-gain {
				s.choice[i] = c
				s.add(i, 1)
				moved = true
				break
			}
			s.choice[i] = old
			s.add(i, 1)
		}
		if !moved {
			// No single move lowers it: every other path of its demands
			// reaches the peak somewhere. Try a chain of moves.
			for _, i := range us {
				s.chain = s.chain[:0]
				if moved = s.eject(i, hotU-gain+1e-9, ejectDepth, &budget); moved || budget <= 0 {
					break
				}
			}
		}
		if !moved {
			break
		}
	}
	if fresh {
		return s.n.balance(ctx, s.demands, s.candidates, s.choice, s.load)
	}
	return nil
}

// keepMargin is how much lower (in utilization) a move must make the
// peak for a flow to leave its previous path: 5% of a link, 20 Gb/s at
// 400 Gb/s. What intents send beyond their reservations is read from
// their pin counters, and a read can be a quarter high or more (47–52
// Gb/s read for intents sending 40, reserving 38: 2–3% of a 400 Gb/s
// link); at 2%, such a read alone moved chains of elephants on a
// settled k=16 fat-tree.
const keepMargin = 0.05

// ejectDepth is how many demands a chain of moves may displace after
// the first, and ejectBudget how many paths one search for a chain may
// try: enough for the alternating chains of a colouring with a few links
// blocked by reservations, bounded on a fabric of a million demands.
const (
	ejectDepth   = 4
	ejectBlocked = 2
	ejectBudget  = 1 << 16
)

// balanceBudget bounds the work of balance (demands × candidates): past
// it, the MLU search's result stands (an all-to-all of a thousand hosts
// has a million demands; its colouring or greedy result is what counts).
const balanceBudget = 1 << 21

// balance refines a placement whose peak the MLU search can no longer
// lower: it moves single demands to the candidate that lowers Σ u² over
// the fabric links (u = load / capacity) without raising the peak, until
// no move helps. The peak is often forced (a failed uplink, a
// saturated fabric, elephants filling every link), and then the MLU
// search leaves every other link as it happened to fall: two demands on
// a link that could each have had one. Σ u² is convex, so it spreads
// load as evenly as the paths allow, which is what max-min fair rates
// reward.
func (n *network) balance(ctx context.Context, demands []Demand, candidates [][][]int, choice []int, load []float64) error {
	work := 0
	for i := range demands {
		work += len(candidates[i])
	}
	if work > balanceBudget {
		return nil
	}
	peak := 0.0
	for r, l := range load {
		peak = max(peak, l/n.capacity[r])
	}
	for pass := 0; pass < 8; pass++ {
		moved := false
		for i, d := range demands {
			if len(candidates[i]) < 2 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			cur := candidates[i][choice[i]]
			// cost of putting d on p, with d taken off its current path
			cost := func(p []int) (float64, bool) {
				c, ok := 0.0, true
				for _, r := range p {
					l := load[r]
					if slices.Contains(cur, r) {
						l -= d.Gbps
					}
					u := (l + d.Gbps) / n.capacity[r]
					if u > peak+1e-9 {
						ok = false
					}
					base := l / n.capacity[r]
					c += u*u - base*base
				}
				return c, ok
			}
			best, bestCost := choice[i], 0.0
			bestCost, _ = cost(cur)
			for ci, p := range candidates[i] {
				if ci == choice[i] {
					continue
				}
				if c, ok := cost(p); ok && c < bestCost-1e-9 {
					best, bestCost = ci, c
				}
			}
			if best == choice[i] {
				continue
			}
			for _, r := range cur {
				load[r] -= d.Gbps
			}
			choice[i] = best
			for _, r := range candidates[i][best] {
				load[r] += d.Gbps
			}
			moved = true
		}
		if !moved {
			break
		}
	}
	return nil
}
