package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/models"
)

// followed is a topology view kept up to date from /api/v1/stream, with
// where each switch, link and host is in it.
type followed struct {
	view api.TopologyView
	sw   map[models.SwitchID]int
	link map[models.LinkID]int
	host map[string]int
}

// newFollowed indexes a whole view (a "topology" event).
func newFollowed(v api.TopologyView) *followed {
	f := &followed{view: v, sw: make(map[models.SwitchID]int, len(v.Switches)),
		link: make(map[models.LinkID]int, len(v.Links)), host: make(map[string]int, len(v.Hosts))}
	for i, sw := range v.Switches {
		f.sw[sw.Name] = i
	}
	for i, l := range v.Links {
		f.link[l.ID] = i
	}
	for i, h := range v.Hosts {
		f.host[h.Name] = i
	}
	return f
}

// apply brings the view up to date with a "load" event: its switches,
// links and hosts replaced by name or ID.
func (f *followed) apply(d api.TopologyDelta) {
	for _, sw := range d.Switches {
		if i, ok := f.sw[sw.Name]; ok {
			f.view.Switches[i] = sw
		}
	}
	for _, l := range d.Links {
		if i, ok := f.link[l.ID]; ok {
			f.view.Links[i] = l
		}
	}
	for _, h := range d.Hosts {
		if i, ok := f.host[h.Name]; ok {
			f.view.Hosts[i] = h
		}
	}
	if d.UndeclaredLinks != nil {
		f.view.UndeclaredLinks = *d.UndeclaredLinks
	}
}

// FollowFabric follows accelnet's topology stream and calls changed with
// each new shape (the first at once, then each that differs from the one
// before), until ctx ends. When the stream fails it is opened again,
// backing off; the last shape stands meanwhile (accelnet being away is
// not the fabric changing).
func FollowFabric(ctx context.Context, c *apiclient.Client, log *slog.Logger, changed func(Shape)) {
	var last *Shape
	for attempt := 0; ctx.Err() == nil; attempt++ {
		var view *followed
		err := c.Stream(ctx, "/api/v1/stream", func(event, data string) error {
			switch event {
			case "topology":
				var v api.TopologyView
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					return fmt.Errorf("topology event: %w", err)
				}
				view = newFollowed(v)
			case "load":
				if view == nil {
					return nil
				}
				var d api.TopologyDelta
				if err := json.Unmarshal([]byte(data), &d); err != nil {
					return fmt.Errorf("load event: %w", err)
				}
				view.apply(d)
			default:
				return nil
			}
			attempt = 0
			s := ShapeOf(view.view)
			if last == nil || !last.Equal(s) {
				last = &s
				changed(s)
			}
			return nil
		})
		if !streamAgain(ctx, c, log, "accelnet's topology stream", err, backoff(attempt)) {
			return
		}
	}
}

// streamAgain says why a stream of accelnet's ended (err; nil: the server
// ended it) and waits to open it again; false once ctx ends.
func streamAgain(ctx context.Context, c *apiclient.Client, log *slog.Logger, what string, err error, wait time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if err == nil {
		err = errors.New("the stream ended")
	}
	log.Warn(what+": opening it again", "server", c.Server, "err", err, "in", wait)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}
