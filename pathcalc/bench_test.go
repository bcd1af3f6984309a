package pathcalc

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkPlacePermutation: a full placement of a line-rate permutation of
// 1,024 hosts.
//
//	go test ./pathcalc -run '^$' -bench PlacePermutation -cpu 1
func BenchmarkPlacePermutation(b *testing.B) { benchmarkPlace(b, PatternPermutation) }

// BenchmarkPlaceAllToAll: a full placement of an all-to-all of 1,024 hosts
// (1,047,552 demands).
//
//	go test ./pathcalc -run '^$' -bench PlaceAllToAll -cpu 1
func BenchmarkPlaceAllToAll(b *testing.B) { benchmarkPlace(b, PatternAllToAll) }

func benchmarkPlace(b *testing.B, pattern string) {
	for _, spec := range []string{"leafspine:32x32x32", "fattree:16"} {
		b.Run(spec, func(b *testing.B) {
			topo, _ := topology.ParseSpec(spec)
			snap, _ := topology.New(topo)
			cols, _ := Traffic(snap, TrafficSpec{Pattern: pattern, Seed: 1})
			demands := demandsOf(cols)
			var p Placement
			for b.Loop() {
				var err error
				if p, err = Place(context.Background(), snap, PlaceRequest{Demands: demands}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.MLU, "mlu")
		})
	}
}

// BenchmarkReplaceAfterLinkFailure: re-placing a k=16 permutation after one
// link fails, keeping every path that still works.
//
//	go test ./pathcalc -run '^$' -bench ReplaceAfterLinkFailure -cpu 1
func BenchmarkReplaceAfterLinkFailure(b *testing.B) {
	topo, _ := topology.FatTree(16, 400)
	snap, _ := topology.New(topo)
	cols, _ := Traffic(snap, TrafficSpec{Pattern: PatternPermutation, Seed: 1})
	demands := demandsOf(cols)
	before, err := Place(context.Background(), snap, PlaceRequest{Demands: demands})
	if err != nil {
		b.Fatal(err)
	}
	l, _ := snap.LinkAt(before.Paths[0][0])
	down := map[models.LinkID]bool{l.ID(): true}
	b.Run("full-replace", func(b *testing.B) {
		moved := 0
		for b.Loop() {
			after, err := Place(context.Background(), snap, PlaceRequest{Demands: demands, DownLinks: down, Previous: before.Paths})
			if err != nil {
				b.Fatal(err)
			}
			moved = after.Moved
		}
		b.ReportMetric(float64(moved), "moved")
	})
	b.Run("placer", func(b *testing.B) {
		// Fail the links of the fabric one after another on one placer
		// (rebuilt, untimed, when every link has failed): each iteration is
		// one link failure and the moves it causes.
		links := snap.Links()
		var p *Placer
		next, moved, total := len(links), 0, 0
		for b.Loop() {
			if next == len(links) {
				b.StopTimer()
				var err error
				if p, err = NewPlacer(context.Background(), snap, demands, nil); err != nil {
					b.Fatal(err)
				}
				next = 0
				b.StartTimer()
			}
			n, _ := p.FailLink(links[next].ID()) // late failures strand demands; that is fine here
			moved += n
			total++
			next++
		}
		b.ReportMetric(float64(moved)/float64(total), "moved/failure")
	})
}

// BenchmarkComputeFatTree48: the full ECMP plan of a k=48 fat-tree (2,880
// switches, 27,648 hosts), with the heap it leaves.
//
//	go test ./pathcalc -run '^$' -bench ComputeFatTree48 -cpu 1 -benchtime 3x
func BenchmarkComputeFatTree48(b *testing.B) {
	topo, _ := topology.FatTree(48, 400)
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for b.Loop() {
		res, err := Compute(context.Background(), snap, Request{Limits: Limits{MaxGroupSize: 64}})
		if err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		runtime.KeepAlive(res)
	}
	b.ReportMetric(float64(peak)/(1<<20), "heap_MiB")
}

// BenchmarkPruneFatTree48: the pruned plan after a core–pod link, a
// leaf–spine link or a spine switch (its 48 links) of a k=48 fat-tree
// fails — the first stage of the controller's reaction, written before
// the new routes are known.
//
//	go test ./pathcalc -run '^$' -bench PruneFatTree48 -cpu 1 -benchtime 3x
func BenchmarkPruneFatTree48(b *testing.B) {
	topo, _ := topology.FatTree(48, 400)
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	res, err := Compute(context.Background(), snap, Request{Limits: Limits{MaxGroupSize: 64}})
	if err != nil {
		b.Fatal(err)
	}
	// A core link prunes 48 switches, a leaf link 1,152 (every leaf of
	// the other pods, toward the leaf that lost it).
	for _, ends := range [][2]models.SwitchID{{"p5-spine3", "core50"}, {"p9-leaf12", "p9-spine15"}} {
		var down models.LinkID
		for _, l := range snap.FabricLinks() {
			if l.A.Switch == ends[0] && l.B.Switch == ends[1] || l.B.Switch == ends[0] && l.A.Switch == ends[1] {
				down = l.ID()
			}
		}
		if down == "" {
			b.Fatalf("no link %s <-> %s", ends[0], ends[1])
		}
		b.Run(string(ends[0])+"-"+string(ends[1]), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Prune(snap, res.Plan, map[models.LinkID]bool{down: true})
			}
		})
	}
	// A spine switch failing: its 48 links at once (1,151 switches pruned).
	down := map[models.LinkID]bool{}
	snap.EachNeighbor("p3-spine12", func(a topology.Adjacency) { down[a.Link] = true })
	b.Run("p3-spine12", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Prune(snap, res.Plan, down)
		}
	})
}

// BenchmarkRecompute: the new plan after one link of a fat-tree fails
// (a core–pod link, then a leaf–spine link), or a switch (a spine, a
// core: all its links), and after it returns (a switch also as the
// controller hears it: one link, then the rest), made
// from the plan before (Recompute), against the same plan made from
// scratch (Compute): what the controller plans after each link change.
//
//	go test ./pathcalc -run '^$' -bench Recompute -cpu 1 -benchtime 5x
func BenchmarkRecompute(b *testing.B) {
	for _, k := range []int{16, 32, 48} {
		topo, _ := topology.FatTree(k, 400)
		snap, err := topology.New(topo)
		if err != nil {
			b.Fatal(err)
		}
		lim := Limits{MaxGroupSize: 64}
		base, err := Compute(context.Background(), snap, Request{Limits: lim})
		if err != nil {
			b.Fatal(err)
		}
		links := snap.FabricLinks()
		type failure struct {
			name string
			down map[models.LinkID]bool
		}
		var failures []failure
		for _, l := range []models.Link{links[0], links[len(links)-1]} {
			failures = append(failures, failure{strings.SplitN(string(l.ID()), ":", 2)[0], map[models.LinkID]bool{l.ID(): true}})
		}
		// A spine and a core switch failing: every link of each at once.
		for _, sw := range []models.SwitchID{"p2-spine1", "core1"} {
			down := map[models.LinkID]bool{}
			snap.EachNeighbor(sw, func(a topology.Adjacency) { down[a.Link] = true })
			failures = append(failures, failure{"switch-" + string(sw), down})
		}
		for _, fl := range failures {
			down := Request{Limits: lim, DownLinks: fl.down}
			failed, err := Compute(context.Background(), snap, down)
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("fattree:%d/%s", k, fl.name)
			b.Run(name+"/fails", func(b *testing.B) {
				for b.Loop() {
					if _, err := Recompute(context.Background(), base, snap, down); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/returns", func(b *testing.B) {
				for b.Loop() {
					if _, err := Recompute(context.Background(), failed, snap, Request{Limits: lim}); err != nil {
						b.Fatal(err)
					}
				}
			})
			if len(fl.down) > 1 {
				// As switches report a switch's return: one link, then
				// the others (both plans, one after the other).
				one := Request{Limits: lim, DownLinks: maps.Clone(fl.down)}
				for id := range one.DownLinks {
					delete(one.DownLinks, id)
					break
				}
				b.Run(name+"/returns-link-first", func(b *testing.B) {
					for b.Loop() {
						first, err := Recompute(context.Background(), failed, snap, one)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := Recompute(context.Background(), first, snap, Request{Limits: lim}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run(name+"/from-scratch", func(b *testing.B) {
				for b.Loop() {
					if _, err := Compute(context.Background(), snap, down); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBookAdmission: one admission's ledger work, as the intent
// manager does it — fit a one-flow demand between two random hosts and
// reserve it — on a book that already holds 100,000 such flows, and the
// book's heap after them (its path caches included).
//
//	go test ./pathcalc -run '^$' -bench BookAdmission -cpu 1 -benchtime 20000x
func BenchmarkBookAdmission(b *testing.B) {
	for _, k := range []int{16, 48} {
		b.Run(fmt.Sprintf("fattree:%d", k), func(b *testing.B) {
			topo, _ := topology.FatTree(k, 400)
			snap, err := topology.New(topo)
			if err != nil {
				b.Fatal(err)
			}
			hosts := snap.Hosts()
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			admit := func(book *Book) {
				src, dst := hosts[rng.IntN(len(hosts))], hosts[rng.IntN(len(hosts))]
				if src.Name == dst.Name {
					return
				}
				f := book.Fit([]Demand{{Src: src, Dst: dst, Gbps: 0.001}}, PathConstraints{})
				if f.Fits {
					_ = book.Reserve(src, f.Paths[0], 0.001)
				}
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			book, err := NewBook(snap, nil, 0.05)
			if err != nil {
				b.Fatal(err)
			}
			for range 100_000 {
				admit(book)
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ResetTimer()
			for b.Loop() {
				admit(book)
			}
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "book_heap_MiB")
			runtime.KeepAlive(book)
		})
	}
}

// BenchmarkBookRelease: with 100,000 one-flow intents held on a k=48
// fat-tree, one flow released and booked again: what a follower, and a
// new leader catching up its copy, do for every intent that changes.
// "spread": the flows spread evenly over the hosts, as BenchmarkScale's
// and BenchmarkFailover's intents are (every NIC holds about as many, so
// thousands of resources tie for the highest utilization); "random": from
// random hosts to random hosts.
//
//	go test ./pathcalc -run '^$' -bench BookRelease -cpu 1 -benchtime 20000x
func BenchmarkBookRelease(b *testing.B) {
	topo, _ := topology.FatTree(48, 400)
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	hosts := snap.Hosts()
	for _, spread := range []bool{true, false} {
		name := "random"
		if spread {
			name = "spread"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(48, 2))
			book, err := NewBook(snap, nil, 0.05)
			if err != nil {
				b.Fatal(err)
			}
			type flow struct {
				src  models.Host
				path []models.Endpoint
			}
			var held []flow
			for i := 0; len(held) < 100_000; i++ {
				src, dst := hosts[rng.IntN(len(hosts))], hosts[rng.IntN(len(hosts))]
				if spread {
					src, dst = hosts[i%len(hosts)], hosts[(i+1+i/len(hosts))%len(hosts)]
				}
				if src.Name == dst.Name {
					continue
				}
				f := book.Fit([]Demand{{Src: src, Dst: dst, Gbps: 0.001}}, PathConstraints{})
				if !f.Fits {
					b.Fatal(f.Reason)
				}
				if err := book.Reserve(src, f.Paths[0], 0.001); err != nil {
					b.Fatal(err)
				}
				held = append(held, flow{src, f.Paths[0]})
			}
			i := 0
			for b.Loop() {
				f := held[i%len(held)]
				i++
				if err := book.Reserve(f.src, f.path, -0.001); err != nil {
					b.Fatal(err)
				}
				if err := book.Reserve(f.src, f.path, 0.001); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
