// Package intents admits tenants' bandwidth intents and keeps them true:
// admission against a ledger of reserved bandwidth (pathcalc.Book), one
// etcd commit per batch of decisions fenced on the leader's term, the
// intents' lifecycle (pending, installed, failed; replanned on fabric
// changes, moved off hot links), the flow pins the controller programs,
// detected elephant flows, change events and the drain preview.
package intents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

var (
	// ErrNoCapacity means an intent does not fit; the error says where.
	ErrNoCapacity = errors.New("not enough capacity")
	// ErrQuota means the tenant's quota would be exceeded.
	ErrQuota = errors.New("tenant quota exceeded")
	// ErrPrecondition means If-Match named a revision that is not current.
	ErrPrecondition = errors.New("revision mismatch")
	// ErrIdempotencyReuse means an Idempotency-Key came back with a
	// different request body.
	ErrIdempotencyReuse = errors.New("idempotency key reused with a different request")
	// ErrFlowTaken means another live intent already pins one of the flows.
	ErrFlowTaken = errors.New("flow already pinned by another intent")
	// ErrHostNotAllowed means a tenant named a host it may not use.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrTableFull means a switch's flow-pin table cannot take the entries.
	ErrTableFull = errors.New("flow-pin table full")
)

// Defaults of Config (the command line shows the same).
const (
	DefaultPendingTimeout = time.Minute
	DefaultKeepFinished   = time.Hour
	DefaultMaxFinished    = 100
)

// MaxFlowsPerIntent bounds the flows one intent expands to (pairs × ports).
const MaxFlowsPerIntent = 4096

// Store is what the manager needs of etcd (store.Store): its records
// listed at one revision, committed in fenced transactions, and followed.
type Store interface {
	store.Follower
	List(ctx context.Context, prefix string, rev int64) ([]store.KV, int64, error)
	Commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (int64, error)
	// ListSince is List for a copy current at revision since: every key
	// (no values) and the values written after since (store.Store).
	ListSince(ctx context.Context, prefix string, since int64) (keys, changed []store.KV, rev int64, err error)
	// Changes is what was written under prefix after revision since, in
	// order, and the revision and key count that makes (store.Store).
	Changes(ctx context.Context, prefix string, since int64) (changes []store.KV, rev, count int64, err error)
}

// Tenants looks tenants up (tenancy.Auth): their quotas bound admission.
type Tenants interface {
	Tenant(ctx context.Context, name models.TenantName) (models.Tenant, error)
	// MayUse says whether a tenant may reserve to or from a host.
	MayUse(t models.Tenant, host string) bool
}

// Policy is how intents are admitted, kept and moved: what an operator
// sets (the command line's flags); a zero field takes its default.
type Policy struct {
	// Headroom is the fraction of every link never reserved; default 0.05.
	Headroom float64
	// Preemption lets a higher-priority intent displace lower ones.
	Preemption bool
	// PendingTimeout moves an intent that stayed Pending this long to
	// Failed; default DefaultPendingTimeout.
	PendingTimeout time.Duration
	// KeepFinished is how long a Rejected or Failed intent's record is
	// kept for its tenant to read; default DefaultKeepFinished.
	// MaxFinished bounds how many such records a tenant has (the oldest
	// go first); default DefaultMaxFinished. Neither counts against a
	// quota, so these bound what a tenant can store in etcd with
	// requests that are refused.
	KeepFinished time.Duration
	MaxFinished  int
	// TenantPinShare is the share of any switch's flow-pin table one
	// tenant may hold unless its MaxPinsPerSwitch says otherwise;
	// default DefaultTenantPinShare (tally.go).
	TenantPinShare float64
	// AdaptInterval is how often intents are checked against measured
	// load; default 5s.
	AdaptInterval time.Duration
}

// Config configures the intent manager.
type Config struct {
	Store Store
	Auth  Tenants
	Policy
	// MaxTxnOps bounds the etcd operations one commit carries (etcd's
	// --max-txn-ops, 128 by default); admissions arriving together share
	// a commit up to this.
	MaxTxnOps int
	// FlowPinEntries is the flow-pin table size per switch (0: unlimited).
	FlowPinEntries int
	// OnPins is told which switches' pins changed, to reconcile them.
	OnPins func([]models.SwitchID)
	// Utilization, if set, is the measured load of the link direction
	// leaving through a port (from telemetry), and whether it is known:
	// installed intents on hot links move to cooler paths (see adapt).
	Utilization func(models.Endpoint) (float64, bool)
	// RecentUtilization, if set, is the same over the last sampling
	// interval alone, with when that interval began and ended: a port
	// whose pins changed is judged by a reading taken after the change
	// (the smoothed one still carries the flows that left).
	RecentUtilization func(models.Endpoint) (u float64, from, to time.Time, ok bool)
	// Swept, if set, says this term's first read-back of the switches
	// is over. Until then Observe reads no intent's pin counters (at a
	// takeover with 100,000 intents that read is as large as the
	// read-back itself, and would compete with it for the switches), and
	// no intent is moved for load (adapt).
	Swept func() bool
	// Detected, if set, lists the elephant flows telemetry found that no
	// intent declares; every second they are pinned on paths chosen
	// together (see placeDetected).
	Detected func() []DetectedFlow
	// Leadership, if set, makes this manager decide only while its
	// replica leads, with every commit fenced on the term; a follower
	// keeps the intents' records current from etcd for reads and refuses
	// decisions with election.ErrNotLeader. Nil: always decide (one controller).
	Leadership election.Leader
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Scope is who is asking: an operator sees every tenant, a tenant only
// itself.
type Scope struct {
	Tenant   models.TenantName
	Operator bool
}

func (s Scope) sees(t models.TenantName) bool { return s.Operator || s.Tenant == t }

// CreateRequest asks for a new intent.
type CreateRequest struct {
	Tenant         models.TenantName
	Spec           models.IntentSpec
	IdempotencyKey string
	// BodyDigest identifies the request for idempotency checks.
	BodyDigest string
	DryRun     bool
}

// Outcome is an intent after a create or update, with where its flows
// went (or would go, for a dry run).
type Outcome struct {
	Intent models.Intent
	Fit    pathcalc.Fit
	// Replayed is true when an Idempotency-Key matched an earlier create.
	Replayed bool
	// Preempts lists the intents a dry run would displace.
	Preempts []string
	// QPHint says how many QPs per connection would do best (dry runs,
	// refusals, tight admissions).
	QPHint *models.QPHint
}

// RefusedError carries why an intent was refused and, when the refusal
// was stored (Rejected), the stored intent.
type RefusedError struct {
	Err    error
	Fit    pathcalc.Fit
	Intent *models.Intent
}

func (e *RefusedError) Error() string {
	if e.Fit.Reason != "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Fit.Reason)
	}
	return e.Err.Error()
}
func (e *RefusedError) Unwrap() error { return e.Err }

type idemRecord struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
}

// slotPort is the source port of a sampled intent's flows: no UDP
// source port is 0, so its keys are reservations that are never pinned
// on a switch.
const slotPort = 0

// flow is one pinned flow of an intent.
type flow struct {
	key  models.FlowKey
	src  models.Host
	dst  models.Host
	gbps float64
}

// slot says whether f is a sampled intent's reservation for a pair of
// hosts rather than a flow of its own (no pin on any switch).
func (f flow) slot() bool { return f.key.SrcPort == slotPort }

type entry struct {
	in models.Intent
	// stored is the intent as etcd last committed it (nil until its
	// first commit): what reads answer, as in holds decisions whose
	// commit may still be under way (the lock is not held across it).
	stored *models.Intent
	flows  []flow
	// gen is the pin generation that carries the intent's current pins:
	// the intent is Installed once every switch on its paths has been
	// reconciled at gen or later (and its entries are gone, if Deleted).
	gen      uint64
	switches []models.SwitchID
	pinned   bool
	since    time.Time // when it last entered Pending
	// pinnedOn counts its pins per switch, as counted in the pin tally
	// tallied (tally.go).
	pinnedOn []switchPins
	tallied  uint64
}

type refusal struct {
	keys []models.FlowKey
	why  string
	held int // pins the switch held after refusing these
}

// and is r with a later refusal's keys added, and its reason and room.
func (r refusal) and(later refusal) refusal {
	return refusal{keys: append(r.keys, later.keys...), why: later.why, held: later.held}
}

type learnedRoom struct {
	entries int
	until   time.Time
}

// learnedRoomFor is how long a switch's refusal caps its flow-pin room:
// then it is asked again (its memory may have been freed).
const learnedRoomFor = time.Minute

// newStoredEntry is an entry for an intent read from etcd.
func newStoredEntry(in models.Intent) *entry {
	stored := in
	return &entry{in: in, stored: &stored, since: in.Status.Updated}
}

// usageBook is each tenant's live intents and bandwidth, for its quota.
type usageBook map[models.TenantName]*tenantUsage

type tenantUsage struct {
	gbps    float64
	intents int
}

// Manager admits, stores and follows tenants' intents: it keeps the
// bandwidth ledger, turns admitted intents into flow-pin entries for the
// reconcilers, and moves each intent through its lifecycle. Every change
// goes through one loop that decides in memory and commits to etcd in
// batches; a request is answered only after its commit.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	m    *intentMetrics
	ops  chan *op
	kick chan struct{}

	// mu guards everything below but what has its own lock (the pin
	// table inside p, news, obs): the decision loop holds it to decide,
	// the API to read.
	mu sync.RWMutex
	// p is where the intents are placed: the ledger, the pins, the flows'
	// owners, what awaits a read-back, the detected elephants.
	p *placement
	// drained are the drained links of the fabric's down links, each with
	// its drain.
	drained   map[models.LinkID]string
	fabricGen uint64 // bumped by SetFabric; the loop replans when it moves
	planned   uint64
	idem      map[string]idemRecord // "<tenant>/<key hash>"
	idemOf    map[string]string     // intent ID → its idem key, to delete them together
	usage     usageBook
	// news is what the reconcilers report of switches, under its own
	// lock; trouble is the loop's account of it.
	news    *switchNews
	trouble switchTrouble
	retry   bool // capacity was freed: retry Pending and Degraded
	loaded  bool
	// adaptive is the state of adaptation (adapt) and of its hold-down.
	adaptive adaptState
	// jointWaitFrom is the placement round from which the joint
	// placement has waited for intents to be measured (0: not waiting;
	// see placeJoint).
	jointWaitFrom int
	// needReload is set when a commit failed without saying whether it
	// happened: memory is rebuilt from etcd before the next decision.
	needReload bool
	// term is the leader term decisions are made in (nil without leader
	// election); every commit carries its fence.
	term *election.Term
	// pinsReady: see PinsReady.
	pinsReady bool
	// followed is a follower's copy's state (followplace.go).
	followed followState
	// stats counts what the loop did, for Stats.
	stats Stats
	// obs is each intent's and each pinned elephant's measured rate, under
	// its own lock: it changes every second and is not worth an etcd
	// write.
	obs rates
	// fin keeps each tenant's finished records within MaxFinished.
	fin finishedRecords
}

// followState is a follower's copy of the intents: how far it followed,
// and whether it is placed as a new term would place it.
type followState struct {
	// rev is the highest revision a follower applied; ch is closed (and
	// replaced) whenever it grows.
	rev int64
	ch  chan struct{}
	// mirrored: the entries are a follower's copy of etcd's intents,
	// complete as of revision rev (a new term's load only catches it up).
	mirrored bool
	// A follower keeps its copy placed as a new term would place it
	// (followplace.go): the ledger, the pins and what awaits a read-back,
	// on the current fabric while placedValid (SetFabric clears it).
	// placedAside says some intent needs a decision (its paths or hosts
	// are gone), which the new term makes by replanning in full.
	placedValid bool
	placedAside bool
	// placing, while a placement is built (placeFollowed), collects what
	// the follower applies meanwhile; nil otherwise.
	placing *[]change
}

// adaptState is adaptation's memory: when each intent last moved, by
// either mover (hold-down, see movedLately), the adapt round (from 1)
// each hot intent was last looked at for a cooler path (adaptMaxTries),
// the round count, and its wait for changes of pins to land.
type adaptState struct {
	moved map[string]movedAt
	tried map[string]int
	round int
	due   bool
	pins  telemetry.PinWait
}

// Stats counts what the decision loop did, for tests and benchmarks.
type Stats struct {
	// Overcommitted counts batches that left the ledger over capacity
	// (never, unless a bug lets one through).
	Overcommitted int
	// DetectedRounds counts placement rounds of detected elephants,
	// DetectedMoves the elephants moved, DetectedQuality the last round's
	// placement.
	DetectedRounds  int
	DetectedMoves   int
	DetectedQuality pathcalc.Placed
	// AdaptRounds counts adapt rounds; AdaptMoves intents moved off links
	// measured hot; JointMoves intents moved to make room for detected
	// elephants; JointWaits the placement rounds in which that move was
	// held until the intents it would move are measured.
	AdaptRounds int
	AdaptMoves  int
	JointMoves  int
	JointWaits  int
}

// Stats returns what the loop did so far.
func (m *Manager) Stats() Stats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.stats
	s.AdaptRounds = m.adaptive.round
	return s
}

// rates are the measured rates, Gb/s: each intent's (view) and each
// pinned elephant's (see Observe).
type rates struct {
	mu       sync.Mutex
	byIntent map[string]float64
	byFlow   map[models.FlowKey]measuredRate
	// unmeasured are pinned intents with no rate yet (admitted or moved
	// before they were ever measured, or read only once so far): their
	// reservation is what they are taken to send (see pinnedLoad).
	unmeasured map[string]bool
}

// finishedRecords are each tenant's Rejected and Failed records, oldest
// first (IDs; one may since have changed or gone: it is skipped), to
// keep MaxFinished; rebuilt from the records when due.
type finishedRecords struct {
	byTenant map[models.TenantName][]string
	due      bool
}

// New returns the manager; Run loads intents from etcd and serves.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Auth == nil {
		return nil, errors.New("intents need a Store and an Auth")
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = 0.05
	}
	if cfg.Headroom < 0 || cfg.Headroom >= 1 {
		return nil, fmt.Errorf("headroom %v: want [0, 1)", cfg.Headroom)
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = DefaultPendingTimeout
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = 128
	}
	if cfg.AdaptInterval <= 0 {
		cfg.AdaptInterval = 5 * time.Second
	}
	if cfg.KeepFinished <= 0 {
		cfg.KeepFinished = DefaultKeepFinished
	}
	if cfg.MaxFinished <= 0 {
		cfg.MaxFinished = DefaultMaxFinished
	}
	if cfg.TenantPinShare <= 0 || cfg.TenantPinShare > 1 {
		cfg.TenantPinShare = DefaultTenantPinShare
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnPins == nil {
		cfg.OnPins = func([]models.SwitchID) {}
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger,
		ops: make(chan *op, 4096), kick: make(chan struct{}, 1),
		idem: map[string]idemRecord{}, idemOf: map[string]string{},
		usage: usageBook{},
		news:  newSwitchNews(), trouble: newSwitchTrouble(),
		obs:      rates{byIntent: map[string]float64{}},
		adaptive: adaptState{moved: map[string]movedAt{}, tried: map[string]int{}},
		fin:      finishedRecords{byTenant: map[models.TenantName][]string{}},
	}
	m.p = newPlacement(&m.cfg, nil, nil, map[string]*entry{}) // the manager's configuration, not a copy
	m.m = newIntentMetrics(cfg.Registerer, m.Counts)
	if cfg.Registerer != nil {
		for _, pinned := range []bool{true, false} {
			state := map[bool]string{true: "pinned", false: "unplaced"}[pinned]
			cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "accelnet_elephants", Help: "Detected elephant flows (sampled, not declared) by whether they are pinned.",
				ConstLabels: prometheus.Labels{"state": state},
			}, func() float64 {
				m.mu.RLock()
				defer m.mu.RUnlock()
				n := 0
				for _, el := range m.p.elephants {
					if (el.path != nil) == pinned {
						n++
					}
				}
				return float64(n)
			}))
		}
	}
	return m, nil
}

// Ready is nil once this replica can answer for the intents: a leader's
// loaded from etcd, a follower's copy listed (until then a follower
// would answer every list empty, and a takeover would have no copy to
// catch up).
func (m *Manager) Ready() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.loaded && !m.followed.mirrored {
		return errors.New("the intents are not read from etcd yet")
	}
	return nil
}

// takeBackRefused handles PinsRefused in the loop.
func (m *Manager) takeBackRefused(b *batch, now time.Time) {
	for sw, r := range m.trouble.refused {
		delete(m.trouble.refused, sw)
		m.p.room[sw] = learnedRoom{entries: r.held, until: now.Add(learnedRoomFor)}
		seen := map[string]bool{}
		for _, k := range r.keys {
			id, ok := m.p.flowOwner[k]
			e := m.p.all[id]
			if !ok || e == nil || seen[id] || !e.pinned {
				continue
			}
			seen[id] = true
			m.unpin(b, e)
			e.in.Status.Flows = clearPaths(e.in.Status.Flows)
			e.in.Status.ReservedGbps = nil
			m.setState(b, e, models.StatePending, fmt.Sprintf("%s refused its flow entries (%s); waiting for room there, its flows follow the routes", sw, r.why), now)
		}
		m.log.Warn("switch refused flow pins; their intents wait", "switch", sw, "pins", len(r.keys), "intents", len(seen), "room", r.held, "why", r.why)
	}
}

// SetFabric gives the manager the topology and the links that are down;
// intents on lost paths are moved or degraded, and degraded ones restored
// when paths return.
func (m *Manager) SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool, drained map[models.LinkID]string) {
	m.mu.Lock()
	m.p.snap, m.p.down, m.drained = snap, maps.Clone(down), maps.Clone(drained)
	m.fabricGen++
	m.followed.placedValid = false // a follower places its copy again
	m.mu.Unlock()
	m.wake()
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}
