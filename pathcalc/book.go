package pathcalc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Book is the bandwidth reserved on every link direction and host NIC of a
// fabric: the ledger admission control reads and writes. Reservations never
// exceed a resource's capacity less the headroom. A Book is not safe for
// concurrent use; its owner serializes admissions, which is what makes them
// consistent.
type Book struct {
	n        *network
	reserved []float64
	excess   []float64 // see SetExcess; nil: none
	headroom float64
	// utils is every resource's reserved utilization, kept as
	// reservations change, with the highest at hand: every Fit reports
	// it, and a fabric has hundreds of thousands of resources (a
	// millisecond to look over at k=48). Releasing a reservation on the
	// busiest resource looked them all over again; with every flow of an
	// equal size most resources tie for the busiest, and a new leader
	// catching up 64,000 changes at k=48 spent a millisecond on each.
	utils maxTree
}

// maxTree holds values by index with their maximum at hand: a binary
// tree of maxima over the values, padded to a power of two (a change is
// a walk toward the root, at most 18 steps at k=48's 250,000 resources,
// ending where a maximum does not change).
type maxTree []float64

func newMaxTree(n int) maxTree {
	size := 1
	for size < n {
		size *= 2
	}
	return make(maxTree, 2*size)
}

// set makes value i v.
func (t maxTree) set(i int, v float64) {
	i += len(t) / 2
	t[i] = v
	for i > 1 {
		i /= 2
		m := math.Max(t[2*i], t[2*i+1])
		if t[i] == m {
			return // and so every maximum above it
		}
		t[i] = m
	}
}

// max is the highest value (0 when all are 0, or there are none).
func (t maxTree) max() float64 { return t[1] }

// bookCacheHops bounds the paths a Book keeps (network.budget): about
// 512 MiB at most, taken only as placements ask. Detected elephants are
// placed every second; at k=32 a permutation's 8,192 are 8,192 leaf
// pairs of 256 paths each, about a quarter of it, and a smaller bound
// starts the cache over in the middle of each placement (a round of
// 30 s instead of 1–2 s on two busy cores).
const bookCacheHops = 1 << 25

// NewBook returns an empty book for snap with down links out of service;
// headroom in [0, 1) is the fraction of every resource never reserved.
func NewBook(snap *topology.Snapshot, down map[models.LinkID]bool, headroom float64) (*Book, error) {
	if headroom < 0 || headroom >= 1 || math.IsNaN(headroom) {
		return nil, fmt.Errorf("%w: headroom must be in [0, 1)", models.ErrInvalid)
	}
	n := newNetwork(snap, down)
	n.budget = bookCacheHops
	return &Book{n: n, reserved: make([]float64, len(n.capacity)), headroom: headroom, utils: newMaxTree(len(n.capacity))}, nil
}

// Snapshot is the fabric the book is for.
func (b *Book) Snapshot() *topology.Snapshot { return b.n.snap }

// Resources names the resources a flow on path uses: the source NIC and
// each egress port, as the keys of an intent's reserved bandwidth.
func (b *Book) Resources(src models.Host, path []models.Endpoint) []string {
	out := []string{resourceName{nic: src.Name}.String()}
	for _, e := range path {
		out = append(out, resourceName{egress: e}.String())
	}
	return out
}

// resources maps a stored path to resource indices; ok is false when the
// path crosses a link that is down or a port the fabric no longer has.
func (b *Book) resources(src models.Host, path []models.Endpoint) ([]int, bool) {
	nic, ok := b.n.nicTx[src.Name]
	if !ok {
		return nil, false
	}
	out := []int{nic}
	for _, e := range path {
		r, ok := b.n.egress[e]
		if !ok {
			return nil, false
		}
		if b.n.resDown[r] {
			return nil, false
		}
		out = append(out, r)
	}
	return out, true
}

// Usable reports whether a flow from src can still use path: every port
// exists and no link on it is down.
func (b *Book) Usable(src models.Host, path []models.Endpoint) bool {
	_, ok := b.resources(src, path)
	return ok
}

// Reserve books gbps on every resource of path (negative gbps releases).
// A path that is no longer usable is refused with ErrNoPath.
func (b *Book) Reserve(src models.Host, path []models.Endpoint, gbps float64) error {
	rs, ok := b.resources(src, path)
	if !ok {
		return fmt.Errorf("%w: %s's path %v crosses a link that is down or gone", ErrNoPath, src.Name, path)
	}
	for _, r := range rs {
		b.reserved[r] = math.Max(b.reserved[r]+gbps, 0)
		b.utils.set(r, b.reserved[r]/b.n.capacity[r])
	}
	return nil
}

// ErrOvercommitted means a resource holds more reservations than its
// capacity less the headroom: a bug in whoever reserved.
var ErrOvercommitted = errors.New("reservations exceed capacity")

// Check verifies the book's invariant: no link direction or NIC is
// reserved above its capacity × (1 − headroom). Reserve does not check
// (admission does, with Fit); this is for whoever wants to be sure that
// every path that reserves asked first.
func (b *Book) Check() error {
	var bad []string
	for r, c := range b.n.capacity {
		if b.reserved[r] > c*(1-b.headroom)+1e-6 {
			bad = append(bad, fmt.Sprintf("%s: %.1f of %.1f Gb/s", b.n.resources[r], b.reserved[r], c*(1-b.headroom)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrOvercommitted, strings.Join(bad, "; "))
	}
	return nil
}

// PathConstraints restrict which of the shortest paths a flow may take.
type PathConstraints struct {
	MaxHops       int // switches on the path; 0: any
	AvoidSwitches map[models.SwitchID]bool
	AvoidLinks    map[models.LinkID]bool
}

func (b *Book) allowed(path []int, dstLeaf models.SwitchID, c PathConstraints) bool {
	return c.admits(len(path), dstLeaf) && !slices.ContainsFunc(path, func(r int) bool { return !b.hopAllowed(r, c) })
}

// admits says whether c allows a path of links hops ending at leaf dst.
func (c PathConstraints) admits(links int, dst models.SwitchID) bool {
	return (c.MaxHops <= 0 || links+1 <= c.MaxHops) && !c.AvoidSwitches[dst]
}

// hopAllowed says whether c lets a path leave through egress resource r:
// not from a switch to avoid, not over a link to avoid.
func (b *Book) hopAllowed(r int, c PathConstraints) bool {
	e := b.n.resources[r].egress
	if c.AvoidSwitches[e.Switch] {
		return false
	}
	if len(c.AvoidLinks) > 0 {
		if l, ok := b.n.snap.LinkAt(e); ok && c.AvoidLinks[l.ID()] {
			return false
		}
	}
	return true
}

// Fit is where a set of flows would go and whether they all fit.
type Fit struct {
	Fits bool `json:"fits"`
	// Paths[i] is flow i's path (egress ports, source leaf first), set
	// for every flow placed before the first that did not fit.
	Paths [][]models.Endpoint `json:"paths"`
	// Bottleneck is the tightest resource of the first flow that did not
	// fit (or, when all fit, of any flow), and FreeGbps what was left there.
	Bottleneck string  `json:"bottleneck"`
	FreeGbps   float64 `json:"free_gbps"`
	// MLU is the highest reserved utilization over the fabric once the
	// flows are added.
	MLU    float64 `json:"mlu"`
	Reason string  `json:"reason,omitempty"`
}

// Fit places flows together on top of what is reserved, each on the
// allowed shortest path with the most reservable bandwidth left (the
// flows placed before it counted), and says whether all fit. It reserves
// nothing: a dry run is the same call, and so is the admission that then
// Reserves the paths.
func (b *Book) Fit(flows []Demand, c PathConstraints) Fit {
	f := b.fitGreedy(flows, c)
	if f.Fits || len(flows) < 2 || len(c.AvoidSwitches)+len(c.AvoidLinks) > 0 || c.MaxHops > 0 {
		return f
	}
	// One at a time can strand the last flows of a full set (a line-rate
	// permutation needs every spine exactly once per leaf); place the set
	// together on what is left, as Place does, before saying no.
	if joint, ok := b.fitJoint(flows); ok {
		return joint
	}
	return f
}

// fitJoint places flows together (edge colouring or greedy with local
// search) against the residual reservable capacity.
func (b *Book) fitJoint(flows []Demand) (Fit, bool) {
	res := b.residual(b.headroom)
	routes, _, _, err := res.place(context.Background(), flows, nil)
	if err != nil {
		return Fit{}, false
	}
	load := make([]float64, len(res.capacity))
	for i, r := range routes {
		for _, x := range r {
			load[x] += flows[i].Gbps
		}
	}
	out := Fit{Fits: true, FreeGbps: math.Inf(1)}
	for r, l := range load {
		if l > res.capacity[r]+1e-9 {
			return Fit{}, false
		}
		if l > 0 && res.capacity[r]-l < out.FreeGbps {
			out.FreeGbps, out.Bottleneck = res.capacity[r]-l, b.n.resources[r].String()
		}
	}
	out.Paths = b.n.egressPaths(routes)
	for r, c := range b.n.capacity {
		out.MLU = math.Max(out.MLU, (b.reserved[r]+load[r])/c)
	}
	return out, true
}

// maxHintQPs bounds the QPs per connection QPHint tries.
const maxHintQPs = 64

// QPHint places connections (one demand each, its whole bandwidth) split
// over declared QPs, then over twice as many and so on up to 64 (and
// maxFlows flows in all), on what is reservable now, and reports the
// fewest QPs per connection that reach the lowest max reserved
// utilization. It reserves nothing.
func (b *Book) QPHint(ctx context.Context, conns []Demand, declared, maxFlows int) models.QPHint {
	declared = max(declared, 1)
	h := models.QPHint{Declared: declared, QPs: declared}
	res := b.residual(b.headroom)
	for q := declared; q <= maxHintQPs && q*len(conns) <= maxFlows; q *= 2 {
		if ctx.Err() != nil {
			break
		}
		split := make([]Demand, 0, q*len(conns))
		for _, d := range conns {
			for range q {
				split = append(split, Demand{Src: d.Src, Dst: d.Dst, Gbps: d.Gbps / float64(q)})
			}
		}
		routes, _, _, err := res.place(ctx, split, nil)
		if err != nil {
			break
		}
		load := make([]float64, len(b.n.capacity))
		for i, route := range routes {
			for _, r := range route {
				load[r] += split[i].Gbps
			}
		}
		mlu, fits := 0.0, true
		for r, c := range b.n.capacity {
			if load[r] > res.capacity[r]+1e-9 {
				fits = false
			}
			mlu = math.Max(mlu, (b.reserved[r]+load[r])/c)
		}
		if q == declared {
			h.DeclaredFits, h.DeclaredMLU = fits, mlu
			h.Fits, h.MLU = fits, mlu
			continue
		}
		if fits && (!h.Fits || mlu < h.MLU-0.01) {
			h.QPs, h.Fits, h.MLU = q, true, mlu
		}
	}
	return h
}

// residual is the book's network with each resource's capacity what the
// reservations leave of it less headroom (a sliver, never zero).
func (b *Book) residual(headroom float64) network {
	res := *b.n
	res.capacity = make([]float64, len(b.n.capacity))
	for r, c := range b.n.capacity {
		res.capacity[r] = math.Max(c*(1-headroom)-b.reserved[r], 1e-9)
	}
	return res
}

// Load is traffic on a path from a host: SetExcess takes reserved flows'
// traffic beyond their reservations this way.
type Load struct {
	Src  models.Host
	Path []models.Endpoint
	Gbps float64
}

// SetExcess records traffic that reserved flows send beyond what they
// reserved (measured): best-effort placement (PlaceOver, PlaceBest,
// PlaceJoint, Throughput) counts it as load on top of the reservations,
// since a flow an intent pins at 40 Gb/s may well send 100. Admission
// does not: it decides on reservations alone. It replaces what was set
// before; paths no longer usable are ignored.
func (b *Book) SetExcess(loads []Load) {
	b.excess = make([]float64, len(b.n.capacity))
	for _, l := range loads {
		if rs, ok := b.resources(l.Src, l.Path); ok && l.Gbps > 0 {
			for _, r := range rs {
				b.excess[r] += l.Gbps
			}
		}
	}
}

// bestEffort is the book's network with each resource's capacity what
// the reservations and the traffic beyond them leave (a sliver, never
// zero): where best-effort flows go.
func (b *Book) bestEffort() network {
	res := *b.n
	res.capacity = make([]float64, len(b.n.capacity))
	for r, c := range b.n.capacity {
		res.capacity[r] = math.Max(c-b.reserved[r]-b.excessAt(r), 1e-9)
	}
	return res
}

func (b *Book) excessAt(r int) float64 {
	if b.excess == nil {
		return 0
	}
	return b.excess[r]
}

// PlaceOver places flows together on what the book's reservations leave
// of every resource (its capacity less what is reserved; the headroom is
// not held back, nothing is reserved: this is for best-effort flows), as
// Place does: a flow keeps its previous path (previous[i], nil for none)
// while it is usable unless moving it lowers the maximum utilization of
// that residual.
func (b *Book) PlaceOver(ctx context.Context, flows []Demand, previous [][]models.Endpoint) ([][]models.Endpoint, error) {
	res := b.bestEffort()
	if previous != nil && !slices.ContainsFunc(previous, func(p []models.Endpoint) bool { return p != nil }) {
		previous = nil // nothing to keep: let equal demands be coloured
	}
	routes, _, _, err := res.place(ctx, flows, previous)
	if err != nil {
		return nil, err
	}
	return b.n.egressPaths(routes), nil
}

// ReplaceMargin is how much more predicted throughput (a share of the
// flows' total demand) a placement from scratch must promise before
// PlaceBest takes it over the incremental one. Below it, moving flows
// costs more than it gains, and two placements of equal worth never
// trade places.
const ReplaceMargin = 0.005

// Placed is where PlaceBest put best-effort flows and what it expects of
// them.
type Placed struct {
	Paths [][]models.Endpoint
	// Throughput is the predicted Σ rate / Σ demand of the chosen paths:
	// max-min fair shares of what the reservations leave.
	Throughput float64
	// OneShot is the same prediction for a placement from scratch (what
	// the flows would get if they had all arrived at once).
	OneShot float64
	// Fresh says the placement from scratch was taken.
	Fresh bool
}

// PlaceBest places best-effort flows like PlaceOver, and also from
// scratch; it keeps the incremental placement (few moves) unless the one
// from scratch promises more than ReplaceMargin more throughput. The
// incremental placement keeps paths unless moving lowers the peak
// utilization, so on its own it can stay stuck: flows detected over
// several rounds, a fabric saturated everywhere (every peak the same), a
// link that came back. Comparing with the one-shot placement is what
// makes the loop converge to the one-shot's quality, and then stay.
//
// The placement from scratch runs first, with the time there is; the
// search around the previous paths then has what is left and, out of
// time, stops where it got to (every flow placed, previous paths kept
// unless moving lowered the peak), so it is compared as it stands, never
// dropped. When the placement from scratch runs out of time, the
// incremental one stands (OneShot is 0). Dropping an incremental search
// that ran out of time, and taking the placement from scratch instead,
// moved almost every elephant, round after round, on a machine starved
// of CPU: each round's flows differed a little, and so did their
// placement from scratch. The placement from scratch keeps the whole
// round's time: it is what gets the loop out of a placement the
// incremental search cannot improve.
func (b *Book) PlaceBest(ctx context.Context, flows []Demand, previous [][]models.Endpoint) (Placed, error) {
	res := b.bestEffort()
	fresh, _, _, err := res.place(ctx, flows, nil)
	var oneShot float64 // 0 while the placement from scratch has not finished
	if err == nil {
		oneShot = res.throughput(flows, fresh)
	}
	if previous == nil || !slices.ContainsFunc(previous, func(p []models.Endpoint) bool { return p != nil }) {
		if err != nil {
			return Placed{}, err
		}
		return Placed{Fresh: true, Paths: b.n.egressPaths(fresh), Throughput: oneShot, OneShot: oneShot}, nil
	}
	// Around previous paths only a flow without a path fails (and then it
	// has none from scratch either); running out of time does not.
	inc, _, _, incErr := res.place(ctx, flows, previous)
	if incErr != nil {
		return Placed{}, incErr
	}
	if err != nil && ctx.Err() == nil {
		return Placed{}, err
	}
	out := Placed{Throughput: res.throughput(flows, inc), OneShot: oneShot}
	routes := inc // also when from scratch ran out of time
	if err == nil && oneShot > out.Throughput+ReplaceMargin {
		routes, out.Throughput, out.Fresh = fresh, oneShot, true
	}
	out.Paths = b.n.egressPaths(routes)
	return out, nil
}

// Reserved is a flow that holds a reservation on Path (an intent's flow).
type Reserved struct {
	Demand
	Path []models.Endpoint
	// Excess is what it measurably sends beyond Gbps (counted in the
	// book's SetExcess on Path): load that moves with it.
	Excess float64
}

// Joint is where PlaceJoint would move reserved flows and put best-effort
// ones.
type Joint struct {
	// Reserved[i] is reserved flow i's new path; Paths[j] best-effort
	// flow j's.
	Reserved [][]models.Endpoint
	Paths    [][]models.Endpoint
	// Throughput is the best-effort flows' predicted Σ rate / Σ demand
	// over what the reservations leave once moved.
	Throughput float64
}

// PlaceJoint places best-effort flows and the reserved flows movable
// together, from scratch: the reservations the book holds for movable
// are taken off (they must be in the book), and everything is placed on
// what the other reservations leave, two ways — all together, and the
// reserved flows first among themselves, then the best-effort ones over
// what they leave (each set then gets edge colouring when its demands
// are equal) — keeping the better for the best-effort flows whose
// reservations still fit under capacity less headroom. It changes
// nothing in the book; ok is false when neither way fits. This is what
// repairs reservations that block the best-effort flows: intents
// admitted one at a time may stack on a link an elephant then needs,
// where placed with the elephants in mind they would have spread out.
func (b *Book) PlaceJoint(ctx context.Context, movable []Reserved, flows []Demand) (Joint, bool, error) {
	base := slices.Clone(b.reserved)
	// What the reserved flows send beyond their reservations goes where
	// they go: off their current paths here, onto their new ones below.
	// Left where it was, a joint placement would put an elephant beside
	// an intent sending more than it reserved and promise it the room,
	// and the two would be moved apart and together again in turn.
	excess := make([]float64, len(b.n.capacity))
	for r := range excess {
		excess[r] = b.excessAt(r)
	}
	for _, m := range movable {
		rs, ok := b.resources(m.Src, m.Path)
		if !ok {
			return Joint{}, false, nil // a path broke: the ledger replans it first
		}
		for _, r := range rs {
			base[r] = math.Max(base[r]-m.Gbps, 0)
			excess[r] = math.Max(excess[r]-m.Excess, 0)
		}
	}
	// over is the network with what reservations and traffic beyond
	// them leave, the reserved flows' own excess on routes.
	over := func(reserved []float64, routes [][]int) network {
		load := slices.Clone(excess)
		for i, route := range routes {
			for _, r := range route {
				load[r] += movable[i].Excess
			}
		}
		res := *b.n
		res.capacity = make([]float64, len(b.n.capacity))
		for r, c := range b.n.capacity {
			res.capacity[r] = math.Max(c-reserved[r]-load[r], 1e-9)
		}
		return res
	}
	fixed := make([]Demand, len(movable))
	for i, m := range movable {
		fixed[i] = m.Demand
	}
	// evaluate books the reserved flows' routes over base and predicts
	// the best-effort flows' throughput; false if a reservation does not fit.
	evaluate := func(reservedRoutes, routes [][]int) (Joint, bool) {
		reserved := slices.Clone(base)
		for i, route := range reservedRoutes {
			for _, r := range route {
				reserved[r] += fixed[i].Gbps
			}
		}
		for r, c := range b.n.capacity {
			if reserved[r] > c*(1-b.headroom)+1e-6 {
				return Joint{}, false
			}
		}
		left := over(reserved, reservedRoutes)
		return Joint{Reserved: b.n.egressPaths(reservedRoutes), Paths: b.n.egressPaths(routes), Throughput: left.throughput(flows, routes)}, true
	}
	var best Joint
	found := false
	// All together, each reserved flow at what it sends.
	all := over(base, nil)
	sending := make([]Demand, len(movable))
	for i, m := range movable {
		sending[i] = m.Demand
		sending[i].Gbps += m.Excess
	}
	routes, _, _, err := all.place(ctx, append(sending, flows...), nil)
	if err != nil {
		return Joint{}, false, err
	}
	if j, ok := evaluate(routes[:len(fixed)], routes[len(fixed):]); ok {
		best, found = j, true
	}
	// Reserved flows first, then the best-effort ones over what they leave.
	headroomed := *b.n
	headroomed.capacity = make([]float64, len(b.n.capacity))
	for r, c := range b.n.capacity {
		headroomed.capacity[r] = math.Max(c*(1-b.headroom)-base[r], 1e-9)
	}
	fixedRoutes, _, _, err := headroomed.place(ctx, fixed, nil)
	if err != nil {
		return Joint{}, false, err
	}
	reserved := slices.Clone(base)
	for i, route := range fixedRoutes {
		for _, r := range route {
			reserved[r] += fixed[i].Gbps
		}
	}
	rest := over(reserved, fixedRoutes)
	flowRoutes, _, _, err := rest.place(ctx, flows, nil)
	if err != nil {
		return Joint{}, false, err
	}
	if j, ok := evaluate(fixedRoutes, flowRoutes); ok && (!found || j.Throughput > best.Throughput) {
		best, found = j, true
	}
	return best, found, nil
}

// Throughput predicts Σ rate / Σ demand for best-effort flows on paths:
// max-min fair shares of what the reservations leave (0 for a path that
// is not usable).
func (b *Book) Throughput(flows []Demand, paths [][]models.Endpoint) float64 {
	res := b.bestEffort()
	routes := make([][]int, len(flows))
	for i, d := range flows {
		rs, ok := b.resources(d.Src, paths[i])
		if !ok {
			continue
		}
		routes[i] = rs
	}
	return res.throughput(flows, routes)
}

// throughput is Σ max-min fair rate / Σ demand of demands on routes (a
// nil route carries nothing).
func (n *network) throughput(demands []Demand, routes [][]int) float64 {
	want := make([]float64, len(demands))
	total := 0.0
	for i, d := range demands {
		total += d.Gbps
		if routes[i] != nil {
			want[i] = d.Gbps
		}
	}
	if total <= 0 {
		return 1
	}
	sum := 0.0
	for _, r := range MaxMinFair(n.capacity, want, routes) {
		sum += r
	}
	return sum / total
}

func (b *Book) fitGreedy(flows []Demand, c PathConstraints) Fit {
	extra := map[int]float64{}
	room := func(r int) float64 { return b.n.capacity[r]*(1-b.headroom) - b.reserved[r] - extra[r] }
	var allow func(h hopIdx) bool
	if len(c.AvoidSwitches) > 0 || len(c.AvoidLinks) > 0 {
		allow = func(h hopIdx) bool { return b.hopAllowed(h.res, c) }
	}
	out := Fit{Fits: true, Paths: make([][]models.Endpoint, 0, len(flows)), FreeGbps: math.Inf(1)}
	for _, d := range flows {
		_, okS := b.n.nicTx[d.Src.Name]
		_, okD := b.n.egress[d.Dst.Attach]
		if !okS || !okD {
			return b.refuse(out, fmt.Sprintf("%s or %s is not in the fabric", d.Src.Name, d.Dst.Name))
		}
		// The path with the most reservable bandwidth left. The hosts' NIC
		// and port are on every path: among paths they limit alike, the
		// one whose fabric links have the most left, so a connection's
		// flows spread over the spines instead of stacking on the first.
		var p []int
		hops := 0
		if a, z := d.Src.Attach.Switch, d.Dst.Attach.Switch; a != z {
			var ok bool
			p, hops, ok = b.n.bestPath(a, z, room, allow)
			if hops < 0 {
				return b.refuse(out, fmt.Sprintf("no working path from %s to %s", d.Src.Name, d.Dst.Name))
			}
			if !ok {
				return b.refuse(out, fmt.Sprintf("no path from %s to %s satisfies the constraints", d.Src.Name, d.Dst.Name))
			}
		}
		if !c.admits(hops, d.Dst.Attach.Switch) {
			return b.refuse(out, fmt.Sprintf("no path from %s to %s satisfies the constraints", d.Src.Name, d.Dst.Name))
		}
		route := b.n.route(d.Src, d.Dst, p)
		bestFree, bestAt := math.Inf(1), -1
		for _, r := range route {
			if f := room(r); f < bestFree {
				bestFree, bestAt = f, r
			}
		}
		if bestFree < out.FreeGbps || bestFree < d.Gbps-1e-9 {
			out.FreeGbps, out.Bottleneck = math.Max(bestFree, 0), b.n.resources[bestAt].String()
		}
		if bestFree < d.Gbps-1e-9 {
			out.Fits = false
			out.Reason = fmt.Sprintf("%.1f Gb/s from %s to %s: at most %.1f Gb/s reservable on %s", d.Gbps, d.Src.Name, d.Dst.Name, out.FreeGbps, out.Bottleneck)
			break
		}
		var path []models.Endpoint
		for _, r := range route {
			extra[r] += d.Gbps
		}
		for _, r := range route[1:] {
			path = append(path, b.n.resources[r].egress)
		}
		out.Paths = append(out.Paths, path)
		out.FreeGbps = math.Min(out.FreeGbps, bestFree-d.Gbps)
	}
	if math.IsInf(out.FreeGbps, 1) {
		out.FreeGbps = 0
	}
	out.MLU = b.utils.max()
	for r, x := range extra {
		out.MLU = math.Max(out.MLU, (b.reserved[r]+x)/b.n.capacity[r])
	}
	return out
}

func (b *Book) refuse(f Fit, reason string) Fit {
	f.Fits, f.Reason, f.FreeGbps = false, reason, 0
	return f
}

// Available is the most bandwidth one more flow from src to dst could
// reserve now on one path, and the resource that limits it.
func (b *Book) Available(src, dst models.Host) (float64, string) {
	f := b.Fit([]Demand{{Src: src, Dst: dst, Gbps: math.SmallestNonzeroFloat64}}, PathConstraints{})
	if len(f.Paths) == 0 {
		return 0, f.Reason
	}
	free, at := math.Inf(1), ""
	rs, _ := b.resources(src, f.Paths[0])
	for _, r := range rs {
		if x := b.n.capacity[r]*(1-b.headroom) - b.reserved[r]; x < free {
			free, at = x, b.n.resources[r].String()
		}
	}
	return math.Max(free, 0), at
}

// MLU is the highest reserved utilization.
func (b *Book) MLU() float64 { return b.utils.max() }

// Connected says whether working links join src's leaf to dst's (or
// the two share a leaf): whether Candidates without constraints has a
// path, without listing them (at k=32 a leaf pair has 256).
func (b *Book) Connected(src, dst models.Host) bool {
	if src.Attach.Switch == dst.Attach.Switch {
		return true
	}
	_, ok := b.n.distTo(dst.Attach.Switch).Of(src.Attach.Switch)
	return ok
}

// Candidates lists the allowed shortest paths for a flow from src to dst
// (egress ports, source leaf first, ending at dst's port).
func (b *Book) Candidates(src, dst models.Host, c PathConstraints) [][]models.Endpoint {
	paths := [][]int{nil}
	if src.Attach.Switch != dst.Attach.Switch {
		paths = b.n.leafPaths(src.Attach.Switch, dst.Attach.Switch)
	}
	var out [][]models.Endpoint
	for _, p := range paths {
		if !b.allowed(p, dst.Attach.Switch, c) {
			continue
		}
		var path []models.Endpoint
		for _, r := range b.n.route(src, dst, p)[1:] {
			path = append(path, b.n.resources[r].egress)
		}
		out = append(out, path)
	}
	return out
}

// Room is the bandwidth still reservable along a path for a flow from src.
func (b *Book) Room(src models.Host, path []models.Endpoint) float64 {
	rs, ok := b.resources(src, path)
	if !ok {
		return 0
	}
	free := math.Inf(1)
	for _, r := range rs {
		free = math.Min(free, b.n.capacity[r]*(1-b.headroom)-b.reserved[r])
	}
	return math.Max(free, 0)
}

// Capacity is the capacity of the link direction leaving through e.
func (b *Book) Capacity(e models.Endpoint) float64 {
	if r, ok := b.n.egress[e]; ok {
		return b.n.capacity[r]
	}
	return 0
}
