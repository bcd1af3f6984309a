package fabricsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
)

// Workload patterns: pathcalc generates them, so the evaluator and the
// emulated fabric run the same traffic.
const (
	PatternPermutation = pathcalc.PatternPermutation
	PatternStride      = pathcalc.PatternStride
	PatternRing        = pathcalc.PatternRing
	PatternAllToAll    = pathcalc.PatternAllToAll
	PatternIncast      = pathcalc.PatternIncast
	PatternMultiTenant = pathcalc.PatternMultiTenant
)

// WorkloadSpec describes traffic to generate.
type WorkloadSpec struct {
	Pattern string `json:"pattern"`
	// Gbps is what each sending host offers in total, shared over its
	// connections and their queue pairs.
	Gbps float64 `json:"gbps"`
	// QPsPerConnection splits every connection into that many flows with
	// their own UDP source ports (RoCEv2 entropy); default 1.
	QPsPerConnection int    `json:"qps_per_connection,omitempty"`
	Seed             uint64 `json:"seed,omitempty"`
	Stride           int    `json:"stride,omitempty"`         // stride: default hosts per leaf
	IncastSenders    int    `json:"incast_senders,omitempty"` // incast: default 8
	Tenants          int    `json:"tenants,omitempty"`        // multi-tenant: default 4
	// MessageBytes is the per-rank buffer used for completion-time
	// estimates; default 1 GiB.
	MessageBytes float64 `json:"message_bytes,omitempty"`
}

// Validate checks the spec against a fabric's size.
func (s WorkloadSpec) Validate() error {
	switch s.Pattern {
	case PatternPermutation, PatternStride, PatternRing, PatternAllToAll, PatternIncast, PatternMultiTenant:
	default:
		return fmt.Errorf("%w: pattern %q: want permutation, stride, ring-allreduce, all-to-all, incast or multi-tenant", models.ErrInvalid, s.Pattern)
	}
	if !(s.Gbps > 0) || s.Gbps > 1e6 {
		return fmt.Errorf("%w: gbps must be in (0, 1e6]", models.ErrInvalid)
	}
	if s.QPsPerConnection < 0 || s.QPsPerConnection > 1024 {
		return fmt.Errorf("%w: qps_per_connection must be 0-1024", models.ErrInvalid)
	}
	if s.Stride < 0 || s.IncastSenders < 0 || s.Tenants < 0 || s.MessageBytes < 0 {
		return fmt.Errorf("%w: stride, incast_senders, tenants and message_bytes must not be negative", models.ErrInvalid)
	}
	return nil
}

// connection is one sender→receiver pair of a workload; its flows are its QPs.
type connection struct {
	src, dst models.Host
	flows    []uint64
}

// collective groups connections whose completion is estimated together.
type collective struct {
	kind  string // ring-allreduce, all-to-all, or point-to-point
	ranks int
	conns []*connection
}

type workload struct {
	id          string
	spec        WorkloadSpec
	collectives []*collective
	flows       []uint64
}

// plan turns a spec into connections, grouped into collectives.
func (f *Fabric) plan(spec WorkloadSpec) ([]*collective, error) {
	cols, err := pathcalc.Traffic(f.snap, pathcalc.TrafficSpec{
		Pattern: spec.Pattern, Seed: spec.Seed, Stride: spec.Stride, IncastSenders: spec.IncastSenders, Tenants: spec.Tenants,
	})
	if err != nil {
		return nil, err
	}
	out := make([]*collective, len(cols))
	for i, c := range cols {
		out[i] = &collective{kind: c.Kind, ranks: c.Ranks}
		for _, conn := range c.Conns {
			out[i].conns = append(out[i].conns, &connection{src: conn.Src, dst: conn.Dst})
		}
	}
	return out, nil
}

// StartWorkload generates a workload's flows and offers them; the ID names
// it in WorkloadFigures and StopWorkload.
func (f *Fabric) StartWorkload(spec WorkloadSpec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	if spec.QPsPerConnection == 0 {
		spec.QPsPerConnection = 1
	}
	if spec.MessageBytes == 0 {
		spec.MessageBytes = 1 << 30
	}
	cols, err := f.plan(spec)
	if err != nil {
		return "", err
	}
	perHost := map[string]int{}
	for _, c := range cols {
		for _, conn := range c.conns {
			perHost[conn.src.Name]++
		}
	}
	rng := rand.New(rand.NewPCG(spec.Seed^0x5bd1e995, spec.Seed))
	var specs []FlowSpec
	var owners []*connection
	for _, c := range cols {
		for _, conn := range c.conns {
			demand := spec.Gbps / float64(perHost[conn.src.Name]) / float64(spec.QPsPerConnection)
			for range spec.QPsPerConnection {
				specs = append(specs, FlowSpec{
					Src: conn.src.IP, Dst: conn.dst.IP,
					SrcPort:    uint16(49152 + rng.IntN(16384)),
					DestQP:     uint32(rng.IntN(1 << 24)),
					DemandGbps: demand,
				})
				owners = append(owners, conn)
			}
		}
	}
	f.mu.Lock()
	f.nextWork++
	id := fmt.Sprintf("w%d", f.nextWork)
	f.mu.Unlock()
	ids, err := f.addFlows(specs, id)
	if err != nil {
		return "", err
	}
	for i, fid := range ids {
		owners[i].flows = append(owners[i].flows, fid)
	}
	f.mu.Lock()
	f.workloads[id] = &workload{id: id, spec: spec, collectives: cols, flows: ids}
	f.mu.Unlock()
	return id, nil
}

// StopWorkload removes a workload's flows.
func (f *Fabric) StopWorkload(id string) error {
	f.mu.Lock()
	w, ok := f.workloads[id]
	if ok {
		delete(f.workloads, id)
	}
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("workload %q: %w", id, ErrUnknown)
	}
	f.RemoveFlows(w.flows)
	return nil
}

// CollectiveFigures estimate a collective's completion from its flows'
// current rates, the way nccl-tests reports bandwidth.
type CollectiveFigures struct {
	Kind  string `json:"kind"`
	Ranks int    `json:"ranks"`
	// CompletionSeconds for MessageBytes per rank; 0 with Stalled when some
	// connection gets no bandwidth.
	CompletionSeconds float64 `json:"completion_seconds"`
	AlgBWGBps         float64 `json:"algbw_gbytes_per_s"`
	BusBWGBps         float64 `json:"busbw_gbytes_per_s"`
	Stalled           bool    `json:"stalled,omitempty"`
}

// WorkloadFigures summarize how a workload is served right now.
type WorkloadFigures struct {
	ID              string              `json:"id"`
	Spec            WorkloadSpec        `json:"spec"`
	Flows           int                 `json:"flows"`
	Delivered       int                 `json:"delivered"`
	DemandGbps      float64             `json:"demand_gbps"`
	ThroughputGbps  float64             `json:"throughput_gbps"`
	ThroughputRatio float64             `json:"throughput_ratio"` // Σ rates / Σ demands
	MinFlowGbps     float64             `json:"min_flow_gbps"`
	MedianFlowGbps  float64             `json:"median_flow_gbps"`
	Collectives     []CollectiveFigures `json:"collectives"`
}

// Workloads lists the running workloads' IDs.
func (f *Fabric) Workloads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.workloads))
	for id := range f.workloads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// WorkloadFigures computes a workload's figures from the current rates.
func (f *Fabric) WorkloadFigures(id string) (WorkloadFigures, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workloads[id]
	if !ok {
		return WorkloadFigures{}, fmt.Errorf("workload %q: %w", id, ErrUnknown)
	}
	f.recomputeLocked()
	wf := WorkloadFigures{ID: id, Spec: w.spec, Flows: len(w.flows)}
	rates := make([]float64, 0, len(w.flows))
	for _, fid := range w.flows {
		fl := f.flows[fid]
		if fl == nil {
			continue
		}
		wf.DemandGbps += fl.Spec.DemandGbps
		wf.ThroughputGbps += fl.RateGbps
		if fl.Delivered {
			wf.Delivered++
		}
		rates = append(rates, fl.RateGbps)
	}
	if wf.DemandGbps > 0 {
		wf.ThroughputRatio = wf.ThroughputGbps / wf.DemandGbps
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		wf.MinFlowGbps = rates[0]
		wf.MedianFlowGbps = rates[len(rates)/2]
		if len(rates)%2 == 0 {
			wf.MedianFlowGbps = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
		}
	}
	for _, c := range w.collectives {
		wf.Collectives = append(wf.Collectives, f.collectiveFiguresLocked(c, w.spec.MessageBytes))
	}
	return wf, nil
}

// collectiveFiguresLocked: each connection moves its share of the buffer at
// the sum of its QPs' rates; the slowest connection sets the time.
//   - ring all-reduce: every connection carries 2(n−1)/n · S; busbw = algbw · 2(n−1)/n
//   - all-to-all: every connection carries S/n; busbw = algbw · (n−1)/n
//   - point-to-point: every connection carries S; busbw = algbw
func (f *Fabric) collectiveFiguresLocked(c *collective, msg float64) CollectiveFigures {
	n := float64(c.ranks)
	perConn, factor := msg, 1.0
	switch c.kind {
	case PatternRing:
		perConn, factor = 2*(n-1)/n*msg, 2*(n-1)/n
	case PatternAllToAll:
		perConn, factor = msg/n, (n-1)/n
	}
	cf := CollectiveFigures{Kind: c.kind, Ranks: c.ranks}
	worst := 0.0
	for _, conn := range c.conns {
		gbps := 0.0
		for _, fid := range conn.flows {
			if fl := f.flows[fid]; fl != nil {
				gbps += fl.RateGbps
			}
		}
		if gbps <= 0 {
			cf.Stalled = true
			return cf
		}
		worst = math.Max(worst, perConn*8/(gbps*1e9))
	}
	if worst > 0 {
		cf.CompletionSeconds = worst
		cf.AlgBWGBps = msg / worst / 1e9
		cf.BusBWGBps = cf.AlgBWGBps * factor
	}
	return cf
}
