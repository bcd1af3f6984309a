package proctest_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv "github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkScale runs a large fabric live: fabricsim in a process of its
// own, `accelnet serve` (embedded etcd) in another, and measures
//
//   - cold start: accelnet's process start → "accelnet ready" (every
//     switch's pipeline pushed, its tables written, read back and in sync);
//     cold_start_s, and the log line's own startup= (from its first
//     line, etcd's start included);
//   - P4Runtime updates written during it, and per second from the first
//     write to the last (updates_per_s);
//   - then, over a steady window with nothing changing, gNMI values taken
//     in per second (samples_per_s), accelnet's CPU per value
//     (cpu_us_per_sample: its whole CPU over the window divided by the
//     values, so an upper bound), accelnet's and fabricsim's CPU
//     (cpu_cores, sim_cpu_cores) and the pingmesh's probes sent a
//     second (probes_per_s; --probe-rate 0 turns it off, to compare);
//   - resident memory of both (peak and now), accelnet's Go heap, and the
//     embedded etcd's database file.
//
// The fabric, accelnet's flags and fabricsim's flags come from the
// environment:
//
//	ACCELNET_SCALE_TOPOLOGY=fattree:32@100 \
//	ACCELNET_SCALE_ARGS="--workers 64 --telemetry-interval 5s" \
//	ACCELNET_SCALE_SIM_ARGS="-counter-interval 5s" \
//	go test ./internal/proctest -run '^$' -bench 'Scale$' -benchtime 1x -timeout 60m
//
// (default fattree:16@100 with the default flags; the window is
// ACCELNET_SCALE_WINDOW, default 30s, stretched to a whole number of
// the telemetry and counter intervals given; ACCELNET_SCALE_ENV adds NAME=value
// pairs to accelnet's environment alone, such as its own GOMEMLIMIT;
// ACCELNET_SCALE_CPUS=A/B runs accelnet on CPUs A and fabricsim on CPUs B
// (taskset's lists: "0/1"), so that each has its own: the cold start
// reports each process's CPU to ready (cold_cpu_s, sim_cold_cpu_s)
// either way;
// ACCELNET_SCALE_PROFILES=DIR keeps CPU profiles of both processes over
// the cold start's first 20 s and the steady window's (which they cost a
// little of its CPU figures), an execution trace of accelnet's first 12 s
// (which slows its cold start), accelnet's heap after the steady window,
// and with intents the profiles of measureIntents).
func BenchmarkScale(b *testing.B) {
	spec := envOr("ACCELNET_SCALE_TOPOLOGY", "fattree:16@100")
	window, err := time.ParseDuration(envOr("ACCELNET_SCALE_WINDOW", "30s"))
	if err != nil {
		b.Fatalf("ACCELNET_SCALE_WINDOW: %v", err)
	}
	intents := envInt(b, "ACCELNET_SCALE_INTENTS", 0)
	args, simArgs := strings.Fields(os.Getenv("ACCELNET_SCALE_ARGS")), strings.Fields(os.Getenv("ACCELNET_SCALE_SIM_ARGS"))
	window = wholeSamples(window, flagDuration(args, "--telemetry-interval"), flagDuration(simArgs, "-counter-interval"))
	for range b.N { // one run is the measurement: -benchtime 1x
		measureScale(b, spec, args, simArgs, window, intents)
	}
}

// wholeSamples stretches window to a whole number of the longest of
// intervals: with 20 s counters a 30 s window held one tick or two, and
// the values taken in per second read 23,700 or 35,900 in runs of the
// same code.
func wholeSamples(window time.Duration, intervals ...time.Duration) time.Duration {
	longest := max(time.Duration(0), slices.Max(intervals))
	if longest <= 0 || window%longest == 0 {
		return window
	}
	return (window/longest + 1) * longest
}

// flagDuration is the duration given to flag in args ("flag value" or
// "flag=value"); 0 when absent or not a duration.
func flagDuration(args []string, flag string) time.Duration {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, flag+"=")
		if !ok && a == flag && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			d, _ := time.ParseDuration(v)
			return d
		}
	}
	return 0
}

// operatorGet reads api+path with the operator's token, into file
// unless file is "" (then the answer is read and dropped).
func operatorGet(api, token, path, file string) error {
	req, err := fabrictest.NewRequest(context.Background(), "GET", api+path, token, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || file == "" {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func measureScale(b *testing.B, spec string, args, simArgs []string, window time.Duration, intents int) {
	ctx := context.Background()
	dir := b.TempDir()
	simAPI, topoFile := fabrictest.FreeAddr(b), filepath.Join(dir, "fabric.yaml")
	sim := proctest.Start(b, "fabricsim", proctest.Bin(b, "fabricsim"), append([]string{"-topology", spec, "-http-addr", simAPI,
		"-out", topoFile, "-log-dir", filepath.Join(dir, "logs"), "-token-file", filepath.Join(dir, "sim.token")}, simArgs...)...)
	simURL := "http://" + simAPI
	// accelnet starts once the switches serve, as it would on a running
	// fabric: the emulator's own bring-up (publishing every port's state)
	// is reported apart.
	accCPUs, simCPUs, pinned := strings.Cut(os.Getenv("ACCELNET_SCALE_CPUS"), "/")
	if pinned {
		pin(b, sim.Pid(), simCPUs)
	}
	simUp, simToken := proctest.WaitFabricUp(b, 10*time.Minute, simAPI, filepath.Join(dir, "sim.token"))
	b.Logf("%s: fabricsim's switches up %s after its process started", spec, simUp.Round(time.Millisecond))
	addr := fabrictest.FreeAddr(b)
	t0, simCold0 := time.Now(), cpuSeconds(b, sim.Pid())
	accArgs := append([]string{"serve", "--topology", topoFile, "--http-addr", addr, "--data-dir", filepath.Join(dir, "accelnet")}, args...)
	accEnv := strings.Fields(os.Getenv("ACCELNET_SCALE_ENV"))
	acc := proctest.StartEnv(b, "accelnet", accEnv, proctest.Bin(b, "accelnet"), accArgs...)
	if pinned {
		pin(b, acc.Pid(), accCPUs)
	}
	var profiled sync.WaitGroup
	profiles, tokenFile := os.Getenv("ACCELNET_SCALE_PROFILES"), filepath.Join(dir, "accelnet", "operator.token")
	if profiles != "" {
		cpuProfiles(b, &profiled, profiles, "coldstart", "http://"+addr, tokenFile, simURL, simToken, true)
	}
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	startup := waitReady(b, acc, sim, poll)
	coldStart := time.Since(t0)
	accCold, simCold := cpuSeconds(b, acc.Pid()), cpuSeconds(b, sim.Pid())-simCold0
	b.Logf("%s: CPU to ready: accelnet %.1f s, fabricsim %.1f s (cores %q and %q; ACCELNET_SCALE_CPUS)", spec, accCold, simCold, accCPUs, simCPUs)
	profiled.Wait()
	var w struct {
		Last       int64 `json:"last"`
		FirstSince int64 `json:"first_since"`
	}
	if _, err := proctest.Call(ctx, nil, "GET", fmt.Sprintf("%s/sim/v1/writes?since=%d", simURL, t0.UnixNano()), simToken, nil, &w); err != nil {
		b.Fatal(err)
	}
	var report struct {
		Switches []struct {
			Updates int64 `json:"write_updates"`
			Writes  int64 `json:"write_rpcs"`
		} `json:"switches"`
	}
	if _, err := proctest.Call(ctx, &http.Client{Timeout: 5 * time.Minute}, "GET", simURL+"/sim/v1/switches", simToken, nil, &report); err != nil {
		b.Fatalf("read fabricsim's switches: %.300s", err)
	}
	switches := report.Switches
	var updates, rpcs int64
	for _, s := range switches {
		updates, rpcs = updates+s.Updates, rpcs+s.Writes
	}
	writing := time.Duration(w.Last - w.FirstSince)
	b.Logf("%s: %d switches programmed %s after accelnet started (log: startup=%s); %d updates in %d Write RPCs, first to last write %s",
		spec, len(switches), coldStart.Round(time.Millisecond), startup, updates, rpcs, writing.Round(time.Millisecond))

	// The steady state: nothing changes, counters stream in.
	metrics := func() map[string]float64 {
		v, err := scrape(nil, "http://"+addr, "accelnet_telemetry_samples_total", "process_cpu_seconds_total", "go_memstats_heap_inuse_bytes",
			probesSent, probesBack)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	before, simCPU0, w0 := metrics(), cpuSeconds(b, sim.Pid()), time.Now()
	if profiles != "" {
		cpuProfiles(b, &profiled, profiles, "steady", "http://"+addr, tokenFile, simURL, simToken, false)
	}
	for deadline := w0.Add(window); time.Now().Before(deadline); <-poll.C {
		if acc.Exited() || sim.Exited() {
			b.Fatal("a process exited in the steady window")
		}
	}
	after, simCPU1, span := metrics(), cpuSeconds(b, sim.Pid()), time.Since(w0).Seconds()
	profiled.Wait()
	samples := after["accelnet_telemetry_samples_total"] - before["accelnet_telemetry_samples_total"]
	cpu := after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]
	accRSS, accPeak := rss(b, acc.Pid())
	simRSS, simPeak := rss(b, sim.Pid())
	db, _ := os.Stat(filepath.Join(dir, "accelnet", "etcd", "member", "snap", "db"))
	var dbBytes int64
	if db != nil {
		dbBytes = db.Size()
	}
	// The live heap: what is left after a collection (the profile's
	// ?gc=1 runs one first; ACCELNET_SCALE_PROFILES=DIR keeps it).
	token, err := os.ReadFile(filepath.Join(dir, "accelnet", "operator.token"))
	if err != nil {
		b.Fatal(err)
	}
	heapFile := ""
	if d := os.Getenv("ACCELNET_SCALE_PROFILES"); d != "" {
		heapFile = filepath.Join(d, "steady.heap")
	}
	if err := operatorGet("http://"+addr, strings.TrimSpace(string(token)), "/debug/pprof/heap?gc=1", heapFile); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	live := metrics()["go_memstats_heap_inuse_bytes"]
	sent, back := (after[probesSent]-before[probesSent])/span, (after[probesBack]-before[probesBack])/span
	b.Logf("steady: latency probes %.0f/s sent, %.0f/s back (--probe-rate)", sent, back)
	b.Logf("steady %s: %.0f values/s taken in, accelnet CPU %.2f cores (%.1f µs per value), fabricsim CPU %.2f cores; RSS accelnet %d MiB (peak %d), fabricsim %d MiB (peak %d); accelnet heap %d MiB, %d MiB after a collection; etcd db %d KiB",
		time.Duration(span*float64(time.Second)).Round(time.Second), samples/span, cpu/span, 1e6*cpu/max(samples, 1), (simCPU1-simCPU0)/span,
		accRSS>>20, accPeak>>20, simRSS>>20, simPeak>>20, int64(after["go_memstats_heap_inuse_bytes"])>>20, int64(live)>>20, dbBytes>>10)
	if intents > 0 {
		measureIntents(b, "http://"+addr, filepath.Join(dir, "accelnet"), topoFile, intents, func() (*proctest.Proc, string) {
			acc.Stop()
			acc = proctest.StartEnv(b, "accelnet-again", accEnv, proctest.Bin(b, "accelnet"), accArgs...)
			return acc, waitReady(b, acc, sim, poll)
		}, acc.Pid)
	}
	b.ReportMetric(coldStart.Seconds(), "cold_start_s")
	b.ReportMetric(accCold, "cold_cpu_s")
	b.ReportMetric(simCold, "sim_cold_cpu_s")
	b.ReportMetric(float64(len(switches)), "switches")
	b.ReportMetric(float64(updates), "updates")
	if writing > 0 {
		b.ReportMetric(float64(updates)/writing.Seconds(), "updates_per_s")
	}
	b.ReportMetric(samples/span, "samples_per_s")
	b.ReportMetric(cpu/span, "cpu_cores")
	b.ReportMetric(sent, "probes_per_s")
	b.ReportMetric(1e6*cpu/max(samples, 1), "cpu_us_per_sample")
	b.ReportMetric((simCPU1-simCPU0)/span, "sim_cpu_cores")
	b.ReportMetric(float64(accPeak>>20), "accelnet_peak_rss_MiB")
	b.ReportMetric(float64(simPeak>>20), "sim_peak_rss_MiB")
	b.ReportMetric(after["go_memstats_heap_inuse_bytes"]/(1<<20), "accelnet_heap_MiB")
	b.ReportMetric(live/(1<<20), "accelnet_live_heap_MiB")
	b.ReportMetric(float64(dbBytes>>10), "etcd_db_KiB")
}

// cpuProfiles takes 20 s CPU profiles of both processes from now (NAME.cpu
// and NAME-sim.cpu in dir): accelnet's as soon as its API answers with the
// operator's token, which it writes once its etcd is up. With traced,
// also an execution trace of accelnet's first 12 s (NAME.trace; go tool
// trace -pprof=sync says what its goroutines waited on).
func cpuProfiles(b *testing.B, wg *sync.WaitGroup, dir, name, api, tokenFile, simURL, simToken string, traced bool) {
	const seconds = "20"
	fromAccelnet := func(path, file string) {
		wg.Go(func() {
			if err := whenUp(func() error {
				token, err := os.ReadFile(tokenFile)
				if err != nil {
					return err
				}
				return operatorGet(api, strings.TrimSpace(string(token)), path, filepath.Join(dir, file))
			}); err != nil {
				b.Logf("accelnet's %s: %v", file, err)
			}
		})
	}
	fromAccelnet("/debug/pprof/profile?seconds="+seconds, name+".cpu")
	if traced {
		fromAccelnet("/debug/pprof/trace?seconds=12", name+".trace")
	}
	wg.Go(func() {
		if err := operatorGet(simURL, simToken, "/debug/pprof/profile?seconds="+seconds, filepath.Join(dir, name+"-sim.cpu")); err != nil {
			b.Logf("fabricsim's %s profile: %v", name, err)
		}
	})
}

// whenUp calls try every 50 ms until it succeeds, or a minute has passed
// (then its last error): a process starting, its API or operator token
// not there yet.
func whenUp(try func() error) error {
	retry := time.NewTicker(50 * time.Millisecond)
	defer retry.Stop()
	var err error
	for backstop := time.Now().Add(time.Minute); time.Now().Before(backstop); <-retry.C {
		if err = try(); err == nil {
			return nil
		}
	}
	return err
}

// waitReady waits until acc logs that every switch is programmed and
// returns the line's startup= figure.
func waitReady(b *testing.B, acc, sim *proctest.Proc, poll *time.Ticker) string {
	ready := regexp.MustCompile(`accelnet ready: every switch programmed"? startup=(\S+)`)
	for backstop := time.Now().Add(45 * time.Minute); ; <-poll.C {
		if m := ready.FindStringSubmatch(acc.Log()); m != nil {
			return m[1]
		}
		if acc.Exited() || sim.Exited() {
			b.Fatalf("a process exited before every switch was programmed")
		}
		if time.Now().After(backstop) {
			b.Fatal("not every switch programmed after 45 minutes")
		}
	}
}

// measureIntents admits n one-flow intents from 64 clients (64 tenants),
// each answered after its etcd commit, then reads them all back a page
// at a time, and restarts accelnet on the same data to time how long it
// takes to load them and be ready again.
func measureIntents(b *testing.B, api, dataDir, topoFile string, n int, restart func() (*proctest.Proc, string), pid func() int) {
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(dataDir, "operator.token"))
	if err != nil {
		b.Fatal(err)
	}
	operator := strings.TrimSpace(string(data))
	topo, err := topology.Load(topoFile)
	if err != nil {
		b.Fatal(err)
	}
	hosts := topo.Hosts
	// ACCELNET_SCALE_PROFILES=DIR keeps a CPU profile of 20 s of admission
	// and an execution trace of its first 8 s (go tool trace -pprof=sync
	// says what requests waited on), a heap profile with the intents
	// loaded, and a CPU profile of the restart's first 30 s.
	profiles := os.Getenv("ACCELNET_SCALE_PROFILES")
	profile := func(path, file string) error {
		return operatorGet(api, operator, path, filepath.Join(profiles, file))
	}
	if profiles != "" {
		go func() {
			if err := profile("/debug/pprof/profile?seconds=20", "admission.cpu"); err != nil {
				b.Logf("admission profile: %v", err)
			}
		}()
		go func() {
			if err := profile("/debug/pprof/trace?seconds=8", "admission.trace"); err != nil {
				b.Logf("admission trace: %v", err)
			}
		}()
	}
	admitting, all := admitMany(b, api, operator, hosts, n)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: time.Minute}
	// Paging through every intent as the operator.
	var pages []time.Duration
	for token, seen := "", 0; ; {
		var list apiv.IntentList
		t0 := time.Now()
		if code, err := proctest.Call(ctx, cl, "GET", api+"/api/v1/intents?limit=1000&page_token="+token, operator, nil, &list); err != nil || code != http.StatusOK {
			b.Fatalf("list intents: HTTP %d %v", code, err)
		}
		pages = append(pages, time.Since(t0))
		seen += len(list.Items)
		if token = list.NextPageToken; token == "" {
			if seen < n {
				b.Fatalf("listed %d intents, admitted %d", seen, n)
			}
			break
		}
	}
	slices.Sort(pages)
	rssNow, _ := rss(b, pid())
	var restarted sync.WaitGroup
	if profiles != "" {
		if err := profile("/debug/pprof/heap?gc=1", "intents.heap"); err != nil {
			b.Logf("heap profile: %v", err)
		}
		restarted.Go(func() {
			if err := whenUp(func() error { return profile("/debug/pprof/profile?seconds=30", "restart.cpu") }); err != nil {
				b.Logf("restart profile: %v", err)
			}
		})
	}
	_, again := restart()
	restarted.Wait()
	b.Logf("%d intents: admitted at %.0f/s, p50 %s, p99 %s; %d pages of 1,000 listed, p50 %s, worst %s; accelnet RSS %d MiB with them; restarted on the same data: ready (startup=%s)",
		n, float64(n)/admitting.Seconds(), all[len(all)/2].Round(time.Millisecond), all[len(all)*99/100].Round(time.Millisecond),
		len(pages), pages[len(pages)/2].Round(time.Millisecond), pages[len(pages)-1].Round(time.Millisecond), rssNow>>20, again)
	b.ReportMetric(float64(n)/admitting.Seconds(), "intents/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "admit_p99_ms")
	b.ReportMetric(float64(pages[len(pages)/2].Microseconds())/1000, "page_p50_ms")
	b.ReportMetric(float64(rssNow>>20), "rss_with_intents_MiB")
	if d, err := time.ParseDuration(again); err == nil {
		b.ReportMetric(d.Seconds(), "restart_ready_s")
	}
}

// admitMany admits n one-flow intents through api from 64 clients, one
// tenant each (made with the operator's token), spread over hosts, each
// answered after its etcd commit; it returns how long that took and every
// answer's latency, sorted.
func admitMany(b *testing.B, api, operator string, hosts []models.Host, n int) (time.Duration, []time.Duration) {
	ctx := context.Background()
	const clients = 64
	tokens := make([]string, clients)
	for i := range tokens {
		name := models.TenantName(fmt.Sprintf("scale%d", i))
		if code, err := proctest.Call(ctx, nil, "POST", api+"/api/v1/tenants", operator, models.Tenant{Name: name}, nil); err != nil || code != http.StatusCreated {
			b.Fatalf("create tenant: HTTP %d %v", code, err)
		}
		var tok apiv.NewTokenView
		if code, err := proctest.Call(ctx, nil, "POST", api+"/api/v1/tokens", operator, apiv.TokenRequest{Tenant: name, Role: models.RoleTenant}, &tok); err != nil || code != http.StatusCreated {
			b.Fatalf("create token: HTTP %d %v", code, err)
		}
		tokens[i] = tok.Secret
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: time.Minute}
	var next, failed atomic.Int64
	latencies := make([][]time.Duration, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				// Spread over the fabric: pairs of hosts, a source port per round.
				src, dst := hosts[i%len(hosts)], hosts[(i/len(hosts)+1+i)%len(hosts)]
				if src.Name == dst.Name {
					dst = hosts[(i+1)%len(hosts)]
				}
				port := uint16(1 + i/len(hosts))
				spec := models.IntentSpec{Name: "s", Src: src.Name, Dst: dst.Name, Gbps: 0.001, SrcPorts: models.PortRange{First: port, Last: port}}
				t0 := time.Now()
				code, err := proctest.Call(ctx, cl, "POST", api+"/api/v1/intents", tokens[c], spec, nil)
				latencies[c] = append(latencies[c], time.Since(t0))
				if err != nil || code != http.StatusCreated {
					if failed.Add(1) == 1 {
						b.Logf("first failed admission: HTTP %d %v", code, err)
					}
				}
			}
		})
	}
	wg.Wait()
	admitting := time.Since(start)
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d admissions failed", f, n)
	}
	return admitting, all
}

// scrape reads the unlabelled samples names from the /metrics of the
// server at base, over client (nil: http.DefaultClient).
func scrape(client *http.Client, base string, names ...string) (map[string]float64, error) {
	resp, err := cmp.Or(client, http.DefaultClient).Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return promValues(string(text), names...), nil
}

// The pingmesh's probes sent and come back, as /metrics names them.
const (
	probesSent = `accelnet_latency_probes_total{result="sent"}`
	probesBack = `accelnet_latency_probes_total{result="received"}`
)

// promValues picks samples out of a Prometheus text exposition, each
// named as it is written there (with its labels, if any).
func promValues(text string, names ...string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				out[n], _ = strconv.ParseFloat(strings.TrimSpace(value), 64)
			}
		}
	}
	return out
}

// pin keeps every thread of process pid, and those it starts, on the
// CPUs in list (taskset's syntax: "0", "0-1", "0,2").
func pin(b *testing.B, pid int, list string) {
	if out, err := exec.Command("taskset", "-a", "-cp", list, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		b.Fatalf("taskset %s %d: %v: %s", list, pid, err, out)
	}
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from after it.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ: 100 on Linux
}

// rss is a process's resident memory now and at its peak, in bytes.
func rss(b *testing.B, pid int) (now, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			now = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return now, peak
}

// TestWholeSamples: the steady window holds a whole number of the
// longest interval the flags give.
func TestWholeSamples(t *testing.T) {
	args := []string{"--workers", "64", "--telemetry-interval", "20s"}
	sim := []string{"-counter-interval=5s"}
	tel, cnt := flagDuration(args, "--telemetry-interval"), flagDuration(sim, "-counter-interval")
	if tel != 20*time.Second || cnt != 5*time.Second {
		t.Fatalf("flags read as %s and %s", tel, cnt)
	}
	for _, c := range []struct {
		window    time.Duration
		intervals []time.Duration
		want      time.Duration
	}{
		{30 * time.Second, []time.Duration{tel, cnt}, 40 * time.Second},
		{40 * time.Second, []time.Duration{tel, cnt}, 40 * time.Second},
		{30 * time.Second, []time.Duration{0, 0}, 30 * time.Second},
		{30 * time.Second, []time.Duration{time.Second, 500 * time.Millisecond}, 30 * time.Second},
	} {
		if got := wholeSamples(c.window, c.intervals...); got != c.want {
			t.Errorf("wholeSamples(%s, %v) = %s, want %s", c.window, c.intervals, got, c.want)
		}
	}
}
