package pathcalc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Evaluation methods.
const (
	MethodECMP    = "ecmp"     // hashing, one QP (UDP source port) per connection
	MethodECMP4QP = "ecmp-4qp" // hashing, each connection split over 4 QPs
	MethodECMP8QP = "ecmp-8qp"
	// MethodAccelnet places each connection whole, on one QP: what the
	// controller installs for connections declared with one UDP source
	// port (it pins the QPs a tenant declares, never more).
	MethodAccelnet = "accelnet"
	// MethodAccelnetQPs splits every connection into as many QPs as it
	// takes to come within 2% of the lower bound (up to 32, or a leaf's
	// working uplinks): what a tenant gets by declaring that many source
	// ports (the dry run and intent status say how many).
	MethodAccelnetQPs = "accelnet-qps"
)

// Methods lists every evaluation method.
var Methods = []string{MethodECMP, MethodECMP4QP, MethodECMP8QP, MethodAccelnet, MethodAccelnetQPs}

// Failures an evaluation can apply.
const (
	FailNone  = ""
	FailLink  = "link"  // the first leaf's first uplink
	FailSpine = "spine" // every link of the first spine
)

// EvalCase is one cell of the evaluator's grid.
type EvalCase struct {
	Topology string // a topology.ParseSpec spec
	Pattern  string
	Method   string
	Fail     string
	Trials   int
	Seed     uint64
}

// EvalResult is a cell's figures, averaged over its trials.
type EvalResult struct {
	Topology string `json:"topology"`
	Pattern  string `json:"pattern"`
	Method   string `json:"method"`
	Fail     string `json:"fail,omitempty"`
	Trials   int    `json:"trials"`
	// MLU is the maximum utilization (offered load over capacity) over every
	// link direction and NIC.
	MLU float64 `json:"mlu"`
	// MLUBoundRatio is MLU over a lower bound no routing can beat (see LowerBound).
	MLUBoundRatio float64 `json:"mlu_bound_ratio"`
	// ThroughputRatio is Σ rates / Σ demands under max-min fair sharing.
	ThroughputRatio float64 `json:"throughput_ratio"`
	// WorstThroughputRatio is the lowest trial's throughput ratio.
	WorstThroughputRatio float64 `json:"worst_throughput_ratio"`
	SolveMS              float64 `json:"solve_ms"`
	// QPs is the queue pairs per connection (the most any trial used).
	QPs int `json:"qps"`
}

// failedLinks picks the links a failure takes down.
func failedLinks(snap *topology.Snapshot, fail string) (map[models.LinkID]bool, error) {
	down := map[models.LinkID]bool{}
	switch fail {
	case FailNone:
	case FailLink:
		for _, sw := range snap.Switches() {
			if sw.Role == models.RoleLeaf {
				for _, a := range snap.Neighbors(sw.Name) {
					down[a.Link] = true
					return down, nil
				}
			}
		}
	case FailSpine:
		for _, sw := range snap.Switches() {
			if sw.Role == models.RoleSpine {
				for _, a := range snap.Neighbors(sw.Name) {
					down[a.Link] = true
				}
				return down, nil
			}
		}
	default:
		return nil, fmt.Errorf("%w: failure %q: want link or spine", models.ErrInvalid, fail)
	}
	return down, nil
}

// demandsOf turns a pattern into per-connection demands: every sending
// host offers its NIC's line rate, shared equally over its connections.
func demandsOf(cols []Collective) []Demand {
	perHost := map[string]int{}
	for _, c := range cols {
		for _, conn := range c.Conns {
			perHost[conn.Src.Name]++
		}
	}
	var ds []Demand
	for _, c := range cols {
		for _, conn := range c.Conns {
			ds = append(ds, Demand{Src: conn.Src, Dst: conn.Dst, Gbps: conn.Src.NICGbps / float64(perHost[conn.Src.Name])})
		}
	}
	return ds
}

// LowerBound is a utilization no routing of the demands can go below: the
// largest of every NIC's send and receive load, every leaf's traffic in or
// out over its working uplinks, and every fat-tree pod's traffic in or out
// over its working core links (cut bounds).
func LowerBound(snap *topology.Snapshot, down map[models.LinkID]bool, demands []Demand) float64 {
	bound := 0.0
	out, in := map[string]float64{}, map[string]float64{}
	leafOut, leafIn := map[models.SwitchID]float64{}, map[models.SwitchID]float64{}
	podOut, podIn := map[int]float64{}, map[int]float64{}
	pod := map[models.SwitchID]int{}
	for _, sw := range snap.Switches() {
		pod[sw.Name] = sw.Pod
	}
	for _, d := range demands {
		out[d.Src.Name] += d.Gbps
		in[d.Dst.Name] += d.Gbps
		a, b := d.Src.Attach.Switch, d.Dst.Attach.Switch
		if a != b {
			leafOut[a] += d.Gbps
			leafIn[b] += d.Gbps
		}
		if pa, pb := pod[a], pod[b]; pa != 0 && pa != pb {
			podOut[pa] += d.Gbps
			podIn[pb] += d.Gbps
		}
	}
	for _, h := range snap.Hosts() {
		bound = max(bound, out[h.Name]/h.NICGbps, in[h.Name]/h.NICGbps)
	}
	upCap := map[models.SwitchID]float64{}
	podCap := map[int]float64{}
	for _, l := range snap.Links() {
		if down[l.ID()] {
			continue
		}
		for _, end := range [2][2]models.Endpoint{{l.A, l.B}, {l.B, l.A}} {
			sw, _ := snap.Switch(end[0].Switch)
			peer, _ := snap.Switch(end[1].Switch)
			if sw.Role == models.RoleLeaf {
				upCap[sw.Name] += l.Gbps
			}
			if sw.Pod != 0 && peer.Pod != sw.Pod {
				podCap[sw.Pod] += l.Gbps
			}
		}
	}
	for leaf, c := range upCap {
		bound = max(bound, leafOut[leaf]/c, leafIn[leaf]/c)
	}
	for p, c := range podCap {
		bound = max(bound, podOut[p]/c, podIn[p]/c)
	}
	return bound
}

// Evaluate runs one cell: it generates the pattern's traffic Trials times
// (seeds Seed+1…), routes it with the method, and reports MLU against the
// lower bound and max-min throughput.
func Evaluate(ctx context.Context, c EvalCase) (EvalResult, error) {
	topo, err := topology.ParseSpec(c.Topology)
	if err != nil {
		return EvalResult{}, err
	}
	snap, err := topology.New(topo)
	if err != nil {
		return EvalResult{}, err
	}
	down, err := failedLinks(snap, c.Fail)
	if err != nil {
		return EvalResult{}, err
	}
	if c.Trials < 1 {
		c.Trials = 1
	}
	qps := map[string]int{MethodECMP: 1, MethodECMP4QP: 4, MethodECMP8QP: 8, MethodAccelnet: 0, MethodAccelnetQPs: 0}
	k, ok := qps[c.Method]
	if !ok {
		return EvalResult{}, fmt.Errorf("%w: method %q: want ecmp, ecmp-4qp, ecmp-8qp, accelnet or accelnet-qps", models.ErrInvalid, c.Method)
	}
	res := EvalResult{Topology: c.Topology, Pattern: c.Pattern, Method: c.Method, Fail: c.Fail, Trials: c.Trials, WorstThroughputRatio: 1}
	n := newNetwork(snap, down)
	for trial := range c.Trials {
		seed := c.Seed + uint64(trial) + 1
		cols, err := Traffic(snap, TrafficSpec{Pattern: c.Pattern, Seed: seed})
		if err != nil {
			return EvalResult{}, err
		}
		demands := demandsOf(cols)
		bound := LowerBound(snap, down, demands)
		start := time.Now()
		var flowDemand []float64
		var routes [][]int
		switch {
		case c.Method == MethodAccelnetQPs:
			var err error
			var q int
			if routes, flowDemand, q, err = n.placeSplit(ctx, demands, bound); err != nil {
				return EvalResult{}, err
			}
			res.QPs = max(res.QPs, q)
		case k == 0:
			var err error
			if routes, _, _, err = n.place(ctx, demands, nil); err != nil {
				return EvalResult{}, err
			}
			flowDemand = flowDemand[:0]
			for _, d := range demands {
				flowDemand = append(flowDemand, d.Gbps)
			}
			res.QPs = 1
		default:
			res.QPs = k
			rng := rand.New(rand.NewPCG(seed, 0x51ed))
			for _, d := range demands {
				for range k {
					sport := uint16(49152 + rng.IntN(16384))
					path := n.ecmpPath(d.Src, d.Dst, sport)
					if path == nil && d.Src.Attach.Switch != d.Dst.Attach.Switch {
						return EvalResult{}, fmt.Errorf("%w from %s to %s", ErrNoPath, d.Src.Name, d.Dst.Name)
					}
					routes = append(routes, n.route(d.Src, d.Dst, path))
					flowDemand = append(flowDemand, d.Gbps/float64(k))
				}
			}
		}
		res.SolveMS += float64(time.Since(start).Microseconds()) / 1000
		mlu, _ := n.maxUtilization(routes, func(i int) float64 { return flowDemand[i] })
		rates := MaxMinFair(n.capacity, flowDemand, routes)
		sum, want := 0.0, 0.0
		for i := range rates {
			sum += rates[i]
			want += flowDemand[i]
		}
		tr := sum / want
		res.MLU += mlu
		if bound > 0 {
			res.MLUBoundRatio += mlu / bound
		}
		res.ThroughputRatio += tr
		res.WorstThroughputRatio = min(res.WorstThroughputRatio, tr)
	}
	t := float64(c.Trials)
	res.MLU /= t
	res.MLUBoundRatio /= t
	res.ThroughputRatio /= t
	res.SolveMS /= t
	return res, nil
}

// StandardGrid is the evaluator's default set of cases.
func StandardGrid(trials int, seed uint64) []EvalCase {
	topologies := []string{"leafspine:16x16x16", "leafspine:32x32x32", "fattree:8", "fattree:16", "rail:16x8x16", "oversub:16x16x8"}
	var out []EvalCase
	for _, topo := range topologies {
		for _, fail := range []string{FailNone, FailLink, FailSpine} {
			for _, pattern := range Patterns {
				for _, method := range Methods {
					out = append(out, EvalCase{Topology: topo, Pattern: pattern, Method: method, Fail: fail, Trials: trials, Seed: seed})
				}
			}
		}
	}
	return slices.Clip(out)
}

// splitCounts are the queue pairs per demand placeSplit tries, in order:
// 1, 2, 4, … 32, then the working uplink counts of the demands' source
// leaves (up to 64) not tried yet.
func (n *network) splitCounts(demands []Demand) []int {
	out := []int{1, 2, 4, 8, 16, 32}
	seen := map[models.SwitchID]bool{}
	var extra []int
	for _, d := range demands {
		leaf := d.Src.Attach.Switch
		if seen[leaf] {
			continue
		}
		seen[leaf] = true
		up := 0
		n.snap.EachNeighbor(leaf, func(a topology.Adjacency) {
			if !n.down[a.Link] {
				up++
			}
		})
		if up > 1 && up <= 64 && !slices.Contains(out, up) && !slices.Contains(extra, up) {
			extra = append(extra, up)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// placeSplit places demands whole and, while the result is more than 2%
// above the lower bound, again with every demand split over more queue
// pairs (each its own UDP source port, so each can take its own path):
// 2, 4, … 32, then as many as a source leaf has working uplinks (k flows
// over k of them spread exactly); it keeps the lowest MLU. Integral
// routing cannot always reach a fractional bound (32 flows over 31
// working uplinks need 2 on some link: 31 QPs each spread evenly, 32 leave
// 2.9% over); splitting closes the gap at the cost of more flow-pin
// entries.
func (n *network) placeSplit(ctx context.Context, demands []Demand, bound float64) ([][]int, []float64, int, error) {
	var bestRoutes [][]int
	var bestDemand []float64
	bestMLU, bestQ := 0.0, 1
	for _, q := range n.splitCounts(demands) {
		split := make([]Demand, 0, q*len(demands))
		for _, d := range demands {
			for range q {
				split = append(split, Demand{Src: d.Src, Dst: d.Dst, Gbps: d.Gbps / float64(q)})
			}
		}
		routes, _, _, err := n.place(ctx, split, nil)
		if err != nil {
			return nil, nil, 0, err
		}
		mlu, _ := n.maxUtilization(routes, func(i int) float64 { return split[i].Gbps })
		if bestRoutes == nil || mlu < bestMLU-1e-9 {
			bestRoutes, bestMLU, bestQ = routes, mlu, q
			bestDemand = bestDemand[:0]
			for _, d := range split {
				bestDemand = append(bestDemand, d.Gbps)
			}
		}
		if bound <= 0 || bestMLU <= 1.02*bound {
			break
		}
	}
	return bestRoutes, bestDemand, bestQ, nil
}
