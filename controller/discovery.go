package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

// Link discovery: links are declared in the topology, and checked. Every
// DiscoveryInterval the leader sends an LLDP frame out of every declared
// fabric port as a packet-out (the pipeline sends it straight out of that
// port); the switch at the far end punts it (its punt table matches
// LLDP's EtherType) and its packet-in names the port it came in on. So
// each probe says "a frame sent from A:p arrived at B:q". A declared link
// is confirmed when both its ends have heard each other lately; miswired
// when either end hears a port other than the one declared (two cables
// swapped): a miswired link carries no routes; lost when it was
// confirmed and an end has heard nothing lately while its switch heard
// its other ports (a target that reports no oper-status, BMv2's
// simple_switch_grpc, fails a link this way: the controller's own
// detection; see probesMissed), and routed around as well; missing when
// neither end has heard anything since probing began (reported only: a
// target that cannot punt would otherwise lose every route). Frames
// arriving where no link is declared are undeclared links.

// probeChassisPrefix marks accelnet's probes (other LLDP speakers' frames
// are ignored).
const probeChassisPrefix = "accelnet:"

// probeFrame builds the LLDP frame sent out of sw's port: chassis ID
// "accelnet:<switch>" and port ID "<port>" (both locally assigned), TTL.
func probeFrame(sw models.Switch, port uint32) []byte {
	mac := sw.PortMAC(port)
	f := []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e} // nearest-bridge LLDP group address
	f = append(f, mac[:]...)
	f = binary.BigEndian.AppendUint16(f, models.EtherTypeLLDP)
	tlv := func(typ byte, value []byte) {
		f = binary.BigEndian.AppendUint16(f, uint16(typ)<<9|uint16(len(value)))
		f = append(f, value...)
	}
	tlv(1, append([]byte{7}, probeChassisPrefix+string(sw.Name)...)) // chassis ID, locally assigned
	tlv(2, append([]byte{7}, strconv.FormatUint(uint64(port), 10)...))
	tlv(3, []byte{0, 120}) // TTL
	tlv(0, nil)            // end
	return f
}

// errNotProbe means a frame is not one of accelnet's probes.
var errNotProbe = errors.New("not an accelnet link probe")

// parseProbe reads where a probe frame was sent from.
func parseProbe(frame []byte) (models.Endpoint, error) {
	if len(frame) < 14 || binary.BigEndian.Uint16(frame[12:14]) != models.EtherTypeLLDP {
		return models.Endpoint{}, errNotProbe
	}
	var from models.Endpoint
	var haveChassis, havePort bool
	for b := frame[14:]; len(b) >= 2; {
		h := binary.BigEndian.Uint16(b)
		typ, n := byte(h>>9), int(h&0x1ff)
		if len(b) < 2+n {
			return models.Endpoint{}, fmt.Errorf("%w: truncated TLV", errNotProbe)
		}
		v := b[2 : 2+n]
		b = b[2+n:]
		switch {
		case typ == 0:
			b = nil
		case typ == 1 && n > 1 && v[0] == 7 && strings.HasPrefix(string(v[1:]), probeChassisPrefix):
			from.Switch, haveChassis = models.SwitchID(strings.TrimPrefix(string(v[1:]), probeChassisPrefix)), true
		case typ == 2 && n > 1 && v[0] == 7:
			p, err := strconv.ParseUint(string(v[1:]), 10, 32)
			if err != nil {
				return models.Endpoint{}, fmt.Errorf("%w: port ID %q", errNotProbe, v[1:])
			}
			from.Port, havePort = uint32(p), true
		}
	}
	if !haveChassis || !havePort {
		return models.Endpoint{}, errNotProbe
	}
	return from, nil
}

// NeighborReader reads what a switch's own LLDP agent hears on each
// port (OpenConfig's lldp state over gNMI), as the endpoints at the far
// ends; ErrNoNeighbors when the switch serves none.
type NeighborReader interface {
	Neighbors(ctx context.Context, sw models.SwitchID) (map[uint32]models.Endpoint, error)
}

// ErrNoNeighbors means a switch serves no LLDP neighbour state.
var ErrNoNeighbors = errors.New("the switch serves no LLDP neighbours")

// PacketSender sends packet-outs: how discovery's probes leave a port.
type PacketSender interface {
	SendPacket(ctx context.Context, sw models.SwitchID, port uint32, payload []byte) error
}

// linkWatch is link discovery and liveness: it probes the fabric's
// links, reads the switches' LLDP state, judges each declared link, and
// has the routes recomputed (reroute) when the links out of routes
// change. It reads the configuration, the current fabric, whether this
// replica leads, and the ports gNMI reports down; it holds failure
// handling's urgency. Its state is under mu: what arrived at each port,
// since when probes go out, and each link's state.
type linkWatch struct {
	cfg      *Config
	log      *slog.Logger
	m        *metrics
	fabric   func() *fabricState
	leading  func() bool
	operDown func() map[models.Endpoint]bool
	reroute  func(why string, reported time.Time, args ...any)
	urgency  *urgency

	mu         sync.Mutex
	sightings  map[models.Endpoint]sighting
	probesSent map[models.Endpoint]uint64 // probes sent out of each port, ever
	// heard counts, per switch, the probe rounds in which it delivered a
	// probe (see judge); heardNow marks those that did this round.
	heard    map[models.SwitchID]uint64
	heardNow map[models.SwitchID]bool
	// tickHeard and tickHeardNow are the same for liveness ticks (see
	// liveness.go); ticks counts the ticks, liveWatch is what liveness
	// watches in the current topology.
	tickHeard    map[models.SwitchID]uint64
	tickHeardNow map[models.SwitchID]bool
	ticks        uint64
	liveWatch    atomic.Pointer[watched]
	probingSince time.Time
	linkStates   map[models.LinkID]api.LinkDiscovery
	undeclared   []string
	// offRoutes is the links discovery takes out of routes (miswired or
	// lost) as it last judged them: a map never changed once stored,
	// read without mu (see downLinksLocked).
	offRoutes   atomic.Pointer[map[models.LinkID]bool]
	confirmed   map[models.LinkID]bool // links discovery has confirmed once
	lldp        map[models.Endpoint]sighting
	noNeighbors map[models.SwitchID]bool // switches that serve no LLDP state
}

func newLinkWatch(cfg *Config, log *slog.Logger, m *metrics, fabric func() *fabricState, leading func() bool,
	operDown func() map[models.Endpoint]bool, reroute func(string, time.Time, ...any), u *urgency) *linkWatch {
	return &linkWatch{cfg: cfg, log: log, m: m, fabric: fabric, leading: leading, operDown: operDown, reroute: reroute, urgency: u,
		sightings: map[models.Endpoint]sighting{}, probesSent: map[models.Endpoint]uint64{},
		heard: map[models.SwitchID]uint64{}, heardNow: map[models.SwitchID]bool{},
		tickHeard: map[models.SwitchID]uint64{}, tickHeardNow: map[models.SwitchID]bool{},
		confirmed: map[models.LinkID]bool{}, lldp: map[models.Endpoint]sighting{}, noNeighbors: map[models.SwitchID]bool{}}
}

// sighting is what arrived at a port: from where, and when; sent is how
// many probes had been sent out of from by then, heard and ticked how
// many discovery rounds and liveness ticks the switch had delivered
// probes in (probes only).
type sighting struct {
	from   models.Endpoint
	at     time.Time
	sent   uint64
	heard  uint64
	ticked uint64
}

// probesMissed is how many probe rounds make a confirmed link lost: the
// probe of the round just sent may still be on its way, so it takes
// three whole rounds unheard. They are counted where the probes arrive:
// a link end is lost once its switch delivered probes at its other ports
// in probesMissed rounds since it last delivered one from this port (and
// the time window passed). Silence alone is no evidence: a controller
// starved of CPU probes late and reads its packet-ins late, a busy switch
// or stream drops them (as a switch's CPU path does past its rate), and
// a stalled stream delivers nothing at all for a while — each silences
// every port of a switch at once, where a failed link silences one.
const probesMissed = 4

// PacketIn takes a packet a switch sent its controller (wired to the
// P4Runtime driver's packet-ins): a link probe is recorded where it
// arrived; a host's ARP is answered and learned from (hosts.go); a
// latency probe is the pingmesh's (pingmesh.go).
func (c *Controller) PacketIn(sw models.SwitchID, port uint32, payload []byte) {
	if len(payload) >= 14 && binary.BigEndian.Uint16(payload[12:14]) == models.EtherTypeARP {
		c.hosts.arpIn(sw, port, payload)
		return
	}
	if isProbe(payload) {
		c.mesh.received(sw, port, payload)
		return
	}
	from, err := parseProbe(payload)
	if err != nil {
		return
	}
	c.disc.sighted(models.Endpoint{Switch: sw, Port: port}, from)
}

// sighted records a probe from arriving at at.
func (lw *linkWatch) sighted(at, from models.Endpoint) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.sightings[at] = sighting{from: from, at: lw.cfg.Now(), sent: lw.probesSent[from], heard: lw.heard[at.Switch], ticked: lw.tickHeard[at.Switch]}
	lw.heardNow[at.Switch] = true
	lw.tickHeardNow[at.Switch] = true
}

// discover runs a round of probes every DiscoveryInterval until ctx
// ends, on its own: a round at k=48 (138,240 probes and 2,880 LLDP
// reads) outlasts the interval, and it would hold up the housekeeping
// beside it (flap dampening, a rollout's timed-out stage). Each round is
// spread over most of the interval (roundSpread): sent at once, a k=48
// round kept both cores busy for about three seconds, answering the
// probes in the emulator and reading their packet-ins here, and a
// failure that came meanwhile waited for them. Spread, a failure finds
// a few switches' probes in flight, and the rest of the round waits for
// it (see urgency).
func (lw *linkWatch) discover(ctx context.Context) {
	t := time.NewTicker(lw.cfg.DiscoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			lw.probe(ctx, roundSpread*lw.cfg.DiscoveryInterval/10)
		}
	}
}

// roundSpread is the tenths of the discovery interval a round's probes
// are spread over: the rest is slack, so that a round ends before the
// next is due.
const roundSpread = 8

// paceEvery is the least time between two batches of a spread round's
// probes: at k=48 a round is 2,880 switches, and a timer per switch
// would wake every 1.4 ms.
const paceEvery = 10 * time.Millisecond

// probe sends one round of probes out of every declared fabric port that
// is up, as the leader, spread over spread (0: at once), and reads the
// switches' own LLDP state beside them. It waits, switch by switch,
// while a failure is being handled (see urgency): no probe is sent
// meanwhile, so none is missed, and no link is judged lost for it.
func (lw *linkWatch) probe(ctx context.Context, spread time.Duration) {
	st := lw.fabric()
	if st == nil || lw.cfg.Packets == nil || !lw.leading() {
		return
	}
	operDown := lw.operDown()
	var live *watched
	if lw.livenessOn() {
		live = lw.watchedNow() // its ports are probed every liveness tick
	}
	switches := st.snap.Switches()
	// batch switches are probed every step.
	batch, step := len(switches), time.Duration(0)
	if spread > 0 && len(switches) > 0 {
		batch = max(1, int(int64(len(switches))*int64(paceEvery)/int64(spread)))
		step = spread * time.Duration(batch) / time.Duration(len(switches))
	}
	for i, sw := range switches {
		if i > 0 && i%batch == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(step):
			}
		}
		if lw.urgency.await(ctx) != nil {
			return
		}
		for _, a := range st.snap.Neighbors(sw.Name) {
			e := models.Endpoint{Switch: sw.Name, Port: a.LocalPort}
			if operDown[e] || (live != nil && live.out[e]) {
				continue
			}
			if !lw.sendProbe(ctx, sw.Name, a.LocalPort, probeFrame(sw, a.LocalPort)) {
				break // the switch is not reachable now: next round
			}
		}
		lw.readNeighbors(ctx, sw)
	}
	lw.mu.Lock()
	if lw.probingSince.IsZero() {
		lw.probingSince = lw.cfg.Now()
	}
	lw.mu.Unlock()
	lw.judgeLinks()
}

// readNeighbors reads, where sw serves it, the LLDP state its own agent
// keeps: a second witness of the cabling (a miswiring shows there too),
// and the only one on a target that cannot punt probes. A switch that
// answers ErrNoNeighbors is not asked again.
func (lw *linkWatch) readNeighbors(ctx context.Context, sw models.Switch) {
	if lw.cfg.Neighbors == nil || sw.GNMIAddr == "" {
		return
	}
	lw.mu.Lock()
	skip := lw.noNeighbors[sw.Name]
	lw.mu.Unlock()
	if skip {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	got, err := lw.cfg.Neighbors.Neighbors(rctx, sw.Name)
	cancel()
	if errors.Is(err, ErrNoNeighbors) {
		lw.mu.Lock()
		lw.noNeighbors[sw.Name] = true
		lw.mu.Unlock()
		return
	}
	if err != nil {
		lw.log.Debug("LLDP neighbours not read", "switch", sw.Name, "err", err)
		return
	}
	now := lw.cfg.Now()
	lw.mu.Lock()
	for port, from := range got {
		lw.lldp[models.Endpoint{Switch: sw.Name, Port: port}] = sighting{from: from, at: now}
	}
	lw.mu.Unlock()
}

// judgeLinks updates every declared link's discovery state from the
// sightings, closing a discovery round (see judge).
func (lw *linkWatch) judgeLinks() { lw.judge(nil) }

// judge updates declared links' discovery states from the sightings: all
// of them, closing a discovery round, when only is nil; else only those
// (liveness ticks). Then the metrics, and — when the set of links out of
// routes changed — the routes (a miswired or lost link carries none).
func (lw *linkWatch) judge(only []models.Link) {
	st := lw.fabric()
	if st == nil {
		return
	}
	ev := evidence{now: lw.cfg.Now(), window: max(3*lw.cfg.DiscoveryInterval, 3*time.Second)}
	if lw.livenessOn() {
		ev.watched = lw.watchedNow()
	}
	ev.operDown = lw.operDown()
	whole, links := only == nil, only
	if whole {
		links = st.snap.FabricLinks()
	}
	lw.mu.Lock()
	states := make(map[models.LinkID]api.LinkDiscovery, len(lw.linkStates))
	if whole {
		for sw := range lw.heardNow {
			lw.heard[sw]++
		}
		clear(lw.heardNow)
	} else {
		maps.Copy(states, lw.linkStates)
	}
	for _, l := range links {
		states[l.ID()] = lw.judgeLink(l, ev)
	}
	undeclared := lw.undeclared
	if whole {
		declared := make(map[models.Endpoint]bool, 2*len(links))
		for _, l := range links {
			declared[l.A], declared[l.B] = true, true
		}
		undeclared = nil
		for at, s := range lw.sightings {
			if !declared[at] && ev.now.Sub(s.at) <= ev.window {
				undeclared = append(undeclared, fmt.Sprintf("%s <-> %s", s.from, at))
			}
		}
		slices.Sort(undeclared)
	}
	lw.linkStates, lw.undeclared = states, undeclared
	lw.mu.Unlock()
	lw.judged(states, len(undeclared))
}

// evidence is what a judgement of links goes by besides the sightings:
// its time, how long a probe counts (window: three rounds and at least
// 3 s, a busy controller may be late to read its packet-ins), the ends
// liveness watches, and the ports gNMI reports down.
type evidence struct {
	now      time.Time
	window   time.Duration
	watched  *watched
	operDown map[models.Endpoint]bool
}

// fresh says an end heard its far end lately, and what it heard: within
// the window, or fewer than probesMissed probes ago. A watched end (see
// liveness.go) counts liveness ticks instead: it is fresh until its
// switch has delivered probes at its other ports in livenessMissed ticks
// since. Called with disc.mu held.
func (lw *linkWatch) fresh(e models.Endpoint, ev evidence) (sighting, bool) {
	s, ok := lw.sightings[e]
	if ev.watched != nil && ev.watched.ends[e] {
		return s, ok && lw.tickHeard[e.Switch]-s.ticked <= livenessMissed
	}
	return s, ok && (ev.now.Sub(s.at) <= ev.window || lw.probesSent[s.from]-s.sent < probesMissed)
}

// silent says an end that heard nothing lately (not fresh) did so while
// its switch went on delivering probes at its other ports (see
// probesMissed). Called with disc.mu held.
func (lw *linkWatch) silent(e models.Endpoint, isFresh bool, ev evidence) bool {
	s, ok := lw.sightings[e]
	if ev.watched != nil && ev.watched.ends[e] {
		return ok && !isFresh
	}
	return ok && !isFresh && lw.heard[e.Switch]-s.heard > probesMissed
}

// judgeLink is what the evidence says of one declared link. Called with
// disc.mu held.
func (lw *linkWatch) judgeLink(l models.Link, ev evidence) api.LinkDiscovery {
	// What the switches' own LLDP agents say (state, not liveness: an
	// entry outlives a link that went down).
	agent := func(e models.Endpoint) (sighting, bool) {
		s, ok := lw.lldp[e]
		return s, ok && ev.now.Sub(s.at) <= ev.window
	}
	var d api.LinkDiscovery
	sa, okA := lw.fresh(l.A, ev)
	sb, okB := lw.fresh(l.B, ev)
	la, lokA := agent(l.A)
	lb, lokB := agent(l.B)
	wrong := func(ok bool, s sighting, at, want models.Endpoint, how string) {
		if ok && s.from != want {
			d.Seen = append(d.Seen, fmt.Sprintf("%s hears %s%s", at, s.from, how))
		}
	}
	wrong(okA, sa, l.A, l.B, "")
	wrong(okB, sb, l.B, l.A, "")
	wrong(lokA, la, l.A, l.B, " (its LLDP agent)")
	wrong(lokB, lb, l.B, l.A, " (its LLDP agent)")
	switch {
	case len(d.Seen) > 0:
		d.State = api.DiscoveryMiswired
	case okA && okB:
		d.State = api.DiscoveryConfirmed
		lw.confirmed[l.ID()] = true // by probes: their silence will mean lost
	case lokA && lokB && !lw.confirmed[l.ID()]:
		d.State = api.DiscoveryConfirmed // by the switches' LLDP agents alone
	case ev.operDown[l.A] || ev.operDown[l.B]:
		d.State = api.DiscoveryDown
	case lw.confirmed[l.ID()] && (lw.silent(l.A, okA, ev) || lw.silent(l.B, okB, ev)):
		d.State = api.DiscoveryLost
	case lw.confirmed[l.ID()]:
		// Neither end's switch says anything either way (its packet-ins
		// stopped): the link stays as it was judged.
		d.State = api.DiscoveryConfirmed
		if lw.linkStates[l.ID()].State == api.DiscoveryLost {
			d.State = api.DiscoveryLost
		}
	case !lw.probingSince.IsZero() && ev.now.Sub(lw.probingSince) > ev.window:
		d.State = api.DiscoveryMissing
	default:
		d.State = api.DiscoveryPending
	}
	return d
}

// judged publishes a judgement: the links out of routes, the metrics,
// and — when the links out of routes changed — a log line and the routes.
func (lw *linkWatch) judged(states map[models.LinkID]api.LinkDiscovery, undeclared int) {
	counts := map[api.DiscoveryState]int{}
	for _, d := range states {
		counts[d.State]++
	}
	before, after := lw.miswired(), miswired(states)
	lw.offRoutes.Store(&after)
	for _, s := range []api.DiscoveryState{api.DiscoveryPending, api.DiscoveryConfirmed, api.DiscoveryMiswired, api.DiscoveryMissing, api.DiscoveryLost, api.DiscoveryDown} {
		lw.m.linksDiscovered.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	lw.m.linksUndeclared.Set(float64(undeclared))
	if maps.Equal(before, after) {
		return
	}
	var mis, lost, back []models.LinkID
	for id := range after {
		switch {
		case before[id]:
		case states[id].State == api.DiscoveryLost:
			lost = append(lost, id)
		default:
			mis = append(mis, id)
		}
	}
	for id := range before {
		if !after[id] {
			back = append(back, id)
		}
	}
	slices.Sort(mis)
	slices.Sort(lost)
	slices.Sort(back)
	switch {
	case len(mis) > 0 && len(lost) > 0:
		lw.log.Warn("links found miswired and lost by discovery: routes avoid them", "miswired", mis, "lost", lost)
	case len(mis) > 0:
		lw.log.Warn("links found miswired by discovery: routes avoid them", "miswired", mis)
	case len(lost) > 0:
		lw.log.Warn("links found lost by discovery: routes avoid them", "lost", lost)
	}
	if len(back) > 0 {
		lw.log.Info("links confirmed again by discovery: routes use them", "links", back)
	}
	lw.reroute("link discovery changed", time.Time{}, "miswired", counts[api.DiscoveryMiswired], "lost", counts[api.DiscoveryLost])
}

// miswired is the set of links discovery takes out of routes (miswired
// or lost), as it last judged them. It takes no lock: a failure's reroute
// asks for it holding the controller's lock, and at k=48 a round's
// judgement holds disc.mu over 55,296 links; waiting for it there held
// every switch's report (they take the controller's lock to read).
func (lw *linkWatch) miswired() map[models.LinkID]bool {
	if m := lw.offRoutes.Load(); m != nil {
		return *m
	}
	return nil
}

// miswired is the links of states that discovery takes out of routes.
func miswired(states map[models.LinkID]api.LinkDiscovery) map[models.LinkID]bool {
	out := map[models.LinkID]bool{}
	for id, d := range states {
		if d.State == api.DiscoveryMiswired || d.State == api.DiscoveryLost {
			out[id] = true
		}
	}
	return out
}

// LinkDiscovery is what discovery says of each declared fabric link, and
// the links it heard where none is declared.
func (lw *linkWatch) LinkDiscovery() (map[models.LinkID]api.LinkDiscovery, []string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return maps.Clone(lw.linkStates), slices.Clone(lw.undeclared)
}

// Miswired lists the links discovery found miswired or lost (routes
// avoid them).
func (lw *linkWatch) Miswired() []models.LinkID {
	return slices.Sorted(maps.Keys(lw.miswired()))
}
