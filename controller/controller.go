package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// Driver programs switches. Read returns what a switch has in the tables
// accelnet owns; Apply writes a diff in dependency order.
type Driver interface {
	Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error)
	Apply(ctx context.Context, sw models.SwitchID, d models.Diff) error
}

// ConfigDriver reads and writes switches' interface configuration (gNMI).
type ConfigDriver interface {
	GetConfig(ctx context.Context, sw models.SwitchID) (map[uint32]models.InterfaceConfig, error)
	SetConfig(ctx context.Context, sw models.SwitchID, ports map[uint32]models.InterfaceConfig) error
}

// Sampler makes switches sample packets of the ports given and report
// them (southbound.P4RT: the flow_sample table and its digest).
type Sampler interface {
	SetSampling(ctx context.Context, sw models.SwitchID, ports []uint32, oneIn uint32) error
}

// PinReader reads back chosen flow-pin entries; a Driver that has it lets
// the controller confirm its writes without reading whole tables.
type PinReader interface {
	ReadPins(ctx context.Context, sw models.SwitchID, keys []models.FlowKey) ([]models.FlowPin, error)
}

// knownState is what a switch has: the routes part and the flow pins (a
// map, updated in place by incremental reconciles of that switch only)
// at an overlay generation.
type knownState struct {
	st     models.ForwardingState // without flow pins
	pins   map[models.FlowKey]uint32
	pinGen uint64
}

func (k knownState) full() models.ForwardingState {
	st := k.st
	st.FlowPins = make([]models.FlowPin, 0, len(k.pins))
	for key, port := range k.pins {
		st.FlowPins = append(st.FlowPins, models.FlowPin{Key: key, Port: port})
	}
	return st
}

// DeltaOverlay is an Overlay that can say which pins of a switch changed
// since a generation, so reconciles need not compare whole tables.
type DeltaOverlay interface {
	Overlay
	// PinsDelta returns each pin key of sw changed after generation since
	// with its port now (0: removed), and the current generation; ok is
	// false when since is too old to answer (then use PinsFor).
	PinsDelta(sw models.SwitchID, since uint64) (changed map[models.FlowKey]uint32, gen uint64, ok bool)
}

// Overlay adds per-flow entries (the intents' flow pins) on top of the
// routes, and learns of fabric changes and confirmed switches.
type Overlay interface {
	// PinsFor is the pins sw should have and the generation they are.
	PinsFor(sw models.SwitchID) ([]models.FlowPin, uint64)
	// Synced says sw was read back (or written) matching generation gen.
	Synced(sw models.SwitchID, gen uint64)
	// SetFabric is told the topology and the links that are down.
	SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool)
	// ProgramFailed says writing sw failed (it will be retried).
	ProgramFailed(sw models.SwitchID, err error)
	// PinsRefused says sw refused these flow pins for good (no room, not
	// acceptable) and holds held pins now; the rest of the write went in.
	// Retrying them as they are would fail again: the overlay takes them
	// back.
	PinsRefused(sw models.SwitchID, keys []models.FlowKey, why string, held int)
	// PinsReady says the pins are known; until then switches are left
	// alone, and the overlay queues them all (OnPins) once it is.
	PinsReady() bool
}

// Config configures a Controller.
type Config struct {
	Store  *store.Store
	Driver Driver
	Limits pathcalc.Limits
	// Overlay, if set, adds flow pins to every switch's routes.
	Overlay Overlay
	// Leadership, if set, limits programming to this replica's terms as
	// leader: followers keep the topology, plan and telemetry warm and
	// write nothing; a new term reads every switch back and writes only
	// what differs. Nil: always program (a single controller).
	Leadership election.Leader
	// Config, if set, keeps every port's interface configuration (enabled,
	// MTU, description) as the fabric profile says, over gNMI.
	Config ConfigDriver
	// MTU is the fabric profile's interface MTU; default 4200 (a 4096-byte
	// RoCE payload with its headers).
	MTU uint16
	// SampleOneIn, if set and the Driver is a Sampler, makes every leaf
	// sample 1 in SampleOneIn RoCEv2 packets its hosts send (how elephants
	// nobody declared are found; see Elephants). 0: no sampling.
	SampleOneIn uint32
	// Workers reconcile switches in parallel, per kind of work; default 4.
	Workers int
	// ResyncInterval re-reconciles every switch even without changes, to
	// repair drift; default 30s.
	ResyncInterval time.Duration
	// CongestionInterval is how often measured link load biases WCMP
	// weights away from hot links (see congestion.go); 0: never.
	CongestionInterval time.Duration
	// Packets, if set, sends discovery's probes (packet-outs); with a
	// DiscoveryInterval, links are discovered and checked against the
	// topology (see discovery.go). Packet-ins go to PacketIn.
	Packets           PacketSender
	DiscoveryInterval time.Duration
	// Neighbors, if set, reads switches' own LLDP state (over gNMI) each
	// discovery round, as a second witness of the cabling.
	Neighbors NeighborReader
	// Now is the clock (default time.Now): discovery, flap penalties,
	// rollout stage timeouts, drain and status times.
	Now func() time.Time
	// PinnedLoad, if set, is the measured rate (Gb/s) of pinned flows
	// leaving through each port: traffic that WCMP weights cannot move,
	// so congestion weights leave a link alone that only pinned flows
	// make hot.
	PinnedLoad func() map[models.Endpoint]float64
	// FlapHalfLife is how fast a flapping link's penalty decays; default
	// 10s. See flapDamper.
	FlapHalfLife time.Duration
	// ReconcileTimeout bounds one switch's reconcile; default 10s.
	ReconcileTimeout time.Duration
	// TelemetryInterval is the gNMI sample interval; default 1s. Zero
	// telemetry is never disabled: link load is part of the topology view.
	TelemetryInterval time.Duration
	// Counters streams the switches' interface counters (gNMI).
	Counters   telemetry.CounterSource
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 30 * time.Second
	}
	if c.MTU == 0 {
		c.MTU = 4200
	}
	if c.FlapHalfLife <= 0 {
		c.FlapHalfLife = 10 * time.Second
	}
	if c.ReconcileTimeout <= 0 {
		c.ReconcileTimeout = 10 * time.Second
	}
	if c.TelemetryInterval <= 0 {
		c.TelemetryInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a config the controller cannot run with.
func (c Config) Validate() error {
	if c.Store == nil {
		return errors.New("controller: config needs a store.Store")
	}
	if c.Driver == nil {
		return errors.New("controller: config needs a Driver")
	}
	return nil
}

// fabricState is one topology revision and, computed on first use, its routes.
type fabricState struct {
	rev  int64
	snap *topology.Snapshot
	// down are the links gNMI reports down (either end's oper-status);
	// routes avoid them.
	down map[models.LinkID]bool
	// once starts the routes' computation; ready closes when plan and err
	// are set (see planOf).
	once  sync.Once
	ready chan struct{}
	plan  pathcalc.Result
	err   error
	// ro, when set, rolls the change from the state it replaced out in
	// stages (make-before-break); see rollout.go.
	ro *rollout
	// planned marks the avoided links that are avoided by choice (drained,
	// dampened) rather than because they failed.
	planned map[models.LinkID]bool
	// derive, if set, makes the state's routes from another state's
	// instead of computing them (the pruned step after a failure).
	derive func(ctx context.Context) (pathcalc.Result, error)
	// bias are the congestion-aware WCMP weight biases the routes use.
	bias map[models.Endpoint]float64
}

// Controller reconciles switches to the routes of the stored topology.
type Controller struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	// tables, config and sampling are the three kinds of work on a switch,
	// each with its own queue and workers (see reconcilers.go).
	tables, config, sampling *reconciler
	tele                     *telemetry.Telemetry
	subs                     *telemetry.Streams

	// runCtx is Run's context while it runs (nil before and after);
	// background are the goroutines started under it (route computations,
	// deferred replans), which Run waits for.
	runMu      sync.Mutex
	runCtx     context.Context
	background sync.WaitGroup

	mu       sync.RWMutex
	state    *fabricState
	operDown map[models.Endpoint]bool // ports whose last oper-status was DOWN
	status   map[models.SwitchID]api.SwitchStatus
	// known is each switch's state as last read back in full or written
	// and confirmed: reconciles diff against it instead of reading every
	// table again. Disconnects, errors and the periodic resync drop it,
	// so the next reconcile reads the switch in full (anti-entropy).
	known    map[models.SwitchID]knownState
	drains   map[string]models.Drain // operators' drains, by ID
	flaps    *flapDamper
	topoErr  error
	watching bool
	// biasState is each congested port's WCMP weight bias (see
	// congestion.go).
	biasState map[models.Endpoint]*portBias
	// Link discovery (see discovery.go), under discMu: what arrived at
	// each port, since when probes go out, and each link's state.
	discMu       sync.Mutex
	sightings    map[models.Endpoint]sighting
	probesSent   map[models.Endpoint]uint64 // probes sent out of each port, ever
	probingSince time.Time
	linkStates   map[models.LinkID]api.LinkDiscovery
	undeclared   []string
	confirmed    map[models.LinkID]bool // links discovery has confirmed once
	lldp         map[models.Endpoint]sighting
	noNeighbors  map[models.SwitchID]bool // switches that serve no LLDP state
	// deferred is set when a planned change (drain, undrain, dampening)
	// arrived while a rollout was still under way: it starts once that
	// one has settled, so every rollout goes from a state the switches
	// fully have (two overlapping rollouts could leave a switch routing by
	// neither one's staging).
	deferred atomic.Bool
}

// New returns a controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	tele := telemetry.NewTelemetry(5 * cfg.TelemetryInterval)
	c := &Controller{
		cfg:         cfg,
		log:         cfg.Logger,
		m:           newMetrics(cfg.Registerer),
		tele:        tele,
		status:      map[models.SwitchID]api.SwitchStatus{},
		known:       map[models.SwitchID]knownState{},
		flaps:       newFlapDamper(cfg.FlapHalfLife),
		operDown:    map[models.Endpoint]bool{},
		sightings:   map[models.Endpoint]sighting{},
		probesSent:  map[models.Endpoint]uint64{},
		confirmed:   map[models.LinkID]bool{},
		lldp:        map[models.Endpoint]sighting{},
		noNeighbors: map[models.SwitchID]bool{},
	}
	c.subs = telemetry.NewStreams(cfg.Counters, tele, cfg.TelemetryInterval, c.observeOperStatus, cfg.Logger)
	c.tables = newReconciler("switch", c.Reconcile, true)
	c.config = newReconciler("config", c.ReconcileConfig, false)
	c.config.skip = c.configUnmanaged
	c.config.after = c.recordConfig
	c.sampling = newReconciler("sampling", c.reconcileSampling, true)
	return c, nil
}

// ElectionSetter is a Driver that arbitrates with a changeable election
// ID (the leader's term).
type ElectionSetter interface {
	SetElectionID(id uint64)
}

// term returns the context programming runs in: the current term's, or
// ctx itself without leader election; ok is false while following.
func (c *Controller) term(ctx context.Context) (context.Context, bool) {
	if c.cfg.Leadership == nil {
		return ctx, true
	}
	t := c.cfg.Leadership.Term()
	if t == nil {
		return nil, false
	}
	if es, ok := c.cfg.Driver.(ElectionSetter); ok {
		es.SetElectionID(t.ID) // before any write of the term (a no-op once set)
	}
	return t.Context(), true
}

// followLeadership hands the driver each term's election ID and, when a
// term begins, forgets what the switches were believed to hold and
// queues them all: the new leader reads each one back and writes only
// what differs (nothing, if the previous leader left them correct).
func (c *Controller) followLeadership(ctx context.Context) {
	var last *election.Term
	for {
		changed := c.cfg.Leadership.Changed()
		t := c.cfg.Leadership.Term()
		if t != last {
			last = t
			if es, ok := c.cfg.Driver.(ElectionSetter); ok && t == nil {
				es.SetElectionID(0) // followers arbitrate with nothing
			}
			c.mu.Lock()
			clear(c.known)
			if t != nil {
				clear(c.status) // not in sync until this term has read each back
			}
			c.mu.Unlock()
			if t != nil {
				c.log.Info("taking over the switches", "election_id", t.ID)
				c.enqueueAll()
				c.enqueueConfig()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// Leading says whether this replica programs switches now.
func (c *Controller) Leading() bool {
	return c.cfg.Leadership == nil || c.cfg.Leadership.Term() != nil
}

// Enqueue asks for a switch to be reconciled (e.g. after its stream broke).
func (c *Controller) Enqueue(sw models.SwitchID) { c.tables.queue.Add(string(sw)) }

// Resync drops what the controller believes sw has and queues it, so its
// next reconcile reads it back in full: for a switch that reconnected or
// may have lost state.
func (c *Controller) Resync(sw models.SwitchID) {
	c.mu.Lock()
	delete(c.known, sw)
	c.mu.Unlock()
	c.Enqueue(sw)
	if st := c.current(); st != nil {
		c.enqueueConfigOf(st.snap, sw)
	}
}

func (c *Controller) enqueueAll() {
	st := c.current()
	if st == nil {
		return
	}
	for _, sw := range st.snap.Switches() {
		c.tables.queue.Add(string(sw.Name))
	}
}

// enqueueConfig queues every switch's configuration: interfaces (gNMI)
// and, on leaves, packet sampling (P4Runtime).
func (c *Controller) enqueueConfig() {
	st := c.current()
	if st == nil {
		return
	}
	for _, sw := range st.snap.Switches() {
		c.enqueueConfigOf(st.snap, sw.Name)
	}
}

func (c *Controller) enqueueConfigOf(snap *topology.Snapshot, sw models.SwitchID) {
	if c.cfg.Config != nil {
		c.config.queue.Add(string(sw))
	}
	if _, ok := c.cfg.Driver.(Sampler); ok && c.cfg.SampleOneIn > 0 && len(snap.HostsOn(sw)) > 0 {
		c.sampling.queue.Add(string(sw))
	}
}

// reconcileSampling makes a leaf sample its host-facing ports, all of
// them at SampleOneIn. (Without sampling nothing is queued: entries an
// earlier run wrote stay, and their digests are dropped unread.)
func (c *Controller) reconcileSampling(ctx context.Context, sw models.SwitchID) (int, error) {
	st := c.current()
	sampler, ok := c.cfg.Driver.(Sampler)
	if st == nil || !ok {
		return 0, nil
	}
	var ports []uint32
	for _, h := range st.snap.HostsOn(sw) {
		ports = append(ports, h.Attach.Port)
	}
	return 0, sampler.SetSampling(ctx, sw, ports, c.cfg.SampleOneIn)
}

func (c *Controller) current() *fabricState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.state
}

// Snapshot returns the topology the controller acts on, and its revision;
// nil before one is loaded.
func (c *Controller) Snapshot() (*topology.Snapshot, int64) {
	st := c.current()
	if st == nil {
		return nil, 0
	}
	return st.snap, st.rev
}

// running is Run's context while Run runs, else nil.
func (c *Controller) running() context.Context {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	return c.runCtx
}

// planOf returns st's routes, computed on first use. The computation
// serves every caller, so it runs under Run's context (one caller giving
// up does not abort it for the others; Run ending does), in a goroutine
// Run waits for; each caller waits only as long as its own ctx allows.
// Outside Run it is computed by the caller, under the caller's ctx.
func (c *Controller) planOf(ctx context.Context, st *fabricState) (pathcalc.Result, error) {
	c.startPlan(ctx, st)
	select {
	case <-st.ready:
		return st.plan, st.err
	case <-ctx.Done():
		return pathcalc.Result{}, fmt.Errorf("routes of revision %d: %w", st.rev, ctx.Err())
	}
}

// startPlan starts computing st's routes, if nobody has yet.
func (c *Controller) startPlan(ctx context.Context, st *fabricState) {
	st.once.Do(func() {
		st.ready = make(chan struct{})
		if !c.spawn(func(runCtx context.Context) { c.computePlan(runCtx, st) }) {
			c.computePlan(ctx, st)
		}
	})
}

// spawn runs f in a goroutine under Run's context, which Run waits for;
// it reports false, running nothing, when Run is not running.
func (c *Controller) spawn(f func(ctx context.Context)) bool {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.runCtx == nil {
		return false
	}
	ctx := c.runCtx
	c.background.Go(func() { f(ctx) })
	return true
}

func (c *Controller) computePlan(ctx context.Context, st *fabricState) {
	defer close(st.ready)
	if st.derive != nil {
		st.plan, st.err = st.derive(ctx)
		return
	}
	start := time.Now()
	st.plan, st.err = pathcalc.Compute(ctx, st.snap, pathcalc.Request{Limits: c.cfg.Limits, DownLinks: st.down, PortBias: st.bias})
	c.m.pathcalcSeconds.Observe(time.Since(start).Seconds())
	for _, w := range st.plan.Warnings {
		c.log.Warn("route compromise", "switch", w.Switch, "detail", w.Message)
	}
	if st.err != nil {
		c.log.Error("route computation failed", "revision", st.rev, "err", st.err)
	}
}

// Status returns every switch's last reconcile outcome.
func (c *Controller) Status() map[models.SwitchID]api.SwitchStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[models.SwitchID]api.SwitchStatus, len(c.status))
	for k, v := range c.status {
		out[k] = v
	}
	return out
}

// Ready is nil once a topology is loaded, etcd is watched and every switch
// has been brought in sync at least once; otherwise it says what is missing.
func (c *Controller) Ready() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.state == nil {
		if c.topoErr != nil {
			return fmt.Errorf("topology: %w", c.topoErr)
		}
		return store.ErrNoTopology
	}
	if !c.watching {
		return errors.New("controller: not watching etcd")
	}
	if c.cfg.Leadership != nil && c.cfg.Leadership.Term() == nil {
		// A follower serves reads and forwards writes, once it knows
		// where to.
		if url, _ := c.cfg.Leadership.Leader(); url == "" {
			return errors.New("controller: following, and no leader is known yet")
		}
		return nil
	}
	pending := 0
	for _, sw := range c.state.snap.Switches() {
		if st, ok := c.status[sw.Name]; !ok || !st.InSync {
			pending++
		}
	}
	if pending > 0 {
		return fmt.Errorf("controller: %d of %d switches not yet in sync", pending, len(c.state.snap.Switches()))
	}
	return nil
}

// PortLoad is a port's measured load.
func (c *Controller) PortLoad(e models.Endpoint) (telemetry.PortLoad, bool) { return c.tele.Port(e) }

// LinkLoad returns the load of l from its two ends' counters.
func (c *Controller) LinkLoad(l models.Link) api.LinkLoad {
	a, okA := c.tele.Port(l.A)
	b, okB := c.tele.Port(l.B)
	ll := api.LinkLoad{ABbps: a.OutBps, BAbps: b.OutBps, ABDropBps: a.DropBps, BADropBps: b.DropBps, ABECNBps: a.ECNBps, BAECNBps: b.ECNBps, Up: true, Measured: okA && okB, Stale: a.Stale || b.Stale}
	if okA && !a.OperUp || okB && !b.OperUp {
		ll.Up = false
	}
	if l.Gbps > 0 {
		ll.Utilization = max(ll.ABbps, ll.BAbps) / (l.Gbps * 1e9)
	}
	return ll
}

// setTopology installs a new topology revision and queues every switch.
func (c *Controller) setTopology(ctx context.Context, t models.Topology, rev int64) {
	snap, err := topology.New(t)
	if err != nil {
		c.log.Error("stored topology is invalid; keeping the previous one", "revision", rev, "err", err)
		c.mu.Lock()
		c.topoErr = err
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	st := &fabricState{rev: rev, snap: snap, down: c.downLinksLocked(snap), bias: c.biasesLocked()}
	c.state = st
	c.topoErr = nil
	c.mu.Unlock()
	if c.cfg.Overlay != nil {
		c.cfg.Overlay.SetFabric(snap, st.down)
	}
	c.m.topologyRevision.Set(float64(rev))
	c.log.Info("topology loaded", "revision", rev, "switches", len(t.Switches), "links", len(t.Links), "hosts", len(t.Hosts))
	c.subs.Sync(ctx, snap.Switches())
	c.warm(ctx, st)
	c.enqueueAll()
	c.enqueueConfig()
}

// warm computes a fabric state's routes in the background, so a follower
// that takes over (or a leader's first reconcile) finds them ready.
func (c *Controller) warm(ctx context.Context, st *fabricState) {
	c.startPlan(ctx, st)
}

// downLinksLocked derives the links to route around from the ports' last
// reported oper-status.
func (c *Controller) downLinksLocked(snap *topology.Snapshot) map[models.LinkID]bool {
	down := map[models.LinkID]bool{}
	for id := range drainedLinks(snap, c.drains) { // routed around like failed ones
		down[id] = true
	}
	for e, isDown := range c.operDown {
		if !isDown {
			continue
		}
		if l, ok := snap.LinkAt(e); ok {
			down[l.ID()] = true
		}
	}
	for _, id := range c.flaps.suppressed(c.cfg.Now()) { // flapping: kept out until it settles
		if _, err := snap.Link(id); err == nil {
			down[id] = true
		}
	}
	c.discMu.Lock()
	for id := range c.miswired() { // cabled to something else: carries no routes
		down[id] = true
	}
	c.discMu.Unlock()
	return down
}

// observeOperStatus follows gNMI oper-status: when the set of down links
// changes, the plan is recomputed around them (a new fabric state of the
// same topology revision) and every switch is queued. It only records and
// enqueues; reconciles do the work.
func (c *Controller) observeOperStatus(s models.CounterSample) {
	if s.Has != models.HasOperStatus {
		return
	}
	e := models.Endpoint{Switch: s.Switch, Port: s.Port}
	// Almost every sample repeats what is known: check under the read
	// lock, as every switch's stream does this for every port, and a
	// steady queue of writers would hold the reconcilers (readers) off.
	c.mu.RLock()
	same := c.operDown[e] == !s.OperUp
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	if c.operDown[e] == !s.OperUp {
		c.mu.Unlock()
		return
	}
	var l models.Link
	isLink := false
	if st := c.state; st != nil {
		l, isLink = st.snap.LinkAt(e)
	}
	wasDown := isLink && (c.operDown[l.A] || c.operDown[l.B])
	c.operDown[e] = !s.OperUp
	if isLink && !wasDown && !s.OperUp {
		c.flaps.failed(l.ID(), c.cfg.Now()) // once per failure, not once per end
	}
	c.mu.Unlock()
	c.refreshDown("link state changed", "port", e.String(), "up", s.OperUp)
}

// refreshDown recomputes the links to route around (failed, drained,
// dampened) and, if they changed, replans and queues every switch.
func (c *Controller) refreshDown(why string, args ...any) {
	ctx := c.running()
	c.mu.Lock()
	st := c.state
	if st == nil || ctx == nil {
		c.mu.Unlock()
		return
	}
	down := c.downLinksLocked(st.snap)
	bias := c.biasesLocked()
	if maps.Equal(down, st.down) && maps.Equal(bias, st.bias) {
		c.mu.Unlock()
		return
	}
	// Every change rolls out in stages (see rollout.go). A link that
	// failed is first pruned from every switch's routes at once (its old
	// routes lose traffic already); planned changes and links coming back
	// roll out from the routes the switches have, and wait for a rollout
	// under way to finish.
	failed := false
	operDown := func(id models.LinkID) bool {
		l, err := st.snap.Link(id)
		return err == nil && (c.operDown[l.A] || c.operDown[l.B])
	}
	for id := range down {
		if !st.down[id] && operDown(id) {
			failed = true // a link failed
		}
	}
	if !failed && st.ro != nil && st.ro.stageNow() != 0 {
		c.mu.Unlock()
		if !c.deferred.Swap(true) {
			c.log.Info(why+"; waiting for the rollout under way to finish first", args...)
		}
		return
	}
	c.deferred.Store(false)
	next := &fabricState{rev: st.rev, snap: st.snap, down: down, planned: map[models.LinkID]bool{}, bias: bias}
	for id := range down {
		next.planned[id] = !operDown(id) // avoided by a drain or dampening, not a failure
	}
	if failed {
		// First, at once, every switch drops the next hops that no longer
		// lead anywhere (a subset of loop-free routes is loop-free); then
		// the new routes roll out in stages from there.
		pruned := &fabricState{rev: st.rev, snap: st.snap, down: st.down, planned: st.planned, derive: func(ctx context.Context) (pathcalc.Result, error) {
			old, err := c.planOf(ctx, st)
			if err != nil {
				return old, err
			}
			return pathcalc.Result{Plan: pathcalc.Prune(st.snap, old.Plan, down)}, nil
		}}
		next.ro = newRollout(pruned, c.cfg.Now)
		if cur, err := c.planOf(ctx, st); err == nil {
			next.ro.base = &cur.Plan // what the switches have: the pruning is a stage of its own
		}
	} else {
		next.ro = newRollout(st, c.cfg.Now)
	}
	c.state = next
	c.mu.Unlock()
	if c.cfg.Overlay != nil {
		c.cfg.Overlay.SetFabric(st.snap, down)
	}
	c.log.Info(why+"; rerouting", append(args, "links_avoided", len(down), "pruned_first", failed)...)
	c.m.linksDown.Set(float64(len(down)))
	if failed {
		// The switches the pruning changes, at once: they are written
		// while the new routes are computed.
		c.enqueuePruned(ctx, next.ro)
	}
	// Plan now, so only the switches whose routes change are programmed,
	// stage by stage; the pins of intents moved off the links follow.
	from := st
	if failed {
		from = next.ro.previous()
	}
	oldPlan, errOld := c.planOf(ctx, from)
	newPlan, errNew := c.planOf(ctx, next)
	if errOld != nil || errNew != nil {
		next.ro.abandon()
		c.enqueueAll()
		return
	}
	next.ro.prepare(next, oldPlan.Plan, newPlan.Plan, next.ro.base)
	for _, sw := range next.ro.begin() {
		c.Enqueue(sw)
	}
}

// enqueuePruned queues the switches whose pruned routes differ from what
// they have (every switch, if that cannot be told).
func (c *Controller) enqueuePruned(ctx context.Context, ro *rollout) {
	prev := ro.previous()
	if prev == nil || ro.base == nil {
		c.enqueueAll()
		return
	}
	pruned, err := c.planOf(ctx, prev)
	if err != nil {
		c.enqueueAll()
		return
	}
	for sw, st := range pruned.Plan.Switches {
		// Prune shares the state of every switch it leaves alone, so this
		// compares slice headers for all but the few it changed.
		if !reflect.DeepEqual(ro.base.Switches[sw], st) {
			c.Enqueue(sw)
		}
	}
}

// runDeferred applies a planned change that waited for a rollout, once
// that rollout's stages are done (even if a switch is unreachable: its
// stage timed out, and waiting for it would hold every change back).
func (c *Controller) runDeferred() {
	if !c.deferred.Load() {
		return
	}
	if st := c.current(); st != nil && (st.ro == nil || st.ro.stageNow() == 0) {
		c.spawn(func(context.Context) { c.refreshDown("the rollout under way finished") })
	}
}

// SetDrains sets the operators' drains: routes and intents move off the
// drained switches and links as off failed ones.
func (c *Controller) SetDrains(drains map[string]models.Drain) {
	c.mu.Lock()
	c.drains = maps.Clone(drains)
	c.mu.Unlock()
	c.refreshDown("drains changed", "drains", len(drains))
}

// DownLinks returns the links the current routes avoid.
func (c *Controller) DownLinks() map[models.LinkID]bool {
	st := c.current()
	if st == nil {
		return nil
	}
	return maps.Clone(st.down)
}

// pinRefusal is a write error that names the flow pins a switch refused
// for good, and why (southbound.WriteError).
type pinRefusal interface {
	RefusedPins() (keys []models.FlowKey, why string)
}

// reportRefusedPins tells the overlay which flow pins sw refused for good
// in a write of diff, and how many pins sw holds after it (it held before
// of them; the deletions went first, the inserts it did not refuse went in).
func (c *Controller) reportRefusedPins(sw models.SwitchID, err error, diff models.Diff, before int) {
	var we pinRefusal
	if !errors.As(err, &we) {
		return
	}
	keys, why := we.RefusedPins()
	if len(keys) == 0 {
		return
	}
	refused := make(map[models.FlowKey]bool, len(keys))
	for _, k := range keys {
		refused[k] = true
	}
	held := before - len(diff.Delete.FlowPins)
	for _, p := range diff.Insert.FlowPins {
		if !refused[p.Key] {
			held++
		}
	}
	c.cfg.Overlay.PinsRefused(sw, keys, why, held)
}

// confirm reads back the flow pins a diff wrote or removed and checks
// the switch has exactly that: what makes an intent Installed or its
// deletion done. Without a PinReader the next reconcile reads in full.
func (c *Controller) confirm(ctx context.Context, sw models.SwitchID, diff models.Diff) error {
	pr, ok := c.cfg.Driver.(PinReader)
	if !ok {
		c.mu.Lock()
		delete(c.known, sw)
		c.mu.Unlock()
		return nil
	}
	want := map[models.FlowKey]uint32{}
	var keys []models.FlowKey
	for _, part := range []models.ForwardingState{diff.Insert, diff.Modify} {
		for _, p := range part.FlowPins {
			want[p.Key] = p.Port
			keys = append(keys, p.Key)
		}
	}
	for _, p := range diff.Delete.FlowPins {
		keys = append(keys, p.Key)
	}
	if len(keys) == 0 {
		return nil
	}
	got, err := pr.ReadPins(ctx, sw, keys)
	if err != nil {
		return fmt.Errorf("confirm %d flow pins on %s: %w", len(keys), sw, err)
	}
	have := make(map[models.FlowKey]uint32, len(got))
	for _, p := range got {
		have[p.Key] = p.Port
	}
	for _, k := range keys {
		w, wanted := want[k]
		h, present := have[k]
		if wanted != present || w != h {
			return fmt.Errorf("read-back of %s on %s disagrees with the write (want present=%v port %d, have present=%v port %d)", k, sw, wanted, w, present, h)
		}
	}
	return nil
}

// Reconcile makes one switch match the plan: read desired, read actual,
// diff, write the minimal batch, record status. It returns the number of
// updates written.
func (c *Controller) Reconcile(ctx context.Context, sw models.SwitchID) (int, error) {
	st := c.current()
	if st == nil {
		return 0, store.ErrNoTopology
	}
	record := func(s api.SwitchStatus) {
		s.LastReconcile = c.cfg.Now()
		s.Revision = st.rev
		c.mu.Lock()
		prev := c.status[sw] // the config reconciler's part stays
		s.ConfigInSync, s.ConfigError = prev.ConfigInSync, prev.ConfigError
		c.status[sw] = s
		c.mu.Unlock()
		v := 0.0
		if s.InSync {
			v = 1
		}
		c.m.switchInSync.WithLabelValues(string(sw)).Set(v)
	}
	if c.cfg.Overlay != nil && !c.cfg.Overlay.PinsReady() {
		return 0, nil // queued again once the intents are placed
	}
	plan, err := c.planOf(ctx, st)
	if err != nil {
		record(api.SwitchStatus{LastError: err.Error()})
		return 0, err
	}
	desired, ok := plan.Plan.Switches[sw]
	if !ok {
		c.mu.Lock()
		delete(c.status, sw)
		c.mu.Unlock()
		return 0, nil // no longer in the topology
	}
	stage := 0
	if st.ro != nil {
		if stage = st.ro.stageNow(); stage > 0 {
			if prev := st.ro.previous(); prev != nil {
				if old, err := c.planOf(ctx, prev); err == nil {
					switch {
					case st.ro.pruning(stage):
						pruned := old.Plan.Switches[sw]
						pruned.FlowPins = desired.FlowPins
						desired = pruned
					case st.ro.touches(sw):
						dist, early := st.ro.prepare(st, old.Plan, plan.Plan, st.ro.base)
						desired = staged(sw, st.ro.distanceStage(stage), old.Plan.Switches[sw], desired, dist, early[sw])
					}
				}
			}
		}
	}
	defer func() {
		if stage == 0 {
			return
		}
		c.mu.RLock()
		inSync := c.status[sw].InSync
		c.mu.RUnlock()
		if inSync {
			for _, next := range st.ro.confirmed(sw, stage, st.snap.Switches()) {
				c.Enqueue(next) // the next stage's switches
			}
		}
	}()
	c.mu.RLock()
	k, cached := c.known[sw]
	c.mu.RUnlock()
	var diff models.Diff
	var pins map[models.FlowKey]uint32
	var pinGen uint64
	pinsBefore := 0 // how many pins the switch holds before this write
	incremental := false
	if d, ok := c.cfg.Overlay.(DeltaOverlay); ok && cached && k.pins != nil {
		// Only the pins changed since the known generation, and the routes
		// (a few per destination leaf), are compared: O(change), not O(table).
		var changed map[models.FlowKey]uint32
		if changed, pinGen, incremental = d.PinsDelta(sw, k.pinGen); incremental {
			desired = adoptGroupIDs(desired, k.st)
			diff = models.Compute(desired, k.st)
			for key, port := range changed {
				have, present := k.pins[key]
				switch {
				case port == 0 && present:
					diff.Delete.FlowPins = append(diff.Delete.FlowPins, models.FlowPin{Key: key, Port: have})
				case port != 0 && !present:
					diff.Insert.FlowPins = append(diff.Insert.FlowPins, models.FlowPin{Key: key, Port: port})
				case port != 0 && have != port:
					diff.Modify.FlowPins = append(diff.Modify.FlowPins, models.FlowPin{Key: key, Port: port})
				}
			}
			pins = k.pins
			pinsBefore = len(pins)
			for key, port := range changed {
				if port == 0 {
					delete(pins, key)
				} else {
					pins[key] = port
				}
			}
		}
	}
	if !incremental {
		if c.cfg.Overlay != nil {
			desired.FlowPins, pinGen = c.cfg.Overlay.PinsFor(sw)
		}
		actual := k.full()
		if !cached {
			actual, err = c.cfg.Driver.Read(ctx, sw)
			if err != nil {
				record(api.SwitchStatus{LastError: err.Error()})
				return 0, fmt.Errorf("read %s: %w", sw, err)
			}
			c.m.fullReads.Inc()
		}
		desired = adoptGroupIDs(desired, actual)
		diff = models.Compute(desired, actual)
		pinsBefore = len(actual.FlowPins)
		pins = make(map[models.FlowKey]uint32, len(desired.FlowPins))
		for _, p := range desired.FlowPins {
			pins[p.Key] = p.Port
		}
	}
	entries := desired.Len() - len(desired.FlowPins) + len(pins)
	remember := func() {
		routes := desired
		routes.FlowPins = nil
		c.mu.Lock()
		c.known[sw] = knownState{st: routes, pins: pins, pinGen: pinGen}
		c.mu.Unlock()
		if c.cfg.Overlay != nil {
			c.cfg.Overlay.Synced(sw, pinGen)
		}
	}
	forget := func() {
		c.mu.Lock()
		delete(c.known, sw)
		c.mu.Unlock()
	}
	if diff.Empty() {
		remember()
		record(api.SwitchStatus{InSync: true, Entries: entries})
		return 0, nil
	}
	if err := c.cfg.Driver.Apply(ctx, sw, diff); err != nil {
		forget()
		record(api.SwitchStatus{LastError: err.Error()})
		if c.cfg.Overlay != nil {
			c.reportRefusedPins(sw, err, diff, pinsBefore)
			c.cfg.Overlay.ProgramFailed(sw, err)
		}
		return 0, err
	}
	if err := c.confirm(ctx, sw, diff); err != nil {
		forget()
		record(api.SwitchStatus{LastError: err.Error()})
		return 0, err
	}
	remember()
	c.m.writes.WithLabelValues("insert").Add(float64(diff.Insert.Len()))
	c.m.writes.WithLabelValues("modify").Add(float64(diff.Modify.Len()))
	c.m.writes.WithLabelValues("delete").Add(float64(diff.Delete.Len()))
	level := slog.LevelInfo
	if onlyPins := diff.Len() == len(diff.Insert.FlowPins)+len(diff.Modify.FlowPins)+len(diff.Delete.FlowPins); onlyPins {
		level = slog.LevelDebug // intents come and go by the thousand
	}
	c.log.Log(ctx, level, "switch programmed", "switch", sw, "insert", diff.Insert.Len(), "modify", diff.Modify.Len(), "delete", diff.Delete.Len())
	record(api.SwitchStatus{InSync: true, Entries: entries, LastWrites: diff.Len()})
	return diff.Len(), nil
}
