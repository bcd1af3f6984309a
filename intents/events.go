package intents

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// Events fans etcd changes out to subscribers.
type Events struct {
	store store.Follower
	mu    sync.Mutex
	subs  map[*subscriber]struct{}
}

type subscriber struct {
	scope Scope
	ch    chan api.Event
}

// NewEvents returns a broker over store; Run feeds it.
func NewEvents(store store.Follower) *Events {
	return &Events{store: store, subs: map[*subscriber]struct{}{}}
}

// subscriberBuffer is how many events a slow client may fall behind
// before it is cut off (it reconnects and reads the state again).
const subscriberBuffer = 1024

// Subscribe returns a channel of the events scope may see; it is closed
// when the subscriber falls too far behind or cancel is called.
func (e *Events) Subscribe(scope Scope) (<-chan api.Event, func()) {
	s := &subscriber{scope: scope, ch: make(chan api.Event, subscriberBuffer)}
	e.mu.Lock()
	e.subs[s] = struct{}{}
	e.mu.Unlock()
	return s.ch, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := e.subs[s]; ok {
			delete(e.subs, s)
			close(s.ch)
		}
	}
}

func (e *Events) publish(ev api.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		if ev.Tenant != "" && !s.scope.sees(ev.Tenant) || ev.Switch != "" && !s.scope.Operator {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			delete(e.subs, s)
			close(s.ch)
		}
	}
}

// Run follows intents, the topology and the switches taken by another
// controller until ctx ends.
func (e *Events) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		listed := false
		_ = e.store.Follow(ctx, store.KeyIntents, func(kvs []store.KV, reset bool) {
			if reset {
				if listed {
					e.publish(api.Event{Type: "resync"})
				}
				listed = true
				return
			}
			e.mu.Lock()
			idle := len(e.subs) == 0
			e.mu.Unlock()
			if idle {
				return // nobody to tell: skip decoding
			}
			for _, c := range kvs {
				rest := strings.TrimPrefix(c.Key, store.KeyIntents)
				tenant, id, _ := strings.Cut(rest, "/")
				ev := api.Event{Type: "intent-removed", Revision: c.Revision, Tenant: models.TenantName(tenant), ID: id}
				if !c.Deleted {
					var in models.Intent
					if json.Unmarshal(c.Value, &in) != nil {
						continue
					}
					in.Revision = c.Revision
					ev.Type, ev.Intent = "intent", &in
				}
				e.publish(ev)
			}
		})
	})
	wg.Go(func() {
		_ = e.store.Follow(ctx, store.KeyTopology, func(kvs []store.KV, reset bool) {
			if reset {
				return
			}
			for _, c := range kvs {
				if c.Key == store.KeyTopology && !c.Deleted {
					e.publish(api.Event{Type: "topology", Revision: c.Revision})
				}
			}
		})
	})
	wg.Go(func() {
		_ = e.store.Follow(ctx, store.KeyForeign, func(kvs []store.KV, reset bool) {
			if reset {
				return
			}
			for _, c := range kvs {
				ev := api.Event{Type: "switch-primary", Revision: c.Revision, Switch: models.SwitchID(strings.TrimPrefix(c.Key, store.KeyForeign))}
				if !c.Deleted {
					var rec models.ForeignPrimary
					_ = json.Unmarshal(c.Value, &rec)
					ev.Type, ev.Message = "switch-foreign", rec.Error
				}
				e.publish(ev)
			}
		})
	})
	wg.Wait()
	e.mu.Lock()
	for s := range e.subs {
		delete(e.subs, s)
		close(s.ch)
	}
	e.mu.Unlock()
	return nil
}
