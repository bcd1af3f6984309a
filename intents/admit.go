package intents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// Create admits a new intent (or, for a dry run, says whether it would be).
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Outcome, error) {
	if err := req.Spec.Validate(); err != nil {
		return Outcome{}, err
	}
	t, err := m.tenant(ctx, req.Tenant)
	if err != nil {
		return Outcome{}, err
	}
	decide := func(b *batch) (Outcome, error) { return m.decideCreate(b, req, t) }
	if req.DryRun {
		r := m.tryAll(ctx, []func(b *batch) (Outcome, error){decide})[0]
		return r.out, r.err
	}
	return m.submit(ctx, decide)
}

func (m *Manager) decideCreate(b *batch, req CreateRequest, t models.Tenant) (Outcome, error) {
	if !m.loaded || m.p.book == nil {
		return Outcome{}, fmt.Errorf("%w: intents are not loaded yet", store.ErrNoTopology)
	}
	idemKey := idemKeyOf(req.Tenant, req.IdempotencyKey)
	if out, ok, err := m.replay(idemKey, req.BodyDigest); ok {
		return out, err
	}
	e := m.p.newEntry(req.Tenant, req.Spec, m.cfg.Now().UTC())
	out, err := m.admit(b, e, t, req.DryRun)
	if req.DryRun {
		return out, err
	}
	var refused *RefusedError
	if err != nil && !(errors.As(err, &refused) && refused.Intent != nil) {
		return Outcome{}, err
	}
	m.p.record(b, e)
	m.remember(b, idemKey, idemRecord{ID: e.in.ID, Digest: req.BodyDigest})
	if err != nil {
		refused.Intent = &e.in
		m.noteFinished(b, e)
		return Outcome{}, err
	}
	return Outcome{Intent: e.in, Fit: out.Fit}, nil
}

// tenant is the tenant a create names, checked and looked up. It is
// looked up before deciding, not while: deciding holds the lock, and a
// tenant this replica has not cached is read from etcd.
func (m *Manager) tenant(ctx context.Context, name models.TenantName) (models.Tenant, error) {
	if err := name.Validate(); err != nil {
		return models.Tenant{}, err
	}
	return m.cfg.Auth.Tenant(ctx, name)
}

// newEntry is a new intent of tenant asking for spec (its defaults
// filled in), made at now, under an ID no intent has.
func (pl *placement) newEntry(tenant models.TenantName, spec models.IntentSpec, now time.Time) *entry {
	id := store.NewID(now)
	for pl.all[id] != nil {
		id = store.NewID(now)
	}
	return &entry{in: models.Intent{ID: id, Tenant: tenant, Created: now, Spec: spec.WithDefaults()}}
}

// record stores a new intent e in the batch: in memory now, in etcd with
// the commit, which fails should an intent of its key exist already.
func (pl *placement) record(b *batch, e *entry) {
	id := e.in.ID
	pl.all[id] = e
	b.undo = append(b.undo, func() { delete(pl.all, id) })
	b.put(e)
	b.cmps = append(b.cmps, clientv3.Compare(clientv3.CreateRevision(intentKey(e.in.Tenant, id)), "=", 0))
}

// idemKeyOf is where an Idempotency-Key's record is kept:
// "<tenant>/<sha256 of the key>" ("" for no key).
func idemKeyOf(t models.TenantName, key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return string(t) + "/" + hex.EncodeToString(sum[:])
}

// replay answers a create whose Idempotency-Key (its record at idemKey)
// was seen before: ok is true if it was, with the intent it made or why
// it cannot be replayed (another body, the intent being deleted).
func (m *Manager) replay(idemKey, digest string) (out Outcome, ok bool, err error) {
	r, seen := m.idem[idemKey]
	if idemKey == "" || !seen {
		return Outcome{}, false, nil
	}
	if r.Digest != digest {
		return Outcome{}, true, ErrIdempotencyReuse
	}
	if e, ok := m.p.all[r.ID]; ok {
		return Outcome{Intent: e.in, Replayed: true}, true, nil
	}
	// Deleted in this very batch: its record goes with it.
	return Outcome{}, true, fmt.Errorf("%w: the intent this Idempotency-Key created (%s) is being deleted", ErrIdempotencyReuse, r.ID)
}

// remember stores that the create with the Idempotency-Key at idemKey
// (none: nothing) made rec.ID, in the same commit as the intent.
func (m *Manager) remember(b *batch, idemKey string, rec idemRecord) {
	if idemKey == "" {
		return
	}
	data, _ := json.Marshal(rec)
	b.setOp(store.KeyIdempotency+idemKey, clientv3.OpPut(store.KeyIdempotency+idemKey, string(data)))
	id := rec.ID
	m.idem[idemKey], m.idemOf[id] = rec, idemKey
	b.undo = append(b.undo, func() { delete(m.idem, idemKey); delete(m.idemOf, id) })
}

// admit places e's flows and, unless dryRun, reserves them and moves e to
// Admitted; a refusal moves it to Rejected (returned as a RefusedError
// with Intent set, so the caller stores it) unless the request itself is
// wrong (unknown hosts, taken flows, quota), which stores nothing.
// t is e's tenant, looked up before deciding.
func (m *Manager) admit(b *batch, e *entry, t models.Tenant, dryRun bool) (Outcome, error) {
	flows, err := m.p.resolve(e.in.Tenant, e.in.Spec)
	if err != nil {
		return Outcome{}, err
	}
	if err := m.cfg.mayUse(t, flows); err != nil {
		return Outcome{}, err
	}
	for _, f := range flows {
		if owner, ok := m.p.flowOwner[f.key]; ok && owner != e.in.ID {
			if f.slot() {
				return Outcome{}, &RefusedError{Err: fmt.Errorf("%w: the flows from %s to %s are reserved by %s (sampled_flows)", ErrFlowTaken, f.src.Name, f.dst.Name, m.p.nameFor(owner, e.in.Tenant))}
			}
			return Outcome{}, &RefusedError{Err: fmt.Errorf("%w: %s is pinned by %s", ErrFlowTaken, f.key, m.p.nameFor(owner, e.in.Tenant))}
		}
	}
	if err := m.checkQuota(t, e.in.Spec.TotalGbps(), 1, e.in.Spec.Priority, e.in.ID); err != nil {
		return Outcome{}, err
	}
	cons, err := m.p.constraints(e)
	if err != nil {
		return Outcome{}, err
	}
	demands := make([]pathcalc.Demand, len(flows))
	for i, f := range flows {
		demands[i] = pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}
	}
	fit := m.p.book.Fit(demands, cons)
	var victims []*entry
	if !fit.Fits && m.cfg.Preemption {
		victims, fit = m.p.preempt(b, e, demands, cons, fit)
	}
	out := Outcome{Fit: fit}
	// How many QPs per connection would do best: asked in a dry run, and
	// told when the intent does not fit or its links are tight (it is
	// placements' work, so not for every admission).
	var hint *models.QPHint
	if dryRun || !fit.Fits || fit.MLU > qpHintAbove {
		if h := m.p.qpHint(b.ctx, flows); h.Better() || dryRun {
			hint = &h
		}
	}
	out.QPHint = hint
	for _, v := range victims {
		id := v.in.ID
		if v.in.Tenant != e.in.Tenant {
			id = "another tenant's intent" // not named to this one
		}
		out.Preempts = append(out.Preempts, id)
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
	if err := m.p.checkTableRoom(e, flows, fit.Paths); err != nil {
		return Outcome{}, &RefusedError{Err: err, Fit: fit}
	}
	if err := m.p.checkTenantPins(t, e, fit.Paths); err != nil {
		return Outcome{}, &RefusedError{Err: err, Fit: fit}
	}
	if dryRun {
		return out, nil
	}
	now := m.cfg.Now().UTC()
	for _, v := range victims {
		m.unpin(b, v)
		by := fmt.Sprintf("another tenant's intent of priority %d", e.in.Spec.Priority)
		if v.in.Tenant == e.in.Tenant {
			by = fmt.Sprintf("%s (priority %d)", e.in.ID, e.in.Spec.Priority)
		}
		m.setState(b, v, models.StatePending, "preempted by "+by, now)
	}
	e.flows = flows
	m.p.pin(b, e, fit.Paths)
	reason := fmt.Sprintf("%d flows reserved; max reserved link utilization %.2f", len(flows), fit.MLU)
	if hint != nil {
		reason += "; " + hint.String()
	}
	e.in.Status.QPHint = hint
	e.in.SetState(models.StateAdmitted, reason, now)
	m.usage.charge(b, e.in.Tenant, e.in.Spec.TotalGbps(), 1)
	return out, nil
}

// resolve expands a spec into flows: one per (pair, source port), the
// pair's bandwidth split evenly over its ports.
func (pl *placement) resolve(tenant models.TenantName, spec models.IntentSpec) ([]flow, error) {
	var v models.ValidationError
	type pair struct {
		src, dst models.Host
		gbps     float64
	}
	var pairs []pair
	if c := spec.Collective; c != nil {
		hosts := make([]models.Host, len(c.Endpoints))
		first := map[string]int{} // host → the endpoint that first named it
		for i, name := range c.Endpoints {
			h, err := resolveHost(pl.snap, name)
			field := fmt.Sprintf("collective.endpoints[%d]", i)
			switch j, twice := first[h.Name]; {
			case err != nil:
				v.Errors = append(v.Errors, models.FieldError{Field: field, Message: err.Error()})
			case twice:
				// Two names of one host (its name and its IP): its NIC would
				// be reserved twice and a flow to itself pinned.
				v.Errors = append(v.Errors, models.FieldError{Field: field, Message: fmt.Sprintf("%q is host %s, as endpoints[%d] is", name, h.Name, j)})
			default:
				first[h.Name] = i
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
		s, errS := resolveHost(pl.snap, spec.Src)
		d, errD := resolveHost(pl.snap, spec.Dst)
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
	// A sampled intent reserves one path per pair, under a slot key of
	// source port 0 (no UDP source port: never a pin on a switch); the
	// flows sampling finds between the pair are pinned on it
	// (placeDetected).
	first, last := int(spec.SrcPorts.First), int(spec.SrcPorts.Last)
	if spec.SampledFlows {
		first, last = 0, 0
	}
	ports := last - first + 1
	if n := len(pairs) * ports; n > MaxFlowsPerIntent {
		return nil, &models.ValidationError{Errors: []models.FieldError{{Field: "src_ports", Message: fmt.Sprintf("%d pairs × %d ports = %d flows; at most %d per intent", len(pairs), ports, n, MaxFlowsPerIntent)}}}
	}
	flows := make([]flow, 0, len(pairs)*ports)
	for _, p := range pairs {
		for port := first; port <= last; port++ {
			flows = append(flows, flow{
				key: models.FlowKey{Src: p.src.IP, Dst: p.dst.IP, SrcPort: uint16(port)},
				src: p.src, dst: p.dst, gbps: p.gbps / float64(ports),
			})
		}
	}
	return flows, nil
}

// nameFor names intent id to a tenant: by its ID if it is the tenant's
// own, not at all if it is another tenant's.
func (pl *placement) nameFor(id string, tenant models.TenantName) string {
	if o := pl.all[id]; o != nil && o.in.Tenant == tenant {
		return "intent " + id
	}
	return "another tenant's intent"
}

// mayUse refuses flows to or from a host tenant t may not use (not in
// its grant, or held exclusively by another tenant: which one is not said).
func (c *Config) mayUse(t models.Tenant, flows []flow) error {
	checked := map[string]bool{}
	for _, f := range flows {
		for _, h := range []string{f.src.Name, f.dst.Name} {
			if checked[h] {
				continue
			}
			checked[h] = true
			if !c.Auth.MayUse(t, h) {
				return fmt.Errorf("%w: host %s is not among the hosts tenant %s may use (the operator grants hosts: POST /tenants)", ErrHostNotAllowed, h, t.Name)
			}
		}
	}
	return nil
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

func (pl *placement) constraints(e *entry) (pathcalc.PathConstraints, error) {
	c := e.in.Spec.Constraints
	out := pathcalc.PathConstraints{MaxHops: c.MaxHops, AvoidSwitches: map[models.SwitchID]bool{}, AvoidLinks: map[models.LinkID]bool{}}
	var v models.ValidationError
	for i, sw := range c.AvoidSwitches {
		if _, err := pl.snap.Switch(sw); err != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: fmt.Sprintf("constraints.avoid_switches[%d]", i), Message: fmt.Sprintf("no switch %q in the fabric", sw)})
		}
		out.AvoidSwitches[sw] = true
	}
	for i, l := range c.AvoidLinks {
		if _, err := pl.snap.Link(l); err != nil {
			v.Errors = append(v.Errors, models.FieldError{Field: fmt.Sprintf("constraints.avoid_links[%d]", i), Message: fmt.Sprintf("no link %q in the fabric", l)})
		}
		out.AvoidLinks[l] = true
	}
	if id := c.DisjointFrom; id != "" {
		other, ok := pl.all[id]
		if !ok || other.in.Tenant != e.in.Tenant {
			v.Errors = append(v.Errors, models.FieldError{Field: "constraints.disjoint_from", Message: fmt.Sprintf("tenant %s has no intent %q", e.in.Tenant, id)})
		} else {
			for _, f := range other.in.Status.Flows {
				for _, p := range f.Path {
					if l, ok := pl.snap.LinkAt(p); ok {
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
func (pl *placement) qpHint(ctx context.Context, flows []flow) models.QPHint {
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
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	return pl.book.QPHint(ctx, conns, len(flows)/max(len(conns), 1), MaxFlowsPerIntent)
}

// checkTableRoom refuses pins that would overflow a switch's flow-pin table.
func (pl *placement) checkTableRoom(e *entry, flows []flow, paths [][]models.Endpoint) error {
	now := pl.cfg.Now()
	// limit is sw's flow-pin room, if any is known: the P4Info's size, or
	// less if the switch recently refused entries for lack of room.
	limit := func(sw models.SwitchID) (int, bool) {
		l := pl.cfg.FlowPinEntries
		if r, ok := pl.room[sw]; ok && now.Before(r.until) && (l <= 0 || r.entries < l) {
			return r.entries, true
		}
		return l, l > 0
	}
	add := map[models.SwitchID]int{}
	for i, p := range paths {
		if flows[i].slot() {
			continue // a sampled intent's slot: no entry
		}
		for _, hop := range p {
			if owner, ok := pl.flowOwner[flows[i].key]; ok && owner == e.in.ID {
				continue // replacing its own entry
			}
			add[hop.Switch]++
		}
	}
	for sw, n := range add {
		l, known := limit(sw)
		if have := len(pl.pins.at[sw]); known && have+n > l {
			return fmt.Errorf("%w: %s has %d of %d entries; %d more needed", ErrTableFull, sw, have, l, n)
		}
	}
	return nil
}

// pin reserves e's flows on paths, installs their pins, and records the
// paths in its status.
func (pl *placement) pin(b *batch, e *entry, paths [][]models.Endpoint) {
	pl.pinPaths(b, e, paths)
	pl.await(e.in.ID)
}

// pinPaths is pin without the wait for a read-back: for an intent
// placed as stored that was Installed already (placeStored).
func (pl *placement) pinPaths(b *batch, e *entry, paths [][]models.Endpoint) {
	for _, f := range e.flows {
		if !f.slot() {
			pl.dropDetected(b, f.key) // declared now: the intent's pins replace it
		}
	}
	e.gen, e.pinned = pl.pins.lock(), true
	defer pl.pins.unlock()
	e.in.Status.Flows = make([]models.FlowStatus, len(e.flows))
	reserved := map[string]float64{}
	seen := map[models.SwitchID]bool{}
	e.switches = e.switches[:0]
	for i, f := range e.flows {
		path := paths[i]
		e.in.Status.Flows[i] = models.FlowStatus{Src: f.src.Name, Dst: f.dst.Name, SrcPort: f.key.SrcPort, Gbps: f.gbps, Path: path}
		_ = pl.book.Reserve(f.src, path, f.gbps) // paths come from this book's Fit
		for _, r := range pl.book.Resources(f.src, path) {
			reserved[r] += f.gbps
		}
		pl.flowOwner[f.key] = e.in.ID
		if f.slot() {
			continue // a sampled intent's slot: reserved, never pinned
		}
		for _, hop := range path {
			pl.pins.set(hop.Switch, f.key, hop.Port)
			b.touched[hop.Switch] = true
			if !seen[hop.Switch] {
				seen[hop.Switch] = true
				e.switches = append(e.switches, hop.Switch)
			}
		}
	}
	e.in.Status.ReservedGbps = reserved
	pl.tallyPins(e, paths)
	b.undo = append(b.undo, func() { pl.unpinNow(e) })
}

// unpin releases e's reservation and removes its pins.
func (m *Manager) unpin(b *batch, e *entry) {
	if !e.pinned {
		return
	}
	flows, status := e.flows, e.in.Status.Flows
	for _, sw := range e.switches {
		b.touched[sw] = true
	}
	m.p.unpinNow(e)
	m.retry = true
	b.undo = append(b.undo, func() { m.p.repin(e, flows, status) })
}

func (pl *placement) unpinNow(e *entry) {
	if !e.pinned {
		return
	}
	pl.reserveFlows(e, -1)
	e.gen, e.pinned = pl.pins.lock(), false
	defer pl.pins.unlock()
	pl.untallyPins(e)
	for _, f := range e.flows {
		if pl.flowOwner[f.key] == e.in.ID {
			delete(pl.flowOwner, f.key)
		}
		for _, sw := range e.switches {
			pl.pins.drop(sw, f.key, 0)
		}
	}
}

// reserveFlows books (sign 1) or releases (-1) e's flows' rates on the
// paths its status holds.
func (pl *placement) reserveFlows(e *entry, sign float64) {
	for i, f := range e.flows {
		if i < len(e.in.Status.Flows) {
			_ = pl.book.Reserve(f.src, e.in.Status.Flows[i].Path, sign*f.gbps)
		}
	}
}

// repin restores pins exactly as they were (undo of unpin).
func (pl *placement) repin(e *entry, flows []flow, status []models.FlowStatus) {
	b := &batch{touched: map[models.SwitchID]bool{}}
	e.flows = flows
	paths := make([][]models.Endpoint, len(status))
	for i, f := range status {
		paths[i] = f.Path
	}
	pl.pin(b, e, paths)
	e.in.Status.Flows = status
}

// setState moves e to state and stores it.
func (m *Manager) setState(b *batch, e *entry, state models.IntentState, reason string, now time.Time) {
	prev := e.in
	wasLive := prev.Status.State.Live()
	e.in.SetState(state, reason, now)
	if state == models.StatePending {
		e.since = now
	}
	switch isLive := state.Live(); {
	case isLive && !wasLive:
		m.usage.charge(b, e.in.Tenant, e.in.Spec.TotalGbps(), 1)
	case !isLive && wasLive:
		m.usage.charge(b, e.in.Tenant, -e.in.Spec.TotalGbps(), -1)
	}
	b.undo = append(b.undo, func() { e.in.Status = prev.Status })
	b.put(e)
	if finishedState(state) && !finishedState(prev.Status.State) {
		m.noteFinished(b, e)
	}
}

// preempt frees capacity for e by displacing lower-priority intents on
// the bottleneck, lowest priority (then newest) first. It returns the
// victims and the fit with them gone; when even that does not fit it
// puts everything back and returns the original fit.
func (pl *placement) preempt(b *batch, e *entry, demands []pathcalc.Demand, cons pathcalc.PathConstraints, fit pathcalc.Fit) ([]*entry, pathcalc.Fit) {
	var victims []*entry
	type pinned struct {
		flows  []flow
		status []models.FlowStatus
	}
	var saved []pinned
	restore := func() {
		for i, v := range victims {
			pl.repin(v, saved[i].flows, saved[i].status)
		}
	}
	for !fit.Fits && fit.Bottleneck != "" {
		var cand *entry
		for _, o := range pl.all {
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
		pl.unpinNow(cand)
		victims = append(victims, cand)
		fit = pl.book.Fit(demands, cons)
	}
	if !fit.Fits {
		restore()
		return nil, pl.book.Fit(demands, cons)
	}
	// The victims are unpinned for real by admit (which records undo);
	// put them back here so that happens in one place.
	restore()
	return victims, fit
}
