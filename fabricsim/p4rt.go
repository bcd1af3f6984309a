package fabricsim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	p4config "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// p4rtServer is one emulated switch's P4Runtime service.
type p4rtServer struct {
	p4v1.UnimplementedP4RuntimeServer
	sw *Switch
}

// stream is one StreamChannel client.
type stream struct {
	// out carries arbitration updates, packet-ins and errors; bulk carries
	// digest lists. The sender takes out first, as a switch's CPU path
	// queues control traffic (LLDP) ahead of sampled packets: a flood of
	// samples never starves link discovery. Each drops what it cannot
	// hold.
	out        chan *p4v1.StreamMessageResponse
	bulk       chan *p4v1.StreamMessageResponse
	electionID *p4v1.Uint128 // nil until the client arbitrates
}

func u128Less(a, b *p4v1.Uint128) bool {
	if a.GetHigh() != b.GetHigh() {
		return a.GetHigh() < b.GetHigh()
	}
	return a.GetLow() < b.GetLow()
}

func u128Equal(a, b *p4v1.Uint128) bool {
	return a.GetHigh() == b.GetHigh() && a.GetLow() == b.GetLow()
}

// arbitration state lives on the Switch, guarded by Switch.mu.

// primaryLocked returns the stream with the highest election ID, or nil.
func (sw *Switch) primaryLocked() *stream {
	var best *stream
	for st := range sw.streams {
		if st.electionID == nil {
			continue
		}
		if best == nil || u128Less(best.electionID, st.electionID) {
			best = st
		}
	}
	return best
}

// notifyLocked tells every arbitrated stream whether it is primary, as the
// P4Runtime spec requires after any change of primary: OK to the primary,
// ALREADY_EXISTS to backups while a primary exists, NOT_FOUND otherwise.
func (sw *Switch) notifyLocked(only *stream) {
	primary := sw.primaryLocked()
	var highest *p4v1.Uint128
	if primary != nil {
		highest = primary.electionID
	}
	for st := range sw.streams {
		if st.electionID == nil || (only != nil && st != only) {
			continue
		}
		c, msg := code.Code_ALREADY_EXISTS, "a primary client is connected"
		switch {
		case st == primary:
			c, msg = code.Code_OK, "you are the primary client"
		case primary == nil:
			c, msg = code.Code_NOT_FOUND, "no primary client"
		}
		resp := &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
			DeviceId:   sw.deviceID,
			ElectionId: proto.Clone(highest).(*p4v1.Uint128),
			Status:     &rpcstatus.Status{Code: int32(c), Message: msg},
		}}}
		select {
		case st.out <- resp:
		default:
			// A client that does not read its stream loses notifications
			// rather than stalling the switch.
		}
	}
}

func (s *p4rtServer) StreamChannel(ss p4v1.P4Runtime_StreamChannelServer) error {
	sw := s.sw
	if sw.down.Load() {
		return status.Error(codes.Unavailable, "switch is down")
	}
	st := &stream{out: make(chan *p4v1.StreamMessageResponse, 64), bulk: make(chan *p4v1.StreamMessageResponse, 64)}
	sw.mu.Lock()
	sw.streams[st] = struct{}{}
	sw.mu.Unlock()

	ctx, cancel := context.WithCancel(ss.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var m *p4v1.StreamMessageResponse
			select {
			case m = <-st.out:
			default:
				select {
				case <-ctx.Done():
					return
				case m = <-st.out:
				case m = <-st.bulk:
				}
			}
			if err := ss.Send(m); err != nil {
				cancel()
				return
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
		sw.mu.Lock()
		wasPrimary := sw.primaryLocked() == st
		delete(sw.streams, st)
		if wasPrimary {
			sw.notifyLocked(nil)
		}
		sw.mu.Unlock()
	}()
	kill := sw.killed()
	go func() {
		// Switch-down, injected disconnects and shutdown end the stream.
		select {
		case <-ctx.Done():
		case <-kill:
			cancel()
		}
	}()

	recv := make(chan *p4v1.StreamMessageRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := ss.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case recv <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var req *p4v1.StreamMessageRequest
		select {
		case <-ctx.Done():
			return status.Error(codes.Unavailable, "stream closed by switch")
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req = <-recv:
		}
		switch u := req.GetUpdate().(type) {
		case *p4v1.StreamMessageRequest_Arbitration:
			if err := sw.arbitrate(st, u.Arbitration); err != nil {
				return err
			}
		case *p4v1.StreamMessageRequest_Packet:
			if err := sw.packetOut(st, u.Packet); err != nil {
				sw.packetOutError(st, err)
			}
		default:
			// Digest acks: lists are not held back waiting for them.
		}
	}
}

func (sw *Switch) arbitrate(st *stream, a *p4v1.MasterArbitrationUpdate) error {
	if a.GetDeviceId() != sw.deviceID {
		return status.Errorf(codes.NotFound, "device id %d is not served here (this is %d)", a.GetDeviceId(), sw.deviceID)
	}
	if a.GetRole().GetName() != "" {
		return status.Error(codes.Unimplemented, "only the default role is supported")
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if a.GetElectionId() != nil {
		for other := range sw.streams {
			if other != st && other.electionID != nil && u128Equal(other.electionID, a.GetElectionId()) {
				return status.Error(codes.InvalidArgument, "election id already in use by another client")
			}
		}
	}
	before := sw.primaryLocked()
	st.electionID = proto.Clone(a.GetElectionId()).(*p4v1.Uint128)
	if a.GetElectionId() == nil {
		st.electionID = nil
	}
	if sw.primaryLocked() != before {
		sw.notifyLocked(nil)
	} else {
		sw.notifyLocked(st)
	}
	return nil
}

// checkPrimary enforces that writes carry the primary's election ID.
func (sw *Switch) checkPrimaryLocked(id *p4v1.Uint128) error {
	p := sw.primaryLocked()
	if p == nil {
		return status.Error(codes.PermissionDenied, "no primary client: open a stream and arbitrate first")
	}
	if id == nil || !u128Equal(p.electionID, id) {
		return status.Error(codes.PermissionDenied, "election id is not the primary's")
	}
	return nil
}

func (s *p4rtServer) Capabilities(context.Context, *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return &p4v1.CapabilitiesResponse{P4RuntimeApiVersion: "1.4.0"}, nil
}

func (s *p4rtServer) SetForwardingPipelineConfig(_ context.Context, req *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	sw := s.sw
	if sw.down.Load() {
		return nil, status.Error(codes.Unavailable, "switch is down")
	}
	if req.GetDeviceId() != sw.deviceID {
		return nil, status.Errorf(codes.NotFound, "device id %d is not served here", req.GetDeviceId())
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if err := sw.checkPrimaryLocked(req.GetElectionId()); err != nil {
		return nil, err
	}
	// verify checks the config and returns it as the switch holds it
	// (see sharedConfig).
	verify := func() (*p4v1.ForwardingPipelineConfig, *p4.Schema, error) {
		cfg := req.GetConfig()
		if cfg.GetP4Info() == nil {
			if req.GetAction() == p4v1.SetForwardingPipelineConfigRequest_VERIFY && bytes.Equal(cfg.GetP4DeviceConfig(), p4.BMv2JSON) {
				// As PI answers: a config verified without its P4Info is
				// checked for its device config alone.
				return nil, nil, nil
			}
			return nil, nil, status.Error(codes.InvalidArgument, "config has no P4Info")
		}
		// The device config is the program itself (for BMv2, its JSON):
		// fabricsim runs accelnet.p4 as compiled, and refuses another.
		if !bytes.Equal(cfg.GetP4DeviceConfig(), p4.BMv2JSON) {
			return nil, nil, status.Errorf(codes.InvalidArgument, "fabricsim implements accelnet.p4 only: the device config (%d bytes) is not its compiled BMv2 JSON", len(cfg.GetP4DeviceConfig()))
		}
		return sharedConfig(cfg)
	}
	switch req.GetAction() {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY:
		_, _, err := verify()
		return &p4v1.SetForwardingPipelineConfigResponse{}, err
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		cfg, schema, err := verify()
		if err != nil {
			return nil, err
		}
		if req.GetAction() == p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE {
			sw.saved, sw.savedSchema = cfg, schema
			return &p4v1.SetForwardingPipelineConfigResponse{}, nil
		}
		sw.commitLocked(cfg, schema)
		return &p4v1.SetForwardingPipelineConfigResponse{}, nil
	case p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		cfg, schema, err := verify()
		if err != nil {
			return nil, err
		}
		if err := sw.reconcileLocked(cfg, schema); err != nil {
			return nil, err
		}
		return &p4v1.SetForwardingPipelineConfigResponse{}, nil
	case p4v1.SetForwardingPipelineConfigRequest_COMMIT:
		if sw.saved == nil {
			return nil, status.Error(codes.FailedPrecondition, "nothing saved to commit")
		}
		sw.commitLocked(sw.saved, sw.savedSchema)
		sw.saved, sw.savedSchema = nil, nil
		return &p4v1.SetForwardingPipelineConfigResponse{}, nil
	default:
		return nil, status.Errorf(codes.Unimplemented, "action %s is not supported", req.GetAction())
	}
}

// pipelines are the P4Infos switches were given, each with its schema,
// shared by every switch given the same one (by its deterministic
// encoding): a fabric's switches all run one program, and a copy each
// (the P4Info's messages, its schema and the 90 KB BMv2 JSON) would be
// 336 MB of a k=48 emulator's heap.
var pipelines sync.Map // string → *sharedPipeline

type sharedPipeline struct {
	info   *p4config.P4Info
	schema *p4.Schema
}

// sharedConfig is cfg as a switch holds it: its P4Info and schema shared
// (read, never changed), its device config the program's own (the caller
// checked it is), its cookie a copy.
func sharedConfig(cfg *p4v1.ForwardingPipelineConfig) (*p4v1.ForwardingPipelineConfig, *p4.Schema, error) {
	key, err := proto.MarshalOptions{Deterministic: true}.Marshal(cfg.GetP4Info())
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "P4Info: %v", err)
	}
	sp, ok := pipelines.Load(string(key))
	if !ok {
		info := proto.Clone(cfg.GetP4Info()).(*p4config.P4Info)
		schema, err := p4.NewSchema(info)
		if err != nil {
			return nil, nil, status.Errorf(codes.InvalidArgument, "fabricsim implements accelnet.p4 only: %v", err)
		}
		sp, _ = pipelines.LoadOrStore(string(key), &sharedPipeline{info: info, schema: schema})
	}
	shared := sp.(*sharedPipeline)
	held := &p4v1.ForwardingPipelineConfig{P4Info: shared.info, P4DeviceConfig: p4.BMv2JSON}
	if c := cfg.GetCookie(); c != nil {
		held.Cookie = proto.Clone(c).(*p4v1.ForwardingPipelineConfig_Cookie)
	}
	return held, shared.schema, nil
}

// commitLocked installs a new pipeline: like a real target, it starts with
// empty tables.
func (sw *Switch) commitLocked(cfg *p4v1.ForwardingPipelineConfig, schema *p4.Schema) {
	sw.config = cfg
	sw.store = newTableStore(schema, sw.faults.tableLimit)
	sw.tablesChanged()
}

func (s *p4rtServer) GetForwardingPipelineConfig(_ context.Context, req *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	sw := s.sw
	if req.GetDeviceId() != sw.deviceID { // as PI answers: no pipeline there
		return nil, status.Errorf(codes.FailedPrecondition, "device id %d is not served here", req.GetDeviceId())
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	out := &p4v1.ForwardingPipelineConfig{}
	if sw.config == nil {
		// As PI: a switch that runs no pipeline says so.
		return nil, status.Error(codes.FailedPrecondition, "No forwarding pipeline config set for this device")
	}
	rt := req.GetResponseType()
	if sw.config.GetCookie() != nil {
		out.Cookie = proto.Clone(sw.config.GetCookie()).(*p4v1.ForwardingPipelineConfig_Cookie)
	}
	if rt == p4v1.GetForwardingPipelineConfigRequest_ALL || rt == p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE {
		out.P4Info = sw.config.GetP4Info()
	}
	if rt == p4v1.GetForwardingPipelineConfigRequest_ALL || rt == p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE {
		out.P4DeviceConfig = sw.config.GetP4DeviceConfig()
	}
	return &p4v1.GetForwardingPipelineConfigResponse{Config: out}, nil
}

func (s *p4rtServer) Write(ctx context.Context, req *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	sw := s.sw
	if sw.down.Load() {
		return nil, status.Error(codes.Unavailable, "switch is down")
	}
	if req.GetDeviceId() != sw.deviceID { // as PI answers
		return nil, status.Errorf(codes.PermissionDenied, "device id %d is not served here", req.GetDeviceId())
	}
	if req.GetAtomicity() != p4v1.WriteRequest_CONTINUE_ON_ERROR {
		return nil, status.Errorf(codes.Unimplemented, "atomicity %s is not supported", req.GetAtomicity())
	}
	if err := sw.faults.beforeWrite(ctx); err != nil {
		return nil, err
	}
	changed := false
	defer func() { // after sw.mu is released (deferred below, so it runs first)
		if changed {
			sw.fabric.notifyWrite(sw.name)
		}
	}()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if err := sw.checkPrimaryLocked(req.GetElectionId()); err != nil {
		return nil, err
	}
	if sw.config == nil {
		return nil, status.Error(codes.FailedPrecondition, "no forwarding pipeline is set")
	}
	sw.writeRPCs.Add(1)
	perUpdate := make([]error, len(req.GetUpdates()))
	failed := 0
	for i, u := range req.GetUpdates() {
		if err := sw.store.apply(u); err != nil {
			perUpdate[i] = err
			failed++
			continue
		}
		sw.writeUpdates.Add(1)
	}
	if len(req.GetUpdates()) > failed {
		now := time.Now().UnixNano()
		sw.lastWrite.Store(now)
		sw.recent[sw.recentNext] = now
		sw.recentNext = (sw.recentNext + 1) % len(sw.recent)
		sw.tablesChanged()
		changed = true
	}
	if failed == 0 {
		return &p4v1.WriteResponse{}, nil
	}
	// P4Runtime reports batch failures as UNKNOWN with one p4.v1.Error per
	// update, in order.
	st := &rpcstatus.Status{Code: int32(code.Code_UNKNOWN), Message: "some updates failed"}
	for _, e := range perUpdate {
		pe := &p4v1.Error{CanonicalCode: int32(code.Code_OK)}
		var perr *p4err
		if errors.As(e, &perr) {
			pe = &p4v1.Error{CanonicalCode: int32(perr.code), Message: perr.msg, Space: "fabricsim"}
		} else if e != nil {
			pe = &p4v1.Error{CanonicalCode: int32(code.Code_UNKNOWN), Message: e.Error(), Space: "fabricsim"}
		}
		detail, err := anypb.New(pe)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "encode error detail: %v", err)
		}
		st.Details = append(st.Details, detail)
	}
	return nil, status.FromProto(st).Err()
}

// directCounted are the entries whose direct counters a read of q (an
// entry, or a table: the flow pins' by default) asks for.
func (s *tableStore) directCounted(q *p4v1.TableEntry) ([]*p4v1.TableEntry, error) {
	if q == nil {
		return nil, errf(codes.InvalidArgument, "a direct counter read names its table entry")
	}
	if q.GetTableId() == 0 {
		q = &p4v1.TableEntry{TableId: s.schema.TableID(p4.TableFlowPin)}
	}
	if t, _ := s.schema.TableByID(q.GetTableId()); len(t.GetDirectResourceIds()) == 0 {
		return nil, errf(codes.InvalidArgument, "table %d has no direct counter", q.GetTableId())
	}
	entries, err := s.readTable(q)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 && len(q.GetMatch()) > 0 {
		// As PI answers: one entry's counter, of no entry.
		return nil, errf(codes.InvalidArgument, "no entry of table %d matches: it has no direct counter", q.GetTableId())
	}
	out := make([]*p4v1.TableEntry, len(entries))
	for i, e := range entries {
		out[i] = e.GetTableEntry()
	}
	return out, nil
}

func (s *p4rtServer) Read(req *p4v1.ReadRequest, rs p4v1.P4Runtime_ReadServer) error {
	sw := s.sw
	if sw.down.Load() {
		return status.Error(codes.Unavailable, "switch is down")
	}
	if req.GetDeviceId() != sw.deviceID { // as PI answers: no pipeline there
		return status.Errorf(codes.FailedPrecondition, "device id %d is not served here", req.GetDeviceId())
	}
	var out []*p4v1.Entity
	var counterQueries []*p4v1.CounterEntry
	var directQueries, withCounters []*p4v1.TableEntry
	var pinSchema *p4.Schema
	var pinTable uint32
	var schema *p4.Schema
	err := func() error {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		if sw.config == nil {
			return status.Error(codes.FailedPrecondition, "no forwarding pipeline is set")
		}
		pinSchema = sw.store.schema
		pinTable = pinSchema.TableID(p4.TableFlowPin)
		for _, e := range req.GetEntities() {
			var got []*p4v1.Entity
			var err error
			switch x := e.GetEntity().(type) {
			case *p4v1.Entity_TableEntry:
				got, err = sw.store.readTable(x.TableEntry)
				if err == nil && x.TableEntry.GetCounterData() != nil {
					for _, e := range got { // a copy, to be given its counter
						te := proto.Clone(e.GetTableEntry()).(*p4v1.TableEntry)
						e.Entity = &p4v1.Entity_TableEntry{TableEntry: te}
						withCounters = append(withCounters, te)
					}
				}
			case *p4v1.Entity_ActionProfileMember:
				got, err = sw.store.readMembers(x.ActionProfileMember)
			case *p4v1.Entity_ActionProfileGroup:
				got, err = sw.store.readGroups(x.ActionProfileGroup)
			case *p4v1.Entity_DigestEntry:
				got, err = sw.store.readDigests(x.DigestEntry)
			case *p4v1.Entity_CounterEntry:
				// Counters live in the dataplane, whose lock is taken
				// before a switch's; read them after releasing sw.mu.
				counterQueries = append(counterQueries, x.CounterEntry)
				schema = sw.store.schema
			case *p4v1.Entity_DirectCounterEntry:
				var entries []*p4v1.TableEntry
				entries, err = sw.store.directCounted(x.DirectCounterEntry.GetTableEntry())
				directQueries = append(directQueries, entries...)
			default:
				err = errf(codes.Unimplemented, "reading %T is not supported", x)
			}
			if err != nil {
				var perr *p4err
				if errors.As(err, &perr) {
					return status.Error(perr.code, perr.msg)
				}
				return err
			}
			out = append(out, got...)
		}
		return nil
	}()
	if err != nil {
		return err
	}
	// The pins' counters, of table entries read with them and of direct
	// counter queries, are read at one instant.
	var pins []*p4v1.TableEntry
	var keys []models.FlowKey
	for _, e := range withCounters {
		if e.GetTableId() == pinTable {
			pins, keys = append(pins, e), append(keys, flowKey(pinSchema, e))
		}
	}
	for _, e := range directQueries {
		keys = append(keys, flowKey(pinSchema, e))
	}
	counters := sw.pinCounters(keys)
	for i, e := range pins {
		e.CounterData = counters[i]
	}
	for i, e := range directQueries {
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
			TableEntry: e, Data: counters[len(pins)+i],
		}}})
	}
	for _, q := range counterQueries {
		got, err := sw.readCounters(schema, q)
		if err != nil {
			var perr *p4err
			if errors.As(err, &perr) {
				return status.Error(perr.code, perr.msg)
			}
			return err
		}
		out = append(out, got...)
	}
	const chunk = 1000
	for len(out) > 0 {
		n := min(chunk, len(out))
		if err := rs.Send(&p4v1.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

// faults are injected errors and delays on the switch's write path.
type faults struct {
	writeDelayNanos atomic.Int64
	writeError      atomic.Int32 // a codes.Code; 0 means none
	// tableLimits are tables (by P4Info name) with less room than the
	// P4Info says, as on hardware whose memory other features share.
	tableLimits sync.Map // string → int
}

// tableLimit is a table's injected capacity, 0 for none.
func (f *faults) tableLimit(table string) int {
	if v, ok := f.tableLimits.Load(table); ok {
		return v.(int)
	}
	return 0
}

func (f *faults) beforeWrite(ctx context.Context) error {
	if d := f.writeDelayNanos.Load(); d > 0 {
		t := time.NewTimer(time.Duration(d))
		select {
		case <-ctx.Done():
			t.Stop()
			return status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
	if c := codes.Code(f.writeError.Load()); c != codes.OK {
		return status.Errorf(c, "injected write failure")
	}
	return nil
}
