// Package northbound is accelnet's REST API (gin): the fabric's topology with
// live link load, what each switch has programmed, health, and metrics.
package northbound

import (
	"context"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // /debug/pprof/ (see New)
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/web"
)

// Fabric is what the API needs from the controller.
type Fabric interface {
	Snapshot() (*topology.Snapshot, int64)
	Status() map[models.SwitchID]api.SwitchStatus
	LinkLoad(models.Link) api.LinkLoad
	PortLoad(models.Endpoint) (telemetry.PortLoad, bool)
	Ready() error
	RollingOut() bool
	// HandlingFailure says whether a link failure is being rerouted: the
	// load history skips its rounds meanwhile.
	HandlingFailure() bool
	Drained() ([]models.SwitchID, map[models.LinkID]bool)
	Dampened() []models.LinkID
	LinkDiscovery() (map[models.LinkID]api.LinkDiscovery, []string)
	// Latency between leaves or hosts, and of flows' paths (see
	// controller/latency.go).
	PairLatency(src, dst string, window time.Duration) (api.PairLatency, error)
	LatencyMatrix() (api.LatencyMatrix, error)
	FlowsLatency(paths [][]models.Endpoint, window time.Duration) (models.PathLatency, bool)
}

// EntryReader reads back what a switch has programmed.
type EntryReader interface {
	Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error)
}

// Options configure the API.
type Options struct {
	Fabric  Fabric
	Auth    *tenancy.Auth
	Intents *intents.Manager
	Events  *intents.Events
	Drains  *controller.Drains
	// RateLimit is requests per second per token (burst twice that);
	// default 2000, negative means unlimited.
	RateLimit float64
	Entries   EntryReader
	Gatherer  prometheus.Gatherer
	// Mounts are extra handlers served under their path prefixes to
	// operators only (fabricsim's control API under /sim/v1/).
	Mounts map[string]http.Handler
	Logger *slog.Logger
	// ReadTimeout bounds a switch read-back; default 5s.
	ReadTimeout time.Duration
	// StreamInterval is how often /api/v1/stream sends the topology; default 1s.
	StreamInterval time.Duration
	// HistoryInterval is how often every link's and switch's load is kept
	// for /api/v1/history (default 5s), HistoryLength for how long
	// (default 15 minutes).
	HistoryInterval, HistoryLength time.Duration
	// Done, when closed, ends open streams (for a prompt shutdown).
	Done <-chan struct{}
	// Background is given the goroutines the API runs beside its
	// requests (the history's sampling, kept only with Done and
	// Background set), which end once Done is closed: its owner waits
	// for them.
	Background *sync.WaitGroup
	// Leader, if set, says who leads: a follower passes requests only
	// the leader can serve (decisions, capacity, tenants' usage, switch
	// read-backs) to it, over ForwardTransport (nil: the default).
	Leader           LeaderInfo
	ForwardTransport http.RoundTripper
	// Alive, if set, is served at election.AlivePath, without
	// authentication: followers hold it open to the leader to see its
	// process go (election.Leadership.AliveHandler).
	Alive http.Handler
}

// DefaultRateLimit is Options.RateLimit's default: requests per second
// per token.
const DefaultRateLimit = 2000

// withDefaults is o with every unset option at its default.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.StreamInterval <= 0 {
		o.StreamInterval = time.Second
	}
	if o.RateLimit == 0 {
		o.RateLimit = DefaultRateLimit
	}
	if o.HistoryInterval <= 0 {
		o.HistoryInterval = 5 * time.Second
	}
	if o.HistoryLength <= 0 {
		o.HistoryLength = 15 * time.Minute
	}
	return o
}

// routesV1 serves /api/v1: the fabric's shape and load to anyone, the
// rest to a token, what names every tenant's data to operators.
func (a *server) routesV1(v1 *gin.RouterGroup) {
	// The fabric's shape and load carry no tenant's data: readable
	// without a token, as the dashboard does before anyone logs in (any
	// replica serves them).
	v1.GET("/topology", a.topology)
	v1.GET("/stream", a.stream)
	v1.GET("/history", a.getHistory)
	v1.GET("/latency", a.latency)
	v1.GET("/openapi.json", serveOpenAPI)
	// A follower authenticates before it forwards to the leader, so the
	// limits per token and per client address apply where the client is.
	authed := v1.Group("", a.authenticate, a.forward)
	authed.GET("/whoami", a.whoami)
	authed.POST("/intents", a.createIntent)
	authed.POST("/intents\\:batch", a.createIntents)
	authed.GET("/intents", a.listIntents)
	authed.GET("/intents/:id", a.getIntent)
	authed.PUT("/intents/:id", a.putIntent)
	authed.DELETE("/intents/:id", a.deleteIntent)
	authed.GET("/capacity", a.capacity)
	authed.GET("/events", a.events)
	op := authed.Group("", operatorOnly)
	// Entries name every tenant's flows: operators only.
	op.GET("/switches/:name/entries", a.entries)
	op.POST("/tenants", a.putTenant)
	op.GET("/tenants", a.listTenants)
	op.GET("/tenants/:name", a.getTenant)
	op.DELETE("/tenants/:name", a.deleteTenant)
	op.POST("/tokens", a.createToken)
	op.GET("/tokens", a.listTokens)
	op.DELETE("/tokens/:id", a.deleteToken)
	op.POST("/drains", a.createDrain)
	op.GET("/drains", a.listDrains)
	op.GET("/drains/:id", a.getDrain)
	op.DELETE("/drains/:id", a.deleteDrain)
	// Detected flows name every tenant's hosts: operators only.
	op.GET("/elephants", a.listElephants)
}

// New returns the API's HTTP handler.
func New(opts Options) http.Handler {
	opts = opts.withDefaults()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		opts.Logger.Error("handler panicked", "path", c.Request.URL.Path, "err", err)
		problem(c, http.StatusInternalServerError, "internal error")
	}))
	r.NoRoute(func(c *gin.Context) { problem(c, http.StatusNotFound, "no such endpoint: "+c.Request.URL.Path) })
	r.HandleMethodNotAllowed = true
	r.NoMethod(func(c *gin.Context) { problem(c, http.StatusMethodNotAllowed, c.Request.Method+" is not allowed here") })

	a := &server{opts: opts, done: opts.Done, limiter: tenancy.NewRateLimiter(opts.RateLimit),
		authFailures: tenancy.NewRateLimiter(authFailuresPerSecond),
		history:      &history{interval: opts.HistoryInterval, keep: max(1, int(opts.HistoryLength/opts.HistoryInterval)), series: map[historyKey]*series{}}}
	// History is sampled from the first request on (a handler never
	// served samples nothing) until the API is shut down (Done), in a
	// goroutine of Background's.
	var sampling sync.Once
	if a.done != nil && opts.Background != nil {
		r.Use(func(c *gin.Context) {
			sampling.Do(func() { opts.Background.Go(a.sampleHistory) })
			c.Next()
		})
	}
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", a.ready)
	if opts.Alive != nil {
		// A follower holds it open for the whole term.
		r.GET(election.AlivePath, func(c *gin.Context) {
			defer httpserve.LongHold(c.Request.Context())()
			opts.Alive.ServeHTTP(c.Writer, c.Request)
		})
	}
	if opts.Gatherer != nil {
		r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})))
	}
	a.routesV1(r.Group("/api/v1"))
	// Go's profiler, for this replica (not forwarded): CPU and heap
	// profiles name no tenant's data but cost CPU, so operators only.
	// (net/http/pprof registers its handlers on http.DefaultServeMux.)
	r.GET("/debug/pprof/*rest", a.authenticate, operatorOnly, gin.WrapH(http.DefaultServeMux))
	dashboard := gin.WrapH(web.Handler())
	for _, path := range []string{"/", "/index.html", "/app.js", "/latency.js", "/style.css"} {
		r.GET(path, dashboard)
	}
	for prefix, h := range opts.Mounts {
		// fabricsim's control API takes switches down and shows every
		// tenant's flows: operators only, reads too.
		r.Any(prefix+"*rest", a.authenticate, operatorOnly, gin.WrapH(h))
	}
	return r
}

type server struct {
	opts    Options
	done    <-chan struct{}
	limiter *tenancy.RateLimiter
	// authFailures limits unknown tokens per client address (see
	// authenticate).
	authFailures *tenancy.RateLimiter
	history      *history
}

// ready answers 200 once this replica can serve: as leader, every switch
// in sync; as follower, the state followed (the intents' copy listed)
// and a leader known. It says
// which role the replica has and who leads, and on the leader whether a
// change of routes is being rolled out (accelnet_rollout_in_progress:
// this is cheaper to poll than /metrics at thousands of switches).
func (a *server) ready(c *gin.Context) {
	body := gin.H{"status": "ready"}
	leads := true
	if a.opts.Leader != nil {
		leader, self := a.opts.Leader.Leader()
		body["role"], body["leader"] = "follower", leader
		leads = self
		if self {
			body["role"] = "leader"
		} else if a.opts.Intents != nil {
			// A follower with its copy of the intents placed takes over
			// without placing them first (seconds at 100,000 intents).
			body["intents_placed"] = a.opts.Intents.PlacedForTerm()
		}
	}
	if leads {
		body["rollout_in_progress"] = a.opts.Fabric.RollingOut()
	}
	code := http.StatusOK
	err := a.opts.Fabric.Ready()
	if err == nil && a.opts.Intents != nil {
		err = a.opts.Intents.Ready()
	}
	if err != nil {
		body["status"], body["reason"] = "not ready", err.Error()
		code = http.StatusServiceUnavailable
	}
	c.JSON(code, body)
}
