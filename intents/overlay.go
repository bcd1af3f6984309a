package intents

import (
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Overlay is what the switch reconcilers see of the intents
// (controller.Overlay, DeltaOverlay and UnsettledOverlay): the pin table
// and the news of switches, each behind its own lock, so that a
// reconciler reading its pins or reporting a read-back never waits for a
// decision; and, through the manager, the fabric it is told of and
// whether the pins are known.
//
// The manager's placement and its pin table, and the news, are made once
// (New), so the overlay reaches them without the manager's lock.
type Overlay struct{ m *Manager }

// Overlay is the reconcilers' view of the manager.
func (m *Manager) Overlay() *Overlay { return &Overlay{m: m} }

// SetFabric tells the manager the fabric (Manager.SetFabric).
func (o *Overlay) SetFabric(snap *topology.Snapshot, down map[models.LinkID]bool, drained map[models.LinkID]string) {
	o.m.SetFabric(snap, down, drained)
}

// PinsReady says the pins are known: the intents were loaded (for this
// term) and placed on the current fabric at least once. Until then a
// switch's pins must not be compared with anything: they would read as
// "none", and the reconciler would delete every installed intent's
// entries only to put them back a moment later.
func (o *Overlay) PinsReady() bool {
	o.m.mu.RLock()
	defer o.m.mu.RUnlock()
	return o.m.pinsReady
}

// UnsettledPins are the keys of sw's pins (PinsFor) that no stored
// Installed intent vouches for: pins of intents not yet confirmed on all
// their switches, and of elephants found by sampling. A new leader reads
// these by key and takes the rest of sw's pins from its handover mark
// (controller.UnsettledOverlay).
func (o *Overlay) UnsettledPins(sw models.SwitchID) []models.FlowKey {
	o.m.mu.RLock()
	defer o.m.mu.RUnlock()
	return o.m.p.unsettled(sw)
}

// PinsFor returns the flow pins switch sw should have and the generation
// they belong to (for Synced). It does not wait for the decision loop.
func (o *Overlay) PinsFor(sw models.SwitchID) ([]models.FlowPin, uint64) {
	return o.m.p.pins.forSwitch(sw)
}

// PinsDelta returns the pins of sw that changed after generation since.
// It does not wait for the decision loop.
func (o *Overlay) PinsDelta(sw models.SwitchID, since uint64) (map[models.FlowKey]uint32, uint64, bool) {
	return o.m.p.pins.delta(sw, since)
}

// Synced records that sw was read back matching its pins of generation
// gen. It does not wait for the decision loop.
func (o *Overlay) Synced(sw models.SwitchID, gen uint64) {
	o.m.p.pins.confirm(sw, gen)
	o.m.news.readBack(sw, gen)
	if o.m.news.awaited.Load() {
		o.m.wake()
	}
}

// PinsRefused takes back the intents whose flow pins sw refused for good:
// the loop unpins them (their flows follow the routes), releases their
// reservations and leaves them Pending with the switch's reason, and
// caps sw's flow-pin room at what it accepted, so nothing else is
// admitted onto it that it cannot hold.
func (o *Overlay) PinsRefused(sw models.SwitchID, keys []models.FlowKey, why string, held int) {
	o.m.news.pinsRefused(sw, refusal{keys: keys, why: why, held: held})
	o.m.wake()
}

// ProgramFailed records that writing a switch failed; intents waiting for
// it say so in their reason until it succeeds.
func (o *Overlay) ProgramFailed(sw models.SwitchID, err error) {
	o.m.news.programFailed(sw, err.Error())
	o.m.wake()
}
