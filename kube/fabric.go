package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
)

// applyDelta brings a topology view up to date with a "load" event of
// /api/v1/stream: its switches, links and hosts replaced by name or ID.
func applyDelta(v *api.TopologyView, d api.TopologyDelta) {
	for _, sw := range d.Switches {
		for i := range v.Switches {
			if v.Switches[i].Name == sw.Name {
				v.Switches[i] = sw
			}
		}
	}
	for _, l := range d.Links {
		for i := range v.Links {
			if v.Links[i].ID == l.ID {
				v.Links[i] = l
			}
		}
	}
	for _, h := range d.Hosts {
		for i := range v.Hosts {
			if v.Hosts[i].Name == h.Name {
				v.Hosts[i] = h
			}
		}
	}
	if d.UndeclaredLinks != nil {
		v.UndeclaredLinks = *d.UndeclaredLinks
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
		var view api.TopologyView
		have := false
		err := c.Stream(ctx, "/api/v1/stream", func(event, data string) error {
			switch event {
			case "topology":
				view = api.TopologyView{}
				if err := json.Unmarshal([]byte(data), &view); err != nil {
					return fmt.Errorf("topology event: %w", err)
				}
				have = true
			case "load":
				if !have {
					return nil
				}
				var d api.TopologyDelta
				if err := json.Unmarshal([]byte(data), &d); err != nil {
					return fmt.Errorf("load event: %w", err)
				}
				applyDelta(&view, d)
			default:
				return nil
			}
			attempt = 0
			s := ShapeOf(view)
			if last == nil || !last.Equal(s) {
				last = &s
				changed(s)
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("the stream ended")
		}
		wait := backoff(attempt)
		log.Warn("accelnet's topology stream: opening it again", "server", c.Server, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
