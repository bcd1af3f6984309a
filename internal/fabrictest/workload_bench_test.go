package fabrictest_test

import (
	"context"
	"testing"
	"time"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkWorkloadAsIntents: a line-rate permutation on a non-blocking
// 8×8×8 leaf-spine starts on ECMP hashing (elephants collide); then every
// flow is declared as an intent and the controller places and pins them.
// It reports the workload's throughput ratio before and after, and the
// time from declaring the intents to the ratio reaching 0.95.
//
//	go test ./internal/fabrictest -run '^$' -bench WorkloadAsIntents -benchtime 3x
func BenchmarkWorkloadAsIntents(b *testing.B) {
	benchmarkCollisions(b, func(o *stack.Config) { o.APIRateLimit = -1 }, func(h *fabrictest.Harness, id string) {
		if _, err := h.ReserveWorkload(context.Background(), id, "jobs", 0); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkElephantDetection: the same permutation, but nobody declares
// it: leaves sample 1 in 65,536 RoCEv2 packets (accelnet's default), the
// controller finds the elephants and pins them. It reports the throughput
// ratio before and after, and the time from the workload starting to the
// ratio reaching 0.95.
//
//	go test ./internal/fabrictest -run '^$' -bench ElephantDetection -benchtime 3x
func BenchmarkElephantDetection(b *testing.B) {
	benchmarkCollisions(b, func(o *stack.Config) { o.Elephants.SampleOneIn = 65536 }, func(*fabrictest.Harness, string) {})
}

// benchmarkCollisions starts the permutation on a fresh fabric per
// iteration, reads its throughput ratio at once (hashing), calls fix, and
// times until the ratio reaches 0.95.
func benchmarkCollisions(b *testing.B, tune func(*stack.Config), fix func(h *fabrictest.Harness, workload string)) {
	topo, err := topology.Load("leafspine:8x8x8@100")
	if err != nil {
		b.Fatal(err)
	}
	var before, after, took float64
	for i := range b.N {
		b.StopTimer()
		h := fabrictest.NewWith(b, topo, tune)
		h.Eventually(b, 30*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
		id, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: uint64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		ratio := workloadRatio(b, h, id)
		before += ratio()
		b.StartTimer()
		start := time.Now()
		fix(h, id)
		h.Eventually(b, 60*time.Second, "throughput ratio 0.95", func() bool { return ratio() >= 0.95 })
		took += time.Since(start).Seconds()
		b.StopTimer()
		after += ratio()
	}
	n := float64(b.N)
	b.ReportMetric(before/n, "ratio_before")
	b.ReportMetric(after/n, "ratio_after")
	b.ReportMetric(took/n*1000, "ms_to_0.95")
}

// workloadRatio reads a running workload's throughput ratio (Σ rates /
// Σ demands) from fabricsim.
func workloadRatio(tb testing.TB, h *fabrictest.Harness, id string) func() float64 {
	return func() float64 {
		f, err := h.Fabric.WorkloadFigures(id)
		if err != nil {
			tb.Fatal(err)
		}
		return f.ThroughputRatio
	}
}
