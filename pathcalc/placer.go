package pathcalc

import (
	"context"
	"fmt"
	"slices"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Placer holds a placement and keeps it current as demands come and go and
// links fail, moving only the demands that must move: a new demand takes the
// least loaded path, a removed one frees its links, and a failed link's
// demands move to the least loaded working path; nothing else changes.
// Call Place for a full re-optimization. A Placer is not safe for
// concurrent use.
type Placer struct {
	n          *network
	demands    []Demand
	candidates [][][]int
	choice     []int
	live       []bool
	load       []float64
	deadRes    map[int]bool
}

// NewPlacer places demands with Place and keeps the result.
func NewPlacer(ctx context.Context, snap *topology.Snapshot, demands []Demand, down map[models.LinkID]bool) (*Placer, error) {
	n := newNetwork(snap, down)
	p := &Placer{n: n, load: make([]float64, len(n.capacity)), deadRes: map[int]bool{}}
	routes, _, _, err := n.place(ctx, demands, nil)
	if err != nil {
		return nil, err
	}
	for i, d := range demands {
		cands := [][]int{nil}
		if d.Src.Attach.Switch != d.Dst.Attach.Switch {
			cands = n.leafPaths(d.Src.Attach.Switch, d.Dst.Attach.Switch)
		}
		inner := routes[i][1 : len(routes[i])-1]
		c := slices.IndexFunc(cands, func(path []int) bool { return slices.Equal(path, inner) })
		p.add(d, cands, c)
	}
	return p, nil
}

func (p *Placer) add(d Demand, cands [][]int, choice int) int {
	p.demands = append(p.demands, d)
	p.candidates = append(p.candidates, cands)
	p.choice = append(p.choice, choice)
	p.live = append(p.live, true)
	i := len(p.demands) - 1
	p.charge(i, 1)
	return i
}

func (p *Placer) charge(i int, sign float64) {
	d := p.demands[i]
	for _, r := range p.n.route(d.Src, d.Dst, p.candidates[i][p.choice[i]]) {
		p.load[r] += sign * d.Gbps
	}
}

func (p *Placer) usable(path []int) bool {
	for _, r := range path {
		if p.deadRes[r] {
			return false
		}
	}
	return true
}

// best is demand i's working candidate with the lowest resulting bottleneck.
func (p *Placer) best(i int) int {
	d := p.demands[i]
	bi, bm := -1, 0.0
	for c, path := range p.candidates[i] {
		if !p.usable(path) {
			continue
		}
		m := 0.0
		for _, r := range path {
			m = max(m, (p.load[r]+d.Gbps)/p.n.capacity[r])
		}
		if bi < 0 || m < bm-1e-12 {
			bi, bm = c, m
		}
	}
	return bi
}

// Add places one more demand on its least loaded path and returns its index.
func (p *Placer) Add(d Demand) (int, error) {
	cands := [][]int{nil}
	if d.Src.Attach.Switch != d.Dst.Attach.Switch {
		cands = p.n.leafPaths(d.Src.Attach.Switch, d.Dst.Attach.Switch)
	}
	p.demands = append(p.demands, d)
	p.candidates = append(p.candidates, cands)
	p.choice = append(p.choice, 0)
	p.live = append(p.live, false)
	i := len(p.demands) - 1
	c := p.best(i)
	if c < 0 {
		p.demands, p.candidates, p.choice, p.live = p.demands[:i], p.candidates[:i], p.choice[:i], p.live[:i]
		return -1, fmt.Errorf("%w from %s to %s", ErrNoPath, d.Src.Name, d.Dst.Name)
	}
	p.choice[i], p.live[i] = c, true
	p.charge(i, 1)
	return i, nil
}

// Remove frees demand i's bandwidth.
func (p *Placer) Remove(i int) {
	if i < 0 || i >= len(p.live) || !p.live[i] {
		return
	}
	p.charge(i, -1)
	p.live[i] = false
}

// FailLink takes a link out of service and moves the demands that used it;
// it returns how many moved, and an error naming a demand left without a path.
func (p *Placer) FailLink(id models.LinkID) (int, error) {
	l, err := p.n.snap.Link(id)
	if err != nil {
		return 0, err
	}
	for _, e := range []models.Endpoint{l.A, l.B} {
		if r, ok := p.n.egress[e]; ok {
			p.deadRes[r] = true
		}
	}
	moved := 0
	var stranded error
	for i := range p.demands {
		if !p.live[i] || p.usable(p.candidates[i][p.choice[i]]) {
			continue
		}
		p.charge(i, -1)
		c := p.best(i)
		if c < 0 {
			p.live[i] = false
			stranded = fmt.Errorf("%w from %s to %s after %s failed", ErrNoPath, p.demands[i].Src.Name, p.demands[i].Dst.Name, id)
			continue
		}
		p.choice[i] = c
		p.charge(i, 1)
		moved++
	}
	return moved, stranded
}

// Placement reports the current paths (nil for removed demands) and MLU.
func (p *Placer) Placement() Placement {
	out := Placement{Method: "incremental", Paths: make([][]models.Endpoint, len(p.demands))}
	for i, d := range p.demands {
		if !p.live[i] {
			continue
		}
		for _, r := range p.n.route(d.Src, d.Dst, p.candidates[i][p.choice[i]])[1:] {
			out.Paths[i] = append(out.Paths[i], p.n.resources[r].egress)
		}
	}
	for r, l := range p.load {
		if u := l / p.n.capacity[r]; u > out.MLU+1e-12 {
			out.MLU, out.Bottleneck = u, p.n.resources[r].String()
		}
	}
	return out
}
