package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// drainedBelowBps is the traffic under which a drained link counts as
// empty (telemetry never reads exactly zero while counters settle).
const drainedBelowBps = 1e6

// DrainStore keeps the drains in etcd (store.Store).
type DrainStore interface {
	store.Follower
	List(ctx context.Context, prefix string, rev int64) ([]store.KV, int64, error)
	PutJSONIfUnchanged(ctx context.Context, prefix string, rev int64, key string, v any) error
	Delete(ctx context.Context, key string) error
}

// DrainPlanner re-places the live intents for a fabric with down links
// without changing anything (intents.Manager): what a drain would do.
type DrainPlanner interface {
	Preview(down map[models.LinkID]bool) (mlu float64, moved int, degraded []string, err error)
}

// Drains keeps operators' drains in etcd and tells the controller which
// links to keep traffic off.
type Drains struct {
	store   DrainStore
	ctrl    *Controller
	intents DrainPlanner
	mu      sync.RWMutex
	all     map[string]models.Drain
}

// NewDrains returns the drain manager; Run follows etcd.
func NewDrains(store DrainStore, ctrl *Controller, intents DrainPlanner) *Drains {
	return &Drains{store: store, ctrl: ctrl, intents: intents, all: map[string]models.Drain{}}
}

// Run follows the drains in etcd (so every replica applies them) until
// ctx ends.
func (d *Drains) Run(ctx context.Context) error {
	return store.FollowJSON(ctx, d.store, store.KeyDrains, &d.mu, &d.all, d.apply)
}

// apply hands the drains to the controller.
func (d *Drains) apply() {
	d.mu.RLock()
	all := maps.Clone(d.all)
	d.mu.RUnlock()
	d.ctrl.SetDrains(all)
}

// drainedLinks are the links of drained switches and the drained links.
func drainedLinks(snap *topology.Snapshot, drains map[string]models.Drain) map[models.LinkID]bool {
	out := map[models.LinkID]bool{}
	for _, dr := range drains {
		if dr.Link != "" {
			out[dr.Link] = true
			continue
		}
		for _, a := range snap.Neighbors(dr.Switch) {
			out[a.Link] = true
		}
	}
	return out
}

// drainsSaid is, for every drained link, which drain holds it, as a
// tenant whose intent moves off it reads it ("drain 1a2b of spine2:
// optics swap").
func drainsSaid(snap *topology.Snapshot, drains map[string]models.Drain) map[models.LinkID]string {
	out := map[models.LinkID]string{}
	for _, dr := range drains {
		what := "drain " + dr.ID + " of " + string(dr.Switch)
		if dr.Link != "" {
			what = "drain " + dr.ID + " of " + string(dr.Link)
		}
		if dr.Reason != "" {
			what += ": " + dr.Reason
		}
		for id := range drainedLinks(snap, map[string]models.Drain{dr.ID: dr}) {
			out[id] = what
		}
	}
	return out
}

func (d *Drains) check(dr models.Drain) (*topology.Snapshot, error) {
	if err := dr.Validate(); err != nil {
		return nil, err
	}
	snap, _ := d.ctrl.Snapshot()
	if snap == nil {
		return nil, store.ErrNoTopology
	}
	if dr.Switch != "" {
		if _, err := snap.Switch(dr.Switch); err != nil {
			return nil, &models.ValidationError{Errors: []models.FieldError{{Field: "switch", Message: fmt.Sprintf("no switch %q in the fabric", dr.Switch)}}}
		}
	} else if _, err := snap.Link(dr.Link); err != nil {
		return nil, &models.ValidationError{Errors: []models.FieldError{{Field: "link", Message: fmt.Sprintf("no link %q in the fabric", dr.Link)}}}
	}
	return snap, nil
}

// ErrAlreadyDrained means a drain of the same switch or link exists: a
// second one would leave it drained after the first is deleted, with
// nothing to say so.
var ErrAlreadyDrained = errors.New("already drained")

// maxDrainAttempts bounds how often Create decides again after another
// drain was stored while it decided.
const maxDrainAttempts = 20

// Create stores a drain; traffic moves off as the controller applies it.
// A drain that would cut hosts off, or leave two leaves with hosts without
// a path between them, needs Force; a second drain of the same switch or
// link is refused (ErrAlreadyDrained).
//
// Drains are decided one at a time across every replica: the decision is
// taken against every drain stored in etcd (applied or not yet) and every
// link the controller avoids now, and stored only if no drain was stored
// or changed since it read them (an etcd compare on the drains' mod
// revisions); otherwise it is decided again. So no timing of requests,
// from any number of clients and replicas, gets two drains past the check
// that together cut the fabric.
func (d *Drains) Create(ctx context.Context, dr models.Drain) (models.Drain, error) {
	snap, err := d.check(dr)
	if err != nil {
		return dr, err
	}
	if dr.Switch != "" && len(snap.HostsOn(dr.Switch)) > 0 && !dr.Force {
		return dr, &models.ValidationError{Errors: []models.FieldError{{Field: "force",
			Message: fmt.Sprintf("draining %s cuts off its %d hosts; set force to do it anyway", dr.Switch, len(snap.HostsOn(dr.Switch)))}}}
	}
	for attempt := 1; ; attempt++ {
		stored, rev, err := d.stored(ctx)
		if err != nil {
			return dr, err
		}
		for _, other := range stored {
			if other.Switch == dr.Switch && other.Link == dr.Link {
				what := "switch " + string(dr.Switch)
				if dr.Link != "" {
					what = "link " + string(dr.Link)
				}
				return dr, fmt.Errorf("%w: %s by drain %s", ErrAlreadyDrained, what, other.ID)
			}
		}
		if cut := d.partitions(snap, dr, stored); cut != "" && !dr.Force {
			return dr, &models.ValidationError{Errors: []models.FieldError{{Field: "force",
				Message: fmt.Sprintf("with this drain, the %d stored and the links already avoided, %s; set force to do it anyway", len(stored), cut)}}}
		}
		now := d.ctrl.cfg.Now()
		dr.ID, dr.Created = store.NewID(now), now.UTC()
		err = d.store.PutJSONIfUnchanged(ctx, store.KeyDrains, rev, store.KeyDrains+dr.ID, dr)
		if errors.Is(err, store.ErrConflict) && attempt < maxDrainAttempts {
			continue // another drain was stored meanwhile: decide again with it
		}
		if err != nil {
			return dr, err
		}
		break
	}
	d.mu.Lock()
	d.all[dr.ID] = dr
	d.mu.Unlock()
	d.apply()
	return dr, nil
}

// stored reads every drain in etcd, with the revision read at.
func (d *Drains) stored(ctx context.Context) (map[string]models.Drain, int64, error) {
	kvs, rev, err := d.store.List(ctx, store.KeyDrains, 0)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]models.Drain, len(kvs))
	for _, kv := range kvs {
		var dr models.Drain
		if json.Unmarshal(kv.Value, &dr) == nil {
			out[strings.TrimPrefix(kv.Key, store.KeyDrains)] = dr
		}
	}
	return out, rev, nil
}

// partitions says which leaves with hosts could no longer reach each other
// if dr were added to the stored drains and what is avoided now ("" if all
// still can).
func (d *Drains) partitions(snap *topology.Snapshot, dr models.Drain, stored map[string]models.Drain) string {
	down := d.ctrl.DownLinks()
	all := maps.Clone(stored)
	all["new"] = dr
	for id := range drainedLinks(snap, all) {
		down[id] = true
	}
	drained := map[models.SwitchID]bool{}
	for _, x := range all {
		if x.Switch != "" {
			drained[x.Switch] = true
		}
	}
	var leaves []models.SwitchID
	for _, sw := range snap.Switches() {
		if sw.Role == models.RoleLeaf && len(snap.HostsOn(sw.Name)) > 0 && !drained[sw.Name] {
			leaves = append(leaves, sw.Name)
		}
	}
	if len(leaves) < 2 {
		return ""
	}
	reach := pathcalc.Distances(snap, leaves[0], down)
	for _, l := range leaves[1:] {
		if _, ok := reach[l]; !ok {
			return fmt.Sprintf("%s could no longer reach %s", leaves[0], l)
		}
	}
	return ""
}

// List returns the drains with their progress, oldest first.
func (d *Drains) List() []api.DrainView {
	snap, _ := d.ctrl.Snapshot()
	d.mu.RLock()
	out := make([]api.DrainView, 0, len(d.all))
	for _, dr := range d.all {
		out = append(out, d.view(snap, dr))
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b api.DrainView) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Get returns one drain.
func (d *Drains) Get(id string) (api.DrainView, error) {
	snap, _ := d.ctrl.Snapshot()
	d.mu.RLock()
	defer d.mu.RUnlock()
	dr, ok := d.all[id]
	if !ok {
		return api.DrainView{}, fmt.Errorf("%w: drain %q", store.ErrNotFound, id)
	}
	return d.view(snap, dr), nil
}

func (d *Drains) view(snap *topology.Snapshot, dr models.Drain) api.DrainView {
	v := api.DrainView{Drain: dr, State: "draining"}
	if snap == nil {
		return v
	}
	// Drained means: the routes avoid it, the rollout that moved them is
	// over, and the last counter reading of each end, over an interval
	// that began after the drain was stored, found it empty (a down link
	// is empty). Not the smoothed load, which takes many intervals to
	// decay.
	avoided := d.ctrl.DownLinks()
	drained := d.ctrl.Settled()
	for id := range drainedLinks(snap, map[string]models.Drain{dr.ID: dr}) {
		l, err := snap.Link(id)
		if err != nil {
			continue
		}
		gbps, empty := recentLoad(d.ctrl.tele, l, dr.Created)
		v.TrafficGbps += gbps
		drained = drained && avoided[id] && empty
	}
	if drained {
		v.State = "drained"
	}
	return v
}

// recentLoad is what link l carried (both directions, Gb/s) over the
// last counter reading of each end, and whether that is empty, measured
// over intervals that began after since. A link known down is empty.
func recentLoad(tele *telemetry.Telemetry, l models.Link, since time.Time) (float64, bool) {
	a, okA := tele.Port(l.A)
	b, okB := tele.Port(l.B)
	if reportedDown(a, okA) || reportedDown(b, okB) {
		return 0, true
	}
	gbps, empty := 0.0, true
	for _, e := range []struct {
		p  telemetry.PortLoad
		ok bool
	}{{a, okA}, {b, okB}} {
		p, ok := e.p, e.ok
		if !ok {
			empty = false
			continue
		}
		gbps += p.RecentOutBps / 1e9
		empty = empty && !p.Stale && !p.RecentSince.IsZero() && !p.RecentSince.Before(since) && p.RecentOutBps <= drainedBelowBps
	}
	return gbps, empty
}

// Delete removes a drain: traffic may use the switch or link again.
func (d *Drains) Delete(ctx context.Context, id string) error {
	d.mu.RLock()
	_, ok := d.all[id]
	d.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: drain %q", store.ErrNotFound, id)
	}
	if err := d.store.Delete(ctx, store.KeyDrains+id); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.all, id)
	d.mu.Unlock()
	d.apply()
	return nil
}

// Preview says what draining dr on top of the current drains and failures
// would do, changing nothing.
func (d *Drains) Preview(dr models.Drain) (api.DrainPreview, error) {
	snap, err := d.check(dr)
	if err != nil {
		return api.DrainPreview{}, err
	}
	extra := drainedLinks(snap, map[string]models.Drain{"new": dr})
	down := d.ctrl.DownLinks()
	for id := range extra {
		down[id] = true
	}
	p := api.DrainPreview{Links: len(extra)}
	for id := range extra {
		l, _ := snap.Link(id)
		load := d.ctrl.LinkLoad(l)
		p.TrafficGbps += (load.ABbps + load.BAbps) / 1e9
	}
	if dr.Switch != "" {
		for _, h := range snap.HostsOn(dr.Switch) {
			p.HostsCutOff = append(p.HostsCutOff, h.Name)
		}
	}
	p.ReservedMLU, p.Moved, p.Degraded, err = d.intents.Preview(down)
	return p, err
}
