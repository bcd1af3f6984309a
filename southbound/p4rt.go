// Package southbound talks to switches: a P4Runtime driver that reads and
// writes accelnet.p4's tables (through the P4Info's names), and a gNMI client
// that streams interface counters.
package southbound

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

var (
	// ErrUnavailable means the switch could not be reached.
	ErrUnavailable = errors.New("switch unavailable")
)

// Resolver returns a switch's addresses and device ID.
type Resolver func(models.SwitchID) (models.Switch, error)

// P4RTOptions configure a P4RT driver.
type P4RTOptions struct {
	Resolve Resolver
	// ElectionID is sent in arbitration and every write; the highest wins.
	ElectionID uint64
	// MaxBatch caps updates per WriteRequest; default 1000.
	MaxBatch int
	// ArbitrationTimeout bounds the wait for the switch's answer; default 5s.
	ArbitrationTimeout time.Duration
	// KeepForeign leaves alone the table entries of accelnet's tables that
	// the controller did not write (they lack its tag in the entry
	// metadata): Read does not report them, nor the members and groups
	// they use, so a diff never deletes them; an entry the controller wants
	// under the same key is taken over (modified) rather than inserted.
	// False: such entries are removed like any other drift.
	KeepForeign bool
	// EntryTag is the metadata written into every table entry; default
	// "accelnet". Entries without it are foreign (see KeepForeign).
	EntryTag []byte
	// OnDisconnect is called (from a driver goroutine) when a switch's
	// stream ends after its arbitration went through, or the switch says
	// another controller took the primary role, so the controller can
	// resync it.
	OnDisconnect func(models.SwitchID)
	// OnSamples is called (from a goroutine of the switch's stream, one
	// list at a time) with the packets a switch sampled (see
	// SetSampling); each digest list is acknowledged after it returns.
	// Lists that arrive while digestQueue wait are dropped, and the next
	// list's samples stand for them (models.FlowSample.Stands).
	OnSamples func(models.SwitchID, []models.FlowSample)
	// OnPacketIn is called (from the switch's stream goroutine) with each
	// packet the switch sends its controller and the port it came in on
	// (link discovery's probes).
	OnPacketIn func(sw models.SwitchID, port uint32, payload []byte)
	// Dialer sets TLS and RPC metrics and shares a switch's connection
	// with gNMI; nil: plaintext, no metrics, a connection of its own.
	Dialer *Dialer
	Logger *slog.Logger
}

// P4RT is the P4Runtime driver: one connection and arbitration stream per
// switch, opened on first use and reopened after it breaks.
type P4RT struct {
	opts    P4RTOptions
	schema  *p4.Schema
	wireIDs wireIDs // how a flow pin and a route are named on the wire (p4read.go)
	log     *slog.Logger

	mu       sync.Mutex
	conns    map[models.SwitchID]*p4conn
	dialing  map[models.SwitchID]*pendingDial
	election uint64 // 0: not leading, connect to nothing
	// foreign is, per switch, what its last full Read found that the
	// controller did not write (KeepForeign): INSERTs of these become
	// MODIFYs.
	foreign map[models.SwitchID]foreignKeys
	// pipelines holds, by target, the pipeline a push sends (pipeline).
	pipelines sync.Map
	wg        sync.WaitGroup
}

// foreignKeys are the keys of entries, members and groups the controller
// leaves alone on a switch.
type foreignKeys struct {
	routes  map[netip.Prefix]bool
	pins    map[models.FlowKey]bool
	members map[uint32]bool
	groups  map[uint32]bool
}

// pendingDial is a connection being opened: callers for the same switch
// wait on done instead of dialling again, and nobody holds d.mu while it
// connects, arbitrates and pushes the pipeline (seconds on BMv2).
type pendingDial struct {
	done chan struct{}
	c    *p4conn
	err  error
}

type p4conn struct {
	cc      *grpc.ClientConn
	release func() // gives cc back to the Dialer
	client  p4v1.P4RuntimeClient
	// stream is the arbitration stream; sendMu serializes what is sent
	// on it (digest acks from its reader, packet-outs from anywhere).
	stream   p4v1.P4Runtime_StreamChannelClient
	sendMu   sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{} // closed when the stream ends
	deviceID uint64
	addr     string
	election uint64 // the election ID it arbitrated with
	// digests carries digest lists from the stream's reader to the sample
	// handler; droppedSamples counts those dropped since the last taken.
	digests        chan *digestList
	droppedSamples atomic.Uint64
}

// close ends the arbitration stream and gives the connection back (the
// Dialer closes it once nothing else, such as gNMI, uses it).
func (c *p4conn) close() {
	c.cancel()
	c.release()
}

func (c *p4conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// NewP4RT returns a driver; it connects lazily.
func NewP4RT(schema *p4.Schema, opts P4RTOptions) *P4RT {
	if opts.ElectionID == 0 {
		opts.ElectionID = 1
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	if opts.ArbitrationTimeout <= 0 {
		opts.ArbitrationTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if len(opts.EntryTag) == 0 {
		opts.EntryTag = []byte("accelnet")
	}
	return &P4RT{opts: opts, schema: schema, wireIDs: newWireIDs(schema), log: opts.Logger, conns: map[models.SwitchID]*p4conn{}, dialing: map[models.SwitchID]*pendingDial{},
		election: opts.ElectionID, foreign: map[models.SwitchID]foreignKeys{}}
}

// SetElectionID changes the election ID the driver arbitrates and writes
// with (a new leader's term) and drops every connection, so each switch
// is arbitrated again on next use. Zero stops the driver from connecting
// at all: a replica that does not lead must not arbitrate.
func (d *P4RT) SetElectionID(id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if id == d.election {
		return
	}
	d.election = id
	d.dropLocked()
}

func (d *P4RT) dropLocked() {
	for id, c := range d.conns {
		c.close()
		delete(d.conns, id)
	}
}

// Close drops every connection and waits for the driver's goroutines.
func (d *P4RT) Close() {
	d.mu.Lock()
	d.dropLocked()
	d.mu.Unlock()
	d.wg.Wait()
}

func (d *P4RT) conn(ctx context.Context, id models.SwitchID) (*p4conn, error) {
	sw, err := d.opts.Resolve(id)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if c := d.conns[id]; c != nil {
		if c.alive() && c.addr == sw.P4RTAddr && c.deviceID == sw.DeviceID && c.election == d.election {
			d.mu.Unlock()
			return c, nil
		}
		c.close()
		delete(d.conns, id)
	}
	if sw.P4RTAddr == "" {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s has no P4Runtime address", ErrUnavailable, id)
	}
	if d.election == 0 {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: this replica is not the leader", models.ErrNotPrimary, id)
	}
	if p := d.dialing[id]; p != nil {
		d.mu.Unlock()
		select {
		case <-p.done:
			if p.err != nil {
				return nil, p.err
			}
			return p.c, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, id, ctx.Err())
		}
	}
	p := &pendingDial{done: make(chan struct{})}
	d.dialing[id] = p
	election := d.election
	d.mu.Unlock()

	p.c, p.err = d.dialAgain(ctx, sw, election)
	d.mu.Lock()
	delete(d.dialing, id)
	if p.err == nil {
		if d.election != election { // a new term began meanwhile
			p.c.close()
			p.c, p.err = nil, fmt.Errorf("%w: %s: the election ID changed while connecting", ErrUnavailable, id)
		} else {
			d.conns[id] = p.c
		}
	}
	d.mu.Unlock()
	close(p.done)
	return p.c, p.err
}

// dial connects, arbitrates with electionID, and makes sure the switch
// runs accelnet.p4 (pushing it, with the device config its target
// needs, to a switch with no pipeline or another one). No lock is held:
// conn makes concurrent callers for one switch wait for this one.
// errElectionInUse is a switch refusing an arbitration because a stream
// with the same election ID is still open there: this driver's own
// previous one, when the switch has not yet seen its connection go (a
// cut, a restart of this process).
var errElectionInUse = errors.New("the election ID is held by a stream still open at the switch")

// dialAgain is dial, tried again a few times, 50 ms apart and doubling,
// while the switch still holds this driver's previous stream: it lets
// it go once it sees that stream's connection gone.
func (d *P4RT) dialAgain(ctx context.Context, sw models.Switch, electionID uint64) (*p4conn, error) {
	wait := 50 * time.Millisecond
	for try := 1; ; try++ {
		c, err := d.dial(ctx, sw, electionID)
		if !errors.Is(err, errElectionInUse) || try == 6 {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (d *P4RT) dial(ctx context.Context, sw models.Switch, electionID uint64) (*p4conn, error) {
	pipelineConfig, err := d.pipeline(sw.Target) // a target without one fails here
	if err != nil {
		return nil, err
	}
	cc, release, err := d.opts.Dialer.Conn(sw.P4RTAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %v", ErrUnavailable, sw.Name, sw.P4RTAddr, err)
	}
	election := &p4v1.Uint128{High: 0, Low: electionID}
	client := p4v1.NewP4RuntimeClient(cc)
	streamCtx, cancel := context.WithCancel(context.Background())
	c := &p4conn{cc: cc, release: release, client: client, cancel: cancel, done: make(chan struct{}), deviceID: sw.DeviceID, addr: sw.P4RTAddr, election: electionID,
		digests: make(chan *digestList, digestQueue)}
	fail := func(err error) (*p4conn, error) {
		c.close()
		return nil, err
	}
	// The stream outlives this call, but until arbitration answers, the
	// caller's context bounds it: opening it waits for the transport,
	// which a switch that accepts connections and never answers would
	// hold for gRPC's 20 s connect timeout, whatever the caller's deadline.
	giveUp := context.AfterFunc(ctx, cancel)
	defer giveUp()
	stream, err := client.StreamChannel(streamCtx, grpc.ForceCodec(streamCodec{digestID: d.schema.DigestID(p4.DigestFlowSample)}))
	if err != nil {
		return fail(fmt.Errorf("%w: %s: open stream: %v", ErrUnavailable, sw.Name, err))
	}
	c.stream = stream
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{
		Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: sw.DeviceID, ElectionId: election},
	}}); err != nil {
		return fail(fmt.Errorf("%w: %s: send arbitration: %v", ErrUnavailable, sw.Name, err))
	}
	// What the switch runs, asked while arbitration is answered: a read
	// any client may make, so a new term's dial of each switch waits one
	// round trip, not two (at k=16 with 100,000 intents a pipeline check
	// of its own would be half of a takeover's dialling).
	// A switch with no pipeline yet (fresh or restarted) answers
	// FAILED_PRECONDITION, which means "push it".
	getCtx, stopGet := context.WithCancel(ctx)
	defer stopGet()
	pipeline := make(chan pipelineAnswer, 1)
	go func() {
		resp, err := client.GetForwardingPipelineConfig(getCtx, &p4v1.GetForwardingPipelineConfigRequest{
			DeviceId: sw.DeviceID, ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY})
		pipeline <- pipelineAnswer{resp, err}
	}()
	arb := make(chan error, 1)
	d.wg.Go(func() { d.handleDigests(sw.Name, c) })
	d.wg.Go(func() { d.receive(streamCtx, sw.Name, c, stream, cancel, arb) })
	select {
	case err := <-arb:
		if err != nil {
			return fail(err)
		}
		if !giveUp() { // the stream was given up just as the answer came
			return fail(fmt.Errorf("%w: %s: arbitration: %v", ErrUnavailable, sw.Name, ctx.Err()))
		}
	case <-time.After(d.opts.ArbitrationTimeout):
		return fail(fmt.Errorf("%w: %s: no arbitration answer in %s", ErrUnavailable, sw.Name, d.opts.ArbitrationTimeout))
	case <-ctx.Done():
		return fail(ctx.Err())
	}

	if err := d.ensurePipeline(ctx, sw, cc, election, <-pipeline, pipelineConfig); err != nil { // the answer comes by ctx's end
		return fail(err)
	}
	return c, nil
}

// pipelineAnswer is a switch's answer to GetForwardingPipelineConfig.
type pipelineAnswer struct {
	resp *p4v1.GetForwardingPipelineConfigResponse
	err  error
}

// receive reads c's stream until it ends: the arbitration's first answer
// goes to arb (an error if the stream ended before it), then flow
// samples, packet-ins, and a later arbitration that says another
// controller took the switch.
func (d *P4RT) receive(streamCtx context.Context, name models.SwitchID, c *p4conn, stream grpc.BidiStreamingClient[p4v1.StreamMessageRequest, p4v1.StreamMessageResponse], cancel context.CancelFunc, arb chan<- error) {
	defer close(c.done)
	defer close(c.digests)
	first := true
	var in streamMessage
	for {
		err := stream.RecvMsg(&in)
		if err != nil {
			if first {
				if status.Code(err) == codes.InvalidArgument {
					// As P4Runtime says of a duplicate election ID.
					arb <- fmt.Errorf("%w: %w: %s: arbitration: %v", ErrUnavailable, errElectionInUse, name, err)
				} else {
					arb <- fmt.Errorf("%w: %s: arbitration: %v", ErrUnavailable, name, err)
				}
			}
			// A stream that never got through arbitration (a switch
			// that is down refuses it) was no connection: the dial's
			// error goes to the caller, who backs off. Reported as a
			// disconnect, it had the controller resync the switch at
			// once, and each resync dialed again: at k=48 a switch
			// that was down was dialed every millisecond or two.
			if streamCtx.Err() == nil && !first {
				if !errors.Is(err, io.EOF) {
					d.log.Warn("p4runtime stream ended", "switch", name, "err", err)
				}
				if d.opts.OnDisconnect != nil {
					d.opts.OnDisconnect(name)
				}
			}
			return
		}
		if in.list != nil { // flow samples, read from the wire
			d.takeDigest(c, in.list)
			continue
		}
		msg := in.resp
		if list := msg.GetDigest(); list != nil {
			d.takeDigest(c, d.samplesOf(list))
			continue
		}
		if pkt := msg.GetPacket(); pkt != nil {
			if d.opts.OnPacketIn != nil {
				d.opts.OnPacketIn(name, d.ingressPort(pkt), pkt.GetPayload())
			}
			continue
		}
		a := msg.GetArbitration()
		if a == nil {
			continue
		}
		ok := a.GetStatus().GetCode() == int32(code.Code_OK)
		if first {
			first = false
			if ok {
				arb <- nil
			} else {
				arb <- fmt.Errorf("%w: %s answered %s: %s", models.ErrNotPrimary, name,
					code.Code(a.GetStatus().GetCode()), a.GetStatus().GetMessage())
			}
			continue
		}
		if !ok {
			// Another controller took the switch: the controller
			// hears it now (its next reconcile finds out by whom),
			// not at its next periodic look.
			d.log.Warn("lost primary role", "switch", name, "status", a.GetStatus().GetMessage())
			cancel()
			if d.opts.OnDisconnect != nil {
				d.opts.OnDisconnect(name)
			}
		}
	}
}

// ensurePipeline pushes the shipped pipeline to a switch that runs none
// or another (by its cookie, got), and logs it.
func (d *P4RT) ensurePipeline(ctx context.Context, sw models.Switch, cc *grpc.ClientConn, election *p4v1.Uint128, got pipelineAnswer, pipelineConfig *p4v1.ForwardingPipelineConfig) error {
	resp, err := got.resp, got.err
	running := ""
	switch {
	case status.Code(err) == codes.FailedPrecondition:
		running = "none"
	case err != nil:
		return mapStatus(fmt.Sprintf("%s: get pipeline", sw.Name), err)
	case resp.GetConfig().GetCookie().GetCookie() != p4.Cookie():
		running = fmt.Sprintf("cookie %#x", resp.GetConfig().GetCookie().GetCookie())
	}
	if running != "" {
		if err := d.pushPipeline(ctx, cc, &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: sw.DeviceID, ElectionId: election, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		}, pipelineConfig); err != nil {
			return mapStatus(fmt.Sprintf("%s: set pipeline", sw.Name), err)
		}
		// A switch found running another pipeline is news; a fresh one
		// (a fabric coming up: hundreds at once) is debug.
		level := slog.LevelInfo
		if running == "none" {
			level = slog.LevelDebug
		}
		d.log.Log(ctx, level, "pipeline pushed", "switch", sw.Name, "target", cmp.Or(string(sw.Target), string(models.TargetFabricsim)),
			"was", running, "cookie", fmt.Sprintf("%#x", p4.Cookie()))
	}
	return nil
}

// send writes one message on the connection's stream.
func (c *p4conn) send(m *p4v1.StreamMessageRequest) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(m)
}

// ingressPort is a packet-in's ingress_port metadata.
func (d *P4RT) ingressPort(pkt *p4v1.PacketIn) uint32 {
	id := d.schema.ControllerMetadataID(p4.ControllerPacketIn, "ingress_port")
	for _, m := range pkt.GetMetadata() {
		if m.GetMetadataId() == id {
			return uint32(p4.Uint(m.GetValue()))
		}
	}
	return 0
}

// SendPacket sends payload out of a switch's port as a packet-out (the
// pipeline sends it straight out of the port its packet_out header names).
func (d *P4RT) SendPacket(ctx context.Context, id models.SwitchID, port uint32, payload []byte) error {
	c, err := d.conn(ctx, id)
	if err != nil {
		return err
	}
	meta := []*p4v1.PacketMetadata{{MetadataId: d.schema.ControllerMetadataID("packet_out", "egress_port"), Value: portBytes(port)}}
	if padID := d.schema.ControllerMetadataID("packet_out", "_pad"); padID != 0 {
		meta = append(meta, &p4v1.PacketMetadata{MetadataId: padID, Value: []byte{0}})
	}
	if err := c.send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: payload, Metadata: meta}}}); err != nil {
		return fmt.Errorf("%w: %s: packet-out: %v", ErrUnavailable, id, err)
	}
	return nil
}

func mapStatus(what string, err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied:
		return fmt.Errorf("%w: %s: %v", models.ErrNotPrimary, what, err)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Read returns what the switch has in the tables accelnet owns.
func (d *P4RT) Read(ctx context.Context, id models.SwitchID) (models.ForwardingState, error) {
	return d.readTables(ctx, id, true, true)
}

// Probe returns what a switch that lost its tables (a reboot) shows
// first — its selector members (one per routed port), punts and hash
// seed — or, with all, every table but the flow pins. A new leader
// compares them with a switch's handover mark (controller.Prober).
func (d *P4RT) Probe(ctx context.Context, id models.SwitchID, all bool) (models.ForwardingState, error) {
	if d.opts.KeepForeign {
		// Foreign entries are known only from a full read.
		return models.ForwardingState{}, fmt.Errorf("probe %s: %w (foreign entries are kept)", id, errors.ErrUnsupported)
	}
	return d.readTables(ctx, id, all, false)
}

// readTables reads accelnet's selector members, punts and hash seed; with
// rest its groups, port MACs and routes too; with pins its flow pins.
func (d *P4RT) readTables(ctx context.Context, id models.SwitchID, rest, pins bool) (models.ForwardingState, error) {
	c, err := d.conn(ctx, id)
	if err != nil {
		return models.ForwardingState{}, err
	}
	s := d.schema
	table := func(name string) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(name)}}}
	}
	req := &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: []*p4v1.Entity{
		{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{ActionProfileId: s.ProfileID(p4.ProfileECMP)}}},
		table(p4.TablePunt),
		{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableHashSeed), IsDefaultAction: true}}},
	}}
	if rest {
		req.Entities = append(req.Entities,
			&p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: &p4v1.ActionProfileGroup{ActionProfileId: s.ProfileID(p4.ProfileECMP)}}},
			table(p4.TablePortMACs), table(p4.TableIPv4LPM))
	}
	if pins {
		req.Entities = append(req.Entities, table(p4.TableFlowPin))
	}
	var st, other models.ForwardingState
	reads := wireReads{
		pin:   func(p models.FlowPin) { st.FlowPins = append(st.FlowPins, p) },
		route: func(r models.Route) { st.Routes = append(st.Routes, r) },
	}
	if err := d.readWire(ctx, c, req, "read "+string(id), d.opts.KeepForeign, reads, func(e *p4v1.Entity) {
		if te := e.GetTableEntry(); te != nil && d.opts.KeepForeign && !bytes.Equal(te.GetMetadata(), d.opts.EntryTag) {
			d.decode(e, &other)
			return
		}
		d.decode(e, &st)
	}); err != nil {
		return models.ForwardingState{}, err
	}
	if d.opts.KeepForeign {
		st = d.setForeign(id, st, other)
	}
	return st.Canonical(), nil
}

// setForeign records what of st the foreign entries (other) use and
// returns st without it.
func (d *P4RT) setForeign(id models.SwitchID, st, other models.ForwardingState) models.ForwardingState {
	f := foreignKeys{routes: map[netip.Prefix]bool{}, pins: map[models.FlowKey]bool{}, members: map[uint32]bool{}, groups: map[uint32]bool{}}
	for _, r := range other.Routes {
		f.routes[r.Prefix] = true
		if r.MemberID != 0 {
			f.members[r.MemberID] = true
		}
		if r.GroupID != 0 {
			f.groups[r.GroupID] = true
		}
	}
	for _, p := range other.FlowPins {
		f.pins[p.Key] = true
	}
	for _, g := range st.Groups {
		if f.groups[g.ID] {
			for _, m := range g.Members {
				f.members[m.MemberID] = true
			}
		}
	}
	st.Groups = slices.DeleteFunc(st.Groups, func(g models.Group) bool { return f.groups[g.ID] })
	st.Members = slices.DeleteFunc(st.Members, func(m models.Member) bool { return f.members[m.ID] })
	d.mu.Lock()
	d.foreign[id] = f
	d.mu.Unlock()
	return st
}

// divert moves the items of ins that match onto to, returning the rest
// and the grown to.
func divert[T any](ins, to []T, match func(T) bool) (rest, grown []T) {
	for _, x := range ins {
		if match(x) {
			to = append(to, x)
		} else {
			rest = append(rest, x)
		}
	}
	return rest, to
}

// takeOver turns INSERTs of what a switch has as foreign into MODIFYs.
func (d *P4RT) takeOver(id models.SwitchID, diff models.Diff) models.Diff {
	d.mu.Lock()
	f, ok := d.foreign[id]
	d.mu.Unlock()
	if !ok {
		return diff
	}
	var keep models.ForwardingState
	mod := diff.Modify
	keep.Members, mod.Members = divert(diff.Insert.Members, mod.Members, func(m models.Member) bool { return f.members[m.ID] })
	keep.Groups, mod.Groups = divert(diff.Insert.Groups, mod.Groups, func(g models.Group) bool { return f.groups[g.ID] })
	keep.Routes, mod.Routes = divert(diff.Insert.Routes, mod.Routes, func(r models.Route) bool { return f.routes[r.Prefix] })
	keep.FlowPins, mod.FlowPins = divert(diff.Insert.FlowPins, mod.FlowPins, func(p models.FlowPin) bool { return f.pins[p.Key] })
	diff.Insert, diff.Modify = keep, mod
	return diff
}

// readAll sends one ReadRequest and hands every entity of the answer to fn.
func (d *P4RT) readAll(ctx context.Context, c *p4conn, req *p4v1.ReadRequest, what string, fn func(*p4v1.Entity)) error {
	return d.readWire(ctx, c, req, what, false, wireReads{}, fn)
}

// pinEntries names the flow-pin entries of keys (match only), for reads.
func (d *P4RT) pinEntries(keys []models.FlowKey) []*p4v1.Entity {
	pins := make([]models.FlowPin, len(keys))
	for i, k := range keys {
		pins[i].Key = k
	}
	return d.entities(models.ForwardingState{FlowPins: pins}, true)
}

// ReadPins reads back just the flow-pin entries with these keys, in one
// request: how the controller confirms what it wrote without reading
// whole tables. Keys the switch does not have are absent from the answer.
func (d *P4RT) ReadPins(ctx context.Context, id models.SwitchID, keys []models.FlowKey) ([]models.FlowPin, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	c, err := d.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	req := &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: d.pinEntries(keys)}
	var st models.ForwardingState
	pin := func(p models.FlowPin) { st.FlowPins = append(st.FlowPins, p) }
	if err := d.readWire(ctx, c, req, "read pins of "+string(id), false, wireReads{pin: pin}, func(e *p4v1.Entity) { d.decode(e, &st) }); err != nil {
		return nil, err
	}
	return st.FlowPins, nil
}

// wildcardCounterRead is how many keys make ReadPinCounters read the
// whole table's counters instead of naming each entry.
const wildcardCounterRead = 256

// ReadPinCounters reads the direct counters (bytes) of the flow-pin
// entries with these keys; keys the switch does not have are absent.
func (d *P4RT) ReadPinCounters(ctx context.Context, id models.SwitchID, keys []models.FlowKey) (map[models.FlowKey]uint64, error) {
	out := map[models.FlowKey]uint64{}
	if len(keys) == 0 {
		return out, nil
	}
	c, err := d.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	// One wildcard read of the table's counters beats naming thousands.
	named := len(keys) <= wildcardCounterRead
	var entities []*p4v1.Entity
	if named {
		for _, e := range d.pinEntries(keys) {
			entities = append(entities, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: e.GetTableEntry()}}})
		}
	} else {
		entities = d.allPinCounters()
	}
	wanted := make(map[models.FlowKey]bool, len(keys))
	for _, k := range keys {
		wanted[k] = true
	}
	count := func(k models.FlowKey, bytes uint64) {
		if wanted[k] {
			out[k] = bytes
		}
	}
	read := func(entities []*p4v1.Entity) error {
		return d.readWire(ctx, c, &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: entities}, "read pin counters of "+string(id), false, wireReads{count: count}, func(e *p4v1.Entity) {
			dc := e.GetDirectCounterEntry()
			if dc == nil {
				return
			}
			var st models.ForwardingState
			d.decode(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: dc.GetTableEntry()}}, &st)
			if len(st.FlowPins) == 1 && wanted[st.FlowPins[0].Key] {
				out[st.FlowPins[0].Key] = uint64(dc.GetData().GetByteCount())
			}
		})
	}
	err = read(entities)
	if named && status.Code(err) == codes.InvalidArgument {
		// A direct counter named by an entry the switch does not have
		// fails the whole read (PI answers INVALID_ARGUMENT, "Cannot map
		// table entry to handle"): one pin still on its way, or just
		// removed, would leave every other pin of the switch unread, at
		// every read while pins keep changing. The wildcard read returns
		// the entries the switch has.
		clear(out)
		err = read(d.allPinCounters())
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// allPinCounters is a wildcard read of every flow pin's direct counter.
func (d *P4RT) allPinCounters() []*p4v1.Entity {
	return []*p4v1.Entity{{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: &p4v1.TableEntry{TableId: d.schema.TableID(p4.TableFlowPin)}}}}}
}

// PortCounter is one port's packet and byte count from accelnet.p4's
// indirect port counters.
type PortCounter struct {
	Packets, Bytes int64
}

// ReadPortCounters reads a switch's port_rx_counter (rx) or
// port_tx_counter (tx), every port's cell in one request.
func (d *P4RT) ReadPortCounters(ctx context.Context, id models.SwitchID, tx bool) (map[uint32]PortCounter, error) {
	c, err := d.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	name := p4.CounterPortRx
	if tx {
		name = p4.CounterPortTx
	}
	out := map[uint32]PortCounter{}
	err = d.readAll(ctx, c, &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_CounterEntry{
		CounterEntry: &p4v1.CounterEntry{CounterId: d.schema.CounterID(name)}}}}}, "read "+name+" of "+string(id), func(e *p4v1.Entity) {
		if ce := e.GetCounterEntry(); ce != nil {
			out[uint32(ce.GetIndex().GetIndex())] = PortCounter{Packets: ce.GetData().GetPacketCount(), Bytes: ce.GetData().GetByteCount()}
		}
	})
	return out, err
}

func (d *P4RT) portParam(a *p4v1.Action, action string) uint32 {
	p, err := d.schema.Param(action, p4.ParamPort)
	if err != nil || a.GetActionId() != d.schema.ActionID(action) {
		return 0 // an action we do not program: decoded as port 0 so the diff replaces it
	}
	for _, x := range a.GetParams() {
		if x.GetParamId() == p.GetId() {
			return uint32(p4.Uint(x.GetValue()))
		}
	}
	return 0
}

// decode turns a read-back entity into its models form.
func (d *P4RT) decode(e *p4v1.Entity, st *models.ForwardingState) {
	s := d.schema
	switch x := e.GetEntity().(type) {
	case *p4v1.Entity_ActionProfileMember:
		m := x.ActionProfileMember
		st.Members = append(st.Members, models.Member{ID: m.GetMemberId(), Port: d.portParam(m.GetAction(), p4.ActionSetEgress)})
	case *p4v1.Entity_ActionProfileGroup:
		g := models.Group{ID: x.ActionProfileGroup.GetGroupId()}
		for _, gm := range x.ActionProfileGroup.GetMembers() {
			g.Members = append(g.Members, models.GroupMember{MemberID: gm.GetMemberId(), Weight: gm.GetWeight()})
		}
		st.Groups = append(st.Groups, g)
	case *p4v1.Entity_TableEntry:
		t := x.TableEntry
		switch t.GetTableId() {
		case s.TableID(p4.TableIPv4LPM):
			r := models.Route{MemberID: t.GetAction().GetActionProfileMemberId(), GroupID: t.GetAction().GetActionProfileGroupId()}
			for _, m := range t.GetMatch() {
				if m.GetFieldId() == s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst) {
					r.Prefix = netip.PrefixFrom(p4.Addr(m.GetLpm().GetValue()), int(m.GetLpm().GetPrefixLen()))
				}
			}
			st.Routes = append(st.Routes, r)
		case s.TableID(p4.TableFlowPin):
			var p models.FlowPin
			for _, m := range t.GetMatch() {
				switch m.GetFieldId() {
				case s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Src):
					p.Key.Src = p4.Addr(m.GetExact().GetValue())
				case s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Dst):
					p.Key.Dst = p4.Addr(m.GetExact().GetValue())
				case s.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort):
					p.Key.SrcPort = uint16(p4.Uint(m.GetExact().GetValue()))
				}
			}
			p.Port = d.portParam(t.GetAction().GetAction(), p4.ActionPinEgress)
			st.FlowPins = append(st.FlowPins, p)
		case s.TableID(p4.TablePortMACs):
			var pm models.PortMAC
			for _, m := range t.GetMatch() {
				if m.GetFieldId() == s.MatchFieldID(p4.TablePortMACs, p4.FieldEgressPort) {
					pm.Port = uint32(p4.Uint(m.GetExact().GetValue()))
				}
			}
			if a := t.GetAction().GetAction(); a.GetActionId() == s.ActionID(p4.ActionRewriteMACs) {
				pm.Src = macParam(s, a, p4.ParamSrcMAC)
				pm.Dst = macParam(s, a, p4.ParamDstMAC)
			}
			st.PortMACs = append(st.PortMACs, pm)
		case s.TableID(p4.TablePunt):
			for _, m := range t.GetMatch() {
				if m.GetFieldId() == s.MatchFieldID(p4.TablePunt, p4.FieldEtherType) {
					st.Punts = append(st.Punts, uint16(p4.Uint(m.GetExact().GetValue())))
				}
			}
		case s.TableID(p4.TableHashSeed):
			seed := uint32(0)
			if a := t.GetAction().GetAction(); a.GetActionId() == s.ActionID(p4.ActionSetHashSeed) {
				prm, _ := s.Param(p4.ActionSetHashSeed, p4.ParamSeed)
				for _, x := range a.GetParams() {
					if x.GetParamId() == prm.GetId() {
						seed = uint32(p4.Uint(x.GetValue()))
					}
				}
			}
			st.HashSeed = &seed
		}
	}
}

// macParam reads a 48-bit action parameter as a MAC.
func macParam(s *p4.Schema, a *p4v1.Action, name string) models.MAC {
	prm, err := s.Param(s.ActionName(a.GetActionId()), name)
	if err != nil {
		return models.MAC{}
	}
	for _, x := range a.GetParams() {
		if x.GetParamId() == prm.GetId() {
			v := p4.Uint(x.GetValue())
			var m models.MAC
			for i := 5; i >= 0; i-- {
				m[i] = byte(v)
				v >>= 8
			}
			return m
		}
	}
	return models.MAC{}
}

func u32(v uint32, bytes int) []byte {
	b := make([]byte, bytes)
	for i := bytes - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

func portBytes(port uint32) []byte { return u32(port, (p4.PortBits+7)/8) }

// tagged marks an entry the controller writes with its tag (entries to
// delete or read are named by their match alone).
func (d *P4RT) tagged(te *p4v1.TableEntry, forDelete bool) *p4v1.TableEntry {
	if !forDelete {
		te.Metadata = d.opts.EntryTag
	}
	return te
}

// canonical is a value in P4Runtime's canonical form: no leading zero
// bytes (one byte for 0).
func canonical(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// exact is an exact match on the field with this ID.
func exact(id uint32, v []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: canonical(v)}}}
}

// action is a call of an action, by name, with its parameters in the
// P4Info's order.
func (d *P4RT) action(name string, params ...[]byte) *p4v1.Action {
	a := &p4v1.Action{ActionId: d.schema.ActionID(name)}
	if len(params) == 0 {
		return a
	}
	decl, _ := d.schema.Action(name) // checked by NewSchema
	for i, v := range params {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: decl.GetParams()[i].GetId(), Value: v})
	}
	return a
}

// entities converts one part of a diff into P4Runtime entities, by the
// IDs of the schema the switch runs (the connection checked its cookie).
// (The P4Runtime client library builds them by name from a P4Info it
// reads back from each switch: one more RPC per connection and, at k=48,
// 2,880 copies of the P4Info, 42 MB of accelnet's heap.)
func (d *P4RT) entities(fs models.ForwardingState, forDelete bool) []*p4v1.Entity {
	out := make([]*p4v1.Entity, 0, fs.Len())
	profile := d.schema.ProfileID(p4.ProfileECMP)
	for _, m := range fs.Members {
		mem := &p4v1.ActionProfileMember{ActionProfileId: profile, MemberId: m.ID}
		if !forDelete {
			mem.Action = d.action(p4.ActionSetEgress, portBytes(m.Port))
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: mem}})
	}
	for _, g := range fs.Groups {
		grp := &p4v1.ActionProfileGroup{ActionProfileId: profile, GroupId: g.ID}
		for _, gm := range g.Members {
			grp.Members = append(grp.Members, &p4v1.ActionProfileGroup_Member{MemberId: gm.MemberID, Weight: gm.Weight})
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: grp}})
	}
	lpmTable, lpmField := d.schema.TableID(p4.TableIPv4LPM), d.schema.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst)
	for _, r := range fs.Routes {
		p := r.Prefix.Masked() // P4Runtime: no bits set past the prefix
		a4 := p.Addr().As4()
		te := &p4v1.TableEntry{TableId: lpmTable, Match: []*p4v1.FieldMatch{{FieldId: lpmField,
			FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: canonical(a4[:]), PrefixLen: int32(p.Bits())}}}}}
		switch {
		case forDelete:
		case r.GroupID != 0:
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: r.GroupID}}
		default:
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: r.MemberID}}
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: d.tagged(te, forDelete)}})
	}
	for _, pm := range fs.PortMACs {
		te := &p4v1.TableEntry{TableId: d.schema.TableID(p4.TablePortMACs), Match: []*p4v1.FieldMatch{{
			FieldId:        d.schema.MatchFieldID(p4.TablePortMACs, p4.FieldEgressPort),
			FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: portBytes(pm.Port)}},
		}}}
		if !forDelete {
			src, _ := d.schema.Param(p4.ActionRewriteMACs, p4.ParamSrcMAC)
			dst, _ := d.schema.Param(p4.ActionRewriteMACs, p4.ParamDstMAC)
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
				ActionId: d.schema.ActionID(p4.ActionRewriteMACs),
				Params:   []*p4v1.Action_Param{{ParamId: src.GetId(), Value: pm.Src[:]}, {ParamId: dst.GetId(), Value: pm.Dst[:]}},
			}}}
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: d.tagged(te, forDelete)}})
	}
	for _, et := range fs.Punts {
		te := &p4v1.TableEntry{TableId: d.schema.TableID(p4.TablePunt), Match: []*p4v1.FieldMatch{{
			FieldId:        d.schema.MatchFieldID(p4.TablePunt, p4.FieldEtherType),
			FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: u32(uint32(et), 2)}},
		}}}
		if !forDelete {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: d.schema.ActionID(p4.ActionSendToCPU)}}}
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: d.tagged(te, forDelete)}})
	}
	if fs.HashSeed != nil && !forDelete {
		prm, _ := d.schema.Param(p4.ActionSetHashSeed, p4.ParamSeed)
		te := &p4v1.TableEntry{TableId: d.schema.TableID(p4.TableHashSeed), IsDefaultAction: true,
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
				ActionId: d.schema.ActionID(p4.ActionSetHashSeed),
				Params:   []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: u32(*fs.HashSeed, 4)}},
			}}}}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}})
	}
	ids := d.wireIDs // a pin is written by the thousand: no lookup by name per pin
	for _, p := range fs.FlowPins {
		src, dst := p.Key.Src.As4(), p.Key.Dst.As4()
		te := &p4v1.TableEntry{TableId: ids.table, Match: []*p4v1.FieldMatch{
			exact(ids.src, src[:]), exact(ids.dst, dst[:]), exact(ids.sport, u32(uint32(p.Key.SrcPort), 2)),
		}}
		if !forDelete {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
				ActionId: ids.action, Params: []*p4v1.Action_Param{{ParamId: ids.port, Value: portBytes(p.Port)}}}}}
		}
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: d.tagged(te, forDelete)}})
	}
	return out
}

// Apply writes a diff in dependency order, one batched WriteRequest per
// phase (split at MaxBatch updates). It stops at the first phase with a
// failed update and reports which updates failed and why.
func (d *P4RT) Apply(ctx context.Context, id models.SwitchID, diff models.Diff) error {
	if diff.Empty() {
		return nil
	}
	c, err := d.conn(ctx, id)
	if err != nil {
		return err
	}
	if d.opts.KeepForeign {
		diff = d.takeOver(id, diff)
	}
	for _, ph := range diff.Phases() {
		var updates []*p4v1.Update
		add := func(t p4v1.Update_Type, fs models.ForwardingState) {
			for _, e := range d.entities(fs, t == p4v1.Update_DELETE) {
				updates = append(updates, &p4v1.Update{Type: t, Entity: e})
			}
		}
		add(p4v1.Update_INSERT, ph.Insert)
		add(p4v1.Update_MODIFY, ph.Modify)
		add(p4v1.Update_DELETE, ph.Delete)
		// Updates a switch refuses one by one do not stop the rest of the
		// phase (the others apply: CONTINUE_ON_ERROR); they do stop the
		// phases that depend on it.
		refused := &WriteError{}
		for len(updates) > 0 {
			n := min(len(updates), d.opts.MaxBatch)
			batch := updates[:n]
			updates = updates[n:]
			_, err := c.client.Write(ctx, &p4v1.WriteRequest{
				DeviceId:   c.deviceID,
				ElectionId: &p4v1.Uint128{Low: c.election},
				Updates:    batch,
				Atomicity:  p4v1.WriteRequest_CONTINUE_ON_ERROR,
			})
			if err == nil {
				continue
			}
			err = writeError(err)
			var we *WriteError
			if !errors.As(err, &we) {
				return fmt.Errorf("apply %s (%d updates) to %s: %w", ph.Name, n, id, err)
			}
			for _, f := range we.Failed {
				if f.Index < len(batch) {
					var st models.ForwardingState
					d.decode(batch[f.Index].GetEntity(), &st)
					if len(st.FlowPins) == 1 {
						key := st.FlowPins[0].Key
						f.Pin = &key
					}
				}
				refused.Failed = append(refused.Failed, f)
			}
		}
		if len(refused.Failed) > 0 {
			return fmt.Errorf("apply %s to %s: %w", ph.Name, id, refused)
		}
	}
	return nil
}

// WriteError is a batch in which some updates failed.
type WriteError struct {
	Failed []UpdateError
}

// UpdateError is one failed update of a batch.
type UpdateError struct {
	Index   int
	Code    codes.Code
	Message string
	// Pin is the flow-pin entry's key, when the update was one.
	Pin *models.FlowKey
}

// Persistent says whether retrying the same update is pointless: the
// switch has no room for it or will not take it (as opposed to being
// briefly unavailable).
func (e UpdateError) Persistent() bool {
	switch e.Code {
	case codes.ResourceExhausted, codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// RefusedPins lists the flow pins the switch refused for good (see
// Persistent), with the first such refusal's code and message.
func (e *WriteError) RefusedPins() (keys []models.FlowKey, why string) {
	for _, f := range e.Failed {
		if f.Pin == nil || !f.Persistent() {
			continue
		}
		if why == "" {
			why = fmt.Sprintf("%s: %s", f.Code, f.Message)
		}
		keys = append(keys, *f.Pin)
	}
	return keys, why
}

func (e *WriteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d updates failed", len(e.Failed))
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; …")
			break
		}
		fmt.Fprintf(&b, "; #%d %s: %s", f.Index, f.Code, f.Message)
	}
	return b.String()
}

// writeError decodes P4Runtime's per-update errors from a Write status.
func writeError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if len(st.Details()) == 0 {
		return mapStatus("write", err)
	}
	we := &WriteError{}
	for i, det := range st.Details() {
		pe, ok := det.(*p4v1.Error)
		if !ok || pe.GetCanonicalCode() == int32(code.Code_OK) {
			continue
		}
		we.Failed = append(we.Failed, UpdateError{Index: i, Code: codes.Code(pe.GetCanonicalCode()), Message: pe.GetMessage()})
	}
	return we
}
