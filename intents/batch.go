package intents

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
)

// MaxBatch is the most intents one batch request carries.
const MaxBatch = 1000

// BatchRequest asks for many intents of one tenant in one request: a
// job launcher declaring a job's flows, or re-declaring a wave of jobs.
type BatchRequest struct {
	Tenant models.TenantName
	Specs  []models.IntentSpec
	// Atomic admits all of them or none, their flows placed together (a
	// full set of line-rate flows can need that, where one at a time
	// would strand the last ones), in one etcd transaction. Otherwise
	// each is decided as Create decides it and has its own result.
	Atomic bool
	// IdempotencyKey names the whole request: item i is remembered under
	// the key and its index, so a retry replays what was made and (not
	// atomic) decides only the rest.
	IdempotencyKey string
	// BodyDigest identifies the request for idempotency checks.
	BodyDigest string
	// DryRun decides the batch as it would be decided now, in order,
	// and undoes it: nothing is stored or programmed.
	DryRun bool
}

// ItemResult is one intent's outcome in a batch.
type ItemResult struct {
	Outcome
	Err error
}

// ItemError is what is wrong with one item of an atomic batch, which
// makes the whole batch fail.
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("items[%d]: %v", e.Index, e.Err) }
func (e *ItemError) Unwrap() error { return e.Err }

// itemKey is the Idempotency-Key item i of a batch is remembered under.
func itemKey(key string, i int) string {
	if key == "" {
		return ""
	}
	return key + "\x00" + strconv.Itoa(i)
}

// CreateMany admits a batch of intents (BatchRequest). Its results are
// in the order of req.Specs. An error is about the whole batch: it is
// malformed, or (atomic) it was not admitted, and nothing was stored.
func (m *Manager) CreateMany(ctx context.Context, req BatchRequest) ([]ItemResult, error) {
	if len(req.Specs) == 0 {
		return nil, fmt.Errorf("%w: a batch of no intents", models.ErrInvalid)
	}
	if len(req.Specs) > MaxBatch {
		return nil, fmt.Errorf("%w: %d intents in one batch; at most %d", models.ErrInvalid, len(req.Specs), MaxBatch)
	}
	t, err := m.tenant(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	if req.Atomic {
		return m.createAtomic(ctx, req, t)
	}
	if err := m.sameBody(req); err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(req.Specs))
	var decides []func(b *batch) (Outcome, error)
	var at []int
	for i, spec := range req.Specs {
		if err := spec.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		cr := CreateRequest{Tenant: req.Tenant, Spec: spec, IdempotencyKey: itemKey(req.IdempotencyKey, i), BodyDigest: req.BodyDigest}
		decides = append(decides, func(b *batch) (Outcome, error) { return m.decideCreate(b, cr, t) })
		at = append(at, i)
	}
	var outs []opResult
	if req.DryRun {
		outs = m.tryAll(ctx, decides)
	} else {
		outs = m.submitAll(ctx, 0, decides...)
	}
	for j, r := range outs {
		results[at[j]] = ItemResult{Outcome: r.out, Err: r.err}
	}
	return results, nil
}

// sameBody refuses a batch whose Idempotency-Key came with another body
// before, as a whole: without it, the items the first body did not make
// would be decided from the second.
func (m *Manager) sameBody(req BatchRequest) error {
	if req.IdempotencyKey == "" {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i := range req.Specs {
		if r, ok := m.idem[idemKeyOf(req.Tenant, itemKey(req.IdempotencyKey, i))]; ok && r.Digest != req.BodyDigest {
			return ErrIdempotencyReuse
		}
	}
	return nil
}

// tryAll decides in order as the loop would, in one batch it then
// undoes: a dry run of many decisions, each seeing the ones before it.
func (m *Manager) tryAll(ctx context.Context, decides []func(b *batch) (Outcome, error)) []opResult {
	out := make([]opResult, len(decides))
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &batch{m: m, ctx: ctx, touched: map[models.SwitchID]bool{}, maxOps: 1 << 30, maxBytes: 1 << 30}
	for i, d := range decides {
		k := b.mark()
		out[i].out, out[i].err = d(b)
		var refused *RefusedError
		if out[i].err != nil && !(errors.As(out[i].err, &refused) && refused.Intent != nil) {
			b.rollback(k)
		}
	}
	b.rollback(mark{})
	return out
}

// createAtomic admits req's intents all or none.
func (m *Manager) createAtomic(ctx context.Context, req BatchRequest, t models.Tenant) ([]ItemResult, error) {
	for i, s := range req.Specs {
		if err := s.Validate(); err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
		if s.Collective != nil || !s.Constraints.IsZero() {
			return nil, &ItemError{Index: i, Err: fmt.Errorf("%w: an atomic batch takes point-to-point intents without constraints", models.ErrInvalid)}
		}
	}
	// One transaction: each intent and its idempotency record, and a
	// comparison each (etcd bounds both).
	need := len(req.Specs)
	if req.IdempotencyKey != "" {
		need *= 2
	}
	if need > m.cfg.MaxTxnOps-2 {
		return nil, fmt.Errorf("%w: an atomic batch of %d intents is %d etcd operations in one transaction, and the etcd cluster takes at most %d (its --max-txn-ops; accelnet's --etcd-max-txn-ops): send fewer at once, or not atomic", models.ErrInvalid, len(req.Specs), need+2, m.cfg.MaxTxnOps)
	}
	var outs []Outcome
	decide := func(b *batch) (Outcome, error) {
		var err error
		outs, err = m.decideAtomic(b, req, t)
		return Outcome{}, err
	}
	var err error
	if req.DryRun {
		err = m.tryAll(ctx, []func(b *batch) (Outcome, error){decide})[0].err
	} else {
		r := m.submitAll(ctx, need, decide)
		err = r[0].err
	}
	if err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(outs))
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i, o := range outs {
		if e, ok := m.p.all[o.Intent.ID]; ok && !req.DryRun {
			o.Intent = e.in // as committed: its revision stamped
		}
		results[i].Outcome = o
	}
	return results, nil
}

// decideAtomic places req's flows jointly and reserves them, or refuses
// the whole batch; a retry with the same Idempotency-Key replays it.
func (m *Manager) decideAtomic(b *batch, req BatchRequest, t models.Tenant) ([]Outcome, error) {
	if !m.loaded || m.p.book == nil {
		return nil, fmt.Errorf("%w: intents are not loaded yet", store.ErrNoTopology)
	}
	if outs, ok, err := m.replayAtomic(req); ok {
		return outs, err
	}
	now := m.cfg.Now().UTC()
	var created []*entry
	var demands []pathcalc.Demand
	var total float64
	taken := map[models.FlowKey]bool{}
	for i, spec := range req.Specs {
		e := m.p.newEntry(req.Tenant, spec, now)
		flows, err := m.p.resolve(req.Tenant, spec)
		if err == nil {
			err = m.cfg.mayUse(t, flows)
		}
		if err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
		for _, f := range flows {
			if owner, ok := m.p.flowOwner[f.key]; ok {
				return nil, &ItemError{Index: i, Err: &RefusedError{Err: fmt.Errorf("%w: %s is pinned by %s", ErrFlowTaken, f.key, m.p.nameFor(owner, req.Tenant))}}
			}
			if taken[f.key] {
				return nil, &ItemError{Index: i, Err: &RefusedError{Err: fmt.Errorf("%w: %s is named twice in the batch", ErrFlowTaken, f.key)}}
			}
			taken[f.key] = true
			demands = append(demands, pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps})
		}
		e.flows = flows
		total += spec.TotalGbps()
		created = append(created, e)
	}
	priority := 0
	for _, s := range req.Specs {
		priority = max(priority, s.Priority)
	}
	if err := m.checkQuota(t, total, len(req.Specs), priority, ""); err != nil {
		return nil, err
	}
	fit := m.p.book.Fit(demands, pathcalc.PathConstraints{})
	if !fit.Fits {
		return nil, &RefusedError{Err: ErrNoCapacity, Fit: fit}
	}
	outs := make([]Outcome, len(created))
	at := 0
	for i, e := range created {
		paths := fit.Paths[at : at+len(e.flows)]
		at += len(e.flows)
		if err := m.p.checkTableRoom(e, e.flows, paths); err != nil {
			return nil, &ItemError{Index: i, Err: &RefusedError{Err: err, Fit: fit}}
		}
		if err := m.p.checkTenantPins(t, e, paths); err != nil {
			return nil, &ItemError{Index: i, Err: &RefusedError{Err: err, Fit: fit}}
		}
		m.p.pin(b, e, paths)
		e.in.SetState(models.StateAdmitted, fmt.Sprintf("admitted with a batch of %d; %d flows reserved", len(req.Specs), len(e.flows)), now)
		m.p.record(b, e)
		m.usage.charge(b, req.Tenant, e.in.Spec.TotalGbps(), 1)
		m.remember(b, idemKeyOf(req.Tenant, itemKey(req.IdempotencyKey, i)), idemRecord{ID: e.in.ID, Digest: req.BodyDigest})
		outs[i] = Outcome{Intent: e.in, Fit: pathcalc.Fit{Fits: true, Paths: paths}}
	}
	return outs, nil
}

// replayAtomic answers an atomic batch whose Idempotency-Key was seen:
// every intent it made, or why it cannot be replayed.
func (m *Manager) replayAtomic(req BatchRequest) (outs []Outcome, ok bool, err error) {
	if _, seen := m.idem[idemKeyOf(req.Tenant, itemKey(req.IdempotencyKey, 0))]; req.IdempotencyKey == "" || !seen {
		return nil, false, nil
	}
	outs = make([]Outcome, len(req.Specs))
	for i := range req.Specs {
		k := idemKeyOf(req.Tenant, itemKey(req.IdempotencyKey, i))
		out, seen, err := m.replay(k, req.BodyDigest)
		switch {
		case err != nil:
			return nil, true, err
		case !seen:
			return nil, true, fmt.Errorf("%w: some of the intents this Idempotency-Key created were deleted since (items[%d]); use a new key", ErrIdempotencyReuse, i)
		}
		outs[i] = out
	}
	return outs, true, nil
}

// CreateBatch admits specs for tenant all or none (an atomic
// CreateMany, without its bound on the number of intents: etcd's on one
// transaction holds), and returns the intents as committed.
func (m *Manager) CreateBatch(ctx context.Context, tenant models.TenantName, specs []models.IntentSpec) ([]models.Intent, error) {
	t, err := m.tenant(ctx, tenant)
	if err != nil {
		return nil, err
	}
	res, err := m.createAtomic(ctx, BatchRequest{Tenant: tenant, Specs: specs, Atomic: true}, t)
	if err != nil {
		return nil, err
	}
	out := make([]models.Intent, len(res))
	for i, r := range res {
		out[i] = r.Intent
	}
	return out, nil
}
