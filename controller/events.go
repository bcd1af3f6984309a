package controller

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/accelnet/accelnet/models"
)

// Event is one change a client can watch: an intent stored or removed, or
// a new topology. Events come from etcd watches, so every replica sees
// every change, whoever made it.
type Event struct {
	// Type is "intent", "intent-removed", "topology", or "resync" (events
	// may have been missed: read the state again).
	Type     string            `json:"type"`
	Revision int64             `json:"revision"`
	Tenant   models.TenantName `json:"tenant,omitempty"`
	ID       string            `json:"id,omitempty"`
	Intent   *models.Intent    `json:"intent,omitempty"`
}

// Events fans etcd changes out to subscribers.
type Events struct {
	store *Store
	mu    sync.Mutex
	subs  map[*subscriber]struct{}
}

type subscriber struct {
	scope Scope
	ch    chan Event
}

// NewEvents returns a broker over store; Run feeds it.
func NewEvents(store *Store) *Events {
	return &Events{store: store, subs: map[*subscriber]struct{}{}}
}

// subscriberBuffer is how many events a slow client may fall behind
// before it is cut off (it reconnects and reads the state again).
const subscriberBuffer = 1024

// Subscribe returns a channel of the events scope may see; it is closed
// when the subscriber falls too far behind or cancel is called.
func (e *Events) Subscribe(scope Scope) (<-chan Event, func()) {
	s := &subscriber{scope: scope, ch: make(chan Event, subscriberBuffer)}
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

func (e *Events) publish(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		if ev.Tenant != "" && !s.scope.sees(ev.Tenant) {
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

// Run follows intents and the topology until ctx ends.
func (e *Events) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		listed := false
		_ = e.store.follow(ctx, KeyIntents, func(kvs []kv, reset bool) {
			if reset {
				if listed {
					e.publish(Event{Type: "resync"})
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
				rest := strings.TrimPrefix(c.key, KeyIntents)
				tenant, id, _ := strings.Cut(rest, "/")
				ev := Event{Type: "intent-removed", Revision: c.revision, Tenant: models.TenantName(tenant), ID: id}
				if !c.deleted {
					var in models.Intent
					if json.Unmarshal(c.value, &in) != nil {
						continue
					}
					in.Revision = c.revision
					ev.Type, ev.Intent = "intent", &in
				}
				e.publish(ev)
			}
		})
	})
	wg.Go(func() {
		_ = e.store.follow(ctx, KeyTopology, func(kvs []kv, reset bool) {
			if reset {
				return
			}
			for _, c := range kvs {
				if c.key == KeyTopology && !c.deleted {
					e.publish(Event{Type: "topology", Revision: c.revision})
				}
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
