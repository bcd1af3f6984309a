package northbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	endless(c)
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	tick := time.NewTicker(a.opts.StreamInterval)
	defer tick.Stop()
	for {
		if v, ok := a.view(); ok {
			data, err := json.Marshal(v)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(c.Writer, "event: topology\ndata: %s\n\n", data); err != nil {
				return
			}
			c.Writer.Flush()
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
			hv.TxBps, hv.RxBps = pl.InBps, pl.OutBps
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
