package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A row is one figure of docs/measured.md: the benchmark that makes it,
// the command that runs it, which of its metrics the table shows and the
// target it is held to.
type row struct {
	ID     string // stable key of its recorded output
	Figure string
	Short  string // the figure in the README's table
	Pkg    string // ./internal/fabrictest
	// Bench is -bench's pattern; Benchtime and CPU -benchtime and -cpu
	// ("" for go test's defaults); Env the environment it runs with.
	Bench, Benchtime, CPU string
	Env                   []string
	Timeout               string
	// Show makes the value cell from the benchmark's results (by metric
	// name, of the line whose name matches Line; "" takes the first).
	Show   func(r results) string
	Target *target
	// Long rows run only with -long (minutes each on 2 cores).
	Long bool
	// Headline rows are also in the README's table.
	Headline bool
	// Why links the analysis of a missed target.
	Why string
}

// target is what a row's metric should reach.
type target struct {
	Metric  string // of the row's first result line
	Line    string
	AtLeast bool // else at most
	Value   float64
	Text    string // the target as the table says it
	// And is a second condition that must hold too.
	And *target
}

// met says whether r meets t (false if a metric is missing).
func (t *target) met(r results) bool {
	v, ok := r.metric(t.Line, t.Metric)
	if !ok {
		return false
	}
	ok = v <= t.Value
	if t.AtLeast {
		ok = v >= t.Value
	}
	if t.And != nil {
		ok = ok && t.And.met(r)
	}
	return ok
}

// command is the row's go test command line, as the table prints it.
func (r row) command() string {
	var b strings.Builder
	for _, e := range r.Env {
		b.WriteString(e + " ")
	}
	fmt.Fprintf(&b, "go test %s -run '^$' -bench '%s' -benchmem", r.Pkg, r.Bench)
	if r.Benchtime != "" {
		b.WriteString(" -benchtime " + r.Benchtime)
	}
	if r.CPU != "" {
		b.WriteString(" -cpu " + r.CPU)
	}
	if r.Timeout != "" {
		b.WriteString(" -timeout " + r.Timeout)
	}
	return b.String()
}

// args are the row's go test arguments.
func (r row) args() []string {
	a := []string{"test", r.Pkg, "-run", "^$", "-bench", r.Bench, "-benchmem"}
	if r.Benchtime != "" {
		a = append(a, "-benchtime", r.Benchtime)
	}
	if r.CPU != "" {
		a = append(a, "-cpu", r.CPU)
	}
	if r.Timeout != "" {
		a = append(a, "-timeout", r.Timeout)
	}
	return a
}

// ms formats milliseconds: "54 ms", "1.42 s", "1.6 µs".
func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	if v < 0.1 {
		return fmt.Sprintf("%.1f µs", v*1000)
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// thousands formats an integer with thousands separators: "15,000".
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// show formats metrics of a result line by a layout: each {name} is
// replaced by the metric formatted by its unit's rule.
func show(line, layout string) func(results) string {
	return func(r results) string {
		out := layout
		for {
			i := strings.Index(out, "{")
			j := strings.Index(out, "}")
			if i < 0 || j < i {
				return out
			}
			name, format, _ := strings.Cut(out[i+1:j], "|")
			v, ok := r.metric(line, name)
			text := "—"
			if ok {
				switch format {
				case "ms":
					text = ms(v)
				case "nsms": // ns/op as ms
					text = ms(v / 1e6)
				case "int":
					text = thousands(v)
				case "kb":
					text = fmt.Sprintf("%.1f KB", v/1000)
				case "ratio":
					text = fmt.Sprintf("%.3f", v)
				case "s":
					text = fmt.Sprintf("%.1f s", v)
				case "pct": // a share as a percentage
					text = fmt.Sprintf("%.0f%%", 100*v)
				default:
					text = fmt.Sprintf("%g", v)
				}
			}
			out = out[:i] + text + out[j+1:]
		}
	}
}

// k48Env is the environment of a k=48 row's benchmark, whose variables
// begin with prefix: the fabric and both processes' flags as a deployment
// of that size sets them, between lead and the rest of extra, and the
// memory limit last.
func k48Env(prefix string, lead []string, extra ...string) []string {
	return slices.Concat(lead, []string{prefix + `_TOPOLOGY=fattree:48@100`,
		prefix + `_ARGS="--workers 64 --telemetry-interval 20s --discovery-interval 30s --election-ttl 10s"`, prefix + `_SIM_ARGS="-counter-interval 20s"`},
		extra, []string{`GOMEMLIMIT=16GiB`})
}

// convergeSeeds is how many seeds BenchmarkConvergence runs unless told.
const convergeSeeds = 10

// quietRow is a k=16 row of the convergence benchmark on fabric (name in
// the row's ID, short in the README, what it is in the figure), every
// scenario over seeds, idle or (busy) beside a CPU burner at the lowest
// priority.
func quietRow(name, short, fabric, what string, seeds int, busy bool) row {
	r := row{
		ID: "converge-k16-" + name, Short: short + " loop quiet once settled",
		Pkg: "./internal/fabrictest", Bench: "Convergence/" + fabric + "$", Benchtime: "1x", Timeout: "3h",
		Show:   show("", "ratio {worst_ratio|ratio}; to 95% {worst_p95_to95_ms|ms}; {writes_once_settled|int} writes once settled; {unsettled_phases|int} phases unsettled"),
		Target: &target{Metric: "writes_once_settled", Value: 0, Text: "nothing written once settled", And: &target{Metric: "unsettled_phases", Value: 0}},
		Why:    "scaling.md#quiet-once-settled", Long: true,
	}
	where := "idle"
	if seeds != convergeSeeds {
		r.Env = append(r.Env, fmt.Sprintf("ACCELNET_SEEDS=%d", seeds))
	}
	if busy {
		r.ID, r.Short, where = r.ID+"-busy", r.Short+", beside a burner", "beside a CPU burner at the lowest priority (as `nice -n 19 yes`)"
		r.Env = append(r.Env, "ACCELNET_CONVERGE_BURN=nice")
	}
	r.Figure = fmt.Sprintf("the placement and congestion-weight loop on %s (%s, 400 Gb/s, sampling 1 in 65,536), every scenario (cold start, detection in rounds, jobs starting and stopping, a link failing and returning, a drain, intents reloaded), %d seeds, %s: worst throughput ratio ÷ the one-shot placement's; worst p95 of first placement → 95%%; most Write RPCs once settled; phases that did not settle", fabric, what, seeds, where)
	return r
}

// rows are the figures of docs/measured.md, quick ones first.
var rows = []row{
	{
		ID: "admission", Short: "admission, one process, 64 clients", Figure: "intent admission over HTTP: 64 concurrent clients, each answered after its etcd commit, the emulated switches programmed and read back, one process",
		Pkg: "./internal/fabrictest", Bench: "Admission$", Benchtime: "30000x",
		Show:   show("", "{intents/s|int} intents/s; p50 {p50_ms|ms}, p99 {p99_ms|ms}; {cpu_us/intent|int} µs of CPU an intent"),
		Target: &target{Metric: "intents/s", AtLeast: true, Value: 15000, Text: "≥ 15,000/s, p99 ≤ 50 ms", And: &target{Metric: "p99_ms", Value: 50}},
		Why:    "scaling.md#admission", Headline: true,
	},
	{
		ID: "admission-batch", Short: "admission in batches of 50, 8 clients", Figure: "intent admission in batches of 50 (POST /api/v1/intents:batch, each item decided on its own): 8 concurrent clients, the rest as above; latency is a batch's",
		Pkg: "./internal/fabrictest", Bench: "AdmissionBatch$", Benchtime: "60000x", Env: []string{"ACCELNET_ADMISSION_CLIENTS=8"},
		Show:   show("", "{intents/s|int} intents/s; a batch's p50 {p50_ms|ms}, p99 {p99_ms|ms}; {cpu_us/intent|int} µs of CPU an intent"),
		Target: &target{Metric: "intents/s", AtLeast: true, Value: 15000, Text: "≥ 15,000/s"},
		Why:    "scaling.md#admission",
	},
	{
		ID: "failure-k16", Short: "k=16 link failure → rerouted", Figure: "k=16 fat-tree (320 switches), one process, a link fails: first switch written (the pruning), last switch written (the staged rollout), 30 failures",
		Pkg: "./internal/fabrictest", Bench: "FailureReaction$", Benchtime: "30x", Timeout: "30m",
		Show:   show("", "first p50 {first_write_p50_ms|ms}; last p50 {p50_ms|ms}, p99 {p99_ms|ms}"),
		Target: &target{Metric: "p50_ms", Value: 100, Text: "last write p50 ≤ 100 ms, p99 ≤ 350 ms", And: &target{Metric: "p99_ms", Value: 350}},
		Why:    "scaling.md#reaction", Headline: true,
	},
	{
		ID: "intents-fix-collisions", Short: "collisions fixed by declared intents", Figure: "ECMP collisions fixed by declaring the flows as intents: line-rate permutation, 8×8×8 leaf-spine, mean of 3",
		Pkg: "./internal/fabrictest", Bench: "WorkloadAsIntents", Benchtime: "3x",
		Show:   show("", "throughput ratio {ratio_before|ratio} → {ratio_after|ratio}, {ms_to_0.95|ms} to 0.95"),
		Target: &target{Metric: "ratio_after", AtLeast: true, Value: 0.95, Text: "≥ 0.95"}, Headline: true,
	},
	{
		ID: "elephants", Short: "collisions fixed by sampling (nobody declares)", Figure: "ECMP collisions fixed with nobody declaring anything: the same permutation, leaves sampling 1 in 65,536 packets, elephants found and pinned, mean of 3",
		Pkg: "./internal/fabrictest", Bench: "ElephantDetection", Benchtime: "3x",
		Show:   show("", "throughput ratio {ratio_before|ratio} → {ratio_after|ratio}, {ms_to_0.95|ms} to 0.95"),
		Target: &target{Metric: "ratio_after", AtLeast: true, Value: 0.95, Text: "≥ 0.95"}, Headline: true,
	},
	{
		ID: "ecmp-baseline", Figure: "plain ECMP hashing, one QP per connection, random line-rate permutations: throughput ratio, mean of 20",
		Pkg: "./fabricsim", Bench: "ECMPPermutation", Benchtime: "1x",
		Show: func(r results) string {
			return show("leafspine:32x32x32", "{throughput_ratio|ratio} on a 32×32×32 leaf-spine")(r) + ", " +
				show("fattree:16", "{throughput_ratio|ratio} on a k=16 fat-tree")(r)
		},
	},
	{
		ID: "takeover-k8", Short: "leader killed → follower in sync, k=8", Figure: "SIGKILL of the leader → the follower leads, every switch in sync: two replicas and fabricsim as processes, k=8 fat-tree, 3 etcd members, 1 s lease, under a stream of creations, 10 kills",
		Pkg: "./internal/proctest", Bench: "Failover$", Benchtime: "10x", Timeout: "30m",
		Show:   show("", "takeover p50 {takeover_p50_ms|ms}, worst {takeover_max_ms|ms}; first intent acknowledged p50 {first_ack_p50_ms|ms}; {intents_acked|int} acknowledged, none lost"),
		Target: &target{Metric: "takeover_p50_ms", Value: 2000, Text: "≤ 2 s"}, Headline: true,
	},
	{
		ID: "place-permutation", Figure: "placing a line-rate permutation of 1,024 hosts, one core",
		Pkg: "./pathcalc", Bench: "PlacePermutation", CPU: "1",
		Show: func(r results) string {
			return show("leafspine", "{ns/op|nsms} (32×32×32 leaf-spine)")(r) + ", " + show("fattree", "{ns/op|nsms} (k=16 fat-tree)")(r)
		},
	},
	{
		ID: "place-all-to-all", Figure: "placing an all-to-all of 1,024 hosts (1,047,552 demands), one core",
		Pkg: "./pathcalc", Bench: "PlaceAllToAll", CPU: "1", Benchtime: "3x",
		Show: func(r results) string {
			return show("leafspine", "{ns/op|nsms} (32×32×32 leaf-spine)")(r) + ", " + show("fattree", "{ns/op|nsms} (k=16 fat-tree)")(r)
		},
	},
	{
		ID: "intent-storage", Figure: "etcd space per installed two-flow intent: keys and values, database growth, after compaction and defragmentation",
		Pkg: "./internal/fabrictest", Bench: "IntentStorage", Benchtime: "10000x",
		Show: show("", "{bytes_per_intent|kb}; {db_bytes_per_intent|kb}, {db_bytes_per_intent_compacted|kb}"),
	},
	{
		ID: "nested-body", Figure: "a request body of 100,000 nested arrays (200 KB), refused",
		Pkg: "./internal/strictjson", Bench: "NestedBody",
		Show: show("", "{ns/op|nsms}, {B/op|int} bytes allocated"),
	},
	{
		ID: "k8s-jobs", Short: "Kubernetes job: last pod bound → pods Ready", Figure: "Kubernetes ring jobs (2 pods, a node each) on a real control plane, 50 at a time, through accelnet kube: last pod bound → the job's intent Installed, → both pods Ready (readiness gate), 200 jobs",
		Pkg: "./kube", Bench: "Jobs$", Benchtime: "200x", Timeout: "30m",
		Show:     show("", "Installed p50 {installed_p50_ms|ms}, p99 {installed_p99_ms|ms}; Ready p50 {ready_p50_ms|ms}, p99 {ready_p99_ms|ms}"),
		Headline: true,
	},
	{
		ID: "scale-k16", Figure: "k=16 fat-tree (320 switches), accelnet and fabricsim as two processes: cold start to every switch in sync; P4Runtime updates; accelnet CPU per gNMI value at steady state; peak RSS",
		Pkg: "./internal/proctest", Bench: "Scale$", Benchtime: "1x", Timeout: "60m",
		Show: show("", "{cold_start_s|s}; {updates|int} updates; {cpu_us_per_sample} µs a value; accelnet {accelnet_peak_rss_MiB|int} MiB, fabricsim {sim_peak_rss_MiB|int} MiB"),
		Long: true,
	},
	{
		ID: "scale-k48", Short: "k=48 cold start (2,880 switches)", Figure: "k=48 fat-tree (2,880 switches), two processes, the flags scaling.md gives for k=48 (`--workers 64`, 20 s telemetry, 30 s discovery): cold start; updates; updates/s; peak RSS",
		Pkg: "./internal/proctest", Bench: "Scale$", Benchtime: "1x", Timeout: "60m",
		Env:    k48Env("ACCELNET_SCALE", nil),
		Show:   show("", "{cold_start_s|s}, CPU to it accelnet {cold_cpu_s|s}, fabricsim {sim_cold_cpu_s|s}; {updates|int} updates at {updates_per_s|int}/s; accelnet {accelnet_peak_rss_MiB|int} MiB, fabricsim {sim_peak_rss_MiB|int} MiB"),
		Target: &target{Metric: "cold_start_s", Value: 15, Text: "cold start ≤ 15 s"},
		Why:    "scaling.md#cold-start", Long: true, Headline: true,
	},
	{
		ID: "scale-k48-own-cores", Short: "k=48 cold start, a core each", Figure: "the k=48 cold start above with a core of its own for each process (accelnet on CPU 0, fabricsim on CPU 1): cold start; CPU to it",
		Pkg: "./internal/proctest", Bench: "Scale$", Benchtime: "1x", Timeout: "60m",
		Env:    k48Env("ACCELNET_SCALE", []string{`ACCELNET_SCALE_CPUS=0/1`}, `ACCELNET_SCALE_WINDOW=1s`),
		Show:   show("", "{cold_start_s|s}, CPU to it accelnet {cold_cpu_s|s}, fabricsim {sim_cold_cpu_s|s}"),
		Target: &target{Metric: "cold_start_s", Value: 15, Text: "cold start ≤ 15 s"},
		Why:    "scaling.md#cold-start", Long: true,
	},
	{
		ID: "reaction-k48", Short: "k=48 link failure → rerouted", Figure: "k=48 fat-tree (2,880 switches), two processes, the flags scaling.md gives for k=48, a permutation running, 20 link failures: first switch written, last switch written",
		Pkg: "./internal/proctest", Bench: "FailureReactionProcesses$", Benchtime: "20x", Timeout: "60m",
		Env:    k48Env("ACCELNET_REACTION", []string{`ACCELNET_REACTION_WORKLOAD=permutation`}),
		Show:   show("", "first p50 {first_write_p50_ms|ms}; last p50 {p50_ms|ms}, p99 {p99_ms|ms}"),
		Target: &target{Metric: "p99_ms", Value: 1000, Text: "last write p99 ≤ 1 s"},
		Why:    "scaling.md#reaction", Long: true,
	},
	{
		ID: "demo-k32", Short: "`accelnet demo --topology fattree:32` ready", Figure: "`accelnet demo --topology fattree:32` (1,280 switches, 8,192 hosts, one process), no other flag: start → ready; share of /readyz polls ready over the next 60 s; RSS then, peak",
		Pkg: "./internal/proctest", Bench: "Demo$", Benchtime: "1x", Timeout: "30m",
		Env:    []string{`ACCELNET_DEMO_TOPOLOGY=fattree:32`},
		Show:   show("", "ready in {ready_s|s}; ready at {ready_share|pct} of the polls after; {rss_mib|int} MiB, peak {peak_rss_mib|int} MiB"),
		Target: &target{Metric: "ready_s", Value: 60, Text: "ready ≤ 60 s"},
		Long:   true,
	},
	{
		ID: "demo-k48", Short: "`accelnet demo --topology fattree:48` ready", Figure: "`accelnet demo --topology fattree:48` (2,880 switches, 27,648 hosts, one process), no other flag: start → ready; share of /readyz polls ready over the next 60 s; RSS then, peak",
		Pkg: "./internal/proctest", Bench: "Demo$", Benchtime: "1x", Timeout: "30m",
		Env:    []string{`ACCELNET_DEMO_TOPOLOGY=fattree:48`},
		Show:   show("", "ready in {ready_s|s}; ready at {ready_share|pct} of the polls after; {rss_mib|int} MiB, peak {peak_rss_mib|int} MiB"),
		Target: &target{Metric: "ready_s", Value: 120, Text: "ready ≤ 120 s"},
		Long:   true,
	},
	{
		ID: "intents-100k-k16", Short: "admission with 100,000 intents stored", Figure: "100,000 intents beside a live k=16 fat-tree (two processes): admission from 64 clients; a page of 1,000; RSS; restart to ready",
		Pkg: "./internal/proctest", Bench: "Scale$", Benchtime: "1x", Timeout: "60m",
		Env:    []string{`ACCELNET_SCALE_INTENTS=100000`, `ACCELNET_SCALE_ARGS="--api-rate-limit -1"`},
		Show:   show("", "{intents/s|int} intents/s, p99 {admit_p99_ms|ms}; page p50 {page_p50_ms|ms}; accelnet {rss_with_intents_MiB|int} MiB; restart {restart_ready_s|s}"),
		Target: &target{Metric: "intents/s", AtLeast: true, Value: 10000, Text: "≥ 10,000/s"},
		Why:    "scaling.md#admission", Long: true, Headline: true,
	},
	{
		ID: "takeover-100k-k16", Short: "leader killed, 100,000 intents, k=16", Figure: "SIGKILL of the leader with 100,000 intents stored, k=16 fat-tree, 2 s lease, 3 kills",
		Pkg: "./internal/proctest", Bench: "Failover$", Benchtime: "3x", Timeout: "60m",
		Env:    []string{`ACCELNET_FAILOVER_ARGS="--election-ttl 2s"`, `ACCELNET_FAILOVER_INTENTS=100000`, `ACCELNET_FAILOVER_TOPOLOGY=fattree:16@100`},
		Show:   show("", "takeover p50 {takeover_p50_ms|ms}, worst {takeover_max_ms|ms}; first intent acknowledged p50 {first_ack_p50_ms|ms}"),
		Target: &target{Metric: "takeover_max_ms", Value: 2000, Text: "≤ 2 s"},
		Why:    "scaling.md#takeover", Long: true, Headline: true,
	},
	{
		ID: "write-rate-k16", Figure: "P4Runtime updates per second, steady rewrite of 1,000 flow pins on every switch of a k=16 fabricsim in a process of its own",
		Pkg: "./internal/proctest", Bench: "WriteRate$", Benchtime: "1x", Timeout: "60m",
		Show:   show("", "insert {insert_updates_per_s|int}/s, modify {modify_updates_per_s|int}/s"),
		Target: &target{Metric: "modify_updates_per_s", AtLeast: true, Value: 500000, Text: "≥ 500,000/s"},
		Why:    "scaling.md#write-rate", Long: true,
	},
	quietRow("leafspine", "leaf-spine 16×16×16", "leafspine:16x16x16", "16 spines, 16 leaves, 16 hosts each", 10, false),
	quietRow("leafspine", "leaf-spine 16×16×16", "leafspine:16x16x16", "16 spines, 16 leaves, 16 hosts each", 10, true),
	quietRow("fattree", "k=16 fat-tree", "fattree:16", "k=16 fat-tree, 320 switches", 10, false),
	quietRow("fattree", "k=16 fat-tree", "fattree:16", "k=16 fat-tree, 320 switches", 10, true),
	{
		ID: "k8s-jobs-waves", Figure: "Kubernetes ring jobs as in the quick row, 1,000 made and deleted in 20 waves of 50: one intent per job in each wave, none left after it (else the benchmark fails); last pod bound → both pods Ready",
		Pkg: "./kube", Bench: "Jobs$", Benchtime: "1000x", Timeout: "30m",
		Show: show("", "{jobs|int} jobs, none leaked; Ready p50 {ready_p50_ms|ms}, p99 {ready_p99_ms|ms}"),
		Long: true,
	},
	{
		ID: "k8s-follow-drain", Figure: "k=16 fat-tree, 1,024 Kubernetes nodes: a leaf drained → its 8 nodes labelled degraded and its HyperNode gone; undrained → restored, 10 drains",
		Pkg: "./kube", Bench: "FollowDrain", Benchtime: "10x", Timeout: "30m",
		Show: show("", "drained p50 {drain_p50_ms|ms}, worst {drain_max_ms|ms}; restored p50 {restore_p50_ms|ms}, worst {restore_max_ms|ms}"),
		Long: true,
	},
}
