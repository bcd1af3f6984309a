package fabrictest_test

import (
	"math"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// TestLatencyShowsACongestedHop: an intent's flow runs from h1-1 to
// h2-1 alone, and their latency is the hops' fixed cost. h2-1's three
// neighbours on leaf2 then send to it at line rate: its leaf's port to
// it is offered 3:1 and builds a queue. The pair's latency rises by it, the
// hop that holds most of it is h2-1's port, holding what fabricsim
// holds, and the intent's status shows it. Flows that fill leaf1's
// uplinks make the leaf×leaf matrix show leaf1 → leaf2 slower than the
// idle way back; the Prometheus histograms count the queues; requests
// that name no pair are refused with a reason.
func TestLatencyShowsACongestedHop(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 4))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var in models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("ring", "h1-1", "h2-1", 10, 49152, 1), &in)
	h.Eventually(t, 10*time.Second, "the intent installed", func() bool { return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled })
	if _, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 49152, DemandGbps: 10}}); err != nil {
		t.Fatal(err)
	}
	pair := func() api.PairLatency {
		var p api.PairLatency
		if code := h.GetJSON(t, "/api/v1/latency?src=h1-1&dst=h2-1&window=10s", &p); code != http.StatusOK {
			t.Fatalf("latency h1-1 → h2-1: HTTP %d", code)
		}
		return p
	}
	measured := func(p api.PairLatency) bool {
		for _, path := range p.Paths {
			for _, hop := range path.Hops {
				if !hop.Measured {
					return false
				}
			}
		}
		return len(p.Paths) > 0
	}
	var idle api.PairLatency
	h.Eventually(t, 20*time.Second, "every hop's queue reported", func() bool { idle = pair(); return measured(idle) })
	if len(idle.Paths) != 2 || len(idle.Paths[0].Hops) != 3 {
		t.Fatalf("h1-1 → h2-1: %d paths of %d hops, want 2 of 3 (leaf1 up, a spine down, leaf2 to the host)", len(idle.Paths), len(idle.Paths[0].Hops))
	}
	fixed := 0.0
	for _, hop := range idle.Paths[0].Hops {
		fixed += hop.FixedUs
	}
	if idle.NowUs > fixed+1 {
		t.Errorf("one 10 Gb/s flow: %.2f µs, want about the fixed %.2f µs (no queue)", idle.NowUs, fixed)
	}

	var incast []fabricsim.FlowSpec
	for _, src := range []string{"10.0.2.2", "10.0.2.3", "10.0.2.4"} {
		incast = append(incast, fabricsim.FlowSpec{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 50000, DemandGbps: 100})
	}
	incastIDs, err := h.Fabric.AddFlows(incast)
	if err != nil {
		t.Fatal(err)
	}
	var hot api.PairLatency
	h.Eventually(t, 20*time.Second, "the pair's latency up by the incast's queues", func() bool {
		hot = pair()
		return hot.NowUs > idle.NowUs+50
	})
	snap, _ := h.Controller.Snapshot()
	dst, err := snap.Host("h2-1")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := dst.Attach
	for _, path := range hot.Paths {
		worst := path.Hops[0]
		for _, hop := range path.Hops {
			if hop.QueueingUs > worst.QueueingUs {
				worst = hop
			}
		}
		if worst.Switch != string(hostPort.Switch) || worst.Port != hostPort.Port {
			t.Errorf("the most queueing on %s:%d (%.1f µs), want h2-1's port %s", worst.Switch, worst.Port, worst.QueueingUs, hostPort)
		}
		// The fabric's own queue is the model's: fabricsim says what it holds.
		if got, want := worst.QueueBytes, h.Fabric.QueueBytes(hostPort); want == 0 || got < 0.5*want || got > 1.5*want {
			t.Errorf("h2-1's port reported %.0f bytes queued, fabricsim holds %.0f", got, want)
		}
	}
	if hot.P99Us < hot.NowUs-1 || hot.Intervals == 0 {
		t.Errorf("p99 %.1f µs over %d intervals, now %.1f µs", hot.P99Us, hot.Intervals, hot.NowUs)
	}

	// What the tenant sees.
	h.Eventually(t, 10*time.Second, "the intent's status to show the queue", func() bool {
		l := intentState(t, h, tok, in.ID).Status.Latency
		return l != nil && l.NowUs > idle.NowUs+50 && l.P99Us >= l.NowUs-1 && l.Source == api.LatencySource
	})

	// The matrix leaves out the hosts' ports: the incast's queue is not
	// on a leaf-to-leaf path. Three flows from leaf1's other hosts to
	// leaf2's at line rate fill both its uplinks instead: leaf1 → leaf2
	// becomes slower than the idle way back.
	h.Fabric.RemoveFlows(incastIDs)
	var across []fabricsim.FlowSpec
	for i := 2; i <= 4; i++ {
		across = append(across, fabricsim.FlowSpec{Src: netip.MustParseAddr("10.0.1." + strconv.Itoa(i)), Dst: netip.MustParseAddr("10.0.2." + strconv.Itoa(i)), SrcPort: 50000, DemandGbps: 100})
	}
	if _, err := h.Fabric.AddFlows(across); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 10*time.Second, "the matrix to show leaf1 → leaf2 slower", func() bool {
		var m api.LatencyMatrix
		if code := h.GetJSON(t, "/api/v1/latency", &m); code != http.StatusOK || len(m.Leaves) != 2 || m.Leaves[0] != "leaf1" {
			t.Fatalf("matrix: HTTP %d, leaves %v", code, m.Leaves)
		}
		return m.MeanUs[0][1] > m.MeanUs[1][0]+10 && m.WorstUs[0][1] >= m.MeanUs[0][1]
	})
	// The queue is at leaf1's uplinks, where four hosts' traffic meets; a
	// spine's port on to leaf2 is fed by one uplink and holds none.
	var leaves api.PairLatency
	if code := h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2", &leaves); code != http.StatusOK {
		t.Fatalf("latency leaf1 → leaf2: HTTP %d", code)
	}
	uplinkQueue := 0.0
	for _, path := range leaves.Paths {
		if len(path.Hops) != 2 {
			t.Fatalf("leaf1 → leaf2: %d hops, want 2 (leaf1 up, a spine down)", len(path.Hops))
		}
		uplinkQueue = max(uplinkQueue, path.Hops[0].QueueingUs)
		if path.Hops[1].QueueingUs > 1 {
			t.Errorf("%s:%d, fed by one uplink: %.1f µs of queueing, want none", path.Hops[1].Switch, path.Hops[1].Port, path.Hops[1].QueueingUs)
		}
	}
	if uplinkQueue < 20 {
		t.Errorf("leaf1's fullest uplink: %.1f µs of queueing, want its queue (2:1 or more: Kmax, 32 µs)", uplinkQueue)
	}

	for _, name := range []string{"accelnet_queue_delay_seconds", "accelnet_leaf_pair_latency_seconds"} {
		count := regexp.MustCompile(`(?m)^` + name + `_count [1-9]`)
		h.Eventually(t, 10*time.Second, name+" observed", func() bool { return count.MatchString(scrape(t, h)) })
	}

	for _, bad := range []string{"?src=h1-1", "?src=h1-1&dst=nosuch", "?src=leaf1&dst=h2-1", "?src=h1-1&dst=h2-1&window=soon", "?src=leaf1&dst=leaf1"} {
		var p api.Problem
		if code := h.GetJSON(t, "/api/v1/latency"+bad, &p); code != http.StatusBadRequest || p.Detail == "" {
			t.Errorf("latency%s: HTTP %d %q, want 400 with a reason", bad, code, p.Detail)
		}
	}
}

// TestPingmeshMeasuresEndToEnd: with the pingmesh on, leaf1 → leaf2's
// probes come back through a spine with two hop records (leaf1's uplink,
// the spine's port to leaf2) and no queue while the fabric is idle. Three
// of leaf1's hosts then send to leaf2's at line rate over its two
// uplinks: the probes find a queue at the uplink they leave by, the depth
// fabricsim holds there and the delay the gNMI-reported depth implies,
// and the pair's probed latency rises by it while the way back stays
// idle. A forged probe (an ID the controller did not send) is counted
// and kept out of the figures.
func TestPingmeshMeasuresEndToEnd(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 4), func(o *stack.Config) { o.ProbeRate = 200 })
	converged(t, h)
	probed := func(src, dst string) *api.ProbedLatency {
		var p api.PairLatency
		if code := h.GetJSON(t, "/api/v1/latency?src="+src+"&dst="+dst+"&window=2s", &p); code != http.StatusOK {
			t.Fatalf("latency %s → %s: HTTP %d", src, dst, code)
		}
		return p.Probes
	}
	var idle *api.ProbedLatency
	h.Eventually(t, 20*time.Second, "leaf1 → leaf2 probed", func() bool { idle = probed("leaf1", "leaf2"); return idle != nil })
	hops := idle.Last.Hops
	if len(hops) != 2 || hops[0].Switch != "leaf1" || !strings.HasPrefix(hops[1].Switch, "spine") {
		t.Fatalf("a probe's hops: %+v, want leaf1's uplink then a spine's port", hops)
	}
	if idle.Last.QueueingUs != 0 || idle.P99Us > 10 {
		t.Errorf("idle fabric: probes queued %.0f µs, p99 %.0f µs", idle.Last.QueueingUs, idle.P99Us)
	}

	var across []fabricsim.FlowSpec
	for i := 2; i <= 4; i++ {
		across = append(across, fabricsim.FlowSpec{Src: netip.MustParseAddr("10.0.1." + strconv.Itoa(i)), Dst: netip.MustParseAddr("10.0.2." + strconv.Itoa(i)), SrcPort: 50000, DemandGbps: 100})
	}
	if _, err := h.Fabric.AddFlows(across); err != nil {
		t.Fatal(err)
	}
	var hot *api.ProbedLatency
	h.Eventually(t, 20*time.Second, "leaf1 → leaf2's probes to meet a queue at leaf1's uplink", func() bool {
		hot = probed("leaf1", "leaf2")
		return hot != nil && hot.Last.Hops[0].QueueUs > 0 && hot.P99Us > idle.P99Us+5
	})
	up := hot.Last.Hops[0]
	port := models.Endpoint{Switch: "leaf1", Port: up.Port}
	holds := h.Fabric.QueueBytes(port)
	if wantUs := holds * 8 / 100e3; holds == 0 || math.Abs(up.QueueUs-wantUs) > 1 {
		t.Errorf("the probe met %.0f µs at %s, fabricsim holds %.0f bytes there (%.1f µs at 100 Gb/s)", up.QueueUs, port, holds, wantUs)
	}
	if up.QueuePackets == 0 || up.HopUs < up.QueueUs {
		t.Errorf("hop record %+v: want the queue's packets and an ingress-to-egress time that includes its queueing", up)
	}
	// The same hop as the switch reports it over gNMI, once reported.
	h.Eventually(t, 20*time.Second, "leaf1's switch to report the queue the probe met", func() bool {
		var pair api.PairLatency
		h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2", &pair)
		for _, path := range pair.Paths {
			if hop := path.Hops[0]; hop.Switch == "leaf1" && hop.Port == up.Port && hop.QueueingUs > 0 {
				if math.Abs(hop.QueueingUs-up.QueueUs) > 2 {
					t.Fatalf("%s: probed %.1f µs of queue, gNMI's depth says %.1f µs", port, up.QueueUs, hop.QueueingUs)
				}
				return true
			}
		}
		return false
	})
	if back := probed("leaf2", "leaf1"); back == nil || back.Last.QueueingUs != 0 {
		t.Errorf("leaf2 → leaf1 (idle): %+v", back)
	}

	forged, err := models.ProbeFrame(models.Probe{ID: 1 << 31, Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 1, TTL: 1})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ = models.ProbeEgress(forged, models.ProbeHop{EgressPort: up.Port, QueueUs: 1e6, HopUs: 1e6})
	unknown := func() float64 {
		n, _ := metric(t, h, "accelnet_latency_probes_total", "result", "unknown")
		return n
	}
	before := unknown()
	h.Controller.PacketIn("leaf2", 1, forged)
	if _, misrouted := metric(t, h, "accelnet_latency_probes_total", "result", "misrouted"); unknown() <= before || misrouted {
		t.Errorf("after a forged probe: %v unknown (%v before), misrouted counted: %v", unknown(), before, misrouted)
	}
	if p := probed("leaf1", "leaf2"); p == nil || p.P99Us > 1e5 {
		t.Errorf("a forged probe counted in the pair's latency: %+v", p)
	}
}

// TestProbedQueuesStandInWhereSwitchesReportNone: where the switches
// export no queue depths over gNMI (as BMv2 does), the queues the
// pingmesh's probes meet stand in for them in the assembled latency: a
// pair's paths show leaf1's full uplink as probed, the leaf×leaf matrix
// rises for that pair only, and the way back stays at its fixed cost.
func TestProbedQueuesStandInWhereSwitchesReportNone(t *testing.T) {
	f := fabrictest.StartFabricWith(t, fabrictest.LeafSpine(2, 2, 4), func(o *fabricsim.Options) { o.NoQueueDepths = true })
	h := fabrictest.NewServeWith(t, f.Topology(), func(o *stack.Config) { o.ProbeRate = 200 })
	converged(t, h)
	var across []fabricsim.FlowSpec
	for i := 2; i <= 4; i++ {
		across = append(across, fabricsim.FlowSpec{Src: netip.MustParseAddr("10.0.1." + strconv.Itoa(i)), Dst: netip.MustParseAddr("10.0.2." + strconv.Itoa(i)), SrcPort: 50000, DemandGbps: 100})
	}
	if _, err := f.AddFlows(across); err != nil {
		t.Fatal(err)
	}
	var hop api.HopLatency
	h.Eventually(t, 30*time.Second, "leaf1's uplink queue, as the probes met it, in the pair's latency", func() bool {
		var pair api.PairLatency
		if code := h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2", &pair); code != http.StatusOK {
			t.Fatalf("latency: HTTP %d", code)
		}
		for _, path := range pair.Paths {
			if hp := path.Hops[0]; hp.Probed && hp.QueueingUs > 0 {
				hop = hp
				return true
			}
		}
		return false
	})
	port := models.Endpoint{Switch: "leaf1", Port: hop.Port}
	holds := f.QueueBytes(port)
	if wantUs := holds * 8 / 100e3; !hop.Measured || holds == 0 || math.Abs(hop.QueueingUs-wantUs) > 2 {
		t.Errorf("%s: %+v; fabricsim holds %.0f bytes there (%.1f µs at 100 Gb/s)", port, hop, holds, wantUs)
	}
	h.Eventually(t, 30*time.Second, "the matrix to show leaf1 → leaf2's queue", func() bool {
		var m api.LatencyMatrix
		if code := h.GetJSON(t, "/api/v1/latency", &m); code != http.StatusOK || len(m.Leaves) != 2 || m.Leaves[0] != "leaf1" {
			t.Fatalf("matrix: HTTP %d, %+v", code, m)
		}
		return m.MeanUs[0][1] > m.MeanUs[1][0]+5
	})
	var back api.PairLatency
	h.GetJSON(t, "/api/v1/latency?src=leaf2&dst=leaf1", &back)
	for _, path := range back.Paths {
		for _, hp := range path.Hops {
			if hp.QueueingUs != 0 {
				t.Errorf("leaf2 → leaf1 (idle) hop %+v", hp)
			}
		}
	}
}
