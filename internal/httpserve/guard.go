package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound the connections one listener holds.
type Limits struct {
	// MaxConns is how many connections the listener holds at once.
	MaxConns int
	// MaxPerSource is how many of them one client address holds.
	MaxPerSource int
}

// Validate says what is wrong with the limits.
func (l Limits) Validate() error {
	if l.MaxConns < 1 || l.MaxPerSource < 1 {
		return errors.New("connection limits must be at least 1")
	}
	return nil
}

// Guard is a listener that holds at most Limits' connections. A
// connection is anonymous until a request on it shows a valid credential
// (Trust); when a new connection would go past a limit, the anonymous
// connection idle for longest (not in a request, or only holding an
// anonymous stream open: LongHold) is closed to make room, among the new
// one's own source's connections when that source is at its limit. If
// none can go, the new connection is closed at once. So a flood of idle
// or slow anonymous connections takes its own older connections down,
// never an operator's, and never the process's file descriptors: the
// limits are set below them (cmd/accelnet).
type Guard struct {
	net.Listener
	lim Limits
	log *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	bySource map[netip.Addr]int

	metrics guardMetrics
	// refusedLogged rate-limits the log line of refusals.
	refusedLogged atomic.Int64
}

type guardMetrics struct {
	open    prometheus.GaugeFunc
	refused *prometheus.CounterVec
	evicted prometheus.Counter
}

// NewGuard guards lis with lim; reg (nil: none) gets its metrics, named
// accelnet_<subsystem>_connections….
func NewGuard(lis net.Listener, lim Limits, subsystem string, log *slog.Logger, reg prometheus.Registerer) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{Listener: lis, lim: lim, log: log, conns: map[*conn]struct{}{}, bySource: map[netip.Addr]int{}}
	g.metrics = guardMetrics{
		open: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "accelnet", Subsystem: subsystem, Name: "connections",
			Help: "Connections the listener holds."}, func() float64 { return float64(g.Open()) }),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "accelnet", Subsystem: subsystem, Name: "connections_refused_total",
			Help: "New connections closed at once: the listener (limit=listener) or their source address (limit=source) held as many as it may, none of them anonymous and idle."}, []string{"limit"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "accelnet", Subsystem: subsystem, Name: "connections_evicted_total",
			Help: "Idle anonymous connections closed to make room for a new one."}),
	}
	if reg != nil {
		reg.MustRegister(g.metrics.open, g.metrics.refused, g.metrics.evicted)
	}
	return g
}

// Open is how many connections the guard holds.
func (g *Guard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// Accept returns the next connection within the limits. Errors are the
// inner listener's (http.Server retries temporary ones, such as running
// out of file descriptors, with a backoff).
func (g *Guard) Accept() (net.Conn, error) {
	for {
		nc, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := g.admit(nc); c != nil {
			return c, nil
		}
	}
}

// admit takes nc in, closing an idle anonymous connection to make room if
// a limit is reached, or closes nc and returns nil.
func (g *Guard) admit(nc net.Conn) *conn {
	src := sourceOf(nc.RemoteAddr())
	c := &conn{Conn: nc, g: g, src: src}
	c.touch()
	g.mu.Lock()
	var victim *conn
	limit := ""
	switch {
	case g.bySource[src] >= g.lim.MaxPerSource:
		limit = "source"
		victim = g.evictableLocked(func(o *conn) bool { return o.src == src })
	case len(g.conns) >= g.lim.MaxConns:
		limit = "listener"
		victim = g.evictableLocked(nil)
	}
	// Counted before the close: whoever sees the connection closed sees
	// it counted.
	if limit != "" && victim == nil {
		g.mu.Unlock()
		g.metrics.refused.WithLabelValues(limit).Inc()
		nc.Close()
		g.logRefusal(limit, src)
		return nil
	}
	if victim != nil {
		g.forgetLocked(victim)
	}
	g.conns[c] = struct{}{}
	g.bySource[src]++
	g.mu.Unlock()
	if victim != nil {
		g.metrics.evicted.Inc()
		victim.Conn.Close() // outside the lock: closing may block on TLS
	}
	return c
}

// logRefusal logs refusals at most once every 10 seconds (a flood would
// otherwise flood the log).
func (g *Guard) logRefusal(limit string, src netip.Addr) {
	now := time.Now().UnixNano()
	last := g.refusedLogged.Load()
	if now-last < int64(10*time.Second) || !g.refusedLogged.CompareAndSwap(last, now) {
		return
	}
	max := g.lim.MaxConns
	if limit == "source" {
		max = g.lim.MaxPerSource
	}
	g.log.Warn("connections refused: limit reached and no idle anonymous connection to close (logged at most every 10 s; see accelnet_*_connections_refused_total)",
		"limit", limit, "max", max, "source", src.String())
}

// evictableLocked is the anonymous, idle connection (among those match
// takes; nil: all) that was active longest ago, or nil.
func (g *Guard) evictableLocked(match func(*conn) bool) *conn {
	var best *conn
	var bestAt int64
	for c := range g.conns {
		if c.trusted.Load() || c.busy.Load() > 0 || match != nil && !match(c) {
			continue
		}
		if at := c.active.Load(); best == nil || at < bestAt {
			best, bestAt = c, at
		}
	}
	return best
}

func (g *Guard) forgetLocked(c *conn) {
	if _, ok := g.conns[c]; !ok {
		return
	}
	delete(g.conns, c)
	if g.bySource[c.src]--; g.bySource[c.src] <= 0 {
		delete(g.bySource, c.src)
	}
}

func sourceOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// conn is a guarded connection.
type conn struct {
	net.Conn
	g   *Guard
	src netip.Addr
	// trusted: a request on it showed a valid credential.
	trusted atomic.Bool
	// busy counts its requests in a handler that are not long holds.
	busy atomic.Int32
	// active is when it was last active (Unix nanoseconds).
	active    atomic.Int64
	closeOnce sync.Once
}

func (c *conn) touch() { c.active.Store(time.Now().UnixNano()) }

func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.g.mu.Lock()
		c.g.forgetLocked(c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

type connKey struct{}

// Attach makes srv's connections known to their requests (Trust,
// LongHold) and marks each request busy while its handler runs. Call it
// before serving srv on g.
func (g *Guard) Attach(srv *http.Server) {
	inner := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, nc net.Conn) context.Context {
		if inner != nil {
			ctx = inner(ctx, nc)
		}
		if tc, ok := nc.(*tls.Conn); ok {
			nc = tc.NetConn()
		}
		if c, ok := nc.(*conn); ok {
			ctx = context.WithValue(ctx, connKey{}, c)
		}
		return ctx
	}
	h := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*conn); ok {
			c.busy.Add(1)
			c.touch()
			defer func() { c.touch(); c.busy.Add(-1) }()
		}
		h.ServeHTTP(w, r)
	})
}

// Trust marks the connection of the request with ctx as carrying a valid
// credential: it is never closed to make room for another.
func Trust(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*conn); ok {
		c.trusted.Store(true)
	}
}

// LongHold says the request with ctx holds its connection open for long
// (an event stream): until done is called, an anonymous connection held
// so may be closed to make room as if it were idle.
func LongHold(ctx context.Context) (done func()) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return func() {}
	}
	c.busy.Add(-1)
	var once sync.Once
	return func() { once.Do(func() { c.busy.Add(1) }) }
}
