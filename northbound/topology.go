package northbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/gin-gonic/gin"
)

func (a *server) topology(c *gin.Context) {
	v, ok := a.view()
	if !ok {
		problem(c, http.StatusServiceUnavailable, "no topology loaded yet")
		return
	}
	c.JSON(http.StatusOK, v)
}

// stream sends the topology view as server-sent events ("topology"), at
// once and then every StreamInterval, until the client goes away. The
// dashboard follows it.
func (a *server) stream(c *gin.Context) {
	defer endless(c)()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	tick := time.NewTicker(a.opts.StreamInterval)
	defer tick.Stop()
	// The whole view once (and again when the topology changes), then
	// each interval only what changed: a "load" event, empty if nothing
	// did (so the client knows the stream is alive).
	var last *api.TopologyView
	for {
		if v, ok := a.view(); ok {
			event, body := "topology", any(v)
			if last != nil && sameShape(*last, v) {
				event, body = "load", delta(*last, v)
			}
			data, err := json.Marshal(body)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(c.Writer, "event: %s\ndata: %s\n\n", event, data); err != nil {
				return
			}
			c.Writer.Flush()
			last = &v
		}
		select {
		case <-c.Request.Context().Done():
			return
		case <-a.done:
			return
		case <-tick.C:
		}
	}
}

// sameShape says whether two views are of one topology (same revision,
// same switches, links and hosts in the same order): then a delta of
// one from the other carries everything.
func sameShape(a, b api.TopologyView) bool {
	if a.Revision != b.Revision || a.Name != b.Name || len(a.Switches) != len(b.Switches) || len(a.Links) != len(b.Links) || len(a.Hosts) != len(b.Hosts) {
		return false
	}
	for i := range a.Switches {
		if a.Switches[i].Name != b.Switches[i].Name {
			return false
		}
	}
	for i := range a.Links {
		if a.Links[i].ID != b.Links[i].ID {
			return false
		}
	}
	for i := range a.Hosts {
		if a.Hosts[i].Name != b.Hosts[i].Name {
			return false
		}
	}
	return true
}

// delta is what changed from prev to next (views of the same shape).
func delta(prev, next api.TopologyView) api.TopologyDelta {
	d := api.TopologyDelta{Revision: next.Revision}
	for i, sw := range next.Switches {
		if !reflect.DeepEqual(sw, prev.Switches[i]) {
			d.Switches = append(d.Switches, sw)
		}
	}
	for i, l := range next.Links {
		if !reflect.DeepEqual(l, prev.Links[i]) {
			d.Links = append(d.Links, l)
		}
	}
	for i, h := range next.Hosts {
		if !reflect.DeepEqual(h, prev.Hosts[i]) {
			d.Hosts = append(d.Hosts, h)
		}
	}
	if !slices.Equal(prev.UndeclaredLinks, next.UndeclaredLinks) {
		u := append([]string{}, next.UndeclaredLinks...)
		d.UndeclaredLinks = &u
	}
	return d
}

// view assembles the topology with status and live load.
func (a *server) view() (api.TopologyView, bool) {
	snap, rev := a.opts.Fabric.Snapshot()
	if snap == nil {
		return api.TopologyView{}, false
	}
	status := a.opts.Fabric.Status()
	drainedSw, drainedLinks := a.opts.Fabric.Drained()
	dampened := a.opts.Fabric.Dampened()
	v := api.TopologyView{Name: snap.Name(), Revision: rev, Switches: []api.SwitchView{}, Links: []api.LinkView{}, Hosts: []api.HostView{}}
	for _, sw := range snap.Switches() {
		sv := api.SwitchView{Switch: sw, Drained: slices.Contains(drainedSw, sw.Name)}
		if st, ok := status[sw.Name]; ok {
			sv.Status = &st
		}
		v.Switches = append(v.Switches, sv)
	}
	disc, undeclared := a.opts.Fabric.LinkDiscovery()
	v.UndeclaredLinks = undeclared
	for _, l := range snap.Links() {
		lv := api.LinkView{ID: l.ID(), A: l.A, B: l.B, Gbps: l.Gbps, Load: a.opts.Fabric.LinkLoad(l),
			Drained: drainedLinks[l.ID()], Dampened: slices.Contains(dampened, l.ID())}
		if d, ok := disc[l.ID()]; ok {
			lv.Discovery = &d
		}
		v.Links = append(v.Links, lv)
	}
	for _, h := range snap.Hosts() {
		hv := api.HostView{Host: h}
		if pl, ok := a.opts.Fabric.PortLoad(h.Attach); ok {
			hv.TxBps, hv.RxBps, hv.PortDown = pl.InBps, pl.OutBps, !pl.OperUp
		}
		v.Hosts = append(v.Hosts, hv)
	}
	return v, true
}

func (a *server) entries(c *gin.Context) {
	name := models.SwitchID(c.Param("name"))
	if err := name.Validate(); err != nil {
		problem(c, http.StatusBadRequest, err.Error())
		return
	}
	snap, _ := a.opts.Fabric.Snapshot()
	if snap == nil {
		problem(c, http.StatusServiceUnavailable, "no topology loaded yet")
		return
	}
	if _, err := snap.Switch(name); err != nil {
		problem(c, http.StatusNotFound, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.opts.ReadTimeout)
	defer cancel()
	st, err := a.opts.Entries.Read(ctx, name)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, context.DeadlineExceeded) {
			code = http.StatusGatewayTimeout
		}
		problem(c, code, "read back from "+string(name)+": "+err.Error())
		return
	}
	c.JSON(http.StatusOK, api.EntriesView{Switch: name, Entries: st, Counts: map[string]int{
		"members": len(st.Members), "groups": len(st.Groups), "routes": len(st.Routes), "flow_pins": len(st.FlowPins),
	}})
}

// listElephants lists the heavy flows sampling found that no intent
// declares, biggest first, and where they are pinned.
func (a *server) listElephants(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Intents.DetectedFlows()})
}
