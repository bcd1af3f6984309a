package intents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/prometheus/client_golang/prometheus"
)

// --- writes ---

// op is one change decided by the loop. decide runs with mu held and adds
// etcd operations to the batch; done receives its outcome after commit.
type op struct {
	decide func(b *batch) (Outcome, error)
	size   int // etcd operations it may add, beyond a few (submitAll)
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
	m *Manager
	// ctx bounds what deciding asks of others (tenants, placement
	// searches): the run's context, or the request's for a dry run.
	ctx      context.Context
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
	b.after = append(b.after, func(rev int64) {
		e.in.Revision = rev
		stored := e.in
		e.stored = &stored
	})
}

func intentKey(t models.TenantName, id string) string { return store.KeyIntents + string(t) + "/" + id }

func (m *Manager) submit(ctx context.Context, decide func(b *batch) (Outcome, error)) (Outcome, error) {
	r := m.submitAll(ctx, 0, decide)
	return r[0].out, r[0].err
}

// submitAll queues decisions for the loop, one after another, and waits
// for each one's outcome: they go into the same batches as far as the
// commit's budget allows. size is the etcd operations one decision may
// add at most (0: a few), so that it starts a batch of its own rather
// than overflow one.
func (m *Manager) submitAll(ctx context.Context, size int, decides ...func(b *batch) (Outcome, error)) []opResult {
	out := make([]opResult, len(decides))
	if !m.Leading() {
		for i := range out {
			out[i].err = election.ErrNotLeader
		}
		return out
	}
	timeout := func() error { return fmt.Errorf("%w: %v", store.ErrStoreUnavailable, ctx.Err()) }
	queued := make([]*op, 0, len(decides))
	for _, d := range decides {
		o := &op{decide: d, size: size, done: make(chan opResult, 1)}
		select {
		case m.ops <- o:
			queued = append(queued, o)
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	for i := range out {
		if i >= len(queued) {
			out[i].err = timeout()
			continue
		}
		select {
		case out[i] = <-queued[i].done:
		case <-ctx.Done():
			// The decision may still commit; the client sees a timeout,
			// as it would with any store.
			out[i].err = timeout()
		}
	}
	return out
}

// Run loads the intents from etcd and then serves changes until ctx ends.
// With leader election it decides only during this replica's terms, and
// follows etcd in between.
func (m *Manager) Run(ctx context.Context) error {
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
func (m *Manager) Leading() bool {
	return m.cfg.Leadership == nil || m.cfg.Leadership.Term() != nil
}

// follow keeps the intents' records current from etcd (for reads), and
// placed (followplace.go), until ctx ends or a term of this replica
// begins, answering decisions with election.ErrNotLeader.
func (m *Manager) follow(ctx context.Context, changed <-chan struct{}) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var running sync.WaitGroup // the follow below, and a placement under way
	defer running.Wait()
	running.Go(func() { _ = m.cfg.Store.Follow(fctx, store.KeyIntents, m.applyFollowed) })
	tick := time.NewTicker(followPlaceEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-changed:
			// Another leader, still following: the copy (and its
			// placement) stay, rather than be listed again. (The next
			// change is asked for before the term is looked at, so a
			// term that begins in between is not missed.)
			if next := m.cfg.Leadership.Changed(); m.cfg.Leadership.Term() == nil {
				changed = next
				continue
			}
		case o := <-m.ops:
			o.done <- opResult{err: election.ErrNotLeader}
			continue
		case <-tick.C:
			// In the background: a term that begins meanwhile is not
			// held up (the placement, cut short, is not taken in). One
			// at a time: placeFollowed returns at once while one runs.
			running.Go(func() { m.placeFollowed(fctx) })
			continue
		}
		break
	}
	cancel()
}

// followPlaceEvery is how often a follower checks that its copy is
// placed on the current fabric (placeFollowed).
const followPlaceEvery = 500 * time.Millisecond

// applyFollowed applies intents listed or watched in etcd to a follower's
// records (and their placement, followplace.go). They are decoded before
// the lock is taken: at 100,000 intents a listing is seconds of JSON, and
// the follower's reads wait on the lock.
func (m *Manager) applyFollowed(kvs []store.KV, reset bool) {
	changes := decodeAll(m.log, kvs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if reset {
		m.p.all = make(map[string]*entry, len(changes))
		m.followed.mirrored = true
		m.followed.placedValid = false // placed again from the new listing
		m.followed.placing = nil       // and a placement being built is of the old one
	} else if m.followed.placing != nil {
		*m.followed.placing = append(*m.followed.placing, changes...)
	}
	if m.followed.placedValid {
		if m.p.followPlaced(changes) {
			m.followed.placedAside = true
		}
	} else {
		apply(m.p.all, changes)
	}
	for _, kv := range kvs {
		m.followed.rev = max(m.followed.rev, kv.Revision)
	}
	if m.followed.ch != nil {
		close(m.followed.ch)
		m.followed.ch = nil
	}
	m.loaded = false // decisions need a full load first
	m.pinsReady = false
}

// change is an intent written (e, decoded) or deleted (e nil) in etcd;
// one that could not be decoded is skipped (the entry stays as it was).
type change struct {
	id   string
	e    *entry
	skip bool
}

// decodeAll decodes intents listed or watched in etcd.
func decodeAll(log *slog.Logger, kvs []store.KV) []change {
	out := make([]change, len(kvs))
	for i, kv := range kvs {
		out[i].id = intentID(kv.Key)
		if kv.Deleted {
			continue
		}
		if in, ok := decodeIntent(log, kv.Key, kv.Value, kv.Revision); ok {
			out[i].e = newStoredEntry(in)
		} else {
			out[i].skip = true
		}
	}
	return out
}

// countAfter is how many intents all would hold with changes applied
// (apply), without copying all to apply them to.
func countAfter(all map[string]*entry, changes []change) int {
	n, now := len(all), map[string]bool{} // now: whether a changed intent is there
	for _, c := range changes {
		if c.skip {
			continue
		}
		was, seen := now[c.id]
		if !seen {
			_, was = all[c.id]
		}
		now[c.id] = c.e != nil
		switch {
		case c.e != nil && !was:
			n++
		case c.e == nil && was:
			n--
		}
	}
	return n
}

// apply writes decoded changes into all.
func apply(all map[string]*entry, changes []change) {
	for _, c := range changes {
		switch {
		case c.skip:
		case c.e == nil:
			delete(all, c.id)
		default:
			all[c.id] = c.e
		}
	}
}

// intentID is the intent ID an intent key ends with (intentKey).
func intentID(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// WaitFollowed waits (until ctx ends) for a follower's records to
// include etcd revision rev: a write it forwarded to the leader is then
// visible in its own reads. On the leader it returns at once.
func (m *Manager) WaitFollowed(ctx context.Context, rev int64) {
	for {
		m.mu.Lock()
		if m.term != nil || m.cfg.Leadership == nil || m.followed.rev >= rev {
			m.mu.Unlock()
			return
		}
		if m.followed.ch == nil {
			m.followed.ch = make(chan struct{})
		}
		ch := m.followed.ch
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// decode reads a stored intent, stamping its revision.
func decodeIntent(log *slog.Logger, key string, value []byte, rev int64) (models.Intent, bool) {
	var in models.Intent
	if err := json.Unmarshal(value, &in); err != nil {
		log.Error("undecodable intent in etcd; skipping", "key", key, "err", err)
		return in, false
	}
	in.Revision = rev
	return in, true
}

// lead decides until ctx ends (the term, or everything); t is the term
// (nil without leader election).
func (m *Manager) lead(ctx context.Context, t *election.Term) {
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
	ticks := 0
	adapt := time.NewTicker(m.cfg.AdaptInterval)
	defer adapt.Stop()
	for {
		// The end first: a select picks among whatever is ready, and on a
		// starved machine with work always queued a batch can take long
		// enough that waiting for the odds delays a shutdown by minutes.
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-adapt.C:
			// Not before the first sweep is over: rates are not read
			// until then (Observe), and the sweep has the CPU.
			if m.cfg.Utilization != nil && m.cfg.swept() && m.reloadIfNeeded(ctx) == nil {
				m.mu.Lock()
				m.adaptive.due = true
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
				ticks++
				var sweep *op
				if ticks%orphanSweepTicks == 0 {
					sweep = m.sweepOrphans(ctx)
					m.mu.Lock()
					m.fin.due = true
					m.mu.Unlock()
				}
				m.runBatch(ctx, sweep, true)
			}
		}
	}
}

// orphanSweepTicks is how many housekeeping ticks (seconds) apart the
// leader looks for intents whose tenant is gone.
const orphanSweepTicks = 5

// sweepOrphans returns the decision deleting the intents of tenants that
// no longer exist (nil if there are none): admitted beside their tenant's
// deletion, or left when DeleteTenant did not finish. Tenants are looked
// up without the lock (a cache, or etcd for one it does not know).
func (m *Manager) sweepOrphans(ctx context.Context) *op {
	m.mu.RLock()
	tenants := map[models.TenantName]bool{}
	for _, e := range m.p.all {
		if e.in.Status.State != models.StateDeleted {
			tenants[e.in.Tenant] = true
		}
	}
	m.mu.RUnlock()
	var gone []models.TenantName
	for t := range tenants {
		if _, err := m.cfg.Auth.Tenant(ctx, t); errors.Is(err, store.ErrNotFound) {
			gone = append(gone, t)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return &op{done: make(chan opResult, 1), decide: func(b *batch) (Outcome, error) {
		for _, t := range gone {
			if n := m.deleteTenant(b, t); n > 0 {
				m.log.Info("deleting the intents of a tenant that is gone", "tenant", t, "intents", n)
			}
		}
		return Outcome{}, nil
	}}
}

func (m *Manager) reloadIfNeeded(ctx context.Context) error {
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

func (m *Manager) failQueued() {
	err := fmt.Errorf("%w: shutting down", store.ErrStoreUnavailable)
	if m.cfg.Leadership != nil {
		err = election.ErrNotLeader // the term ended; the next leader decides
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
func (m *Manager) load(ctx context.Context) error {
	all, rev, changes, caughtUp, err := m.loadIntents(ctx)
	if err != nil {
		return err
	}
	idem, _, err := m.cfg.Store.List(ctx, store.KeyIdempotency, rev)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// A follower's placed copy, caught up by etcd's changes since, is
	// kept: only what changed is placed (followplace.go). Otherwise,
	// start from etcd's truth: after a commit whose outcome is unknown,
	// memory may disagree with it either way.
	keep := caughtUp && m.followed.mirrored && m.followed.placedValid
	switch {
	case keep:
		if m.p.followPlaced(changes) {
			m.followed.placedAside = true
		}
	case caughtUp:
		apply(m.p.all, changes) // the copy loadIntents counted, caught up
	default:
		m.p.all = all
	}
	m.followed.placedValid = false // the term's own from now on
	m.idem, m.idemOf = map[string]idemRecord{}, map[string]string{}
	m.usage, m.trouble.touched = usageBook{}, map[models.SwitchID]bool{}
	if !keep {
		m.p.flowOwner, m.p.awaiting = map[models.FlowKey]string{}, map[string]bool{}
		m.p.awaitNew, m.p.awaitingOn = map[string]bool{}, map[models.SwitchID]map[string]bool{}
	}
	m.p.pins.restart(keep) // reconcilers compare in full once
	if !keep {
		m.p.tally, m.p.book = newPinTally(), nil
	}
	m.p.keepDetectedLocked()
	m.needReload = false
	m.pinsReady = false
	m.followed.mirrored = false // from now on the leader's own
	for _, e := range m.p.all {
		if in := e.in; in.Status.State.Live() {
			m.usage.of(in.Tenant).add(in.Spec.TotalGbps(), 1)
		}
	}
	for _, kv := range idem {
		var r idemRecord
		if json.Unmarshal(kv.Value, &r) == nil {
			k := strings.TrimPrefix(kv.Key, store.KeyIdempotency)
			m.idem[k], m.idemOf[r.ID] = r, k
		}
	}
	m.loaded = true
	m.fin.due = true // rebuild the finished records' lists
	if keep && !m.followed.placedAside {
		// Placed already: Pending and Degraded intents are retried and
		// kept elephants restored as a replan's end would.
		m.planned = m.fabricGen
		m.retry = true
		m.log.Info("intents loaded, placed as followed", "intents", len(m.p.all), "changes", len(changes))
		return nil
	}
	m.fabricGen++ // plan (re-reserve) once a fabric is known
	m.log.Info("intents loaded", "intents", len(m.p.all), "kept_placed", keep)
	return nil
}

// loadIntents reads every intent from etcd at one revision (returned),
// as new entries. A follower's copy (mirrored) is only caught up: the
// intents written since it was current are read and decoded, the rest
// are its entries as they are, and what is gone from etcd is dropped. At
// 100,000 intents decoding them all is seconds of a takeover, and even
// listing their keys (ListSince) over two: the changes are watched for
// (Changes) and the copy checked by its count; where that cannot be
// done, the keys are listed.
func (m *Manager) loadIntents(ctx context.Context) (map[string]*entry, int64, []change, bool, error) {
	m.mu.RLock()
	mirrored, since, copied := m.followed.mirrored, m.followed.rev, m.p.all
	m.mu.RUnlock()
	if mirrored && since > 0 {
		changes, rev, count, err := m.cfg.Store.Changes(ctx, store.KeyIntents, since)
		if err == nil {
			decoded := decodeAll(m.log, changes)
			n := countAfter(copied, decoded)
			if int64(n) == count {
				m.log.Info("intents caught up from the follower's copy", "intents", n, "changes", len(changes))
				return nil, rev, decoded, true, nil // load applies them to the copy
			}
			m.log.Warn("the follower's copy of the intents, caught up, disagrees with etcd; listing them", "have", n, "etcd", count)
		} else {
			m.log.Info("cannot watch the intents' changes since the follower's copy; listing them", "err", err)
		}
	}
	all := map[string]*entry{}
	if mirrored {
		keys, changed, rev, err := m.cfg.Store.ListSince(ctx, store.KeyIntents, since)
		if err != nil {
			return nil, 0, nil, false, err
		}
		fresh := make(map[string]store.KV, len(changed))
		for _, kv := range changed {
			fresh[kv.Key] = kv
		}
		caughtUp := true
		for _, kv := range keys {
			if c, ok := fresh[kv.Key]; ok {
				if in, ok := decodeIntent(m.log, c.Key, c.Value, c.Revision); ok {
					all[in.ID] = newStoredEntry(in)
				}
				continue
			}
			e := copied[intentID(kv.Key)]
			if e == nil || e.in.Revision != kv.Revision || intentKey(e.in.Tenant, e.in.ID) != kv.Key {
				caughtUp = false // not the copy it should be: read everything
				break
			}
			all[e.in.ID] = e
		}
		if caughtUp {
			m.log.Info("intents caught up from the follower's copy", "intents", len(all), "read", len(changed))
			return all, rev, nil, false, nil
		}
		m.log.Warn("the follower's copy of the intents disagrees with etcd; reading them all")
		clear(all)
	}
	kvs, rev, err := m.cfg.Store.List(ctx, store.KeyIntents, 0)
	if err != nil {
		return nil, 0, nil, false, err
	}
	for _, kv := range kvs {
		if in, ok := decodeIntent(m.log, kv.Key, kv.Value, kv.Revision); ok {
			all[in.ID] = newStoredEntry(in)
		}
	}
	return all, rev, nil, false, nil
}

// addUsage changes a tenant's live reservations by gbps over n intents,
// undone with the batch if it does not commit.
func (u usageBook) charge(b *batch, t models.TenantName, gbps float64, n int) {
	tu := u.of(t)
	tu.add(gbps, n)
	b.undo = append(b.undo, func() { tu.add(-gbps, -n) })
}

// add changes the usage by gbps and n intents. Sums of floats keep
// residue (1e-16 Gb/s reserved after every intent was deleted): none
// is left once no intent is, and what is left is rounded to 1 kb/s.
func (u *tenantUsage) add(gbps float64, n int) {
	u.intents += n
	u.gbps = math.Round((u.gbps+gbps)*1e6) / 1e6
	if u.intents == 0 {
		u.gbps = 0
	}
}

// checkQuota refuses n more intents of gbps in total for tenant t, on top
// of what it holds now less the intent except (one being replaced), and
// a priority above what the operator granted t.
func (m *Manager) checkQuota(t models.Tenant, gbps float64, n, priority int, except string) error {
	var held float64
	count := 0
	if u := m.usage[t.Name]; u != nil {
		held, count = u.gbps, u.intents
	}
	if old, ok := m.p.all[except]; ok && old.in.Status.State.Live() {
		held -= old.in.Spec.TotalGbps()
		count--
	}
	if priority > t.MaxPriority {
		return &RefusedError{Err: fmt.Errorf("%w: priority %d asked; tenant %s may ask for at most %d (the operator grants it: max_priority)", ErrQuota, priority, t.Name, t.MaxPriority)}
	}
	if t.MaxIntents > 0 && count+n > t.MaxIntents {
		return &RefusedError{Err: fmt.Errorf("%w: %d live intents + %d asked > %d allowed", ErrQuota, count, n, t.MaxIntents)}
	}
	if t.MaxGbps > 0 && held+gbps > t.MaxGbps+1e-9 {
		return &RefusedError{Err: fmt.Errorf("%w: %.1f Gb/s reserved + %.1f asked > %.1f allowed", ErrQuota, held, gbps, t.MaxGbps)}
	}
	return nil
}

func (u usageBook) of(t models.TenantName) *tenantUsage {
	tu := u[t]
	if tu == nil {
		tu = &tenantUsage{}
		u[t] = tu
	}
	return tu
}

// runBatch decides first and whatever else is queued (up to the commit's
// budget), does the housekeeping that is due, commits once, and answers.
func (m *Manager) runBatch(ctx context.Context, first *op, tick bool) {
	m.mu.Lock()
	b := &batch{m: m, ctx: ctx, touched: map[models.SwitchID]bool{}, maxOps: m.cfg.MaxTxnOps, maxBytes: 1 << 20}
	var decided []*op
	var next *op
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
				if len(b.ops)+o.size > b.maxOps-2 {
					next = o // too big for what is left: the next batch's
					break drain
				}
				run(o)
			default:
				break drain
			}
		}
	}
	m.housekeep(b, tick)
	m.checkLedger()
	m.news.awaited.Store(len(m.p.awaiting) > 0)
	err := b.commit(decided)
	touched := slices.Collect(maps.Keys(b.touched))
	if err == nil && !m.pinsReady && m.loaded && m.p.snap != nil && m.planned == m.fabricGen {
		m.pinsReady = true // every switch may be compared now, pins or not
		m.log.Info("intents placed on the fabric; switches' pins are compared from now on", "intents", len(m.p.all))
		touched = touched[:0]
		for _, sw := range m.p.snap.Switches() {
			touched = append(touched, sw.Name)
		}
	}
	m.mu.Unlock()
	answer(decided, err, m.m.decisions)
	if len(touched) > 0 {
		// Also after a failed commit: a reconciler may have written pins
		// decided for it, which the undo took back.
		m.cfg.OnPins(touched)
	}
	if next == nil {
		return
	}
	if err := m.reloadIfNeeded(ctx); err != nil {
		next.done <- opResult{err: err}
		return
	}
	m.runBatch(ctx, next, false)
}

// checkLedger verifies after every batch of decisions that no resource is
// reserved beyond its capacity less the headroom (pathcalc.Book.Check):
// every admission, move and re-placement must have asked for room first.
// A violation is a bug; it is logged and counted, and tests fail on it.
func (m *Manager) checkLedger() {
	if m.p.book == nil {
		return
	}
	if err := m.p.book.Check(); err != nil {
		m.stats.Overcommitted++
		m.m.overcommitted.Inc()
		m.log.Error("bandwidth ledger over-committed", "err", err)
	}
}

// commit commits what the batch decided in one etcd transaction fenced on
// the term, with the manager's lock held on entry and on return but not
// across the commit; on success it stamps the answers with the committed
// intents, on failure it undoes the batch.
func (b *batch) commit(decided []*op) error {
	if len(b.ops) == 0 {
		return nil
	}
	m, ctx := b.m, b.ctx
	start := time.Now()
	cmps := b.cmps
	if m.term != nil {
		cmps = append(slices.Clip(cmps), m.term.Fence())
	}
	// No lock across the commit: reads, /metrics and the reconcilers
	// go on while etcd answers (they may see this batch's decisions a
	// moment early; a failed commit is undone below and the switches
	// it touched are compared again). Only this loop decides, so
	// nothing else changes what the batch decided meanwhile.
	term := m.term
	m.mu.Unlock()
	rev, err := m.cfg.Store.Commit(ctx, cmps, b.ops)
	switch {
	case errors.Is(err, store.ErrConflict) && term != nil && !m.cfg.Leadership.Holds(ctx, term):
		err = election.ErrNotLeader // deposed: a newer leader decides from etcd
	case err != nil && ctx.Err() != nil && !errors.Is(err, store.ErrStoreUnavailable):
		err = fmt.Errorf("%w: leadership ended during the commit (etcd unreachable?): its outcome is unknown; retry with the same Idempotency-Key", store.ErrStoreUnavailable)
	}
	m.mu.Lock()
	m.m.commitSeconds.Observe(time.Since(start).Seconds())
	m.m.commitOps.Observe(float64(len(b.ops)))
	if err == nil {
		for _, f := range b.after {
			f(rev)
		}
		// Answer with the committed intents (revisions stamped).
		for _, o := range decided {
			if e, ok := m.p.all[o.out.Intent.ID]; ok {
				o.out.Intent = e.in
			}
			var refused *RefusedError
			if errors.As(o.err, &refused) && refused.Intent != nil {
				if e, ok := m.p.all[refused.Intent.ID]; ok {
					in := e.in
					refused.Intent = &in
				}
			}
		}
	} else {
		for i := len(b.undo) - 1; i >= 0; i-- {
			b.undo[i]()
		}
		if !errors.Is(err, store.ErrConflict) {
			m.needReload = true // it may have committed after all
		}
		m.log.Warn("intent commit failed; answered as not done", "ops", len(b.ops), "err", err)
	}
	return err
}

// answer tells each decided op its outcome: its own, or the commit's
// error when the commit failed.
func answer(decided []*op, err error, decisions *prometheus.CounterVec) {
	for _, o := range decided {
		decisions.WithLabelValues(decisionResult(o.err, err)).Inc()
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
}
