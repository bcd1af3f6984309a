// Package fabricsim emulates a fabric of P4Runtime/gNMI switches running
// accelnet.p4: each switch serves real P4Runtime and gNMI on its own loopback
// port, and a flow-level dataplane forwards RoCEv2 flows through whatever
// tables the controller installed, shares link capacity max-min fairly, and
// advances port counters with time.
package fabricsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// Options configure a Fabric.
type Options struct {
	// Topology is the fabric to emulate. Switch addresses in it are ignored:
	// each switch listens on ListenHost:0 and Topology() reports the ports.
	Topology models.Topology
	// ListenHost is the address switches listen on; default 127.0.0.1.
	ListenHost string
	// AdvertiseHost, if set, is the host written into the switches'
	// addresses instead of the one they listen on (a container's name
	// when listening on 0.0.0.0).
	AdvertiseHost string
	// CounterInterval is how often each switch's counters are published
	// over gNMI; default 500ms. From 2 s up, the switches publish in
	// groups spread over the interval (counterPhases), not all at once.
	CounterInterval time.Duration
	// TLS, if set, makes every switch serve P4Runtime and gNMI over TLS
	// (with ClientCAs: mutual TLS, client certificates required).
	TLS *tls.Config
	// NoQueueDepths makes the switches serve no queue depths over gNMI, as
	// a switch that does not export them: a subscription to the RDMA
	// queue's avg-queue-len or max-queue-len is refused (NOT_FOUND).
	NoQueueDepths bool
	Logger        *slog.Logger
}

// Switch is one emulated switch.
type Switch struct {
	fabric   *Fabric
	name     models.SwitchID
	deviceID uint64
	lis      net.Listener
	grpc     *grpc.Server
	gnmi     *gnmiServer

	mu          sync.Mutex // guards the fields below
	streams     map[*stream]struct{}
	config      *p4v1.ForwardingPipelineConfig
	saved       *p4v1.ForwardingPipelineConfig
	savedSchema *p4.Schema
	store       *tableStore
	kill        chan struct{} // closed to end every stream (switch down, shutdown)

	down         atomic.Bool
	writeRPCs    atomic.Int64
	writeUpdates atomic.Int64
	lastWrite    atomic.Int64 // unix nanoseconds of the last Write that changed a table
	// tablesGen counts changes of the switch's tables (writes, a new
	// pipeline, a reboot): what is derived from them is redone when it moves.
	tablesGen atomic.Uint64
	// recent are the times of the last writes that changed a table (a
	// ring, under mu), for FirstWriteSince.
	recent     [64]int64
	recentNext int
	packetOuts atomic.Int64
	faults     faults
	// digestLists numbers the digest lists sent (under mu).
	digestLists uint64
}

// Fabric is a set of emulated switches plus the dataplane between them.
type Fabric struct {
	log      *slog.Logger
	snap     *topology.Snapshot
	interval time.Duration
	// noQueueDepths: see Options.NoQueueDepths.
	noQueueDepths bool
	switches      map[models.SwitchID]*Switch
	order         []*Switch
	// onWrite is a test hook (see OnWrite). Not under mu: every Write
	// calls it, and a write must not wait for the dataplane's recompute
	// (which holds mu) as a real switch does not wait for its neighbours.
	onWrite atomic.Pointer[func(models.SwitchID)]

	ready chan struct{} // closed once Run has published the initial state

	dirtyMu sync.Mutex // guards dirty; taken alone, or inside mu or a switch's mu
	dirty   changes

	// linkFault are the injected link failures: a map never changed once
	// stored (SetLinkUp stores a new one under faultMu), so that a link
	// fails without waiting for mu, which a dataplane recomputation holds
	// for tens of milliseconds at k=16 and seconds at k=48: a link that
	// fails is reported down at once, as a switch's port is, and the
	// dataplane takes the fault at its next recomputation.
	linkFault atomic.Pointer[map[models.LinkID]bool]
	faultMu   sync.Mutex    // guards faultLog; stores linkFault
	faultLog  []FaultRecord // the latest injections, for Faults

	neighbors hostNeighbors // the hosts' ARP (hostarp.go)

	mu        sync.Mutex // guards the dataplane state below
	flows     map[uint64]*flowState
	nextFlow  uint64
	workloads map[string]*workload
	nextWork  uint64
	adminDown map[models.Endpoint]bool            // interfaces disabled over gNMI
	cabled    map[models.Endpoint]models.Endpoint // swapped cables: the actual far end
	fibs      map[models.SwitchID]*fib            // compiled tables
	counters  map[models.Endpoint]*portCounters
	portRate  map[models.Endpoint]*portRates
	queued    map[models.Endpoint]*portCounters              // ports whose egress queue is not empty
	pinRate   map[models.SwitchID]map[models.FlowKey]float64 // bits/s through each flow-pin entry
	pinOctets map[models.SwitchID]map[models.FlowKey]float64
	// sampled is each switch's flow_sample ports at a tablesGen (see
	// sampledPortsLocked).
	sampled map[*Switch]sampledPorts
	stats   dataplaneStats
	last    time.Time
	// lastSample is when sampled packets were last emitted (see sample).
	lastSample time.Time
}

// changes are what the next recompute must look at.
type changes struct {
	all      bool // links or switch states changed: trace every flow
	flows    bool // flows were added or removed
	switches map[models.SwitchID]bool
}

func (c changes) any() bool { return c.all || c.flows || len(c.switches) > 0 }

type dataplaneStats struct {
	recomputes    int
	lastRecompute time.Duration
	lastRetraced  int
}

// markDirty records a change for the next recompute. Callers may hold a
// switch's mu or the fabric's mu.
func (f *Fabric) markDirty(sw models.SwitchID, all, flows bool) {
	f.dirtyMu.Lock()
	defer f.dirtyMu.Unlock()
	if f.dirty.switches == nil {
		f.dirty.switches = map[models.SwitchID]bool{}
	}
	if sw != "" {
		f.dirty.switches[sw] = true
	}
	f.dirty.all = f.dirty.all || all
	f.dirty.flows = f.dirty.flows || flows
}

func (f *Fabric) takeDirty() changes {
	f.dirtyMu.Lock()
	defer f.dirtyMu.Unlock()
	c := f.dirty
	f.dirty = changes{}
	return c
}

// New creates the fabric's switches and binds their listeners, so addresses
// are known before Run; it starts no goroutines.
func New(opts Options) (*Fabric, error) {
	snap, err := topology.New(opts.Topology)
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	if opts.ListenHost == "" {
		opts.ListenHost = "127.0.0.1"
	}
	if opts.CounterInterval <= 0 {
		opts.CounterInterval = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Fabric{
		log:           opts.Logger,
		interval:      opts.CounterInterval,
		noQueueDepths: opts.NoQueueDepths,
		switches:      map[models.SwitchID]*Switch{},
		ready:         make(chan struct{}),
		flows:         map[uint64]*flowState{},
		workloads:     map[string]*workload{},
		cabled:        map[models.Endpoint]models.Endpoint{},
		adminDown:     map[models.Endpoint]bool{},
		fibs:          map[models.SwitchID]*fib{},
		counters:      map[models.Endpoint]*portCounters{},
		portRate:      map[models.Endpoint]*portRates{},
		queued:        map[models.Endpoint]*portCounters{},
		pinRate:       map[models.SwitchID]map[models.FlowKey]float64{},
		pinOctets:     map[models.SwitchID]map[models.FlowKey]float64{},
		sampled:       map[*Switch]sampledPorts{},
	}
	f.linkFault.Store(&map[models.LinkID]bool{})
	spec := snap.Spec()
	for i, s := range spec.Switches {
		lis, err := net.Listen("tcp", net.JoinHostPort(opts.ListenHost, "0"))
		if err != nil {
			f.closeListeners()
			return nil, fmt.Errorf("listen for %s: %w", s.Name, err)
		}
		sw := &Switch{
			fabric:   f,
			name:     s.Name,
			deviceID: s.DeviceID,
			lis:      lis,
			streams:  map[*stream]struct{}{},
			kill:     make(chan struct{}),
		}
		sw.gnmi = newGNMIServer(sw, opts.CounterInterval)
		var serverOpts []grpc.ServerOption
		if opts.TLS != nil {
			serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(opts.TLS)))
		}
		sw.grpc = grpc.NewServer(serverOpts...)
		p4v1.RegisterP4RuntimeServer(sw.grpc, &p4rtServer{sw: sw})
		gnmipb.RegisterGNMIServer(sw.grpc, sw.gnmi)
		f.switches[s.Name] = sw
		f.order = append(f.order, sw)
		addr := lis.Addr().String()
		if opts.AdvertiseHost != "" {
			_, port, _ := net.SplitHostPort(addr)
			addr = net.JoinHostPort(opts.AdvertiseHost, port)
		}
		spec.Switches[i].P4RTAddr = addr
		spec.Switches[i].GNMIAddr = addr
		for _, port := range snap.Ports(s.Name) {
			f.counters[models.Endpoint{Switch: s.Name, Port: port}] = &portCounters{}
		}
	}
	if f.snap, err = topology.New(spec); err != nil {
		f.closeListeners()
		return nil, err
	}
	return f, nil
}

func (f *Fabric) closeListeners() {
	for _, sw := range f.order {
		sw.lis.Close()
	}
}

func (f *Fabric) notifyWrite(name models.SwitchID) {
	if fn := f.onWrite.Load(); fn != nil && *fn != nil {
		(*fn)(name)
	}
}

// Topology returns the emulated fabric with each switch's P4Runtime and gNMI
// address filled in (both services share one port per switch).
func (f *Fabric) Topology() models.Topology { return f.snap.Spec() }

// Run serves every switch and runs the dataplane until ctx ends.
func (f *Fabric) Run(ctx context.Context) error {
	// Publish the initial state before serving, so the first client sees
	// every interface.
	f.mu.Lock()
	f.last = time.Now()
	f.mu.Unlock()
	f.markDirty("", true, true)
	f.tick(time.Now())
	close(f.ready)
	var wg sync.WaitGroup
	errs := make(chan error, len(f.order))
	for _, sw := range f.order {
		wg.Go(func() {
			if err := sw.grpc.Serve(sw.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errs <- fmt.Errorf("%s: %w", sw.name, err)
			}
		})
	}
	f.log.Info("fabric up", "name", f.snap.Name(), "switches", len(f.order), "hosts", len(f.snap.Hosts()))
	phases, phase := counterPhases(f.interval, len(f.order)), 0
	ticker := time.NewTicker(f.interval / time.Duration(phases))
	defer ticker.Stop()
	var samples <-chan time.Time // sampled packets go out every sampleEvery
	if f.interval > sampleEvery {
		st := time.NewTicker(sampleEvery)
		defer st.Stop()
		samples = st.C
	}
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errs:
			runErr = err
			break loop
		case now := <-ticker.C:
			phase = (phase + 1) % phases
			f.tickPhase(now, phase, phases)
		case now := <-samples:
			f.sample(now)
		}
	}
	for _, sw := range f.order {
		sw.dropStreams()
		sw.grpc.Stop()
	}
	wg.Wait()
	return runErr
}

// Ready is closed once Run has published every switch's initial state and
// is about to serve.
func (f *Fabric) Ready() <-chan struct{} { return f.ready }

// Switch returns the named switch, or nil.
func (f *Fabric) Switch(name models.SwitchID) *Switch { return f.switches[name] }

// WriteRPCs is the number of Write RPCs every switch accepted so far.
func (f *Fabric) WriteRPCs() (n int64) {
	for _, sw := range f.switches {
		rpcs, _ := sw.WriteStats()
		n += rpcs
	}
	return n
}

// Name is the switch's name.
func (sw *Switch) Name() models.SwitchID { return sw.name }

// Addr is the switch's P4Runtime and gNMI address.
func (sw *Switch) Addr() string { return sw.lis.Addr().String() }

// Entries is the number of entries installed in a table (by P4Info name).
func (sw *Switch) Entries(table string) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store == nil {
		return 0
	}
	return sw.store.count(table)
}

// WriteStats reports how many Write RPCs succeeded validation and how many
// updates they applied since the switch started.
func (sw *Switch) WriteStats() (rpcs, updates int64) {
	return sw.writeRPCs.Load(), sw.writeUpdates.Load()
}

// LastWrite is when a Write last changed this switch's tables (zero if
// never): reaction-time benchmarks measure against it.
func (sw *Switch) LastWrite() time.Time {
	if n := sw.lastWrite.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// WriteDirect applies updates as something other than the controller
// would — another application, an operator's CLI on the box — without
// arbitration: how tests put foreign entries on a switch.
func (sw *Switch) WriteDirect(updates ...*p4v1.Update) error {
	sw.mu.Lock()
	if sw.store == nil {
		sw.mu.Unlock()
		return errors.New("no pipeline set")
	}
	for _, u := range updates {
		if err := sw.store.apply(proto.Clone(u).(*p4v1.Update)); err != nil { // the caller keeps its own
			sw.mu.Unlock()
			return err
		}
	}
	sw.tablesChanged()
	sw.mu.Unlock()
	sw.fabric.notifyWrite(sw.name)
	return nil
}

// TableEntries returns copies of a table's entries (by P4Info name).
func (sw *Switch) TableEntries(table string) []*p4v1.TableEntry {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store == nil {
		return nil
	}
	var out []*p4v1.TableEntry
	for _, e := range sw.store.entries[sw.store.schema.TableID(table)] {
		out = append(out, proto.Clone(e).(*p4v1.TableEntry))
	}
	return out
}

// FirstWriteSince is when the first Write at or after since changed this
// switch's tables (zero if none did, or if more than 64 writes came since).
func (sw *Switch) FirstWriteSince(since time.Time) time.Time {
	if sw.lastWrite.Load() < since.UnixNano() {
		// None since (the last is stored with the ring's newest):
		// without the lock, as a benchmark polling 2,880 switches
		// every 10 ms asks it mostly of switches the change left alone.
		return time.Time{}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	first := int64(0)
	for _, w := range sw.recent {
		if w >= since.UnixNano() && (first == 0 || w < first) {
			first = w
		}
	}
	if first == 0 {
		return time.Time{}
	}
	return time.Unix(0, first)
}

// SetWriteDelay makes every Write wait d before it is processed.
func (sw *Switch) SetWriteDelay(d time.Duration) { sw.faults.writeDelayNanos.Store(int64(d)) }

func (sw *Switch) tablesChanged() {
	sw.tablesGen.Add(1)
	sw.fabric.markDirty(sw.name, false, false)
}

// dropStreams ends every open StreamChannel (and gNMI Subscribe) of the
// switch, as a gRPC disconnect or a reboot does.
func (sw *Switch) dropStreams() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	close(sw.kill)
	sw.kill = make(chan struct{})
}

// killed returns the channel that closes when the switch drops its streams.
func (sw *Switch) killed() <-chan struct{} {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.kill
}
