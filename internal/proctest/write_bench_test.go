package proctest_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkWriteRate measures P4Runtime updates per second from the
// controller's driver (southbound.P4RT, as accelnet runs it) to fabricsim
// in a process of its own: a steady-state rewrite, with no route planning
// or reconciling around it. Every switch gets ACCELNET_WRITE_PINS flow
// pins (default 1,000) inserted, then every pin modified to another port
// (the rewrite), then deleted; ACCELNET_WRITE_AT_ONCE switches are written
// at once (default 64, as `--workers 64`), each by one Write at a time of
// up to ACCELNET_WRITE_BATCH updates (default 1,000, the driver's). It
// reports each phase's updates per second, the benchmark process's CPU
// per update (the controller's side: building and encoding the updates,
// gRPC) and fabricsim's CPU. ACCELNET_WRITE_PROFILES=DIR keeps CPU
// profiles of both over the first 3 s of the rewrite.
//
//	ACCELNET_WRITE_TOPOLOGY=fattree:16@100 \
//	go test ./internal/proctest -run '^$' -bench 'WriteRate$' -benchtime 1x
func BenchmarkWriteRate(b *testing.B) {
	spec := envOr("ACCELNET_WRITE_TOPOLOGY", "fattree:16@100")
	pins := envInt(b, "ACCELNET_WRITE_PINS", 1000)
	atOnce := envInt(b, "ACCELNET_WRITE_AT_ONCE", 64)
	batch := envInt(b, "ACCELNET_WRITE_BATCH", 1000)
	if pins == 0 || atOnce == 0 || batch == 0 {
		b.Fatal("ACCELNET_WRITE_PINS, _AT_ONCE and _BATCH must be above zero")
	}
	dir := b.TempDir()
	simAPI, topoFile := fabrictest.FreeAddr(b), filepath.Join(dir, "fabric.yaml")
	sim := proctest.Start(b, "fabricsim", proctest.Bin(b, "fabricsim"), "-topology", spec, "-http-addr", simAPI,
		"-out", topoFile, "-log-dir", filepath.Join(dir, "logs"), "-counter-interval", "5s", "-token-file", filepath.Join(dir, "sim.token"))
	proctest.WaitFabricUp(b, 10*time.Minute, simAPI, filepath.Join(dir, "sim.token"))
	topo, err := topology.LoadFile(topoFile)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	schema, err := p4.LoadSchema()
	if err != nil {
		b.Fatal(err)
	}
	d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: snap.Switch, ElectionID: 1, MaxBatch: batch})
	defer d.Close()
	ctx := context.Background()
	switches := snap.Switches()
	// Each switch's pins: distinct keys, out of one of its ports, then
	// out of the next.
	pinsOf := func(sw models.Switch, shift int) []models.FlowPin {
		ports := snap.Ports(sw.Name)
		out := make([]models.FlowPin, pins)
		for i := range out {
			out[i] = models.FlowPin{Key: models.FlowKey{
				Src:     netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}),
				Dst:     netip.AddrFrom4([4]byte{10, 201, byte(i >> 8), byte(i)}),
				SrcPort: uint16(49152 + i%16000)}, Port: ports[(i+shift)%len(ports)]}
		}
		return out
	}
	// Connect (arbitration, pipeline) before anything is timed.
	phase(b, switches, atOnce, func(sw models.Switch) error { _, err := d.Read(ctx, sw.Name); return err })
	for range b.N {
		for _, p := range []struct {
			name string
			diff func(models.Switch) models.Diff
		}{
			{"insert", func(sw models.Switch) models.Diff {
				return models.Diff{Insert: models.ForwardingState{FlowPins: pinsOf(sw, 0)}}
			}},
			{"modify", func(sw models.Switch) models.Diff {
				return models.Diff{Modify: models.ForwardingState{FlowPins: pinsOf(sw, 1)}}
			}},
			{"delete", func(sw models.Switch) models.Diff {
				return models.Diff{Delete: models.ForwardingState{FlowPins: pinsOf(sw, 1)}}
			}},
		} {
			diffs := make(map[models.SwitchID]models.Diff, len(switches))
			for _, sw := range switches {
				diffs[sw.Name] = p.diff(sw) // built before the clock starts
			}
			var profiled sync.WaitGroup
			if dir := os.Getenv("ACCELNET_WRITE_PROFILES"); dir != "" && p.name == "modify" {
				profiled.Go(func() { profileWrites(b, dir, simAPI) })
			}
			self0, sim0, t0 := ownCPU(), cpuSeconds(b, sim.Pid()), time.Now()
			phase(b, switches, atOnce, func(sw models.Switch) error { return d.Apply(ctx, sw.Name, diffs[sw.Name]) })
			took := time.Since(t0)
			profiled.Wait()
			self, simCPU := ownCPU()-self0, cpuSeconds(b, sim.Pid())-sim0
			updates := float64(len(switches) * pins)
			b.Logf("%s %s: %.0f updates in %s: %.0f updates/s; driver %.2f µs CPU per update (%.2f cores), fabricsim %.2f µs (%.2f cores)",
				spec, p.name, updates, took.Round(time.Millisecond), updates/took.Seconds(),
				1e6*self/updates, self/took.Seconds(), 1e6*simCPU/updates, simCPU/took.Seconds())
			b.ReportMetric(updates/took.Seconds(), p.name+"_updates_per_s")
			if p.name == "modify" {
				b.ReportMetric(1e6*self/updates, "driver_cpu_us_per_update")
				b.ReportMetric(1e6*simCPU/updates, "sim_cpu_us_per_update")
			}
		}
	}
	// What fabricsim holds matches: every pin deleted.
	for _, sw := range switches[:min(4, len(switches))] {
		st, err := d.Read(ctx, sw.Name)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.FlowPins) != 0 {
			b.Fatalf("%s still holds %d pins after they were deleted", sw.Name, len(st.FlowPins))
		}
	}
}

// profileWrites keeps CPU profiles of the driver's process and of
// fabricsim over the first 3 s of a phase, in dir.
func profileWrites(b *testing.B, dir, simAPI string) {
	f, err := os.Create(filepath.Join(dir, "write-driver.cpu"))
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Error(err)
		return
	}
	defer pprof.StopCPUProfile()
	if err := operatorGet("http://"+simAPI, "", "/debug/pprof/profile?seconds=3", filepath.Join(dir, "write-fabricsim.cpu")); err != nil {
		b.Error(err)
	}
}

// phase runs write on every switch, atOnce switches at a time.
func phase(b *testing.B, switches []models.Switch, atOnce int, write func(models.Switch) error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(switches))
	slots := make(chan struct{}, atOnce)
	for _, sw := range switches {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := write(sw); err != nil {
				errs <- fmt.Errorf("%s: %w", sw.Name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// ownCPU is this process's user and system CPU time so far, in seconds.
func ownCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// envInt is the integer in the environment variable name, or def; a
// benchmark's count, so not below zero.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}
