package fabrictest_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// silentFabric runs fabricsim for topo and accelnet against it with every
// switch declared without a gNMI address, so that none reports its
// ports' oper-status (BMv2's case) and the controller finds failed links
// itself; the flags are the defaults, tuned by tune.
func silentFabric(b testing.TB, topo models.Topology, tune func(*stack.Config)) (*fabricsim.Fabric, *fabrictest.Harness) {
	return runFabric(b, topo, true, tune)
}

// runFabric runs fabricsim for topo and accelnet against it, as two
// programs would: the switches declared without a gNMI address if silent.
func runFabric(b testing.TB, topo models.Topology, silent bool, tune func(*stack.Config)) (*fabricsim.Fabric, *fabrictest.Harness) {
	f := fabrictest.StartFabric(b, topo)
	topo = f.Topology()
	for i := range topo.Switches {
		if silent {
			topo.Switches[i].GNMIAddr = ""
		}
	}
	h := fabrictest.NewServeWith(b, topo, func(o *stack.Config) {
		o.TelemetryInterval, o.CounterInterval, o.Elephants.ObserveInterval = 0, 0, 0 // the defaults
		if tune != nil {
			tune(o)
		}
	})
	h.Eventually(b, 300*time.Second, "the fabric programmed", func() bool { return h.Converged() == nil })
	return f, h
}

// linkState is what discovery says of link now.
func linkState(h *fabrictest.Harness, l models.LinkID) api.DiscoveryState {
	d, _ := h.Controller.LinkDiscovery()
	return d[l].State
}

// BenchmarkCutLinkDetection measures, on a 2-spine, 2-leaf fabric like
// the BMv2 lab's with the default flags, the time from a cable cut in
// fabricsim to the controller routing around the link (detect_*_ms:
// the link is out of its routes, polled every millisecond) and to the
// new routes being on every switch (rerouted_*_ms). "probes": switches
// without oper-status reports (BMv2's case), found by link liveness;
// "gnmi": switches that report oper-status ON_CHANGE over gNMI. Each
// iteration cuts a random fabric link, at a random moment of a liveness
// tick, and restores it once the fabric has settled.
//
//	go test ./internal/fabrictest -run '^$' -bench CutLinkDetection -benchtime 30x
func BenchmarkCutLinkDetection(b *testing.B) {
	for _, kind := range []struct {
		name   string
		silent bool
	}{{"probes", true}, {"gnmi", false}} {
		b.Run(kind.name, func(b *testing.B) {
			f, h := runFabric(b, fabrictest.LeafSpine(2, 2, 2), kind.silent, nil)
			snap, _ := h.Controller.Snapshot()
			links := snap.FabricLinks()
			h.Eventually(b, 60*time.Second, "every link confirmed", func() bool {
				for _, l := range links {
					if linkState(h, l.ID()) != api.DiscoveryConfirmed {
						return false
					}
				}
				return h.Controller.Settled()
			})
			rng := rand.New(rand.NewPCG(1, 2))
			var detect, rerouted []float64
			b.ResetTimer()
			for range b.N {
				l := links[rng.IntN(len(links))].ID()
				if kind.silent {
					// At a random moment of a liveness tick, not just
					// after one (the wait for a settled fabric ends just
					// after a tick).
					atPhase(h, time.Duration(rng.Int64N(int64(controller.DefaultLivenessInterval))))
				}
				at := time.Now()
				if err := f.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(l)}); err != nil {
					b.Fatal(err)
				}
				tick := time.NewTicker(time.Millisecond)
				for !h.Controller.DownLinks()[l] {
					<-tick.C
				}
				detect = append(detect, ms(time.Since(at)))
				for !h.Controller.Settled() {
					<-tick.C
				}
				rerouted = append(rerouted, ms(time.Since(at)))
				tick.Stop()
				if err := f.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkUp, Target: string(l)}); err != nil {
					b.Fatal(err)
				}
				h.Eventually(b, 60*time.Second, "the link in use again", func() bool {
					return linkState(h, l) == api.DiscoveryConfirmed && !h.Controller.DownLinks()[l] && h.Controller.Settled()
				})
			}
			b.StopTimer()
			slices.Sort(detect)
			slices.Sort(rerouted)
			b.ReportMetric(detect[len(detect)/2], "detect_p50_ms")
			b.ReportMetric(detect[len(detect)-1], "detect_max_ms")
			b.ReportMetric(rerouted[len(rerouted)/2], "rerouted_p50_ms")
			b.ReportMetric(rerouted[len(rerouted)-1], "rerouted_max_ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// atPhase returns phase after the controller closes its next liveness
// tick (polled every millisecond).
func atPhase(h *fabrictest.Harness, phase time.Duration) {
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for ticks := h.Controller.LivenessTicks(); h.Controller.LivenessTicks() == ticks; {
		<-poll.C
	}
	for tick := time.Now(); time.Since(tick) < phase; {
		<-poll.C
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkLivenessCost measures what liveness probing costs where no
// switch reports oper-status: a k-ary fat-tree (ACCELNET_LIVENESS_K,
// default 16: 320 switches, 4,096 watched link ends) run by one process
// (controller and fabricsim both), idle but for probes. Each iteration is
// a second; it reports the link probes sent per second, the process's
// CPU time per second and the liveness tick as it ran (tick_ms: a cut is
// found in 3 to 4 of them), with liveness at its default ("on") and
// off (discovery's rounds only): the difference is liveness's cost, the
// emulator's share of answering the probes included.
//
//	go test ./internal/fabrictest -run '^$' -bench LivenessCost -benchtime 10x -timeout 30m
func BenchmarkLivenessCost(b *testing.B) {
	topo := fatTreeOfEnv(b, "ACCELNET_LIVENESS_K")
	for _, mode := range []struct {
		name     string
		liveness time.Duration
	}{{"on", controller.DefaultLivenessInterval}, {"off", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			_, h := silentFabric(b, topo, func(o *stack.Config) { o.LivenessInterval = mode.liveness })
			// A few ticks in, so that the probes run steadily.
			h.Eventually(b, 60*time.Second, "liveness ticking", func() bool { return mode.liveness == 0 || h.Controller.LivenessTicks() > 5 })
			sent0, ticks0 := h.Controller.ProbesSent(), h.Controller.LivenessTicks()
			secs := cpuWindow(b)
			b.ReportMetric(float64(h.Controller.ProbesSent()-sent0)/secs, "probes/s")
			if ticks := h.Controller.LivenessTicks() - ticks0; ticks > 0 {
				// A cut is found in 3 to 4 ticks.
				b.ReportMetric(secs*1000/float64(ticks), "tick_ms")
			}
		})
	}
}

// cpuWindow measures the process over a window of b.N seconds (the
// window is the measurement), reports its CPU time per second
// (cpu_ms/s), and returns the window's length in seconds for the
// caller's own rates.
func cpuWindow(b *testing.B) float64 {
	cpu0, at := cpuTime(), time.Now()
	b.ResetTimer()
	window := time.NewTimer(time.Duration(b.N) * time.Second)
	<-window.C
	b.StopTimer()
	secs := time.Since(at).Seconds()
	b.ReportMetric(ms(cpuTime()-cpu0)/secs, "cpu_ms/s")
	b.ReportMetric(0, "ns/op")
	return secs
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fatTreeOfEnv is a fat-tree of 100 Gb/s links whose k the environment
// variable env gives (default 16).
func fatTreeOfEnv(b *testing.B, env string) models.Topology {
	k := 16
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil {
		k = v
	}
	topo, err := topology.FatTree(k, 100)
	if err != nil {
		b.Fatal(err)
	}
	return topo
}
