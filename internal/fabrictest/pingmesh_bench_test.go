package fabrictest_test

import (
	"testing"
	"time"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/internal/stack"
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
			cpu0, at := cpuTime(), time.Now()
			b.ResetTimer()
			// The figures are what the process does over a window of
			// b.N seconds: the window is the measurement.
			window := time.NewTimer(time.Duration(b.N) * time.Second)
			<-window.C
			b.StopTimer()
			secs := time.Since(at).Seconds()
			sent, back := h.Controller.ProbeStats()
			b.ReportMetric(float64(sent-sent0)/secs, "sent/s")
			b.ReportMetric(float64(back-back0)/secs, "back/s")
			b.ReportMetric(ms(cpuTime()-cpu0)/secs, "cpu_ms/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
