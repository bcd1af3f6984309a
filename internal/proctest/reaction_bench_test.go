package proctest_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkFailureReactionProcesses is BenchmarkFailureReaction (in
// internal/fabrictest) with the controller and the emulated fabric in
// processes of their own, as a controller and its switches are: the same
// k=16 fat-tree (320 switches) under the same multi-tenant workload, the
// same 30 links, failure → first and last switch written, read from
// fabricsim's write timestamps (GET /sim/v1/writes). The two processes
// still share the machine's cores; what they no longer share is a heap
// (the emulator's 320 switches of table entries are not the controller's
// garbage to scan). A failure has been handled when the controller's
// /readyz says no rollout is under way and nothing was written for a
// second after the first write.
//
//	go test ./internal/proctest -run '^$' -bench FailureReactionProcesses -benchtime 30x -timeout 30m
//
// For larger fabrics and switch failures (docs/scaling.md):
//
//	ACCELNET_REACTION_TOPOLOGY=fattree:32@100 \
//	ACCELNET_REACTION_ARGS="--workers 64 --telemetry-interval 5s" \
//	ACCELNET_REACTION_SIM_ARGS="-counter-interval 5s" \
//	ACCELNET_REACTION_FAIL=switch \
//	go test ./internal/proctest -run '^$' -bench FailureReactionProcesses -benchtime 30x -timeout 60m
//
// ACCELNET_REACTION_FAIL=switch fails spine and core switches (a switch
// that goes down loses its tables: its return is a full reprogram)
// instead of links. ACCELNET_REACTION_WORKLOAD names another workload
// pattern (fabricsim's): the multi-tenant one is hundreds of thousands
// of flows at k=32, whose rates the emulator recomputes after every
// change under the lock its switches need (a link fails and is reported
// without it), so the figures measure the emulator more than the
// controller there; "permutation" is
// one flow per host. ACCELNET_REACTION_DETAIL=1 prints each failure's
// time, first and last write, and the controller's log lines of each
// reroute (how long after the switch's report it was decided) and
// rollout (how long its planning and each stage took), and its writes
// summed every 2 s ("switches programmed").
// ACCELNET_REACTION_PROFILES=DIR keeps CPU and allocation profiles of
// accelnet and fabricsim over the first 45 s of failures, and their
// heaps.
// ACCELNET_REACTION_CPUS=A/B runs accelnet on CPUs A and fabricsim on
// CPUs B from the workload's start (taskset's lists: "0/1"): the
// controller's side of a reaction apart from the emulator's.
// ACCELNET_REACTION_SIM_ENV adds to fabricsim's environment (GOGC=400
// at k=48: the emulator holds gigabytes, and each of its collections
// marks them for seconds on the cores the controller shares; its
// collector, not the controller, then sets the p99), and
// ACCELNET_REACTION_ENV to accelnet's.
// ACCELNET_REACTION_TRACES=DIR keeps Go execution traces of both
// processes over each failure's first 8 s (go tool trace; they slow both
// processes a little). Either, or ACCELNET_REACTION_LOGS=DIR alone, keeps
// both processes' whole logs (with GODEBUG=gctrace=1 in the environment,
// their collections too).
func BenchmarkFailureReactionProcesses(b *testing.B) {
	spec := envOr("ACCELNET_REACTION_TOPOLOGY", "fattree:16@100")
	args := append([]string{"--congestion-interval", "0", "--sample-one-in", "0"}, strings.Fields(os.Getenv("ACCELNET_REACTION_ARGS"))...)
	d := deployWith(b, spec, 1, setup{replicaArgs: args, simArgs: strings.Fields(os.Getenv("ACCELNET_REACTION_SIM_ARGS")),
		env: strings.Fields(os.Getenv("ACCELNET_REACTION_ENV")), simEnv: strings.Fields(os.Getenv("ACCELNET_REACTION_SIM_ENV")), startWithin: 15 * time.Minute})
	r := d.replicas[0]
	d.waitRole(r, "leader", time.Minute)
	if acc, em, ok := strings.Cut(os.Getenv("ACCELNET_REACTION_CPUS"), "/"); ok {
		pin(b, r.proc.Pid(), acc)
		pin(b, d.sim.Pid(), em)
	}
	ctx := context.Background()
	sim := "http://" + d.simAPI
	pattern := envOr("ACCELNET_REACTION_WORKLOAD", "multi-tenant")
	// The emulator answers its control API under its dataplane's lock,
	// longer than the default client's 5 s at scale: the workload starts
	// while the controller's cold start writes the tables (at k=48,
	// 27,648 flows routed), and a failure is answered once it is logged
	// under that lock (at k=32 under the workload, seconds; the writes
	// are timed by the emulator, so the answer's delay is not counted).
	slow := &http.Client{Timeout: 5 * time.Minute}
	if code, err := proctest.Call(ctx, slow, "POST", sim+"/sim/v1/workloads", d.simToken, map[string]any{"pattern": pattern, "gbps": 100, "tenants": 64, "seed": 1}, nil); err != nil || code != 201 {
		b.Fatalf("start the workload: HTTP %d, %v", code, err)
	}
	topo, err := topology.Load(d.topoFile)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	// What fails: links (by ID), or spine and core switches (by name).
	var targets []string
	failSwitches := os.Getenv("ACCELNET_REACTION_FAIL") == "switch"
	if failSwitches {
		for _, sw := range snap.Switches() {
			if sw.Role != models.RoleLeaf {
				targets = append(targets, string(sw.Name))
			}
		}
	} else {
		for _, l := range snap.FabricLinks() {
			targets = append(targets, string(l.ID()))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	type writes struct {
		Last       int64 `json:"last"`
		FirstSince int64 `json:"first_since"`
	}
	read := func(since time.Time) writes {
		var w writes
		if _, err := proctest.Call(ctx, slow, "GET", fmt.Sprintf("%s/sim/v1/writes?since=%d", sim, since.UnixNano()), d.simToken, nil, &w); err != nil {
			b.Fatal(err)
		}
		return w
	}
	// rolling says whether the controller is rolling a change of routes
	// out (planning included), from its /readyz.
	rolling := func() bool {
		var v struct {
			InProgress bool `json:"rollout_in_progress"`
		}
		if _, err := proctest.Call(ctx, slow, "GET", r.url()+"/readyz", "", nil, &v); err != nil {
			b.Fatal(err)
		}
		return v.InProgress
	}
	// quiet waits until something was written after t0, nothing for a
	// second, then the controller says no rollout is under way and
	// nothing is written for a second after that; it returns the writes.
	// (Writes alone were not enough: at k=48 a switch's return is
	// planned for a second or two with nothing written, and the next
	// failure then landed on that plan, its rollout carrying the
	// return's; a failure's own plan could end the wait the same way
	// before its stages were written.) The second after it takes in the
	// cleanup a rollout writes as its last stage completes.
	quiet := func(t0 time.Time, backstop time.Duration) writes {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(backstop)
		var settled time.Time // when the controller was seen with no rollout, the writes quiet
		for range tick.C {
			w := read(t0)
			last := time.Unix(0, w.Last)
			switch {
			case w.FirstSince == 0 || time.Since(last) <= time.Second:
				settled = time.Time{}
			case settled.IsZero():
				if !rolling() {
					settled = time.Now()
				}
			case time.Since(settled) > time.Second && last.Before(settled):
				return w
			}
			if time.Now().After(deadline) {
				b.Fatalf("no quiet second within %s of %s", backstop, t0)
			}
		}
		return writes{}
	}
	set := func(target string, up bool) {
		path, body := "/sim/v1/links", map[string]any{"link": target, "up": up}
		if failSwitches {
			kind := "switch-down"
			if up {
				kind = "switch-up"
			}
			path, body = "/sim/v1/faults", map[string]any{"kind": kind, "target": target}
		}
		if code, err := proctest.Call(ctx, slow, "POST", sim+path, d.simToken, body, nil); err != nil || code >= 300 {
			b.Fatalf("set %s up=%v: HTTP %d, %v", target, up, code, err)
		}
	}
	quiet(time.Unix(0, 1), 15*time.Minute) // the cold start and the workload's start settled
	// One failure and return, not measured: the first after startup also
	// pays for warming what the controller keeps.
	warm := targets[len(targets)-1]
	t := time.Now()
	set(warm, false)
	quiet(t, 5*time.Minute)
	t = time.Now()
	set(warm, true)
	quiet(t, 5*time.Minute)
	var took, first []time.Duration
	detail := os.Getenv("ACCELNET_REACTION_DETAIL") != ""
	var profiled sync.WaitGroup
	if dir := os.Getenv("ACCELNET_REACTION_PROFILES"); dir != "" {
		// accelnet's and fabricsim's CPU, and what each allocated, over
		// the first 45 s of failures; what each holds (as of its last
		// collection).
		for _, p := range []struct{ api, token, file string }{
			{r.url(), d.token, "reaction"}, {sim, d.simToken, "reaction-fabricsim"},
		} {
			for _, k := range []struct{ path, ext string }{{"profile?seconds=45", ".cpu"}, {"allocs?seconds=45", ".allocs"}, {"heap", ".heap"}} {
				profiled.Go(func() {
					if err := operatorGet(p.api, p.token, "/debug/pprof/"+k.path, filepath.Join(dir, p.file+k.ext)); err != nil {
						b.Logf("%s %s profile: %v", p.file, k.path, err)
					}
				})
			}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		target := targets[i%len(targets)]
		var traced sync.WaitGroup
		if dir := os.Getenv("ACCELNET_REACTION_TRACES"); dir != "" {
			for _, p := range []struct{ api, token, name string }{{r.url(), d.token, "accelnet"}, {sim, d.simToken, "fabricsim"}} {
				traced.Go(func() {
					if err := operatorGet(p.api, p.token, "/debug/pprof/trace?seconds=8", filepath.Join(dir, fmt.Sprintf("failure-%d-%s.trace", i, p.name))); err != nil {
						b.Logf("%s trace: %v", p.name, err)
					}
				})
			}
		}
		t0 := time.Now()
		set(target, false)
		w := quiet(t0, 5*time.Minute)
		traced.Wait()
		took = append(took, time.Unix(0, w.Last).Sub(t0))
		first = append(first, time.Unix(0, w.FirstSince).Sub(t0))
		if detail {
			fmt.Printf("failure %d %s at %s: first write %s, last write %s\n", i, target, t0.UTC().Format("15:04:05.000"),
				first[len(first)-1].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		}
		t1 := time.Now()
		set(target, true)
		quiet(t1, 5*time.Minute)
	}
	b.StopTimer()
	profiled.Wait()
	if dir := cmp.Or(os.Getenv("ACCELNET_REACTION_LOGS"), os.Getenv("ACCELNET_REACTION_TRACES"), os.Getenv("ACCELNET_REACTION_PROFILES")); dir != "" {
		for name, p := range map[string]*proctest.Proc{"accelnet.log": d.replicas[0].proc, "fabricsim.log": d.sim} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(p.Log()), 0o644); err != nil {
				b.Log(err)
			}
		}
	}
	if detail { // the controller's account of each reroute and rollout, its writes summed every 2 s, and what each process holds
		for _, line := range strings.Split(d.replicas[0].proc.Log(), "\n") {
			if strings.Contains(line, "rollout finished") || strings.Contains(line, "; rerouting") || strings.Contains(line, "switches programmed") {
				fmt.Println(line)
			}
		}
		// What each process holds after the failures.
		accRSS, accPeak := rss(b, r.proc.Pid())
		simRSS, simPeak := rss(b, d.sim.Pid())
		v, _ := scrape(nil, r.url(), "go_goroutines")
		goroutines := v["go_goroutines"]
		fmt.Printf("accelnet: RSS %d MiB (peak %d), %.0f goroutines; fabricsim: RSS %d MiB (peak %d)\n",
			accRSS>>20, accPeak>>20, goroutines, simRSS>>20, simPeak>>20)
	}
	slices.Sort(took)
	slices.Sort(first)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first_write_p50_ms")
}
