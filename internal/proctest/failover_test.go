package proctest_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

func TestMain(m *testing.M) {
	defer proctest.Cleanup()
	fabrictest.Main(m)
}

// deployment is fabricsim and accelnet replicas as separate processes on a
// 3-member etcd cluster (embedded in the test, on loopback).
type deployment struct {
	t        testing.TB
	etcd     []string
	simAPI   string
	topoFile string
	replicas []*replica
	token    string
	setup    setup
	sim      *proctest.Proc
	simToken string // fabricsim's control API token
}

// setup adjusts a deployment: extra arguments for fabricsim and the
// replicas, their environment, and the API's scheme and client.
type setup struct {
	simArgs, replicaArgs []string
	env                  []string
	simEnv               []string // fabricsim's, beside what the test has
	https                bool
	client               *http.Client
	// startWithin bounds fabricsim's start and each replica's first
	// readiness (default 30s; a fabric of thousands of switches takes
	// minutes).
	startWithin time.Duration
}

type replica struct {
	name, addr, dataDir string
	proc                *proctest.Proc
	https               bool
}

func (r *replica) url() string {
	if r.https {
		return "https://" + r.addr
	}
	return "http://" + r.addr
}

func deploy(t testing.TB, fabric string, replicas int) *deployment {
	t.Helper()
	return deployWith(t, fabric, replicas, setup{})
}

func deployWith(t testing.TB, fabric string, replicas int, s setup) *deployment {
	t.Helper()
	c := fabrictest.NewCluster(t, 3)
	d := &deployment{t: t, etcd: c.Endpoints(), simAPI: fabrictest.FreeAddr(t), topoFile: filepath.Join(t.TempDir(), "fabric.yaml"), setup: s}
	dir := t.TempDir()
	within := cmp.Or(s.startWithin, 30*time.Second)
	d.sim = proctest.StartEnv(t, "fabricsim", s.simEnv, proctest.Bin(t, "fabricsim"), append([]string{"-topology", fabric, "-http-addr", d.simAPI,
		"-out", d.topoFile, "-log-dir", filepath.Join(dir, "logs"), "-token-file", filepath.Join(dir, "sim.token")}, s.simArgs...)...)
	_, d.simToken = proctest.WaitFabricUp(t, within, d.simAPI, filepath.Join(dir, "sim.token"))
	for i := range replicas {
		r := &replica{name: fmt.Sprintf("accelnet-%d", i+1), addr: fabrictest.FreeAddr(t), dataDir: filepath.Join(dir, fmt.Sprintf("replica%d", i+1)), https: s.https}
		d.replicas = append(d.replicas, r)
		d.start(r)
		if i == 0 { // the first one leads and issues the operator token
			d.waitRole(r, "leader", within)
			data, err := os.ReadFile(filepath.Join(r.dataDir, "operator.token"))
			if err != nil {
				t.Fatal(err)
			}
			d.token = strings.TrimSpace(string(data))
		}
	}
	for _, r := range d.replicas[1:] {
		d.waitRole(r, "follower", within)
	}
	return d
}

func (d *deployment) start(r *replica) {
	args := append([]string{"serve",
		"--etcd-endpoints", strings.Join(d.etcd, ","), "--topology", d.topoFile,
		"--http-addr", r.addr, "--advertise-url", r.url(), "--data-dir", r.dataDir}, d.setup.replicaArgs...)
	r.proc = proctest.StartEnv(d.t, r.name, d.setup.env, proctest.Bin(d.t, "accelnet"), args...)
}

type readiness struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Leader string `json:"leader"`
	Reason string `json:"reason"`
	// IntentsPlaced: a follower's copy of the intents is placed, a term
	// would begin deciding at once.
	IntentsPlaced bool `json:"intents_placed"`
}

func (d *deployment) ready(r *replica) (readiness, error) {
	var v readiness
	code, err := proctest.Call(context.Background(), d.setup.client, "GET", r.url()+"/readyz", "", nil, &v)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", code, v.Reason)
	}
	return v, err
}

// waitRole waits until r is ready in role; it returns how long that took.
func (d *deployment) waitRole(r *replica, role string, timeout time.Duration) time.Duration {
	d.t.Helper()
	return proctest.Wait(d.t, timeout, r.name+" ready as "+role, func() error {
		v, err := d.ready(r)
		if err != nil {
			return err
		}
		if v.Role != role {
			return fmt.Errorf("role %s", v.Role)
		}
		return nil
	})
}

// leader returns the replica that leads, and a follower.
func (d *deployment) leader() (lead, follow *replica) {
	for _, r := range d.replicas {
		if r.proc.Exited() {
			continue
		}
		if v, err := d.ready(r); err == nil && v.Role == "leader" {
			lead = r
		} else if err == nil {
			follow = r
		}
	}
	if lead == nil || follow == nil {
		d.t.Fatalf("want a leader and a follower ready")
	}
	return lead, follow
}

// switchWrites is the Write RPCs every emulated switch accepted so far.
func (d *deployment) switchWrites() int64 {
	var v struct {
		Switches []struct {
			Writes int64 `json:"write_rpcs"`
		} `json:"switches"`
	}
	if _, err := proctest.Call(context.Background(), nil, "GET", "http://"+d.simAPI+"/sim/v1/switches", d.simToken, nil, &v); err != nil {
		d.t.Fatal(err)
	}
	var n int64
	for _, s := range v.Switches {
		n += s.Writes
	}
	return n
}

// marked is how many switches have a handover mark in etcd.
func (d *deployment) marked() (int, error) {
	cli, err := store.Dial(d.etcd, nil)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	marks, err := store.NewStore(cli, 5*time.Second).Marks(0).Load(context.Background())
	return len(marks), err
}

// metric is the value of an unlabelled metric on r's /metrics (NaN if
// it cannot be read).
func (d *deployment) metric(r *replica, name string) float64 {
	if v, err := scrape(d.setup.client, r.url(), name); err == nil {
		if x, ok := v[name]; ok {
			return x
		}
	}
	return math.NaN()
}

// tenantToken makes a tenant and returns a token for it.
func (d *deployment) tenantToken(via *replica, name string) string {
	d.t.Helper()
	ctx := context.Background()
	if code, err := proctest.Call(ctx, d.setup.client, "POST", via.url()+"/api/v1/tenants", d.token, models.Tenant{Name: models.TenantName(name)}, nil); err != nil || code != http.StatusCreated {
		d.t.Fatalf("create tenant: HTTP %d %v", code, err)
	}
	var tok api.NewTokenView
	if code, err := proctest.Call(ctx, d.setup.client, "POST", via.url()+"/api/v1/tokens", d.token, api.TokenRequest{Tenant: models.TenantName(name), Role: models.RoleTenant}, &tok); err != nil || code != http.StatusCreated {
		d.t.Fatalf("create token: HTTP %d %v", code, err)
	}
	return tok.Secret
}

// create admits one intent through via, retrying what a client retries
// (503: failover, etcd) with the same Idempotency-Key; it returns the
// intent's ID.
func (d *deployment) create(ctx context.Context, via *replica, token string, spec models.IntentSpec) (string, error) {
	for {
		var in models.Intent
		code, err := proctest.Call(ctx, d.setup.client, "POST", via.url()+"/api/v1/intents", token, spec, &in, "Idempotency-Key", spec.Name)
		switch {
		case err == nil && (code == http.StatusCreated || code == http.StatusOK):
			return in.ID, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		case err != nil || code == http.StatusServiceUnavailable:
			select { // retry after a beat
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		default:
			return "", fmt.Errorf("create %s: HTTP %d", spec.Name, code)
		}
	}
}

// createN creates n one-flow intents named prefix-i from h1-1 to h2-1
// through via, on source ports from 49152, and returns their IDs.
func (d *deployment) createN(via *replica, token, prefix string, n int) []string {
	d.t.Helper()
	var ids []string
	for i := range n {
		id, err := d.create(context.Background(), via, token, intentSpec(fmt.Sprintf("%s-%d", prefix, i), "h1-1", "h2-1", 49152+i))
		if err != nil {
			d.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func intentSpec(name, src, dst string, port int) models.IntentSpec {
	return models.IntentSpec{Name: name, Src: src, Dst: dst, Gbps: 0.1, SrcPorts: models.PortRange{First: uint16(port), Last: uint16(port)}}
}

// installed lists the intents via r and says whether every ID in ids is
// there and Installed.
func (d *deployment) installed(via *replica, token string, ids []string) error {
	state := map[string]models.IntentState{}
	for page := ""; ; {
		var list api.IntentList
		if _, err := proctest.Call(context.Background(), d.setup.client, "GET", via.url()+"/api/v1/intents?limit=1000&page_token="+page, token, nil, &list); err != nil {
			return err
		}
		for _, in := range list.Items {
			state[in.ID] = in.Status.State
		}
		if page = list.NextPageToken; page == "" {
			break
		}
	}
	for _, id := range ids {
		if s, ok := state[id]; !ok {
			return fmt.Errorf("acknowledged intent %s is gone", id)
		} else if s != models.StateInstalled {
			return fmt.Errorf("intent %s is %s", id, s)
		}
	}
	return nil
}

// TestKill9Failover: two `accelnet serve` processes (a 30 s lease) on a
// 3-member etcd cluster and a fabricsim process. The leader is killed with
// SIGKILL: the follower, which held a request open to the leader's
// /leaderz, sees its address refuse connections and ends its term at once
// rather than when the lease expires; it probes every switch (the
// leader left a handover mark for each) instead of reading it back,
// writes nothing (they are correct), loses no acknowledged intent, and
// admits new ones. The killed replica comes back as a follower.
func TestKill9Failover(t *testing.T) {
	d := deployWith(t, "leafspine:2x2x2@100", 2, setup{replicaArgs: []string{"--election-ttl", "30s"}})
	lead, follow := d.leader()
	tok := d.tenantToken(follow, "ml")
	ids := d.createN(follow, tok, "before", 6)
	proctest.Wait(t, 20*time.Second, "intents installed", func() error { return d.installed(follow, tok, ids) })
	// The follower places its copy of the intents as it follows, and
	// says so; its term then keeps that placement.
	proctest.Wait(t, time.Minute, "the follower's intents placed (/readyz)", func() error {
		if v, err := d.ready(follow); err != nil || !v.IntentsPlaced {
			return fmt.Errorf("not yet: %+v %v", v, err)
		}
		return nil
	})
	proctest.Wait(t, time.Minute, "a handover mark for each of the 4 switches", func() error {
		if n, err := d.marked(); err != nil || n != 4 {
			return fmt.Errorf("%d marks (%v)", n, err)
		}
		return nil
	})
	proctest.Wait(t, 20*time.Second, "the follower holds a request to the leader's /leaderz", func() error {
		if v := d.metric(follow, "accelnet_leader_watch_held"); v != 1 {
			return fmt.Errorf("accelnet_leader_watch_held %v", v)
		}
		return nil
	})
	writes := d.switchWrites()

	lead.proc.Kill()
	took := d.waitRole(follow, "leader", 20*time.Second) // the lease has 30 s
	proctest.Wait(t, 20*time.Second, "the new leader's takeover logged", func() error {
		if !strings.Contains(follow.proc.Log(), "took over:") {
			return errors.New("not yet")
		}
		return nil
	})
	if !strings.Contains(follow.proc.Log(), "unmarked=0 pins_changed=0 probe_differs=0 probe_failed=0") {
		t.Error("the new leader did not take the 4 switches as their handover marks say")
	}
	if n := d.metric(follow, "accelnet_leader_gone_terms_ended_total"); n != 1 {
		t.Errorf("the new leader ended %v gone terms, want 1", n)
	}
	t.Logf("SIGKILL → the follower leads with every switch probed in %v (lease TTL 30s)", took.Round(time.Millisecond))
	if !strings.Contains(follow.proc.Log(), "intents loaded, placed as followed") {
		t.Error("the new leader placed its intents again instead of keeping the placement it made as a follower")
	}
	if w := d.switchWrites(); w != writes {
		t.Errorf("takeover of correct switches wrote %d times", w-writes)
	}
	if err := d.installed(follow, tok, ids); err != nil {
		t.Errorf("after failover: %v", err)
	}
	id, err := d.create(context.Background(), follow, tok, intentSpec("after", "h1-2", "h2-2", 50000))
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, id)
	proctest.Wait(t, 20*time.Second, "the new leader installs", func() error { return d.installed(follow, tok, ids) })

	d.start(lead) // the same data directory and address
	d.waitRole(lead, "follower", 30*time.Second)
	if err := d.installed(lead, tok, ids); err != nil {
		t.Errorf("read from the returned replica: %v", err)
	}
}

// BenchmarkFailover kills the leader with SIGKILL under a steady stream
// of intent creations (through the follower, retried on 503 with their
// Idempotency-Key) on a k=8 fat-tree, b.N times, and reports how long
// until the new leader has read every switch back (takeover_ms) and
// until the first intent was acknowledged after the kill (first_ack_ms).
// No acknowledged intent may be lost. Run:
//
//	go test ./internal/proctest -run '^$' -bench Failover -benchtime 10x
//
// ACCELNET_FAILOVER_INTENTS=N stores N one-flow intents first (64
// tenants, spread over the fabric's hosts), so that the new leader takes
// over with them; ACCELNET_FAILOVER_TOPOLOGY sets the fabric (default
// fattree:8@100), ACCELNET_FAILOVER_ARGS adds the replicas' flags,
// ACCELNET_FAILOVER_SIM_ARGS fabricsim's (its counter interval at k=48);
// ACCELNET_FAILOVER_PROFILES=DIR keeps CPU profiles of each new
// leader's and of fabricsim's first 20 s after the kill, the new
// leader's goroutines every 4 s of it, an execution trace of its first
// 8 s (go tool trace -pprof=sync FILE: where it waited), and the
// replicas' logs.
func BenchmarkFailover(b *testing.B) {
	stored := envInt(b, "ACCELNET_FAILOVER_INTENTS", 0)
	// A 1 s lease (the embedded etcd members' 500 ms election timeout
	// allows it); the tests keep the 2 s default, safer on a loaded CI.
	args := append([]string{"--election-ttl", "1s"}, strings.Fields(os.Getenv("ACCELNET_FAILOVER_ARGS"))...)
	d := deployWith(b, envOr("ACCELNET_FAILOVER_TOPOLOGY", "fattree:8@100"), 2, setup{replicaArgs: args,
		simArgs: strings.Fields(os.Getenv("ACCELNET_FAILOVER_SIM_ARGS")), startWithin: 10 * time.Minute})
	lead, follow := d.leader()
	if stored > 0 {
		topo, err := topology.Load(d.topoFile)
		if err != nil {
			b.Fatal(err)
		}
		took, _ := admitMany(b, lead.url(), d.token, topo.Hosts, stored)
		b.Logf("%d intents stored in %s", stored, took.Round(time.Millisecond))
	}
	tok := d.tenantToken(follow, "bench")
	profiles := os.Getenv("ACCELNET_FAILOVER_PROFILES")
	var takeovers, firstAcks []time.Duration
	var mu sync.Mutex
	var acked []string
	seq := 0
	for i := 0; b.Loop(); i++ {
		lead, follow := d.leader()
		// The takeover is of a follower that has been following: its
		// copy of the intents placed (not one restarted moments before).
		placed := proctest.Wait(b, 5*time.Minute, follow.name+"'s intents placed as followed", func() error {
			if v, err := d.ready(follow); err != nil || !v.IntentsPlaced {
				return errors.New("not yet")
			}
			return nil
		})
		leadRSS, _ := rss(b, lead.proc.Pid())
		followRSS, _ := rss(b, follow.proc.Pid())
		b.Logf("before takeover %d: %s's intents placed (waited %s); RSS leader %d MiB, follower %d MiB", i+1, follow.name,
			placed.Round(time.Millisecond), leadRSS>>20, followRSS>>20)
		ctx, stopLoad := context.WithCancel(context.Background())
		killed := make(chan time.Time, 1)
		var firstAck time.Duration
		var load sync.WaitGroup
		load.Go(func() {
			var killedAt time.Time
			for ctx.Err() == nil {
				seq++
				// Spread over the fat-tree's 128 hosts: pod, edge, host.
				pod, edge, host := seq%8, seq/8%4+1, seq/32%4+1
				src, dst := fmt.Sprintf("h%d-%d-%d", pod+1, edge, host), fmt.Sprintf("h%d-%d-%d", (pod+1)%8+1, edge, host)
				id, err := d.create(ctx, follow, tok, intentSpec(fmt.Sprintf("bench-%d", seq), src, dst, 1024+seq%60000))
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						b.Error(err)
					}
					return
				}
				select {
				case killedAt = <-killed:
				default:
				}
				mu.Lock()
				acked = append(acked, id)
				if !killedAt.IsZero() && firstAck == 0 {
					firstAck = time.Since(killedAt)
				}
				mu.Unlock()
			}
		})
		// A backstop, not a deadline: at k=32 with 100,000 intents just
		// stored, the first acknowledgements took longer than 10 s.
		proctest.Wait(b, 2*time.Minute, "load running", func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < 5*(i+1) {
				return errors.New("few intents yet")
			}
			return nil
		})
		var profiled sync.WaitGroup
		if profiles != "" {
			profiled.Go(func() { // the new leader's first 20 s
				if err := operatorGet(follow.url(), d.token, "/debug/pprof/profile?seconds=20", filepath.Join(profiles, fmt.Sprintf("takeover-%d.cpu", i+1))); err != nil {
					b.Logf("takeover profile: %v", err)
				}
			})
			profiled.Go(func() { // where the new leader's goroutines wait, every 4 s
				for n := 1; n <= 5; n++ {
					<-time.After(4 * time.Second)
					if err := operatorGet(follow.url(), d.token, "/debug/pprof/goroutine?debug=1", filepath.Join(profiles, fmt.Sprintf("takeover-%d-goroutines-%ds.txt", i+1, 4*n))); err != nil {
						b.Logf("goroutines: %v", err)
					}
				}
			})
			profiled.Go(func() { // an execution trace of the new leader's first 8 s
				if err := operatorGet(follow.url(), d.token, "/debug/pprof/trace?seconds=8", filepath.Join(profiles, fmt.Sprintf("takeover-%d.trace", i+1))); err != nil {
					b.Logf("takeover trace: %v", err)
				}
			})
			profiled.Go(func() { // fabricsim's, over the same 20 s
				if err := operatorGet("http://"+d.simAPI, "", "/debug/pprof/profile?seconds=20", filepath.Join(profiles, fmt.Sprintf("takeover-%d-fabricsim.cpu", i+1))); err != nil {
					b.Logf("fabricsim profile: %v", err)
				}
			})
		}
		t0 := time.Now()
		cpu0 := [3]float64{cpuSeconds(b, follow.proc.Pid()), cpuSeconds(b, d.sim.Pid()), cpuSeconds(b, os.Getpid())}
		lead.proc.Kill()
		exited := time.Since(t0)
		killed <- t0
		d.waitRole(follow, "leader", 5*time.Minute)
		// From the signal, not from Kill's return: the killed process's
		// exit (a GB of memory to free) takes a while, and the follower
		// may lead before it is over.
		took := time.Since(t0)
		takeovers = append(takeovers, took)
		// Where the two cores went meanwhile (this process runs the three
		// etcd members and the load).
		cpu := func(pid int, before float64) string {
			return fmt.Sprintf("%.2f", (cpuSeconds(b, pid)-before)/took.Seconds())
		}
		b.Logf("takeover %d: %s (the killed process exited after %s); cores used meanwhile: new leader %s, fabricsim %s, etcd and load %s", i+1, took.Round(time.Millisecond),
			exited.Round(time.Millisecond), cpu(follow.proc.Pid(), cpu0[0]), cpu(d.sim.Pid(), cpu0[1]), cpu(os.Getpid(), cpu0[2]))
		proctest.Wait(b, 5*time.Minute, "an intent acknowledged after the kill", func() error {
			mu.Lock()
			defer mu.Unlock()
			if firstAck == 0 {
				return errors.New("none yet")
			}
			return nil
		})
		stopLoad()
		load.Wait()
		profiled.Wait()
		firstAcks = append(firstAcks, firstAck)
		keepLog(b, profiles, fmt.Sprintf("killed-%d-%s.log", i+1, lead.name), lead.proc)
		d.start(lead)
		restarted := d.waitRole(lead, "follower", 5*time.Minute)
		b.Logf("%s restarted: ready as a follower in %s", lead.name, restarted.Round(time.Millisecond))
	}
	b.StopTimer()
	for _, r := range d.replicas {
		keepLog(b, profiles, r.name+".log", r.proc)
	}
	_, follow = d.leader()
	proctest.Wait(b, 60*time.Second, "every acknowledged intent installed", func() error { return d.installed(follow, tok, acked) })
	slices.Sort(takeovers)
	slices.Sort(firstAcks)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(takeovers[len(takeovers)/2]), "takeover_p50_ms")
	b.ReportMetric(ms(takeovers[len(takeovers)-1]), "takeover_max_ms")
	b.ReportMetric(ms(firstAcks[len(firstAcks)/2]), "first_ack_p50_ms")
	b.ReportMetric(ms(firstAcks[len(firstAcks)-1]), "first_ack_max_ms")
	b.ReportMetric(float64(len(acked)), "intents_acked")
}

// keepLog writes what p printed to dir/name, if dir is set.
func keepLog(b *testing.B, dir, name string, p *proctest.Proc) {
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(p.Log()), 0o644); err != nil {
		b.Logf("keep %s: %v", name, err)
	}
}
