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
// (followPlaced). A new term that catches the copy up through
// etcd's changes keeps that placement and places only what changed
// (load); it replans in full when the copy was listed again,
// the fabric moved on, or an intent needs a decision (placedAside).
// Nothing here decides: paths that no longer work and hosts that left
// are the term's to handle.

// PlacedForTerm says a follower's copy of the intents is placed on the
// current fabric with nothing left for a term to decide: a term that
// began now would start deciding at once (see /readyz).
func (m *Manager) PlacedForTerm() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.followed.placedValid && !m.followed.placedAside
}

// placeFollowed places a follower's copy on the current fabric if it is
// not already. The placing (a second or more at 100,000 intents) is done
// on copies of the entries without the lock, so the follower's reads go
// on; what the follower applied meanwhile is placed after it, under the
// lock, before the placement is taken in.
func (m *Manager) placeFollowed(ctx context.Context) {
	m.mu.Lock()
	if m.term != nil || !m.followed.mirrored || m.p.snap == nil || m.followed.placing != nil || m.followed.placedValid {
		m.mu.Unlock()
		return
	}
	p := newPlacement(&m.cfg, m.p.snap, m.p.down, make(map[string]*entry, len(m.p.all)))
	p.pins.gen = m.p.pins.gen
	for id, e := range m.p.all {
		p.all[id] = &entry{in: e.in, stored: e.stored, since: e.since}
	}
	fabricGen := m.fabricGen
	m.followed.placing = &[]change{}
	m.mu.Unlock()

	start := time.Now()
	valid, aside := p.placeAll(ctx) // p is this goroutine's alone

	m.mu.Lock()
	defer m.mu.Unlock()
	since := m.followed.placing
	m.followed.placing = nil
	if since == nil || m.term != nil || !m.followed.mirrored || m.fabricGen != fabricGen || !valid {
		// Listed again, leading, or the fabric moved on: placed again later.
		m.log.Info("the follower's placement of the intents is out of date; placing them again", "intents", len(p.all),
			"took", time.Since(start).Round(time.Millisecond), "relisted", since == nil, "leading", m.term != nil, "fabric_moved", m.fabricGen != fabricGen, "cut_short", !valid)
		return
	}
	if p.followPlaced(*since) {
		aside = true
	}
	m.p.takePlaced(p)
	m.followed.placedValid, m.followed.placedAside = true, aside
	m.log.Info("intents placed as followed, ready for a term", "intents", len(m.p.all), "aside", aside,
		"took", time.Since(start).Round(time.Millisecond), "since", len(*since))
}

// takePlaced takes in what a placement built aside (placeFollowed's)
// placed: the entries, the ledger, the pins (into this table, which the
// reconcilers may hold), the flows' owners and what awaits a read-back.
// The elephants and the learned room stay.
func (pl *placement) takePlaced(p *placement) {
	pl.all, pl.book, pl.tally, pl.flowOwner = p.all, p.book, p.tally, p.flowOwner
	pl.awaiting, pl.awaitNew, pl.awaitingOn, pl.settleNext = p.awaiting, p.awaitNew, p.awaitingOn, nil
	pl.pins.adopt(p.pins)
}

// placeAll places every intent of a fresh placement (placeFollowed's
// own) as a new term's replan would, from an empty ledger; valid says it
// got through (ctx ending cuts it short), aside that some intent needs a
// term's decision.
func (pl *placement) placeAll(ctx context.Context) (valid, aside bool) {
	book, err := pathcalc.NewBook(pl.snap, pl.down, pl.cfg.Headroom)
	if err != nil {
		return false, false
	}
	pl.book = book
	pl.sizePins()
	b := pl.scratch()
	n := 0
	for _, e := range pl.all {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return false, aside
		}
		if how, _ := pl.placeStored(b, e); how != placedAsStored {
			aside = true
		}
	}
	return true, aside
}

// followPlaced applies changes watched in etcd to a placed copy: each
// intent's previous version comes off the ledger and the pins, the new
// one goes on as stored. It says whether some intent needs a term's
// decision.
func (pl *placement) followPlaced(changes []change) (aside bool) {
	b := pl.scratch()
	for _, c := range changes {
		if c.skip {
			continue // not decoded: the entry stays, placed as it was
		}
		if old := pl.all[c.id]; old != nil {
			pl.unpinNow(old)
			delete(pl.awaiting, c.id)
			delete(pl.awaitNew, c.id)
		}
		if c.e == nil {
			delete(pl.all, c.id)
			continue
		}
		pl.all[c.id] = c.e
		if how, _ := pl.placeStored(b, c.e); how != placedAsStored {
			aside = true
		}
	}
	pl.pins.forgetChanges()
	return aside
}

// scratch is a batch for placing what is stored: nothing in it is
// committed or undone.
func (pl *placement) scratch() *batch {
	return &batch{ctx: context.Background(), touched: map[models.SwitchID]bool{}, maxOps: 1 << 30, maxBytes: 1 << 62}
}
