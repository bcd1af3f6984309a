package fabrictest_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkPingmeshCost measures what the pingmesh costs at its default
// rate: a k-ary fat-tree (ACCELNET_PINGMESH_K, default 16: 128 leaves,
// 16,256 pairs) run by one process (controller and fabricsim both), idle
// but for the controller's own work. Each iteration is a second; it
// reports the probes that came back per second and the process's CPU
// time per second, with the pingmesh at its default rate ("on") and off:
// the difference is the pingmesh's cost, the emulator's share of carrying
// and punting the probes included.
//
//	go test ./internal/fabrictest -run '^$' -bench PingmeshCost -benchtime 20x -timeout 30m
func BenchmarkPingmeshCost(b *testing.B) {
	topo := fatTreeOfEnv(b, "ACCELNET_PINGMESH_K")
	for _, mode := range []struct {
		name string
		rate int
	}{{"on", controller.DefaultProbeRate}, {"off", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			_, h := runFabric(b, topo, false, func(o *stack.Config) { o.ProbeRate = mode.rate })
			// A few seconds of probes in, so that they run steadily.
			h.Eventually(b, 60*time.Second, "probes coming back", func() bool {
				_, back := h.Controller.ProbeStats()
				return mode.rate == 0 || back > uint64(3*mode.rate)
			})
			sent0, back0 := h.Controller.ProbeStats()
			secs := cpuWindow(b)
			sent, back := h.Controller.ProbeStats()
			b.ReportMetric(float64(sent-sent0)/secs, "sent/s")
			b.ReportMetric(float64(back-back0)/secs, "back/s")
		})
	}
}

// BenchmarkSamplingCost measures what sampling the hosts' packets costs
// once the elephants it found are pinned: a k=16 fat-tree at 400 Gb/s
// (ACCELNET_SAMPLING_K) under a line-rate permutation, one process
// (controller and fabricsim both), the leaves sampling 1 in 65,536
// packets (the command line's default, "default") against 16
// times fewer ("sparse", 1 in 1,048,576, which still finds and keeps the
// same elephants). Each iteration is a second, once the loop has settled;
// it reports the samples taken in per second and the process's CPU time
// per second: the difference between the modes is fifteen sixteenths of
// the default rate's cost, the emulator's share of sending samples
// included.
//
//	go test ./internal/fabrictest -run '^$' -bench SamplingCost -benchtime 20x -timeout 30m
func BenchmarkSamplingCost(b *testing.B) {
	k := 16
	if v, err := strconv.Atoi(os.Getenv("ACCELNET_SAMPLING_K")); err == nil {
		k = v
	}
	topo, err := topology.FatTree(k, 400)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		oneIn uint32
	}{{"default", 65536}, {"sparse", 1 << 20}} {
		b.Run(mode.name, func(b *testing.B) {
			f, h := runFabric(b, topo, false, func(o *stack.Config) {
				o.ProbeRate = 0
				o.Elephants.SampleOneIn = mode.oneIn
			})
			if _, err := f.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 400, Seed: 1}); err != nil {
				b.Fatal(err)
			}
			hosts := len(topo.Hosts)
			h.Eventually(b, 5*time.Minute, "the permutation's elephants pinned and the loop settled", func() bool {
				pinned := 0
				for _, d := range h.Intents.DetectedFlows() {
					if d.Pinned {
						pinned++
					}
				}
				return pinned >= hosts*9/10 && h.Controller.Settled()
			})
			samples := func() float64 { n, _ := metric(b, h, "accelnet_flow_samples_total", "", ""); return n }
			n0 := samples()
			secs := cpuWindow(b)
			b.ReportMetric((samples()-n0)/secs, "samples/s")
		})
	}
}
