package intents

import (
	"fmt"
	"sync/atomic"

	"github.com/accelnet/accelnet/models"
)

// A tenant's share of a switch's flow-pin table: without one, a tenant
// with no quota could fill a leaf's table with tiny intents and every
// other tenant would be refused there. Each tenant may hold at most
// Config.TenantPinShare of any switch's table (default a quarter), or
// what the operator sets for it (models.Tenant.MaxPinsPerSwitch).

// DefaultTenantPinShare is Config.TenantPinShare's default.
const DefaultTenantPinShare = 0.25

// pinTally counts each tenant's pins on each switch. Entries remember
// which tally they were counted in (id), so a tally replaced on a reload
// is never decremented by what was counted in the one before.
type pinTally struct {
	id uint64
	n  map[models.SwitchID]map[models.TenantName]int
}

// switchPins is how many pins an intent holds on a switch.
type switchPins struct {
	sw models.SwitchID
	n  int
}

var tallies atomic.Uint64

func newPinTally() *pinTally {
	return &pinTally{id: tallies.Add(1), n: map[models.SwitchID]map[models.TenantName]int{}}
}

// tallyPins counts e's pins on paths (after uncounting what it held).
func (pl *placement) tallyPins(e *entry, paths [][]models.Endpoint) {
	pl.untallyPins(e)
	if pl.tally == nil {
		pl.tally = newPinTally()
	}
	for _, p := range paths {
		for _, hop := range p {
			i := 0
			for i < len(e.pinnedOn) && e.pinnedOn[i].sw != hop.Switch {
				i++
			}
			if i == len(e.pinnedOn) {
				e.pinnedOn = append(e.pinnedOn, switchPins{sw: hop.Switch})
			}
			e.pinnedOn[i].n++
		}
	}
	for _, c := range e.pinnedOn {
		byTenant := pl.tally.n[c.sw]
		if byTenant == nil {
			byTenant = map[models.TenantName]int{}
			pl.tally.n[c.sw] = byTenant
		}
		byTenant[e.in.Tenant] += c.n
	}
	e.tallied = pl.tally.id
}

// untallyPins uncounts e's pins, if they are counted in the current tally.
func (pl *placement) untallyPins(e *entry) {
	if pl.tally != nil && e.tallied == pl.tally.id {
		for _, c := range e.pinnedOn {
			if byTenant := pl.tally.n[c.sw]; byTenant != nil {
				if byTenant[e.in.Tenant] -= c.n; byTenant[e.in.Tenant] <= 0 {
					delete(byTenant, e.in.Tenant)
				}
			}
		}
	}
	e.pinnedOn, e.tallied = e.pinnedOn[:0], 0
}

// tenantPinLimit is how many pins tenant t may hold on one switch (0: no
// limit known).
func (pl *placement) tenantPinLimit(t models.Tenant) int {
	if t.MaxPinsPerSwitch > 0 {
		return t.MaxPinsPerSwitch
	}
	if pl.cfg.FlowPinEntries <= 0 {
		return 0
	}
	return max(1, int(float64(pl.cfg.FlowPinEntries)*pl.cfg.TenantPinShare))
}

// checkTenantPins refuses pins on paths past tenant t's share of any
// switch's flow-pin table (e's own pins there replaced, not added).
func (pl *placement) checkTenantPins(t models.Tenant, e *entry, paths [][]models.Endpoint) error {
	limit := pl.tenantPinLimit(t)
	if limit <= 0 {
		return nil
	}
	add := map[models.SwitchID]int{}
	for _, p := range paths {
		for _, hop := range p {
			add[hop.Switch]++
		}
	}
	if pl.tally != nil && e.tallied == pl.tally.id {
		for _, c := range e.pinnedOn {
			add[c.sw] -= c.n
		}
	}
	for sw, n := range add {
		have := 0
		if pl.tally != nil {
			have = pl.tally.n[sw][t.Name]
		}
		if n > 0 && have+n > limit {
			return fmt.Errorf("%w: tenant %s holds %d of the %d entries of %s's flow-pin table it may hold; %d more needed (the operator sets max_pins_per_switch)",
				ErrQuota, t.Name, have, limit, sw, n)
		}
	}
	return nil
}
