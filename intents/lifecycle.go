package intents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// AnyRevision, as Update's ifMatch, matches whatever revision the intent
// is at (If-Match: *).
var AnyRevision []int64

// Update replaces an intent's spec if its current revision is one of
// ifMatch (AnyRevision: whatever it is); the new spec is admitted on its
// own terms (the old reservation is not counted against it) or the update
// is refused and nothing changes.
func (m *Manager) Update(ctx context.Context, scope Scope, id string, spec models.IntentSpec, ifMatch []int64) (Outcome, error) {
	if err := spec.Validate(); err != nil {
		return Outcome{}, err
	}
	// Its tenant, looked up before deciding (see Create).
	m.mu.RLock()
	var owner models.TenantName
	if e, ok := m.p.all[id]; ok {
		owner = e.in.Tenant
	}
	m.mu.RUnlock()
	var t models.Tenant
	if owner != "" {
		var err error
		if t, err = m.cfg.Auth.Tenant(ctx, owner); err != nil {
			return Outcome{}, err
		}
	}
	return m.submit(ctx, func(b *batch) (Outcome, error) {
		e, ok := m.p.all[id]
		if !ok || !scope.sees(e.in.Tenant) {
			return Outcome{}, fmt.Errorf("%w: intent %q", store.ErrNotFound, id)
		}
		if ifMatch != nil && !slices.Contains(ifMatch, e.in.Revision) {
			at := fmt.Sprintf("revision %d", e.in.Revision)
			if e.in.Revision == 0 {
				at = "a revision being committed" // changed earlier in this batch
			}
			return Outcome{}, fmt.Errorf("%w: intent %s is at %s, not %s", ErrPrecondition, id, at, revisions(ifMatch))
		}
		// etcd checks it too, so a write by another replica is not lost
		// (with "*", one made since this decision was taken). Revision 0:
		// an earlier decision of this batch changed it and carries that
		// check already (a second one would compare with 0, fail the
		// whole batch, and answer everyone in it 503).
		if e.in.Revision != 0 {
			b.cmps = append(b.cmps, clientv3.Compare(clientv3.ModRevision(intentKey(e.in.Tenant, id)), "=", e.in.Revision))
		}
		if e.in.Status.State == models.StateDeleted {
			return Outcome{}, fmt.Errorf("%w: intent %q is being deleted", store.ErrNotFound, id)
		}
		if m.p.book == nil {
			return Outcome{}, store.ErrNoTopology
		}
		prev, prevFlows := e.in, e.flows
		b.undo = append(b.undo, func() { e.in, e.flows = prev, prevFlows })
		m.unpin(b, e)
		if prev.Status.State.Live() { // admit counts it afresh
			m.usage.charge(b, e.in.Tenant, -prev.Spec.TotalGbps(), -1)
		}
		e.in.Spec = spec
		e.in.Spec = e.in.Spec.WithDefaults()
		e.in.Status.State = ""     // not live while it is re-admitted
		if t.Name != e.in.Tenant { // deleted and made again between: not the intent it was
			return Outcome{}, fmt.Errorf("%w: intent %q", store.ErrNotFound, id)
		}
		out, err := m.admit(b, e, t, false)
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

// revisions says a list of revisions ("3", "3 or 5").
func revisions(revs []int64) string {
	parts := make([]string, len(revs))
	for i, r := range revs {
		parts[i] = strconv.FormatInt(r, 10)
	}
	return strings.Join(parts, " or ")
}

// Delete releases an intent and removes its entries from the switches;
// the record goes away once the switches confirm.
func (m *Manager) Delete(ctx context.Context, scope Scope, id string) (models.Intent, error) {
	out, err := m.submit(ctx, func(b *batch) (Outcome, error) {
		e, ok := m.p.all[id]
		if !ok || !scope.sees(e.in.Tenant) {
			return Outcome{}, fmt.Errorf("%w: intent %q", store.ErrNotFound, id)
		}
		return Outcome{Intent: m.deleteEntry(b, e, "deleted")}, nil
	})
	return out.Intent, err
}

// deleteEntry releases e and, once its switches confirm, removes its
// record (at once if nothing was pinned); it returns the intent as it
// stands after the decision.
func (m *Manager) deleteEntry(b *batch, e *entry, why string) models.Intent {
	if e.in.Status.State == models.StateDeleted {
		return e.in
	}
	now := m.cfg.Now().UTC()
	if !e.pinned {
		m.setState(b, e, models.StateDeleted, why, now)
		out := e.in
		m.remove(b, e)
		return out
	}
	n := len(e.switches)
	m.unpin(b, e)
	m.setState(b, e, models.StateDeleted, fmt.Sprintf("%s; removing its entries from %d switches", why, n), now)
	m.p.await(e.in.ID)
	return e.in
}

// DeleteTenant deletes every intent of a tenant that is gone (see
// tenancy.Auth.DeleteTenant), as Delete does each, over as many commits
// as it takes; it returns how many it deleted. The leader also sweeps
// intents whose tenant no longer exists (sweepOrphans), so an intent
// admitted beside the tenant's deletion, or one left when this call
// failed, goes too.
func (m *Manager) DeleteTenant(ctx context.Context, tenant models.TenantName) (int, error) {
	total := 0
	for {
		n := 0
		_, err := m.submit(ctx, func(b *batch) (Outcome, error) {
			n = m.deleteTenant(b, tenant)
			return Outcome{}, nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// deleteTenant decides the deletion of tenant's intents, as many as the
// batch has room for; it returns how many.
func (m *Manager) deleteTenant(b *batch, tenant models.TenantName) int {
	n := 0
	for _, e := range m.p.all {
		if b.full() {
			break
		}
		if e.in.Tenant == tenant && e.in.Status.State != models.StateDeleted {
			m.deleteEntry(b, e, "deleted with its tenant")
			n++
		}
	}
	return n
}

// Held is how many intent records of tenant exist, in any state (deleted
// ones whose entries are still being removed included).
func (m *Manager) Held(tenant models.TenantName) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, e := range m.p.all {
		if e.in.Tenant == tenant {
			n++
		}
	}
	return n
}

// housekeep does what is due in this batch, within its budget: restore or
// move intents after a fabric change or freed capacity, promote intents
// whose switches confirmed their entries, drop deleted ones whose entries
// are gone, and fail intents pending too long.
func (m *Manager) housekeep(b *batch, tick bool) {
	m.news.take(&m.trouble)
	if !m.loaded {
		return
	}
	now := m.cfg.Now().UTC()
	if len(m.trouble.refused) > 0 {
		m.takeBackRefused(b, now)
	}
	if m.adaptive.due && m.p.book != nil && !b.full() {
		m.adaptive.due = false
		m.adapt(b, now)
	}
	if m.retry && m.p.book != nil && !b.full() {
		m.retry = false
		m.retryWaiting(b, now)
	}
	m.settleAwaiting(b, now)
	if tick && m.p.book != nil {
		m.placeDetected(b)
	}
	if m.fin.due && !b.full() {
		m.fin.due = false
		m.expireFinished(b, now)
	}
	if tick {
		for _, e := range m.p.all {
			if b.full() {
				break
			}
			if e.in.Status.State == models.StatePending && now.Sub(e.since) > m.cfg.PendingTimeout {
				m.setState(b, e, models.StateFailed, fmt.Sprintf("pending for over %s: %s", m.cfg.PendingTimeout, e.in.Status.Reason), now)
			}
		}
	}
}

// settleAwaiting moves the intents whose switches were all read back
// (Installed, or removed once Deleted) and reports failures for the rest.
// A batch holds a transaction's worth of those moves; every intent looked
// at is still checked once (and indexed by its switches if it is new), and
// those met that did not fit are carried to the next batch (settleNext).
// Carrying them as new ones instead made every batch check and index them
// all again under the lock: after a takeover or a bulk admission, with
// thousands met at once, 20–60 ms of every batch of 126, while the
// switches' reconciles waited on the same lock.
func (m *Manager) settleAwaiting(b *batch, now time.Time) {
	ids, fresh := m.p.toSettle(m.trouble.touched)
	for _, id := range ids {
		if !m.p.awaiting[id] {
			continue
		}
		e := m.p.all[id]
		if e == nil {
			delete(m.p.awaiting, id)
			continue
		}
		if !m.trouble.confirmed(e) {
			if fresh[id] { // indexed once per wait, not at every look
				m.p.waitOn(id, e.switches)
			}
			if b.full() {
				if m.trouble.failing(e) {
					m.p.settleNext = append(m.p.settleNext, id) // its reason is updated next batch
				}
				continue
			}
			m.reportFailure(b, e, now)
			continue
		}
		if b.full() {
			m.p.settleNext = append(m.p.settleNext, id)
			continue
		}
		delete(m.p.awaiting, id)
		b.undo = append(b.undo, func() { m.p.await(id) })
		switch e.in.Status.State {
		case models.StateAdmitted:
			reason := fmt.Sprintf("entries confirmed by read-back on %d switches", len(e.switches))
			if e.in.Spec.SampledFlows {
				reason = "reserved: the flows sampling finds between its hosts are pinned on its paths"
			}
			m.setState(b, e, models.StateInstalled, reason, now)
		case models.StateDeleted:
			m.remove(b, e)
		}
	}
}

// remove deletes e's record; it must hold no reservation.
func (m *Manager) remove(b *batch, e *entry) {
	id := e.in.ID
	b.setOp(intentKey(e.in.Tenant, id), clientv3.OpDelete(intentKey(e.in.Tenant, id)))
	delete(m.p.all, id)
	delete(m.p.awaiting, id)
	b.undo = append(b.undo, func() { m.p.all[id] = e })
	if k, ok := m.idemOf[id]; ok {
		rec := m.idem[k]
		b.setOp(store.KeyIdempotency+k, clientv3.OpDelete(store.KeyIdempotency+k))
		delete(m.idem, k)
		delete(m.idemOf, id)
		b.undo = append(b.undo, func() { m.idem[k], m.idemOf[id] = rec, k })
	}
}

// replanIfDue rebuilds the ledger when the fabric changed (or intents
// were reloaded), before this batch's decisions see it.
func (m *Manager) replanIfDue(b *batch) {
	if !m.loaded || m.p.snap == nil {
		return
	}
	if m.fabricGen == m.planned {
		// A term that began placed (load kept a follower's placement)
		// restores its kept elephants here, as a replan's end does.
		m.p.restoreDetectedLocked(b)
		return
	}
	prev := m.planned
	m.planned = m.fabricGen
	b.undo = append(b.undo, func() { m.planned = prev })
	m.replan(b, m.cfg.Now().UTC())
}

// reportFailure updates an Admitted intent's reason when a switch on its
// paths failed to take its entries (once per distinct error).
func (m *Manager) reportFailure(b *batch, e *entry, now time.Time) {
	if reason := m.trouble.reason(e); reason != "" && e.in.Status.Reason != reason {
		m.setState(b, e, models.StateAdmitted, reason, now)
	}
}

// failing says whether reportFailure would change e's reason.
func (t *switchTrouble) failing(e *entry) bool {
	reason := t.reason(e)
	return reason != "" && e.in.Status.Reason != reason
}

// failureReason is an Admitted intent's reason while a switch on its
// paths fails to take its entries ("" if none does).
func (t *switchTrouble) reason(e *entry) string {
	if e.in.Status.State != models.StateAdmitted {
		return ""
	}
	for _, sw := range e.switches {
		if msg, failed := t.failures[sw]; failed && t.synced[sw] < e.gen {
			return fmt.Sprintf("programming %s failed (%s); retrying", sw, msg)
		}
	}
	return ""
}

// whyMoved says why e's paths no longer work: a link on them drained
// (which drain), or down.
func whyMoved(snap *topology.Snapshot, drained map[models.LinkID]string, e *entry) string {
	for _, f := range e.in.Status.Flows {
		for _, hop := range f.Path {
			if l, ok := snap.LinkAt(hop); ok {
				if d, drained := drained[l.ID()]; drained {
					return "a link on its path was drained (" + d + ")"
				}
			}
		}
	}
	return "a link on its path went down"
}

// replan rebuilds the ledger for the current fabric: intents whose paths
// still work keep them; the others are placed again or degraded.
func (m *Manager) replan(b *batch, now time.Time) {
	book, err := pathcalc.NewBook(m.p.snap, m.p.down, m.cfg.Headroom)
	if err != nil {
		m.log.Error("cannot build the bandwidth ledger", "err", err)
		return
	}
	oldBook := m.p.book
	m.p.book = book
	b.undo = append(b.undo, func() { m.p.book = oldBook })
	if len(m.p.pins.at) == 0 {
		m.p.sizePins()
	}
	var moving []*entry
	ids := slices.Sorted(maps.Keys(m.p.all))
	for _, id := range ids {
		e := m.p.all[id]
		switch how, err := m.p.placeStored(b, e); how {
		case endpointsGone:
			m.setState(b, e, models.StateFailed, "endpoints left the fabric: "+err.Error(), now)
		case pathsGone:
			moving = append(moving, e)
		}
	}
	// Highest priority first, then oldest.
	slices.SortStableFunc(moving, func(x, y *entry) int { return y.in.Spec.Priority - x.in.Spec.Priority })
	for _, e := range moving {
		if b.full() {
			m.fabricGen++ // finish next round
			break
		}
		why := whyMoved(m.p.snap, m.drained, e)
		m.unpin(b, e)
		m.place(b, e, now, why)
	}
	m.retryWaiting(b, now)
	m.p.restoreDetectedLocked(b)
}

// storedPlacement is what placing an intent as stored came to.
type storedPlacement int

const (
	// placedAsStored: its stored paths are reserved and pinned, or it
	// has none to place (not live, Pending, Degraded), or it is Deleted
	// and waits for a read-back of its switches.
	placedAsStored storedPlacement = iota
	// pathsGone: a stored path crosses a link that is down or gone; the
	// intent is to be placed again (a decision).
	pathsGone
	// endpointsGone: its hosts left the fabric; it is to fail (a decision).
	endpointsGone
)

// placeStored puts e on the ledger and the switches' pins as it is
// stored, deciding nothing: what needs a decision is returned for the
// caller (replan decides; a follower leaves it to the next term).
func (pl *placement) placeStored(b *batch, e *entry) (storedPlacement, error) {
	if e.in.Status.State == models.StateDeleted {
		if !e.pinned && !pl.awaiting[e.in.ID] { // loaded after a restart: wait for one read-back
			e.gen = pl.pins.next()
			e.switches = e.switches[:0]
			for _, f := range e.in.Status.Flows {
				if f.SrcPort == slotPort {
					continue // a sampled intent's slot: nothing on the switches
				}
				for _, hop := range f.Path {
					if !slices.Contains(e.switches, hop.Switch) {
						e.switches = append(e.switches, hop.Switch)
					}
				}
			}
			pl.await(e.in.ID)
		}
		return placedAsStored, nil
	}
	if !e.in.Status.State.Live() {
		return placedAsStored, nil
	}
	if e.flows == nil {
		flows, err := pl.resolve(e.in.Tenant, e.in.Spec)
		if err != nil {
			return endpointsGone, err
		}
		e.flows = flows
	}
	if len(e.in.Status.Flows) == 0 || e.in.Status.Flows[0].Path == nil {
		return placedAsStored, nil // nothing reserved (Pending, Degraded)
	}
	if len(e.in.Status.Flows) != len(e.flows) {
		return pathsGone, nil
	}
	for i := range e.in.Status.Flows {
		if !pl.book.Usable(e.flows[i].src, e.in.Status.Flows[i].Path) {
			return pathsGone, nil
		}
	}
	paths := make([][]models.Endpoint, len(e.in.Status.Flows))
	for i, f := range e.in.Status.Flows {
		paths[i] = f.Path
	}
	if e.pinned {
		// Same pins, new ledger: reserve without bumping the generation.
		for i, f := range e.flows {
			_ = pl.book.Reserve(f.src, paths[i], f.gbps)
		}
	} else {
		// After a restart or at a takeover: pins come back from etcd.
		// An Installed intent does not wait for a read-back again: its
		// state would not change when it came, and at 100,000 intents
		// the waiting would be the largest part of a new term's work
		// under the manager's lock (settling them as each switch is
		// read costs 0.87 s of CPU in a k=16 takeover's first seconds).
		// Its switches are still compared and written as any others.
		pl.pinPaths(b, e, paths)
		if e.in.Status.State != models.StateInstalled {
			pl.await(e.in.ID)
		}
	}
	return placedAsStored, nil
}

// sizePins makes each switch's pin map, after a load, as large as the
// stored paths say it will be: at 100,000 intents, growing them one pin
// at a time was a third of a new leader's placement.
func (pl *placement) sizePins() {
	count := map[models.SwitchID]int{}
	for _, e := range pl.all {
		if !e.in.Status.State.Live() {
			continue
		}
		for _, f := range e.in.Status.Flows {
			for _, hop := range f.Path {
				count[hop.Switch]++
			}
		}
	}
	pl.pins.size(count)
}

// place tries to (re)reserve e's flows: Admitted on success, Degraded
// (flows left to ECMP) when there is no room.
func (m *Manager) place(b *batch, e *entry, now time.Time, why string) bool {
	cons, err := m.p.constraints(e)
	if err != nil {
		m.setState(b, e, models.StateFailed, "constraints no longer valid: "+err.Error(), now)
		return false
	}
	demands := make([]pathcalc.Demand, len(e.flows))
	for i, f := range e.flows {
		demands[i] = pathcalc.Demand{Src: f.src, Dst: f.dst, Gbps: f.gbps}
	}
	fit := m.p.book.Fit(demands, cons)
	if !fit.Fits {
		if e.in.Status.State != models.StateDegraded && e.in.Status.State != models.StatePending {
			e.in.Status.Flows = clearPaths(e.in.Status.Flows)
			e.in.Status.ReservedGbps = nil
			m.setState(b, e, models.StateDegraded, why+"; no room elsewhere ("+fit.Reason+"); its flows follow ECMP", now)
		}
		return false
	}
	if err := m.p.checkTableRoom(e, e.flows, fit.Paths); err != nil {
		return false
	}
	prev := e.in.Status.State
	m.p.pin(b, e, fit.Paths)
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
func (m *Manager) retryWaiting(b *batch, now time.Time) {
	var waiting []*entry
	for _, e := range m.p.all {
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
			o, ok := m.p.flowOwner[f.key]
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
	// adaptMaxTries bounds how many hot intents a round looks for a
	// cooler path for (about 90 µs each at k=16): a leaf whose uplinks
	// are all hot has hundreds that cannot move, and looking at them all
	// held the loop's lock 75 ms a round at 100,000 intents
	// (BenchmarkHousekeep). Those looked at longest ago go first, so
	// every one is looked at in turn.
	adaptMaxTries = 256
)

func (m *Manager) adapt(b *batch, now time.Time) {
	// Not while changes of pins are on their way: a flow whose pins are
	// not all written yet is hashed, and loads links it will leave.
	// (Seen: a thousand intents moved at once to make room for elephants
	// took seconds to reach every switch on a busy machine; adapt found
	// the links their flows hashed onto hot, and moved intents off them
	// after the loop had settled.) A port whose own pins changed waits
	// longer still (portLoad).
	if m.adaptive.pins.Wait(m.p.pins.pendingBetween) {
		return
	}
	m.adaptive.round++
	// Detected elephants are placed on what reservations leave and are
	// re-placed around the intents every second: a link they alone make
	// hot is no reason to move an intent (the two would chase each other).
	elephants := m.p.pinnedLoad(&m.obs, false)
	// Each port is looked up once a round: 100,000 intents cross a few
	// thousand ports some 450,000 times.
	seen := map[models.Endpoint]float64{}
	util := func(e models.Endpoint) float64 {
		if u, ok := seen[e]; ok {
			return u
		}
		u, ok := m.portLoad(e)
		if !ok {
			u = 0
		} else if c := m.p.book.Capacity(e); c > 0 {
			u = max(u-elephants[e]/c, 0)
		}
		seen[e] = u
		return u
	}
	hots := m.hotIntents(util)
	// Those looked at longest ago first (never, round 0: first of all),
	// each part hottest first (a stable sort keeps hotIntents' order);
	// an intent no longer hot is forgotten.
	still := make(map[string]int, len(hots))
	for _, h := range hots {
		if at := m.adaptive.tried[h.e.in.ID]; at > 0 {
			still[h.e.in.ID] = at
		}
	}
	m.adaptive.tried = still
	slices.SortStableFunc(hots, func(x, y hot) int { return cmp.Compare(m.adaptive.tried[x.e.in.ID], m.adaptive.tried[y.e.in.ID]) })
	moves, tries := 0, 0
	for _, h := range hots {
		if moves == adaptMaxMoves || tries == adaptMaxTries || b.full() {
			break
		}
		e := h.e
		cons, err := m.p.constraints(e)
		if err != nil {
			continue
		}
		m.obs.mu.Lock()
		observed, measured := m.obs.byIntent[e.in.ID]
		m.obs.mu.Unlock()
		if !measured {
			// Its own rate is not known (its counters not read twice
			// since it last moved, or its switch not answering): its
			// traffic on a candidate path cannot be counted, and every
			// path beside another's flow would look cooler than its own.
			// (Seen: an intent sending at line rate moved every time its
			// hold ran out, onto a detected elephant's link.) One
			// measured idle moves: its room is what it will need.
			continue
		}
		tries++
		m.adaptive.tried[e.in.ID] = m.adaptive.round
		perFlow := observed / float64(max(len(e.flows), 1))
		flows := e.flows
		newPaths, better := m.p.coolerPaths(e, cons, perFlow, util)
		if !better {
			continue
		}
		m.unpin(b, e)
		e.flows = flows
		m.p.pin(b, e, newPaths)
		for _, sw := range e.switches {
			b.touched[sw] = true
		}
		m.adaptive.markMoved(b, e.in.ID, m.stats.DetectedRounds)
		moves++
		m.setState(b, e, models.StateAdmitted, fmt.Sprintf("moved off a link measured at %.0f%% to a cooler path", 100*h.worst), now)
	}
	if moves > 0 {
		m.stats.AdaptMoves += moves
		b.undo = append(b.undo, func() { m.stats.AdaptMoves -= moves })
		m.log.Info("intents moved off links measured hot", "intents", moves, "hot", len(hots))
	}
}

// portLoad is the measured utilization of port e as adapt judges it.
// A port that gained or lost a pin is judged only by a reading taken
// after the change took effect (pinTable.readAfter), and by the lower of
// it and the smoothed reading. (Seen: elephants moved off a link, and
// the next adapt round found the intent left there at 100% and moved it
// too, and the elephants then moved around it: a cascade a loop settled
// for seconds started again each time.)
func (m *Manager) portLoad(e models.Endpoint) (float64, bool) {
	u, ok := m.cfg.Utilization(e)
	if !ok || m.cfg.RecentUtilization == nil {
		return u, ok
	}
	// The last interval's reading is looked up only for a port whose
	// pins changed: adapt asks for every hop of every hot intent.
	var recent float64
	switch fresh, changed := m.p.pins.readAfter(e, func() (from, to time.Time) {
		recent, from, to, _ = m.cfg.RecentUtilization(e)
		return from, to
	}); {
	case !fresh:
		return 0, false
	case !changed:
		return u, true
	}
	return min(u, recent), true
}

// hot is an intent adapt may move, with the hottest fabric link it
// crosses.
type hot struct {
	e     *entry
	worst float64
}

// coolerPaths looks for paths for e's flows (each sending perFlow) whose
// hottest hop, by util, is cooler than its current path's by
// adaptMargin, with room on the ledger for all of them at once; better
// says some flow found one. e is left placed as it was: only its
// reservations are set aside while it looks (its own room counts as
// free), not its pins. (Unpinned and pinned back, its ports' pins read
// as changed, with no switch to confirm a change that was none: adapt
// and the congestion weights then never judged those ports again.)
func (pl *placement) coolerPaths(e *entry, cons pathcalc.PathConstraints, perFlow float64, util func(models.Endpoint) float64) (newPaths [][]models.Endpoint, better bool) {
	flows, status := e.flows, e.in.Status.Flows
	if e.pinned {
		pl.reserveFlows(e, -1)
		defer pl.reserveFlows(e, 1)
	}
	newPaths = make([][]models.Endpoint, len(flows))
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
		for _, p := range pl.book.Candidates(f.src, f.dst, cons) {
			if pl.book.Room(f.src, p) < f.gbps-1e-9 {
				continue
			}
			w := 0.0
			for _, hop := range p[:len(p)-1] {
				u := util(hop)
				if c := pl.book.Capacity(hop); c > 0 && !slices.Contains(cur, hop) {
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
		if pl.book.Room(f.src, best) < f.gbps-1e-9 {
			better = false // its current path has no room left either: stay
			break
		}
		src, path, g := f.src, best, f.gbps
		_ = pl.book.Reserve(src, path, g)
		held = append(held, func() { _ = pl.book.Reserve(src, path, -g) })
	}
	for _, release := range held {
		release()
	}
	return newPaths, better // the move, if any, goes through the batch
}

// hotIntents are the Installed, pinned intents not moved lately that
// cross a fabric link direction measured at adaptHot or more (util),
// hottest first. They are found from the hot ports, through the pins of
// those ports' switches, not by looking at every intent: with 100,000
// intents that look costs 74 ms of the loop's lock on an idle machine
// (BenchmarkHousekeep) and 0.11–0.71 s on a busy one, every round,
// mostly with nothing hot at all.
func (m *Manager) hotIntents(util func(models.Endpoint) float64) []hot {
	if m.p.snap == nil {
		return nil
	}
	var ports []models.Endpoint
	for l := range m.p.snap.AllFabricLinks() {
		for _, e := range [2]models.Endpoint{l.A, l.B} {
			if len(m.p.pins.at[e.Switch]) > 0 && util(e) >= adaptHot { // no pins: no intent to move
				ports = append(ports, e)
			}
		}
	}
	looked := map[string]bool{}
	var hots []hot
	for _, p := range ports {
		for key, port := range m.p.pins.at[p.Switch] {
			id, owned := m.p.flowOwner[key] // detected elephants' pins have none
			if port != p.Port || !owned || looked[id] {
				continue
			}
			looked[id] = true
			e := m.p.all[id]
			if e == nil || e.in.Status.State != models.StateInstalled || !e.pinned || m.adaptive.movedLately(id, m.stats.DetectedRounds) {
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
	}
	slices.SortFunc(hots, hottestFirst)
	return hots
}

// hottestFirst orders hot intents by the hottest link they cross, then
// by ID.
func hottestFirst(x, y hot) int {
	return cmp.Or(cmp.Compare(y.worst, x.worst), strings.Compare(x.e.in.ID, y.e.in.ID))
}

// movedAt is when an intent moved: the adapt round and the detected
// elephants' placement round; again counts the moves before it that
// were each within two of their hold-downs of the next.
type movedAt struct{ round, detectedRound, again int }

// maxHoldShift is how far (in doublings) an intent's hold-down grows
// when it keeps moving.
const maxHoldShift = 4

// movedLately says an intent moved, by either mover, in the last
// adaptHoldRounds adapt rounds or the last jointHoldRounds placement
// rounds, doubled for each move that came soon after the one before (up
// to maxHoldShift doublings): it sits out both movers. Each holding only
// for its own moves, they moved an intent that sent more than it
// reserved back and forth in turn, the one before its rate on the new
// path was measured again; holding it for fixed rounds, they moved it
// back and forth at that pace (one that sends 100 Gb/s on 40 reserved
// makes any link it takes hot, and the elephants then move around it).
func (a *adaptState) movedLately(id string, detectedRounds int) bool {
	at, ok := a.moved[id]
	return ok && at.within(a.round, detectedRounds, 1)
}

// within says whether adapt round and placement round detectedRounds
// are within times its hold-down of this move.
func (at movedAt) within(round, detectedRounds, times int) bool {
	shift := min(at.again, maxHoldShift)
	return round-at.round <= times*adaptHoldRounds<<shift || detectedRounds-at.detectedRound < times*jointHoldRounds<<shift
}

// markMoved starts an intent's hold-down (see movedLately), undone with
// the batch.
func (a *adaptState) markMoved(b *batch, id string, detectedRounds int) {
	prev, had := a.moved[id]
	again := 0
	if had && prev.within(a.round, detectedRounds, 2) {
		again = prev.again + 1 // moved again within twice its last hold-down: a longer one
	}
	a.moved[id] = movedAt{round: a.round, detectedRound: detectedRounds, again: again}
	b.undo = append(b.undo, func() {
		if had {
			a.moved[id] = prev
		} else {
			delete(a.moved, id)
		}
	})
}

// finishedState says whether an intent in state s is over without
// holding anything (Rejected, Failed): its record is kept for a while
// only (see Config.KeepFinished).
func finishedState(s models.IntentState) bool {
	return s == models.StateRejected || s == models.StateFailed
}

// noteFinished records that e's record is now finished and removes its
// tenant's oldest finished records beyond Config.MaxFinished.
func (m *Manager) noteFinished(b *batch, e *entry) {
	t := e.in.Tenant
	q := append(m.fin.byTenant[t], e.in.ID)
	for len(q) > m.cfg.MaxFinished && !b.full() { // the rest at the next one, or the sweep
		old := m.p.all[q[0]]
		q = q[1:]
		if old != nil && old != e && finishedState(old.in.Status.State) {
			m.deleteEntry(b, old, fmt.Sprintf("removed: %s keeps at most %d rejected or failed intents", t, m.cfg.MaxFinished))
		}
	}
	m.fin.byTenant[t] = q
}

// expireFinished rebuilds the finished records' lists from the records
// and removes those older than Config.KeepFinished, or beyond
// Config.MaxFinished for their tenant, oldest first, within the batch.
func (m *Manager) expireFinished(b *batch, now time.Time) {
	byTenant := map[models.TenantName][]*entry{}
	for _, e := range m.p.all {
		if finishedState(e.in.Status.State) {
			byTenant[e.in.Tenant] = append(byTenant[e.in.Tenant], e)
		}
	}
	m.fin.byTenant = make(map[models.TenantName][]string, len(byTenant))
	for t, es := range byTenant {
		slices.SortFunc(es, func(x, y *entry) int {
			if c := x.in.Status.Updated.Compare(y.in.Status.Updated); c != 0 {
				return c
			}
			return strings.Compare(x.in.ID, y.in.ID)
		})
		for len(es) > 0 && !b.full() {
			e := es[0]
			age := now.Sub(e.in.Status.Updated)
			if age <= m.cfg.KeepFinished && len(es) <= m.cfg.MaxFinished {
				break
			}
			m.deleteEntry(b, e, fmt.Sprintf("removed: %s %s ago; kept for %s", strings.ToLower(string(e.in.Status.State)), age.Round(time.Second), m.cfg.KeepFinished))
			es = es[1:]
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.in.ID
		}
		m.fin.byTenant[t] = ids
	}
}
