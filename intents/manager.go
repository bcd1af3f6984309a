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
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
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

// Config configures the intent manager.
type Config struct {
	Store Store
	Auth  Tenants
	// Headroom is the fraction of every link never reserved; default 0.05.
	Headroom float64
	// Preemption lets a higher-priority intent displace lower ones.
	Preemption bool
	// PendingTimeout moves an intent that stayed Pending this long to
	// Failed; default 60s.
	PendingTimeout time.Duration
	// MaxTxnOps bounds the etcd operations one commit carries (etcd's
	// --max-txn-ops, 128 by default); admissions arriving together share
	// a commit up to this.
	MaxTxnOps int
	// KeepFinished is how long a Rejected or Failed intent's record is
	// kept for its tenant to read; default 1h. MaxFinished bounds how
	// many such records a tenant has (the oldest go first); default 100.
	// Neither counts against a quota, so these bound what a tenant can
	// store in etcd with requests that are refused.
	KeepFinished time.Duration
	MaxFinished  int
	// FlowPinEntries is the flow-pin table size per switch (0: unlimited).
	FlowPinEntries int
	// TenantPinShare is the share of any switch's flow-pin table one
	// tenant may hold unless its MaxPinsPerSwitch says otherwise;
	// default DefaultTenantPinShare (tally.go).
	TenantPinShare float64
	// OnPins is told which switches' pins changed, to reconcile them.
	OnPins func([]models.SwitchID)
	// Utilization, if set, is the measured load of the link direction
	// leaving through a port (from telemetry), and whether it is known:
	// installed intents on hot links move to cooler paths (see adapt).
	Utilization func(models.Endpoint) (float64, bool)
	// Swept, if set, says this term's first read-back of the switches
	// is over. Until then Observe reads no intent's pin counters (at a
	// takeover with 100,000 intents that read is as large as the
	// read-back itself, and would compete with it for the switches), and
	// no intent is moved for load (adapt).
	Swept func() bool
	// AdaptInterval is how often intents are checked against measured
	// load; default 5s.
	AdaptInterval time.Duration
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

	mu   sync.RWMutex
	snap *topology.Snapshot
	down map[models.LinkID]bool
	// drained are the drained links of down, each with its drain.
	drained   map[models.LinkID]string
	book      *pathcalc.Book
	fabricGen uint64 // bumped by SetFabric; the loop replans when it moves
	planned   uint64
	all       map[string]*entry // by intent ID
	flowOwner map[models.FlowKey]string
	idem      map[string]idemRecord // "<tenant>/<key hash>"
	idemOf    map[string]string     // intent ID → its idem key, to delete them together
	usage     map[models.TenantName]*tenantUsage
	pins      map[models.SwitchID]map[models.FlowKey]uint32
	// tally counts each tenant's pins per switch; it is replaced with pins.
	tally *pinTally
	gen   uint64
	// failures is each switch's last programming error, cleared once it
	// is synced again.
	failures map[models.SwitchID]string
	// refused are flow pins switches refused for good, not yet handled
	// by the loop; room is what a switch that refused pins for lack of
	// room was seen to hold, trusted over the P4Info's size for a while.
	refused map[models.SwitchID]refusal
	room    map[models.SwitchID]learnedRoom
	// changes logs, per switch, which pin keys changed at which generation
	// (for PinsDelta); entries at or below changesBase are trimmed once the
	// switch confirmed them.
	changes     map[models.SwitchID][]pinChange
	changesBase map[models.SwitchID]uint64
	synced      map[models.SwitchID]uint64
	awaiting    map[string]bool // Admitted or Deleted, waiting for switches
	// What the awaiting intents wait on, so a batch looks only at those
	// something changed for (every batch looked at every awaiting intent:
	// after a restart with 100,000 intents, each waiting for its switches'
	// first read-back, that was a third of the restart's CPU): awaitingOn
	// lists them by the switches they waited on when last looked at (ids
	// no longer awaiting are dropped as met), awaitNew are the ones that
	// started waiting (again), touched the switches read back or failed
	// since the last look.
	awaitingOn map[models.SwitchID]map[string]bool
	awaitNew   map[string]bool
	// settleNext are awaiting intents a full batch left to the next one
	// (ids that are no longer awaiting by then are skipped).
	settleNext []string
	touched    map[models.SwitchID]bool
	retry      bool // capacity was freed: retry Pending and Degraded
	loaded     bool
	// moved is when each intent last moved, by either mover (hold-down,
	// see movedLately); round counts adapt rounds.
	moved map[string]movedAt
	// tried is the adapt round (from 1) each hot intent was last looked
	// at for a cooler path (adaptMaxTries).
	tried    map[string]int
	round    int
	adaptDue bool
	// needReload is set when a commit failed without saying whether it
	// happened: memory is rebuilt from etcd before the next decision.
	needReload bool
	// term is the leader term decisions are made in (nil without leader
	// election); every commit carries its fence.
	term *election.Term
	// pinsReady: see PinsReady.
	pinsReady bool
	// followed is the highest revision a follower applied; followedCh is
	// closed (and replaced) whenever it grows.
	followed   int64
	followedCh chan struct{}
	// mirrored: all is a follower's copy of etcd's intents, complete as
	// of revision followed (a new term's load only catches it up).
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

	// overcommitted counts batches that left the ledger over capacity.
	overcommitted int
	// detectedRounds counts placement rounds of detected elephants.
	detectedRounds int
	// detectedQuality is the last placement of detected elephants.
	detectedQuality pathcalc.Placed

	// observed is each intent's measured rate (Gb/s), kept apart from the
	// stored status: it changes every second and is not worth an etcd write.
	obsMu    sync.Mutex
	observed map[string]float64
	// flowRates is each pinned elephant's measured rate (see Observe).
	flowRates map[models.FlowKey]measuredRate

	// elephants are the detected flows placed (or not) by placeDetected:
	// soft state, not stored (a new leader finds them again; the same
	// replica leading again keeps them: keepDetectedLocked).
	elephants     map[models.FlowKey]*elephant
	detectedMoves int
	// detectedAt is when the elephants were last placed; restoreDetected
	// says a load kept them and their pins come back at the next replan.
	detectedAt      time.Time
	restoreDetected bool
	restoredUntil   time.Time // kept elephants stay pinned until then
	// adaptMoves counts intents moved off links measured hot (adapt);
	// jointMoves, intents moved to make room for detected elephants.
	adaptMoves, jointMoves int

	// finished are each tenant's Rejected and Failed records, oldest
	// first (IDs; one may since have changed or gone: it is skipped), to
	// keep MaxFinished; rebuilt from the records when finishedDue.
	finished    map[models.TenantName][]string
	finishedDue bool
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
		all: map[string]*entry{}, flowOwner: map[models.FlowKey]string{}, idem: map[string]idemRecord{}, idemOf: map[string]string{},
		usage: map[models.TenantName]*tenantUsage{}, pins: map[models.SwitchID]map[models.FlowKey]uint32{}, tally: newPinTally(), elephants: map[models.FlowKey]*elephant{},
		synced: map[models.SwitchID]uint64{}, awaiting: map[string]bool{},
		awaitNew: map[string]bool{}, awaitingOn: map[models.SwitchID]map[string]bool{}, touched: map[models.SwitchID]bool{},
		changes: map[models.SwitchID][]pinChange{}, changesBase: map[models.SwitchID]uint64{},
		observed: map[string]float64{}, failures: map[models.SwitchID]string{},
		refused: map[models.SwitchID]refusal{}, room: map[models.SwitchID]learnedRoom{},
		moved: map[string]movedAt{}, tried: map[string]int{}, finished: map[models.TenantName][]string{},
	}
	m.m = newIntentMetrics(cfg.Registerer, m.Counts)
	if cfg.Registerer != nil {
		for _, pinned := range []bool{true, false} {
			state := map[bool]string{true: "pinned", false: "unplaced"}[pinned]
			cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "accelnet_elephants", Help: "Detected elephant flows (sampled, not declared) by whether they are pinned.",
				ConstLabels: prometheus.Labels{"state": state},
			}, func() float64 { return float64(m.countDetected(pinned)) }))
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
	if !m.loaded && !m.mirrored {
		return errors.New("the intents are not read from etcd yet")
	}
	return nil
}

// --- what the reconcilers see ---

// PinsReady says the pins are known: the intents were loaded (for this
// term) and placed on the current fabric at least once. Until then a
// switch's pins must not be compared with anything: they would read as
// "none", and the reconciler would delete every installed intent's
// entries only to put them back a moment later.
func (m *Manager) PinsReady() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pinsReady
}

// UnsettledPins are the keys of sw's pins (PinsFor) that no stored
// Installed intent vouches for: pins of intents not yet confirmed on all
// their switches, and of elephants found by sampling. A new leader reads
// these by key and takes the rest of sw's pins from its handover mark
// (controller.UnsettledOverlay).
func (m *Manager) UnsettledPins(sw models.SwitchID) []models.FlowKey {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []models.FlowKey
	for k := range m.pins[sw] {
		if e := m.all[m.flowOwner[k]]; e == nil || e.in.Status.State != models.StateInstalled {
			out = append(out, k)
		}
	}
	return out
}

// PinsFor returns the flow pins switch sw should have and the generation
// they belong to (for Synced).
func (m *Manager) PinsFor(sw models.SwitchID) ([]models.FlowPin, uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]models.FlowPin, 0, len(m.pins[sw]))
	for k, port := range m.pins[sw] {
		out = append(out, models.FlowPin{Key: k, Port: port})
	}
	return out, m.gen
}

type pinChange struct {
	gen uint64
	key models.FlowKey
}

// PinsDelta returns the pins of sw that changed after generation since.
func (m *Manager) PinsDelta(sw models.SwitchID, since uint64) (map[models.FlowKey]uint32, uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if since < m.changesBase[sw] {
		return nil, m.gen, false
	}
	log := m.changes[sw]
	i := sort.Search(len(log), func(i int) bool { return log[i].gen > since })
	out := make(map[models.FlowKey]uint32, len(log)-i)
	for _, c := range log[i:] {
		out[c.key] = m.pins[sw][c.key] // 0 when gone
	}
	return out, m.gen, true
}

// logChange records that key changed on sw at the current generation.
func (m *Manager) logChange(sw models.SwitchID, key models.FlowKey) {
	m.changes[sw] = append(m.changes[sw], pinChange{gen: m.gen, key: key})
}

// await marks an intent as waiting for its switches.
func (m *Manager) await(id string) {
	m.awaiting[id] = true
	m.awaitNew[id] = true // indexed by its switches once looked at
}

// waitOn indexes an awaiting intent by the switches it waits on.
func (m *Manager) waitOn(id string, switches []models.SwitchID) {
	for _, sw := range switches {
		if m.awaitingOn[sw] == nil {
			m.awaitingOn[sw] = map[string]bool{}
		}
		m.awaitingOn[sw][id] = true
	}
}

// touch records that something an intent waiting on sw waits for changed.
func (m *Manager) touch(sw models.SwitchID) { m.touched[sw] = true }

// toSettle takes the awaiting intents to look at: those that started
// waiting (fresh: not yet indexed by their switches), those waiting on a
// switch touched since the last look, and those the last batch left
// (settleNext).
func (m *Manager) toSettle() (ids []string, fresh map[string]bool) {
	fresh = m.awaitNew
	for id := range fresh {
		ids = append(ids, id)
	}
	m.awaitNew = map[string]bool{}
	ids = append(ids, m.settleNext...)
	m.settleNext = m.settleNext[:0]
	for sw := range m.touched {
		for id := range m.awaitingOn[sw] {
			if !m.awaiting[id] {
				delete(m.awaitingOn[sw], id) // met (or gone) since
				continue
			}
			ids = append(ids, id)
		}
	}
	clear(m.touched)
	slices.Sort(ids)
	return slices.Compact(ids), fresh
}

// Synced records that sw was read back matching its pins of generation gen.
func (m *Manager) Synced(sw models.SwitchID, gen uint64) {
	m.mu.Lock()
	if gen > m.synced[sw] {
		m.synced[sw] = gen
	}
	delete(m.failures, sw)
	m.touch(sw)
	if gen > m.changesBase[sw] {
		// The switch has everything up to gen: forget those changes.
		log := m.changes[sw]
		i := sort.Search(len(log), func(i int) bool { return log[i].gen > gen })
		m.changes[sw] = append(log[:0:0], log[i:]...)
		m.changesBase[sw] = gen
	}
	wake := len(m.awaiting) > 0
	m.mu.Unlock()
	if wake {
		m.wake()
	}
}

// ProgramFailed records that writing a switch failed; intents waiting for
// it say so in their reason until it succeeds.
// PinsRefused takes back the intents whose flow pins sw refused for good:
// the loop unpins them (their flows follow the routes), releases their
// reservations and leaves them Pending with the switch's reason, and
// caps sw's flow-pin room at what it accepted, so nothing else is
// admitted onto it that it cannot hold.
func (m *Manager) PinsRefused(sw models.SwitchID, keys []models.FlowKey, why string, held int) {
	defer m.wake()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.refused[sw]
	r.keys = append(r.keys, keys...)
	r.why, r.held = why, held
	m.refused[sw] = r
}

// takeBackRefused handles PinsRefused in the loop.
func (m *Manager) takeBackRefused(b *batch, now time.Time) {
	for sw, r := range m.refused {
		delete(m.refused, sw)
		m.room[sw] = learnedRoom{entries: r.held, until: now.Add(learnedRoomFor)}
		seen := map[string]bool{}
		for _, k := range r.keys {
			id, ok := m.flowOwner[k]
			e := m.all[id]
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

func (m *Manager) ProgramFailed(sw models.SwitchID, err error) {
	defer m.wake()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures[sw] = err.Error()
	m.touch(sw)
}

// SetFabric gives the manager the topology and the links that are down;
// intents on lost paths are moved or degraded, and degraded ones restored
// when paths return.
func (m *Manager) SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool, drained map[models.LinkID]string) {
	m.mu.Lock()
	m.snap, m.down, m.drained = snap, maps.Clone(down), maps.Clone(drained)
	m.fabricGen++
	m.placedValid = false // a follower places its copy again
	m.mu.Unlock()
	m.wake()
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}
