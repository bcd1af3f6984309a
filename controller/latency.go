package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// Latency between leaves and hosts, assembled from queue telemetry: each
// hop's egress queue depth, as its switch reports it over gNMI, at the
// port's rate, plus the configured fixed cost of a hop
// (telemetry.LatencyModel). A pair's paths are its equal-cost shortest
// paths over the links the routes use (pathcalc.Book.Candidates): ECMP
// spreads flows over all of them.
//
// The leaf×leaf matrix is computed once a telemetry interval while
// anyone asks for it or metrics are kept, for fabrics of at most
// MaxLatencyLeaves leaves (a pair's paths are listed for each cell: at
// 128 leaves of a k=16 fat-tree, 16,256 pairs of up to 64 paths); past
// that, ask for one pair.
const MaxLatencyLeaves = 64

// DefaultLatencyWindow is the window a pair's percentiles span unless
// asked otherwise.
const DefaultLatencyWindow = time.Minute

// ErrLatency marks a latency request that names no leaf or host, or one
// the fabric is too large to answer (a client's mistake, not a fault).
var ErrLatency = errors.New("latency")

// latencyState caches what latency needs per fabric state: the leaves, a
// ledger for listing paths (over the links the routes use; built when a
// path is first asked for, not to learn the fabric is too large for the
// matrix), the leaf pairs' paths for the matrix, and the last matrix.
type latencyState struct {
	mu     sync.Mutex
	st     *fabricState
	leaves []models.Host // one host of each leaf, in the topology's order
	book   *pathcalc.Book
	pairs  *pairPaths // built with the first matrix
	matrix api.LatencyMatrix
}

// forStateLocked starts the cache afresh if st is not the state it holds
// (c.latency.mu held).
func (ls *latencyState) forStateLocked(st *fabricState) {
	if ls.st == st {
		return
	}
	ls.st, ls.leaves, ls.book, ls.pairs, ls.matrix = st, leafHosts(st.snap), nil, nil, api.LatencyMatrix{}
}

// leafHosts is one host of each leaf (a switch with hosts), in the
// topology's order: latency between leaves is between them.
func leafHosts(snap *topology.Snapshot) []models.Host {
	var leaves []models.Host
	for _, sw := range snap.Switches() {
		if hosts := snap.HostsOn(sw.Name); len(hosts) > 0 {
			leaves = append(leaves, hosts[0])
		}
	}
	return leaves
}

// latencyLeaves is st's leaves, one host standing for each.
func (c *Controller) latencyLeaves(st *fabricState) []models.Host {
	c.latency.mu.Lock()
	defer c.latency.mu.Unlock()
	c.latency.forStateLocked(st)
	return c.latency.leaves
}

// pairPaths are every leaf pair's paths as indexes into ports (the
// egress ports they cross), listed once per fabric state: the matrix is
// then one read of the ports' depths and a sum per path. (Listing the
// paths and reading each hop's depth for every cell cost 55 ms a second
// of CPU at 64 leaves and 16 spines.)
type pairPaths struct {
	ports []models.Endpoint
	paths [][][][]int32 // [source leaf][destination leaf][path][hop]
}

// leafPairPaths lists every leaf pair's paths, leaf to leaf (without the
// host standing for the destination).
func leafPairPaths(book *pathcalc.Book, leaves []models.Host) *pairPaths {
	pp := &pairPaths{paths: make([][][][]int32, len(leaves))}
	index := map[models.Endpoint]int32{}
	for i, a := range leaves {
		pp.paths[i] = make([][][]int32, len(leaves))
		for j, b := range leaves {
			if i == j {
				continue
			}
			for _, path := range book.Candidates(a, b, pathcalc.PathConstraints{}) {
				hops := make([]int32, 0, len(path)-1)
				for _, e := range path[:len(path)-1] {
					k, ok := index[e]
					if !ok {
						k = int32(len(pp.ports))
						index[e] = k
						pp.ports = append(pp.ports, e)
					}
					hops = append(hops, k)
				}
				pp.paths[i][j] = append(pp.paths[i][j], hops)
			}
		}
	}
	return pp
}

// latencyBook runs fn with the ledger and leaves for st (built once per
// state), under c.latency.mu: a Book serves one caller at a time (it
// caches the paths it lists), and the matrix's ticker and the API's pair
// requests list paths at once.
func (c *Controller) latencyBook(st *fabricState, fn func(book *pathcalc.Book, leaves []models.Host)) error {
	c.latency.mu.Lock()
	defer c.latency.mu.Unlock()
	c.latency.forStateLocked(st)
	if c.latency.book == nil {
		book, err := pathcalc.NewBook(st.snap, st.down, 0)
		if err != nil {
			return err
		}
		c.latency.book = book
	}
	fn(c.latency.book, c.latency.leaves)
	return nil
}

// latencyModel is the configured fixed cost of a hop.
func (c *Controller) latencyModel() api.LatencyModel {
	m := c.cfg.Latency.WithDefaults()
	return api.LatencyModel{SwitchDelayNs: int(m.SwitchDelay), LinkDelayNs: int(m.LinkDelay), PacketBytes: m.PacketBytes}
}

// endOf resolves a latency request's end: a host, or a leaf (one of its
// hosts stands for it, and the path stops at the leaf).
func endOf(snap *topology.Snapshot, leaves []models.Host, name string) (h models.Host, leaf bool, err error) {
	if h, err := snap.Host(name); err == nil {
		return h, false, nil
	}
	for _, h := range leaves {
		if string(h.Attach.Switch) == name {
			return h, true, nil
		}
	}
	return models.Host{}, false, fmt.Errorf("%w: %q is neither a host nor a leaf", ErrLatency, name)
}

// PairLatency is the latency between two leaves or hosts over their
// paths, now and over the window before now (0: DefaultLatencyWindow).
func (c *Controller) PairLatency(src, dst string, window time.Duration) (api.PairLatency, error) {
	st := c.current()
	if st == nil {
		return api.PairLatency{}, errors.New("no topology loaded yet")
	}
	leaves := c.latencyLeaves(st)
	s, srcLeaf, err := endOf(st.snap, leaves, src)
	if err != nil {
		return api.PairLatency{}, err
	}
	d, dstLeaf, err := endOf(st.snap, leaves, dst)
	if err != nil {
		return api.PairLatency{}, err
	}
	if srcLeaf != dstLeaf {
		return api.PairLatency{}, fmt.Errorf("%w: %s and %s: ask for two leaves or two hosts", ErrLatency, src, dst)
	}
	if s.Attach.Switch == d.Attach.Switch && (srcLeaf || s.Name == d.Name) {
		return api.PairLatency{}, fmt.Errorf("%w: %s and %s are on one leaf: no fabric path between them", ErrLatency, src, dst)
	}
	if window <= 0 {
		window = DefaultLatencyWindow
	}
	var paths [][]models.Endpoint
	if err := c.latencyBook(st, func(book *pathcalc.Book, _ []models.Host) {
		paths = book.Candidates(s, d, pathcalc.PathConstraints{})
	}); err != nil {
		return api.PairLatency{}, err
	}
	if len(paths) == 0 {
		return api.PairLatency{}, fmt.Errorf("%w: no working path from %s to %s", ErrLatency, src, dst)
	}
	if dstLeaf {
		for i, path := range paths {
			paths[i] = path[:len(path)-1] // leaf to leaf: not into the host standing for it
		}
	}
	out := api.PairLatency{Src: src, Dst: dst, Source: api.LatencySource, Window: window, Model: c.latencyModel()}
	pls, sum := c.overPaths(st, paths, window)
	out.NowUs, out.P50Us, out.P99Us = sum.NowUs, sum.P50Us, sum.P99Us
	for _, pl := range pls {
		out.Intervals = max(out.Intervals, pl.Intervals)
		out.Paths = append(out.Paths, pathView(pl))
	}
	out.Probes = c.mesh.probed(s.Attach.Switch, d.Attach.Switch, window)
	return out, nil
}

// overPaths is each path's latency over the window before now, and over
// them all: now (their mean), and the median and 99th percentile over
// the paths and the window's intervals (ECMP spreads flows over every
// path alike).
func (c *Controller) overPaths(st *fabricState, paths [][]models.Endpoint, window time.Duration) ([]telemetry.PathLatency, models.PathLatency) {
	sum := models.PathLatency{Source: api.LatencySource}
	pls := make([]telemetry.PathLatency, 0, len(paths))
	var all []time.Duration
	for _, path := range paths {
		pl, samples := c.tele.PathSamples(path, st.snap.PortGbps, c.cfg.Latency, window)
		all = append(all, samples...)
		sum.NowUs += us(pl.Now) / float64(len(paths))
		pls = append(pls, pl)
	}
	slices.Sort(all)
	sum.P50Us, sum.P99Us = us(telemetry.Percentile(all, 0.5)), us(telemetry.Percentile(all, 0.99))
	return pls, sum
}

// FlowsLatency is the latency of flows leaving by paths (an intent's):
// now (the mean over them), and the median and 99th percentile over the
// paths and the window before now; false if there is no path, or no hop
// of them reports its queue.
func (c *Controller) FlowsLatency(paths [][]models.Endpoint, window time.Duration) (models.PathLatency, bool) {
	st := c.current()
	if st == nil || len(paths) == 0 {
		return models.PathLatency{}, false
	}
	if window <= 0 {
		window = DefaultLatencyWindow
	}
	pls, sum := c.overPaths(st, paths, window)
	for _, pl := range pls {
		for _, h := range pl.Hops {
			if h.Measured {
				return sum, true
			}
		}
	}
	return models.PathLatency{}, false // no hop reports its queue
}

// LatencyMatrix is every leaf pair's latency now, computed at most once a
// telemetry interval.
func (c *Controller) LatencyMatrix() (api.LatencyMatrix, error) {
	st := c.current()
	if st == nil {
		return api.LatencyMatrix{}, errors.New("no topology loaded yet")
	}
	if n := len(c.latencyLeaves(st)); n > MaxLatencyLeaves {
		return api.LatencyMatrix{}, fmt.Errorf("%w: the fabric has %d leaves; the matrix is served up to %d: ask for one pair (src and dst)", ErrLatency, n, MaxLatencyLeaves)
	}
	var (
		m      api.LatencyMatrix
		pp     *pairPaths
		leaves []models.Host
	)
	if err := c.latencyBook(st, func(book *pathcalc.Book, lv []models.Host) {
		if c.latency.pairs == nil {
			c.latency.pairs = leafPairPaths(book, lv)
		}
		m, pp, leaves = c.latency.matrix, c.latency.pairs, lv
	}); err != nil {
		return api.LatencyMatrix{}, err
	}
	now := c.cfg.Now()
	if m.Leaves != nil && now.Sub(m.At) < c.cfg.TelemetryInterval {
		return m, nil
	}
	hop := c.tele.HopsNow(pp.ports, st.snap.PortGbps, c.cfg.Latency)
	m = api.LatencyMatrix{Source: api.LatencySource, At: now, Leaves: make([]string, len(leaves)),
		MeanUs: make([][]float64, len(leaves)), WorstUs: make([][]float64, len(leaves))}
	for i, a := range leaves {
		m.Leaves[i] = string(a.Attach.Switch)
		m.MeanUs[i], m.WorstUs[i] = make([]float64, len(leaves)), make([]float64, len(leaves))
		for j, paths := range pp.paths[i] {
			for _, path := range paths {
				var d time.Duration
				for _, k := range path {
					d += hop[k]
				}
				m.MeanUs[i][j] += us(d)
				m.WorstUs[i][j] = max(m.WorstUs[i][j], us(d))
			}
			if len(paths) > 0 {
				m.MeanUs[i][j] /= float64(len(paths))
				c.m.pairLatency.Observe(m.MeanUs[i][j] / 1e6)
			}
		}
	}
	c.latency.mu.Lock()
	if c.latency.st == st {
		c.latency.matrix = m
	}
	c.latency.mu.Unlock()
	return m, nil
}

// keepLatency computes the leaf×leaf matrix every telemetry interval (for
// accelnet_leaf_pair_latency_seconds) on fabrics small enough for it; on
// a larger one (or with no topology yet) it does nothing that interval.
func (c *Controller) keepLatency(ctx context.Context) {
	tick := time.NewTicker(c.cfg.TelemetryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, _ = c.LatencyMatrix() // its errors are for the API's callers
	}
}

// observeQueue counts a port's reported queue in the queueing delay
// histogram (the depth at the port's rate).
func (c *Controller) observeQueue(s models.CounterSample) {
	if s.Has != models.HasQueueLen {
		return
	}
	st := c.current()
	if st == nil {
		return
	}
	if g := st.snap.PortGbps(models.Endpoint{Switch: s.Switch, Port: s.Port}); g > 0 {
		c.m.queueDelay.Observe(float64(s.QueueBytes) * 8 / (g * 1e9))
	}
}

// pathView is a path's latency as the API shows it.
func pathView(pl telemetry.PathLatency) api.PathLatency {
	v := api.PathLatency{NowUs: us(pl.Now), P50Us: us(pl.P50), P99Us: us(pl.P99)}
	for _, h := range pl.Hops {
		v.Hops = append(v.Hops, api.HopLatency{Switch: string(h.Port.Switch), Port: h.Port.Port, QueueBytes: h.QueueBytes,
			QueueingUs: us(h.Queueing), FixedUs: us(h.Fixed), Measured: h.Measured, Probed: h.Probed})
	}
	return v
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
