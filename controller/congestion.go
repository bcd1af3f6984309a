package controller

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/telemetry"
)

// Congestion-aware weights. Every CongestionInterval the leader looks at
// each fabric link direction's measured utilization and biases the WCMP
// weight of the port that sends into it, but only toward somewhere
// better: a direction is cut (its bias times congestionStep, not below
// congestionFloor) when it is at or above congestionHigh *and* at least
// congestionMargin above the mean of its alternatives — the other
// directions out of the same switch toward the same tier, and the other
// directions into the same peer from the same tier, which is where the
// shifted share can go. On a fabric saturated everywhere every direction
// is as hot as its alternatives, so nothing moves and no switch is
// re-programmed for as long as demand stays the same. A direction must
// be found so for congestionPersist intervals in a row before it is cut.
//
// Pinned flows (intents', detected elephants') do not follow weights: a
// direction whose hashed traffic — its load less what pinned flows
// measure there — is under congestionMargin of its capacity is not cut,
// since a cut would re-program switches and move nothing. (Pinned flows
// are the placement's business: it moves them when that pays.)
//
// Pinned flows' load moves the moment the placement decides, the
// measured load only once the switches hold the new pins and a reading
// has passed: a direction whose pinned load changed by half
// congestionMargin or more since the last interval starts counting its
// hot intervals afresh. (Seen: a thousand intents moved at once, the
// links they left read hot for a reading more with their load no
// longer counted as pinned there, and were cut.)
//
// Where the switch reports the direction's egress queue, delay judges
// too: a direction at congestionHigh or more whose queue delays packets
// less than congestionQueued (no standing queue: the link is full, but
// nothing waits) is not hot, and one whose queue delays them
// congestionQueueHot or more is hot from congestionDelayFloor of
// utilization up (a standing queue at 70% is congestion). The queue is
// a gauge, not a smoothed rate: a direction that fills is seen at its
// first reading, where its utilization's moving average takes two or
// three to reach congestionHigh.
//
// A biased direction gets weight back (congestionRecover, one step at a
// time) only after congestionCalm intervals in which it would stay under
// congestionHigh − congestionMargin even carrying the share the step
// returns (its load scaled by the step), and has no standing queue: a
// recovery never recreates the condition that cut it, so the two cannot
// take turns under steady demand. A change is a planned one: it rolls out in stages like a drain
// (weights alone keep every next hop, so it moves at the first stage).
//
// Weights move hashed traffic, and traffic is hashed where pins are not
// written yet: while changes of pins are on their way to the switches,
// the loop waits (telemetry.PinWait: for the changes under way when it
// began to, for as long as switches keep confirming them). On a starved
// machine a thousand elephants pinned at once took tens of seconds to
// reach every switch; meanwhile their flows, still hashed, read as hot
// links, and the cuts' rollouts, queued ahead of other writes, held the
// pins back longer: the k=16 fat-tree's cold start stayed at 0.6 of its
// throughput for a minute, cutting and restoring weights all along. A
// bound on intervals alone is not enough: after a restart pins are
// pending nearly throughout, and when a thousand intents moved at once
// beside a CPU burner, the links their flows hashed onto meanwhile were
// cut (seen: a cascade of hundreds of cuts followed).
const (
	congestionHigh    = 0.9
	congestionMargin  = 0.1
	congestionStep    = 0.7
	congestionRecover = 1 / 0.85
	congestionFloor   = 0.25
	congestionCalm    = 3
	congestionPersist = 2

	congestionQueued     = 2 * time.Microsecond
	congestionQueueHot   = 5 * time.Microsecond
	congestionDelayFloor = 0.5
)

// congestionState is each congested port's WCMP weight bias, under its
// own lock (taken inside the controller's), and the count of weight
// changes (WeightChanges).
type congestionState struct {
	changes atomic.Int64
	rounds  atomic.Int64 // adjustWeights's, as the leader
	// pins is the wait for changes of pins to land.
	pins telemetry.PinWait
	mu   sync.Mutex
	bias map[models.Endpoint]*portBias
	// pinned is the pinned load of the last interval (adjustWeights'
	// own).
	pinned map[models.Endpoint]float64
}

// portBias is one port's weight bias, how many intervals in a row it has
// been calm, and how many it has been hot.
type portBias struct {
	bias float64
	// recovering: the last interval found it calm enough to get weight
	// back (a step is coming).
	recovering bool
	calm       int
	hot        int
}

// tierKey groups link directions by one end (the switch they leave, or
// with into the one they enter) and the other end's role.
type tierKey struct {
	sw   models.SwitchID
	into bool
	role models.Role
}

// tierSum accumulates utilizations of a group of link directions.
type tierSum struct {
	sum float64
	n   int
}

// alternativesMean is the mean utilization of the other directions in
// the two groups of d (out of d's switch toward d's peer's tier, into
// d's peer from d's switch's tier); ok is false when there are none.
func alternativesMean(u float64, out, in tierSum) (float64, bool) {
	n := out.n + in.n - 2 // d itself is counted in both
	if n <= 0 {
		return 0, false
	}
	return (out.sum + in.sum - 2*u) / float64(n), true
}

// congested says whether a link direction at utilization u is hot, by
// its utilization and, where its queue is reported (queued), its queue's
// delay.
func congested(u float64, queue time.Duration, queued bool) bool {
	switch {
	case !queued:
		return u >= congestionHigh
	case queue >= congestionQueueHot:
		return u >= congestionDelayFloor
	default:
		return u >= congestionHigh && queue >= congestionQueued
	}
}

// adjustWeights updates the biases from telemetry and replans if any moved.
func (c *Controller) adjustWeights() {
	st := c.current()
	if st == nil || !c.Leading() {
		return
	}
	defer c.congestion.rounds.Add(1)
	if c.cfg.PinsPending != nil && c.congestion.pins.Wait(c.cfg.PinsPending) {
		return
	}
	type direction struct {
		e, peer models.Endpoint
		out, in tierKey
		u       float64
		hashed  float64 // the share of capacity weights can move
		// repinned: its pinned load changed since the last interval.
		repinned bool
		// queue is its egress queue's delay, if queued (the switch
		// reports it).
		queue  time.Duration
		queued bool
	}
	role := func(id models.SwitchID) models.Role {
		sw, _ := st.snap.Switch(id)
		return sw.Role
	}
	var pinned map[models.Endpoint]float64
	if c.cfg.PinnedLoad != nil {
		pinned = c.cfg.PinnedLoad()
	}
	before := c.congestion.pinned
	c.congestion.pinned = pinned
	// Every fabric link's two directions, every interval (at k=48
	// 221,184 of them): the list is sized once.
	dirs := make([]direction, 0, 2*st.snap.NumFabricLinks())
	groups := make(map[tierKey]*tierSum, 4*st.snap.NumSwitches())
	add := func(k tierKey, u float64) {
		g := groups[k]
		if g == nil {
			g = &tierSum{}
			groups[k] = g
		}
		g.sum += u
		g.n++
	}
	for l := range st.snap.AllFabricLinks() {
		if l.Gbps <= 0 || len(st.down) > 0 && st.down[l.ID()] {
			continue
		}
		for _, ends := range [][2]models.Endpoint{{l.A, l.B}, {l.B, l.A}} {
			e, peer := ends[0], ends[1]
			pl, ok := c.tele.Port(e)
			if !ok || pl.Stale {
				continue
			}
			d := direction{e: e, peer: peer, u: pl.OutBps / (l.Gbps * 1e9), hashed: (pl.OutBps/1e9 - pinned[e]) / l.Gbps,
				repinned: math.Abs(pinned[e]-before[e]) >= congestionMargin/2*l.Gbps || c.cfg.ReadAfterPins != nil && !c.cfg.ReadAfterPins(e, pl.RecentSince, pl.RecentUntil),
				queue:    time.Duration(pl.QueueBytes * 8 / l.Gbps),
				queued:   pl.QueueMeasured,
				out:      tierKey{sw: e.Switch, role: role(peer.Switch)},
				in:       tierKey{sw: peer.Switch, into: true, role: role(e.Switch)}}
			add(d.out, d.u)
			add(d.in, d.u)
			dirs = append(dirs, d)
		}
	}
	c.congestion.mu.Lock()
	if c.congestion.bias == nil {
		c.congestion.bias = map[models.Endpoint]*portBias{}
	}
	changed := false
	for _, d := range dirs {
		p := c.congestion.bias[d.e]
		if p == nil {
			p = &portBias{bias: 1}
		}
		mean, hasAlt := alternativesMean(d.u, *groups[d.out], *groups[d.in])
		p.recovering = false
		switch {
		case d.repinned:
			p.calm, p.hot = 0, 0 // its reading may predate the move
		case congested(d.u, d.queue, d.queued) && hasAlt && d.u-mean >= congestionMargin && d.hashed >= congestionMargin && p.bias > congestionFloor:
			// Hot for two intervals in a row: a placement that just moved
			// pinned flows leaves smoothed rates behind for a moment.
			if p.calm, p.hot = 0, p.hot+1; p.hot >= congestionPersist {
				p.bias, p.hot, changed = max(congestionFloor, p.bias*congestionStep), 0, true
				c.log.Debug("congested link direction: its WCMP weight cut", "port", d.e, "utilization", d.u, "alternatives", mean, "hashed", d.hashed, "bias", p.bias, "queue", d.queue, "queued", d.queued)
			}
		case p.bias < 1 && d.u*min(1, p.bias*congestionRecover)/p.bias < congestionHigh-congestionMargin && (!d.queued || d.queue < congestionQueued):
			p.hot = 0
			if p.calm++; p.calm >= congestionCalm {
				p.bias, p.calm, changed = min(1, p.bias*congestionRecover), 0, true
			}
			p.recovering = p.bias < 1
		default:
			p.calm, p.hot = 0, 0
		}
		if p.bias >= 1 && p.hot == 0 {
			delete(c.congestion.bias, d.e)
		} else {
			c.congestion.bias[d.e] = p
		}
	}
	c.congestion.mu.Unlock()
	if changed {
		c.congestion.changes.Add(1)
		c.refreshDown("congestion weights changed", time.Time{}, "ports_biased", len(c.Biases()))
	}
}

// WeightChanges is how many times measured load moved the congestion
// weights so far (each a staged rollout).
func (c *Controller) WeightChanges() int64 { return c.congestion.changes.Load() }

// CongestionRounds is how many times the leader judged the links' load
// (every CongestionInterval).
func (c *Controller) CongestionRounds() int64 { return c.congestion.rounds.Load() }

// weightsMoving says whether a weight change is under way: a direction
// getting its weight back step by step. (One hot interval is not: on a
// busy machine measurements flicker, and a cut needs congestionPersist.)
func (cs *congestionState) moving() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, p := range cs.bias {
		if p.recovering {
			return true
		}
	}
	return false
}

// Biases returns the current WCMP weight bias of every biased port.
func (c *Controller) Biases() map[models.Endpoint]float64 { return c.congestion.biases() }

func (cs *congestionState) biases() map[models.Endpoint]float64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make(map[models.Endpoint]float64, len(cs.bias))
	for e, p := range cs.bias {
		if p.bias < 1 {
			out[e] = p.bias
		}
	}
	return out
}
