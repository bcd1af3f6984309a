// Package northbound is accelnet's REST API (gin): the fabric's topology with
// live link load, what each switch has programmed, health, and metrics.
package northbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/web"
)

// Fabric is what the API needs from the controller.
type Fabric interface {
	Snapshot() (*topology.Snapshot, int64)
	Status() map[models.SwitchID]controller.SwitchStatus
	LinkLoad(models.Link) controller.LinkLoad
	PortLoad(models.Endpoint) (controller.PortLoad, bool)
	Ready() error
	Drained() ([]models.SwitchID, map[models.LinkID]bool)
	Dampened() []models.LinkID
	LinkDiscovery() (map[models.LinkID]controller.LinkDiscovery, []string)
}

// EntryReader reads back what a switch has programmed.
type EntryReader interface {
	Read(ctx context.Context, sw models.SwitchID) (models.ForwardingState, error)
}

// Options configure the API.
type Options struct {
	Fabric  Fabric
	Auth    *controller.Auth
	Intents *controller.Intents
	Events  *controller.Events
	Drains  *controller.Drains
	// RateLimit is requests per second per token (burst twice that);
	// default 2000, negative means unlimited.
	RateLimit float64
	Entries   EntryReader
	Gatherer  prometheus.Gatherer
	// Mounts are extra handlers served under their path prefixes (for
	// example fabricsim's control API under /sim/v1/).
	Mounts map[string]http.Handler
	Logger *slog.Logger
	// ReadTimeout bounds a switch read-back; default 5s.
	ReadTimeout time.Duration
	// StreamInterval is how often /api/v1/stream sends the topology; default 1s.
	StreamInterval time.Duration
	// Done, when closed, ends open streams (for a prompt shutdown).
	Done <-chan struct{}
	// Leader, if set, says who leads: a follower passes requests only
	// the leader can serve (decisions, capacity, tenants' usage, switch
	// read-backs) to it, over ForwardTransport (nil: the default).
	Leader           LeaderInfo
	ForwardTransport http.RoundTripper
}

// Problem is an RFC 9457 problem document, with accelnet's extension
// members: field errors, and for a refused intent where it did not fit
// (and the stored Rejected intent).
type Problem struct {
	Type       string              `json:"type"`
	Title      string              `json:"title"`
	Status     int                 `json:"status"`
	Detail     string              `json:"detail,omitempty"`
	Errors     []models.FieldError `json:"errors,omitempty"`
	Bottleneck string              `json:"bottleneck,omitempty"`
	FreeGbps   *float64            `json:"free_gbps,omitempty"`
	Intent     *models.Intent      `json:"intent,omitempty"`
}

func problem(c *gin.Context, status int, detail string) {
	writeProblem(c, Problem{Status: status, Detail: detail})
}

func writeProblem(c *gin.Context, p Problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	p.Title = http.StatusText(p.Status)
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	c.Abort()
	c.Data(p.Status, "application/problem+json", body)
}

// New returns the API's HTTP handler.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 5 * time.Second
	}
	if opts.StreamInterval <= 0 {
		opts.StreamInterval = time.Second
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = 2000
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		opts.Logger.Error("handler panicked", "path", c.Request.URL.Path, "err", err)
		problem(c, http.StatusInternalServerError, "internal error")
	}))
	r.NoRoute(func(c *gin.Context) { problem(c, http.StatusNotFound, "no such endpoint: "+c.Request.URL.Path) })
	r.HandleMethodNotAllowed = true
	r.NoMethod(func(c *gin.Context) { problem(c, http.StatusMethodNotAllowed, c.Request.Method+" is not allowed here") })

	a := &api{opts: opts, done: opts.Done, limiter: newLimiter(opts.RateLimit)}
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", a.ready)
	if opts.Gatherer != nil {
		r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})))
	}
	v1 := r.Group("/api/v1", a.forward)
	// The fabric's shape and load carry no tenant's data: readable
	// without a token, as the dashboard does before anyone logs in.
	v1.GET("/topology", a.topology)
	v1.GET("/stream", a.stream)
	v1.GET("/openapi.json", serveOpenAPI)
	authed := v1.Group("", a.authenticate)
	authed.GET("/whoami", a.whoami)
	authed.POST("/intents", a.createIntent)
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
	dashboard := gin.WrapH(web.Handler())
	for _, path := range []string{"/", "/index.html", "/app.js", "/style.css"} {
		r.GET(path, dashboard)
	}
	for prefix, h := range opts.Mounts {
		r.Any(prefix+"*rest", gin.WrapH(h))
	}
	return r
}

type api struct {
	opts    Options
	done    <-chan struct{}
	limiter *limiter
}

// ready answers 200 once this replica can serve: as leader, every switch
// in sync; as follower, the state followed and a leader known. It says
// which role the replica has and who leads.
func (a *api) ready(c *gin.Context) {
	body := gin.H{"status": "ready"}
	if a.opts.Leader != nil {
		leader, self := a.opts.Leader.Leader()
		body["role"], body["leader"] = "follower", leader
		if self {
			body["role"] = "leader"
		}
	}
	code := http.StatusOK
	if err := a.opts.Fabric.Ready(); err != nil {
		body["status"], body["reason"] = "not ready", err.Error()
		code = http.StatusServiceUnavailable
	}
	c.JSON(code, body)
}

// Topology response types.
type (
	TopologyView struct {
		Name     string       `json:"name,omitempty"`
		Revision int64        `json:"revision"`
		Switches []SwitchView `json:"switches"`
		Links    []LinkView   `json:"links"`
		Hosts    []HostView   `json:"hosts"`
		// UndeclaredLinks are links discovery hears where the topology
		// declares none ("leaf1:9 <-> spine3:1").
		UndeclaredLinks []string `json:"undeclared_links,omitempty"`
	}
	SwitchView struct {
		models.Switch
		Status  *controller.SwitchStatus `json:"status,omitempty"`
		Drained bool                     `json:"drained,omitempty"`
	}
	LinkView struct {
		ID   models.LinkID       `json:"id"`
		A    models.Endpoint     `json:"a"`
		B    models.Endpoint     `json:"b"`
		Gbps float64             `json:"gbps"`
		Load controller.LinkLoad `json:"load"`
		// Drained: an operator took it out of service; Dampened: it
		// flapped and is kept out of routes until it settles.
		Drained  bool `json:"drained,omitempty"`
		Dampened bool `json:"dampened,omitempty"`
		// Discovery is what link discovery's probes say of it (absent
		// until probes run): a miswired link carries no routes.
		Discovery *controller.LinkDiscovery `json:"discovery,omitempty"`
	}
	HostView struct {
		models.Host
		TxBps float64 `json:"tx_bps"` // into the fabric (leaf port in)
		RxBps float64 `json:"rx_bps"` // out of the fabric (leaf port out)
	}
)

func (a *api) topology(c *gin.Context) {
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
func (a *api) stream(c *gin.Context) {
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
func (a *api) view() (TopologyView, bool) {
	snap, rev := a.opts.Fabric.Snapshot()
	if snap == nil {
		return TopologyView{}, false
	}
	status := a.opts.Fabric.Status()
	drainedSw, drainedLinks := a.opts.Fabric.Drained()
	dampened := a.opts.Fabric.Dampened()
	v := TopologyView{Name: snap.Name(), Revision: rev, Switches: []SwitchView{}, Links: []LinkView{}, Hosts: []HostView{}}
	for _, sw := range snap.Switches() {
		sv := SwitchView{Switch: sw, Drained: slices.Contains(drainedSw, sw.Name)}
		if st, ok := status[sw.Name]; ok {
			sv.Status = &st
		}
		v.Switches = append(v.Switches, sv)
	}
	disc, undeclared := a.opts.Fabric.LinkDiscovery()
	v.UndeclaredLinks = undeclared
	for _, l := range snap.Links() {
		lv := LinkView{ID: l.ID(), A: l.A, B: l.B, Gbps: l.Gbps, Load: a.opts.Fabric.LinkLoad(l),
			Drained: drainedLinks[l.ID()], Dampened: slices.Contains(dampened, l.ID())}
		if d, ok := disc[l.ID()]; ok {
			lv.Discovery = &d
		}
		v.Links = append(v.Links, lv)
	}
	for _, h := range snap.Hosts() {
		hv := HostView{Host: h}
		if pl, ok := a.opts.Fabric.PortLoad(h.Attach); ok {
			hv.TxBps, hv.RxBps = pl.InBps, pl.OutBps
		}
		v.Hosts = append(v.Hosts, hv)
	}
	return v, true
}

// EntriesView is a switch's programmed state as read back.
type EntriesView struct {
	Switch  models.SwitchID        `json:"switch"`
	Entries models.ForwardingState `json:"entries"`
	Counts  map[string]int         `json:"counts"`
}

func (a *api) entries(c *gin.Context) {
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
	c.JSON(http.StatusOK, EntriesView{Switch: name, Entries: st, Counts: map[string]int{
		"members": len(st.Members), "groups": len(st.Groups), "routes": len(st.Routes), "flow_pins": len(st.FlowPins),
	}})
}
