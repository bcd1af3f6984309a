package northbound

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

// history keeps the recent load of every link (utilization) and switch
// (traffic out, bit/s), one point per interval, so that a page opened now
// shows what just happened rather than an empty chart.
type history struct {
	interval time.Duration
	keep     int // points per series
	mu       sync.RWMutex
	series   map[string][]api.HistoryPoint // "link:<id>", "switch:<name>"
}

// record adds one point to every series of v (and drops what left it).
func (h *history) record(now time.Time, v api.TopologyView) {
	t := now.Unix()
	out := map[models.SwitchID]float64{}
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(v.Links)+len(v.Switches))
	for _, l := range v.Links {
		h.add("link:"+string(l.ID), t, l.Load.Utilization, seen)
		out[l.A.Switch] += l.Load.ABbps
		out[l.B.Switch] += l.Load.BAbps
	}
	for _, sw := range v.Switches {
		h.add("switch:"+string(sw.Name), t, out[sw.Name], seen)
	}
	for k := range h.series {
		if !seen[k] {
			delete(h.series, k) // gone from the topology
		}
	}
}

func (h *history) add(key string, t int64, v float64, seen map[string]bool) {
	seen[key] = true
	s := append(h.series[key], api.HistoryPoint{T: t, V: v})
	if len(s) > h.keep {
		s = append(s[:0:0], s[len(s)-h.keep:]...)
	}
	h.series[key] = s
}

func (h *history) get(key string) ([]api.HistoryPoint, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.series[key]
	return append([]api.HistoryPoint(nil), s...), ok
}

// sampleHistory records the topology's load every interval until the
// API is shut down.
func (a *server) sampleHistory() {
	tick := time.NewTicker(a.history.interval)
	defer tick.Stop()
	for {
		select {
		case <-a.done:
			return
		case now := <-tick.C:
			if v, ok := a.view(); ok {
				a.history.record(now, v)
			}
		}
	}
}

// getHistory answers the recent load of one link (?link=) or switch
// (?switch=): no tenant's data, so no token, as the topology.
func (a *server) getHistory(c *gin.Context) {
	link, sw := c.Query("link"), c.Query("switch")
	if (link == "") == (sw == "") {
		problem(c, http.StatusBadRequest, "give one of link=<link ID> or switch=<name>")
		return
	}
	key, what := "link:"+link, "link "+link
	if sw != "" {
		key, what = "switch:"+sw, "switch "+sw
	}
	points, ok := a.history.get(key)
	if !ok {
		problem(c, http.StatusNotFound, "no history of "+what+" (not in the topology, or not sampled yet)")
		return
	}
	c.JSON(http.StatusOK, api.History{IntervalSeconds: a.history.interval.Seconds(), Points: points})
}
