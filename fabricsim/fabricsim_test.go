package fabricsim

import (
	"context"
	"errors"
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fabricsim-test-logs-")
	if err != nil {
		panic(err)
	}
	if err := SetLibraryLogDir(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon")); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, topo models.Topology) *Fabric {
	t.Helper()
	f, err := New(Options{Topology: topo, CounterInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return f
}

// client is a bare P4Runtime client: these tests speak the protocol directly.
type client struct {
	p4v1.P4RuntimeClient
	cc     *grpc.ClientConn
	stream p4v1.P4Runtime_StreamChannelClient
	device uint64
}

func dial(t *testing.T, sw *Switch) *client {
	t.Helper()
	cc, err := grpc.NewClient(sw.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &client{P4RuntimeClient: p4v1.NewP4RuntimeClient(cc), cc: cc, device: sw.deviceID}
}

// arbitrate opens a stream with election ID id and returns the status code
// of the switch's first answer.
func (c *client) arbitrate(t *testing.T, id uint64) code.Code {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.stream = s
	if err := s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: id}}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return code.Code(resp.GetArbitration().GetStatus().GetCode())
}

// primary connects to sw as its primary client (election ID 1) and installs
// accelnet.p4.
func primary(t *testing.T, sw *Switch) (*client, *p4.Schema) {
	t.Helper()
	c := dial(t, sw)
	if got := c.arbitrate(t, 1); got != code.Code_OK {
		t.Fatalf("arbitration: %s", got)
	}
	c.setPipeline(t, 1)
	return c, schema(t)
}

func (c *client) setPipeline(t *testing.T, id uint64) {
	t.Helper()
	info, err := p4.Load()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: id},
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: p4.BMv2JSON, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 7}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *client) write(id uint64, updates ...*p4v1.Update) error {
	_, err := c.Write(context.Background(), &p4v1.WriteRequest{DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: id}, Updates: updates})
	return err
}

func schema(t *testing.T) *p4.Schema {
	s, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func member(s *p4.Schema, id, port uint32) *p4v1.Update {
	return &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{
		ActionProfileId: s.ProfileID(p4.ProfileECMP), MemberId: id,
		Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetEgress), Params: []*p4v1.Action_Param{{ParamId: 1, Value: []byte{byte(port)}}}},
	}}}}
}

func route(s *p4.Schema, prefix string, memberID uint32) *p4v1.Update {
	p := netip.MustParsePrefix(prefix)
	a := p.Addr().As4()
	return &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{
		TableId: s.TableID(p4.TableIPv4LPM),
		Match:   []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: a[:], PrefixLen: int32(p.Bits())}}}},
		Action:  &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: memberID}},
	}}}}
}

func updateErrors(err error) []codes.Code {
	var out []codes.Code
	for _, d := range status.Convert(err).Details() {
		if pe, ok := d.(*p4v1.Error); ok {
			out = append(out, codes.Code(pe.GetCanonicalCode()))
		}
	}
	return out
}

func TestArbitrationAndWriteRules(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	s := schema(t)

	c := dial(t, sw)
	// Writes before any arbitration: PERMISSION_DENIED.
	if err := c.write(1, member(s, 1, 1)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("write without a primary: %v", err)
	}
	if got := c.arbitrate(t, 10); got != code.Code_OK {
		t.Fatalf("first client: %s, want OK (primary)", got)
	}
	// No pipeline yet: FAILED_PRECONDITION.
	if err := c.write(10, member(s, 1, 1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("write without a pipeline: %v", err)
	}
	c.setPipeline(t, 10)
	if err := c.write(10, member(s, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// Wrong election ID: PERMISSION_DENIED.
	if err := c.write(9, member(s, 2, 2)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("write with a stale election id: %v", err)
	}
	// A backup with a lower ID learns a primary exists.
	backup := dial(t, sw)
	if got := backup.arbitrate(t, 5); got != code.Code_ALREADY_EXISTS {
		t.Fatalf("backup: %s, want ALREADY_EXISTS", got)
	}
	// The same election ID twice is refused.
	dup := dial(t, sw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, _ := dup.StreamChannel(ctx)
	st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: sw.deviceID, ElectionId: &p4v1.Uint128{Low: 10}}}})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("duplicate election id: %v", err)
	}
	// Wrong device ID on a write.
	if _, err := c.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 999, ElectionId: &p4v1.Uint128{Low: 10}}); status.Code(err) != codes.PermissionDenied { // as PI answers
		t.Fatalf("unknown device: %v", err)
	}
}

func TestWriteValidation(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))

	if err := c.write(1, member(s, 1, 1), member(s, 2, 2)); err != nil {
		t.Fatal(err)
	}
	unmasked := route(s, "10.0.2.0/24", 1)
	unmasked.GetEntity().GetTableEntry().Match[0].GetLpm().Value = []byte{10, 0, 2, 7}
	tooWide := member(s, 3, 1)
	tooWide.GetEntity().GetActionProfileMember().Action.Params[0].Value = []byte{0x02, 0x00} // 512 in a 9-bit port
	wrongAction := member(s, 4, 1)
	wrongAction.GetEntity().GetActionProfileMember().Action.ActionId = s.ActionID(p4.ActionPinEgress)

	err := c.write(1,
		route(s, "10.0.2.0/24", 1), // ok
		unmasked,                   // INVALID_ARGUMENT
		route(s, "10.0.3.0/24", 9), // INVALID_ARGUMENT: no such member (PI's "invalid member / group id")
		route(s, "10.0.2.0/24", 2), // ALREADY_EXISTS (first update of this batch)
		tooWide,                    // INVALID_ARGUMENT
		wrongAction,                // INVALID_ARGUMENT: not an action of ipv4_lpm
	)
	want := []codes.Code{codes.OK, codes.InvalidArgument, codes.InvalidArgument, codes.AlreadyExists, codes.InvalidArgument, codes.InvalidArgument}
	got := updateErrors(err)
	if status.Code(err) != codes.Unknown || len(got) != len(want) {
		t.Fatalf("batch status %v, per-update %v", err, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("update %d: %s, want %s", i, got[i], want[i])
		}
	}
	// A member in use cannot be deleted (BMv2 refuses it: UNKNOWN, as PI
	// reports a target's error).
	del := member(s, 1, 1)
	del.Type = p4v1.Update_DELETE
	if got := updateErrors(c.write(1, del)); !slices.Equal(got, []codes.Code{codes.Unknown}) {
		t.Errorf("delete member in use: %v", got)
	}
	// Groups beyond the selector's max group size are refused.
	grp := &p4v1.ActionProfileGroup{ActionProfileId: s.ProfileID(p4.ProfileECMP), GroupId: 5}
	var ups []*p4v1.Update
	for i := uint32(10); i < 10+65; i++ {
		ups = append(ups, member(s, i, 1))
		grp.Members = append(grp.Members, &p4v1.ActionProfileGroup_Member{MemberId: i, Weight: 1})
	}
	if err := c.write(1, ups...); err != nil {
		t.Fatal(err)
	}
	err = c.write(1, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: grp}}})
	if got := updateErrors(err); status.Code(err) != codes.Unknown || !slices.Equal(got, []codes.Code{codes.ResourceExhausted}) {
		t.Errorf("65-member group: %v (%v): want UNKNOWN with RESOURCE_EXHAUSTED for the update, as PI answers", got, err)
	}

	// Wildcard read returns what was written, canonical bytestrings.
	rs, err := c.Read(context.Background(), &p4v1.ReadRequest{DeviceId: c.device, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		resp, err := rs.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.GetEntities())
	}
	if n != 1 {
		t.Errorf("read %d table entries, want 1", n)
	}
}

func TestMaxMinFair(t *testing.T) {
	mk := func(demand float64, res ...string) *flowState {
		return &flowState{FlowStatus: FlowStatus{Delivered: true, Spec: FlowSpec{DemandGbps: demand}}, resources: res}
	}
	caps := map[string]float64{"l1": 100, "l2": 100, "l3": 30}
	a := mk(1000, "l1")       // shares l1 with b
	b := mk(1000, "l1", "l2") // ... and l2 with c
	c := mk(1000, "l2", "l3") // capped by l3 at 30
	d := mk(10, "l3")         // small demand: gets it all
	maxMinFair([]*flowState{a, b, c, d}, func(r string) float64 { return caps[r] })
	for name, tc := range map[string]struct {
		f    *flowState
		want float64
	}{"a": {a, 50}, "b": {b, 50}, "c": {c, 20}, "d": {d, 10}} {
		if math.Abs(tc.f.RateGbps-tc.want) > 1e-6 {
			t.Errorf("flow %s rate %v, want %v", name, tc.f.RateGbps, tc.want)
		}
	}
}

func TestSelectorHonoursWeights(t *testing.T) {
	f := fib{seed: 42, routes: []lpmRoute{{
		prefix: netip.MustParsePrefix("10.0.0.0/8"),
		slots:  []uint32{1, 2, 2, 2}, // member 2 at weight 3: three handles
	}}}
	counts := map[uint32]int{}
	for sport := 0; sport < 20000; sport++ {
		port, _ := f.lookup(FlowSpec{Src: netip.MustParseAddr("10.1.0.1"), Dst: netip.MustParseAddr("10.2.0.1"), SrcPort: uint16(sport)})
		counts[port]++
	}
	share := float64(counts[2]) / 20000
	if share < 0.72 || share > 0.78 {
		t.Errorf("weight-3 member got %.3f of flows, want about 0.75", share)
	}
	// Same flow, same answer: hashing is deterministic.
	spec := FlowSpec{Src: netip.MustParseAddr("10.1.0.1"), Dst: netip.MustParseAddr("10.2.0.1"), SrcPort: 777}
	if a, _ := f.lookup(spec); a != must(f.lookup(spec)) {
		t.Error("lookup is not deterministic")
	}
}

// TestGNMIServesCounters subscribes like a collector would and checks that
// counters arrive, advance for a port carrying a flow, and that Get works.
func TestGNMIServesCounters(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 2, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	// h1 → h2 on the same leaf: a host route out of port 2.
	h1, h2 := topo.Hosts[0], topo.Hosts[1]
	if err := c.write(1, member(s, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := c.write(1, route(s, h2.IP.String()+"/32", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddFlows([]FlowSpec{{Src: h1.IP, Dst: h2.IP, SrcPort: 1000, DemandGbps: 40}}); err != nil {
		t.Fatal(err)
	}
	if fl := f.Flows(); !fl[0].Delivered || math.Abs(fl[0].RateGbps-40) > 1e-9 {
		t.Fatalf("flow not delivered at its demand: %+v", fl[0])
	}
	g := gnmipb.NewGNMIClient(c.cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	caps, err := g.Capabilities(ctx, &gnmipb.CapabilityRequest{})
	if err != nil || len(caps.GetSupportedModels()) == 0 {
		t.Fatalf("capabilities: %v %v", caps, err)
	}
	sub, err := g.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "*"}}, {Name: "state"}, {Name: "counters"}, {Name: "out-octets"}}}
	if err := sub.Send(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Subscribe{Subscribe: &gnmipb.SubscriptionList{
		Prefix: &gnmipb.Path{Target: "leaf1"}, Mode: gnmipb.SubscriptionList_STREAM, Encoding: gnmipb.Encoding_PROTO,
		Subscription: []*gnmipb.Subscription{{Path: path, Mode: gnmipb.SubscriptionMode_SAMPLE}},
	}}}); err != nil {
		t.Fatal(err)
	}
	var synced bool
	var first, last uint64
	for ctx.Err() == nil {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSyncResponse() {
			synced = true
			continue
		}
		for _, u := range resp.GetUpdate().GetUpdate() {
			if resp.GetUpdate().GetPrefix().GetTarget() != "leaf1" {
				t.Fatalf("update for target %q", resp.GetUpdate().GetPrefix().GetTarget())
			}
			if u.GetPath().GetElem()[1].GetKey()["name"] != "eth2" {
				continue
			}
			v := u.GetVal().GetUintVal()
			if first == 0 {
				first = v
			}
			last = v
		}
		if synced && last > first && first > 0 {
			break
		}
	}
	if !synced || last <= first {
		t.Fatalf("synced=%v out-octets %d → %d: counters did not advance", synced, first, last)
	}
	get, err := g.Get(ctx, &gnmipb.GetRequest{Prefix: &gnmipb.Path{Target: "leaf1"}, Path: []*gnmipb.Path{interfacePath("eth2", "state", "oper-status")}})
	if err != nil || len(get.GetNotification()) != 1 {
		t.Fatalf("get oper-status: %v %v", get, err)
	}
	if _, err := g.Get(ctx, &gnmipb.GetRequest{Path: []*gnmipb.Path{interfacePath("eth99", "state", "oper-status")}}); status.Code(err) != codes.NotFound {
		t.Errorf("get of a missing interface: %v", err)
	}
}

func TestFlowsAcrossLinkDown(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	if _, err := f.AddFlows([]FlowSpec{{Src: topo.Hosts[0].IP, Dst: netip.MustParseAddr("192.0.2.1"), DemandGbps: 1}}); err == nil {
		t.Fatal("flow to an unknown host accepted")
	}
	ids, err := f.AddFlows([]FlowSpec{{Src: topo.Hosts[0].IP, Dst: topo.Hosts[1].IP, SrcPort: 9, DemandGbps: 1}})
	if err != nil {
		t.Fatal(err)
	}
	fl := f.Flows()
	if len(fl) != 1 || fl[0].ID != ids[0] || fl[0].Delivered || fl[0].Drop != DropNoRoute || fl[0].DropAt != "no route at leaf1" {
		t.Fatalf("flow on an unprogrammed fabric: %+v", fl)
	}
	if err := f.SetLinkUp("nosuch", false); err == nil {
		t.Error("unknown link accepted")
	}
}

func must(port uint32, _ bool) uint32 { return port }

// TestAnswersAsPI: requests whose answers were taken from BMv2 with PI
// (internal/bmv2test's replay, where BMv2 is installed), pinned here
// where it is not.
func TestAnswersAsPI(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	ctx := context.Background()
	readCode := func(device uint64, e *p4v1.Entity) codes.Code {
		rs, err := c.Read(ctx, &p4v1.ReadRequest{DeviceId: device, Entities: []*p4v1.Entity{e}})
		if err != nil {
			return status.Code(err)
		}
		for {
			if _, err := rs.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return codes.OK
				}
				return status.Code(err)
			}
		}
	}
	seedParam, _ := s.Param(p4.ActionSetHashSeed, p4.ParamSeed)
	keyless := &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{
		TableId: s.TableID(p4.TableHashSeed), Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
			ActionId: s.ActionID(p4.ActionSetHashSeed), Params: []*p4v1.Action_Param{{ParamId: seedParam.GetId(), Value: []byte{7}}}}}}}}}}
	pinMatch := []*p4v1.FieldMatch{
		{FieldId: s.MatchFieldID(p4.TableFlowPin, "ipv4_src"), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{10, 0, 1, 1}}}},
		{FieldId: s.MatchFieldID(p4.TableFlowPin, "ipv4_dst"), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{10, 0, 2, 1}}}},
		{FieldId: s.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{1}}}},
	}
	defaultOnly := &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{
		TableId: s.TableID(p4.TableFlowPin), Match: pinMatch,
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionNop)}}}}}}}
	if got := updateErrors(c.write(1, keyless, defaultOnly)); !slices.Equal(got, []codes.Code{codes.Unknown, codes.PermissionDenied}) {
		t.Errorf("an entry in a keyless table, a default-only action in an entry: %v, want [Unknown PermissionDenied]", got)
	}
	if err := c.write(1); status.Code(err) != codes.OK {
		t.Errorf("an empty write: %v", err)
	}
	if _, err := c.Write(ctx, &p4v1.WriteRequest{DeviceId: 99, ElectionId: &p4v1.Uint128{Low: 1}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a write to another device: %v, want PermissionDenied", err)
	}
	if got := readCode(99, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}}); got != codes.FailedPrecondition {
		t.Errorf("a read of another device: %s, want FailedPrecondition", got)
	}
	if _, err := c.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 99}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("another device's pipeline: %v, want FailedPrecondition", err)
	}
	counter := func(id uint32, index int64) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: id, Index: &p4v1.Index{Index: index}}}}
	}
	for _, tc := range []struct {
		what string
		e    *p4v1.Entity
		want codes.Code
	}{
		{"a port counter", counter(s.CounterID(p4.CounterPortRx), 9), codes.OK},
		{"a port counter past its size", counter(s.CounterID(p4.CounterPortRx), 600), codes.Unknown},
		{"an unknown counter", counter(0x12ffffff, 1), codes.InvalidArgument},
		{"the direct counter of a missing entry", &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
			TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin), Match: pinMatch}}}}, codes.InvalidArgument},
	} {
		if got := readCode(c.device, tc.e); got != tc.want {
			t.Errorf("read %s: %s, want %s", tc.what, got, tc.want)
		}
	}
	if _, err := c.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: 1},
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY, Config: &p4v1.ForwardingPipelineConfig{P4DeviceConfig: p4.BMv2JSON}}); err != nil {
		t.Errorf("verify the device config alone: %v, want OK", err)
	}
}
