package intents

import (
	"context"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
)

// A new term cannot decide until its intents are placed: the ledger
// rebuilt from their stored paths and every switch's pins derived. At
// 100,000 intents that would take a new leader 3 to 5 s of its takeover. A
// follower has every intent already (its copy, for reads), so it places
// them as it follows: once when its copy is listed or the fabric
// changes (placeFollowed), then each intent as it is written
// (followPlacedLocked). A new term that catches the copy up through
// etcd's changes keeps that placement and places only what changed
// (load); it replans in full as before when the copy was listed again,
// the fabric moved on, or an intent needs a decision (placedAside).
// Nothing here decides: paths that no longer work and hosts that left
// are the term's to handle.

// PlacedForTerm says a follower's copy of the intents is placed on the
// current fabric with nothing left for a term to decide: a term that
// began now would start deciding at once (see /readyz).
func (m *Manager) PlacedForTerm() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.placedValid && !m.placedAside
}

// placeFollowed places a follower's copy on the current fabric if it is
// not already. The placing (a second or more at 100,000 intents) is done
// on copies of the entries without the lock, so the follower's reads go
// on; what the follower applied meanwhile is placed after it, under the
// lock, before the placement is taken in.
func (m *Manager) placeFollowed(ctx context.Context) {
	m.mu.Lock()
	if m.term != nil || !m.mirrored || m.snap == nil || m.placing != nil || m.placedValid {
		m.mu.Unlock()
		return
	}
	p := &Manager{cfg: m.cfg, log: m.log, snap: m.snap, down: m.down, fabricGen: m.fabricGen, gen: m.gen,
		all: make(map[string]*entry, len(m.all)), elephants: map[models.FlowKey]*elephant{}, changes: map[models.SwitchID][]pinChange{}}
	for id, e := range m.all {
		p.all[id] = &entry{in: e.in, stored: e.stored, since: e.since}
	}
	m.placing = &[]change{}
	m.mu.Unlock()

	start := time.Now()
	p.placeAll(ctx) // p is this goroutine's alone

	m.mu.Lock()
	defer m.mu.Unlock()
	since := m.placing
	m.placing = nil
	if since == nil || m.term != nil || !m.mirrored || m.fabricGen != p.fabricGen || !p.placedValid {
		// Listed again, leading, or the fabric moved on: placed again later.
		m.log.Info("the follower's placement of the intents is out of date; placing them again", "intents", len(p.all),
			"took", time.Since(start).Round(time.Millisecond), "relisted", since == nil, "leading", m.term != nil, "fabric_moved", m.fabricGen != p.fabricGen, "cut_short", !p.placedValid)
		return
	}
	p.followPlacedLocked(*since)
	m.all, m.book, m.pins, m.tally, m.flowOwner = p.all, p.book, p.pins, p.tally, p.flowOwner
	m.awaiting, m.awaitNew, m.awaitingOn = p.awaiting, p.awaitNew, p.awaitingOn
	m.gen = max(m.gen, p.gen)
	m.changes = map[models.SwitchID][]pinChange{}
	m.placedValid, m.placedAside = true, p.placedAside
	m.log.Info("intents placed as followed, ready for a term", "intents", len(m.all), "aside", p.placedAside,
		"took", time.Since(start).Round(time.Millisecond), "since", len(*since))
}

// placeAll places every intent of a fresh manager's copy (placeFollowed's
// own) as a new term's replan would, from an empty ledger; placedValid
// says it got through (ctx ending cuts it short).
func (m *Manager) placeAll(ctx context.Context) {
	book, err := pathcalc.NewBook(m.snap, m.down, m.cfg.Headroom)
	if err != nil {
		return
	}
	m.book, m.pins, m.tally, m.flowOwner = book, map[models.SwitchID]map[models.FlowKey]uint32{}, newPinTally(), map[models.FlowKey]string{}
	m.awaiting, m.awaitNew, m.awaitingOn = map[string]bool{}, map[string]bool{}, map[models.SwitchID]map[string]bool{}
	m.sizePins()
	b := m.scratch()
	n := 0
	for _, e := range m.all {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return
		}
		if how, _ := m.placeStored(b, e); how != placedAsStored {
			m.placedAside = true
		}
	}
	m.placedValid = true
}

// followPlacedLocked applies changes watched in etcd to a placed copy:
// each intent's previous version comes off the ledger and the pins, the
// new one goes on as stored.
func (m *Manager) followPlacedLocked(changes []change) {
	b := m.scratch()
	for _, c := range changes {
		if c.skip {
			continue // not decoded: the entry stays, placed as it was
		}
		if old := m.all[c.id]; old != nil {
			m.unpinNow(old)
			delete(m.awaiting, c.id)
			delete(m.awaitNew, c.id)
		}
		if c.e == nil {
			delete(m.all, c.id)
			continue
		}
		m.all[c.id] = c.e
		if how, _ := m.placeStored(b, c.e); how != placedAsStored {
			m.placedAside = true
		}
	}
	clear(m.changes)
}

// scratch is a batch for placing what is stored: nothing in it is
// committed or undone.
func (m *Manager) scratch() *batch {
	return &batch{m: m, ctx: context.Background(), touched: map[models.SwitchID]bool{}, maxOps: 1 << 30, maxBytes: 1 << 62}
}
