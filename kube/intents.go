package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/models"
)

// intentView is accelnet's intents named k8s:…, as its event stream tells
// them (and as accelnet kube's own requests answered, which may come
// first), by ID and by name.
type intentView struct {
	mu     sync.Mutex
	byID   map[string]heard
	byName map[string]map[string]bool // name → IDs
	synced bool
	// gen counts the streams opened.
	gen int
	// live are the IDs of every live intent the stream showed (not only
	// accelnet kube's): one that stops being live frees capacity.
	live map[string]bool
}

// heard is an intent and the stream (gen) it was last heard of in.
type heard struct {
	in  models.Intent
	gen int
}

func newIntentView() *intentView {
	return &intentView{byID: map[string]heard{}, byName: map[string]map[string]bool{}, live: map[string]bool{}}
}

// ended records an intent's state (or its removal: live false) and says
// whether a live intent stopped being one.
func (v *intentView) ended(id string, live bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if live {
		v.live[id] = true
		return false
	}
	was := v.live[id]
	delete(v.live, id)
	return was
}

// put records an intent (unless the view holds a later revision of it)
// and says whether it changed anything.
func (v *intentView) put(in models.Intent) bool {
	if !strings.HasPrefix(in.Spec.Name, IntentPrefix) {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	have, ok := v.byID[in.ID]
	if ok && have.in.Revision >= in.Revision {
		have.gen = v.gen
		v.byID[in.ID] = have
		return false
	}
	if ok {
		v.dropLocked(in.ID)
	}
	v.byID[in.ID] = heard{in: in, gen: v.gen}
	if v.byName[in.Spec.Name] == nil {
		v.byName[in.Spec.Name] = map[string]bool{}
	}
	v.byName[in.Spec.Name][in.ID] = true
	return true
}

// remove forgets an intent, returning its name.
func (v *intentView) remove(id string) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dropLocked(id)
}

func (v *intentView) dropLocked(id string) (string, bool) {
	h, ok := v.byID[id]
	if !ok {
		return "", false
	}
	name := h.in.Spec.Name
	delete(v.byID, id)
	if delete(v.byName[name], id); len(v.byName[name]) == 0 {
		delete(v.byName, name)
	}
	return name, true
}

// named are the intents of one name, oldest first; ok is false until the
// stream has sent every intent at least once.
func (v *intentView) named(name string) (out []models.Intent, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.byName[name] {
		out = append(out, v.byID[id].in)
	}
	slices.SortFunc(out, func(a, b models.Intent) int { return strings.Compare(a.ID, b.ID) })
	return out, v.synced
}

// names are the names of every intent in the view.
func (v *intentView) names() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.byName))
}

// follow keeps the view from accelnet's /api/v1/events, calling changed
// with the name of each intent that changed, freed when any live intent
// (accelnet kube's or not) stops being live, and synced after each full
// state (the first, and after every reconnection), until ctx ends.
func (v *intentView) follow(ctx context.Context, c *apiclient.Client, log *slog.Logger, changed func(name string), freed, synced func()) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		// A full state replaces the view: what it lacks, and was not heard
		// of since the stream opened, was removed while it was down.
		v.mu.Lock()
		v.gen++
		gen := v.gen
		v.mu.Unlock()
		err := c.Stream(ctx, "/api/v1/events", func(event, data string) error {
			var ev api.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return fmt.Errorf("%s event: %w", event, err)
			}
			switch ev.Type {
			case "intent":
				if ev.Intent == nil {
					return nil
				}
				if v.ended(ev.Intent.ID, ev.Intent.Status.State.Live()) {
					freed()
				}
				if !strings.HasPrefix(ev.Intent.Spec.Name, IntentPrefix) {
					return nil
				}
				if v.put(*ev.Intent) {
					changed(ev.Intent.Spec.Name)
				}
			case "intent-removed":
				if v.ended(ev.ID, false) {
					freed()
				}
				if name, ok := v.remove(ev.ID); ok {
					changed(name)
				}
			case "synced":
				attempt = 0
				v.mu.Lock()
				var gone []string
				for id, h := range v.byID {
					if h.gen < gen {
						name, _ := v.dropLocked(id)
						gone = append(gone, name)
					}
				}
				v.synced = true
				v.mu.Unlock()
				for _, name := range gone {
					changed(name)
				}
				synced()
			case "resync":
				return errResync
			}
			return nil
		})
		wait := backoff(attempt)
		if err == errResync {
			wait = 0
		}
		if !streamAgain(ctx, c, log, "accelnet's intent events", err, wait) {
			return
		}
	}
}

var errResync = fmt.Errorf("accelnet asked for a resync")
