package bmv2test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/stack"
)

// TestBMv2Pingmesh: the controller's latency probes cross the lab's BMv2
// switches as real packets. leaf1 → leaf2's probes come back punted by
// leaf2, each with the two records accelnet.p4's egress pushed on the way
// (leaf1's uplink, the spine's port to leaf2), in BMv2's own microseconds
// and packets; over the cycles both uplinks are probed.
//
// With BMv2 built with Thrift, every egress queue is given a rate of
// queueRate packets a second (as a slow link), and h1-1 and h1-2 send h2-1
// 2.5 times what leaf1's uplinks carry: the probes record a standing
// queue at leaf1's uplink, in packets and in time at that rate, the
// pair's probed median rises past its idle 99th percentile, and the
// assembled latency shows the uplink's queue as probed (BMv2 reports no
// queue over gNMI). Without Thrift BMv2 has no egress rate to congest,
// and that part is skipped.
func TestBMv2Pingmesh(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	lab, topo, h := labFabric(t, bin, (*Lab).Host, func(o *stack.Config) { o.ProbeRate = 40 })
	const queueRate, queueCap = 200, 64 // packets a second; packets
	if lab.Thrift() {
		for _, sw := range topo.Switches {
			if err := lab.SetQueueRates(sw.Name, queueRate, queueCap); err != nil {
				t.Fatal(err)
			}
		}
	}
	probed := func(window string) *api.ProbedLatency {
		var p api.PairLatency
		if code := h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2&window="+window, &p); code != http.StatusOK {
			t.Fatalf("latency leaf1 → leaf2: HTTP %d", code)
		}
		return p.Probes
	}
	uplinks := map[uint32]bool{}
	var idle *api.ProbedLatency
	h.Eventually(t, time.Minute, "leaf1 → leaf2 probed out of both uplinks", func() bool {
		idle = probed("1m")
		if idle == nil {
			return false
		}
		hops := idle.Last.Hops
		if len(hops) != 2 || hops[0].Switch != "leaf1" || !strings.HasPrefix(hops[1].Switch, "spine") || hops[1].Port != 2 {
			t.Fatalf("a probe through BMv2 came back with hops %+v, want leaf1's uplink then the spine's port 2 (to leaf2)", hops)
		}
		uplinks[hops[0].Port] = true
		return len(uplinks) == 2
	})
	t.Logf("idle: %d probes, p50 %.0f µs, p99 %.0f µs, last %+v", idle.Count, idle.P50Us, idle.P99Us, idle.Last)
	if !lab.Thrift() {
		t.Skip("BMv2 built without Thrift: its egress queues have no rate to congest (docs/real-switches.md builds it with Thrift)")
	}

	// h1-1 and h1-2 (leaf1's ports 1 and 2) each send h2-1 2.5 times
	// what one uplink carries, spread over both by their source ports.
	h21, leaf1 := topo.Hosts[2], topo.Switches[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, host := range topo.Hosts[:2] {
		s := hostSocket(t, lab, host.Name)
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for sport := uint16(0); ; {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				for range queueRate * 5 / 2 / 100 { // a tick's share
					_ = s.Send(RoCEv2(host.NICMAC(), leaf1.PortMAC(host.Attach.Port), host.IP, h21.IP, 50000+sport%64, 7, 1024))
					sport++
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	var hot *api.ProbedLatency
	h.Eventually(t, 2*time.Minute, "probes to meet a standing queue at leaf1's uplink and the pair's median to rise", func() bool {
		hot = probed("5s")
		return hot != nil && hot.Count >= 3 && hot.Last.Hops[0].QueuePackets >= queueCap/2 && hot.P50Us > idle.P99Us
	})
	t.Logf("flooded: %d probes, p50 %.0f µs, p99 %.0f µs, last %+v", hot.Count, hot.P50Us, hot.P99Us, hot.Last)
	// Behind n packets at queueRate a probe waits n/queueRate seconds
	// (half that at the least: the queue drains as the probe waits).
	if up := hot.Last.Hops[0]; up.QueueUs < float64(up.QueuePackets)*1e6/queueRate/2 {
		t.Errorf("leaf1's uplink: %d packets ahead of the probe, %.0f µs queued; at %d packets a second that is at least %.0f µs",
			up.QueuePackets, up.QueueUs, queueRate, float64(up.QueuePackets)*1e6/queueRate/2)
	}
	h.Eventually(t, time.Minute, "the assembled latency to show leaf1's uplink queue, probed", func() bool {
		var pair api.PairLatency
		h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2", &pair)
		for _, path := range pair.Paths {
			if hop := path.Hops[0]; hop.Switch == "leaf1" && hop.Probed && hop.QueueingUs >= 1e6/queueRate {
				return true
			}
		}
		return false
	})
}
