package northbound

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// history keeps the recent load of every link (utilization) and switch
// (traffic out, bit/s), one point per interval, so that a page opened now
// shows what just happened rather than an empty chart.
type history struct {
	interval time.Duration
	keep     int // points per series
	mu       sync.RWMutex
	series   map[historyKey]*series
	rounds   uint64 // record calls so far
}

// historyKey names a series: a link's, or a switch's.
type historyKey struct {
	link models.LinkID
	sw   models.SwitchID
}

type series struct {
	points []api.HistoryPoint
	round  uint64 // the last record call that added to it
}

// record adds one point to every link's and switch's series from the
// links' load (and drops the series of what left the topology). It reads
// only the links: at k=48 building the whole topology view every 5 s
// (27,648 hosts, 55,296 links, every switch's status) took 7% of the
// controller's CPU.
func (h *history) record(now time.Time, snap *topology.Snapshot, load func(models.Link) api.LinkLoad) {
	t := now.Unix()
	out := make(map[models.SwitchID]float64, len(snap.Switches()))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds++
	for _, l := range snap.Links() {
		ll := load(l)
		h.add(historyKey{link: l.ID()}, t, ll.Utilization)
		out[l.A.Switch] += ll.ABbps
		out[l.B.Switch] += ll.BAbps
	}
	for _, sw := range snap.Switches() {
		h.add(historyKey{sw: sw.Name}, t, out[sw.Name])
	}
	for k, s := range h.series {
		if s.round != h.rounds {
			delete(h.series, k) // gone from the topology
		}
	}
}

func (h *history) add(key historyKey, t int64, v float64) {
	s := h.series[key]
	if s == nil {
		s = &series{}
		h.series[key] = s
	}
	s.round = h.rounds
	s.points = append(s.points, api.HistoryPoint{T: t, V: v})
	if len(s.points) > h.keep {
		s.points = append(s.points[:0:0], s.points[len(s.points)-h.keep:]...)
	}
}

func (h *history) get(key historyKey) ([]api.HistoryPoint, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.series[key]
	if !ok {
		return nil, false
	}
	return append([]api.HistoryPoint(nil), s.points...), true
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
			if snap, _ := a.opts.Fabric.Snapshot(); snap != nil {
				a.history.record(now, snap, a.opts.Fabric.LinkLoad)
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
	key, what := historyKey{link: models.LinkID(link)}, "link "+link
	if sw != "" {
		key, what = historyKey{sw: models.SwitchID(sw)}, "switch "+sw
	}
	points, ok := a.history.get(key)
	if !ok {
		problem(c, http.StatusNotFound, "no history of "+what+" (not in the topology, or not sampled yet)")
		return
	}
	c.JSON(http.StatusOK, api.History{IntervalSeconds: a.history.interval.Seconds(), Points: points})
}
