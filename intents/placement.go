package intents

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
)

// placement is where the intents are on one fabric: the entries with
// the paths they hold, the ledger of what those paths reserve, every
// switch's flow pins (the pin table, which has its own lock), which
// intent owns each flow, what awaits a switch's read-back, and the
// detected elephants pinned beside the intents.
//
// The decision loop changes the leader's placement under the manager's
// lock. A follower builds its own from its copy of the intents without
// that lock (placeFollowed) and takes it in whole.
type placement struct {
	cfg  *Config
	snap *topology.Snapshot
	down map[models.LinkID]bool
	// all are the intents, by ID.
	all       map[string]*entry
	book      *pathcalc.Book
	flowOwner map[models.FlowKey]string
	pins      *pinTable
	// tally counts each tenant's pins per switch; it is replaced with pins.
	tally *pinTally
	// room is what a switch that refused pins for lack of room was seen
	// to hold, trusted over the P4Info's size for a while.
	room map[models.SwitchID]learnedRoom

	awaiting map[string]bool // Admitted or Deleted, waiting for switches
	// What the awaiting intents wait on, so a batch looks only at those
	// something changed for (after a restart with 100,000 intents, each
	// waiting for its switches' first read-back, looking at every one in
	// every batch would be a third of the restart's CPU): awaitingOn
	// lists them by the switches they waited on when last looked at (ids
	// no longer awaiting are dropped as met), awaitNew are the ones that
	// started waiting (again) since the last look.
	awaitingOn map[models.SwitchID]map[string]bool
	awaitNew   map[string]bool
	// settleNext are awaiting intents a full batch left to the next one
	// (ids that are no longer awaiting by then are skipped).
	settleNext []string

	// elephants are the detected flows placed (or not) by placeDetected:
	// soft state, not stored (a new leader finds them again; the same
	// replica leading again keeps them: keepDetected).
	elephants map[models.FlowKey]*elephant
	// detectedAt is when the elephants were last placed; restoreDetected
	// says a load kept them and their pins come back at the next replan.
	detectedAt      time.Time
	restoreDetected bool
	restoredUntil   time.Time // kept elephants stay pinned until then
}

func newPlacement(cfg *Config, snap *topology.Snapshot, down map[models.LinkID]bool, all map[string]*entry) *placement {
	return &placement{cfg: cfg, snap: snap, down: down, all: all,
		flowOwner: map[models.FlowKey]string{}, pins: newPinTable(), tally: newPinTally(),
		room:     map[models.SwitchID]learnedRoom{},
		awaiting: map[string]bool{}, awaitNew: map[string]bool{}, awaitingOn: map[models.SwitchID]map[string]bool{},
		elephants: map[models.FlowKey]*elephant{},
	}
}

// pinTable is what every switch should hold of the flow pins, at a
// generation, with each switch's log of changes since what it confirmed.
// The reconcilers read it under its own lock and never wait for a
// decision; the loop, which alone changes it, holds the manager's lock
// and this one while it writes (between lock and unlock), and reads it
// under the manager's lock alone.
type pinTable struct {
	mu  sync.RWMutex
	at  map[models.SwitchID]map[models.FlowKey]uint32
	gen uint64
	// changes logs, per switch, which pin keys changed at which generation
	// (for PinsDelta); entries at or below base are trimmed once the
	// switch confirmed them.
	changes map[models.SwitchID][]pinChange
	base    map[models.SwitchID]uint64
	// movedAt is when each port's switch confirmed (read back) the last
	// change that gave the port a pin or took one away; pending holds the
	// ports of each switch with such a change not yet confirmed, at its
	// generation. Measured load lags a confirmed change (see adapt).
	movedAt map[models.Endpoint]time.Time
	pending map[models.SwitchID]map[uint32]uint64
}

type pinChange struct {
	gen uint64
	key models.FlowKey
}

func newPinTable() *pinTable {
	return &pinTable{at: map[models.SwitchID]map[models.FlowKey]uint32{},
		changes: map[models.SwitchID][]pinChange{}, base: map[models.SwitchID]uint64{},
		movedAt: map[models.Endpoint]time.Time{}, pending: map[models.SwitchID]map[uint32]uint64{}}
}

// lock starts a change at a new generation, which it returns; unlock
// ends it. What is set and dropped between them is one change a reader
// sees whole.
func (t *pinTable) lock() uint64 {
	t.mu.Lock()
	t.gen++
	return t.gen
}

func (t *pinTable) unlock() { t.mu.Unlock() }

// next is a generation of its own, with nothing written at it.
func (t *pinTable) next() uint64 {
	defer t.unlock()
	return t.lock()
}

// size makes room for n pins on each switch of counts, replacing what
// they hold (a placement's first, from an empty table).
func (t *pinTable) size(counts map[models.SwitchID]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for sw, n := range counts {
		t.at[sw] = make(map[models.FlowKey]uint32, n)
	}
}

// forgetChanges drops every switch's change log (a copy placed aside,
// which no reconciler reads).
func (t *pinTable) forgetChanges() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.changes)
}

// set pins key to port on sw (between lock and unlock).
func (t *pinTable) set(sw models.SwitchID, key models.FlowKey, port uint32) {
	pins := t.at[sw]
	if pins == nil {
		pins = map[models.FlowKey]uint32{}
		t.at[sw] = pins
	}
	changed := t.changedOn(sw)
	if had, ok := pins[key]; ok && had != port {
		changed[had] = t.gen
	}
	pins[key] = port
	changed[port] = t.gen
	t.changes[sw] = append(t.changes[sw], pinChange{gen: t.gen, key: key})
}

// changedOn is sw's ports with a change of pins not yet confirmed, each
// at its generation (between lock and unlock: the caller adds to it).
func (t *pinTable) changedOn(sw models.SwitchID) map[uint32]uint64 {
	ports := t.pending[sw]
	if ports == nil {
		ports = map[uint32]uint64{}
		t.pending[sw] = ports
	}
	return ports
}

// moved is when e's switch confirmed the last change of e's pins (zero:
// none seen), or pending if one is not confirmed yet.
func (t *pinTable) moved(e models.Endpoint) (at time.Time, pending bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if _, ok := t.pending[e.Switch][e.Port]; ok {
		return time.Time{}, true
	}
	return t.movedAt[e], false
}

// readAfter says whether a reading of port e over [from, to] (from zero:
// none yet; reading is asked only when e's pins ever changed) was taken
// after the last change of e's pins took effect: the change confirmed by
// e's switch, and the reading's interval begun an interval or more after
// that (a switch may apply what it confirmed at its next sample, as
// fabricsim does at its next tick); changed says e's pins ever changed.
// Until then the reading still carries flows that left, or lacks those
// that came, while the pinned flows set against it are where they are
// now.
func (t *pinTable) readAfter(e models.Endpoint, reading func() (from, to time.Time)) (fresh, changed bool) {
	moved, pending := t.moved(e)
	switch {
	case pending:
		return false, true
	case moved.IsZero():
		return true, false
	}
	from, to := reading()
	return !from.IsZero() && from.Sub(moved) >= to.Sub(from), true
}

// pendingBetween counts the ports whose last change of pins, made after
// generation after and at or before upTo, their switch has not
// confirmed, and returns the generation now.
func (t *pinTable) pendingBetween(after, upTo uint64) (ports int, gen uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, changed := range t.pending {
		for _, g := range changed {
			if g > after && g <= upTo {
				ports++
			}
		}
	}
	return ports, t.gen
}

// drop removes key's pin from sw if it is port (any port: port 0)
// (between lock and unlock).
func (t *pinTable) drop(sw models.SwitchID, key models.FlowKey, port uint32) bool {
	pins := t.at[sw]
	have, ok := pins[key]
	if !ok || (port != 0 && have != port) {
		return false
	}
	delete(pins, key)
	t.changedOn(sw)[have] = t.gen
	t.changes[sw] = append(t.changes[sw], pinChange{gen: t.gen, key: key})
	return true
}

// forSwitch returns the pins sw should have and their generation.
func (t *pinTable) forSwitch(sw models.SwitchID) ([]models.FlowPin, uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]models.FlowPin, 0, len(t.at[sw]))
	for k, port := range t.at[sw] {
		out = append(out, models.FlowPin{Key: k, Port: port})
	}
	return out, t.gen
}

// delta returns the pins of sw that changed after generation since.
func (t *pinTable) delta(sw models.SwitchID, since uint64) (map[models.FlowKey]uint32, uint64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if since < t.base[sw] {
		return nil, t.gen, false
	}
	log := t.changes[sw]
	i := sort.Search(len(log), func(i int) bool { return log[i].gen > since })
	out := make(map[models.FlowKey]uint32, len(log)-i)
	for _, c := range log[i:] {
		out[c.key] = t.at[sw][c.key] // 0 when gone
	}
	return out, t.gen, true
}

// confirm forgets the changes up to generation gen, which sw holds.
func (t *pinTable) confirm(sw models.SwitchID, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now() // the clock telemetry times readings by
	for port, g := range t.pending[sw] {
		if g <= gen {
			t.movedAt[models.Endpoint{Switch: sw, Port: port}] = now
			delete(t.pending[sw], port)
		}
	}
	if gen > t.base[sw] {
		log := t.changes[sw]
		i := sort.Search(len(log), func(i int) bool { return log[i].gen > gen })
		t.changes[sw] = append(log[:0:0], log[i:]...)
		t.base[sw] = gen
	}
}

// restart begins a new generation every reconciler compares in full
// once (a new term), keeping the pins or not.
func (t *pinTable) restart(keep bool) {
	t.lock()
	defer t.unlock()
	for sw := range t.at {
		t.changes[sw], t.base[sw] = nil, t.gen
	}
	if !keep {
		t.at = map[models.SwitchID]map[models.FlowKey]uint32{}
	}
}

// adopt takes in the pins of a placement built aside (a follower's), at
// a generation past both tables'.
func (t *pinTable) adopt(o *pinTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at, t.gen, t.movedAt, t.pending = o.at, max(t.gen, o.gen), o.movedAt, o.pending
	t.changes = map[models.SwitchID][]pinChange{}
}

// switchNews is what the reconcilers report of switches — read back,
// failed, refused pins — under its own lock, so that a reconciler never
// waits for a decision; the loop takes it in (take) before it looks at
// the intents.
type switchNews struct {
	mu      sync.Mutex
	touched map[models.SwitchID]bool
	// synced is the newest generation each switch was read back at.
	synced map[models.SwitchID]uint64
	// failed is each switch's last programming error since the loop
	// looked; "" when it was synced after it.
	failed  map[models.SwitchID]string
	refused map[models.SwitchID]refusal
	// awaited says some intent awaits a read-back (as of the loop's last
	// batch): only then does a read-back wake the loop.
	awaited atomic.Bool
}

func newSwitchNews() *switchNews {
	return &switchNews{touched: map[models.SwitchID]bool{}, synced: map[models.SwitchID]uint64{},
		failed: map[models.SwitchID]string{}, refused: map[models.SwitchID]refusal{}}
}

// readBack says sw was read back holding its pins of generation gen.
func (n *switchNews) readBack(sw models.SwitchID, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.synced[sw] = max(n.synced[sw], gen)
	n.failed[sw] = ""
	n.touched[sw] = true
}

// programFailed says writing sw failed with msg.
func (n *switchNews) programFailed(sw models.SwitchID, msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failed[sw] = msg
	n.touched[sw] = true
}

// pinsRefused says sw refused r's pins for good.
func (n *switchNews) pinsRefused(sw models.SwitchID, r refusal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refused[sw] = n.refused[sw].and(r)
}

// switchTrouble is the loop's account of the news: the generation each
// switch was last read back at, its last programming error (until it is
// synced again), the switches something changed on since the awaiting
// intents were looked at, and pins refused for good not yet handled.
type switchTrouble struct {
	synced   map[models.SwitchID]uint64
	failures map[models.SwitchID]string
	touched  map[models.SwitchID]bool
	refused  map[models.SwitchID]refusal
}

func newSwitchTrouble() switchTrouble {
	return switchTrouble{synced: map[models.SwitchID]uint64{}, failures: map[models.SwitchID]string{},
		touched: map[models.SwitchID]bool{}, refused: map[models.SwitchID]refusal{}}
}

// confirmed says every switch of e was read back at e's generation or
// later.
func (t *switchTrouble) confirmed(e *entry) bool {
	for _, sw := range e.switches {
		if t.synced[sw] < e.gen {
			return false
		}
	}
	return true
}

// take moves the news into the loop's account.
func (n *switchNews) take(t *switchTrouble) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for sw := range n.touched {
		t.touched[sw] = true
	}
	for sw, gen := range n.synced {
		t.synced[sw] = max(t.synced[sw], gen)
	}
	for sw, msg := range n.failed {
		if msg == "" {
			delete(t.failures, sw)
		} else {
			t.failures[sw] = msg
		}
	}
	for sw, r := range n.refused {
		t.refused[sw] = t.refused[sw].and(r)
	}
	clear(n.touched)
	clear(n.synced)
	clear(n.failed)
	clear(n.refused)
}

// await marks an intent as waiting for its switches.
func (pl *placement) await(id string) {
	pl.awaiting[id] = true
	pl.awaitNew[id] = true // indexed by its switches once looked at
}

// waitOn indexes an awaiting intent by the switches it waits on.
func (pl *placement) waitOn(id string, switches []models.SwitchID) {
	for _, sw := range switches {
		if pl.awaitingOn[sw] == nil {
			pl.awaitingOn[sw] = map[string]bool{}
		}
		pl.awaitingOn[sw][id] = true
	}
}

// toSettle takes the awaiting intents to look at: those that started
// waiting (fresh: not yet indexed by their switches), those waiting on a
// switch touched since the last look (which it clears), and those the
// last batch left (settleNext).
func (pl *placement) toSettle(touched map[models.SwitchID]bool) (ids []string, fresh map[string]bool) {
	fresh = pl.awaitNew
	for id := range fresh {
		ids = append(ids, id)
	}
	pl.awaitNew = map[string]bool{}
	ids = append(ids, pl.settleNext...)
	pl.settleNext = pl.settleNext[:0]
	for sw := range touched {
		for id := range pl.awaitingOn[sw] {
			if !pl.awaiting[id] {
				delete(pl.awaitingOn[sw], id) // met (or gone) since
				continue
			}
			ids = append(ids, id)
		}
	}
	clear(touched)
	slices.Sort(ids)
	return slices.Compact(ids), fresh
}

// unsettled are the keys of sw's pins no stored Installed intent vouches
// for (UnsettledPins).
func (pl *placement) unsettled(sw models.SwitchID) []models.FlowKey {
	var out []models.FlowKey
	for k := range pl.pins.at[sw] {
		if e := pl.all[pl.flowOwner[k]]; e == nil || e.in.Status.State != models.StateInstalled {
			out = append(out, k)
		}
	}
	return out
}
