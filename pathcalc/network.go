package pathcalc

import (
	"math"
	"slices"
	"sync"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// network indexes a fabric's capacity constraints for placement and
// evaluation. Resources are directional: the egress of every switch port
// (a link direction, or a leaf's port toward a host) and every host NIC's
// transmit side.
type network struct {
	snap     *topology.Snapshot
	down     map[models.LinkID]bool
	capacity []float64
	*frame

	// shortest paths between leaves, as lists of egress resources; nil
	// entries are computed on first use.
	paths map[[2]models.SwitchID][][]int
	dists map[models.SwitchID]Dist
	graph *Hops // the switches numbered for dists, on first use
	hops  map[[2]models.SwitchID][]nextHop
	// resDown marks the egress resources whose link is down (checking a
	// stored path is a slice look-up, not a link ID built per hop).
	resDown []bool
	byDst   map[models.SwitchID][][]hopIdx
	// out is every switch's working links by number, on first use (the
	// next hops toward a destination are those of them one hop nearer).
	out [][]hopIdx
	// budget, if above zero, bounds what paths and byDst keep (counted
	// in hops; cached): past it both start over. A Book lives as long as
	// the fabric and is asked about any pair of leaves: unbounded, at
	// k=48 it would keep gigabytes (576 paths per pair of pods' leaves, a
	// next-hop list per destination leaf). One-shot placements keep all.
	budget, cached int
	// memo is bestPath's working (a pointer: a network copied for a
	// residual shares it, epoch included, so no stamp is mistaken).
	memo *pathMemo
}

// frame is what a network has that depends on the fabric alone, shared
// by every network of one snapshot (read only): a bandwidth ledger is
// made again after every link change, and indexing a k=48 fabric's
// 138,000 ports costs 170 ms of each, on a failure's path.
type frame struct {
	speeds    []float64               // the resources' speeds (a network's capacity starts as them)
	egress    map[models.Endpoint]int // switch egress port → resource
	nicTx     map[string]int          // host name → resource
	resources []resourceName
	// seeds are the switches' hash seeds (device IDs), for ECMP emulation.
	seeds map[models.SwitchID]uint32
	// swIndex numbers the switches; resPeer is, per egress resource, the
	// number of the switch at its far end (-1: a host, or a NIC).
	swIndex map[models.SwitchID]int
	resPeer []int
}

// frames keeps the frame of the snapshot last asked for.
var frames struct {
	sync.Mutex
	snap *topology.Snapshot
	f    *frame
}

// frameOf is snap's frame, made on first use.
func frameOf(snap *topology.Snapshot) *frame {
	frames.Lock()
	defer frames.Unlock()
	if frames.snap != snap {
		frames.snap, frames.f = snap, newFrame(snap)
	}
	return frames.f
}

func newFrame(snap *topology.Snapshot) *frame {
	f := &frame{
		egress: map[models.Endpoint]int{},
		nicTx:  map[string]int{},
		seeds:  map[models.SwitchID]uint32{},
	}
	add := func(name resourceName, gbps float64) int {
		f.speeds = append(f.speeds, gbps)
		f.resources = append(f.resources, name)
		return len(f.speeds) - 1
	}
	for _, sw := range snap.Switches() {
		f.seeds[sw.Name] = uint32(sw.DeviceID)
		for _, port := range snap.Ports(sw.Name) {
			e := models.Endpoint{Switch: sw.Name, Port: port}
			f.egress[e] = add(resourceName{egress: e}, snap.PortGbps(e))
		}
	}
	for _, h := range snap.Hosts() {
		f.nicTx[h.Name] = add(resourceName{nic: h.Name}, h.NICGbps)
	}
	f.swIndex = make(map[models.SwitchID]int, len(f.seeds))
	for i, sw := range snap.Switches() {
		f.swIndex[sw.Name] = i
	}
	f.resPeer = make([]int, len(f.resources))
	for r, name := range f.resources {
		f.resPeer[r] = -1
		if name.nic != "" {
			continue
		}
		if l, ok := snap.LinkAt(name.egress); ok {
			peer := l.A
			if l.A == name.egress {
				peer = l.B
			}
			f.resPeer[r] = f.swIndex[peer.Switch]
		}
	}
	return f
}

// pathMemo is bestPath's per-switch working: best[s] is valid where at[s]
// is the call's epoch.
type pathMemo struct {
	best  []float64
	at    []uint32
	epoch uint32
}

type resourceName struct {
	egress models.Endpoint
	nic    string
}

func (r resourceName) String() string {
	if r.nic != "" {
		return "nic " + r.nic
	}
	return r.egress.String()
}

func newNetwork(snap *topology.Snapshot, down map[models.LinkID]bool) *network {
	f := frameOf(snap)
	n := &network{
		snap:     snap,
		down:     down,
		capacity: f.speeds,
		frame:    f,
		paths:    map[[2]models.SwitchID][][]int{},
		dists:    map[models.SwitchID]Dist{},
		hops:     map[[2]models.SwitchID][]nextHop{},
		byDst:    map[models.SwitchID][][]hopIdx{},
	}
	n.resDown = make([]bool, len(f.resources))
	for id, off := range down {
		if l, err := snap.Link(id); err == nil && off {
			for _, e := range []models.Endpoint{l.A, l.B} {
				if r, ok := f.egress[e]; ok {
					n.resDown[r] = true
				}
			}
		}
	}
	return n
}

// nextHop is one way forward from a switch toward a destination leaf.
type nextHop struct {
	res  int // the egress resource
	peer models.SwitchID
}

// nextHops are the working ports of switch at on shortest paths to leaf b,
// in port order, computed once per (switch, destination).
func (n *network) nextHops(at, b models.SwitchID) []nextHop {
	key := [2]models.SwitchID{at, b}
	if h, ok := n.hops[key]; ok {
		return h
	}
	dist := n.distTo(b)
	here, _ := dist.Of(at)
	var out []nextHop
	for _, adj := range n.snap.Neighbors(at) {
		if n.down[adj.Link] {
			continue
		}
		if d, ok := dist.Of(adj.Peer); ok && d == here-1 {
			out = append(out, nextHop{res: n.egress[models.Endpoint{Switch: at, Port: adj.LocalPort}], peer: adj.Peer})
		}
	}
	n.hops[key] = out
	return out
}

// hopIdx is a next hop by number: its egress resource and the switch it
// leads to.
type hopIdx struct{ res, peer int }

// hopsTo is, for every switch by number, its working next hops on
// shortest paths toward leaf b, computed once per b (leafPaths walks them
// for every source leaf without hashing a switch's name per hop).
func (n *network) hopsTo(b models.SwitchID) [][]hopIdx {
	if h, ok := n.byDst[b]; ok {
		return h
	}
	dist := n.distTo(b).d
	out := make([][]hopIdx, len(n.swIndex))
	size := 0
	for i, hops := range n.links() {
		if dist == nil || dist[i] <= 0 {
			continue
		}
		for _, h := range hops {
			if dist[h.peer] == dist[i]-1 {
				out[i] = append(out[i], h)
			}
		}
		size += len(out[i])
	}
	n.keep(size)
	n.byDst[b] = out
	return out
}

// links is every switch's working links by number (out), made on first
// use.
func (n *network) links() [][]hopIdx {
	if n.out == nil {
		n.out = make([][]hopIdx, len(n.swIndex))
		for _, sw := range n.snap.Switches() {
			i := n.swIndex[sw.Name]
			n.snap.EachNeighbor(sw.Name, func(adj topology.Adjacency) {
				if !n.down[adj.Link] {
					n.out[i] = append(n.out[i], hopIdx{res: n.egress[models.Endpoint{Switch: sw.Name, Port: adj.LocalPort}], peer: n.swIndex[adj.Peer]})
				}
			})
		}
	}
	return n.out
}

// bestPath is, of the shortest paths from leaf a to leaf b over working
// links that take only allowed hops (nil: any), one whose tightest hop
// has the most room, as egress resources: of those the first in the
// order leafPaths lists them. hops is the switches' distance (a path has
// that many links); it is -1 when b cannot be reached at all, and ok is
// false when no path is allowed.
//
// Worked out over the shortest-path graph, nearest switches first,
// instead of over every path: between two k=48 pods' leaves there are
// 576 paths of four links but 1,200 links in all, and nothing is kept
// between calls but the distances to b.
func (n *network) bestPath(a, b models.SwitchID, room func(r int) float64, allowed func(h hopIdx) bool) (path []int, hops int, ok bool) {
	dist := n.distTo(b).d
	ai, bi := n.swIndex[a], n.swIndex[b]
	if dist == nil || dist[ai] < 0 {
		return nil, -1, false
	}
	links := n.links()
	if n.memo == nil {
		n.memo = &pathMemo{best: make([]float64, len(links)), at: make([]uint32, len(links))}
	}
	m := n.memo
	m.epoch++
	if m.epoch == 0 { // wrapped: no stamp may match an old one
		clear(m.at)
		m.epoch = 1
	}
	next := func(s int, h hopIdx) bool {
		return dist[h.peer] == dist[s]-1 && (allowed == nil || allowed(h))
	}
	// value(s) is the most room a path from s to b can have at its
	// tightest hop (-Inf: none is allowed).
	var value func(s int) float64
	value = func(s int) float64 {
		if s == bi {
			return math.Inf(1)
		}
		if m.at[s] == m.epoch {
			return m.best[s]
		}
		v := math.Inf(-1)
		for _, h := range links[s] {
			if next(s, h) {
				v = max(v, min(room(h.res), value(h.peer)))
			}
		}
		m.best[s], m.at[s] = v, m.epoch
		return v
	}
	target := value(ai)
	if math.IsInf(target, -1) {
		return nil, int(dist[ai]), false
	}
	path = make([]int, 0, dist[ai])
	for s := ai; s != bi; {
		// Some hop of s keeps the target (value(s) is at least it).
		i := slices.IndexFunc(links[s], func(h hopIdx) bool { return next(s, h) && min(room(h.res), value(h.peer)) >= target })
		if i < 0 {
			return nil, int(dist[ai]), false // cannot happen: values are exact
		}
		path, s = append(path, links[s][i].res), links[s][i].peer
	}
	return path, int(dist[ai]), true
}

// keep counts size hops about to be cached against the budget, starting
// the caches over first if they would pass it.
func (n *network) keep(size int) {
	if n.budget <= 0 {
		return
	}
	if n.cached+size > n.budget {
		clear(n.paths)
		clear(n.byDst)
		n.cached = 0
	}
	n.cached += size
}

// leafPaths returns every shortest path from leaf a to leaf b that avoids
// down links, each as its egress resources (without the host ports).
func (n *network) leafPaths(a, b models.SwitchID) [][]int {
	key := [2]models.SwitchID{a, b}
	if p, ok := n.paths[key]; ok {
		return p
	}
	var flat []int // every path in one backing array
	var ends []int
	hops := n.hopsTo(b)
	bi := n.swIndex[b]
	var walk func(at int, acc []int)
	walk = func(at int, acc []int) {
		if at == bi {
			flat = append(flat, acc...)
			ends = append(ends, len(flat))
			return
		}
		for _, h := range hops[at] {
			walk(h.peer, append(acc, h.res))
		}
	}
	if _, ok := n.distTo(b).Of(a); ok {
		walk(n.swIndex[a], make([]int, 0, 8))
	}
	var out [][]int
	if len(ends) > 0 {
		out = make([][]int, len(ends))
	}
	start := 0
	for i, end := range ends {
		out[i] = flat[start:end:end]
		start = end
	}
	n.keep(len(flat))
	n.paths[key] = out
	return out
}

// route is the resources a connection uses along one path: the source NIC,
// the inter-leaf path, and the destination leaf's port toward the host.
func (n *network) route(src, dst models.Host, path []int) []int {
	r := make([]int, 0, len(path)+2)
	r = append(r, n.nicTx[src.Name])
	r = append(r, path...)
	return append(r, n.egress[dst.Attach])
}

// egressPaths turns routes (NIC, then egress resources) into paths of
// switch egress ports, in one backing array.
func (n *network) egressPaths(routes [][]int) [][]models.Endpoint {
	total := 0
	for _, r := range routes {
		total += max(len(r)-1, 0)
	}
	flat := make([]models.Endpoint, 0, total)
	out := make([][]models.Endpoint, len(routes))
	for i, r := range routes {
		if len(r) == 0 {
			continue
		}
		start := len(flat)
		for _, res := range r[1:] { // skip the NIC: paths are switch egress ports
			flat = append(flat, n.resources[res].egress)
		}
		out[i] = flat[start:len(flat):len(flat)]
	}
	return out
}

// ecmpPath follows the ECMP plan the way a switch hashes: at each switch,
// among the ports on shortest paths, the member FlowHash picks.
func (n *network) ecmpPath(src, dst models.Host, srcPort uint16) []int {
	a, b := src.Attach.Switch, dst.Attach.Switch
	var out []int
	for at := a; at != b; {
		hops := n.nextHops(at, b)
		if len(hops) == 0 {
			return nil
		}
		h := hops[FlowHash(n.seeds[at], src.IP, dst.IP, srcPort)%uint32(len(hops))]
		out = append(out, h.res)
		at = h.peer
	}
	return out
}

// distTo is the hop distance of every switch to b, computed once per b.
func (n *network) distTo(b models.SwitchID) Dist {
	if d, ok := n.dists[b]; ok {
		return d
	}
	if n.graph == nil {
		n.graph = NewHops(n.snap, n.down)
	}
	d := n.graph.To(b)
	n.dists[b] = d
	return d
}

// maxUtilization loads gbps(i) onto every resource of routes[i] and returns
// the highest utilization and the resource at it (-1 when nothing is loaded).
func (n *network) maxUtilization(routes [][]int, gbps func(i int) float64) (float64, int) {
	load := make([]float64, len(n.capacity))
	for i, r := range routes {
		for _, x := range r {
			load[x] += gbps(i)
		}
	}
	m, at := 0.0, -1
	for r, l := range load {
		if u := l / n.capacity[r]; u > m {
			m, at = u, r
		}
	}
	return m, at
}
