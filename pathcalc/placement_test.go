package pathcalc

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

func TestColorBipartiteIsProper(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		left, right := 1+rng.IntN(8), 1+rng.IntN(8)
		var edges [][2]int
		for range rng.IntN(200) {
			edges = append(edges, [2]int{rng.IntN(left), left + rng.IntN(right)})
		}
		colors := colorBipartite(edges, left+right)
		deg := make([]int, left+right)
		for _, e := range edges {
			deg[e[0]]++
			deg[e[1]]++
		}
		delta := 0
		for _, d := range deg {
			delta = max(delta, d)
		}
		if n := colouringClashes(t, trial, edges, colors, delta, nil); n > 0 {
			t.Fatalf("trial %d: %d edge ends share a colour at their node", trial, n)
		}
	}
}

// colouringClashes checks every colour is in [0, w) and counts the edge
// ends at a node that has another edge of that colour, or where the
// colour is blocked (blocked may be nil).
func colouringClashes(t *testing.T, trial int, edges [][2]int, color []int, w int, blocked map[[2]int]bool) int {
	t.Helper()
	seen := map[[2]int]bool{}
	clashes := 0
	for i, e := range edges {
		c := color[i]
		if c < 0 || c >= w {
			t.Fatalf("trial %d: colour %d outside [0,%d)", trial, c, w)
		}
		for _, v := range e {
			if blocked[[2]int{v, c}] || seen[[2]int{v, c}] {
				clashes++
			}
			seen[[2]int{v, c}] = true
		}
	}
	return clashes
}

func permutationDemands(t *testing.T, snap *topology.Snapshot, seed uint64) []Demand {
	t.Helper()
	cols, err := Traffic(snap, TrafficSpec{Pattern: PatternPermutation, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return demandsOf(cols)
}

// checkPaths verifies every path leaves the source leaf, follows links, and
// ends on the destination host's port, avoiding down links.
func checkPaths(t *testing.T, snap *topology.Snapshot, demands []Demand, p Placement, down map[models.LinkID]bool) {
	t.Helper()
	for i, d := range demands {
		path := p.Paths[i]
		if len(path) == 0 || path[0].Switch != d.Src.Attach.Switch || path[len(path)-1] != d.Dst.Attach {
			t.Fatalf("demand %d (%s→%s): path %v", i, d.Src.Name, d.Dst.Name, path)
		}
		for j := 0; j+1 < len(path); j++ {
			l, ok := snap.LinkAt(path[j])
			if !ok || down[l.ID()] {
				t.Fatalf("demand %d: hop %v is not a working link", i, path[j])
			}
			next := l.B
			if l.B == path[j] {
				next = l.A
			}
			if next.Switch != path[j+1].Switch {
				t.Fatalf("demand %d: path jumps from %v to %v", i, path[j], path[j+1])
			}
		}
	}
}

func TestPlacePermutationAtTheBound(t *testing.T) {
	for _, spec := range []string{"leafspine:8x8x8", "fattree:8", "rail:8x8x8", "oversub:8x8x4"} {
		topo, _ := topology.ParseSpec(spec)
		snap, _ := topology.New(topo)
		for seed := range uint64(5) {
			demands := permutationDemands(t, snap, seed)
			p, err := Place(context.Background(), snap, PlaceRequest{Demands: demands})
			if err != nil {
				t.Fatal(err)
			}
			checkPaths(t, snap, demands, p, nil)
			if bound := LowerBound(snap, nil, demands); p.MLU > bound+1e-9 || p.Method != "edge-coloring" {
				t.Errorf("%s seed %d: MLU %v by %s, want the bound %v by edge-coloring (bottleneck %s)", spec, seed, p.MLU, p.Method, bound, p.Bottleneck)
			}
		}
	}
}

func TestPlaceUnequalDemandsBeatsHashing(t *testing.T) {
	topo, _ := topology.LeafSpine(4, 8, 4, 100)
	snap, _ := topology.New(topo)
	rng := rand.New(rand.NewPCG(7, 7))
	hosts := snap.Hosts()
	var demands []Demand
	for range 40 {
		a, b := hosts[rng.IntN(len(hosts))], hosts[rng.IntN(len(hosts))]
		if a.Attach.Switch == b.Attach.Switch {
			continue
		}
		demands = append(demands, Demand{Src: a, Dst: b, Gbps: float64(5 + rng.IntN(40))})
	}
	p, err := Place(context.Background(), snap, PlaceRequest{Demands: demands})
	if err != nil {
		t.Fatal(err)
	}
	checkPaths(t, snap, demands, p, nil)
	n := newNetwork(snap, nil)
	load := make([]float64, len(n.capacity))
	for i, d := range demands {
		for _, r := range n.route(d.Src, d.Dst, n.ecmpPath(d.Src, d.Dst, uint16(i))) {
			load[r] += d.Gbps
		}
	}
	ecmp := 0.0
	for r, l := range load {
		ecmp = max(ecmp, l/n.capacity[r])
	}
	bound := LowerBound(snap, nil, demands)
	if p.MLU > ecmp+1e-9 || p.MLU > 1.5*bound {
		t.Errorf("placement MLU %.3f; hashing %.3f; bound %.3f", p.MLU, ecmp, bound)
	}
}

// TestPlaceAfterLinkFailureMovesOnlyWhatMust: with the previous paths given,
// only demands on the failed link (and few others) move.
func TestPlaceAfterLinkFailureMovesOnlyWhatMust(t *testing.T) {
	topo, _ := topology.LeafSpine(8, 8, 4, 100)
	snap, _ := topology.New(topo)
	demands := permutationDemands(t, snap, 3)
	before, err := Place(context.Background(), snap, PlaceRequest{Demands: demands})
	if err != nil {
		t.Fatal(err)
	}
	failed := before.Paths[0][0] // the first demand's uplink
	l, _ := snap.LinkAt(failed)
	down := map[models.LinkID]bool{l.ID(): true}
	affected := 0
	for _, p := range before.Paths {
		for _, e := range p {
			if e == l.A || e == l.B {
				affected++
				break
			}
		}
	}
	after, err := Place(context.Background(), snap, PlaceRequest{Demands: demands, DownLinks: down, Previous: before.Paths})
	if err != nil {
		t.Fatal(err)
	}
	checkPaths(t, snap, demands, after, down)
	if after.Moved < affected || after.Moved > affected+2 {
		t.Errorf("moved %d demands; %d used the failed link", after.Moved, affected)
	}
	if after.MLU > 1+1e-9 {
		t.Errorf("after the failure MLU %v: 8 hosts per leaf fit 7 working uplinks... of 8", after.MLU)
	}
}

func TestBookAdmitsUntilFull(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 2, 100)
	snap, _ := topology.New(topo)
	h := snap.Hosts()
	book, err := NewBook(snap, nil, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	admit := func(src, dst models.Host, gbps float64) Fit {
		t.Helper()
		f := book.Fit([]Demand{{Src: src, Dst: dst, Gbps: gbps}}, PathConstraints{})
		if f.Fits {
			if err := book.Reserve(src, f.Paths[0], gbps); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	first := admit(h[0], h[2], 90)
	if !first.Fits || len(first.Paths[0]) != 3 {
		t.Fatalf("first: %+v", first)
	}
	// h1 → h4 goes the other way round: the other spine has room.
	second := admit(h[1], h[3], 90)
	if !second.Fits || second.Paths[0][0] == first.Paths[0][0] {
		t.Fatalf("second should take the other spine: %+v", second)
	}
	// A third 90G from leaf1 cannot fit: each uplink has 5G reservable left.
	third := admit(h[0], h[3], 90)
	if third.Fits || third.FreeGbps > 5+1e-9 || third.Reason == "" || third.Bottleneck == "" {
		t.Fatalf("third: %+v", third)
	}
	if free, at := book.Available(h[0], h[3]); free > 5+1e-9 || at == "" {
		t.Errorf("available h1→h4: %v at %q, want at most 5", free, at)
	}
	// Releasing the first frees its spine again.
	if err := book.Reserve(h[0], first.Paths[0], -90); err != nil {
		t.Fatal(err)
	}
	if again := admit(h[0], h[2], 90); !again.Fits {
		t.Errorf("after a release: %+v", again)
	}
	if _, err := NewBook(snap, nil, 1); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("headroom 1: %v", err)
	}
}

func TestBookConstraintsAndCollectives(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 2, 100)
	snap, _ := topology.New(topo)
	h := snap.Hosts()
	book, _ := NewBook(snap, nil, 0)
	spine1 := models.SwitchID("spine1")
	f := book.Fit([]Demand{{Src: h[0], Dst: h[2], Gbps: 10}}, PathConstraints{AvoidSwitches: map[models.SwitchID]bool{spine1: true}})
	if !f.Fits || f.Paths[0][1].Switch == spine1 {
		t.Errorf("avoiding %s: %+v", spine1, f)
	}
	if f := book.Fit([]Demand{{Src: h[0], Dst: h[2], Gbps: 10}}, PathConstraints{MaxHops: 2}); f.Fits || f.Reason == "" {
		t.Errorf("max 2 switches across a leaf-spine cannot fit: %+v", f)
	}
	// Two flows of 60G out of one leaf fit together only on different spines.
	pair := book.Fit([]Demand{{Src: h[0], Dst: h[2], Gbps: 60}, {Src: h[1], Dst: h[3], Gbps: 60}}, PathConstraints{})
	if !pair.Fits || pair.Paths[0][0] == pair.Paths[1][0] {
		t.Errorf("a pair placed together shares an uplink: %+v", pair)
	}
	// Three cannot: 180G over two 100G uplinks.
	three := book.Fit([]Demand{{Src: h[0], Dst: h[2], Gbps: 60}, {Src: h[1], Dst: h[3], Gbps: 60}, {Src: h[0], Dst: h[3], Gbps: 60}}, PathConstraints{})
	if three.Fits || len(three.Paths) != 2 {
		t.Errorf("three 60G flows out of one leaf fit: %+v", three)
	}
	if book.MLU() != 0 {
		t.Errorf("Fit reserved something: MLU %v", book.MLU())
	}
}

func TestLowerBound(t *testing.T) {
	topo, _ := topology.LeafSpine(4, 4, 4, 100)
	snap, _ := topology.New(topo)
	cols, _ := Traffic(snap, TrafficSpec{Pattern: PatternIncast, IncastSenders: 5, Seed: 1})
	if b := LowerBound(snap, nil, demandsOf(cols)); b != 5 {
		t.Errorf("incast of 5 at line rate: bound %v, want 5 (the receiver's NIC)", b)
	}
	if b := LowerBound(snap, nil, permutationDemands(t, snap, 1)); b != 1 {
		t.Errorf("permutation: bound %v, want 1", b)
	}
}

func TestEvaluateAcrossMethods(t *testing.T) {
	ctx := context.Background()
	results := map[string]EvalResult{}
	for _, m := range Methods {
		r, err := Evaluate(ctx, EvalCase{Topology: "leafspine:8x8x8", Pattern: PatternPermutation, Method: m, Trials: 4})
		if err != nil {
			t.Fatal(err)
		}
		results[m] = r
	}
	if r := results[MethodAccelnet]; r.MLU != 1 || r.ThroughputRatio < 0.999 {
		t.Errorf("accelnet: %+v", r)
	}
	if !(results[MethodECMP].ThroughputRatio < results[MethodECMP8QP].ThroughputRatio && results[MethodECMP8QP].ThroughputRatio < results[MethodAccelnet].ThroughputRatio) {
		t.Errorf("expected ecmp < ecmp-8qp < accelnet: %+v", results)
	}
	if _, err := Evaluate(ctx, EvalCase{Topology: "leafspine:8x8x8", Pattern: PatternPermutation, Method: "magic"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("unknown method: %v", err)
	}
}

// TestPlacementGolden pins a small placement; refresh with -update.
func TestPlacementGolden(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 4, 2, 100)
	snap, _ := topology.New(topo)
	p, err := Place(context.Background(), snap, PlaceRequest{Demands: permutationDemands(t, snap, 1)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(p, "", "  ")
	path := filepath.Join("testdata", "placement-leafspine-2x4x2.golden.json")
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != string(got) {
		t.Errorf("placement differs from %s (run go test ./pathcalc -update if intended)", path)
	}
}

// FuzzPlace: any demand set on a valid fabric is placed or refused, never panics.
func FuzzPlace(f *testing.F) {
	f.Add(uint8(2), uint8(3), uint8(2), []byte{0, 1, 10, 2, 5, 100})
	f.Fuzz(func(t *testing.T, spines, leaves, hosts uint8, raw []byte) {
		topo, err := topology.LeafSpine(int(spines%6)+1, int(leaves%6)+1, int(hosts%4)+1, 100)
		if err != nil {
			return
		}
		snap, _ := topology.New(topo)
		hs := snap.Hosts()
		var demands []Demand
		for i := 0; i+2 < len(raw) && len(demands) < 64; i += 3 {
			a, b := hs[int(raw[i])%len(hs)], hs[int(raw[i+1])%len(hs)]
			if a.Name == b.Name {
				continue
			}
			demands = append(demands, Demand{Src: a, Dst: b, Gbps: float64(raw[i+2]%200) + 1})
		}
		p, err := Place(context.Background(), snap, PlaceRequest{Demands: demands})
		if err != nil {
			return
		}
		checkPaths(t, snap, demands, p, nil)
	})
}

func TestPlacerIncremental(t *testing.T) {
	topo, _ := topology.FatTree(8, 100)
	snap, _ := topology.New(topo)
	demands := permutationDemands(t, snap, 2)
	p, err := NewPlacer(context.Background(), snap, demands, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Placement()
	if before.MLU > 1+1e-9 {
		t.Fatalf("initial MLU %v", before.MLU)
	}
	l, _ := snap.LinkAt(before.Paths[0][1]) // the first demand's aggregation→core hop
	affected := 0
	for _, path := range before.Paths {
		if slices.Contains(path, l.A) || slices.Contains(path, l.B) {
			affected++
		}
	}
	moved, err := p.FailLink(l.ID())
	if err != nil || moved != affected {
		t.Fatalf("moved %d, %d used the link (%v)", moved, affected, err)
	}
	after := p.Placement()
	checkPaths(t, snap, demands, after, map[models.LinkID]bool{l.ID(): true})
	for i := range demands {
		if !slices.Contains(before.Paths[i], l.A) && !slices.Contains(before.Paths[i], l.B) && !slices.Equal(before.Paths[i], after.Paths[i]) {
			t.Fatalf("demand %d moved without reason", i)
		}
	}
	// Adding and removing a demand.
	i, err := p.Add(Demand{Src: demands[0].Src, Dst: demands[1].Dst, Gbps: 10})
	if err != nil {
		t.Fatal(err)
	}
	p.Remove(i)
	if got := p.Placement(); got.Paths[i] != nil {
		t.Error("removed demand still has a path")
	}
}

// TestBookSpreadsAConnection: when the hosts' NICs are the limit on every
// path, a connection's flows still spread over the spines.
func TestBookSpreadsAConnection(t *testing.T) {
	topo, _ := topology.LeafSpine(4, 2, 1, 100)
	snap, _ := topology.New(topo)
	h := snap.Hosts()
	book, _ := NewBook(snap, nil, 0)
	var flows []Demand
	for range 4 {
		flows = append(flows, Demand{Src: h[0], Dst: h[1], Gbps: 25})
	}
	f := book.Fit(flows, PathConstraints{})
	spines := map[models.SwitchID]bool{}
	for _, p := range f.Paths {
		spines[p[1].Switch] = true
	}
	if !f.Fits || len(spines) != 4 {
		t.Errorf("4 flows of one connection used %d spines: %+v", len(spines), f.Paths)
	}
}

// TestBookFitsAFullPermutation: a line-rate permutation at 95% of every
// link fits exactly one flow per link; placed as one set it must fit.
func TestBookFitsAFullPermutation(t *testing.T) {
	topo, _ := topology.LeafSpine(4, 4, 4, 100)
	snap, _ := topology.New(topo)
	book, _ := NewBook(snap, nil, 0.05)
	var flows []Demand
	for _, c := range permutationDemands(t, snap, 1) {
		flows = append(flows, Demand{Src: c.Src, Dst: c.Dst, Gbps: 95})
	}
	if book.fitGreedy(flows, PathConstraints{}).Fits {
		t.Fatal("this permutation was chosen because one flow at a time strands the last ones")
	}
	f := book.Fit(flows, PathConstraints{})
	if !f.Fits || len(f.Paths) != len(flows) {
		t.Fatalf("a permutation at 95%% does not fit: %+v", f.Reason)
	}
	load := map[models.Endpoint]float64{}
	for i, p := range f.Paths {
		for _, e := range p {
			load[e] += flows[i].Gbps
		}
	}
	for e, l := range load {
		if l > 95+1e-9 {
			t.Errorf("%s carries %v Gb/s of 95 reservable", e, l)
		}
	}
}
