package northbound

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// history keeps the recent load of every link (utilization) and switch
// (traffic out, bit/s), one point per interval, so that a page opened now
// shows what just happened rather than an empty chart. Every series is
// recorded in the same rounds, so the times are kept once for all, and
// each series is a ring of float32 values: at k=48 (58,000 series, 180
// points each by default) 42 MB, where a slice of time-value points per
// series grew to 240 MB.
type history struct {
	interval time.Duration
	keep     int // points per series
	mu       sync.RWMutex
	series   map[historyKey]*series
	rounds   uint64  // record calls so far
	times    []int64 // round r's time (Unix seconds) at r % keep
}

// historyKey names a series: a link's, or a switch's.
type historyKey struct {
	link models.LinkID
	sw   models.SwitchID
}

// series has a value for every round from first to the last one (a
// series missing from a round is dropped), round r's at r % keep.
type series struct {
	values []float32
	first  uint64
	round  uint64 // the last record call that added to it
}

// record adds one point to every link's and switch's series from the
// links' load (and drops the series of what left the topology). It reads
// only the links: at k=48 building the whole topology view every 5 s
// (27,648 hosts, 55,296 links, every switch's status) would take 7% of
// the controller's CPU.
func (h *history) record(now time.Time, snap *topology.Snapshot, load func(models.Link) api.LinkLoad) {
	out := make(map[models.SwitchID]float64, len(snap.Switches()))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds++
	if h.times == nil {
		h.times = make([]int64, h.keep)
	}
	h.times[h.rounds%uint64(h.keep)] = now.Unix()
	for l := range snap.AllLinks() {
		ll := load(l)
		h.add(historyKey{link: l.ID()}, ll.Utilization)
		out[l.A.Switch] += ll.ABbps
		out[l.B.Switch] += ll.BAbps
	}
	for sw := range snap.AllSwitches() {
		h.add(historyKey{sw: sw.Name}, out[sw.Name])
	}
	for k, s := range h.series {
		if s.round != h.rounds {
			delete(h.series, k) // gone from the topology
		}
	}
}

func (h *history) add(key historyKey, v float64) {
	s := h.series[key]
	if s == nil {
		s = &series{values: make([]float32, h.keep), first: h.rounds}
		h.series[key] = s
	}
	s.round = h.rounds
	s.values[h.rounds%uint64(h.keep)] = float32(v)
}

func (h *history) get(key historyKey) ([]api.HistoryPoint, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.series[key]
	if !ok {
		return nil, false
	}
	from := s.first
	if keep := uint64(h.keep); s.round >= keep {
		from = max(from, s.round+1-keep)
	}
	out := make([]api.HistoryPoint, 0, s.round+1-from)
	for r := from; r <= s.round; r++ {
		i := r % uint64(h.keep)
		// The float32's shortest decimal form, not its float64 widening
		// (0.37, not 0.3700000047683716).
		v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(s.values[i]), 'g', -1, 32), 64)
		out = append(out, api.HistoryPoint{T: h.times[i], V: v})
	}
	return out, true
}

// sampleHistory records the topology's load every interval until the
// API is shut down, except while a link failure is rerouted (a k=48
// round reads 55,296 links' load, CPU the failure's pruning needs).
func (a *server) sampleHistory() {
	tick := time.NewTicker(a.history.interval)
	defer tick.Stop()
	for {
		select {
		case <-a.done:
			return
		case now := <-tick.C:
			a.historyRound(now)
		}
	}
}

// historyRound records the load at now, unless a link failure is being
// rerouted (a round left out: the points keep their own times). It says
// whether it recorded.
func (a *server) historyRound(now time.Time) bool {
	if a.opts.Fabric.HandlingFailure() {
		return false
	}
	snap, _ := a.opts.Fabric.Snapshot()
	if snap == nil {
		return false
	}
	a.history.record(now, snap, a.opts.Fabric.LinkLoad)
	return true
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
