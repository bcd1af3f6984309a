package controller

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// The pingmesh: latency measured end to end with probes (models.Probe),
// with no agent on the GPU servers. The leader sends probes between every
// pair of leaves, each as a packet-out at the source leaf out of one of
// its uplinks, addressed from one of its hosts to one of the destination
// leaf's, with the TTL that runs out at the destination leaf (which punts
// it back, as a router answers traceroute). On the way every switch's
// egress records what the probe met there: its port, its queue's depth and
// the time the probe spent in it, and the time from ingress to egress.
// Between switches a probe hashes as RDMA traffic between those hosts
// does, from a source port that changes with every probe, so over time it
// crosses every path of the pair.
//
// The pairs are probed in turn at ProbeRate probes a second (at most
// pairProbeRate a pair): one probe a pair a cycle, each cycle out of the
// next uplink. A pair's latency is
// the sum of what its switches recorded (ingress to egress, queueing
// included) and the configured propagation of the links between them
// (clocks of different switches are not compared). A probe not back
// within probeLost is lost.

// DefaultProbeRate is the command line's default for Config.ProbeRate.
const DefaultProbeRate = 1000

// probeTick is how often the pingmesh sends the probes due.
const probeTick = 50 * time.Millisecond

// probeLost is how long a probe may be out before it counts as lost. Its
// latency is what the switches recorded, not its round trip, which runs
// through the controller's and the switches' packet paths: a saturated
// k=16 demo on 2 cores brought half its probes back after more than 2 s.
const probeLost = 10 * time.Second

// pairProbeRate is the most probes a second a leaf pair gets.
const pairProbeRate = 10

// probeSamples is how many probes of a pair are kept for its percentiles.
const probeSamples = 16

// probeRetention is how long a pair's probes are kept after its last:
// memory is bounded by the probe rate, not by the pairs a fabric has.
const probeRetention = 2 * DefaultLatencyWindow

// pingmesh sends the probes and keeps their results.
type pingmesh struct {
	cfg     *Config
	log     *slog.Logger
	m       *metrics
	tele    *telemetry.Telemetry // takes the queues probes met
	fabric  func() *fabricState
	leading func() bool
	ready   func() error
	urgency *urgency
	// started is set once the fabric was first programmed: probes sent
	// before would be lost for want of routes.
	started bool

	mu      sync.Mutex
	plan    *meshPlan
	cursor  int // the next pair to probe, of plan's
	cycle   int
	carry   float64 // probes owed to the next tick
	nextID  uint32
	pending map[uint32]pendingProbe
	pairs   map[[2]models.SwitchID]*pairProbes
	swept   time.Time // when kept pairs were last dropped
	expired time.Time // when pending probes were last counted lost
	// sent and back count probes sent and come back (ProbeStats).
	sent, back atomic.Uint64
}

// meshPlan is what the pingmesh needs of one fabric state: the leaves,
// one host of each standing for its addresses, their uplinks, and each
// switch's distance to each leaf (computed when first needed).
type meshPlan struct {
	st     *fabricState
	leaves []meshLeaf
	dist   *planDistances // searched afresh: no plan needed
}

type meshLeaf struct {
	host    models.Host
	uplinks []topology.Adjacency
}

type pendingProbe struct {
	src, dst models.SwitchID
	uplink   uint32
	sent     time.Time
}

// pairProbes is what a leaf pair's probes measured: the last probeSamples
// latencies and when, and the last probe's path in full.
// Compact (about 400 bytes a pair with its last path): at 1,000 probes a
// second a k=48 fat-tree's pairs probed within probeRetention are 120,000.
type pairProbes struct {
	at      [probeSamples]int64  // unix nanoseconds
	latency [probeSamples]uint32 // nanoseconds
	n, next int
	last    api.ProbedPath
}

func newPingmesh(cfg *Config, log *slog.Logger, m *metrics, tele *telemetry.Telemetry, fabric func() *fabricState, leading func() bool, ready func() error, u *urgency) *pingmesh {
	return &pingmesh{cfg: cfg, log: log, m: m, tele: tele, fabric: fabric, leading: leading, ready: ready, urgency: u,
		pending: map[uint32]pendingProbe{}, pairs: map[[2]models.SwitchID]*pairProbes{}}
}

// on says whether probes are sent at all.
func (pm *pingmesh) on() bool { return pm.cfg.ProbeRate > 0 && pm.cfg.Packets != nil }

// run sends the probes due every probeTick while this replica leads and
// no failure is being handled.
func (pm *pingmesh) run(ctx context.Context) {
	t := time.NewTicker(probeTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !pm.leading() || pm.urgency.await(ctx) != nil {
			continue
		}
		if !pm.started {
			if pm.started = pm.ready() == nil; !pm.started {
				continue
			}
		}
		pm.tick(ctx)
	}
}

// tick sends the probes due and counts the ones out too long as lost.
func (pm *pingmesh) tick(ctx context.Context) {
	st := pm.fabric()
	if st == nil {
		return
	}
	now := pm.cfg.Now()
	pm.mu.Lock()
	if now.Sub(pm.expired) >= time.Second { // up to 10,000 pending: not every tick
		for id, p := range pm.pending {
			if now.Sub(p.sent) > probeLost {
				delete(pm.pending, id)
				pm.m.probes.WithLabelValues("lost").Inc()
			}
		}
		pm.expired = now
	}
	if now.Sub(pm.swept) > probeRetention {
		for k, pp := range pm.pairs {
			if now.Sub(time.Unix(0, pp.at[(pp.next+probeSamples-1)%probeSamples])) > probeRetention {
				delete(pm.pairs, k)
			}
		}
		pm.swept = now
	}
	if pm.plan == nil || pm.plan.st != st {
		pm.plan = newMeshPlan(st)
	}
	plan := pm.plan
	pairs := len(plan.leaves) * (len(plan.leaves) - 1)
	if pairs == 0 {
		pm.mu.Unlock()
		return
	}
	// At most pairProbeRate a second for each pair: a small fabric's
	// pairs are not probed a hundred times a second.
	rate := min(float64(pm.cfg.ProbeRate), float64(pairs*pairProbeRate))
	pm.carry += rate * probeTick.Seconds()
	n := int(pm.carry)
	pm.carry -= float64(n)
	type out struct {
		sw    models.SwitchID
		port  uint32
		frame []byte
	}
	var send []out
	for range n {
		i, j := pm.nextPairLocked(len(plan.leaves))
		src, dst := plan.leaves[i], plan.leaves[j]
		up, ttl, ok := plan.route(src, dst, pm.cycle+i+j)
		if !ok {
			continue // no working uplink toward it
		}
		pm.nextID++
		id := pm.nextID
		frame, err := models.ProbeFrame(models.Probe{ID: id, Src: src.host.IP, Dst: dst.host.IP, SrcPort: uint16(49152 + id%16384), TTL: uint8(ttl)})
		if err != nil {
			continue // an IPv6 host: not probed
		}
		pm.pending[id] = pendingProbe{src: src.host.Attach.Switch, dst: dst.host.Attach.Switch, uplink: up.LocalPort, sent: now}
		send = append(send, out{src.host.Attach.Switch, up.LocalPort, frame})
	}
	pm.mu.Unlock()
	for _, o := range send {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := pm.cfg.Packets.SendPacket(pctx, o.sw, o.port, o.frame)
		cancel()
		if err != nil {
			pm.log.Debug("latency probe not sent", "switch", o.sw, "port", o.port, "err", err)
			pm.m.probes.WithLabelValues("not_sent").Inc()
			continue
		}
		pm.m.probes.WithLabelValues("sent").Inc()
		pm.sent.Add(1)
	}
}

// probeBlock is the side of the blocks of pairs the pingmesh takes in
// turn: probeBlock sources to probeBlock destinations, so that a tick's
// probes leave by a few leaves' P4Runtime streams and come back by a few
// others', several messages each (gRPC writes what is queued on a stream
// at once), rather than one on each of fifty.
const probeBlock = 8

// nextPairLocked is the next leaf pair to probe, of leaves leaves
// (indexes, never the same twice), block by block; a cycle through every
// pair counts in pm.cycle.
func (pm *pingmesh) nextPairLocked(leaves int) (i, j int) {
	blocks := (leaves + probeBlock - 1) / probeBlock
	for {
		if pm.cursor >= blocks*blocks*probeBlock*probeBlock {
			pm.cursor = 0
			pm.cycle++
		}
		block, cell := pm.cursor/(probeBlock*probeBlock), pm.cursor%(probeBlock*probeBlock)
		pm.cursor++
		i, j = block/blocks*probeBlock+cell/probeBlock, block%blocks*probeBlock+cell%probeBlock
		if i < leaves && j < leaves && i != j {
			return i, j
		}
	}
}

func newMeshPlan(st *fabricState) *meshPlan {
	p := &meshPlan{st: st, dist: &planDistances{snap: st.snap, down: st.down}}
	for _, h := range leafHosts(st.snap) {
		p.leaves = append(p.leaves, meshLeaf{host: h, uplinks: st.snap.Neighbors(h.Attach.Switch)})
	}
	return p
}

// route is the uplink a probe from src to dst goes out of (the turn-th of
// those that lead to dst by working links), and the TTL that runs out at
// dst over a shortest path from there; false if none leads there.
func (p *meshPlan) route(src, dst meshLeaf, turn int) (topology.Adjacency, int, bool) {
	d := p.dist.to(dst.host.Attach.Switch)
	for k := range src.uplinks {
		a := src.uplinks[(turn+k)%len(src.uplinks)]
		if p.st.down[a.Link] {
			continue
		}
		if hops, ok := d.Of(a.Peer); ok && hops+2 <= 255 {
			// One off at each egress; the destination punts it at 1.
			return a, hops + 2, true
		}
	}
	return topology.Adjacency{}, 0, false
}

// isProbe says whether a punted frame may be a latency probe (IPv4).
func isProbe(frame []byte) bool {
	return len(frame) >= 14 && binary.BigEndian.Uint16(frame[12:14]) == models.EtherTypeIPv4
}

// received takes a probe a switch punted (arriving at its port): the
// path is resolved from the uplink it was sent out of and the egress
// port each hop recorded, and its latency kept for its pair. A probe
// this replica did not send (another leader's, or forged) or one that
// ended elsewhere than its destination leaf (a route longer than the
// distance it was sent with) is counted and dropped.
func (pm *pingmesh) received(sw models.SwitchID, port uint32, frame []byte) {
	probe, err := models.ParseProbe(frame)
	if err != nil {
		return
	}
	now := pm.cfg.Now()
	pm.mu.Lock()
	p, ok := pm.pending[probe.ID]
	delete(pm.pending, probe.ID)
	plan := pm.plan
	pm.mu.Unlock()
	if !ok || plan == nil {
		pm.m.probes.WithLabelValues("unknown").Inc()
		return
	}
	snap := plan.st.snap
	path := api.ProbedPath{At: now}
	at := models.Endpoint{Switch: p.src, Port: p.uplink}
	var latency time.Duration
	link := pm.cfg.Latency.WithDefaults().LinkDelay
	egress := make([]models.Endpoint, 0, len(probe.Hops))
	for i, h := range probe.Hops {
		if i == 0 && h.EgressPort != p.uplink {
			pm.m.probes.WithLabelValues("misrouted").Inc()
			return
		}
		at.Port = h.EgressPort
		path.Hops = append(path.Hops, api.ProbedHop{Switch: string(at.Switch), Port: at.Port, QueueUs: float64(h.QueueUs),
			QueuePackets: h.QueueDepth, HopUs: float64(h.HopUs)})
		egress = append(egress, at)
		latency += time.Duration(h.HopUs)*time.Microsecond + link
		path.QueueingUs += float64(h.QueueUs)
		l, ok := snap.LinkAt(at)
		if !ok {
			pm.m.probes.WithLabelValues("misrouted").Inc()
			return
		}
		if at == l.A {
			at = l.B
		} else {
			at = l.A
		}
	}
	arrived := models.Endpoint{Switch: sw, Port: port}
	if sw != p.dst || (len(probe.Hops) < models.ProbeMaxHops && at != arrived) {
		pm.m.probes.WithLabelValues("misrouted").Inc()
		return
	}
	path.LatencyUs = us(latency)
	for i, e := range egress {
		pm.tele.ObserveProbed(e, time.Duration(probe.Hops[i].QueueUs)*time.Microsecond, snap.PortGbps(e))
	}
	pm.m.probes.WithLabelValues("received").Inc()
	pm.back.Add(1)
	pm.m.probeLatency.Observe(latency.Seconds())
	pm.mu.Lock()
	defer pm.mu.Unlock()
	key := [2]models.SwitchID{p.src, p.dst}
	pp := pm.pairs[key]
	if pp == nil {
		pp = &pairProbes{}
		pm.pairs[key] = pp
	}
	pp.at[pp.next], pp.latency[pp.next] = now.UnixNano(), uint32(min(latency, math.MaxUint32))
	pp.next = (pp.next + 1) % probeSamples
	pp.n = min(pp.n+1, probeSamples)
	pp.last = path
}

// probed is what src's probes to dst (leaves) measured in the window
// before now; nil if none came back in it.
func (pm *pingmesh) probed(src, dst models.SwitchID, window time.Duration) *api.ProbedLatency {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	pp := pm.pairs[[2]models.SwitchID{src, dst}]
	if pp == nil {
		return nil
	}
	now := pm.cfg.Now()
	var in []time.Duration
	for k := range pp.n {
		if now.Sub(time.Unix(0, pp.at[k])) <= window {
			in = append(in, time.Duration(pp.latency[k]))
		}
	}
	if len(in) == 0 {
		return nil
	}
	slices.Sort(in)
	last := pp.last
	last.Hops = slices.Clone(last.Hops)
	return &api.ProbedLatency{Count: len(in), P50Us: us(telemetry.Percentile(in, 0.5)), P99Us: us(telemetry.Percentile(in, 0.99)), Last: last}
}

// ProbeStats is how many latency probes this replica sent and how many
// came back from where they were sent to.
func (c *Controller) ProbeStats() (sent, back uint64) {
	return c.mesh.sent.Load(), c.mesh.back.Load()
}
