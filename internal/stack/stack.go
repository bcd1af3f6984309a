// Package stack wires accelnet's parts into one running system: etcd
// (embedded or external), optionally an emulated fabric, the P4Runtime
// driver, the controller and the REST API. `accelnet demo`, `accelnet serve`
// and the test harness all build on it, so they run the same code.
package stack

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/northbound"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/embedded"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/accelnet/accelnet/topology"
)

// Etcd is where the state is kept: an external cluster or an
// embedded one.
type Etcd struct {
	// Endpoints selects an external etcd cluster; empty means embedded
	// etcd in Dir.
	Endpoints []string
	Dir       string
	// TLS is what the client presents to and trusts of the etcd at
	// Endpoints (nothing named: plaintext). An embedded etcd always takes
	// TLS with the certificates in its directory.
	TLS pki.Files
	// MaxTxnOps is the etcd cluster's --max-txn-ops (default 128 for an
	// external cluster; the embedded one allows more).
	MaxTxnOps int
}

// Elephants is how the leaves sample RoCEv2 packets and how measured
// flows are pinned.
type Elephants struct {
	// ObserveInterval is how often installed intents' pin counters are
	// read for their observed rate; default 5s (a read per source leaf of
	// every installed intent's counters: at tens of thousands of intents,
	// reading each second would cost more than admitting them).
	ObserveInterval time.Duration
	// SampleOneIn makes every leaf sample 1 in SampleOneIn RoCEv2 packets
	// its hosts send (0: no sampling); flows estimated at Gbps or more
	// (default DefaultElephantGbps) are pinned on paths chosen together.
	SampleOneIn uint32
	Gbps        float64
}

// Config is everything a Stack runs with, from the command line's flags (cmd/accelnet
// binds them to these fields) or a test harness. A zero size, count or
// timeout takes its default; a zero interval of something that can be
// off (discovery, liveness, congestion weights, sampling) turns it off,
// as its flag's 0 does: the defaults of those are the command line's.
type Config struct {
	// Topology, if set, is written to etcd at start (replacing what is
	// there). With Emulate it is the fabric fabricsim serves.
	Topology *models.Topology
	// Emulate runs fabricsim for Topology on loopback and programs it.
	Emulate bool
	// Etcd is where the state is kept.
	Etcd Etcd
	// CounterInterval is fabricsim's counter tick; TelemetryInterval the
	// controller's gNMI sample interval.
	CounterInterval   time.Duration
	TelemetryInterval time.Duration
	// Latency is the fixed cost of a hop latency figures assume beside
	// its queue (controller/latency.go).
	Latency        telemetry.LatencyModel
	ResyncInterval time.Duration
	// Workers reconcile switches in parallel, per kind of work (tables,
	// interface config, sampling); default 4.
	Workers int
	// SweepWorkers reconcile switches' tables in parallel during a new
	// term's first read-back of every switch; default 16 (at least
	// Workers).
	SweepWorkers int
	// TakeoverReadAll makes a new term read every switch back in full and
	// keeps no handover marks (by default a switch the previous term left
	// as its mark says is probed, not read: controller/handover.go).
	TakeoverReadAll bool
	// PerLeafRoutes turns route aggregation off (pathcalc.Limits).
	PerLeafRoutes bool
	// AdvertiseURL is this replica's API as other replicas reach it: the
	// value it campaigns with, where followers forward writes. Set it
	// here or with Stack.Advertise before Run.
	AdvertiseURL string
	// ElectionTTL is the leader's etcd lease: when a leader dies without
	// resigning, a follower takes over once it expires. Default 2s; etcd
	// raises it to its minimum (see election.NewLeadership).
	ElectionTTL time.Duration
	// LeaseOnlyFailover turns off the watch followers keep on the leader
	// (election.AlivePath): with it, a leader whose process is gone is
	// replaced only when its lease expires, not as soon as its address
	// refuses connections.
	LeaseOnlyFailover bool
	// CongestionInterval is how often measured link load biases WCMP
	// weights away from hot links; 0: never.
	CongestionInterval time.Duration
	// OnOtherFabric, if set, is told what etcd holds (intents, drains)
	// over a stored topology that Topology is another fabric than, before
	// it is replaced; its error stops the start. (Another fabric: other
	// switches, links or hosts. Addresses alone, as an emulated fabric's
	// ports change at every start, are the same fabric.)
	OnOtherFabric func(OtherFabric) error
	// KeepForeignEntries leaves alone the entries of accelnet's tables the
	// controller did not write (default: remove them as drift).
	KeepForeignEntries bool
	// SouthboundTLS secures P4Runtime and gNMI to the switches (none
	// named: plaintext); EmulatorTLS makes the emulated switches serve TLS.
	SouthboundTLS pki.Files
	EmulatorTLS   *tls.Config
	// ForwardTransport carries forwarded requests to the leader (TLS);
	// nil: http.DefaultTransport.
	ForwardTransport http.RoundTripper
	// Intents is how intents are admitted, kept and moved.
	Intents intents.Policy
	// HistoryInterval is how often the API keeps every link's and
	// switch's load for /api/v1/history (default 5s; 15 minutes kept).
	HistoryInterval time.Duration
	// OperatorTokenFile is where the first operator token is written on
	// the first start (mode 0600); empty: not written, only returned.
	// OperatorTokenGiven, if set, is the first operator token's secret
	// (a deployment's own, from its secret store): registered on the
	// first start, written nowhere.
	OperatorTokenFile, OperatorTokenGiven string
	// MTU is the fabric profile's interface MTU pushed over gNMI; default 4200.
	MTU uint16
	// FlapHalfLife is how fast a flapping link's penalty decays (default
	// 10s): two failures close together keep a link out of routes until
	// it has been stable for about a half-life and a half.
	FlapHalfLife time.Duration
	// Elephants is how flows are sampled, measured and pinned.
	Elephants Elephants
	// DiscoveryInterval is how often link discovery probes every fabric
	// port (LLDP packet-outs); 0: no discovery (DefaultDiscoveryInterval
	// is the command line's default).
	DiscoveryInterval time.Duration
	// LivenessInterval is how often the fabric link ends on switches
	// that report no oper-status (no gNMI address) are probed, to find a
	// cut link within four of them; 0: off (the command line's default
	// is controller.DefaultLivenessInterval).
	LivenessInterval time.Duration
	// ProbeRate is how many latency probes a second the leader sends
	// between leaves (the pingmesh); 0: none (the command line's default
	// is controller.DefaultProbeRate).
	ProbeRate int
	// APIRateLimit is requests per second per token (burst twice that);
	// 0 means the default, negative means unlimited.
	APIRateLimit float64
	Logger       *slog.Logger
}

// Defaults of Config that the stack applies itself (the command line
// shows the same).
const (
	DefaultElectionTTL       = 2 * time.Second
	DefaultObserveInterval   = 5 * time.Second
	DefaultDiscoveryInterval = 5 * time.Second
	DefaultElephantGbps      = 10
)

// Validate reports unusable options.
func (o Config) Validate() error {
	if o.Emulate && o.Topology == nil {
		return errors.New("stack: emulating a fabric needs a topology")
	}
	if len(o.Etcd.Endpoints) == 0 && o.Etcd.Dir == "" {
		return errors.New("stack: need etcd endpoints or a data directory for embedded etcd")
	}
	return nil
}

// Stack is a running accelnet.
type Stack struct {
	Embedded *embedded.Server // nil with an external etcd
	Etcd     *clientv3.Client
	// EtcdEndpoints and EtcdTLS are where and with what a client
	// reaches this replica's etcd (another replica joining it uses the
	// same); Etcd itself is in-process with an embedded etcd.
	EtcdEndpoints []string
	EtcdTLS       pki.Files
	Store         *store.Store
	Fabric        *fabricsim.Fabric // nil unless emulating
	Driver        *southbound.P4RT
	Controller    *controller.Controller
	Auth          *tenancy.Auth
	Intents       *intents.Manager
	Events        *intents.Events
	Drains        *controller.Drains
	Leadership    *election.Leadership
	// Elephants finds undeclared heavy flows from sampled packets (nil
	// without sampling).
	Elephants *intents.Elephants
	// OperatorToken is the operator secret issued on this first start
	// ("" on later starts): show it once.
	OperatorToken string
	Registry      *prometheus.Registry
	Handler       http.Handler

	log             *slog.Logger
	observeInterval time.Duration
	gnmiConfig      *southbound.GNMIConfig // its connections close when Run ends
	stopAPI         chan struct{}          // closed when Run ends (or at Close), to end the API's open streams and sampling
	stopAPIOnce     sync.Once
	apiBackground   sync.WaitGroup // the API's goroutines, which end with stopAPI
}

// endAPI ends the API's open streams and its history sampling, and
// waits for the sampling to end.
func (s *Stack) endAPI() {
	s.stopAPIOnce.Do(func() { close(s.stopAPI) })
	s.apiBackground.Wait()
}

// New starts etcd (if embedded), binds the emulated switches (if any),
// stores the topology, and builds the controller and API. Run starts them.
// On error everything already started is closed.
func New(ctx context.Context, opts Config) (_ *Stack, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Elephants.ObserveInterval <= 0 {
		opts.Elephants.ObserveInterval = DefaultObserveInterval
	}
	s := &Stack{log: opts.Logger, Registry: prometheus.NewRegistry(), stopAPI: make(chan struct{}), observeInterval: opts.Elephants.ObserveInterval}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := s.connectEtcd(&opts); err != nil {
		return nil, err
	}
	if err := s.storeTopology(ctx, &opts); err != nil {
		return nil, err
	}
	schema, err := p4.LoadSchema()
	if err != nil {
		return nil, err
	}
	w := &wiring{schema: schema, lim: schema.Limits(), maxOps: opts.Etcd.MaxTxnOps}
	if w.maxOps <= 0 && s.Embedded != nil {
		w.maxOps = embedded.MaxTxnOps
	}
	if err := s.newDriver(&opts, w); err != nil {
		return nil, err
	}
	if err := s.newIntents(ctx, opts, w); err != nil {
		return nil, err
	}
	if err := s.newController(opts, w); err != nil {
		return nil, err
	}
	s.newAPI(opts)
	return s, nil
}

// wiring is what New's steps hand one another: the P4 program's schema
// and limits, etcd's transaction size, the southbound dialer, and the
// controller, which the parts built before it reach through ctrl once it
// exists (the driver's and the intents' callbacks).
type wiring struct {
	schema    *p4.Schema
	lim       p4.Limits
	maxOps    int
	dialer    *southbound.Dialer
	ctrl      lateController
	detected  func() []intents.DetectedFlow
	onSamples func(models.SwitchID, []models.FlowSample)
}

// connectEtcd starts the embedded etcd (no endpoints given) or reaches
// the cluster, and campaigns through it.
func (s *Stack) connectEtcd(opts *Config) (err error) {
	endpoints := opts.Etcd.Endpoints
	s.EtcdTLS = opts.Etcd.TLS
	if len(endpoints) == 0 {
		start := time.Now()
		if s.Embedded, err = embedded.Start(opts.Etcd.Dir, "", s.log); err != nil {
			return err
		}
		endpoints, s.EtcdTLS = s.Embedded.Endpoints, s.Embedded.Client
		s.log.Info("embedded etcd ready", "dir", opts.Etcd.Dir, "endpoints", endpoints, "tls", "client certificates in "+filepath.Join(opts.Etcd.Dir, embedded.PKIDir),
			"took", time.Since(start).Round(time.Millisecond))
	}
	s.EtcdEndpoints = endpoints
	if s.Embedded != nil {
		s.Etcd = s.Embedded.InProcess() // no TLS to set up for it
	} else if s.Etcd, err = DialEtcd(endpoints, s.EtcdTLS); err != nil {
		return err
	}
	s.Store = store.NewStore(s.Etcd, 5*time.Second)
	if opts.ElectionTTL <= 0 {
		opts.ElectionTTL = DefaultElectionTTL
	}
	s.Leadership = election.NewLeadership(s.Etcd, opts.AdvertiseURL, opts.ElectionTTL, s.log.With("component", "leader"), s.Registry)
	if !opts.LeaseOnlyFailover {
		s.Leadership.WatchLeader(opts.ForwardTransport)
	}
	return nil
}

// DialEtcd connects a client to an etcd cluster, over TLS made of files
// (none given: plaintext).
func DialEtcd(endpoints []string, files pki.Files) (*clientv3.Client, error) {
	var cfg *tls.Config
	if files.Enabled() {
		var err error
		if cfg, err = files.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd %w", err)
		}
	}
	return store.Dial(endpoints, cfg)
}

// storeTopology binds the emulated switches (Emulate) and stores the
// topology unless etcd holds the same one.
func (s *Stack) storeTopology(ctx context.Context, opts *Config) (err error) {
	if opts.Emulate {
		s.Fabric, err = fabricsim.New(fabricsim.Options{
			Topology:        *opts.Topology,
			CounterInterval: opts.CounterInterval,
			TLS:             opts.EmulatorTLS,
			Logger:          s.log.With("component", "fabricsim"),
		})
		if err != nil {
			return err
		}
		t := s.Fabric.Topology()
		opts.Topology = &t
	}
	if opts.Topology == nil {
		return nil
	}
	// Replicas started with the same file store it once: rewriting an
	// identical topology would only make the leader replan.
	stored, _, _, err := s.Store.Topology(ctx)
	if err != nil && !errors.Is(err, store.ErrNoTopology) {
		return fmt.Errorf("read stored topology: %w", err)
	}
	if err == nil && opts.OnOtherFabric != nil && !sameFabric(stored, *opts.Topology) {
		other, err := otherFabric(ctx, s.Store, stored, *opts.Topology)
		if err != nil {
			return fmt.Errorf("read the stored state: %w", err)
		}
		if other.Any() {
			if err := opts.OnOtherFabric(other); err != nil {
				return err
			}
		}
	}
	if err != nil || !sameJSON(stored, *opts.Topology) {
		if _, err = s.Store.PutTopology(ctx, *opts.Topology, -1); err != nil {
			return fmt.Errorf("store topology: %w", err)
		}
	}
	return nil
}

// newDriver builds the P4Runtime driver and, with sampling, the
// elephant detector its samples go to.
func (s *Stack) newDriver(opts *Config, w *wiring) (err error) {
	w.dialer = &southbound.Dialer{Metrics: southbound.NewRPCMetrics(s.Registry)}
	if opts.SouthboundTLS.Enabled() {
		if w.dialer.TLS, err = opts.SouthboundTLS.ClientConfig(); err != nil {
			return fmt.Errorf("southbound %w", err)
		}
	}
	if opts.Elephants.SampleOneIn > 0 {
		if opts.Elephants.Gbps <= 0 {
			opts.Elephants.Gbps = DefaultElephantGbps
		}
		s.Elephants = intents.NewElephants(opts.Elephants.SampleOneIn, opts.Elephants.Gbps, s.Registry)
		w.detected, w.onSamples = s.Elephants.Detected, s.Elephants.Observe
	}
	ctrl := &w.ctrl
	s.Driver = southbound.NewP4RT(w.schema, southbound.P4RTOptions{
		Dialer:       w.dialer,
		KeepForeign:  opts.KeepForeignEntries,
		Resolve:      ctrl.resolve,
		OnDisconnect: func(id models.SwitchID) { ctrl.do(func(c *controller.Controller) { c.Resync(id) }) },
		OnSamples:    w.onSamples,
		OnPacketIn: func(sw models.SwitchID, port uint32, payload []byte) {
			ctrl.do(func(c *controller.Controller) { c.PacketIn(sw, port, payload) })
		},
		Logger: s.log.With("component", "p4runtime"),
	})
	s.Driver.SetElectionID(0) // until this replica leads
	return nil
}

// newIntents builds tenancy, the intents' events and manager, and
// issues the first operator token on a first start.
func (s *Stack) newIntents(ctx context.Context, opts Config, w *wiring) (err error) {
	ctrl := &w.ctrl
	s.Auth = tenancy.NewAuth(s.Store)
	s.Events = intents.NewEvents(s.Store)
	s.Intents, err = intents.New(intents.Config{
		Store:          s.Store,
		Auth:           s.Auth,
		Policy:         opts.Intents,
		MaxTxnOps:      w.maxOps,
		FlowPinEntries: w.lim.FlowPinEntries,
		OnPins: func(sws []models.SwitchID) {
			ctrl.do(func(c *controller.Controller) {
				for _, sw := range sws {
					c.Enqueue(sw)
				}
			})
		},
		Utilization:       ctrl.utilization,
		RecentUtilization: ctrl.recentUtilization,
		Swept:             ctrl.triedAll,
		Detected:          w.detected,
		Leadership:        s.Leadership,
		Logger:            s.log.With("component", "intents"),
		Registerer:        s.Registry,
	})
	if err != nil {
		return err
	}
	if s.Elephants != nil {
		// A pinned elephant's pin counter measures it (read each second):
		// trusted while it is at most three reads old.
		s.Elephants.Measured = s.Intents.MeasuredRate
		s.Elephants.Fresh = 3 * min(s.observeInterval, time.Second)
	}
	if s.OperatorToken, err = s.Auth.BootstrapOperator(ctx, opts.OperatorTokenFile, opts.OperatorTokenGiven); err != nil {
		return fmt.Errorf("issue the first operator token: %w", err)
	}
	return nil
}

// newController builds the reconcilers over the driver, gNMI and the
// intents' overlay, and the drains beside them.
func (s *Stack) newController(opts Config, w *wiring) error {
	gnmiCfg := &southbound.GNMIConfig{Resolve: w.ctrl.resolve, Dialer: w.dialer}
	s.gnmiConfig = gnmiCfg
	gnmiCfg.SetElectionID(0) // until this replica leads
	var marks controller.MarkStore
	if !opts.TakeoverReadAll && !opts.KeepForeignEntries { // foreign entries are known only from full reads
		marks = s.Store.Marks(w.maxOps)
	}
	overlay := s.Intents.Overlay()
	lim := w.lim
	c, err := controller.New(controller.Config{
		Marks: marks,
		Can: controller.Capabilities{Sampler: s.Driver, PinReader: s.Driver, Prober: s.Driver,
			Elections: []controller.ElectionSetter{s.Driver, gnmiCfg}, PinsDelta: overlay, Unsettled: overlay},
		Foreign:            s.Store.Foreign(),
		HostMACs:           s.Store.HostMACs(),
		Overlay:            overlay,
		Config:             gnmiCfg,
		Leadership:         s.Leadership,
		Counters:           w.dialer,
		MTU:                opts.MTU,
		Store:              s.Store,
		Driver:             s.Driver,
		Limits:             pathcalc.Limits{RouteEntries: lim.RouteEntries, SelectorSize: lim.SelectorSize, MaxGroupSize: lim.MaxGroupSize, PerLeafRoutes: opts.PerLeafRoutes},
		TelemetryInterval:  opts.TelemetryInterval,
		Latency:            opts.Latency,
		ResyncInterval:     opts.ResyncInterval,
		Workers:            opts.Workers,
		SweepWorkers:       opts.SweepWorkers,
		FlapHalfLife:       opts.FlapHalfLife,
		CongestionInterval: opts.CongestionInterval,
		Packets:            s.Driver,
		Neighbors:          lldpNeighbors{cfg: gnmiCfg},
		DiscoveryInterval:  opts.DiscoveryInterval,
		LivenessInterval:   opts.LivenessInterval,
		ProbeRate:          opts.ProbeRate,
		PinnedLoad:         s.Intents.PinnedLoad,
		ReadAfterPins:      s.Intents.ReadAfterPins,
		PinsPending:        s.Intents.PinsPendingBetween,
		SampleOneIn:        opts.Elephants.SampleOneIn,
		Logger:             s.log.With("component", "controller"),
		Registerer:         s.Registry,
	})
	if err != nil {
		return err
	}
	s.Controller = c
	w.ctrl.c.Store(c)
	s.Drains = controller.NewDrains(s.Store, c, s.Intents)
	return nil
}

// newAPI builds the REST API over the parts.
func (s *Stack) newAPI(opts Config) {
	mounts := map[string]http.Handler{}
	if s.Fabric != nil {
		mounts["/sim/v1/"] = s.Fabric.Handler()
	}
	s.Handler = northbound.New(northbound.Options{
		Fabric:     s.Controller,
		Auth:       s.Auth,
		Intents:    s.Intents,
		Events:     s.Events,
		Drains:     s.Drains,
		RateLimit:  opts.APIRateLimit,
		Entries:    s.Driver,
		Gatherer:   s.Registry,
		Mounts:     mounts,
		Logger:     s.log.With("component", "api"),
		Done:       s.stopAPI,
		Background: &s.apiBackground,
		Leader:     s.Leadership,
		Alive:      s.Leadership.AliveHandler(s.stopAPI),

		HistoryInterval:  opts.HistoryInterval,
		ForwardTransport: opts.ForwardTransport,
	})
}

// Run runs the emulated fabric (if any) and the controller with its parts
// (leadership, tenants, intents, events, drains) until ctx ends or one of
// them fails, which stops the others; every error is returned. The
// controller stops first and drops its switch connections, so the
// emulated switches going away is not mistaken for a failure.
func (s *Stack) Run(ctx context.Context) error {
	fabricCtx, stopFabric := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFabric()
	fabric, fctx := errgroup.WithContext(fabricCtx)
	if s.Fabric != nil {
		fabric.Go(func() error { return s.Fabric.Run(fctx) })
	}
	ctrlCtx, stopCtrl := context.WithCancel(ctx)
	defer stopCtrl()
	defer context.AfterFunc(fctx, stopCtrl)() // the fabric failed: stop the controller too
	parts, pctx := errgroup.WithContext(ctrlCtx)
	parts.Go(func() error { return s.Leadership.Run(pctx) })
	parts.Go(func() error { return s.Auth.Run(pctx) })
	parts.Go(func() error { return s.Intents.Run(pctx) })
	parts.Go(func() error { return s.Events.Run(pctx) })
	parts.Go(func() error { return s.Drains.Run(pctx) })
	parts.Go(func() error { s.Intents.Observe(pctx, s.Driver, s.observeInterval); return nil })
	parts.Go(func() error { return s.Controller.Run(pctx) })
	err := parts.Wait()
	s.endAPI()
	s.Driver.Close()
	s.gnmiConfig.Close()
	stopFabric()
	return errors.Join(err, fabric.Wait())
}

// lateController is the controller once New has built it. The driver and
// the intent manager are built first (the controller needs them), and
// their callbacks reach the controller through here: before it exists,
// which is before Run, they find no topology and enqueue nothing.
type lateController struct {
	c atomic.Pointer[controller.Controller]
}

func (l *lateController) do(f func(*controller.Controller)) {
	if c := l.c.Load(); c != nil {
		f(c)
	}
}

func (l *lateController) snapshot() *topology.Snapshot {
	if c := l.c.Load(); c != nil {
		snap, _ := c.Snapshot()
		return snap
	}
	return nil
}

// triedAll says the controller's first sweep of this term is over.
func (l *lateController) triedAll() bool {
	c := l.c.Load()
	return c != nil && c.TriedAll()
}

// resolve is a switch of the current topology.
func (l *lateController) resolve(id models.SwitchID) (models.Switch, error) {
	snap := l.snapshot()
	if snap == nil {
		return models.Switch{}, store.ErrNoTopology
	}
	return snap.Switch(id)
}

// portLoad is port e's fresh telemetry and its capacity (Gb/s); ok is
// false when either is unknown.
func (l *lateController) portLoad(e models.Endpoint) (telemetry.PortLoad, float64, bool) {
	c := l.c.Load()
	snap := l.snapshot()
	if c == nil || snap == nil || snap.PortGbps(e) <= 0 {
		return telemetry.PortLoad{}, 0, false
	}
	pl, ok := c.PortLoad(e)
	return pl, snap.PortGbps(e), ok && !pl.Stale
}

// utilization is the measured load leaving through port e, over its
// capacity, and whether it is known.
func (l *lateController) utilization(e models.Endpoint) (float64, bool) {
	pl, gbps, ok := l.portLoad(e)
	if !ok {
		return 0, false
	}
	return pl.OutBps / (gbps * 1e9), true
}

// recentUtilization is the load leaving through port e over the last
// sampling interval alone, over its capacity, and when that interval
// began and ended.
func (l *lateController) recentUtilization(e models.Endpoint) (float64, time.Time, time.Time, bool) {
	pl, gbps, ok := l.portLoad(e)
	if !ok || pl.RecentSince.IsZero() {
		return 0, time.Time{}, time.Time{}, false
	}
	return pl.RecentOutBps / (gbps * 1e9), pl.RecentSince, pl.RecentUntil, true
}

// sameFabric says whether two topologies are one fabric: the same
// switches, links and hosts, whatever addresses the switches are at.
func sameFabric(a, b models.Topology) bool {
	strip := func(t models.Topology) models.Topology {
		t.Switches = slices.Clone(t.Switches)
		for i := range t.Switches {
			t.Switches[i].P4RTAddr, t.Switches[i].GNMIAddr = "", ""
		}
		return t
	}
	return sameJSON(strip(a), strip(b))
}

func sameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// Advertise sets the API URL this replica campaigns with (before Run).
func (s *Stack) Advertise(url string) { s.Leadership.SetSelf(url) }

// Close releases what New acquired. Call it after Run returns.
func (s *Stack) Close() {
	s.endAPI()
	if s.Driver != nil {
		s.Driver.Close()
	}
	if s.gnmiConfig != nil {
		s.gnmiConfig.Close()
	}
	if s.Etcd != nil {
		s.Etcd.Close()
	}
	if s.Embedded != nil {
		s.Embedded.Close()
	}
}

// ReserveWorkload turns every flow of an emulated workload into an intent
// of tenant (created if needed), reserving its demand less the headroom:
// what a job launcher that declares its collectives' flows does. It
// returns how many intents were admitted. Flows start on ECMP; the intents
// pin them to placed paths.
func (s *Stack) ReserveWorkload(ctx context.Context, workload string, tenant models.TenantName, headroom float64) (int, error) {
	if s.Fabric == nil {
		return 0, errors.New("stack: no emulated fabric")
	}
	if headroom <= 0 {
		headroom = 0.05
	}
	if _, err := s.Auth.PutTenant(ctx, models.Tenant{Name: tenant}, nil); err != nil {
		return 0, err
	}
	snap, _ := s.Controller.Snapshot()
	if snap == nil {
		return 0, store.ErrNoTopology
	}
	var specs []models.IntentSpec
	for _, f := range s.Fabric.Flows() {
		if f.Workload != workload {
			continue
		}
		src, errS := snap.HostByIP(f.Spec.Src)
		dst, errD := snap.HostByIP(f.Spec.Dst)
		if errS != nil || errD != nil || src.Attach.Switch == dst.Attach.Switch {
			continue // within a leaf nothing to place
		}
		specs = append(specs, models.IntentSpec{
			Name: fmt.Sprintf("%s flow %d", workload, f.ID), Src: src.Name, Dst: dst.Name,
			Gbps:     f.Spec.DemandGbps * (1 - headroom),
			SrcPorts: models.PortRange{First: f.Spec.SrcPort, Last: f.Spec.SrcPort},
		})
	}
	created, err := s.Intents.CreateBatch(ctx, tenant, specs)
	return len(created), err
}

// lldpNeighbors reads switches' LLDP state over gNMI for link discovery:
// a neighbour is named by its system name and interface.
type lldpNeighbors struct{ cfg *southbound.GNMIConfig }

func (n lldpNeighbors) Neighbors(ctx context.Context, sw models.SwitchID) (map[uint32]models.Endpoint, error) {
	got, err := n.cfg.LLDPNeighbors(ctx, sw)
	if errors.Is(err, southbound.ErrNoLLDP) {
		return nil, fmt.Errorf("%w: %v", controller.ErrNoNeighbors, err)
	}
	if err != nil {
		return nil, err
	}
	out := map[uint32]models.Endpoint{}
	for port, nbs := range got {
		for _, nb := range nbs {
			if p, ok := models.PortFromInterface(nb.PortID); ok && nb.SystemName != "" {
				out[port] = models.Endpoint{Switch: models.SwitchID(nb.SystemName), Port: p}
			}
		}
	}
	return out, nil
}
