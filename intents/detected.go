package intents

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
)

// Placing detected elephants. They are not admitted: nothing is reserved
// for them (a tenant's intent may always take the room), they are placed
// on what intents leave, and they are pinned only while they last. A
// flow's measured rate is what hashing let it have, not what it wants (two
// colliding flows measure half a link each), so each is placed at its
// demand as its hosts' NICs would share it out (Hedera's estimate, see
// estimateDemands). Each second, flows no longer detected (or
// now declared by an intent) are unpinned, and the rest are placed
// together on what intents' reservations leave (pathcalc's Place: edge
// colouring for equal demands on a Clos, else global first fit with local
// search), each keeping its path unless moving it lowers the maximum
// utilization; at most maxDetectedMoves flows move or are placed a round.
// Demands follow the NICs, not measured rates, so a placement does not
// chase its own effect back and forth.

const (
	// maxDetectedMoves caps how many detected flows are (re)placed a round.
	maxDetectedMoves = 1024
	// detectedPinShare is the share of a switch's flow-pin room detected
	// flows may use: the rest stays for intents.
	detectedPinShare = 0.5
)

type elephant struct {
	flow   DetectedFlow
	demand float64           // Gb/s, as the NICs would share it out
	path   []models.Endpoint // nil while not placed
	why    string            // why it is not placed
	// intent is the sampled intent whose flow it is ("" if none): it is
	// pinned on that intent's reserved path, not placed with the rest.
	intent string
}

// DetectedFlows returns the detected elephants and where they are pinned.
func (m *Manager) DetectedFlows() []api.DetectedStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]api.DetectedStatus, 0, len(m.p.elephants))
	for _, el := range m.p.elephants {
		d := api.DetectedStatus{Src: el.flow.Key.Src.String(), Dst: el.flow.Key.Dst.String(), SrcPort: el.flow.Key.SrcPort,
			Gbps: el.flow.Gbps, Demand: el.demand, Leaf: el.flow.Leaf, Pinned: el.path != nil, Path: el.path, Reason: el.why,
			RateSource: "samples", Intent: el.intent}
		if el.flow.Measured {
			d.RateSource = "pin-counter"
		}
		if m.p.snap != nil {
			if h, err := m.p.snap.HostByIP(el.flow.Key.Src); err == nil {
				d.Src = h.Name
			}
			if h, err := m.p.snap.HostByIP(el.flow.Key.Dst); err == nil {
				d.Dst = h.Name
			}
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b api.DetectedStatus) int {
		return cmp.Or(cmp.Compare(b.Gbps, a.Gbps), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.SrcPort, b.SrcPort))
	})
	return out
}

// PinnedLoad is the measured rate (Gb/s) of pinned flows — detected
// elephants' (their pin counters; the demand they were placed at until
// the first two reads) and installed intents' (their observed rate
// shared over their flows) — leaving through each port on their paths:
// traffic WCMP weights do not move.
func (m *Manager) PinnedLoad() map[models.Endpoint]float64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.p.pinnedLoad(&m.obs, true)
}

// ReadAfterPins says whether a reading of port e over [from, to] was
// taken after the last change of the pins leaving by e took effect (see
// pinTable.readAfter): adapt and the congestion weights judge a port
// only by such a reading.
func (m *Manager) ReadAfterPins(e models.Endpoint, from, to time.Time) bool {
	fresh, _ := m.p.pins.readAfter(e, func() (time.Time, time.Time) { return from, to })
	return fresh
}

// PinsPendingBetween counts the ports whose last change of pins, made
// after generation after and at or before upTo, their switch has not yet
// confirmed (read back), and returns the pins' generation now.
func (m *Manager) PinsPendingBetween(after, upTo uint64) (ports int, gen uint64) {
	return m.p.pins.pendingBetween(after, upTo)
}

// pinnedLoadLocked is PinnedLoad, of the elephants alone unless
// withIntents (what adaptation sets against links' load); m.mu must be
// held.
func (pl *placement) pinnedLoad(obs *rates, withIntents bool) map[models.Endpoint]float64 {
	obs.mu.Lock()
	elephantRates, intentRates, unmeasured := obs.byFlow, obs.byIntent, obs.unmeasured
	obs.mu.Unlock()
	out := map[models.Endpoint]float64{}
	for key, el := range pl.elephants {
		rate, measured := elephantRates[key]
		// The higher of the latest read's rate and the 2 s one: set
		// against links' load, the 2 s one alone would lag a flow that
		// sped up, and the latest alone is one read's time apart from the
		// last, timed by this process (a switch does not time a direct
		// counter): on a busy machine a read answered late makes it
		// jitter by tens of percent, and load that is the pinned flow's
		// would look like the rest's, which weights move (and intents
		// move off: seen, a 360 Gb/s elephant read at 29 left the intent
		// beside it on a link "at 93%").
		g := max(rate.latest, rate.gbps)
		if !measured {
			g = el.demand // pinned a moment ago: not read yet
		}
		for _, hop := range el.path {
			out[hop] += g
		}
	}
	if !withIntents {
		return out
	}
	// Through the intents measured sending, not every intent: the
	// controller asks each telemetry interval, and at 100,000 intents,
	// most of them idle, adding their zeros held the lock 74 ms a call
	// (BenchmarkHousekeep; 16.5 ms now with one in ten sending).
	for id, rate := range intentRates {
		e := pl.all[id]
		if rate <= 0 || e == nil || !e.pinned || len(e.flows) == 0 {
			continue
		}
		if e.in.Spec.SampledFlows {
			continue // its load is its flows', counted with the elephants above
		}
		perFlow := rate / float64(len(e.flows))
		for _, f := range e.in.Status.Flows {
			for _, hop := range f.Path {
				out[hop] += perFlow
			}
		}
	}
	// An intent not measured yet sends, as far as anyone knows, what it
	// reserved. (Seen: after a restart, a thousand intents moved before
	// their first reads; their traffic looked hashed for seconds, and
	// congestion weights cut the links they had just been moved onto.)
	for id := range unmeasured {
		e := pl.all[id]
		if _, measured := intentRates[id]; measured || e == nil || !e.pinned || e.in.Spec.SampledFlows || len(e.in.Status.Flows) != len(e.flows) {
			continue
		}
		for i, f := range e.in.Status.Flows {
			for _, hop := range f.Path {
				out[hop] += e.flows[i].gbps
			}
		}
	}
	return out
}

// placeDetected brings the detected elephants' pins up to date (under
// the loop, with m.mu held like every decision).
func (m *Manager) placeDetected(b *batch) {
	if m.cfg.Detected == nil {
		return
	}
	want := m.p.wanted(m.cfg.Detected(), m.cfg.Now())
	m.stats.DetectedRounds++
	m.p.detectedAt = m.cfg.Now()
	unpinned := 0
	for key, el := range m.p.elephants {
		if _, still := want[key]; !still {
			if el.path != nil {
				unpinned++
			}
			m.p.dropDetected(b, key)
		}
	}
	if unpinned > 0 {
		m.log.Info("detected elephants unpinned: no longer detected", "flows", unpinned, "detected", len(want))
	}
	if len(want) == 0 {
		return
	}
	d := m.p.elephantDemands(b, want)
	els, demands, claims := d.els, d.demands, d.claims
	// Pins detected flows hold per switch, kept current as they move.
	held := map[models.SwitchID]int{}
	for _, el := range m.p.elephants {
		for _, hop := range el.path {
			held[hop.Switch]++
		}
	}
	moves := m.p.pinClaims(b, claims, held)
	if len(els) == 0 {
		if moves > 0 {
			m.stats.DetectedMoves += moves
			m.log.Info("sampled intents' flows pinned", "pinned_or_moved", moves)
		}
		return
	}
	m.p.book.SetExcess(m.p.intentExcess(&m.obs))
	// Their demands, as the hosts' NICs would share them out.
	for i, g := range estimateDemands(d.pairs) {
		demands[i].Gbps, els[i].demand = g, g
	}
	ctx, cancel := context.WithTimeout(b.ctx, 400*time.Millisecond)
	defer cancel()
	placed, err := m.p.book.PlaceBest(ctx, demands, d.previous)
	if err != nil {
		m.log.Warn("cannot place detected elephants", "err", err)
		return
	}
	paths := placed.Paths
	if placed.Throughput < 1-pathcalc.ReplaceMargin {
		if moved, joint := m.placeJoint(ctx, b, demands, placed.Throughput); moved {
			paths, placed.Throughput = joint, m.p.book.Throughput(demands, joint)
		}
	} else {
		m.jointWaitFrom = 0
	}
	m.stats.DetectedQuality = placed
	moves = m.p.pinPlaced(b, els, paths, held, moves)
	if moves > 0 {
		m.stats.DetectedMoves += moves
		m.log.Info("detected elephants pinned", "placed_or_moved", moves, "detected", len(want),
			"predicted_throughput", fmt.Sprintf("%.3f", placed.Throughput), "one_shot", fmt.Sprintf("%.3f", placed.OneShot), "from_scratch", placed.Fresh)
	}
}

// claim is a detected flow of a sampled intent, and the intent's path
// for its pair of hosts.
type claim struct {
	el   *elephant
	id   string
	path []models.Endpoint
	gbps float64 // the pair's reservation
}

// claimOf finds the live sampled intent, if any, that reserved the pair
// of hosts el flows between (its slot key: source port 0).
func (pl *placement) claimOf(el *elephant) (claim, bool) {
	slot := models.FlowKey{Src: el.flow.Key.Src, Dst: el.flow.Key.Dst, SrcPort: slotPort}
	id, ok := pl.flowOwner[slot]
	if !ok {
		return claim{}, false
	}
	e := pl.all[id]
	if e == nil || !e.pinned || !e.in.Spec.SampledFlows || len(e.in.Status.Flows) != len(e.flows) {
		return claim{}, false
	}
	for i, f := range e.flows {
		if f.key == slot {
			return claim{el: el, id: id, path: e.in.Status.Flows[i].Path, gbps: f.gbps}, true
		}
	}
	return claim{}, false
}

// pinClaims pins sampled intents' flows on their intents' paths (within
// the detected flows' share of the flow-pin tables, held counting their
// pins per switch) and returns how many were pinned or moved. A pair's
// flows share its reservation: each is taken to want an equal part of it
// until its counter is read.
func (pl *placement) pinClaims(b *batch, claims []claim, held map[models.SwitchID]int) int {
	perPair := map[models.FlowKey]int{}
	for _, c := range claims {
		perPair[models.FlowKey{Src: c.el.flow.Key.Src, Dst: c.el.flow.Key.Dst}]++
	}
	moves := 0
	for _, c := range claims {
		c.el.demand = c.gbps / float64(perPair[models.FlowKey{Src: c.el.flow.Key.Src, Dst: c.el.flow.Key.Dst}])
		if c.el.intent == c.id && slices.Equal(c.el.path, c.path) {
			continue
		}
		for _, hop := range c.el.path {
			held[hop.Switch]--
		}
		pl.unpinDetected(b, c.el)
		c.el.intent = c.id
		if sw, full := pl.detectedRoomFull(c.path, held); full {
			c.el.why = fmt.Sprintf("no flow-pin room for detected flows on %s", sw)
			continue
		}
		pl.pinDetected(b, c.el, c.path)
		for _, hop := range c.path {
			held[hop.Switch]++
		}
		moves++
	}
	return moves
}

// Joint re-placement: intents admitted one at a time may have stacked on
// links the detected elephants now need, where placed together with the
// elephants they would have spread out. When the elephants' placement
// predicts less than full throughput, the intents' flows are placed from
// scratch together with the elephants (pathcalc.Book.PlaceJoint, every
// reservation still within capacity less headroom); if that promises
// jointMargin more of the elephants' throughput, the intents move (their
// reservations with them; pins are make-before-break like every change)
// and the elephants take the joint placement's paths. Intents with path
// constraints stay where they are, and so does an intent moved in the
// last jointHoldRounds rounds; past maxJointFlows movable flows the joint
// placement is not tried (its cost grows with the intents, not with the
// elephants).
//
// Nor is it tried while an intent it could move has not been measured
// yet (admitted, or reloaded by a new term, a moment ago), for up to
// maxJointWait rounds: what an intent sends beyond its reservation is
// load the elephants are placed around, and a placement made before it
// is known is made again once it is (seen: on a leaf-spine beside a CPU
// burner, after a restart, 234 reloaded intents moved to make room for
// the elephants three rounds after the loop had settled, when their
// first reads came in). Past the bound (a switch that cannot be read
// leaves its intents unmeasured) the intents count at their reservations.
const (
	jointMargin     = 0.01
	jointHoldRounds = 10
	maxJointFlows   = 4096
	maxJointWait    = 10
)

// placeJoint tries the joint re-placement and, if it pays, moves the
// intents in b and returns the elephants' paths.
func (m *Manager) placeJoint(ctx context.Context, b *batch, demands []pathcalc.Demand, current float64) (bool, [][]models.Endpoint) {
	m.obs.mu.Lock()
	observed := m.obs.byIntent
	m.obs.mu.Unlock()
	var movable []pathcalc.Reserved
	var owners []*entry
	unmeasured := 0
	ids := slices.Sorted(maps.Keys(m.p.all))
	for _, id := range ids {
		e := m.p.all[id]
		st := e.in.Status.State
		if !e.pinned || (st != models.StateInstalled && st != models.StateAdmitted) || len(e.in.Status.Flows) != len(e.flows) {
			continue
		}
		if c := e.in.Spec.Constraints; c.MaxHops > 0 || len(c.AvoidSwitches) > 0 || len(c.AvoidLinks) > 0 || c.DisjointFrom != "" {
			continue
		}
		if m.adaptive.movedLately(id, m.stats.DetectedRounds) {
			continue
		}
		rate, measured := observed[id]
		if !measured {
			unmeasured++
		}
		perFlow := rate / float64(len(e.flows))
		for i, f := range e.flows {
			movable = append(movable, pathcalc.Reserved{Demand: pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}, Path: e.in.Status.Flows[i].Path,
				Excess: max(perFlow-f.gbps, 0)})
		}
		owners = append(owners, e)
		if len(movable) > maxJointFlows {
			return false, nil
		}
	}
	if len(movable) == 0 {
		return false, nil
	}
	if unmeasured == 0 {
		m.jointWaitFrom = 0
	} else if m.holdJoint(b, unmeasured) {
		return false, nil
	}
	joint, ok, err := m.p.book.PlaceJoint(ctx, movable, demands)
	if err != nil || !ok || joint.Throughput < current+jointMargin {
		return false, nil
	}
	now := m.cfg.Now().UTC()
	at := 0
	moved := 0
	for _, e := range owners {
		n := len(e.flows)
		newPaths := joint.Reserved[at : at+n]
		at += n
		same := true
		for i := range newPaths {
			if !slices.Equal(newPaths[i], e.in.Status.Flows[i].Path) {
				same = false
			}
		}
		if same {
			continue
		}
		m.unpin(b, e)
		m.p.pin(b, e, newPaths)
		m.setState(b, e, models.StateAdmitted, fmt.Sprintf("moved so detected elephants fit beside it (their predicted throughput %.3f → %.3f)", current, joint.Throughput), now)
		m.adaptive.markMoved(b, e.in.ID, m.stats.DetectedRounds)
		moved++
	}
	if moved > 0 {
		m.stats.JointMoves += moved
		b.undo = append(b.undo, func() { m.stats.JointMoves -= moved })
		m.log.Info("intents moved to make room for detected elephants", "intents", moved,
			"predicted_throughput_before", fmt.Sprintf("%.3f", current), "after", fmt.Sprintf("%.3f", joint.Throughput))
	}
	return true, joint.Paths
}

// holdJoint says whether the joint placement waits this round for the
// unmeasured intents it could move (see maxJointWait), and counts the
// round in Stats.JointWaits if so.
func (m *Manager) holdJoint(b *batch, unmeasured int) bool {
	round := m.stats.DetectedRounds
	if m.jointWaitFrom == 0 {
		m.jointWaitFrom = round
		m.log.Info("joint placement waits for intents to be measured", "unmeasured", unmeasured, "rounds_at_most", maxJointWait)
	}
	if round-m.jointWaitFrom >= maxJointWait {
		return false
	}
	m.stats.JointWaits++
	b.undo = append(b.undo, func() { m.stats.JointWaits-- })
	return true
}

// intentExcessLocked is what installed intents' flows measurably send
// beyond their reservations (their observed rate shared over their
// flows): load the elephants must be placed around too (and that moves
// with an intent placeJoint moves).
func (pl *placement) intentExcess(obs *rates) []pathcalc.Load {
	obs.mu.Lock()
	observed := obs.byIntent
	obs.mu.Unlock()
	var out []pathcalc.Load
	for id, e := range pl.all {
		rate, ok := observed[id]
		if !ok || !e.pinned || len(e.flows) == 0 || len(e.in.Status.Flows) != len(e.flows) {
			continue
		}
		perFlow := rate / float64(len(e.flows))
		for i, f := range e.flows {
			if over := perFlow - f.gbps; over > 0 {
				out = append(out, pathcalc.Load{Src: f.src, Path: e.in.Status.Flows[i].Path, Gbps: over})
			}
		}
	}
	return out
}

// hostPair is a flow between two hosts with their NICs' rates.
type hostPair struct {
	src, dst         string
	srcGbps, dstGbps float64
}

// estimateDemands is what each flow would get if only the hosts' NICs
// limited it (Hedera's demand estimation): senders share their NIC
// equally among the flows not yet limited elsewhere; a receiver offered
// more than its NIC gives each flow the max-min fair share of it and
// fixes the ones it limits; repeated until nothing changes. A flow
// squeezed by a collision measures less than this, which is why the
// measured rate is not the demand.
func estimateDemands(flows []hostPair) []float64 {
	demand := make([]float64, len(flows))
	fixed := make([]bool, len(flows)) // limited by its receiver
	bySrc, byDst := map[string][]int{}, map[string][]int{}
	for i, f := range flows {
		bySrc[f.src] = append(bySrc[f.src], i)
		byDst[f.dst] = append(byDst[f.dst], i)
	}
	for round := 0; round < 2*len(flows)+2; round++ {
		changed := false
		for _, fs := range bySrc {
			used, free := 0.0, 0
			for _, i := range fs {
				if fixed[i] {
					used += demand[i]
				} else {
					free++
				}
			}
			if free == 0 {
				continue
			}
			share := max(flows[fs[0]].srcGbps-used, 0) / float64(free)
			for _, i := range fs {
				if !fixed[i] && demand[i] != share {
					demand[i], changed = share, true
				}
			}
		}
		for _, fs := range byDst {
			capacity, total := flows[fs[0]].dstGbps, 0.0
			for _, i := range fs {
				total += demand[i]
			}
			if total <= capacity+1e-9 {
				continue
			}
			// Max-min fair share of the receiver (water-filling): flows
			// asking less than an equal share keep their demand, the rest
			// split what is left equally and are limited here.
			order := slices.Clone(fs)
			slices.SortFunc(order, func(x, y int) int { return cmp.Compare(demand[x], demand[y]) })
			rest := capacity
			for k, i := range order {
				share := rest / float64(len(order)-k)
				if demand[i] < share {
					rest -= demand[i]
					continue
				}
				for _, j := range order[k:] {
					if !fixed[j] || demand[j] != share {
						demand[j], fixed[j], changed = share, true, true
					}
				}
				break
			}
		}
		if !changed {
			break
		}
	}
	return demand
}

func compareKeys(a, b models.FlowKey) int {
	return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.SrcPort, b.SrcPort))
}

func (pl *placement) hostOf(ip netip.Addr) models.Host {
	if pl.snap == nil {
		return models.Host{}
	}
	h, _ := pl.snap.HostByIP(ip)
	return h
}

// detectedRoomFull says whether a switch on path holds its share of
// flow-pin room in detected flows' pins already (held counts them).
func (pl *placement) detectedRoomFull(path []models.Endpoint, held map[models.SwitchID]int) (models.SwitchID, bool) {
	if pl.cfg.FlowPinEntries <= 0 {
		return "", false
	}
	limit := int(float64(pl.cfg.FlowPinEntries) * detectedPinShare)
	for _, hop := range path {
		if held[hop.Switch] >= limit {
			return hop.Switch, true
		}
	}
	return "", false
}

func (pl *placement) pinDetected(b *batch, el *elephant, path []models.Endpoint) {
	pl.pins.lock()
	defer pl.pins.unlock()
	el.path, el.why = path, ""
	for _, hop := range path {
		pl.pins.set(hop.Switch, el.flow.Key, hop.Port)
		b.touched[hop.Switch] = true
	}
}

func (pl *placement) unpinDetected(b *batch, el *elephant) {
	if el.path == nil {
		return
	}
	pl.pins.lock()
	defer pl.pins.unlock()
	for _, hop := range el.path {
		if pl.pins.drop(hop.Switch, el.flow.Key, hop.Port) {
			b.touched[hop.Switch] = true
		}
	}
	el.path = nil
}

// keepDetected is how recently the elephants must have been placed for a
// load to keep them (see keepDetectedLocked).
const keepDetected = 5 * time.Second

// keepDetectedLocked keeps, across a load, the pinned elephants placed
// in the last keepDetected: a new term of this replica (its lease lost to
// a busy machine and won again) or a reload after an uncertain commit
// would otherwise leave them out of the pins, so the switches' pins would
// be deleted and the flows hashed onto colliding paths until they were
// found again. Their pins come back once the intents are placed
// (restoreDetectedLocked), and they stay pinned for keepDetected while
// the detector finds them again. Anything older is forgotten: a replica that
// led long ago knows nothing of today's flows.
func (pl *placement) keepDetectedLocked() {
	if pl.cfg.Now().Sub(pl.detectedAt) > keepDetected {
		pl.elephants = map[models.FlowKey]*elephant{}
		return
	}
	for key, el := range pl.elephants {
		if el.path == nil {
			delete(pl.elephants, key)
		}
	}
	pl.restoreDetected = len(pl.elephants) > 0
}

// restoreDetectedLocked puts the kept elephants' pins back after the
// intents were placed: an elephant an intent now declares is dropped
// (its pins are the intent's); the next placement round moves or drops
// the rest as it would have.
func (pl *placement) restoreDetectedLocked(b *batch) {
	if !pl.restoreDetected {
		return
	}
	pl.restoreDetected = false
	pl.restoredUntil = pl.cfg.Now().Add(keepDetected)
	for key, el := range pl.elephants {
		if _, declared := pl.flowOwner[key]; declared {
			delete(pl.elephants, key)
			continue
		}
		path := el.path
		el.path = nil
		pl.pinDetected(b, el, path)
	}
}

// dropDetected forgets a detected flow and its pins (it ended, or an
// intent declares it now).
func (pl *placement) dropDetected(b *batch, key models.FlowKey) {
	if el := pl.elephants[key]; el != nil {
		pl.unpinDetected(b, el)
		delete(pl.elephants, key)
	}
}

// wanted are the detected flows to place: those no intent declares, at
// the threshold or pinned already (and not yet under half of it), and,
// while kept elephants wait to be found again, those kept.
func (pl *placement) wanted(detected []DetectedFlow, now time.Time) map[models.FlowKey]DetectedFlow {
	want := map[models.FlowKey]DetectedFlow{}
	for _, d := range detected {
		if _, declared := pl.flowOwner[d.Key]; declared {
			continue
		}
		// At the threshold, or pinned already and not yet under half of it.
		if el := pl.elephants[d.Key]; d.Above || (el != nil && el.path != nil) {
			want[d.Key] = d
		}
	}
	if now.Before(pl.restoredUntil) {
		// Kept across a load (keepDetectedLocked): between the terms no
		// pin counter was read and the switches' samples may have
		// stopped, so the detector may not list them yet. They stay
		// where they are until it has had keepDetected to see them again.
		for key, el := range pl.elephants {
			if _, listed := want[key]; !listed && el.path != nil {
				want[key] = el.flow
			}
		}
	}
	return want
}

// detectedDemands are the detected flows to place together (els, with
// their demands, host pairs and previous paths) and those a sampled
// intent claims (claims).
type detectedDemands struct {
	els      []*elephant
	demands  []pathcalc.Demand
	pairs    []hostPair
	previous [][]models.Endpoint
	claims   []claim
}

// elephantDemands sorts the wanted flows, in a stable order so the
// placement is the same for the same flows, into those to place and
// those a sampled intent claims; a flow that cannot be placed (not
// between hosts, no working path) is unpinned with its reason.
func (pl *placement) elephantDemands(b *batch, want map[models.FlowKey]DetectedFlow) detectedDemands {
	var d detectedDemands
	for _, key := range slices.SortedFunc(maps.Keys(want), compareKeys) {
		el := pl.elephants[key]
		if el == nil {
			el = &elephant{}
			pl.elephants[key] = el
		}
		el.flow = want[key]
		if c, ok := pl.claimOf(el); ok {
			d.claims = append(d.claims, c)
			continue
		}
		if el.intent != "" {
			pl.unpinDetected(b, el) // its intent is gone or moved off: placed afresh
			el.intent = ""
		}
		src, dst := pl.hostOf(key.Src), pl.hostOf(key.Dst)
		if src.Name == "" || dst.Name == "" {
			pl.unpinDetected(b, el)
			el.why = "source or destination is not a host of the fabric"
			continue
		}
		if !pl.book.Connected(src, dst) {
			pl.unpinDetected(b, el)
			el.why = "no working path between its hosts"
			continue // one such flow would fail the placement of all
		}
		prev := el.path
		if prev != nil && !pl.book.Usable(src, prev) {
			prev = nil // its path lost a link
		}
		d.els = append(d.els, el)
		d.demands = append(d.demands, pathcalc.Demand{Src: src, Dst: dst})
		d.pairs = append(d.pairs, hostPair{src: src.Name, dst: dst.Name, srcGbps: src.NICGbps, dstGbps: dst.NICGbps})
		d.previous = append(d.previous, prev)
	}
	return d
}

// pinPlaced pins each placed flow on its path, up to maxDetectedMoves
// moves in all (moves were made already), within the detected flows'
// share of each switch's flow-pin room (held, kept current); it returns
// the moves.
func (pl *placement) pinPlaced(b *batch, els []*elephant, paths [][]models.Endpoint, held map[models.SwitchID]int, moves int) int {
	for i, el := range els {
		path := paths[i]
		if slices.Equal(el.path, path) {
			continue
		}
		if moves == maxDetectedMoves {
			break // the rest next round
		}
		for _, hop := range el.path {
			held[hop.Switch]--
		}
		if sw, full := pl.detectedRoomFull(path, held); full {
			pl.unpinDetected(b, el)
			el.why = fmt.Sprintf("no flow-pin room for detected flows on %s", sw)
			continue
		}
		pl.unpinDetected(b, el)
		pl.pinDetected(b, el, path)
		for _, hop := range path {
			held[hop.Switch]++
		}
		moves++
	}
	return moves
}
