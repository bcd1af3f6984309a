// Package pathcalc computes routes for a fabric: pure functions from a
// topology snapshot (and, later, link load and intents) to the forwarding
// state every switch should have. It does no I/O.
package pathcalc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// ErrTableFull means a switch would need more entries than its pipeline has.
var ErrTableFull = errors.New("more entries than the switch's tables hold")

// Limits are the pipeline sizes to respect (from the P4Info). Zero means
// unlimited.
type Limits struct {
	RouteEntries int // LPM routes per switch
	SelectorSize int // action-selector members per switch (sum of group sizes + members)
	MaxGroupSize int // members per ECMP group
	// PerLeafRoutes says routes are written as planned, one per
	// destination leaf. By default they are written merged (Aggregate),
	// and RouteEntries bounds what a switch's routes aggregate to.
	PerLeafRoutes bool
}

// Request is what Compute routes.
type Request struct {
	Limits Limits
	// DownLinks are left out of every path.
	DownLinks map[models.LinkID]bool
	// PortBias scales what the link out of a port counts for in WCMP
	// weights (0 < bias ≤ 1; absent: 1): congestion-aware weights lower it
	// on links measured hot, so the switches feeding them send less there.
	PortBias map[models.Endpoint]float64
}

// Warning is something Compute had to compromise on, such as a group trimmed
// to the pipeline's maximum size.
type Warning struct {
	Switch  models.SwitchID `json:"switch"`
	Message string          `json:"message"`
}

// Result is a plan plus what Compute had to give up to produce it.
type Result struct {
	Plan     models.Plan
	Warnings []Warning
	// Searched is how many destination leaves the plan searched in full
	// (Compute: every one; Recompute: where the change could not be
	// propagated), of Destinations.
	Searched, Destinations int
	// routing is how the plan was made, for Recompute.
	routing *routing
	// prunedFrom is, for a plan Prune made (PruneResult), the working of
	// the plan it was pruned from: its distances (see Distances), never a
	// basis for Recompute.
	prunedFrom *routing
}

// Distances is every switch's hop distance toward destination leaf dst
// over the links of snap but down, as the plan's working has it: what
// NewHops(snap, down).To(dst) finds, without a search (at k=48 a
// rollout's preparation searched up to 2,304 destinations, 0.3–0.5 ms
// each). It reports false unless the plan was made avoiding exactly
// down (for a pruned plan: the plan it was pruned from) and dst is one
// of its destinations.
func (r Result) Distances(dst models.SwitchID, down map[models.LinkID]bool) (Dist, bool) {
	rt := r.working()
	if rt == nil || !maps.Equal(rt.req.DownLinks, down) {
		return Dist{}, false
	}
	s, ok := rt.index[dst]
	if !ok {
		return Dist{}, false
	}
	j := slices.Index(rt.dests, s)
	if j < 0 {
		return Dist{}, false
	}
	return Dist{index: rt.index, d: rt.dist[j]}, true
}

// PruneResult is Prune of prev's plan, keeping prev's distances (see
// Distances); it cannot be recomputed from.
func PruneResult(snap *topology.Snapshot, prev Result, down map[models.LinkID]bool) Result {
	return Result{Plan: Prune(snap, prev.Plan, down), prunedFrom: prev.working()}
}

// working is how r's plan, or the plan it was pruned from, was made.
func (r Result) working() *routing {
	if r.routing != nil {
		return r.routing
	}
	return r.prunedFrom
}

// Compute returns shortest-path WCMP forwarding state for every switch:
//   - at a leaf, a /32 route per attached host to its port;
//   - at every other switch, for every leaf with hosts, a route to the leaf's
//     prefix (or to each of its hosts' /32 when it has no prefix) through a
//     group of all ports on shortest paths toward that leaf.
//
// Group members are weighted by what each next hop can carry onward (see
// the WCMP comment inside): equal on a symmetric fabric, so plain ECMP,
// and skewed away from next hops with less capacity left beyond them after
// failures or with mixed link speeds. Weights are reduced to small
// integers summing to at most the selector's max group size, with each
// member's share of traffic off by at most WeightTolerance (else a
// Warning says by how much).
//
// Selector members are one per egress port (member ID = port number). Groups
// are shared by routes with the same weighted port set; a group's ID is
// derived from that set so it stays the same across recomputations. Groups
// larger than Limits.MaxGroupSize keep the lowest-numbered ports and produce
// a Warning: traffic still reaches its destination, on fewer paths.
func Compute(ctx context.Context, snap *topology.Snapshot, req Request) (Result, error) {
	r, err := newRouting(ctx, snap, req)
	if err != nil {
		return Result{}, err
	}
	return r.result(nil, nil, nil)
}

// HashSeed is a switch's ECMP hash seed: the low 32 bits of its device
// ID, so that no two switches of a fabric hash alike (see FlowHash).
func HashSeed(sw models.Switch) uint32 { return uint32(sw.DeviceID) }

// PortMACs are a switch's routed ports' MAC rewrites: each port's own MAC
// as the source, and as the destination the MAC of what it is cabled to
// (the peer switch's port, or the host's NIC). Ports with nothing
// plugged in get none.
func PortMACs(snap *topology.Snapshot, sw models.Switch) []models.PortMAC {
	var out []models.PortMAC
	for _, port := range snap.Ports(sw.Name) {
		e := models.Endpoint{Switch: sw.Name, Port: port}
		pm := models.PortMAC{Port: port, Src: sw.PortMAC(port)}
		if l, ok := snap.LinkAt(e); ok {
			peer := l.B
			if l.B == e {
				peer = l.A
			}
			psw, err := snap.Switch(peer.Switch)
			if err != nil {
				continue
			}
			pm.Dst = psw.PortMAC(peer.Port)
		} else if h, ok := snap.HostAt(e); ok {
			pm.Dst = h.NICMAC()
		} else {
			continue
		}
		out = append(out, pm)
	}
	return out
}

// Punts are the EtherTypes sw sends its controller: link discovery's
// probes, and where hosts attach, their ARP (the controller answers it
// and learns their MACs).
func Punts(snap *topology.Snapshot, sw models.Switch) []uint16 {
	for _, port := range snap.Ports(sw.Name) {
		if _, ok := snap.HostAt(models.Endpoint{Switch: sw.Name, Port: port}); ok {
			return []uint16{models.EtherTypeARP, models.EtherTypeLLDP}
		}
	}
	return []uint16{models.EtherTypeLLDP}
}

// routeTable collects one switch's routes, each pointing at an interned set
// of egress ports with their capacity toward the destination.
type routeTable struct {
	sets    [][]uint32
	weights [][]float64 // nil: equal
	byHash  map[uint64][]int
	routes  []prefixRoute
	// reduced are the sets' integer weights (nil: equal) and inexact
	// whether they are off by more than WeightTolerance, once the table's
	// state is built (buildState).
	reduced [][]int32
	inexact []bool
}

type prefixRoute struct {
	prefix netip.Prefix
	set    int
}

// intern returns the index of ports (sorted, deduplicated) among the
// table's sets, adding it if new.
func (t *routeTable) intern(ports []uint32) int { return t.internWeighted(ports, nil) }

// internWeighted is intern for ports with capacities (parallel slices):
// equal capacities intern as a plain port set. It allocates only for a
// set it has not seen.
func (t *routeTable) internWeighted(ports []uint32, caps []float64) int {
	return t.internNormalized(normalize(ports, caps))
}

// normalize sorts ports in place, with caps (parallel, or nil), and drops
// repeated ports (the first one's capacity stays); caps all equal become
// nil. It allocates nothing.
func normalize(ports []uint32, caps []float64) ([]uint32, []float64) {
	equal := true
	for _, c := range caps {
		equal = equal && c == caps[0]
	}
	if equal {
		caps = nil
	}
	for i := 1; i < len(ports); i++ { // insertion sort: next hops come nearly sorted
		for j := i; j > 0 && ports[j] < ports[j-1]; j-- {
			ports[j], ports[j-1] = ports[j-1], ports[j]
			if caps != nil {
				caps[j], caps[j-1] = caps[j-1], caps[j]
			}
		}
	}
	n := 0
	for i, p := range ports {
		if i > 0 && p == ports[n-1] {
			continue
		}
		ports[n] = p
		if caps != nil {
			caps[n] = caps[i]
		}
		n++
	}
	if caps != nil {
		caps = caps[:n]
	}
	return ports[:n], caps
}

// internNormalized is intern for a normalized set (see normalize); it
// keeps copies, never ports or w.
func (t *routeTable) internNormalized(ports []uint32, w []float64) int {
	h := setHash(ports, w)
	for _, i := range t.byHash[h] {
		if slices.Equal(t.sets[i], ports) && slices.Equal(t.weights[i], w) {
			return i
		}
	}
	t.sets = append(t.sets, slices.Clone(ports))
	t.weights = append(t.weights, slices.Clone(w))
	t.byHash[h] = append(t.byHash[h], len(t.sets)-1)
	return len(t.sets) - 1
}

// FNV-1a over 64-bit words: the hash of the indexes that intern port
// sets (setHash) and route lists (routesHash).
const fnvOffset = 14695981039346656037

func fnvAdd(h, v uint64) uint64 { return (h ^ v) * 1099511628211 }

// setHash is an FNV-1a hash of ports and their capacities, for the
// indexes that intern them.
func setHash(ports []uint32, caps []float64) uint64 {
	h := uint64(fnvOffset)
	for _, p := range ports {
		h = fnvAdd(h, uint64(p))
	}
	for _, c := range caps {
		h = fnvAdd(h, math.Float64bits(c))
	}
	return h
}

// integerWeights is the group weights capacities become: trimmed to the
// selector's max group size, reduced (reduceWeights), with the error; nil
// when they come out all equal. A group of equal weights is the plain
// ECMP group of its ports: capacities that differ by a fraction of a
// percent (every leaf's, after a core link fails) give the group the
// switch already has, not a new one under another ID.
func integerWeights(caps []float64, lim Limits, total int) ([]int32, float64) {
	if lim.MaxGroupSize > 0 && len(caps) > lim.MaxGroupSize {
		caps = caps[:lim.MaxGroupSize]
	}
	w, e := reduceWeights(caps, total)
	for _, x := range w {
		if x != w[0] {
			return w, e
		}
	}
	return nil, e
}

// maxWeightTotal is the most a group's weights may add up to.
func maxWeightTotal(lim Limits) int {
	if lim.MaxGroupSize > 0 {
		return lim.MaxGroupSize
	}
	return defaultMaxWeightTotal
}

// MaxWeightTotal bounds the sum of a WCMP group's member weights: targets
// that implement weights by replicating members need that many slots, so
// it is kept to the selector's max group size (64 in accelnet.p4).
const defaultMaxWeightTotal = 64

// WeightTolerance is the largest oversubscription of any member that
// weight reduction accepts without a warning: a member given share w of
// the traffic where its capacity asks for c is oversubscribed by w/c − 1.
// What the group can carry before some member is full is its capacity
// divided by (1 + the worst oversubscription), so 5% costs at most 4.8%
// of it. A member given less than its share costs nothing of the kind
// (the WCMP paper's measure, Zhou et al., EuroSys 2014): after a leaf's
// uplink fails in a k=16 fat-tree, the leaves of other pods see
// capacities 15:14:14:14:14:14:14:14 toward that pod's other leaves, and
// equal weights oversubscribe the fourteens by 0.9% — the ECMP group the
// switches already have. Counting the fifteen's 5.8% shortfall as an
// error made every one of them take weights 8:7:7:7:7:7:7:7 instead
// (which oversubscribe the eight by 5.8%), a second write of 127 switches
// on the failure's path.
const WeightTolerance = 0.05

// reduceWeights turns capacities into small integer weights whose sum is at
// most maxTotal, choosing the smallest total whose worst oversubscription
// of any member is within WeightTolerance (else the best within maxTotal);
// it returns the weights and that oversubscription.
func reduceWeights(caps []float64, maxTotal int) ([]int32, float64) {
	sum := 0.0
	for _, c := range caps {
		sum += c
	}
	best, bestErr := []int32(nil), math.Inf(1)
	w := make([]int32, len(caps))
	for total := len(caps); total <= max(maxTotal, len(caps)); total++ {
		got := 0
		for i, c := range caps {
			w[i] = int32(max(1, math.Round(float64(total)*c/sum)))
			got += int(w[i])
		}
		if got > max(maxTotal, len(caps)) {
			continue
		}
		worst := 0.0
		for i, c := range caps {
			worst = math.Max(worst, float64(w[i])/float64(got)/(c/sum)-1) // ≥ 0 for some member
		}
		if worst < bestErr-1e-12 {
			best, bestErr = append(best[:0], w...), worst
		}
		if worst <= WeightTolerance {
			break
		}
	}
	return best, bestErr
}

// portSetKey names a group by its ports (and weights, when not equal), so
// its ID is the same whenever the plan is recomputed.
func portSetKey(ports []uint32, weights []int32) string {
	b := make([]byte, 0, 4*len(ports))
	for i, p := range ports {
		b = strconv.AppendUint(b, uint64(p), 10)
		if weights != nil {
			b = append(b, '*')
			b = strconv.AppendInt(b, int64(weights[i]), 10)
		}
		b = append(b, ',')
	}
	return string(b)
}

// groupID derives a stable non-zero 31-bit ID from a port set, probing past
// IDs already taken on the same switch.
func groupID(key string, taken map[uint32]bool) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	id := h.Sum32() & 0x7fffffff
	for id == 0 || taken[id] {
		id = (id + 1) & 0x7fffffff
	}
	return id
}

// buildState is switch sw's state from its table (routes included).
func buildState(sw models.SwitchID, t *routeTable, lim Limits) (models.ForwardingState, []Warning, error) {
	used := make([]bool, len(t.sets))
	for _, r := range t.routes {
		used[r.set] = true
	}
	g, err := fittedGroups(sw, t, lim, used)
	if err != nil {
		return models.ForwardingState{}, nil, err
	}
	routes := make([]models.Route, 0, len(t.routes))
	for _, r := range t.routes {
		if to := g.target[r.set]; to != (models.Route{}) {
			to.Prefix = r.prefix
			routes = append(routes, to)
		}
	}
	if n := len(routes); lim.RouteEntries > 0 && n > lim.RouteEntries {
		if !lim.PerLeafRoutes {
			n = len(Aggregate(routes))
		}
		if n > lim.RouteEntries {
			return models.ForwardingState{}, nil, fmt.Errorf("%w: %s needs %d routes, ipv4_lpm holds %d", ErrTableFull, sw, n, lim.RouteEntries)
		}
	}
	st := g.state()
	slices.SortFunc(routes, models.CompareRoutes)
	st.Routes = routes
	return st, g.warnings, nil
}

// groups is what a table's sets make on its switch: per set, what its
// routes point at (a group or a single member; zero: nothing); the
// groups and members; and the warnings.
type groups struct {
	target   []models.Route // Prefix unset
	groups   []models.Group
	members  []models.Member
	warnings []Warning
}

// state is a canonical state of the groups and members alone.
func (g groups) state() models.ForwardingState {
	return models.ForwardingState{Members: g.members, Groups: g.groups}.Canonical()
}

// fittedGroups makes the groups of the table's used sets within the
// selector: with WCMP weights out of maxWeightTotal, or, when so many
// distinct weightings do not fit (congestion weights biasing many
// destinations' groups apart), with coarser weights, halving the total
// down to equal ones (a warning says so); an error when even plain ECMP
// groups do not fit.
func fittedGroups(sw models.SwitchID, t *routeTable, lim Limits, used []bool) (groups, error) {
	full := maxWeightTotal(lim)
	for total := full; ; total /= 2 {
		g := planGroups(sw, t, lim, used, total)
		err := g.fits(sw, lim)
		if err == nil || total <= 1 {
			if err == nil && total < full {
				g.warnings = append(g.warnings, Warning{Switch: sw, Message: fmt.Sprintf(
					"WCMP weights coarsened to a total of %d (1: equal) so that the groups fit the selector's %d entries", total, lim.SelectorSize)})
			}
			return g, err
		}
	}
}

// planGroups makes the groups of the table's used sets, their weights
// reduced to add up to at most total (1 or less: equal weights), setting
// the table's reduced weights (it is done: they are kept for Recompute).
func planGroups(sw models.SwitchID, t *routeTable, lim Limits, used []bool, total int) groups {
	var g groups
	// Trim sets over the selector's group limit, once per set, and turn
	// capacities into integer weights.
	sets := make([][]uint32, len(t.sets))
	weights := make([][]int32, len(t.sets))
	// One warning per group: sets whose capacities differ but make the
	// same weights are one group (the worst error of them is reported).
	type inexactGroup struct {
		ports []uint32
		worst float64
	}
	var inexact []inexactGroup
	groupAt := map[string]int{} // in inexact, by group key
	inexactAt := make([]bool, len(t.sets))
	for i, ports := range t.sets {
		if lim.MaxGroupSize > 0 && len(ports) > lim.MaxGroupSize {
			g.warnings = append(g.warnings, Warning{Switch: sw, Message: fmt.Sprintf(
				"%d equal-cost ports toward some prefixes; the selector's max group size is %d, so only ports %d..%d are used",
				len(ports), lim.MaxGroupSize, ports[0], ports[lim.MaxGroupSize-1])})
			ports = ports[:lim.MaxGroupSize]
		}
		sets[i] = ports
		if t.weights[i] != nil && total > 1 {
			w, e := integerWeights(t.weights[i], lim, total)
			inexactAt[i] = e > WeightTolerance
			if e > WeightTolerance {
				k := portSetKey(ports, w)
				at, seen := groupAt[k]
				if !seen {
					at = len(inexact)
					groupAt[k] = at
					inexact = append(inexact, inexactGroup{ports: ports})
				}
				inexact[at].worst = max(inexact[at].worst, e)
			}
			weights[i] = w
		}
	}
	for _, x := range inexact {
		g.warnings = append(g.warnings, Warning{Switch: sw, Message: fmt.Sprintf(
			"WCMP weights for ports %v within a total of %d oversubscribe a member by up to %.0f%%", x.ports, total, 100*x.worst)})
	}
	t.reduced, t.inexact = weights, inexactAt
	members := map[uint32]bool{}
	g.target = make([]models.Route, len(sets))
	// Sets whose capacities differ can reduce to the same integer weights:
	// they share one group (every one of them must get its ID, or its
	// routes would be left out).
	var keys []string
	setsOf := map[string][]int{}
	for i, ports := range sets {
		if !used[i] {
			continue
		}
		for _, p := range ports {
			members[p] = true
		}
		switch {
		case len(ports) == 1:
			g.target[i].MemberID = ports[0]
		case len(ports) > 1:
			k := portSetKey(ports, weights[i])
			if len(setsOf[k]) == 0 {
				keys = append(keys, k)
			}
			setsOf[k] = append(setsOf[k], i)
		}
	}
	slices.Sort(keys)
	taken := map[uint32]bool{}
	for _, k := range keys {
		i := setsOf[k][0]
		id := groupID(k, taken)
		taken[id] = true
		for _, j := range setsOf[k] {
			g.target[j].GroupID = id
		}
		group := models.Group{ID: id}
		for j, p := range sets[i] {
			w := int32(1)
			if weights[i] != nil {
				w = weights[i][j]
			}
			group.Members = append(group.Members, models.GroupMember{MemberID: p, Weight: w})
		}
		g.groups = append(g.groups, group)
	}
	for port := range members {
		g.members = append(g.members, models.Member{ID: port, Port: port})
	}
	return g
}

// fits fails when the groups and members do not fit the selector.
func (g groups) fits(sw models.SwitchID, lim Limits) error {
	used := len(g.members)
	for _, x := range g.groups {
		used += len(x.Members)
	}
	if lim.SelectorSize > 0 && used > lim.SelectorSize {
		return fmt.Errorf("%w: %s needs %d selector entries, the selector holds %d", ErrTableFull, sw, used, lim.SelectorSize)
	}
	return nil
}

// Distances is every switch's hop distance to switch dst over the links
// that are not down (switches that cannot reach it are absent).
func Distances(snap *topology.Snapshot, dst models.SwitchID, down map[models.LinkID]bool) map[models.SwitchID]int {
	d := NewHops(snap, down).To(dst)
	out := make(map[models.SwitchID]int, len(d.d))
	for sw, i := range d.index {
		if d.d[i] >= 0 {
			out[sw] = int(d.d[i])
		}
	}
	return out
}
