package controller

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
)

const (
	// KeyIntents holds one models.Intent (spec and status) per key:
	// intents/<tenant>/<id>. The key's mod revision is the intent's ETag.
	KeyIntents = Prefix + "intents/"
	// KeyIdempotency maps a tenant's Idempotency-Key to the intent it
	// created: idempotency/<tenant>/<sha256 of the key> → idemRecord.
	KeyIdempotency = Prefix + "idempotency/"
)

var (
	// ErrNoCapacity means an intent does not fit; the error says where.
	ErrNoCapacity = errors.New("controller: not enough capacity")
	// ErrQuota means the tenant's quota would be exceeded.
	ErrQuota = errors.New("controller: tenant quota exceeded")
	// ErrPrecondition means If-Match named a revision that is not current.
	ErrPrecondition = errors.New("controller: revision mismatch")
	// ErrIdempotencyReuse means an Idempotency-Key came back with a
	// different request body.
	ErrIdempotencyReuse = errors.New("controller: idempotency key reused with a different request")
	// ErrFlowTaken means another live intent already pins one of the flows.
	ErrFlowTaken = errors.New("controller: flow already pinned by another intent")
	// ErrTableFull means a switch's flow-pin table cannot take the entries.
	ErrTableFull = errors.New("controller: flow-pin table full")
)

// MaxFlowsPerIntent bounds the flows one intent expands to (pairs × ports).
const MaxFlowsPerIntent = 4096

// IntentsConfig configures the intent manager.
type IntentsConfig struct {
	Store *Store
	Auth  *Auth
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
	// FlowPinEntries is the flow-pin table size per switch (0: unlimited).
	FlowPinEntries int
	// OnPins is told which switches' pins changed, to reconcile them.
	OnPins func([]models.SwitchID)
	// Utilization, if set, is the measured load of the link direction
	// leaving through a port (from telemetry), and whether it is known:
	// installed intents on hot links move to cooler paths (see adapt).
	Utilization func(models.Endpoint) (float64, bool)
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
	// decisions with ErrNotLeader. Nil: always decide (one controller).
	Leadership Leader
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

// flow is one pinned flow of an intent.
type flow struct {
	key  models.FlowKey
	src  models.Host
	dst  models.Host
	gbps float64
}

type entry struct {
	in    models.Intent
	flows []flow
	// gen is the pin generation that carries the intent's current pins:
	// the intent is Installed once every switch on its paths has been
	// reconciled at gen or later (and its entries are gone, if Deleted).
	gen      uint64
	switches []models.SwitchID
	pinned   bool
	since    time.Time // when it last entered Pending
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

type tenantUsage struct {
	gbps    float64
	intents int
}

// Intents admits, stores and follows tenants' intents: it keeps the
// bandwidth ledger, turns admitted intents into flow-pin entries for the
// reconcilers, and moves each intent through its lifecycle. Every change
// goes through one loop that decides in memory and commits to etcd in
// batches; a request is answered only after its commit.
type Intents struct {
	cfg  IntentsConfig
	log  *slog.Logger
	m    *intentMetrics
	ops  chan *op
	kick chan struct{}

	mu        sync.RWMutex
	snap      *topology.Snapshot
	down      map[models.LinkID]bool
	book      *pathcalc.Book
	fabricGen uint64 // bumped by SetFabric; the loop replans when it moves
	planned   uint64
	all       map[string]*entry // by intent ID
	flowOwner map[models.FlowKey]string
	idem      map[string]idemRecord // "<tenant>/<key hash>"
	idemOf    map[string]string     // intent ID → its idem key, to delete them together
	usage     map[models.TenantName]*tenantUsage
	pins      map[models.SwitchID]map[models.FlowKey]uint32
	gen       uint64
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
	retry       bool            // capacity was freed: retry Pending and Degraded
	loaded      bool
	// movedAt is the adapt round each intent last moved in (hold-down);
	// round counts adapt rounds.
	movedAt  map[string]int
	round    int
	adaptDue bool
	// needReload is set when a commit failed without saying whether it
	// happened: memory is rebuilt from etcd before the next decision.
	needReload bool
	// term is the leader term decisions are made in (nil without leader
	// election); every commit carries its fence.
	term *Term
	// pinsReady: see PinsReady.
	pinsReady bool
	// followed is the highest revision a follower applied; followedCh is
	// closed (and replaced) whenever it grows.
	followed   int64
	followedCh chan struct{}

	// overcommitted counts batches that left the ledger over capacity.
	overcommitted int
	// detectedRounds counts placement rounds of detected elephants;
	// jointMovedAt is the round each intent last moved to make room for
	// them (see placeJoint).
	detectedRounds int
	jointMovedAt   map[string]int
	// detectedQuality is the last placement of detected elephants.
	detectedQuality pathcalc.Placed

	// observed is each intent's measured rate (Gb/s), kept apart from the
	// stored status: it changes every second and is not worth an etcd write.
	obsMu    sync.Mutex
	observed map[string]float64
	// flowRates is each pinned elephant's measured rate (see Observe).
	flowRates map[models.FlowKey]measuredRate

	// elephants are the detected flows placed (or not) by placeDetected:
	// soft state, not stored (a new leader finds them again).
	elephants     map[models.FlowKey]*elephant
	detectedMoves int
}

// NewIntents returns the manager; Run loads intents from etcd and serves.
func NewIntents(cfg IntentsConfig) (*Intents, error) {
	if cfg.Store == nil || cfg.Auth == nil {
		return nil, errors.New("controller: intents need a Store and an Auth")
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = 0.05
	}
	if cfg.Headroom < 0 || cfg.Headroom >= 1 {
		return nil, fmt.Errorf("controller: headroom %v: want [0, 1)", cfg.Headroom)
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 60 * time.Second
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = 128
	}
	if cfg.AdaptInterval <= 0 {
		cfg.AdaptInterval = 5 * time.Second
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
	m := &Intents{
		cfg: cfg, log: cfg.Logger,
		ops: make(chan *op, 4096), kick: make(chan struct{}, 1),
		all: map[string]*entry{}, flowOwner: map[models.FlowKey]string{}, idem: map[string]idemRecord{}, idemOf: map[string]string{},
		usage: map[models.TenantName]*tenantUsage{}, pins: map[models.SwitchID]map[models.FlowKey]uint32{}, elephants: map[models.FlowKey]*elephant{},
		synced: map[models.SwitchID]uint64{}, awaiting: map[string]bool{},
		changes: map[models.SwitchID][]pinChange{}, changesBase: map[models.SwitchID]uint64{},
		observed: map[string]float64{}, failures: map[models.SwitchID]string{},
		refused: map[models.SwitchID]refusal{}, room: map[models.SwitchID]learnedRoom{},
		movedAt: map[string]int{}, jointMovedAt: map[string]int{},
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

// --- what the reconcilers see ---

// PinsReady says the pins are known: the intents were loaded (for this
// term) and placed on the current fabric at least once. Until then a
// switch's pins must not be compared with anything: they would read as
// "none", and the reconciler would delete every installed intent's
// entries only to put them back a moment later.
func (m *Intents) PinsReady() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pinsReady
}

// PinsFor returns the flow pins switch sw should have and the generation
// they belong to (for Synced).
func (m *Intents) PinsFor(sw models.SwitchID) ([]models.FlowPin, uint64) {
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
func (m *Intents) PinsDelta(sw models.SwitchID, since uint64) (map[models.FlowKey]uint32, uint64, bool) {
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
func (m *Intents) logChange(sw models.SwitchID, key models.FlowKey) {
	m.changes[sw] = append(m.changes[sw], pinChange{gen: m.gen, key: key})
}

// Synced records that sw was read back matching its pins of generation gen.
func (m *Intents) Synced(sw models.SwitchID, gen uint64) {
	m.mu.Lock()
	if gen > m.synced[sw] {
		m.synced[sw] = gen
	}
	delete(m.failures, sw)
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
func (m *Intents) PinsRefused(sw models.SwitchID, keys []models.FlowKey, why string, held int) {
	defer m.wake()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.refused[sw]
	r.keys = append(r.keys, keys...)
	r.why, r.held = why, held
	m.refused[sw] = r
}

// takeBackRefused handles PinsRefused in the loop.
func (m *Intents) takeBackRefused(b *batch, now time.Time) {
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

func (m *Intents) ProgramFailed(sw models.SwitchID, err error) {
	defer m.wake()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures[sw] = err.Error()
}

// SetFabric gives the manager the topology and the links that are down;
// intents on lost paths are moved or degraded, and degraded ones restored
// when paths return.
func (m *Intents) SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool) {
	m.mu.Lock()
	m.snap, m.down = snap, maps.Clone(down)
	m.fabricGen++
	m.mu.Unlock()
	m.wake()
}

func (m *Intents) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// --- reads ---

// Get returns one intent the scope may see.
func (m *Intents) Get(scope Scope, id string) (models.Intent, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.all[id]
	if !ok || !scope.sees(e.in.Tenant) {
		return models.Intent{}, fmt.Errorf("%w: intent %q", ErrNotFound, id)
	}
	return m.view(e.in), nil
}

// ListOptions filter and page a listing.
type ListOptions struct {
	State models.IntentState
	// After is the last ID of the previous page.
	After string
	Limit int
}

// List returns the scope's intents in ID (creation) order, and the ID to
// pass as After for the next page ("" when this is the last).
func (m *Intents) List(scope Scope, opts ListOptions) ([]models.Intent, string) {
	if opts.Limit <= 0 || opts.Limit > 1000 {
		opts.Limit = 100
	}
	m.mu.RLock()
	ids := make([]string, 0, len(m.all))
	for id, e := range m.all {
		if id > opts.After && scope.sees(e.in.Tenant) && (opts.State == "" || e.in.Status.State == opts.State) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > opts.Limit {
		ids = ids[:opts.Limit]
		next = ids[len(ids)-1]
	}
	out := make([]models.Intent, len(ids))
	for i, id := range ids {
		out[i] = m.view(m.all[id].in)
	}
	m.mu.RUnlock()
	return out, next
}

// Capacity is the bandwidth one more flow from src to dst could reserve.
type Capacity struct {
	Src           string  `json:"src"`
	Dst           string  `json:"dst"`
	AvailableGbps float64 `json:"available_gbps"`
	Bottleneck    string  `json:"bottleneck"`
	Headroom      float64 `json:"headroom"`
	ReservedMLU   float64 `json:"reserved_mlu"`
}

// Capacity answers how much src can reserve toward dst now.
func (m *Intents) Capacity(src, dst string) (Capacity, error) {
	m.mu.Lock() // the book caches paths as it goes: not a reader
	defer m.mu.Unlock()
	if m.book == nil {
		return Capacity{}, ErrNoTopology
	}
	var v models.ValidationError
	s, errS := resolveHost(m.snap, src)
	d, errD := resolveHost(m.snap, dst)
	if errS != nil {
		v.Errors = append(v.Errors, models.FieldError{Field: "src", Message: errS.Error()})
	}
	if errD != nil {
		v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: errD.Error()})
	}
	if len(v.Errors) > 0 {
		return Capacity{}, &v
	}
	free, at := m.book.Available(s, d)
	return Capacity{Src: s.Name, Dst: d.Name, AvailableGbps: free, Bottleneck: at, Headroom: m.cfg.Headroom, ReservedMLU: m.book.MLU()}, nil
}

// Usage is a tenant's live reservations.
func (m *Intents) Usage(t models.TenantName) (gbps float64, intents int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if u := m.usage[t]; u != nil {
		return u.gbps, u.intents
	}
	return 0, 0
}

// Counts is how many intents are in each state.
func (m *Intents) Counts() map[models.IntentState]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[models.IntentState]int{}
	for _, e := range m.all {
		out[e.in.Status.State]++
	}
	return out
}

// view is an intent as clients see it: the stored record plus its
// observed rate. Status slices and maps are replaced, never edited in
// place, so a shallow copy of the struct is safe to hand out.
func (m *Intents) view(in models.Intent) models.Intent {
	m.obsMu.Lock()
	in.Status.ObservedGbps = m.observed[in.ID]
	m.obsMu.Unlock()
	return in
}

// PinCounterReader reads the byte counters of flow-pin entries.
type PinCounterReader interface {
	ReadPinCounters(ctx context.Context, sw models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error)
}

// Observe samples the counters of every installed intent's first-hop
// pins, and of every pinned detected elephant's, and keeps each intent's
// delivered rate and each pinned elephant's, until ctx ends. A switch
// that cannot be read leaves its flows' rates as they were (the read is
// retried next time). A pin's direct counter counts exactly its flow's
// bytes, so once an elephant is pinned its rate is measured, not
// estimated from samples (see MeasuredRate).
//
// Detected elephants are read every second (or every interval, if
// shorter): their rates decide whether they stay pinned. Intents are read
// every interval: at tens of thousands of intents, reading each second
// would cost more than admitting them.
func (m *Intents) Observe(ctx context.Context, r PinCounterReader, interval time.Duration) {
	every := min(interval, time.Second)
	intentMeter := rateMeter[models.FlowKey]{Span: interval}
	elephantMeter := rateMeter[models.FlowKey]{Span: 2 * every}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastIntents time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !m.Leading() {
				continue // the leader reads the switches
			}
		}
		readIntents := time.Since(lastIntents) >= interval-every/2
		if readIntents {
			lastIntents = time.Now()
		}
		owner := map[models.FlowKey]string{} // the intent of an intent's flow
		elephant := map[models.FlowKey]bool{}
		bySwitch := map[models.SwitchID][]models.FlowKey{}
		m.mu.RLock()
		for id, e := range m.all {
			if !readIntents || e.in.Status.State != models.StateInstalled {
				continue
			}
			for i, f := range e.flows { // Status.Flows[i] is flows[i]'s placement
				if i < len(e.in.Status.Flows) && len(e.in.Status.Flows[i].Path) > 0 {
					first := e.in.Status.Flows[i].Path[0].Switch
					owner[f.key] = id
					bySwitch[first] = append(bySwitch[first], f.key)
				}
			}
		}
		for key, el := range m.elephants {
			if len(el.path) > 0 {
				elephant[key] = true
				bySwitch[el.path[0].Switch] = append(bySwitch[el.path[0].Switch], key)
			}
		}
		m.mu.RUnlock()
		m.obsMu.Lock()
		prevIntents, prevElephants := m.observed, m.flowRates
		m.obsMu.Unlock()
		rates := map[string]float64{}
		if !readIntents {
			rates = maps.Clone(prevIntents)
		}
		elephantRates := map[models.FlowKey]measuredRate{}
		for sw, keys := range bySwitch {
			rctx, cancel := context.WithTimeout(ctx, every)
			sent := m.cfg.Now()
			got, err := r.ReadPinCounters(rctx, sw, keys)
			cancel()
			if err != nil {
				m.log.Debug("cannot read pin counters", "switch", sw, "err", err)
				for _, k := range keys {
					if id, ok := owner[k]; ok {
						rates[id] = prevIntents[id]
					}
					if fr, ok := prevElephants[k]; ok && elephant[k] {
						elephantRates[k] = fr
					}
				}
				continue
			}
			// The switch read its counters between request and answer:
			// timed at the middle, a slow answer errs by half as much.
			answered := m.cfg.Now()
			now := sent.Add(answered.Sub(sent) / 2)
			for k, b := range got {
				if id, ok := owner[k]; ok {
					if g, _, ok := intentMeter.observe(k, b, now); ok {
						rates[id] += g
					}
				}
				if elephant[k] {
					if g, latest, ok := elephantMeter.observe(k, b, now); ok {
						elephantRates[k] = measuredRate{gbps: g, latest: latest, at: now}
					}
				}
			}
		}
		if readIntents {
			intentMeter.retain(func(k models.FlowKey) bool { _, ok := owner[k]; return ok })
		}
		elephantMeter.retain(func(k models.FlowKey) bool { return elephant[k] })
		m.obsMu.Lock()
		m.observed, m.flowRates = rates, elephantRates
		m.obsMu.Unlock()
	}
}

// measuredRate is a pinned flow's rate from its pin's direct counter.
type measuredRate struct {
	gbps float64 // over 2 s: what is reported and judged
	// latest is over the last read alone: what a link's load, measured
	// over a shorter interval, holds of the flow now (see PinnedLoad).
	latest float64
	at     time.Time
}

// MeasuredRate is a pinned detected elephant's rate (Gb/s) from its
// first-hop pin's direct counter, if it was measured recently (within
// maxAge).
func (m *Intents) MeasuredRate(k models.FlowKey, maxAge time.Duration) (float64, bool) {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	r, ok := m.flowRates[k]
	if !ok || m.cfg.Now().Sub(r.at) > maxAge {
		return 0, false
	}
	return r.gbps, true
}

// --- writes ---

// op is one change decided by the loop. decide runs with mu held and adds
// etcd operations to the batch; done receives its outcome after commit.
type op struct {
	decide func(b *batch) (Outcome, error)
	done   chan opResult
	out    Outcome
	err    error
}

type opResult struct {
	out Outcome
	err error
}

// batch collects one commit: etcd operations, how to undo the in-memory
// changes if the commit fails, and what to finish once it succeeds.
type batch struct {
	m        *Intents
	ops      []clientv3.Op
	cmps     []clientv3.Cmp
	undo     []func()
	after    []func(rev int64)
	touched  map[models.SwitchID]bool
	bytes    int
	maxOps   int
	maxBytes int
	// keyAt is the index in ops of each key's operation: etcd refuses a
	// transaction that names a key twice, so a later change to a key
	// replaces its earlier operation (the later state is the one to keep).
	keyAt map[string]int
}

// setOp adds (or replaces) the operation on key.
func (b *batch) setOp(key string, op clientv3.Op) {
	if b.keyAt == nil {
		b.keyAt = map[string]int{}
	}
	if i, ok := b.keyAt[key]; ok {
		prev := b.ops[i]
		b.ops[i] = op
		b.undo = append(b.undo, func() { b.ops[i] = prev })
		return
	}
	b.keyAt[key] = len(b.ops)
	b.ops = append(b.ops, op)
	b.undo = append(b.undo, func() { delete(b.keyAt, key) })
}

type mark struct{ ops, cmps, undo, after int }

func (b *batch) mark() mark { return mark{len(b.ops), len(b.cmps), len(b.undo), len(b.after)} }

// rollback undoes what was decided since k: a failed op leaves the batch
// as it found it.
func (b *batch) rollback(k mark) {
	for i := len(b.undo) - 1; i >= k.undo; i-- {
		b.undo[i]()
	}
	b.ops, b.cmps, b.undo, b.after = b.ops[:k.ops], b.cmps[:k.cmps], b.undo[:k.undo], b.after[:k.after]
}

func (b *batch) full() bool { return len(b.ops) >= b.maxOps-2 || b.bytes >= b.maxBytes }

// put stores e's intent and stamps its revision after the commit; until
// then its revision is 0, so no If-Match can match a change in flight.
func (b *batch) put(e *entry) {
	in := e.in
	in.Revision = 0
	data, err := json.Marshal(in)
	if err != nil { // plain data; only a non-finite number could do this
		b.m.log.Error("cannot encode intent; not stored", "intent", e.in.ID, "err", err)
		return
	}
	b.setOp(intentKey(e.in.Tenant, e.in.ID), clientv3.OpPut(intentKey(e.in.Tenant, e.in.ID), string(data)))
	b.bytes += len(data)
	prev := e.in.Revision
	e.in.Revision = 0
	b.undo = append(b.undo, func() { e.in.Revision = prev })
	b.after = append(b.after, func(rev int64) { e.in.Revision = rev })
}

func intentKey(t models.TenantName, id string) string { return KeyIntents + string(t) + "/" + id }

func (m *Intents) submit(ctx context.Context, decide func(b *batch) (Outcome, error)) (Outcome, error) {
	if !m.Leading() {
		return Outcome{}, ErrNotLeader
	}
	o := &op{decide: decide, done: make(chan opResult, 1)}
	select {
	case m.ops <- o:
	case <-ctx.Done():
		return Outcome{}, fmt.Errorf("%w: %v", ErrStoreUnavailable, ctx.Err())
	}
	select {
	case r := <-o.done:
		return r.out, r.err
	case <-ctx.Done():
		// The decision may still commit; the client sees a timeout, as it
		// would with any store.
		return Outcome{}, fmt.Errorf("%w: %v", ErrStoreUnavailable, ctx.Err())
	}
}

// Run loads the intents from etcd and then serves changes until ctx ends.
// With leader election it decides only during this replica's terms, and
// follows etcd in between.
func (m *Intents) Run(ctx context.Context) error {
	if m.cfg.Leadership == nil {
		m.lead(ctx, nil)
		return nil
	}
	for ctx.Err() == nil {
		changed := m.cfg.Leadership.Changed()
		if t := m.cfg.Leadership.Term(); t != nil {
			m.lead(t.Context(), t)
			continue
		}
		m.follow(ctx, changed)
	}
	return nil
}

// Leading says whether this manager decides now.
func (m *Intents) Leading() bool {
	return m.cfg.Leadership == nil || m.cfg.Leadership.Term() != nil
}

// follow keeps the intents' records current from etcd (for reads) until
// ctx ends or the role changes, answering decisions with ErrNotLeader.
func (m *Intents) follow(ctx context.Context, changed <-chan struct{}) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.cfg.Store.follow(fctx, KeyIntents, m.applyFollowed)
	}()
	for {
		select {
		case <-ctx.Done():
		case <-changed:
		case o := <-m.ops:
			o.done <- opResult{err: ErrNotLeader}
			continue
		}
		break
	}
	cancel()
	<-done
}

// applyFollowed applies intents listed or watched in etcd to a follower's
// records. The ledger is not kept: a new term rebuilds it (load).
func (m *Intents) applyFollowed(kvs []kv, reset bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if reset {
		m.all = map[string]*entry{}
	}
	for _, kv := range kvs {
		if kv.deleted {
			if i := strings.LastIndexByte(kv.key, '/'); i >= 0 {
				delete(m.all, kv.key[i+1:])
			}
			continue
		}
		in, ok := m.decode(kv.key, kv.value, kv.revision)
		if ok {
			m.all[in.ID] = &entry{in: in, since: in.Status.Updated}
		}
	}
	for _, kv := range kvs {
		m.followed = max(m.followed, kv.revision)
	}
	if m.followedCh != nil {
		close(m.followedCh)
		m.followedCh = nil
	}
	m.loaded = false // decisions need a full load first
	m.pinsReady = false
}

// WaitFollowed waits (until ctx ends) for a follower's records to
// include etcd revision rev: a write it forwarded to the leader is then
// visible in its own reads. On the leader it returns at once.
func (m *Intents) WaitFollowed(ctx context.Context, rev int64) {
	for {
		m.mu.Lock()
		if m.term != nil || m.cfg.Leadership == nil || m.followed >= rev {
			m.mu.Unlock()
			return
		}
		if m.followedCh == nil {
			m.followedCh = make(chan struct{})
		}
		ch := m.followedCh
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// decode reads a stored intent, stamping its revision.
func (m *Intents) decode(key string, value []byte, rev int64) (models.Intent, bool) {
	var in models.Intent
	if err := json.Unmarshal(value, &in); err != nil {
		m.log.Error("undecodable intent in etcd; skipping", "key", key, "err", err)
		return in, false
	}
	in.Revision = rev
	return in, true
}

// lead decides until ctx ends (the term, or everything); t is the term
// (nil without leader election).
func (m *Intents) lead(ctx context.Context, t *Term) {
	m.mu.Lock()
	m.term = t
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.term = nil
		m.pinsReady = false
		m.mu.Unlock()
		m.failQueued()
	}()
	backoff := 100 * time.Millisecond
	for {
		err := m.load(ctx)
		if err == nil {
			break
		}
		m.log.Warn("cannot load intents from etcd", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	m.runBatch(ctx, nil, false) // place what was loaded now, not at the next tick
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	adapt := time.NewTicker(m.cfg.AdaptInterval)
	defer adapt.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-adapt.C:
			if m.cfg.Utilization != nil && m.reloadIfNeeded(ctx) == nil {
				m.mu.Lock()
				m.adaptDue = true
				m.mu.Unlock()
				m.runBatch(ctx, nil, false)
			}
		case o := <-m.ops:
			if err := m.reloadIfNeeded(ctx); err != nil {
				o.done <- opResult{err: err}
				m.failQueued()
				continue
			}
			m.runBatch(ctx, o, false)
		case <-m.kick:
			if m.reloadIfNeeded(ctx) == nil {
				m.runBatch(ctx, nil, false)
			}
		case <-tick.C:
			if m.reloadIfNeeded(ctx) == nil {
				m.runBatch(ctx, nil, true)
			}
		}
	}
}

func (m *Intents) reloadIfNeeded(ctx context.Context) error {
	m.mu.RLock()
	reload := m.needReload
	m.mu.RUnlock()
	if !reload {
		return nil
	}
	if err := m.load(ctx); err != nil {
		return err
	}
	m.log.Info("intents reloaded from etcd after an uncertain commit")
	return nil
}

func (m *Intents) failQueued() {
	err := fmt.Errorf("%w: shutting down", ErrStoreUnavailable)
	if m.cfg.Leadership != nil {
		err = ErrNotLeader // the term ended; the next leader decides
	}
	for {
		select {
		case o := <-m.ops:
			o.done <- opResult{err: err}
		default:
			return
		}
	}
}

// load rebuilds the in-memory view from etcd: the intents with their
// stored paths (re-reserved on the next SetFabric) and idempotency keys.
func (m *Intents) load(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, m.cfg.Store.timeout)
	defer cancel()
	resp, err := m.cfg.Store.cli.Get(lctx, KeyIntents, clientv3.WithPrefix())
	if err != nil {
		return m.cfg.Store.wrap(err, "list intents")
	}
	idem, err := m.cfg.Store.cli.Get(lctx, KeyIdempotency, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision))
	if err != nil {
		return m.cfg.Store.wrap(err, "list idempotency keys")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Start from etcd's truth: after a commit whose outcome is unknown,
	// memory may disagree with it either way.
	m.all, m.flowOwner, m.idem, m.idemOf = map[string]*entry{}, map[models.FlowKey]string{}, map[string]idemRecord{}, map[string]string{}
	m.usage, m.awaiting = map[models.TenantName]*tenantUsage{}, map[string]bool{}
	m.gen++
	for sw := range m.pins {
		m.changes[sw], m.changesBase[sw] = nil, m.gen // reconcilers compare in full once
	}
	m.pins, m.book = map[models.SwitchID]map[models.FlowKey]uint32{}, nil
	m.elephants = map[models.FlowKey]*elephant{}
	m.needReload = false
	m.pinsReady = false
	for _, kv := range resp.Kvs {
		in, ok := m.decode(string(kv.Key), kv.Value, kv.ModRevision)
		if !ok {
			continue
		}
		m.all[in.ID] = &entry{in: in, since: in.Status.Updated}
		if in.Status.State.Live() {
			u := m.tenantUsage(in.Tenant)
			u.gbps += in.Spec.TotalGbps()
			u.intents++
		}
	}
	for _, kv := range idem.Kvs {
		var r idemRecord
		if json.Unmarshal(kv.Value, &r) == nil {
			k := strings.TrimPrefix(string(kv.Key), KeyIdempotency)
			m.idem[k], m.idemOf[r.ID] = r, k
		}
	}
	m.loaded = true
	m.fabricGen++ // plan (re-reserve) once a fabric is known
	m.log.Info("intents loaded", "intents", len(resp.Kvs))
	return nil
}

// addUsage changes a tenant's live reservations by gbps over n intents,
// undone with the batch if it does not commit.
func (m *Intents) addUsage(b *batch, t models.TenantName, gbps float64, n int) {
	u := m.tenantUsage(t)
	u.gbps += gbps
	u.intents += n
	b.undo = append(b.undo, func() { u.gbps -= gbps; u.intents -= n })
}

// checkQuota refuses n more intents of gbps in total for tenant t, on top
// of what it holds now less the intent except (one being replaced).
func (m *Intents) checkQuota(t models.Tenant, gbps float64, n int, except string) error {
	var held float64
	count := 0
	if u := m.usage[t.Name]; u != nil {
		held, count = u.gbps, u.intents
	}
	if old, ok := m.all[except]; ok && old.in.Status.State.Live() {
		held -= old.in.Spec.TotalGbps()
		count--
	}
	if t.MaxIntents > 0 && count+n > t.MaxIntents {
		return &RefusedError{Err: fmt.Errorf("%w: %d live intents + %d asked > %d allowed", ErrQuota, count, n, t.MaxIntents)}
	}
	if t.MaxGbps > 0 && held+gbps > t.MaxGbps+1e-9 {
		return &RefusedError{Err: fmt.Errorf("%w: %.1f Gb/s reserved + %.1f asked > %.1f allowed", ErrQuota, held, gbps, t.MaxGbps)}
	}
	return nil
}

func (m *Intents) tenantUsage(t models.TenantName) *tenantUsage {
	u := m.usage[t]
	if u == nil {
		u = &tenantUsage{}
		m.usage[t] = u
	}
	return u
}

// holds says whether etcd still has term t's election key (a failed
// fence, rather than a lost race on an intent's revision).
func (m *Intents) holds(ctx context.Context, t *Term) bool {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Store.timeout)
	defer cancel()
	resp, err := m.cfg.Store.cli.Get(ctx, t.Key)
	return err != nil || (len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == t.Rev)
}

// runBatch decides first and whatever else is queued (up to the commit's
// budget), does the housekeeping that is due, commits once, and answers.
func (m *Intents) runBatch(ctx context.Context, first *op, tick bool) {
	m.mu.Lock()
	b := &batch{m: m, touched: map[models.SwitchID]bool{}, maxOps: m.cfg.MaxTxnOps, maxBytes: 1 << 20}
	var decided []*op
	m.replanIfDue(b)
	run := func(o *op) {
		k := b.mark()
		o.out, o.err = o.decide(b)
		var refused *RefusedError
		if o.err != nil && !(errors.As(o.err, &refused) && refused.Intent != nil) {
			b.rollback(k)
		}
		decided = append(decided, o)
	}
	if first != nil {
		run(first)
	drain:
		for !b.full() {
			select {
			case o := <-m.ops:
				run(o)
			default:
				break drain
			}
		}
	}
	m.housekeep(b, tick)
	m.checkLedger()
	var err error
	if len(b.ops) > 0 {
		var rev int64
		start := time.Now()
		cmps := b.cmps
		if m.term != nil {
			cmps = append(slices.Clip(cmps), m.term.Fence())
		}
		rev, err = m.cfg.Store.commit(ctx, cmps, b.ops)
		switch {
		case errors.Is(err, ErrConflict) && m.term != nil && !m.holds(ctx, m.term):
			err = ErrNotLeader // deposed: a newer leader decides from etcd
		case err != nil && ctx.Err() != nil && !errors.Is(err, ErrStoreUnavailable):
			err = fmt.Errorf("%w: leadership ended during the commit (etcd unreachable?): its outcome is unknown; retry with the same Idempotency-Key", ErrStoreUnavailable)
		}
		m.m.commitSeconds.Observe(time.Since(start).Seconds())
		m.m.commitOps.Observe(float64(len(b.ops)))
		if err == nil {
			for _, f := range b.after {
				f(rev)
			}
			// Answer with the committed intents (revisions stamped).
			for _, o := range decided {
				if e, ok := m.all[o.out.Intent.ID]; ok {
					o.out.Intent = e.in
				}
				var refused *RefusedError
				if errors.As(o.err, &refused) && refused.Intent != nil {
					if e, ok := m.all[refused.Intent.ID]; ok {
						in := e.in
						refused.Intent = &in
					}
				}
			}
		} else {
			for i := len(b.undo) - 1; i >= 0; i-- {
				b.undo[i]()
			}
			if !errors.Is(err, ErrConflict) {
				m.needReload = true // it may have committed after all
			}
			m.log.Warn("intent commit failed; answered as not done", "ops", len(b.ops), "err", err)
		}
	}
	touched := slices.Collect(maps.Keys(b.touched))
	if err == nil && !m.pinsReady && m.loaded && m.snap != nil && m.planned == m.fabricGen {
		m.pinsReady = true // every switch may be compared now, pins or not
		touched = touched[:0]
		for _, sw := range m.snap.Switches() {
			touched = append(touched, sw.Name)
		}
	}
	m.mu.Unlock()
	for _, o := range decided {
		m.m.decisions.WithLabelValues(decisionResult(o.err, err)).Inc()
		switch {
		case err != nil && o.err == nil:
			o.done <- opResult{err: err}
		case err != nil:
			var refused *RefusedError
			if errors.As(o.err, &refused) && refused.Intent != nil {
				o.done <- opResult{err: err} // the Rejected record did not commit either
			} else {
				o.done <- opResult{err: o.err}
			}
		default:
			o.done <- opResult{out: o.out, err: o.err}
		}
	}
	if err == nil && len(touched) > 0 {
		m.cfg.OnPins(touched)
	}
}

// checkLedger verifies after every batch of decisions that no resource is
// reserved beyond its capacity less the headroom (pathcalc.Book.Check):
// every admission, move and re-placement must have asked for room first.
// A violation is a bug; it is logged and counted, and tests fail on it.
func (m *Intents) checkLedger() {
	if m.book == nil {
		return
	}
	if err := m.book.Check(); err != nil {
		m.overcommitted++
		m.m.overcommitted.Inc()
		m.log.Error("bandwidth ledger over-committed", "err", err)
	}
}

// Overcommitted is how many batches of decisions left the ledger over
// capacity (see checkLedger): 0 unless there is a bug.
func (m *Intents) Overcommitted() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.overcommitted
}

// Create admits a new intent (or, for a dry run, says whether it would be).
func (m *Intents) Create(ctx context.Context, req CreateRequest) (Outcome, error) {
	if err := req.Spec.Validate(); err != nil {
		return Outcome{}, err
	}
	if err := req.Tenant.Validate(); err != nil {
		return Outcome{}, err
	}
	if _, err := m.cfg.Auth.Tenant(ctx, req.Tenant); err != nil {
		return Outcome{}, err
	}
	if req.DryRun {
		m.mu.Lock()
		defer m.mu.Unlock()
		b := &batch{m: m, touched: map[models.SwitchID]bool{}}
		out, err := m.decideCreate(b, req)
		for i := len(b.undo) - 1; i >= 0; i-- {
			b.undo[i]()
		}
		return out, err
	}
	return m.submit(ctx, func(b *batch) (Outcome, error) { return m.decideCreate(b, req) })
}

func newIntentID(now time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%011x%08x", uint64(now.UnixMilli()), binary.BigEndian.Uint32(r[:]))
}

func (m *Intents) decideCreate(b *batch, req CreateRequest) (Outcome, error) {
	if !m.loaded || m.book == nil {
		return Outcome{}, fmt.Errorf("%w: intents are not loaded yet", ErrNoTopology)
	}
	idemKey := ""
	if req.IdempotencyKey != "" {
		sum := sha256.Sum256([]byte(req.IdempotencyKey))
		idemKey = string(req.Tenant) + "/" + hex.EncodeToString(sum[:])
		if r, ok := m.idem[idemKey]; ok {
			if r.Digest != req.BodyDigest {
				return Outcome{}, ErrIdempotencyReuse
			}
			if e, ok := m.all[r.ID]; ok {
				return Outcome{Intent: e.in, Replayed: true}, nil
			}
			// Deleted in this very batch: its record goes with it.
			return Outcome{}, fmt.Errorf("%w: the intent this Idempotency-Key created (%s) is being deleted", ErrIdempotencyReuse, r.ID)
		}
	}
	now := m.cfg.Now().UTC()
	id := newIntentID(now)
	for m.all[id] != nil {
		id = newIntentID(now)
	}
	e := &entry{in: models.Intent{ID: id, Tenant: req.Tenant, Created: now, Spec: req.Spec}}
	if e.in.Spec.Class == "" {
		e.in.Spec.Class = models.ClassLosslessRDMA
	}
	out, err := m.admit(b, e, req.DryRun)
	if req.DryRun {
		return out, err
	}
	var refused *RefusedError
	if err != nil && !(errors.As(err, &refused) && refused.Intent != nil) {
		return Outcome{}, err
	}
	m.all[id] = e
	b.undo = append(b.undo, func() { delete(m.all, id) })
	b.put(e)
	b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(intentKey(e.in.Tenant, id)), "=", 0))
	if idemKey != "" {
		rec := idemRecord{ID: id, Digest: req.BodyDigest}
		data, _ := json.Marshal(rec)
		b.setOp(KeyIdempotency+idemKey, clientv3.OpPut(KeyIdempotency+idemKey, string(data)))
		m.idem[idemKey], m.idemOf[id] = rec, idemKey
		b.undo = append(b.undo, func() { delete(m.idem, idemKey); delete(m.idemOf, id) })
	}
	if err != nil {
		refused.Intent = &e.in
		return Outcome{}, err
	}
	return Outcome{Intent: e.in, Fit: out.Fit}, nil
}

// admit places e's flows and, unless dryRun, reserves them and moves e to
// Admitted; a refusal moves it to Rejected (returned as a RefusedError
// with Intent set, so the caller stores it) unless the request itself is
// wrong (unknown hosts, taken flows, quota), which stores nothing.
func (m *Intents) admit(b *batch, e *entry, dryRun bool) (Outcome, error) {
	flows, err := m.resolve(e.in.Tenant, e.in.Spec)
	if err != nil {
		return Outcome{}, err
	}
	for _, f := range flows {
		if owner, ok := m.flowOwner[f.key]; ok && owner != e.in.ID {
			return Outcome{}, &RefusedError{Err: fmt.Errorf("%w: %s is pinned by intent %s", ErrFlowTaken, f.key, owner)}
		}
	}
	t, err := m.cfg.Auth.Tenant(context.Background(), e.in.Tenant)
	if err != nil {
		return Outcome{}, err
	}
	if err := m.checkQuota(t, e.in.Spec.TotalGbps(), 1, e.in.ID); err != nil {
		return Outcome{}, err
	}
	cons, err := m.constraints(e)
	if err != nil {
		return Outcome{}, err
	}
	demands := make([]pathcalc.Demand, len(flows))
	for i, f := range flows {
		demands[i] = pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}
	}
	fit := m.book.Fit(demands, cons)
	var victims []*entry
	if !fit.Fits && m.cfg.Preemption {
		victims, fit = m.preempt(b, e, demands, cons, fit)
	}
	out := Outcome{Fit: fit}
	// How many QPs per connection would do best: asked in a dry run, and
	// told when the intent does not fit or its links are tight (it is
	// placements' work, so not for every admission).
	var hint *models.QPHint
	if dryRun || !fit.Fits || fit.MLU > qpHintAbove {
		if h := m.qpHint(flows); h.Better() || dryRun {
			hint = &h
		}
	}
	out.QPHint = hint
	for _, v := range victims {
		out.Preempts = append(out.Preempts, v.in.ID)
	}
	if !fit.Fits {
		if dryRun {
			return out, nil
		}
		e.flows = flows
		reason := fit.Reason
		if hint != nil && hint.Better() {
			fit.Reason += "; " + hint.String()
			reason = fit.Reason
		}
		e.in.SetState(models.StateRejected, reason, m.cfg.Now().UTC())
		e.in.Status.QPHint = hint
		return Outcome{}, &RefusedError{Err: ErrNoCapacity, Fit: fit, Intent: &e.in}
	}
	if err := m.checkTableRoom(e, flows, fit.Paths); err != nil {
		return Outcome{}, &RefusedError{Err: err, Fit: fit}
	}
	if dryRun {
		return out, nil
	}
	now := m.cfg.Now().UTC()
	for _, v := range victims {
		m.unpin(b, v)
		m.setState(b, v, models.StatePending, fmt.Sprintf("preempted by %s/%s (priority %d)", e.in.Tenant, e.in.ID, e.in.Spec.Priority), now)
	}
	e.flows = flows
	m.pin(b, e, fit.Paths)
	reason := fmt.Sprintf("%d flows reserved; max reserved link utilization %.2f", len(flows), fit.MLU)
	if hint != nil {
		reason += "; " + hint.String()
	}
	e.in.Status.QPHint = hint
	e.in.SetState(models.StateAdmitted, reason, now)
	m.addUsage(b, e.in.Tenant, e.in.Spec.TotalGbps(), 1)
	return out, nil
}

// resolve expands a spec into flows: one per (pair, source port), the
// pair's bandwidth split evenly over its ports.
func (m *Intents) resolve(tenant models.TenantName, spec models.IntentSpec) ([]flow, error) {
	var v models.ValidationError
	type pair struct {
		src, dst models.Host
		gbps     float64
	}
	var pairs []pair
	if c := spec.Collective; c != nil {
		hosts := make([]models.Host, len(c.Endpoints))
		for i, name := range c.Endpoints {
			h, err := resolveHost(m.snap, name)
			if err != nil {
				v.Errors = append(v.Errors, models.FieldError{Field: fmt.Sprintf("collective.endpoints[%d]", i), Message: err.Error()})
			}
			hosts[i] = h
		}
		if len(v.Errors) > 0 {
			return nil, &v
		}
		switch c.Pattern {
		case models.PatternRingAllReduce:
			for i := range hosts {
				pairs = append(pairs, pair{hosts[i], hosts[(i+1)%len(hosts)], c.GbpsPerGPU})
			}
		case models.PatternAllToAll:
			share := c.GbpsPerGPU / float64(len(hosts)-1)
			for i := range hosts {
				for j := range hosts {
					if i != j {
						pairs = append(pairs, pair{hosts[i], hosts[j], share})
					}
				}
			}
		}
	} else {
		s, errS := resolveHost(m.snap, spec.Src)
		d, errD := resolveHost(m.snap, spec.Dst)
		if errS != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: "src", Message: errS.Error()})
		}
		if errD != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: errD.Error()})
		}
		if errS == nil && errD == nil && s.Name == d.Name {
			v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: "same host as src"})
		}
		if len(v.Errors) > 0 {
			return nil, &v
		}
		pairs = []pair{{s, d, spec.Gbps}}
	}
	ports := spec.SrcPorts.Len()
	if n := len(pairs) * ports; n > MaxFlowsPerIntent {
		return nil, &models.ValidationError{Errors: []models.FieldError{{Field: "src_ports", Message: fmt.Sprintf("%d pairs × %d ports = %d flows; at most %d per intent", len(pairs), ports, n, MaxFlowsPerIntent)}}}
	}
	flows := make([]flow, 0, len(pairs)*ports)
	for _, p := range pairs {
		for port := int(spec.SrcPorts.First); port <= int(spec.SrcPorts.Last); port++ {
			flows = append(flows, flow{
				key: models.FlowKey{Src: p.src.IP, Dst: p.dst.IP, SrcPort: uint16(port)},
				src: p.src, dst: p.dst, gbps: p.gbps / float64(ports),
			})
		}
	}
	return flows, nil
}

func resolveHost(snap *topology.Snapshot, name string) (models.Host, error) {
	if ip, err := netip.ParseAddr(name); err == nil {
		h, err := snap.HostByIP(ip)
		if err != nil {
			return h, fmt.Errorf("no host has address %s", ip)
		}
		return h, nil
	}
	h, err := snap.Host(name)
	if err != nil {
		return h, fmt.Errorf("no host named %q in the fabric", name)
	}
	return h, nil
}

func (m *Intents) constraints(e *entry) (pathcalc.PathConstraints, error) {
	c := e.in.Spec.Constraints
	out := pathcalc.PathConstraints{MaxHops: c.MaxHops, AvoidSwitches: map[models.SwitchID]bool{}, AvoidLinks: map[models.LinkID]bool{}}
	var v models.ValidationError
	for i, sw := range c.AvoidSwitches {
		if _, err := m.snap.Switch(sw); err != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: fmt.Sprintf("constraints.avoid_switches[%d]", i), Message: fmt.Sprintf("no switch %q in the fabric", sw)})
		}
		out.AvoidSwitches[sw] = true
	}
	for i, l := range c.AvoidLinks {
		if _, err := m.snap.Link(l); err != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: fmt.Sprintf("constraints.avoid_links[%d]", i), Message: fmt.Sprintf("no link %q in the fabric", l)})
		}
		out.AvoidLinks[l] = true
	}
	if id := c.DisjointFrom; id != "" {
		other, ok := m.all[id]
		if !ok || other.in.Tenant != e.in.Tenant {
			v.Errors = append(v.Errors, models.FieldError{Field: "constraints.disjoint_from", Message: fmt.Sprintf("tenant %s has no intent %q", e.in.Tenant, id)})
		} else {
			for _, f := range other.in.Status.Flows {
				for _, p := range f.Path {
					if l, ok := m.snap.LinkAt(p); ok {
						out.AvoidLinks[l.ID()] = true
					}
				}
			}
		}
	}
	if len(v.Errors) > 0 {
		return out, &v
	}
	return out, nil
}

// qpHintAbove is the max reserved utilization past which an admission
// also says how many QPs per connection would do best.
const qpHintAbove = 0.9

// qpHint groups an intent's flows into connections (host pairs) and asks
// the ledger how many QPs per connection come closest to the best.
func (m *Intents) qpHint(flows []flow) models.QPHint {
	type pair struct{ src, dst string }
	index := map[pair]int{}
	var conns []pathcalc.Demand
	for _, f := range flows {
		k := pair{f.src.Name, f.dst.Name}
		i, ok := index[k]
		if !ok {
			i = len(conns)
			index[k] = i
			conns = append(conns, pathcalc.Demand{Src: f.src, Dst: f.dst})
		}
		conns[i].Gbps += f.gbps
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	return m.book.QPHint(ctx, conns, len(flows)/max(len(conns), 1), MaxFlowsPerIntent)
}

// checkTableRoom refuses pins that would overflow a switch's flow-pin table.
func (m *Intents) checkTableRoom(e *entry, flows []flow, paths [][]models.Endpoint) error {
	now := m.cfg.Now()
	// limit is sw's flow-pin room, if any is known: the P4Info's size, or
	// less if the switch recently refused entries for lack of room.
	limit := func(sw models.SwitchID) (int, bool) {
		l := m.cfg.FlowPinEntries
		if r, ok := m.room[sw]; ok && now.Before(r.until) && (l <= 0 || r.entries < l) {
			return r.entries, true
		}
		return l, l > 0
	}
	add := map[models.SwitchID]int{}
	for i, p := range paths {
		for _, hop := range p {
			if owner, ok := m.flowOwner[flows[i].key]; ok && owner == e.in.ID {
				continue // replacing its own entry
			}
			add[hop.Switch]++
		}
	}
	for sw, n := range add {
		l, known := limit(sw)
		if have := len(m.pins[sw]); known && have+n > l {
			return fmt.Errorf("%w: %s has %d of %d entries; %d more needed", ErrTableFull, sw, have, l, n)
		}
	}
	return nil
}

// pin reserves e's flows on paths, installs their pins, and records the
// paths in its status.
func (m *Intents) pin(b *batch, e *entry, paths [][]models.Endpoint) {
	m.gen++
	e.gen, e.pinned = m.gen, true
	e.in.Status.Flows = make([]models.FlowStatus, len(e.flows))
	reserved := map[string]float64{}
	seen := map[models.SwitchID]bool{}
	e.switches = e.switches[:0]
	for i, f := range e.flows {
		path := paths[i]
		e.in.Status.Flows[i] = models.FlowStatus{Src: f.src.Name, Dst: f.dst.Name, SrcPort: f.key.SrcPort, Gbps: f.gbps, Path: path}
		_ = m.book.Reserve(f.src, path, f.gbps) // paths come from this book's Fit
		for _, r := range m.book.Resources(f.src, path) {
			reserved[r] += f.gbps
		}
		m.flowOwner[f.key] = e.in.ID
		m.dropDetected(b, f.key) // declared now: the intent's pins replace it
		for _, hop := range path {
			if m.pins[hop.Switch] == nil {
				m.pins[hop.Switch] = map[models.FlowKey]uint32{}
			}
			m.pins[hop.Switch][f.key] = hop.Port
			m.logChange(hop.Switch, f.key)
			b.touched[hop.Switch] = true
			if !seen[hop.Switch] {
				seen[hop.Switch] = true
				e.switches = append(e.switches, hop.Switch)
			}
		}
	}
	e.in.Status.ReservedGbps = reserved
	m.awaiting[e.in.ID] = true
	b.undo = append(b.undo, func() { m.unpinNow(e) })
}

// unpin releases e's reservation and removes its pins.
func (m *Intents) unpin(b *batch, e *entry) {
	if !e.pinned {
		return
	}
	flows, status := e.flows, e.in.Status.Flows
	for _, sw := range e.switches {
		b.touched[sw] = true
	}
	m.unpinNow(e)
	m.retry = true
	b.undo = append(b.undo, func() { m.repin(e, flows, status) })
}

func (m *Intents) unpinNow(e *entry) {
	if !e.pinned {
		return
	}
	m.gen++
	e.gen, e.pinned = m.gen, false
	for i, f := range e.flows {
		if i < len(e.in.Status.Flows) {
			_ = m.book.Reserve(f.src, e.in.Status.Flows[i].Path, -f.gbps)
		}
		if m.flowOwner[f.key] == e.in.ID {
			delete(m.flowOwner, f.key)
		}
		for _, sw := range e.switches {
			if pins := m.pins[sw]; pins != nil {
				delete(pins, f.key)
				m.logChange(sw, f.key)
			}
		}
	}
}

// repin restores pins exactly as they were (undo of unpin).
func (m *Intents) repin(e *entry, flows []flow, status []models.FlowStatus) {
	b := &batch{m: m, touched: map[models.SwitchID]bool{}}
	e.flows = flows
	paths := make([][]models.Endpoint, len(status))
	for i, f := range status {
		paths[i] = f.Path
	}
	m.pin(b, e, paths)
	e.in.Status.Flows = status
}

// setState moves e to state and stores it.
func (m *Intents) setState(b *batch, e *entry, state models.IntentState, reason string, now time.Time) {
	prev := e.in
	wasLive := prev.Status.State.Live()
	e.in.SetState(state, reason, now)
	if state == models.StatePending {
		e.since = now
	}
	switch isLive := state.Live(); {
	case isLive && !wasLive:
		m.addUsage(b, e.in.Tenant, e.in.Spec.TotalGbps(), 1)
	case !isLive && wasLive:
		m.addUsage(b, e.in.Tenant, -e.in.Spec.TotalGbps(), -1)
	}
	b.undo = append(b.undo, func() { e.in.Status = prev.Status })
	b.put(e)
}

// preempt frees capacity for e by displacing lower-priority intents on
// the bottleneck, lowest priority (then newest) first. It returns the
// victims and the fit with them gone; when even that does not fit it
// puts everything back and returns the original fit.
func (m *Intents) preempt(b *batch, e *entry, demands []pathcalc.Demand, cons pathcalc.PathConstraints, fit pathcalc.Fit) ([]*entry, pathcalc.Fit) {
	var victims []*entry
	type pinned struct {
		flows  []flow
		status []models.FlowStatus
	}
	var saved []pinned
	restore := func() {
		for i, v := range victims {
			m.repin(v, saved[i].flows, saved[i].status)
		}
	}
	for !fit.Fits && fit.Bottleneck != "" {
		var cand *entry
		for _, o := range m.all {
			if !o.pinned || o.in.Spec.Priority >= e.in.Spec.Priority || o.in.ID == e.in.ID {
				continue
			}
			if _, uses := o.in.Status.ReservedGbps[fit.Bottleneck]; !uses {
				continue
			}
			if cand == nil || o.in.Spec.Priority < cand.in.Spec.Priority ||
				(o.in.Spec.Priority == cand.in.Spec.Priority && o.in.ID > cand.in.ID) {
				cand = o
			}
		}
		if cand == nil {
			break
		}
		saved = append(saved, pinned{cand.flows, cand.in.Status.Flows})
		m.unpinNow(cand)
		victims = append(victims, cand)
		fit = m.book.Fit(demands, cons)
	}
	if !fit.Fits {
		restore()
		return nil, m.book.Fit(demands, cons)
	}
	// The victims are unpinned for real by admit (which records undo);
	// put them back here so that happens in one place.
	restore()
	return victims, fit
}

// Update replaces an intent's spec if ifMatch is its current revision;
// the new spec is admitted on its own terms (the old reservation is not
// counted against it) or the update is refused and nothing changes.
func (m *Intents) Update(ctx context.Context, scope Scope, id string, spec models.IntentSpec, ifMatch int64) (Outcome, error) {
	if err := spec.Validate(); err != nil {
		return Outcome{}, err
	}
	return m.submit(ctx, func(b *batch) (Outcome, error) {
		e, ok := m.all[id]
		if !ok || !scope.sees(e.in.Tenant) {
			return Outcome{}, fmt.Errorf("%w: intent %q", ErrNotFound, id)
		}
		if e.in.Revision != ifMatch {
			return Outcome{}, fmt.Errorf("%w: intent %s is at revision %d, not %d", ErrPrecondition, id, e.in.Revision, ifMatch)
		}
		// etcd checks it too, so a write by another replica is not lost.
		b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(intentKey(e.in.Tenant, id)), "=", ifMatch))
		if e.in.Status.State == models.StateDeleted {
			return Outcome{}, fmt.Errorf("%w: intent %q is being deleted", ErrNotFound, id)
		}
		if m.book == nil {
			return Outcome{}, ErrNoTopology
		}
		prev, prevFlows := e.in, e.flows
		b.undo = append(b.undo, func() { e.in, e.flows = prev, prevFlows })
		m.unpin(b, e)
		if prev.Status.State.Live() { // admit counts it afresh
			m.addUsage(b, e.in.Tenant, -prev.Spec.TotalGbps(), -1)
		}
		e.in.Spec = spec
		if e.in.Spec.Class == "" {
			e.in.Spec.Class = models.ClassLosslessRDMA
		}
		e.in.Status.State = "" // not live while it is re-admitted
		out, err := m.admit(b, e, false)
		if err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				refused.Intent = nil // a refused update stores nothing; the batch rolls it back
			}
			return Outcome{}, err
		}
		last := &e.in.Status.Events[len(e.in.Status.Events)-1]
		last.Reason = "updated: " + last.Reason
		e.in.Status.Reason = last.Reason
		b.put(e)
		out.Intent = e.in
		return out, nil
	})
}

// Delete releases an intent and removes its entries from the switches;
// the record goes away once the switches confirm.
func (m *Intents) Delete(ctx context.Context, scope Scope, id string) (models.Intent, error) {
	out, err := m.submit(ctx, func(b *batch) (Outcome, error) {
		e, ok := m.all[id]
		if !ok || !scope.sees(e.in.Tenant) {
			return Outcome{}, fmt.Errorf("%w: intent %q", ErrNotFound, id)
		}
		if e.in.Status.State == models.StateDeleted {
			return Outcome{Intent: e.in}, nil
		}
		now := m.cfg.Now().UTC()
		if !e.pinned {
			m.setState(b, e, models.StateDeleted, "deleted", now)
			out := Outcome{Intent: e.in}
			m.remove(b, e)
			return out, nil
		}
		n := len(e.switches)
		m.unpin(b, e)
		m.setState(b, e, models.StateDeleted, fmt.Sprintf("deleted; removing its entries from %d switches", n), now)
		m.awaiting[id] = true
		return Outcome{Intent: e.in}, nil
	})
	return out.Intent, err
}

// housekeep does what is due in this batch, within its budget: restore or
// move intents after a fabric change or freed capacity, promote intents
// whose switches confirmed their entries, drop deleted ones whose entries
// are gone, and fail intents pending too long.
func (m *Intents) housekeep(b *batch, tick bool) {
	if !m.loaded {
		return
	}
	now := m.cfg.Now().UTC()
	if len(m.refused) > 0 {
		m.takeBackRefused(b, now)
	}
	if m.adaptDue && m.book != nil && !b.full() {
		m.adaptDue = false
		m.adapt(b, now)
	}
	if m.retry && m.book != nil && !b.full() {
		m.retry = false
		m.retryWaiting(b, now)
	}
	for id := range m.awaiting {
		if b.full() {
			break
		}
		e := m.all[id]
		if e == nil {
			delete(m.awaiting, id)
			continue
		}
		if !m.confirmed(e) {
			m.reportFailure(b, e, now)
			continue
		}
		delete(m.awaiting, id)
		b.undo = append(b.undo, func() { m.awaiting[id] = true })
		switch e.in.Status.State {
		case models.StateAdmitted:
			m.setState(b, e, models.StateInstalled, fmt.Sprintf("entries confirmed by read-back on %d switches", len(e.switches)), now)
		case models.StateDeleted:
			m.remove(b, e)
		}
	}
	if tick && m.book != nil {
		m.placeDetected(b)
	}
	if tick {
		for _, e := range m.all {
			if b.full() {
				break
			}
			if e.in.Status.State == models.StatePending && now.Sub(e.since) > m.cfg.PendingTimeout {
				m.setState(b, e, models.StateFailed, fmt.Sprintf("pending for over %s: %s", m.cfg.PendingTimeout, e.in.Status.Reason), now)
			}
		}
	}
}

// remove deletes e's record; it must hold no reservation.
func (m *Intents) remove(b *batch, e *entry) {
	id := e.in.ID
	b.setOp(intentKey(e.in.Tenant, id), clientv3.OpDelete(intentKey(e.in.Tenant, id)))
	delete(m.all, id)
	delete(m.awaiting, id)
	b.undo = append(b.undo, func() { m.all[id] = e })
	if k, ok := m.idemOf[id]; ok {
		rec := m.idem[k]
		b.setOp(KeyIdempotency+k, clientv3.OpDelete(KeyIdempotency+k))
		delete(m.idem, k)
		delete(m.idemOf, id)
		b.undo = append(b.undo, func() { m.idem[k], m.idemOf[id] = rec, k })
	}
}

// replanIfDue rebuilds the ledger when the fabric changed (or intents
// were reloaded), before this batch's decisions see it.
func (m *Intents) replanIfDue(b *batch) {
	if !m.loaded || m.fabricGen == m.planned || m.snap == nil {
		return
	}
	prev := m.planned
	m.planned = m.fabricGen
	b.undo = append(b.undo, func() { m.planned = prev })
	m.replan(b, m.cfg.Now().UTC())
}

// reportFailure updates an Admitted intent's reason when a switch on its
// paths failed to take its entries (once per distinct error).
func (m *Intents) reportFailure(b *batch, e *entry, now time.Time) {
	if e.in.Status.State != models.StateAdmitted {
		return
	}
	for _, sw := range e.switches {
		msg, failed := m.failures[sw]
		if !failed || m.synced[sw] >= e.gen {
			continue
		}
		reason := fmt.Sprintf("programming %s failed (%s); retrying", sw, msg)
		if e.in.Status.Reason != reason {
			m.setState(b, e, models.StateAdmitted, reason, now)
		}
		return
	}
}

func (m *Intents) confirmed(e *entry) bool {
	for _, sw := range e.switches {
		if m.synced[sw] < e.gen {
			return false
		}
	}
	return true
}

// replan rebuilds the ledger for the current fabric: intents whose paths
// still work keep them; the others are placed again or degraded.
func (m *Intents) replan(b *batch, now time.Time) {
	book, err := pathcalc.NewBook(m.snap, m.down, m.cfg.Headroom)
	if err != nil {
		m.log.Error("cannot build the bandwidth ledger", "err", err)
		return
	}
	oldBook := m.book
	m.book = book
	b.undo = append(b.undo, func() { m.book = oldBook })
	var moving []*entry
	ids := slices.Sorted(maps.Keys(m.all))
	for _, id := range ids {
		e := m.all[id]
		if e.in.Status.State == models.StateDeleted {
			if !e.pinned && !m.awaiting[id] { // loaded after a restart: wait for one read-back
				m.gen++
				e.gen = m.gen
				e.switches = e.switches[:0]
				for _, f := range e.in.Status.Flows {
					for _, hop := range f.Path {
						if !slices.Contains(e.switches, hop.Switch) {
							e.switches = append(e.switches, hop.Switch)
						}
					}
				}
				m.awaiting[id] = true
			}
			continue
		}
		if !e.in.Status.State.Live() {
			continue
		}
		if e.flows == nil {
			flows, err := m.resolve(e.in.Tenant, e.in.Spec)
			if err != nil {
				m.setState(b, e, models.StateFailed, "endpoints left the fabric: "+err.Error(), now)
				continue
			}
			e.flows = flows
		}
		if len(e.in.Status.Flows) == 0 || e.in.Status.Flows[0].Path == nil {
			continue // nothing reserved (Pending, Degraded)
		}
		ok := len(e.in.Status.Flows) == len(e.flows)
		for i := range e.in.Status.Flows {
			if !ok || !m.book.Usable(e.flows[i].src, e.in.Status.Flows[i].Path) {
				ok = false
				break
			}
		}
		if ok {
			paths := make([][]models.Endpoint, len(e.in.Status.Flows))
			for i, f := range e.in.Status.Flows {
				paths[i] = f.Path
			}
			if e.pinned {
				// Same pins, new ledger: reserve without bumping the generation.
				for i, f := range e.flows {
					_ = m.book.Reserve(f.src, paths[i], f.gbps)
				}
			} else {
				m.pin(b, e, paths) // after a restart: pins come back from etcd
			}
			continue
		}
		moving = append(moving, e)
	}
	// Highest priority first, then oldest.
	slices.SortStableFunc(moving, func(x, y *entry) int { return y.in.Spec.Priority - x.in.Spec.Priority })
	for _, e := range moving {
		if b.full() {
			m.fabricGen++ // finish next round
			break
		}
		m.unpin(b, e)
		m.place(b, e, now, "a link on its path went down")
	}
	m.retryWaiting(b, now)
}

// place tries to (re)reserve e's flows: Admitted on success, Degraded
// (flows left to ECMP) when there is no room.
func (m *Intents) place(b *batch, e *entry, now time.Time, why string) bool {
	cons, err := m.constraints(e)
	if err != nil {
		m.setState(b, e, models.StateFailed, "constraints no longer valid: "+err.Error(), now)
		return false
	}
	demands := make([]pathcalc.Demand, len(e.flows))
	for i, f := range e.flows {
		demands[i] = pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}
	}
	fit := m.book.Fit(demands, cons)
	if !fit.Fits {
		if e.in.Status.State != models.StateDegraded && e.in.Status.State != models.StatePending {
			e.in.Status.Flows = clearPaths(e.in.Status.Flows)
			e.in.Status.ReservedGbps = nil
			m.setState(b, e, models.StateDegraded, why+"; no room elsewhere ("+fit.Reason+"); its flows follow ECMP", now)
		}
		return false
	}
	if err := m.checkTableRoom(e, e.flows, fit.Paths); err != nil {
		return false
	}
	prev := e.in.Status.State
	m.pin(b, e, fit.Paths)
	reason := why + "; moved to a working path"
	switch prev {
	case models.StateDegraded:
		reason = "restored: capacity is back"
	case models.StatePending:
		reason = "admitted after waiting"
	}
	m.setState(b, e, models.StateAdmitted, reason, now)
	return true
}

func clearPaths(fs []models.FlowStatus) []models.FlowStatus {
	out := slices.Clone(fs)
	for i := range out {
		out[i].Path = nil
	}
	return out
}

// retryWaiting tries Degraded and Pending intents again, highest priority
// and then oldest first.
func (m *Intents) retryWaiting(b *batch, now time.Time) {
	var waiting []*entry
	for _, e := range m.all {
		if (e.in.Status.State == models.StateDegraded || e.in.Status.State == models.StatePending) && !e.pinned && e.flows != nil {
			waiting = append(waiting, e)
		}
	}
	slices.SortFunc(waiting, func(x, y *entry) int {
		if d := y.in.Spec.Priority - x.in.Spec.Priority; d != 0 {
			return d
		}
		return strings.Compare(x.in.ID, y.in.ID)
	})
	for _, e := range waiting {
		if b.full() {
			m.retry = true
			return
		}
		if conflict := slices.ContainsFunc(e.flows, func(f flow) bool {
			o, ok := m.flowOwner[f.key]
			return ok && o != e.in.ID
		}); conflict {
			continue
		}
		m.place(b, e, now, "")
	}
}

// Adaptive re-placement: installed intents whose flows cross a link that
// telemetry measures hot (not counting detected elephants, which make
// room for intents themselves) move to a cooler allowed path. Damped three ways
// so two intents cannot trade places forever: a move must lower the
// hottest link the flow would see by adaptMargin (its own rate counted on
// the new path), at most adaptMaxMoves intents move per round, and an
// intent that moved sits out adaptHoldRounds rounds.
const (
	adaptHot        = 0.9
	adaptMargin     = 0.1
	adaptMaxMoves   = 4
	adaptHoldRounds = 3
)

func (m *Intents) adapt(b *batch, now time.Time) {
	m.round++
	// Detected elephants are placed on what reservations leave and are
	// re-placed around the intents every second: a link they alone make
	// hot is no reason to move an intent (the two would chase each other).
	elephants := m.pinnedLoadLocked(false)
	util := func(e models.Endpoint) float64 {
		u, ok := m.cfg.Utilization(e)
		if !ok {
			return 0
		}
		if c := m.book.Capacity(e); c > 0 {
			u = max(u-elephants[e]/c, 0)
		}
		return u
	}
	type hot struct {
		e     *entry
		worst float64
	}
	var hots []hot
	for id, e := range m.all {
		if e.in.Status.State != models.StateInstalled || !e.pinned || m.round-m.movedAt[id] <= adaptHoldRounds && m.movedAt[id] > 0 {
			continue
		}
		worst := 0.0
		for _, f := range e.in.Status.Flows {
			for _, hop := range f.Path[:max(len(f.Path)-1, 0)] { // fabric links, not the host's own port
				worst = max(worst, util(hop))
			}
		}
		if worst >= adaptHot {
			hots = append(hots, hot{e, worst})
		}
	}
	slices.SortFunc(hots, func(x, y hot) int {
		if x.worst != y.worst {
			if x.worst > y.worst {
				return -1
			}
			return 1
		}
		return strings.Compare(x.e.in.ID, y.e.in.ID)
	})
	moves := 0
	for _, h := range hots {
		if moves == adaptMaxMoves || b.full() {
			break
		}
		e := h.e
		cons, err := m.constraints(e)
		if err != nil {
			continue
		}
		m.obsMu.Lock()
		observed := m.observed[e.in.ID]
		m.obsMu.Unlock()
		perFlow := observed / float64(max(len(e.flows), 1))
		flows, status := e.flows, e.in.Status.Flows
		m.unpinNow(e)
		newPaths := make([][]models.Endpoint, len(flows))
		better := false
		// The intent's flows are placed together: each chosen path is
		// booked before the next flow looks for room (and all released
		// before the move goes through the batch), so two flows of one
		// intent never take the same last room twice.
		var held []func()
		for i, f := range flows {
			cur := status[i].Path
			curWorst := 0.0
			for _, hop := range cur[:len(cur)-1] {
				curWorst = max(curWorst, util(hop))
			}
			best, bestWorst := cur, curWorst
			for _, p := range m.book.Candidates(f.src, f.dst, cons) {
				if m.book.Room(f.src, p) < f.gbps-1e-9 {
					continue
				}
				w := 0.0
				for _, hop := range p[:len(p)-1] {
					u := util(hop)
					if c := m.book.Capacity(hop); c > 0 && !slices.Contains(cur, hop) {
						u += perFlow / c // our own traffic would arrive there
					}
					w = max(w, u)
				}
				if w < bestWorst-adaptMargin {
					best, bestWorst = p, w
				}
			}
			if !slices.Equal(best, cur) {
				better = true
			}
			newPaths[i] = best
			if m.book.Room(f.src, best) < f.gbps-1e-9 {
				better = false // its current path has no room left either: stay
				break
			}
			src, path, g := f.src, best, f.gbps
			_ = m.book.Reserve(src, path, g)
			held = append(held, func() { _ = m.book.Reserve(src, path, -g) })
		}
		for _, release := range held {
			release()
		}
		m.repin(e, flows, status) // back as it was; the move goes through the batch
		if !better {
			continue
		}
		m.unpin(b, e)
		e.flows = flows
		m.pin(b, e, newPaths)
		for _, sw := range e.switches {
			b.touched[sw] = true
		}
		m.movedAt[e.in.ID] = m.round
		moves++
		m.setState(b, e, models.StateAdmitted, fmt.Sprintf("moved off a link measured at %.0f%% to a cooler path", 100*h.worst), now)
		b.undo = append(b.undo, func() { delete(m.movedAt, e.in.ID) })
	}
}

// CreateBatch admits a set of point-to-point intents for one tenant
// together, all or none: their flows are placed jointly (a full set of
// line-rate flows can need that, where one at a time would strand the
// last ones). It is for declaring a job's flows at once; constraints and
// preemption are not considered.
func (m *Intents) CreateBatch(ctx context.Context, tenant models.TenantName, specs []models.IntentSpec) ([]models.Intent, error) {
	if err := tenant.Validate(); err != nil {
		return nil, err
	}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if s.Collective != nil || !s.Constraints.IsZero() {
			return nil, fmt.Errorf("%w: a batch takes point-to-point intents without constraints", models.ErrInvalid)
		}
	}
	t, err := m.cfg.Auth.Tenant(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var created []*entry
	_, err = m.submit(ctx, func(b *batch) (Outcome, error) {
		created = created[:0]
		if !m.loaded || m.book == nil {
			return Outcome{}, fmt.Errorf("%w: intents are not loaded yet", ErrNoTopology)
		}
		now := m.cfg.Now().UTC()
		var demands []pathcalc.Demand
		var total float64
		taken := map[models.FlowKey]bool{}
		for _, spec := range specs {
			e := &entry{in: models.Intent{ID: newIntentID(now), Tenant: tenant, Created: now, Spec: spec}}
			if e.in.Spec.Class == "" {
				e.in.Spec.Class = models.ClassLosslessRDMA
			}
			flows, err := m.resolve(tenant, spec)
			if err != nil {
				return Outcome{}, err
			}
			for _, f := range flows {
				if owner, ok := m.flowOwner[f.key]; ok || taken[f.key] {
					return Outcome{}, &RefusedError{Err: fmt.Errorf("%w: %s is pinned by intent %s (or twice in the batch)", ErrFlowTaken, f.key, owner)}
				}
				taken[f.key] = true
				demands = append(demands, pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps})
			}
			e.flows = flows
			total += spec.TotalGbps()
			created = append(created, e)
		}
		if err := m.checkQuota(t, total, len(specs), ""); err != nil {
			return Outcome{}, err
		}
		fit := m.book.Fit(demands, pathcalc.PathConstraints{})
		if !fit.Fits {
			return Outcome{}, &RefusedError{Err: ErrNoCapacity, Fit: fit}
		}
		at := 0
		for _, e := range created {
			paths := fit.Paths[at : at+len(e.flows)]
			at += len(e.flows)
			if err := m.checkTableRoom(e, e.flows, paths); err != nil {
				return Outcome{}, &RefusedError{Err: err, Fit: fit}
			}
			m.pin(b, e, paths)
			e.in.SetState(models.StateAdmitted, fmt.Sprintf("admitted with a batch of %d; %d flows reserved", len(specs), len(e.flows)), now)
			id := e.in.ID
			m.all[id] = e
			b.undo = append(b.undo, func() { delete(m.all, id) })
			b.put(e)
			b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(intentKey(tenant, id)), "=", 0))
			m.addUsage(b, tenant, e.in.Spec.TotalGbps(), 1)
		}
		return Outcome{}, nil
	})
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]models.Intent, len(created))
	for i, e := range created {
		out[i] = e.in
	}
	return out, nil
}
