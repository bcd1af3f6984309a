// Package controller makes the switches match the stored topology: it
// computes routes with pathcalc for each topology revision and the links
// to avoid (failed, drained, flapping, congested), rolls changes out in
// stages, and reconciles each switch's tables, interface configuration and
// packet sampling (read back, diff, minimal batched write), each kind of
// work with its own queue. It reaches switches only through the small
// interfaces it declares here (Driver, ConfigDriver, Sampler, PinReader),
// and the intents' flow pins through Overlay.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"maps"
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

// Capabilities are what the drivers and the overlay can do beyond
// Driver, ConfigDriver and Overlay. Each field turns on what it says;
// nil leaves it off.
type Capabilities struct {
	// Sampler: leaves sample 1 in SampleOneIn of their hosts' RoCEv2
	// packets (elephant detection).
	Sampler Sampler
	// PinReader: a write of flow pins is confirmed by reading those pins
	// back; without it the next reconcile reads the switch in full.
	PinReader PinReader
	// Prober: with Marks, a new term takes a switch its handover mark
	// vouches for after a probe, not a full read.
	Prober Prober
	// Elections: the drivers that arbitrate, given each term's election
	// ID (P4Runtime's and gNMI's).
	Elections []ElectionSetter
	// PinsDelta: reconciles compare only the pins changed since the
	// switch's last, not whole tables.
	PinsDelta DeltaOverlay
	// Unsettled: a new term reads by key the pins of intents not yet
	// Installed, rather than the switch's whole pin table.
	Unsettled UnsettledOverlay
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
	// SetFabric is told the topology, the links the routes avoid, and of
	// those the ones drained, each with its drain (said to the tenants
	// whose intents move off them).
	SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool, drained map[models.LinkID]string)
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

// Store is what the controller reads of etcd: the topology, listed and
// then watched (store.Store).
type Store interface {
	Topology(ctx context.Context) (t models.Topology, modRevision, revision int64, err error)
	TopologyAt(ctx context.Context, rev int64) (t models.Topology, modRevision, revision int64, err error)
	WatchKey(ctx context.Context, key string, fromRev int64, fn func(store.KV)) error
}

// Config configures a Controller.
type Config struct {
	Store  Store
	Driver Driver
	// Limits are the pipeline's sizes, and how routes are written: by
	// default sibling prefixes that go the same way are merged
	// (pathcalc.Aggregate), so a pod whose leaves' prefixes fill an
	// aligned block (as the fat-tree builder hands them out) takes one
	// entry per switch outside it; Limits.PerLeafRoutes writes every
	// destination leaf's route as planned. Rollouts are planned per leaf
	// either way.
	Limits pathcalc.Limits
	// Overlay, if set, adds flow pins to every switch's routes.
	Overlay Overlay
	// Leadership, if set, limits programming to this replica's terms as
	// leader: followers keep the topology, plan and telemetry warm and
	// write nothing; a new term reads every switch back and writes only
	// what differs. Nil: always program (a single controller).
	Leadership election.Leader
	// Can is what the Driver, Config and Overlay can do beyond their
	// interfaces, each turned on by the field that names it: stated, not
	// found by type assertion, so a stub says what it leaves out.
	Can Capabilities
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
	// SweepWorkers reconcile switches' tables in parallel while a new
	// term reads every switch back (its first sweep); default 16, and
	// never fewer than Workers. Each works on another switch, so what
	// bounds them is this controller's CPU, not a switch's: at k=16 with
	// 100,000 intents, reading 320 switches back takes 18 s four at a
	// time, 8.6 s sixteen at a time.
	SweepWorkers int
	// ResyncInterval re-reconciles every switch even without changes, to
	// repair drift; default 30s.
	ResyncInterval time.Duration
	// CongestionInterval is how often measured link load biases WCMP
	// weights away from hot links (see congestion.go); 0: never.
	CongestionInterval time.Duration
	// Packets, if set, sends discovery's probes (packet-outs); with a
	// DiscoveryInterval (0: none), links are discovered and checked
	// against the topology (see discovery.go). Packet-ins go to PacketIn.
	Packets           PacketSender
	DiscoveryInterval time.Duration
	// LivenessInterval is how often, with Packets, the fabric link ends
	// on switches that report no oper-status are probed, so that a cut
	// link is found within livenessMissed+1 of them (see liveness.go);
	// 0: never (DefaultLivenessInterval is the command line's default).
	// LivenessBudget bounds those probes per second (0:
	// DefaultLivenessBudget): more watched ends stretch the interval.
	LivenessInterval time.Duration
	LivenessBudget   int
	// ProbeRate is how many latency probes a second the leader sends
	// between leaves, with Packets (the pingmesh, pingmesh.go); 0: none
	// (DefaultProbeRate is the command line's default).
	ProbeRate int
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
	// ReadAfterPins, if set, says whether a reading of a port over
	// [from, to] was taken after the last change of the pins leaving by
	// it took effect; congestion weights judge a port only by such a
	// reading. (On a starved machine, where readings lag, a thousand
	// elephants pinned at once read as hashed traffic and cut a score of
	// weights that took the next minute to step back.)
	ReadAfterPins func(e models.Endpoint, from, to time.Time) bool
	// PinsPending, if set, counts the ports whose last change of flow
	// pins, made after generation after and at or before upTo, their
	// switch has not yet confirmed, and returns the pins' generation now:
	// congestion weights wait for the changes under way (see
	// telemetry.PinWait).
	PinsPending func(after, upTo uint64) (ports int, gen uint64)
	// FlapHalfLife is how fast a flapping link's penalty decays; default
	// 10s. See flapDamper.
	FlapHalfLife time.Duration
	// ReconcileTimeout bounds one switch's reconcile; default 10s.
	ReconcileTimeout time.Duration
	// TelemetryInterval is the gNMI sample interval; default 1s. Zero
	// telemetry is never disabled: link load is part of the topology view.
	TelemetryInterval time.Duration
	// Counters streams the switches' interface counters (gNMI).
	Counters telemetry.CounterSource
	// Marks, if set (with Leadership and a Driver that is a Prober),
	// keeps per switch what the leader confirmed it holds, so that a new
	// term takes a switch its predecessor left as marked (probed)
	// instead of reading it back in full (see handover.go).
	Marks MarkStore
	// HostMACs, if set, keeps the MACs learned from hosts' ARP in etcd,
	// and every replica follows them (see hosts.go); without it they are
	// kept here only.
	HostMACs HostMACStore
	// Foreign, if set (with Leadership), records in etcd the switches
	// another controller took (and deletes the record once they are
	// ours again), so that every replica tells its event subscribers; a
	// new term takes the records of its predecessor's as its own.
	Foreign ForeignStore
	// TablesFirstMax bounds how long after a new term's first sweep of
	// the tables tried every switch it still holds the interface config
	// of the switches its predecessor left marked, if not every switch's
	// tables are in sync by then (awaitTablesFirst); default 10s.
	TablesFirstMax time.Duration
	// Latency is the fixed cost of a hop the latency figures assume
	// besides its queue (see latency.go); zero fields take defaults.
	Latency    telemetry.LatencyModel
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Defaults of Config (the command line shows the same).
const (
	DefaultWorkers           = 4
	DefaultMTU               = 4200 // a 4096-byte RoCE payload with its headers
	DefaultFlapHalfLife      = 10 * time.Second
	DefaultTelemetryInterval = time.Second
)

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.SweepWorkers <= 0 {
		c.SweepWorkers = 16
	}
	c.SweepWorkers = max(c.SweepWorkers, c.Workers)
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 30 * time.Second
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.FlapHalfLife <= 0 {
		c.FlapHalfLife = DefaultFlapHalfLife
	}
	if c.ReconcileTimeout <= 0 {
		c.ReconcileTimeout = 10 * time.Second
	}
	if c.TablesFirstMax <= 0 {
		c.TablesFirstMax = 10 * time.Second
	}
	if c.TelemetryInterval <= 0 {
		c.TelemetryInterval = DefaultTelemetryInterval
	}
	if c.LivenessBudget <= 0 {
		c.LivenessBudget = DefaultLivenessBudget
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
		return errors.New("config needs a store.Store")
	}
	if c.Driver == nil {
		return errors.New("config needs a Driver")
	}
	return nil
}

// Controller reconciles switches to the routes of the stored topology.
type Controller struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	// sweepers are the tables' extra workers of a first sweep, running.
	sweepers atomic.Int32
	// queues are the three kinds of work on a switch (tables, config,
	// sampling), each with its own queue and workers (reconcilers.go).
	queues *workQueues
	// slots bounds the reconciles of every kind running at once.
	slots *inflight
	tele  *telemetry.Telemetry
	subs  *telemetry.Streams
	// latency caches the paths latency is assembled over (latency.go).
	latency latencyState
	// plans computes routes and runs background work under Run's context.
	plans *planner

	mu       sync.RWMutex
	state    *fabricState
	operDown map[models.Endpoint]bool // ports whose last oper-status was DOWN
	writeLog writeSummary
	status   map[models.SwitchID]api.SwitchStatus
	// known is each switch's state as last read back in full or written
	// and confirmed: reconciles diff against it instead of reading every
	// table again. Disconnects and errors drop it, so the next reconcile
	// reads the switch in full; the periodic resync makes it stale
	// (resyncEpoch), so each switch's next reconcile does (anti-entropy).
	known map[models.SwitchID]knownState
	// resyncEpoch counts the periodic resyncs: a knownState read before
	// the latest is stale (see staleKnown).
	resyncEpoch uint64
	// foreign are the switches another controller holds, until one of
	// our reconciles goes through again (tookBack).
	foreign  map[models.SwitchID]bool
	drains   map[string]models.Drain // operators' drains, by ID
	flaps    *flapDamper
	topoErr  error
	watching bool
	// congestion is the congestion weights' state (congestion.go).
	congestion congestionState
	// disc is link discovery's and liveness's state (discovery.go,
	// liveness.go); hosts is what is known of hosts beyond the topology
	// (hosts.go).
	disc  *linkWatch
	hosts *hostLearner
	// mesh is the pingmesh's (pingmesh.go).
	mesh *pingmesh
	// deferred is set when a planned change (drain, undrain, dampening)
	// arrived while a rollout was still under way: it starts once that
	// one has settled, so every rollout goes from a state the switches
	// fully have (two overlapping rollouts could leave a switch routing by
	// neither one's staging).
	deferred atomic.Bool
	// urgency holds background work back while a failure is handled.
	urgency *urgency
	// handover is the current term's handover marks (handover.go).
	handover *handoverState
	// termBegan tells housekeeping a term began: the periodic resync
	// starts over, so that it does not read back in full, in the middle
	// of the term's first sweep, the switches the term is taking as
	// their handover marks say.
	termBegan chan struct{}
}

// New returns a controller; Run starts it.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if cfg.Leadership == nil {
		cfg.Marks = nil   // a mark's writes are fenced by the writer's term
		cfg.Foreign = nil // as are these
	}
	tele := telemetry.NewTelemetry(5 * cfg.TelemetryInterval)
	tele.Step = cfg.TelemetryInterval
	c := &Controller{
		cfg:       cfg,
		log:       cfg.Logger,
		tele:      tele,
		status:    map[models.SwitchID]api.SwitchStatus{},
		known:     map[models.SwitchID]knownState{},
		foreign:   map[models.SwitchID]bool{},
		flaps:     newFlapDamper(cfg.FlapHalfLife),
		operDown:  map[models.Endpoint]bool{},
		termBegan: make(chan struct{}, 1),
	}
	c.subs = telemetry.NewStreams(cfg.Counters, tele, cfg.TelemetryInterval, func(s models.CounterSample) {
		c.observeOperStatus(s)
		c.observeQueue(s)
	}, cfg.Logger)
	c.queues = &workQueues{fabric: c.current, configured: cfg.Config != nil, sampled: cfg.Can.Sampler != nil && cfg.SampleOneIn > 0}
	c.queues.tables = newReconciler("switch", c.Reconcile, true)
	c.queues.config = newReconciler("config", c.ReconcileConfig, false)
	c.queues.tables.await = c.awaitRoutes
	c.queues.config.skip = c.configUnmanaged
	c.queues.config.after = c.recordConfig
	c.queues.sampling = newReconciler("sampling", c.reconcileSampling, true)
	c.urgency = newUrgency(func(held bool) {
		for _, r := range c.queues.all() {
			r.queue.HoldBackground(held)
		}
		v := 0.0
		if held {
			v = 1
		}
		c.m.failureHandling.Set(v)
	})
	c.slots = newInflight(cfg.Workers*len(c.queues.all()), cfg.ReconcileTimeout, time.Now)
	c.m = newMetrics(cfg.Registerer, counts{samples: tele.Samples, weightChanges: c.WeightChanges, atOnce: c.slots.bound, rollingOut: c.RollingOut})
	c.plans = &planner{limits: cfg.Limits, log: c.log, seconds: c.m.pathcalcSeconds}
	c.handover = &handoverState{cfg: &c.cfg, log: c.log, m: c.m, plans: c.plans, fabric: c.current, known: c.knownPins}
	c.queues.config.await = c.handover.awaitTablesFirst
	c.hosts = newHostLearner(&c.cfg, c.log, c.m.arp, c.current, c.Leading, c.Enqueue, c.urgency)
	c.disc = newLinkWatch(&c.cfg, c.log, c.m, c.current, c.Leading, c.portsDown, c.refreshDown, c.urgency)
	c.mesh = newPingmesh(&c.cfg, c.log, c.m, c.tele, c.current, c.Leading, c.Ready, c.urgency)
	return c, nil
}

// knownPins is what sw is known to hold, if its pins are known and it
// has been read since the latest periodic resync (a handover mark vouches
// for nothing older).
func (c *Controller) knownPins(sw models.SwitchID) (knownState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	k, ok := c.known[sw]
	return k, ok && k.pins != nil && k.epoch == c.resyncEpoch
}

// portsDown are the ports whose last oper-status was DOWN.
func (c *Controller) portsDown() map[models.Endpoint]bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.operDown)
}

// LinkDiscovery is what discovery says of each declared fabric link, and
// the links it heard where none is declared.
func (c *Controller) LinkDiscovery() (map[models.LinkID]api.LinkDiscovery, []string) {
	return c.disc.LinkDiscovery()
}

// ElectionSetter is a Driver or ConfigDriver that arbitrates with a
// changeable election ID (the leader's term): both get the same ID, the
// same way.
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
	c.cfg.Can.setElectionID(t.ID) // before any write of the term (a no-op once set)
	return t.Context(), true
}

// setElectionID hands the term's election ID to every driver that
// arbitrates (P4Runtime and gNMI alike).
func (can Capabilities) setElectionID(id uint64) {
	for _, es := range can.Elections {
		es.SetElectionID(id)
	}
}

// followLeadership hands the driver each term's election ID and, when a
// term begins, forgets what the switches were believed to hold and
// queues them all: the new leader reads each one back and writes only
// what differs (nothing, if the previous leader left them correct).
func (c *Controller) followLeadership(ctx context.Context) {
	var last *election.Term
	var terms sync.WaitGroup
	defer terms.Wait()
	for {
		changed := c.cfg.Leadership.Changed()
		t := c.cfg.Leadership.Term()
		if t != last {
			last = t
			if t == nil {
				c.cfg.Can.setElectionID(0) // followers arbitrate with nothing
			}
			c.mu.Lock()
			clear(c.known)
			if t != nil {
				clear(c.status) // not in sync until this term has read each back
			}
			c.mu.Unlock()
			tm := c.handover.set(t) // before the term's first reconcile
			if t != nil {
				c.loadForeign(ctx) // before it too: a switch taken back is said so
			}
			if t != nil {
				select {
				case c.termBegan <- struct{}{}:
				default: // one pending is enough
				}
				c.log.Info("taking over the switches", "election_id", t.ID)
				c.queues.every(front)
				c.queues.configs(front)
				terms.Go(func() { c.takeOver(ctx, t) })
			}
			if tm != nil {
				terms.Go(func() { c.handover.run(ctx, tm) })
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// loadForeign takes the switches recorded as taken by another controller
// (by the previous term, or this one earlier) as taken: the first
// reconcile that goes through on one says so, and removes the record.
func (c *Controller) loadForeign(ctx context.Context) {
	if c.cfg.Foreign == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	recs, err := c.cfg.Foreign.Load(lctx)
	cancel()
	if err != nil {
		c.log.Warn("switches taken by another controller not read from etcd", "err", err)
		return
	}
	c.mu.Lock()
	for sw := range recs {
		c.foreign[sw] = true
	}
	c.mu.Unlock()
}

// takeOver runs term t's first sweep and says how it went: until every
// switch was tried (TriedAll) the tables' reconciler has SweepWorkers
// workers instead of Workers, and once every switch is read back and in
// sync the takeover is logged with how long it took. It ends with t or
// ctx; a reconcile under way then finishes.
func (c *Controller) takeOver(ctx context.Context, t *election.Term) {
	start := c.cfg.Now()
	tctx, stop := context.WithCancel(t.Context())
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	sctx, endSweep := context.WithCancel(tctx)
	var sweepers sync.WaitGroup
	extra := c.cfg.SweepWorkers - c.cfg.Workers
	c.slots.widen(extra)
	defer c.slots.widen(-extra) // after the workers ended (deferred below)
	for range extra {
		c.sweepers.Add(1)
		sweepers.Go(func() {
			defer c.sweepers.Add(-1)
			c.work(sctx, c.queues.tables)
		})
	}
	defer sweepers.Wait()
	defer endSweep() // before the wait: the sweep's workers end with sctx
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	tm := c.handover.current()
	if tm != nil && tm.term != t {
		tm = nil
	}
	var swept time.Time
	for {
		select {
		case <-tctx.Done():
			return
		case <-tick.C:
		}
		if sctx.Err() == nil && c.TriedAll() {
			endSweep()
			swept = c.cfg.Now()
		}
		if tm != nil && !swept.IsZero() && c.cfg.Now().Sub(swept) >= c.cfg.TablesFirstMax {
			tm.endTablesFirst() // a switch not in sync holds the rest no longer
		}
		if c.Ready() == nil && c.cfg.Leadership.Term() == t {
			var handover []any
			if tm != nil {
				tm.endTablesFirst()
				handover = tm.counted()
			}
			c.log.Info("took over: every switch read back or probed, and in sync", append([]any{"election_id", t.ID, "took", c.cfg.Now().Sub(start).Round(time.Millisecond)}, handover...)...)
			return
		}
	}
}

// Leading says whether this replica programs switches now.
func (c *Controller) Leading() bool {
	return c.cfg.Leadership == nil || c.cfg.Leadership.Term() != nil
}

// Enqueue asks for a switch to be reconciled (e.g. after its stream broke).
func (c *Controller) Enqueue(sw models.SwitchID) { c.queues.tables.queue.Add(string(sw)) }

// Resync drops what the controller believes sw has and queues it, so its
// next reconcile reads it back in full: for a switch that reconnected or
// may have lost state.
func (c *Controller) Resync(sw models.SwitchID) {
	c.mu.Lock()
	delete(c.known, sw)
	c.mu.Unlock()
	if tm := c.handover.current(); tm != nil {
		tm.distrust(sw)
	}
	c.Enqueue(sw)
	if st := c.current(); st != nil {
		c.queues.configOf(st.snap, sw, front)
	}
}

// Miswired lists the links discovery found miswired or lost (routes
// avoid them).
func (c *Controller) Miswired() []models.LinkID { return c.disc.Miswired() }

// LivenessTicks counts liveness ticks so far.
func (c *Controller) LivenessTicks() uint64 { return c.disc.LivenessTicks() }

// ProbesSent counts the discovery and liveness probes sent so far.
func (c *Controller) ProbesSent() uint64 { return c.disc.ProbesSent() }
