package fabrictest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/embedded"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
)

func TestMain(m *testing.M) {
	fabrictest.Main(m)
}

// allPairs offers one 1 Gb/s flow for every ordered pair of hosts.
func allPairs(hosts []models.Host) []fabricsim.FlowSpec {
	var specs []fabricsim.FlowSpec
	for i, a := range hosts {
		for j, b := range hosts {
			if i != j {
				specs = append(specs, fabricsim.FlowSpec{Src: a.IP, Dst: b.IP, SrcPort: uint16(49152 + i*64 + j), DemandGbps: 1})
			}
		}
	}
	return specs
}

// TestEndToEndLeafSpine is the walking skeleton's acceptance test: real etcd,
// real gRPC to emulated switches, the real controller and real HTTP.
func TestEndToEndLeafSpine(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 4, 4))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })

	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	if _, err := h.Fabric.AddFlows(allPairs(hosts)); err != nil {
		t.Fatal(err)
	}

	// Every host pair's flow is delivered through the programmed tables,
	// on a shortest path: leaf → spine → leaf, or the leaf alone.
	flows := h.Fabric.Flows()
	if len(flows) != len(hosts)*(len(hosts)-1) {
		t.Fatalf("%d flows, want %d", len(flows), len(hosts)*(len(hosts)-1))
	}
	usedLinks := map[models.LinkID]bool{}
	for _, f := range flows {
		src, _ := snap.HostByIP(f.Spec.Src)
		dst, _ := snap.HostByIP(f.Spec.Dst)
		if !f.Delivered {
			t.Errorf("%s → %s not delivered: %s (hops %v)", src.Name, dst.Name, f.Drop, f.Hops)
			continue
		}
		wantHops := 3
		if src.Attach.Switch == dst.Attach.Switch {
			wantHops = 1
		}
		if len(f.Hops) != wantHops {
			t.Errorf("%s → %s took %d hops, want %d: %v", src.Name, dst.Name, len(f.Hops), wantHops, f.Hops)
			continue
		}
		if f.Hops[0].Switch != src.Attach.Switch || f.Hops[len(f.Hops)-1].Switch != dst.Attach.Switch {
			t.Errorf("%s → %s path %v does not run from its leaf to the destination's", src.Name, dst.Name, f.Hops)
		}
		if f.Hops[len(f.Hops)-1].OutPort != dst.Attach.Port {
			t.Errorf("%s → %s leaves on port %d, host is on %d", src.Name, dst.Name, f.Hops[len(f.Hops)-1].OutPort, dst.Attach.Port)
		}
		if wantHops == 3 {
			if sw, _ := snap.Switch(f.Hops[1].Switch); sw.Role != models.RoleSpine {
				t.Errorf("%s → %s middle hop %s is not a spine", src.Name, dst.Name, sw.Name)
			}
			l, _ := snap.LinkAt(models.Endpoint{Switch: f.Hops[0].Switch, Port: f.Hops[0].OutPort})
			usedLinks[l.ID()] = true
		}
		if f.RateGbps <= 0 {
			t.Errorf("%s → %s delivered at rate %v", src.Name, dst.Name, f.RateGbps)
		}
	}
	if len(usedLinks) == 0 {
		t.Fatal("no inter-leaf link carries traffic")
	}

	// The REST API, over real HTTP, shows load on the links the flows use.
	h.Eventually(t, 20*time.Second, "utilization > 0 on every used link in /api/v1/topology", func() bool {
		var v api.TopologyView
		if code := h.GetJSON(t, "/api/v1/topology", &v); code != http.StatusOK {
			return false
		}
		loaded := 0
		for _, l := range v.Links {
			if usedLinks[l.ID] && l.Load.Utilization > 0 {
				loaded++
			}
		}
		return loaded == len(usedLinks)
	})

	// Reconciling again writes nothing.
	before := map[string]int64{}
	for _, sw := range snap.Switches() {
		rpcs, _ := h.Switch(string(sw.Name)).WriteStats()
		before[string(sw.Name)] = rpcs
	}
	for _, sw := range snap.Switches() {
		n, err := h.Controller.Reconcile(context.Background(), sw.Name)
		if err != nil {
			t.Fatalf("reconcile %s: %v", sw.Name, err)
		}
		if n != 0 {
			t.Errorf("second reconcile of %s wrote %d updates", sw.Name, n)
		}
		if rpcs, _ := h.Switch(string(sw.Name)).WriteStats(); rpcs != before[string(sw.Name)] {
			t.Errorf("second reconcile of %s sent %d Write RPCs", sw.Name, rpcs-before[string(sw.Name)])
		}
	}
}

// TestAPIEndpoints checks entries read-back, health, readiness, metrics and
// errors for unknown switches.
func TestAPIEndpoints(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 3, 2))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })

	var e api.EntriesView
	if code := h.GetJSON(t, "/api/v1/switches/leaf1/entries", &e); code != http.StatusOK {
		t.Fatalf("entries: HTTP %d", code)
	}
	// leaf1: one route to the 2 other leaves' prefixes (10.0.2.0/24 and
	// 10.0.3.0/24 aggregate to 10.0.2.0/23) through one ECMP group over
	// both spines, and a /32 to each of its 2 hosts.
	if e.Counts["routes"] != 3 || e.Counts["groups"] != 1 || e.Counts["members"] != 4 {
		t.Errorf("leaf1 counts = %v, want 3 routes, 1 group, 4 members", e.Counts)
	}
	if !slices.ContainsFunc(e.Entries.Routes, func(r models.Route) bool { return r.Prefix == netip.MustParsePrefix("10.0.2.0/23") }) {
		t.Errorf("leaf1 has no aggregate route 10.0.2.0/23: %v", e.Entries.Routes)
	}
	if len(e.Entries.Groups) == 1 && len(e.Entries.Groups[0].Members) != 2 {
		t.Errorf("leaf1's ECMP group has %d members, want 2 (one per spine)", len(e.Entries.Groups[0].Members))
	}
	var spine api.EntriesView
	h.GetJSON(t, "/api/v1/switches/spine1/entries", &spine)
	if spine.Counts["routes"] != 3 || spine.Counts["groups"] != 0 {
		t.Errorf("spine1 counts = %v, want 3 routes (one per leaf) and no groups", spine.Counts)
	}

	var p api.Problem
	if code := h.GetJSON(t, "/api/v1/switches/nosuch/entries", &p); code != http.StatusNotFound || p.Status != 404 || !strings.Contains(p.Detail, "nosuch") {
		t.Errorf("unknown switch: HTTP %d %+v", code, p)
	}
	if code := h.GetJSON(t, "/api/v1/switches/bad%20name/entries", &p); code != http.StatusBadRequest {
		t.Errorf("invalid switch name: HTTP %d", code)
	}
	if code := h.GetJSON(t, "/healthz", nil); code != http.StatusOK {
		t.Errorf("healthz: HTTP %d", code)
	}
	if code := h.GetJSON(t, "/readyz", nil); code != http.StatusOK {
		t.Errorf("readyz: HTTP %d", code)
	}
	for _, m := range []string{`accelnet_reconcile_total{controller="switch",result="ok"}`, "accelnet_pathcalc_solve_seconds", "accelnet_link_utilization_ratio"} {
		h.Eventually(t, 10*time.Second, "/metrics to show "+m, func() bool { return strings.Contains(scrape(t, h), m) })
	}
}

// scrape is the replica's /metrics.
func scrape(t *testing.T, h *fabrictest.Harness) string {
	t.Helper()
	resp, err := http.Get(h.API.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestTopologyChangeInEtcdReprograms removes a link from the stored
// topology; the controller, watching etcd, reroutes around it.
func TestTopologyChangeInEtcdReprograms(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	ctx := context.Background()
	topo, rev, _, err := h.Store.Topology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Drop leaf1 <-> spine1: leaf1 now reaches leaf2 through spine2 only.
	var kept []models.Link
	for _, l := range topo.Links {
		if !(l.A.Switch == "leaf1" && l.B.Switch == "spine1") {
			kept = append(kept, l)
		}
	}
	topo.Links = kept
	if _, err := h.Store.PutTopology(ctx, topo, -1); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "leaf1 reprogrammed without its ECMP group", func() bool {
		st, err := h.Driver.Read(ctx, "leaf1")
		return err == nil && len(st.Groups) == 0 && len(st.Routes) == 2
	})
	if _, r := h.Controller.Snapshot(); r <= rev {
		t.Errorf("controller still at revision %d", r)
	}
	h.Eventually(t, 20*time.Second, "convergence after the change", func() bool { return h.Converged() == nil })
	ids, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{{Src: topo.Hosts[0].IP, Dst: topo.Hosts[1].IP, SrcPort: 50000, DemandGbps: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range h.Fabric.Flows() {
		if f.ID == ids[0] && (!f.Delivered || f.Hops[1].Switch != "spine2") {
			t.Errorf("flow after the change: delivered=%v drop=%q hops=%v", f.Delivered, f.Drop, f.Hops)
		}
	}
	// A conflicting write with a stale revision is refused.
	if _, err := h.Store.PutTopology(ctx, topo, rev); err == nil {
		t.Error("write with a stale revision succeeded")
	}
}

// TestServeAgainstSeparateFabric runs the controller the way `accelnet
// serve` does: no emulation of its own, switches found at the addresses of
// a topology, here a fabricsim started separately.
func TestServeAgainstSeparateFabric(t *testing.T) {
	f := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 2, 2))
	topo := f.Topology()
	h := fabrictest.NewServe(t, topo)
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	if got := f.Switch("leaf1").Entries("Ingress.ipv4_lpm"); got != 3 {
		t.Errorf("leaf1 has %d routes, want 3", got)
	}
}

// TestExternalEtcd runs the stack against an etcd it did not start (the
// --etcd-endpoints path), here a separate etcd member on loopback.
func TestExternalEtcd(t *testing.T) {
	etcd, err := embedded.Start(t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	topo := fabrictest.LeafSpine(1, 2, 1)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := stack.New(ctx, stack.Config{Topology: &topo, Emulate: true, Etcd: stack.Etcd{Endpoints: etcd.Endpoints, TLS: etcd.Client},
		DiscoveryInterval: stack.DefaultDiscoveryInterval, LivenessInterval: controller.DefaultLivenessInterval})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s.Close()
	})
	if s.Embedded != nil {
		t.Fatal("stack started its own etcd despite endpoints")
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.Controller.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", s.Controller.Ready())
		}
		<-time.After(20 * time.Millisecond)
	}
	// The topology is in the external etcd, where another replica would find it.
	cli, err := store.Dial(etcd.Endpoints, etcd.ClientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	stored, _, _, err := store.NewStore(cli, 0).Topology(ctx)
	if err != nil || len(stored.Switches) != 3 {
		t.Fatalf("stored topology: %d switches, %v", len(stored.Switches), err)
	}
}

// TestSwitchRestartIsReprogrammed: a switch that reboots comes back with no
// pipeline and empty tables; its broken stream makes the controller
// reconnect, push the pipeline and reprogram it.
func TestSwitchRestartIsReprogrammed(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	want := h.Switch("leaf1").Entries("Ingress.ipv4_lpm")
	for _, kind := range []string{fabricsim.FaultSwitchDown, fabricsim.FaultSwitchUp} {
		if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: kind, Target: "leaf1"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.Switch("leaf1").Entries("Ingress.ipv4_lpm"); got != 0 {
		t.Fatalf("a rebooted switch kept %d routes", got)
	}
	h.Eventually(t, 20*time.Second, "leaf1 reprogrammed after its restart", func() bool {
		return h.Switch("leaf1").Entries("Ingress.ipv4_lpm") == want
	})
}

// TestLinkFailureIsRoutedAround: fabricsim takes a link down; the
// controller sees oper-status DOWN over gNMI, recomputes routes without it
// and reprograms, and every flow is delivered again.
func TestLinkFailureIsRoutedAround(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 3, 2))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	snap, _ := h.Controller.Snapshot()
	if _, err := h.Fabric.AddFlows(allPairs(snap.Hosts())); err != nil {
		t.Fatal(err)
	}
	failed := snap.Links()[0] // leaf1 <-> spine1
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(failed.ID())}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the controller to route around the failed link", func() bool {
		if !h.Controller.DownLinks()[failed.ID()] || h.Converged() != nil {
			return false
		}
		for _, f := range h.Fabric.Flows() {
			if !f.Delivered {
				return false
			}
		}
		return true
	})
	// How long the reroute came after the switch's report is measured.
	if n, sum := histogram(t, h, "accelnet_oper_status_reroute_seconds"); n != 1 || sum < 0 {
		t.Errorf("reroutes after a reported failure measured: %d (sum %.3fs), want 1", n, sum)
	}
	// The resync and link discovery held back for the failure go on once
	// its rollout is over (not at the backstop, 30 s on).
	h.Eventually(t, 20*time.Second, "background work going on again", func() bool {
		v, ok := metric(t, h, "accelnet_failure_handling", "", "")
		return h.Controller.Settled() && ok && v == 0
	})
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkUp, Target: string(failed.ID())}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the link to be used again", func() bool {
		st, err := h.Driver.Read(context.Background(), "leaf1")
		return err == nil && len(h.Controller.DownLinks()) == 0 && len(st.Groups) == 1
	})
}

// TestRolloutInProgressIsExported: accelnet_rollout_in_progress is 1
// while a failure's reroute is written (the leaves' writes slowed so
// that it lasts a while) and 0 once it is over and the controller has
// settled, so that a dashboard, an alert or a benchmark can tell a reroute
// under way from a settled fabric; the leader's /readyz says the same.
func TestRolloutInProgressIsExported(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 3, 2))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	inProgress := func() float64 {
		v, ok := metric(t, h, "accelnet_rollout_in_progress", "", "")
		if !ok {
			t.Fatal("accelnet_rollout_in_progress is not exported")
		}
		return v
	}
	// /readyz says the same, cheaper to poll at thousands of switches.
	readyz := func() bool {
		resp, err := http.Get(h.API.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			InProgress *bool `json:"rollout_in_progress"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.InProgress == nil {
			t.Fatalf("/readyz does not say whether a rollout is in progress (%v)", err)
		}
		return *v.InProgress
	}
	h.Eventually(t, 20*time.Second, "settled before the failure", func() bool { return h.Controller.Settled() && inProgress() == 0 && !readyz() })
	for _, leaf := range []string{"leaf1", "leaf2"} {
		if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultSlowWrites, Target: leaf, DelayMS: 1500}); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := h.Controller.Snapshot()
	failed := snap.Links()[0] // leaf1 <-> spine1
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(failed.ID())}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "the reroute seen in progress", func() bool { return inProgress() == 1 && readyz() })
	h.Eventually(t, 60*time.Second, "the reroute over", func() bool { return inProgress() == 0 && !readyz() })
	if !h.Controller.DownLinks()[failed.ID()] {
		t.Fatal("the rollout is over, and the failed link is not routed around")
	}
	h.Eventually(t, 60*time.Second, "settled", h.Controller.Settled)
	if v := inProgress(); v != 0 {
		t.Fatalf("settled, and accelnet_rollout_in_progress is %v", v)
	}
}

// TestTopologyStream reads the dashboard's server-sent events over HTTP:
// the whole topology at once, then each interval a "load" event with only
// what changed (not the whole topology every second), and the
// whole topology again when it changes in etcd.
func TestTopologyStream(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.API.URL+"/api/v1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	next := func() (string, string) {
		t.Helper()
		name := ""
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				return name, data
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return "", ""
	}
	name, data := next()
	var v api.TopologyView
	if err := json.Unmarshal([]byte(data), &v); err != nil || name != "topology" || len(v.Switches) != 3 || len(v.Links) != 2 {
		t.Fatalf("first event %q: %d switches, %d links (%v)", name, len(v.Switches), len(v.Links), err)
	}
	for range 2 {
		name, delta := next()
		var d api.TopologyDelta
		if err := json.Unmarshal([]byte(delta), &d); err != nil || name != "load" || d.Revision != v.Revision {
			t.Fatalf("then %q at revision %d (%v), want load events at %d", name, d.Revision, err, v.Revision)
		}
		if len(delta) >= len(data) {
			t.Errorf("a load event of %d bytes, the whole topology %d", len(delta), len(data))
		}
	}
	topo, rev, _, err := h.Store.Topology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	topo.Links[0].Gbps = 40
	if _, err := h.Store.PutTopology(ctx, topo, rev); err != nil {
		t.Fatal(err)
	}
	for {
		name, data := next()
		if name != "topology" {
			continue
		}
		var w api.TopologyView
		if err := json.Unmarshal([]byte(data), &w); err != nil || w.Revision == v.Revision {
			t.Fatalf("the topology again: revision %d (was %d), %v", w.Revision, v.Revision, err)
		}
		return
	}
}

// TestControllerRestartWritesNothing: a controller that starts against
// switches that already hold the right state reads them back and writes
// nothing, so a restart does not disturb the dataplane.
func TestControllerRestartWritesNothing(t *testing.T) {
	f := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 3, 2))
	topo := f.Topology()
	writes := func() int64 {
		var n int64
		for _, sw := range topo.Switches {
			rpcs, _ := f.Switch(sw.Name).WriteStats()
			n += rpcs
		}
		return n
	}
	run := func() {
		etcdDir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		s, err := stack.New(ctx, stack.Config{Topology: &topo, Etcd: stack.Etcd{Dir: etcdDir}, TelemetryInterval: 100 * time.Millisecond,
			DiscoveryInterval: stack.DefaultDiscoveryInterval, LivenessInterval: controller.DefaultLivenessInterval})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		deadline := time.Now().Add(20 * time.Second)
		for s.Controller.Ready() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("not ready: %v", s.Controller.Ready())
			}
			<-time.After(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s.Close()
	}
	run()
	first := writes()
	if first == 0 {
		t.Fatal("the first controller wrote nothing")
	}
	run()
	if again := writes(); again != first {
		t.Errorf("the restarted controller sent %d Write RPCs to switches that were already right", again-first)
	}
}

// TestFlapDampening: one failure reroutes and the link is used again as
// soon as it is back; a second failure soon after keeps it out of routes
// even while up, until it has been stable for a while.
func TestFlapDampening(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 1), func(o *stack.Config) { o.FlapHalfLife = time.Second })
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	snap, _ := h.Controller.Snapshot()
	var l models.Link
	for _, x := range snap.Links() {
		if _, isHost := snap.HostAt(x.A); !isHost {
			l = x
			break
		}
	}
	avoided := func() bool { return h.Controller.DownLinks()[l.ID()] }
	flap := func() {
		t.Helper()
		h.Fabric.SetLinkUp(l.ID(), false)
		h.Eventually(t, 5*time.Second, "failure seen", avoided)
		h.Fabric.SetLinkUp(l.ID(), true)
	}
	flap()
	h.Eventually(t, 5*time.Second, "link used again after one failure", func() bool { return !avoided() })
	flap()
	h.Eventually(t, 5*time.Second, "flapping link dampened", func() bool { return slices.Contains(h.Controller.Dampened(), l.ID()) })
	if !avoided() {
		t.Fatalf("a dampened link is still in the routes")
	}
	h.Eventually(t, 10*time.Second, "link back once stable", func() bool { return !avoided() && len(h.Controller.Dampened()) == 0 })
}

// TestInterfaceConfigPushed: every port gets the fabric profile (enabled,
// MTU, a description of its peer) over gNMI Set, verified by Get; a change
// made behind the controller's back is put right by the next resync.
func TestInterfaceConfigPushed(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 1), func(o *stack.Config) { o.ResyncInterval = 300 * time.Millisecond })
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	snap, _ := h.Controller.Snapshot()
	gc := &southbound.GNMIConfig{Resolve: snap.Switch}
	t.Cleanup(gc.Close)
	ctx := context.Background()
	h.Eventually(t, 10*time.Second, "leaf1's ports configured", func() bool {
		got, err := gc.GetConfig(ctx, "leaf1")
		return err == nil && got[2].MTU == 4200 && got[2].Description == "link to spine1:1" && got[1].Description == "host h1-1"
	})
	// Someone changes spine1 port 1 by hand; the controller repairs it.
	if err := gc.SetConfig(ctx, "spine1", map[uint32]models.InterfaceConfig{1: {Enabled: true, MTU: 1500, Description: "hand-edited"}}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 10*time.Second, "drift repaired", func() bool {
		got, err := gc.GetConfig(ctx, "spine1")
		return err == nil && got[1].MTU == 4200 && got[1].Description == "link to leaf1:2"
	})
	if st := h.Controller.Status()["spine1"]; !st.ConfigInSync {
		t.Errorf("spine1 status %+v", st)
	}
}

// TestSwitchRunningAnotherPipelineIsRepushed: a switch that runs a
// pipeline under another cookie (another version, pushed by someone
// else) is given accelnet's when the controller connects, and then
// programmed; one that runs none is pushed one too.
func TestSwitchRunningAnotherPipelineIsRepushed(t *testing.T) {
	topo := fabrictest.LeafSpine(1, 2, 1)
	f := fabrictest.StartFabric(t, topo)
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's pipeline, under cookie 42, on leaf1; spine1 and
	// leaf2 run none.
	other := otherController(t, f, 7)
	if _, err := other.Read(context.Background(), "leaf2"); err != nil { // pushes accelnet's, under our cookie
		t.Fatal(err)
	}
	leaf1 := topo.Switches[0]
	for _, sw := range topo.Switches {
		if sw.Name == "leaf1" {
			leaf1 = sw
		}
	}
	cc, err := grpc.NewClient(f.Switch("leaf1").Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := p4v1.NewP4RuntimeClient(cc)
	stream, err := c.StreamChannel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: leaf1.DeviceID, ElectionId: &p4v1.Uint128{Low: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{DeviceId: leaf1.DeviceID,
		ElectionId: &p4v1.Uint128{Low: 1}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: schema.Info, P4DeviceConfig: p4.BMv2JSON, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 42}}}); err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	cc.Close()
	other.Close()

	h := fabrictest.NewServe(t, f.Topology())
	converged(t, h)
	for _, sw := range topo.Switches {
		cc, err := grpc.NewClient(f.Switch(sw.Name).Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p4v1.NewP4RuntimeClient(cc).GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{
			DeviceId: sw.DeviceID, ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY})
		cc.Close()
		if err != nil || resp.GetConfig().GetCookie().GetCookie() != p4.Cookie() {
			t.Errorf("%s runs cookie %v (%v), want accelnet's %#x", sw.Name, resp.GetConfig().GetCookie(), err, p4.Cookie())
		}
	}
	if n := f.Switch("leaf1").Entries(p4.TableIPv4LPM); n == 0 {
		t.Error("leaf1 has no routes after its pipeline was replaced")
	}
}
