package fabricsim

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// startFabric runs a fabric for a benchmark and returns it with the time it
// took to be ready to serve.
func startFabric(tb testing.TB, topo models.Topology) (*Fabric, time.Duration) {
	tb.Helper()
	start := time.Now()
	f, err := New(Options{Topology: topo, CounterInterval: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	<-f.Ready()
	took := time.Since(start)
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return f, took
}

// programECMP installs pathcalc's shortest-path ECMP plan in every switch
// over real P4Runtime, as the controller would.
func programECMP(tb testing.TB, f *Fabric) {
	tb.Helper()
	schema, err := p4.LoadSchema()
	if err != nil {
		tb.Fatal(err)
	}
	topo := f.Topology()
	snap, err := topology.New(topo)
	if err != nil {
		tb.Fatal(err)
	}
	lim := schema.Limits()
	res, err := pathcalc.Compute(context.Background(), snap, pathcalc.Request{Limits: pathcalc.Limits{RouteEntries: lim.RouteEntries, SelectorSize: lim.SelectorSize, MaxGroupSize: lim.MaxGroupSize}})
	if err != nil {
		tb.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: func(id models.SwitchID) (models.Switch, error) { return snap.Switch(id) }})
	defer d.Close()
	for sw, st := range res.Plan.Switches {
		if err := d.Apply(context.Background(), sw, models.Compute(st, models.ForwardingState{})); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkECMPPermutationThroughput measures how plain ECMP hashing (one
// QP per connection) serves random permutations: the throughput ratio
// (Σ rates / Σ demands, max-min fair) averaged over 20 permutations.
//
//	go test ./fabricsim -run '^$' -bench ECMPPermutation -benchtime 1x
func BenchmarkECMPPermutationThroughput(b *testing.B) {
	for _, spec := range []string{"leafspine:32x32x32", "fattree:16"} {
		b.Run(spec, func(b *testing.B) {
			topo, err := topology.ParseSpec(spec)
			if err != nil {
				b.Fatal(err)
			}
			f, _ := startFabric(b, topo)
			programECMP(b, f)
			const trials = 20
			sum := 0.0
			for b.Loop() {
				sum = 0
				for seed := range uint64(trials) {
					id, err := f.StartWorkload(WorkloadSpec{Pattern: PatternPermutation, Gbps: 400, Seed: seed + 1})
					if err != nil {
						b.Fatal(err)
					}
					wf, err := f.WorkloadFigures(id)
					if err != nil {
						b.Fatal(err)
					}
					if wf.Delivered != wf.Flows {
						b.Fatalf("%d of %d flows delivered", wf.Delivered, wf.Flows)
					}
					sum += wf.ThroughputRatio
					if err := f.StopWorkload(id); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(sum/trials, "throughput_ratio")
		})
	}
}

// BenchmarkScaleFatTree16 runs a k=16 fat-tree (320 switches, 1,024 hosts)
// with every host in a permutation of 10 QPs per connection (10,240 flows)
// and reports start-up time, heap in use, and the time the dataplane takes
// to recompute after a table change on one switch and after a link failure.
//
//	go test ./fabricsim -run '^$' -bench ScaleFatTree16 -benchtime 20x
func BenchmarkScaleFatTree16(b *testing.B) {
	topo, err := topology.FatTree(16, 400)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	f, startup := startFabric(b, topo)
	programECMP(b, f)
	if _, err := f.StartWorkload(WorkloadSpec{Pattern: PatternPermutation, Gbps: 400, QPsPerConnection: 10, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	flows := f.Flows()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	link := topo.Links[0].ID()
	leaf := f.Switch(topo.Links[len(topo.Links)-1].A.Switch)
	var tableChange, linkChange time.Duration
	for b.Loop() {
		// A table change on one switch: only flows through it are retraced.
		leaf.tablesChanged()
		f.Flows()
		tableChange += f.lastRecompute()
		// A link failure: every flow is retraced.
		if err := f.SetLinkUp(link, false); err != nil {
			b.Fatal(err)
		}
		f.Flows()
		linkChange += f.lastRecompute()
		if err := f.SetLinkUp(link, true); err != nil {
			b.Fatal(err)
		}
		f.Flows()
	}
	b.ReportMetric(float64(len(flows)), "flows")
	b.ReportMetric(startup.Seconds()*1000, "startup_ms")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap_MiB")
	b.ReportMetric(float64(tableChange.Microseconds())/1000/float64(b.N), "table_change_recompute_ms")
	b.ReportMetric(float64(linkChange.Microseconds())/1000/float64(b.N), "link_failure_recompute_ms")
}

func (f *Fabric) lastRecompute() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats.lastRecompute
}
