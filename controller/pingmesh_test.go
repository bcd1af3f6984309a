package controller

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// TestPingmeshResolvesPaths: a probe that comes back is resolved hop by
// hop from the uplink it left by and the egress port each switch
// recorded. One that went another way than it was sent (its first record
// not the uplink), or came back from another switch than its destination
// leaf, is counted misrouted and kept out of the pair's figures; an ID
// never sent is unknown. One that came the right way counts the switches'
// times and the configured propagation of each link it crossed.
func TestPingmeshResolvesPaths(t *testing.T) {
	topo, err := topology.LeafSpine(2, 3, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	st := &fabricState{snap: snap}
	cfg := &Config{Now: func() time.Time { return now }}
	m := newMetrics(nil, counts{})
	pm := newPingmesh(cfg, slog.New(slog.DiscardHandler), m, telemetry.NewTelemetry(time.Minute), func() *fabricState { return st }, func() bool { return true }, func() error { return nil }, newUrgency(nil))
	pm.plan = newMeshPlan(st)
	leaf1, leaf2 := pm.plan.leaves[0], pm.plan.leaves[1]
	up, ttl, ok := pm.plan.route(leaf1, leaf2, 0)
	if !ok || ttl != 3 {
		t.Fatalf("route leaf1 → leaf2: %+v, TTL %d, %v; want an uplink and TTL 3", up, ttl, ok)
	}
	spinePort := func(spine models.SwitchID, leaf models.SwitchID) uint32 {
		for _, a := range snap.Neighbors(spine) {
			if a.Peer == leaf {
				return a.LocalPort
			}
		}
		t.Fatalf("%s has no link to %s", spine, leaf)
		return 0
	}
	arrival := func(spine, leaf models.SwitchID) uint32 {
		for _, a := range snap.Neighbors(leaf) {
			if a.Peer == spine {
				return a.LocalPort
			}
		}
		return 0
	}
	frame := func(id uint32, hops ...models.ProbeHop) []byte {
		f, err := models.ProbeFrame(models.Probe{ID: id, Src: leaf1.host.IP, Dst: leaf2.host.IP, SrcPort: 50000, TTL: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hops {
			if f, err = models.ProbeEgress(f, h); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	send := func(id uint32, hops ...models.ProbeHop) []byte {
		pm.pending[id] = pendingProbe{src: leaf1.host.Attach.Switch, dst: leaf2.host.Attach.Switch, uplink: up.LocalPort, sent: now}
		return frame(id, hops...)
	}
	count := func(result string) float64 { return testutil.ToFloat64(m.probes.WithLabelValues(result)) }
	dst := leaf2.host.Attach.Switch
	// Out of another uplink than the one it was sent out of.
	pm.received(dst, arrival(up.Peer, dst), send(1, models.ProbeHop{EgressPort: up.LocalPort + 1}, models.ProbeHop{EgressPort: spinePort(up.Peer, dst)}))
	// Through the right spine, then to leaf3, which punted it.
	leaf3 := pm.plan.leaves[2].host.Attach.Switch
	pm.received(leaf3, arrival(up.Peer, leaf3), send(2, models.ProbeHop{EgressPort: up.LocalPort}, models.ProbeHop{EgressPort: spinePort(up.Peer, leaf3)}))
	if got := count("misrouted"); got != 2 {
		t.Errorf("%v misrouted, want 2", got)
	}
	pm.received(dst, arrival(up.Peer, dst), frame(3, models.ProbeHop{EgressPort: up.LocalPort}, models.ProbeHop{EgressPort: spinePort(up.Peer, dst)}))
	if got := count("unknown"); got != 1 {
		t.Errorf("%v unknown, want 1 (a probe never sent)", got)
	}
	if p := pm.probed(leaf1.host.Attach.Switch, dst, time.Minute); p != nil {
		t.Fatalf("misrouted or unknown probes kept: %+v", p)
	}

	pm.received(dst, arrival(up.Peer, dst), send(4, models.ProbeHop{EgressPort: up.LocalPort, QueueDepth: 9, QueueUs: 30, HopUs: 31}, models.ProbeHop{EgressPort: spinePort(up.Peer, dst), HopUs: 2}))
	p := pm.probed(leaf1.host.Attach.Switch, dst, time.Minute)
	link := cfg.Latency.WithDefaults().LinkDelay
	want := us(33*time.Microsecond + 2*link)
	if p == nil || p.Count != 1 || p.P50Us != want || p.Last.QueueingUs != 30 || len(p.Last.Hops) != 2 ||
		p.Last.Hops[0].Switch != string(leaf1.host.Attach.Switch) || p.Last.Hops[1].Switch != string(up.Peer) || p.Last.Hops[0].QueuePackets != 9 {
		t.Fatalf("probed %+v, want one probe of %.1f µs, 30 µs queued at leaf1's uplink", p, want)
	}
	if got := count("received"); got != 1 {
		t.Errorf("%v received, want 1", got)
	}
	// Out of the window, it no longer counts.
	now = now.Add(2 * time.Minute)
	if p := pm.probed(leaf1.host.Attach.Switch, dst, time.Minute); p != nil {
		t.Errorf("a probe two minutes old counted in a one-minute window: %+v", p)
	}
}

// TestPingmeshVisitsEveryPair: block by block, a cycle of the pingmesh
// takes every ordered pair of distinct leaves once, for fabrics whose
// leaves fill the blocks and ones they do not.
func TestPingmeshVisitsEveryPair(t *testing.T) {
	for _, leaves := range []int{2, 3, probeBlock, probeBlock + 1, 3*probeBlock - 1} {
		pm := &pingmesh{}
		seen := map[[2]int]int{}
		for range leaves * (leaves - 1) {
			i, j := pm.nextPairLocked(leaves)
			seen[[2]int{i, j}]++
		}
		if pm.cycle != 0 {
			t.Errorf("%d leaves: a cycle ended before every pair was taken", leaves)
		}
		for i := range leaves {
			for j := range leaves {
				if want := map[bool]int{true: 0, false: 1}[i == j]; seen[[2]int{i, j}] != want {
					t.Errorf("%d leaves: pair %d → %d taken %d times, want %d", leaves, i, j, seen[[2]int{i, j}], want)
				}
			}
		}
		pm.nextPairLocked(leaves)
		if pm.cycle != 1 {
			t.Errorf("%d leaves: the next pair did not start a new cycle", leaves)
		}
	}
}
