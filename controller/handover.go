package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/models"
)

// A new term that read every switch back before it was in sync would
// read, at k=16 with 100,000 intents, some 450,000 flow pins: 3–6 s of a
// takeover, and 7–16 s at k=48. Most of them are what the previous term
// left and confirmed. Handover marks let the next term know which:
//
//   - A term records per switch, in etcd, the digests of what it
//     confirmed the switch holds (models.SwitchMark: its flow pins, and
//     the rest under the switch's group IDs), once the switch has had no
//     write for markQuiet.
//   - Before it writes to a switch that has a mark, it removes the mark
//     (and waits for etcd to say so). So a switch that was being written
//     when its leader died, or that any term changed since, has none.
//   - A new term loads the marks before it writes anything. A switch's
//     first reconcile of the term compares the state it computes for the
//     switch with the mark (see trusted). Pins and the rest as marked: it
//     probes the switch (its selector members, one per routed port, its
//     punts and hash seed: a switch that lost its tables, a reboot, shows
//     there) and, if they agree, takes the rest as marked instead of
//     reading it. Pins as marked, other routes: it reads the switch but
//     for its pins. Pins that differ only by those of intents not yet
//     Installed: it reads those by key (unsettledRead). Anything else —
//     no mark, other pins, tables that differ from the mark, a probe that
//     fails — reads the switch in full, as before.
//
// Every mark write carries the term's fence, so a deposed leader cannot
// leave one behind. A term that cannot reach etcd cannot write to a
// switch that has a mark; it could not keep its lease either. The
// periodic resync still reads every switch in full (drift behind the
// controller's back is found there, as before).

// MarkStore keeps the switches' handover marks (store.Marks).
type MarkStore interface {
	Load(ctx context.Context) (map[models.SwitchID]models.SwitchMark, error)
	Commit(ctx context.Context, fence clientv3.Cmp, put map[models.SwitchID]models.SwitchMark, del []models.SwitchID) error
}

// UnsettledOverlay is an Overlay that can say which of a switch's pins
// may not be on it yet even where its leader confirmed everything it
// wrote (intents not yet Installed: written to etcd, their pins perhaps
// not yet to the switches). A new term reads those by key and takes the
// rest as the mark says.
type UnsettledOverlay interface {
	UnsettledPins(sw models.SwitchID) []models.FlowKey
}

// Prober reads what a switch that lost its tables (a reboot) shows
// first — its selector members (one per routed port), punts and hash
// seed — or, with all, every table but the flow pins; in canonical order.
type Prober interface {
	Probe(ctx context.Context, sw models.SwitchID, all bool) (models.ForwardingState, error)
}

const (
	// markQuiet is how long a switch must have had no write before its
	// mark is recorded: a switch written again and again (intents'
	// pins) is not marked and unmarked each time. Short enough that a
	// rollout's switches are marked again soon after it (at k=48 the
	// congestion weights roll out to many switches every few seconds: 2 s
	// leaves a third to three quarters of the 2,880 switches unmarked at
	// a leader's kill).
	markQuiet = 500 * time.Millisecond
	// markEvery is how often switches are looked at for marking.
	markEvery = 250 * time.Millisecond
	// unmarkers bounds the transactions removing marks at once; the
	// removals waiting meanwhile go in the next ones together.
	unmarkers = 4
)

// termMarks is one term's view of the marks.
type termMarks struct {
	store  MarkStore
	term   *election.Term
	loaded chan struct{}          // closed once the marks are loaded
	ops    *prometheus.CounterVec // marks put and removed, by op
	now    func() time.Time

	mu sync.Mutex
	// trust is what the previous terms left, for each switch's first
	// reconcile of this term (taken there, or dropped by a resync); seen
	// are the switches whose first reconcile came.
	trust map[models.SwitchID]models.SwitchMark
	seen  map[models.SwitchID]bool
	// marked: etcd may hold a mark for the switch (loaded, or put by
	// this term and not removed since).
	marked map[models.SwitchID]bool
	// putting is closed once a put of the switch's mark is over.
	putting map[models.SwitchID]chan struct{}
	// writing counts the writes to a switch under way; lastWrite is when
	// the last one ended.
	writing   map[models.SwitchID]int
	lastWrite map[models.SwitchID]time.Time
	// Removals waiting for a transaction, and the transactions under way;
	// spawn runs one (in a goroutine the controller's Run waits for, or
	// at once when Run is not running).
	unmarks   []unmark
	unmarking int
	spawn     func(func())
	// results counts what the term's first reconciles did with the
	// marks (accelnet_handover_switches_total's results).
	results map[string]int
	// prior are the switches loaded with a mark and not distrusted since;
	// tablesFirst is closed once every switch's tables are in sync, or
	// TablesFirstMax after the term's first sweep (see awaitTablesFirst).
	prior       map[models.SwitchID]bool
	tablesFirst chan struct{}
	// distrusted is closed (and replaced) when distrust drops a switch.
	distrusted chan struct{}
}

type unmark struct {
	sw   models.SwitchID
	done chan error
}

func newTermMarks(store MarkStore, t *election.Term, ops *prometheus.CounterVec, now func() time.Time) *termMarks {
	return &termMarks{
		spawn:       func(f func()) { f() }, // setMarks gives the controller's
		store:       store,
		now:         now,
		ops:         ops,
		term:        t,
		loaded:      make(chan struct{}),
		marked:      map[models.SwitchID]bool{},
		putting:     map[models.SwitchID]chan struct{}{},
		writing:     map[models.SwitchID]int{},
		lastWrite:   map[models.SwitchID]time.Time{},
		results:     map[string]int{},
		seen:        map[models.SwitchID]bool{},
		prior:       map[models.SwitchID]bool{},
		tablesFirst: make(chan struct{}),
		distrusted:  make(chan struct{}),
	}
}

// endTablesFirst lets the held config reconciles go (awaitTablesFirst);
// once only.
func (tm *termMarks) endTablesFirst() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	select {
	case <-tm.tablesFirst:
	default:
		close(tm.tablesFirst)
	}
}

// handoverState is the current term's handover marks.
// It reads the configuration (Marks, Can's Prober, Unsettled and
// PinReader, Now), what the controller knows each switch holds, and the
// current fabric; it runs its background work beside the controller's
// (plans).
type handoverState struct {
	cfg    *Config
	log    *slog.Logger
	m      *metrics
	plans  *planner
	fabric func() *fabricState
	known  func(models.SwitchID) (knownState, bool)

	mu   sync.Mutex
	term *termMarks
}

// awaitTablesFirst holds a term's interface config reconciles (gNMI) of
// a switch its predecessor left marked until every switch's tables are
// in sync (or TablesFirstMax after the term's first sweep tried them
// all: a switch that does not answer holds the rest no longer). Such a
// switch was configured by the previous leader, and its forwarding
// tables are what a takeover must confirm first: at k=48 the config
// Gets compete for the emulator's cores with the probes the tables
// need. The sampling reconciles are not held: holding them too makes
// takeovers right after a bulk load at k=16 slower, not faster (the
// cause is not known). A switch without a mark (a cold start, a switch
// being written at the kill, one wiped or reconnected since) is not
// held.
func (hs *handoverState) awaitTablesFirst(ctx context.Context, sw models.SwitchID) {
	tm := hs.current()
	if tm == nil || tm.await(ctx) != nil {
		return
	}
	for {
		tm.mu.Lock()
		held, distrusted := tm.prior[sw], tm.distrusted
		tm.mu.Unlock()
		if !held {
			return
		}
		select {
		case <-tm.tablesFirst:
			return
		case <-ctx.Done():
			return
		case <-distrusted: // sw may have lost its state: not held then
		}
	}
}

// count counts a first reconcile's result (see counted).
func (tm *termMarks) count(result string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.results[result]++
}

// counted is what the term's first reconciles did with the marks so far,
// for a log line: result, count, result, count…
func (tm *termMarks) counted() []any {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var out []any
	for _, r := range []string{"trusted", "pins_trusted", "unsettled_read", "unmarked", "pins_changed", "probe_differs", "probe_failed"} {
		out = append(out, r, tm.results[r])
	}
	return out
}

// current is the current term's marks; nil without a MarkStore or while
// following.
func (hs *handoverState) current() *termMarks {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.term
}

// set makes term t's marks (nil: following) the current ones and
// returns them; nil without a MarkStore. They are loaded by runMarks;
// until then the term's reconciles wait for them.
func (hs *handoverState) set(t *election.Term) *termMarks {
	var tm *termMarks
	if hs.cfg.Marks != nil && t != nil {
		tm = newTermMarks(hs.cfg.Marks, t, hs.m.marks, hs.cfg.Now)
		tm.spawn = func(f func()) { hs.plans.beside(context.Background(), func(context.Context) { f() }) }
	}
	hs.mu.Lock()
	hs.term = tm
	hs.mu.Unlock()
	return tm
}

// run loads term tm's marks (retried until they are, or the term
// ends), then records the quiet switches' marks while the term lasts.
func (hs *handoverState) run(ctx context.Context, tm *termMarks) {
	tctx, stop := context.WithCancel(tm.term.Context())
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	backoff := 100 * time.Millisecond
	for {
		trust, err := tm.store.Load(tctx)
		if err == nil {
			tm.mu.Lock()
			tm.trust = trust
			for sw := range trust {
				tm.marked[sw] = true
				tm.prior[sw] = true
			}
			tm.mu.Unlock()
			n := len(trust)
			close(tm.loaded) // trust is tm's from here
			hs.log.Info("handover marks loaded", "switches", n)
			break
		}
		hs.log.Warn("cannot load the switches' handover marks; no switch is written until they are", "err", err, "retry_in", backoff)
		select {
		case <-tctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	hs.keep(tctx, tm)
}

// await waits for the marks to be loaded.
func (tm *termMarks) await(ctx context.Context) error {
	select {
	case <-tm.loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the handover marks: %w", context.Cause(ctx))
	}
}

// take is sw's mark left by the terms before, once: only a switch's first
// reconcile of a term may take it as the mark says. first is false after
// the switch's first reconcile of the term that would read it.
func (tm *termMarks) take(sw models.SwitchID) (m models.SwitchMark, ok, first bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	m, ok = tm.trust[sw]
	delete(tm.trust, sw)
	first = !tm.seen[sw]
	tm.seen[sw] = true
	return m, ok, first
}

// distrust drops what the previous terms left for sw (every switch if
// sw is ""): its next reconcile reads it in full.
func (tm *termMarks) distrust(sw models.SwitchID) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if sw == "" {
		clear(tm.trust)
		clear(tm.prior)
	} else {
		delete(tm.trust, sw)
		delete(tm.prior, sw)
	}
	close(tm.distrusted) // awaitTablesFirst looks again
	tm.distrusted = make(chan struct{})
}

// beforeWrite readies sw for a write: once it returns, etcd holds no
// mark for sw until done is called and the switch has been quiet for
// markQuiet. done must be called once the write and its confirmation are
// over, after the controller's belief of sw was updated.
func (tm *termMarks) beforeWrite(ctx context.Context, sw models.SwitchID) (done func(), err error) {
	if err := tm.await(ctx); err != nil {
		return nil, err
	}
	tm.mu.Lock()
	tm.writing[sw]++
	done = func() {
		tm.mu.Lock()
		tm.writing[sw]--
		if tm.writing[sw] == 0 {
			delete(tm.writing, sw)
		}
		tm.lastWrite[sw] = tm.now()
		tm.mu.Unlock()
	}
	for p := tm.putting[sw]; p != nil; p = tm.putting[sw] {
		tm.mu.Unlock() // a put under way lands first, then is removed
		select {
		case <-p:
		case <-ctx.Done():
			done()
			return nil, fmt.Errorf("remove %s's handover mark: %w", sw, context.Cause(ctx))
		}
		tm.mu.Lock()
	}
	marked := tm.marked[sw]
	tm.mu.Unlock()
	if !marked {
		return done, nil
	}
	if err := tm.unmark(ctx, sw); err != nil {
		done()
		return nil, fmt.Errorf("remove %s's handover mark before writing to it: %w", sw, err)
	}
	tm.mu.Lock()
	delete(tm.marked, sw)
	tm.mu.Unlock()
	return done, nil
}

// unmark removes sw's mark from etcd, in one transaction with the other
// removals waiting (a failure's rollout writes hundreds of switches at
// once).
func (tm *termMarks) unmark(ctx context.Context, sw models.SwitchID) error {
	u := unmark{sw: sw, done: make(chan error, 1)}
	tm.mu.Lock()
	tm.unmarks = append(tm.unmarks, u)
	start := tm.unmarking < unmarkers
	if start {
		tm.unmarking++
	}
	tm.mu.Unlock()
	if start {
		tm.spawn(tm.commitUnmarks)
	}
	select {
	case err := <-u.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// commitUnmarks removes the marks waiting, a transaction at a time,
// until none wait.
func (tm *termMarks) commitUnmarks() {
	ctx := tm.term.Context()
	for {
		tm.mu.Lock()
		batch := tm.unmarks
		tm.unmarks = nil
		if len(batch) == 0 {
			tm.unmarking--
			tm.mu.Unlock()
			return
		}
		tm.mu.Unlock()
		sws := make([]models.SwitchID, len(batch))
		for i, u := range batch {
			sws[i] = u.sw
		}
		err := tm.store.Commit(ctx, tm.term.Fence(), nil, sws)
		if err == nil {
			tm.ops.WithLabelValues("delete").Add(float64(len(sws)))
		}
		for _, u := range batch {
			u.done <- err
		}
	}
}

// mark records the marks of the switches the controller believes it
// knows (known) that have none and had no write for markQuiet, and
// removes those of switches no longer in the topology (inTopology). It
// returns how many it put.
func (tm *termMarks) mark(ctx context.Context, now time.Time, known func(models.SwitchID) (knownState, bool), all func(func(models.SwitchID)), inTopology func(models.SwitchID) bool) (int, error) {
	if tm.await(ctx) != nil {
		return 0, nil
	}
	var candidates []models.SwitchID
	var gone []models.SwitchID
	done := make(chan struct{})
	tm.mu.Lock()
	all(func(sw models.SwitchID) {
		if tm.marked[sw] || tm.writing[sw] > 0 || tm.putting[sw] != nil || now.Sub(tm.lastWrite[sw]) < markQuiet {
			return
		}
		candidates = append(candidates, sw)
		tm.putting[sw] = done // a write waits for this put, then removes it
	})
	for sw := range tm.marked {
		if !inTopology(sw) && tm.writing[sw] == 0 && tm.putting[sw] == nil {
			gone = append(gone, sw)
			tm.putting[sw] = done
		}
	}
	tm.mu.Unlock()
	put := map[models.SwitchID]models.SwitchMark{}
	for _, sw := range candidates {
		// A write cannot start meanwhile (it waits for done), and a
		// reconcile without one leaves what the controller believes as
		// it is. (Its pins map may be changing in place: the mark uses
		// the digest stored with it.)
		if k, ok := known(sw); ok {
			put[sw] = k.mark(tm.term.ID)
		}
	}
	var err error
	if len(put) > 0 || len(gone) > 0 {
		err = tm.store.Commit(ctx, tm.term.Fence(), put, gone)
	}
	if err == nil && len(put) > 0 {
		tm.ops.WithLabelValues("put").Add(float64(len(put)))
	}
	tm.mu.Lock()
	for _, sw := range candidates {
		delete(tm.putting, sw)
		if _, ok := put[sw]; ok {
			// Even after an error: the put may have landed, and a mark
			// that is not there costs a write one removal too many.
			tm.marked[sw] = true
		}
	}
	for _, sw := range gone {
		delete(tm.putting, sw)
		if err == nil {
			delete(tm.marked, sw)
		}
	}
	tm.mu.Unlock()
	close(done)
	return len(put), err
}

// mark is the mark of what k says a switch holds.
func (k knownState) mark(term uint64) models.SwitchMark {
	return models.SwitchMark{Tables: models.StateDigest(k.st).String(), Pins: k.pinDigest.String(), PinCount: k.pinCount, Renames: k.renames, Term: term}
}

// keep records the quiet switches' marks every markEvery while term
// tm lasts.
func (hs *handoverState) keep(ctx context.Context, tm *termMarks) {
	tick := time.NewTicker(markEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := hs.fabric()
		if st == nil {
			continue
		}
		all := func(fn func(models.SwitchID)) {
			for sw := range st.snap.AllSwitches() {
				fn(sw.Name)
			}
		}
		inTopology := func(sw models.SwitchID) bool { _, err := st.snap.Switch(sw); return err == nil }
		if _, err := tm.mark(ctx, hs.cfg.Now(), hs.known, all, inTopology); err != nil && ctx.Err() == nil {
			hs.log.Warn("cannot record the switches' handover marks; the next term reads them back", "err", err)
		}
	}
}

// trusted is, for sw's first reconcile of a term, what the previous term
// confirmed sw holds, where that can be known without reading its flow
// pins; ok false means: read the switch in full. pins is the digest of
// desired's flow pins (the reconcile keeps it for the switch's mark).
//
// The pins must be this term's (their digest the mark's). Then, if the
// rest is this term's too (the plan's groups under the IDs the mark
// names), a probe that agrees (members, punts, seed) makes the whole
// state the mark's. If the rest is not (a term that moved weights for
// congestion, which a new one starts without), the switch is read but
// for its pins, and if that is what the mark says the switch had, the
// pins are taken as the mark says and the rest as read.
func (hs *handoverState) trusted(ctx context.Context, sw models.SwitchID, desired models.ForwardingState, pins models.Digest) (_ models.ForwardingState, ok bool) {
	tm := hs.current()
	prober := hs.cfg.Can.Prober
	if tm == nil || prober == nil || tm.await(ctx) != nil {
		return models.ForwardingState{}, false
	}
	result := func(r string) {
		hs.m.handover.WithLabelValues(r).Inc()
		tm.count(r)
	}
	mark, ok, first := tm.take(sw)
	if !ok {
		if first { // not a later full read (an error, a resync)
			result("unmarked")
		}
		return models.ForwardingState{}, false
	}
	held := desired.FlowPins // the pins sw holds, as the mark says
	if pins.String() != mark.Pins {
		var ok bool
		if held, ok = hs.unsettledRead(ctx, sw, desired.FlowPins, mark); !ok {
			result("pins_changed")
			hs.log.Debug("a switch's flow pins are not those of its handover mark; reading it in full", "switch", sw, "pins", len(desired.FlowPins), "marked", mark.PinCount)
			return models.ForwardingState{}, false
		}
		tm.count("unsettled_read")
		hs.m.handoverUnsettled.Inc()
	}
	rest := desired
	rest.FlowPins = nil
	rest = renameGroups(rest, mark.Renames).Canonical()
	sameRest := models.StateDigest(rest).String() == mark.Tables
	got, err := prober.Probe(ctx, sw, !sameRest)
	if err != nil {
		result("probe_failed")
		return models.ForwardingState{}, false
	}
	switch {
	case sameRest && probed(rest).Equal(probed(got)):
		result("trusted")
	case sameRest:
		result("probe_differs")
		hs.log.Warn("a switch's selector members, punts or hash seed differ from what its handover mark says; reading it in full", "switch", sw)
		return models.ForwardingState{}, false
	case models.StateDigest(got).String() == mark.Tables:
		result("pins_trusted")
		rest = got
	default:
		result("probe_differs")
		hs.log.Warn("a switch's tables differ from what its handover mark says; reading it in full", "switch", sw)
		return models.ForwardingState{}, false
	}
	rest.FlowPins = held
	return rest.Canonical(), true
}

// unsettledRead is, where sw's pins are not what its mark says, whether
// the difference is the unsettled pins alone (those of intents not yet
// Installed: their leader may not have written them): it reads those by
// key, and if the switch's other pins as this term computes them and
// those read make the mark's digest, they are what sw holds. At most
// half of sw's pins are read so; past that a full read costs as much.
func (hs *handoverState) unsettledRead(ctx context.Context, sw models.SwitchID, desired []models.FlowPin, mark models.SwitchMark) ([]models.FlowPin, bool) {
	u, pr := hs.cfg.Can.Unsettled, hs.cfg.Can.PinReader
	if u == nil || pr == nil {
		return nil, false
	}
	keys := u.UnsettledPins(sw)
	if len(keys) == 0 || len(keys) > len(desired)/2 {
		return nil, false
	}
	got, err := pr.ReadPins(ctx, sw, keys)
	if err != nil {
		return nil, false
	}
	unsettled := make(map[models.FlowKey]bool, len(keys))
	for _, k := range keys {
		unsettled[k] = true
	}
	held := make([]models.FlowPin, 0, len(desired))
	var d models.Digest
	for _, p := range desired {
		if !unsettled[p.Key] {
			held = append(held, p)
			d.AddPin(p)
		}
	}
	for _, p := range got {
		held = append(held, p)
		d.AddPin(p)
	}
	return held, d.String() == mark.Pins
}

// probed is what Probe reads of s unless asked for all.
func probed(s models.ForwardingState) models.ForwardingState {
	return models.ForwardingState{Members: s.Members, Punts: s.Punts, HashSeed: s.HashSeed}
}
