package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Link liveness: a switch that reports its ports' oper-status over gNMI
// (ON_CHANGE) tells the controller of a failed link within milliseconds
// (observeOperStatus). One that reports nothing (BMv2's
// simple_switch_grpc, any switch declared without a gNMI address) leaves
// failure detection to the controller. Discovery's rounds (every
// DiscoveryInterval, 5 s) are for the cabling; they are too slow for
// that. So each fabric link end on such a switch is watched: every
// LivenessInterval the leader sends a probe out of the port at the far
// end of its link, and the end is lost when its switch delivered probes
// at its other ports in livenessMissed ticks since it last delivered one
// there. That finds a cut link in livenessMissed to livenessMissed+1
// ticks (0.6–0.8 s by default) and, as in discovery, takes no silence at
// every port of a switch at once for failed cables.

// livenessMissed is how many liveness ticks a watched end may hear
// nothing, while its switch hears its other ports, before its link is
// lost: a probe or two dropped on a switch's CPU path is not a failure.
const livenessMissed = 3

// DefaultLivenessInterval is how often a watched link end is probed.
const DefaultLivenessInterval = 200 * time.Millisecond

// DefaultLivenessBudget is the most liveness probes the controller sends
// per second; with more watched ends than the interval allows, the
// interval stretches (and detection with it), up to the discovery
// interval (whose rounds no longer probe the watched ends), and the log
// says so. A probe costs about 35 µs of CPU between the controller and
// fabricsim (BenchmarkLivenessCost at k=16): 10,000 a second is about a
// third of a core.
const DefaultLivenessBudget = 10_000

// watched is, for one topology snapshot, the link ends whose switch
// reports no oper-status, the ports their probes go out of, and the
// links they are on.
type watched struct {
	snap  *topology.Snapshot
	ends  map[models.Endpoint]bool
	links []models.Link
	out   map[models.Endpoint]bool // the ports probes go out of
	// from is, switch by switch, the ports probes go out of (each faces
	// a watched end).
	from []probesFrom
	n    int // probes per tick
}

// probesFrom is a switch, the ports of it that liveness probes go out
// of, and the probe of each (built once: a tick sends them all).
type probesFrom struct {
	sw     models.Switch
	ports  []uint32
	probes [][]byte
}

// reportsOperStatus says whether the controller hears of sw's ports going
// down from sw itself: a switch with a gNMI address is subscribed to
// their oper-status.
func reportsOperStatus(sw models.Switch) bool { return sw.GNMIAddr != "" }

// watchedEnds works out what liveness watches in snap.
func watchedEnds(snap *topology.Snapshot) *watched {
	w := &watched{snap: snap, ends: map[models.Endpoint]bool{}, out: map[models.Endpoint]bool{}}
	silent := map[models.SwitchID]bool{}
	for _, sw := range snap.Switches() {
		if !reportsOperStatus(sw) {
			silent[sw.Name] = true
		}
	}
	if len(silent) == 0 {
		return w
	}
	for _, sw := range snap.Switches() {
		from := probesFrom{sw: sw}
		for _, a := range snap.Neighbors(sw.Name) {
			if !silent[a.Peer] {
				continue
			}
			w.ends[models.Endpoint{Switch: a.Peer, Port: a.PeerPort}] = true
			w.out[models.Endpoint{Switch: sw.Name, Port: a.LocalPort}] = true
			from.ports = append(from.ports, a.LocalPort)
			from.probes = append(from.probes, probeFrame(sw, a.LocalPort))
		}
		if len(from.ports) > 0 {
			w.from = append(w.from, from)
			w.n += len(from.ports)
		}
	}
	for _, l := range snap.FabricLinks() {
		if w.ends[l.A] || w.ends[l.B] {
			w.links = append(w.links, l)
		}
	}
	return w
}

// watchedNow is what liveness watches in the current topology.
func (lw *linkWatch) watchedNow() *watched {
	st := lw.fabric()
	if st == nil {
		return nil
	}
	if w := lw.liveWatch.Load(); w != nil && w.snap == st.snap {
		return w
	}
	w := watchedEnds(st.snap)
	lw.liveWatch.Store(w)
	return w
}

// livenessInterval is the tick for n probes per tick within the budget,
// and never longer than a discovery round.
func (lw *linkWatch) livenessInterval(n int) time.Duration {
	d := lw.cfg.LivenessInterval
	if n > 0 && lw.cfg.LivenessBudget > 0 {
		d = max(d, time.Duration(int64(n)*int64(time.Second)/int64(lw.cfg.LivenessBudget)))
	}
	if lw.cfg.DiscoveryInterval > 0 && d > lw.cfg.DiscoveryInterval {
		d = max(lw.cfg.LivenessInterval, lw.cfg.DiscoveryInterval)
	}
	return d
}

// watchLiveness runs liveness ticks until ctx ends.
func (lw *linkWatch) watchLiveness(ctx context.Context) {
	interval := lw.cfg.LivenessInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	var saidEnds int
	var saidEvery time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w := lw.watchedNow()
		if w == nil || w.n == 0 {
			continue
		}
		d := lw.livenessInterval(w.n)
		if d != interval {
			interval = d
			t.Reset(d)
		}
		if w.n != saidEnds || d != saidEvery {
			saidEnds, saidEvery = w.n, d
			lw.log.Info("link liveness: probing the fabric link ends on switches that report no oper-status",
				"ends", w.n, "interval", d, "lost_after", fmt.Sprintf("%s to %s", livenessMissed*d, (livenessMissed+1)*d),
				"probes_per_second", int64(w.n)*int64(time.Second)/int64(d))
		}
		lw.m.livenessEnds.Set(float64(w.n))
		lw.m.livenessInterval.Set(d.Seconds())
		lw.livenessTick(ctx, w)
	}
}

// livenessTick closes a tick (the switches that delivered a probe since
// the last one count it), judges the watched links, and probes them
// again, as the leader. It waits while a failure is handled (see
// urgency): no probe is sent meanwhile, so none is missed.
func (lw *linkWatch) livenessTick(ctx context.Context, w *watched) {
	if lw.cfg.Packets == nil || !lw.leading() || lw.urgency.await(ctx) != nil {
		return
	}
	lw.mu.Lock()
	for sw := range lw.tickHeardNow {
		lw.tickHeard[sw]++
	}
	clear(lw.tickHeardNow)
	lw.ticks++
	lw.mu.Unlock()
	lw.judge(w.links)
	operDown := lw.operDown()
	for _, f := range w.from {
		for i, port := range f.ports {
			if operDown[models.Endpoint{Switch: f.sw.Name, Port: port}] {
				continue
			}
			if !lw.sendProbe(ctx, f.sw.Name, port, f.probes[i]) {
				break // the switch is not reachable now: next tick
			}
		}
	}
	lw.mu.Lock()
	if lw.probingSince.IsZero() {
		lw.probingSince = lw.cfg.Now()
	}
	lw.mu.Unlock()
}

// sendProbe sends probe out of sw's port and counts it; false when it
// could not be sent.
func (lw *linkWatch) sendProbe(ctx context.Context, sw models.SwitchID, port uint32, probe []byte) bool {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err := lw.cfg.Packets.SendPacket(pctx, sw, port, probe)
	cancel()
	if err != nil {
		lw.log.Debug("link probe not sent", "switch", sw, "port", port, "err", err)
		return false
	}
	e := models.Endpoint{Switch: sw, Port: port}
	lw.mu.Lock()
	lw.probesSent[e]++
	lw.mu.Unlock()
	return true
}

// livenessOn says whether link liveness runs.
func (lw *linkWatch) livenessOn() bool {
	return lw.cfg.LivenessInterval > 0 && lw.cfg.Packets != nil
}

// LivenessTicks is how many liveness ticks this controller has closed:
// tests wait on it.
func (lw *linkWatch) LivenessTicks() uint64 {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.ticks
}

// ProbesSent is how many link probes (discovery's and liveness's) this
// controller has sent.
func (lw *linkWatch) ProbesSent() (n uint64) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, v := range lw.probesSent {
		n += v
	}
	return n
}
