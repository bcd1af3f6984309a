package intents

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
)

// --- reads ---

// Get returns one intent the scope may see.
func (m *Manager) Get(scope Scope, id string) (models.Intent, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.p.all[id]
	if !ok || e.stored == nil || !scope.sees(e.in.Tenant) {
		return models.Intent{}, fmt.Errorf("%w: intent %q", store.ErrNotFound, id)
	}
	return m.obs.view(*e.stored), nil
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
func (m *Manager) List(scope Scope, opts ListOptions) ([]models.Intent, string) {
	if opts.Limit <= 0 || opts.Limit > 1000 {
		opts.Limit = 100
	}
	m.mu.RLock()
	ids := make([]string, 0, len(m.p.all))
	for id, e := range m.p.all {
		if id > opts.After && e.stored != nil && scope.sees(e.in.Tenant) && (opts.State == "" || e.stored.Status.State == opts.State) {
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
		out[i] = m.obs.view(*m.p.all[id].stored)
	}
	m.mu.RUnlock()
	return out, next
}

// Capacity answers how much src can reserve toward dst now; a tenant
// asks only between hosts it may use.
func (m *Manager) Capacity(ctx context.Context, scope Scope, src, dst string) (api.Capacity, error) {
	var t models.Tenant
	if !scope.Operator {
		var err error
		if t, err = m.cfg.Auth.Tenant(ctx, scope.Tenant); err != nil { // before the lock: it may ask etcd
			return api.Capacity{}, err
		}
	}
	m.mu.Lock() // the book caches paths as it goes: not a reader
	defer m.mu.Unlock()
	if m.p.book == nil {
		return api.Capacity{}, store.ErrNoTopology
	}
	var v models.ValidationError
	s, errS := resolveHost(m.p.snap, src)
	d, errD := resolveHost(m.p.snap, dst)
	if errS != nil {
		v.Errors = append(v.Errors, models.FieldError{Field: "src", Message: errS.Error()})
	}
	if errD != nil {
		v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: errD.Error()})
	}
	if errS == nil && errD == nil && s.Name == d.Name {
		v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: "same host as src"}) // as an intent is refused
	}
	if len(v.Errors) > 0 {
		return api.Capacity{}, &v
	}
	if !scope.Operator {
		if err := m.cfg.mayUse(t, []flow{{src: s, dst: d}}); err != nil {
			return api.Capacity{}, err
		}
	}
	free, at := m.p.book.Available(s, d)
	return api.Capacity{Src: s.Name, Dst: d.Name, AvailableGbps: free, Bottleneck: at, Headroom: m.cfg.Headroom, ReservedMLU: m.p.book.MLU()}, nil
}

// Usage is a tenant's live reservations.
func (m *Manager) Usage(t models.TenantName) (gbps float64, intents int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if u := m.usage[t]; u != nil {
		return u.gbps, u.intents
	}
	return 0, 0
}

// LiveUsing counts, per tenant other than except, the live intents with
// an endpoint host that uses reports true of.
func (m *Manager) LiveUsing(except models.TenantName, uses func(host string) bool) map[models.TenantName]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[models.TenantName]int{}
	for _, e := range m.p.all {
		in := e.in
		if in.Tenant == except || !in.Status.State.Live() {
			continue
		}
		for _, name := range specHosts(in.Spec) {
			if m.p.snap != nil {
				if h, err := resolveHost(m.p.snap, name); err == nil {
					name = h.Name // an address given for it
				}
			}
			if uses(name) {
				out[in.Tenant]++
				break
			}
		}
	}
	return out
}

// specHosts are the endpoints a spec names (names or addresses).
func specHosts(s models.IntentSpec) []string {
	if s.Collective != nil {
		return s.Collective.Endpoints
	}
	return []string{s.Src, s.Dst}
}

// Counts is how many intents are in each state.
func (m *Manager) Counts() map[models.IntentState]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[models.IntentState]int{}
	for _, e := range m.p.all {
		out[e.in.Status.State]++
	}
	return out
}

// view is an intent as clients see it: the stored record plus its
// observed rate. Status slices and maps are replaced, never edited in
// place, so a shallow copy of the struct is safe to hand out.
func (r *rates) view(in models.Intent) models.Intent {
	r.mu.Lock()
	in.Status.ObservedGbps = r.byIntent[in.ID]
	r.mu.Unlock()
	return in
}

// PinCounterReader reads the byte counters of flow-pin entries.
type PinCounterReader interface {
	ReadPinCounters(ctx context.Context, sw models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error)
}

// pinReads are the pin counters Observe reads: each switch's keys
// (bySwitch: a flow's first hop), the intent each read intent flow
// belongs to, the pinned elephants, and a sampled intent's elephants'
// intent.
type pinReads struct {
	owner     map[models.FlowKey]string
	elephant  map[models.FlowKey]bool
	bySwitch  map[models.SwitchID][]models.FlowKey
	claimedBy map[models.FlowKey]string
	// moving are intents pinned but not Installed (moved, their new pins
	// not yet confirmed): not read, they keep the rate they had.
	moving []string
}

// toRead is what to read: the Installed intents' pins (if intents is
// set) and the pinned elephants'.
func (pl *placement) toRead(intents bool) pinReads {
	rd := pinReads{owner: map[models.FlowKey]string{}, elephant: map[models.FlowKey]bool{},
		bySwitch: map[models.SwitchID][]models.FlowKey{}, claimedBy: map[models.FlowKey]string{}}
	all := pl.all
	if !intents {
		all = nil // not this time: not one of them is looked at
	}
	for id, e := range all {
		if e.in.Status.State != models.StateInstalled {
			if e.pinned && e.in.Status.State == models.StateAdmitted {
				rd.moving = append(rd.moving, id)
			}
			continue
		}
		for i, f := range e.flows { // Status.Flows[i] is flows[i]'s placement
			if f.slot() {
				continue // a sampled intent's slot has no pin: its flows are read as elephants
			}
			if i < len(e.in.Status.Flows) && len(e.in.Status.Flows[i].Path) > 0 {
				first := e.in.Status.Flows[i].Path[0].Switch
				rd.owner[f.key] = id
				rd.bySwitch[first] = append(rd.bySwitch[first], f.key)
			}
		}
	}
	for key, el := range pl.elephants {
		if len(el.path) > 0 {
			rd.elephant[key] = true
			rd.bySwitch[el.path[0].Switch] = append(rd.bySwitch[el.path[0].Switch], key)
			if el.intent != "" {
				rd.claimedBy[key] = el.intent
			}
		}
	}
	return rd
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
// would cost more than admitting them; and not before a new term's first
// read-back of the switches is over (Config.Swept).
func (m *Manager) Observe(ctx context.Context, r PinCounterReader, interval time.Duration) {
	every := min(interval, time.Second)
	intentMeter := telemetry.RateMeter[models.FlowKey]{Span: interval}
	elephantMeter := telemetry.RateMeter[models.FlowKey]{Span: 2 * every}
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := readDeadline{base: max(every, pinReadDeadline)}
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
		readIntents := time.Since(lastIntents) >= interval-every/2 && m.cfg.swept()
		if readIntents {
			lastIntents = time.Now()
		}
		m.mu.RLock()
		rd := m.p.toRead(readIntents)
		owner, elephant, bySwitch, claimedBy := rd.owner, rd.elephant, rd.bySwitch, rd.claimedBy
		m.mu.RUnlock()
		m.obs.mu.Lock()
		prevIntents, prevElephants, unmeasured := m.obs.byIntent, m.obs.byFlow, m.obs.unmeasured
		m.obs.mu.Unlock()
		rates := map[string]float64{}
		if !readIntents {
			rates = maps.Clone(prevIntents)
		}
		elephantRates := map[models.FlowKey]measuredRate{}
		unread := map[string]bool{} // intents with a flow on a switch that could not be read
		reads := readPinCounters(ctx, r, bySwitch, deadline.now(), m.cfg.Now)
		deadline.adapt(reads)
		for _, read := range reads {
			if read.err != nil {
				m.log.Debug("cannot read pin counters", "switch", read.sw, "err", read.err)
				for _, k := range bySwitch[read.sw] {
					if id, ok := owner[k]; ok {
						unread[id] = true
					}
					if fr, ok := prevElephants[k]; ok && elephant[k] {
						elephantRates[k] = fr
					}
				}
				continue
			}
			for k, b := range read.got {
				if id, ok := owner[k]; ok {
					if g, _, ok := intentMeter.Observe(k, b, read.at); ok {
						rates[id] += g
					}
				}
				if elephant[k] {
					if g, latest, ok := elephantMeter.Observe(k, b, read.at); ok {
						elephantRates[k] = measuredRate{gbps: g, latest: latest, at: read.at}
					}
				}
			}
		}
		// An intent moving keeps its rate until it is measured on its
		// new path (two reads of its new pins): its traffic moves with
		// it. Counted as nobody's for those reads, it looked like hashed
		// load to the congestion weights, which cut the links it had
		// just been moved onto, and like room freed to the elephants'
		// placement. One with no rate to keep (never measured) is
		// listed as unmeasured: pinnedLoad counts its reservation.
		if readIntents {
			unmeasured = map[string]bool{}
			keep := func(id string) {
				if _, ok := rates[id]; ok {
					return
				}
				if prev, ok := prevIntents[id]; ok {
					rates[id] = prev
				} else {
					unmeasured[id] = true
				}
			}
			for _, id := range rd.moving {
				keep(id)
			}
			for _, id := range owner {
				keep(id)
			}
		}
		// An intent not read in full keeps its last rate, or has none:
		// a switch that did not answer is not a flow that sends nothing.
		for id := range unread {
			if prev, ok := prevIntents[id]; ok {
				rates[id] = prev
			} else {
				delete(rates, id)
			}
		}
		if readIntents {
			intentMeter.Retain(func(k models.FlowKey) bool { _, ok := owner[k]; return ok })
			// A sampled intent sends what its flows measure.
			for k, id := range claimedBy {
				if fr, ok := elephantRates[k]; ok {
					rates[id] += fr.gbps
				}
			}
		}
		elephantMeter.Retain(func(k models.FlowKey) bool { return elephant[k] })
		m.obs.mu.Lock()
		m.obs.byIntent, m.obs.byFlow, m.obs.unmeasured = rates, elephantRates, unmeasured
		m.obs.mu.Unlock()
	}
}

// pinReaders is how many switches' pin counters are read at once: a
// round reads every switch in about the time of its slowest read, not
// the sum of them (each switch has its own deadline), so one slow or
// unreachable switch does not leave the others' readings stale.
const pinReaders = 16

// pinReadDeadline is the least time a switch has to answer a pin counter
// read, however often they are read: a round that takes longer only
// skips ticks, where a read cut short leaves its flows unmeasured (with
// reads every 250 ms, a quarter-second deadline failed 410 of about 720
// reads of a leaf-spine's leaves under the race detector).
const pinReadDeadline = time.Second

// pinReadDeadlineMax bounds how far readDeadline stretches a starved
// machine's deadline.
const pinReadDeadlineMax = 8 * time.Second

// readDeadline is the deadline of a round's pin counter reads: base,
// doubled (up to pinReadDeadlineMax) after a round in which most reads
// ran out of time, and back toward twice the slowest read once a round
// has none that did. On a starved machine (seen beside CPU burners, under
// the race detector) every read took longer than a second, so every read
// was cut short and no counter was read for a dozen seconds and more:
// the pinned elephants went unmeasured, were judged silent and were
// unpinned, and pinned again. A single switch that does not answer does
// not stretch it: the others' readings would go stale waiting for it.
type readDeadline struct {
	base, cur time.Duration
}

func (d *readDeadline) now() time.Duration { return max(d.base, d.cur) }

func (d *readDeadline) adapt(reads []pinRead) {
	timedOut := 0
	var slowest time.Duration
	for _, r := range reads {
		if r.timedOut {
			timedOut++
		}
		slowest = max(slowest, r.took)
	}
	switch {
	case timedOut >= 2 && 2*timedOut >= len(reads):
		d.cur = min(2*d.now(), pinReadDeadlineMax)
	case timedOut == 0 && len(reads) > 0:
		d.cur = min(d.now(), 2*slowest)
	}
}

// pinRead is one switch's pin counters, read at about at; took is how
// long the read took, timedOut whether its deadline cut it short.
type pinRead struct {
	sw       models.SwitchID
	got      map[models.FlowKey]uint64
	at       time.Time
	err      error
	took     time.Duration
	timedOut bool
}

// readPinCounters reads the counters of each switch's keys, pinReaders
// switches at a time, each read with its own deadline.
func readPinCounters(ctx context.Context, r PinCounterReader, bySwitch map[models.SwitchID][]models.FlowKey, deadline time.Duration, now func() time.Time) []pinRead {
	var (
		mu  sync.Mutex
		out = make([]pinRead, 0, len(bySwitch))
		wg  sync.WaitGroup
		sem = make(chan struct{}, pinReaders)
	)
	for sw, keys := range bySwitch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, deadline)
			sent := now()
			got, err := r.ReadPinCounters(rctx, sw, keys)
			timedOut := err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
			cancel()
			// The switch read its counters between request and answer:
			// timed at the middle, a slow answer errs by half as much.
			answered := now()
			mu.Lock()
			out = append(out, pinRead{sw: sw, got: got, at: sent.Add(answered.Sub(sent) / 2), err: err, took: answered.Sub(sent), timedOut: timedOut})
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// swept says this term's first read-back of the switches is over
// (Config.Swept; always, without one).
func (c *Config) swept() bool { return c.Swept == nil || c.Swept() }

// measuredRate is a pinned flow's rate from its pin's direct counter.
type measuredRate struct {
	gbps float64 // over 2 s: what is reported and judged
	// latest is over the last read alone: what a link's load, measured
	// over a shorter interval, holds of the flow now (see PinnedLoad).
	latest float64
	at     time.Time
}

// MeasuredRate is a pinned detected elephant's rate (Gb/s) from its
// first-hop pin's direct counter, and when it was read; ok is false until
// it has been read twice (a rate needs two readings) and once it is no
// longer pinned. A switch that cannot be read leaves the last reading,
// growing old (see Elephants.Fresh).
func (m *Manager) MeasuredRate(k models.FlowKey) (gbps float64, at time.Time, ok bool) {
	m.obs.mu.Lock()
	defer m.obs.mu.Unlock()
	r, ok := m.obs.byFlow[k]
	return r.gbps, r.at, ok
}
