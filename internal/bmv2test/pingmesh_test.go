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
// and packets; over the cycles both uplinks are probed. Then h1-1 and h1-2
// flood h2-1 through leaf1's uplinks: a probe records time queued at
// leaf1's uplink and the pair's probed p99 rises. (BMv2 sets no egress
// rate without Thrift, and its software queues hold a probe for up to a
// millisecond even when idle: the rise is real packets' but not clean.)
func TestBMv2Pingmesh(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	lab, topo, h := labFabric(t, bin, (*Lab).Host, func(o *stack.Config) { o.ProbeRate = 40 })
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

	h21, leaf1 := topo.Hosts[2], topo.Switches[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, host := range topo.Hosts[:2] { // h1-1 and h1-2, on leaf1's ports 1 and 2
		s := hostSocket(t, lab, host.Name)
		wg.Go(func() {
			for sport := uint16(0); ; sport++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = s.Send(RoCEv2(host.NICMAC(), leaf1.PortMAC(host.Attach.Port), host.IP, h21.IP, 50000+sport%64, 7, 1024))
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	var hot *api.ProbedLatency
	h.Eventually(t, 2*time.Minute, "a probe to meet a queue at leaf1's uplink and the pair's latency to rise", func() bool {
		hot = probed("5s")
		return hot != nil && hot.Last.Hops[0].QueueUs > 0 && hot.P99Us > idle.P99Us
	})
	t.Logf("flooded: %d probes, p50 %.0f µs, p99 %.0f µs, last %+v", hot.Count, hot.P50Us, hot.P99Us, hot.Last)
}
