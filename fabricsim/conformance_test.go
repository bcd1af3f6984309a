package fabricsim

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/ygot/ytypes"
	p4config "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/models/oc"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// Protocol conformance of fabricsim's P4Runtime and gNMI servers, each
// checked over real gRPC on loopback.

func TestP4RTBackupIsPromotedWhenPrimaryLeaves(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	first := dial(t, sw)
	if got := first.arbitrate(t, 10); got != code.Code_OK {
		t.Fatalf("primary: %s", got)
	}
	backup := dial(t, sw)
	if got := backup.arbitrate(t, 5); got != code.Code_ALREADY_EXISTS {
		t.Fatalf("backup: %s", got)
	}
	first.cc.Close()
	for { // the backup is told it is primary now
		resp, err := backup.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if a := resp.GetArbitration(); a != nil && a.GetStatus().GetCode() == int32(code.Code_OK) {
			break
		}
	}
	// Its writes now pass arbitration (and stop at the missing pipeline).
	if err := backup.write(5, member(schema(t), 1, 1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("promoted backup's write: %v", err)
	}
}

func TestP4RTPipelineConfigActions(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	c := dial(t, sw)
	c.arbitrate(t, 1)
	s := schema(t)
	info, _ := p4.Load()
	set := func(action p4v1.SetForwardingPipelineConfigRequest_Action, p4info *p4config.P4Info, cookie uint64) error {
		var cfg *p4v1.ForwardingPipelineConfig
		if p4info != nil {
			cfg = &p4v1.ForwardingPipelineConfig{P4Info: p4info, P4DeviceConfig: p4.BMv2JSON, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: cookie}}
		}
		_, err := c.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: 1}, Action: action, Config: cfg})
		return err
	}
	get := func(rt p4v1.GetForwardingPipelineConfigRequest_ResponseType) *p4v1.ForwardingPipelineConfig {
		resp, err := c.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: c.device, ResponseType: rt})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetConfig()
	}
	// A fresh switch has no pipeline, and says so as PI does.
	if _, err := c.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: c.device}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a fresh switch answers %v, want FAILED_PRECONDITION", err)
	}
	// Another program (a device config that is not accelnet.p4's) is refused.
	other := func() error {
		_, err := c.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: 1}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY,
			Config: &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: []byte("another program")}})
		return err
	}
	if err := other(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("another program's device config: %v", err)
	}
	broken := proto.Clone(info).(*p4config.P4Info)
	broken.Tables = broken.Tables[:1]
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY, broken, 1); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("VERIFY of a P4Info without our tables: %v", err)
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY, info, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: c.device}); status.Code(err) != codes.FailedPrecondition {
		t.Fatal("VERIFY installed the pipeline")
	}
	// SAVE then COMMIT.
	if err := set(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil, 0); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("COMMIT with nothing saved: %v", err)
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, info, 2); err != nil {
		t.Fatal(err)
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := get(p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY); got.GetCookie().GetCookie() != 2 || got.GetP4Info() != nil {
		t.Fatalf("COOKIE_ONLY after commit: %v", got)
	}
	if got := get(p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE); got.GetP4Info() == nil || got.GetP4DeviceConfig() != nil {
		t.Fatalf("P4INFO_AND_COOKIE: %v", got)
	}
	if got := get(p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE); !bytes.Equal(got.GetP4DeviceConfig(), p4.BMv2JSON) || got.GetP4Info() != nil {
		t.Fatalf("DEVICE_CONFIG_AND_COOKIE: %v", got)
	}
	if err := c.write(1, member(s, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// RECONCILE_AND_COMMIT keeps the forwarding state...
	if err := set(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, info, 3); err != nil {
		t.Fatal(err)
	}
	if got := sw.memberCount(s); got != 1 {
		t.Fatalf("after RECONCILE_AND_COMMIT %d members, want 1", got)
	}
	// ...VERIFY_AND_COMMIT starts empty, as a real target does.
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, info, 4); err != nil {
		t.Fatal(err)
	}
	if got := sw.memberCount(s); got != 0 {
		t.Fatalf("after VERIFY_AND_COMMIT %d members, want 0", got)
	}
}

func (sw *Switch) memberCount(s *p4.Schema) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.store.members[s.ProfileID(p4.ProfileECMP)])
}

func TestP4RTModifyDeleteMissing(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	mod, del := member(s, 7, 1), member(s, 8, 1)
	mod.Type, del.Type = p4v1.Update_MODIFY, p4v1.Update_DELETE
	err := c.write(1, mod, del)
	if got := updateErrors(err); !slices.Equal(got, []codes.Code{codes.NotFound, codes.NotFound}) {
		t.Fatalf("modify/delete of missing members: %v (%v)", got, err)
	}
}

// readAll reads entities and returns them.
func (c *client) readAll(t *testing.T, es ...*p4v1.Entity) []*p4v1.Entity {
	t.Helper()
	rs, err := c.Read(context.Background(), &p4v1.ReadRequest{DeviceId: c.device, Entities: es})
	if err != nil {
		t.Fatal(err)
	}
	var out []*p4v1.Entity
	for {
		resp, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetEntities()...)
	}
}

func TestP4RTWildcardReadsAndCounters(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 2, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	h1, h2 := topo.Hosts[0], topo.Hosts[1]
	pin := &p4v1.TableEntry{
		TableId: s.TableID(p4.TableFlowPin),
		Match: []*p4v1.FieldMatch{
			{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: h1.IP.AsSlice()}}},
			{FieldId: 2, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: h2.IP.AsSlice()}}},
			{FieldId: 3, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{0x03, 0xe8}}}},
		},
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionPinEgress), Params: []*p4v1.Action_Param{{ParamId: 1, Value: []byte{2}}}}}},
	}
	if err := c.write(1, member(s, 1, 1), member(s, 2, 2), &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: pin}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddFlows([]FlowSpec{{Src: h1.IP, Dst: h2.IP, SrcPort: 1000, DemandGbps: 50}}); err != nil {
		t.Fatal(err)
	}
	if fl := f.Flows(); !fl[0].Delivered || !fl[0].Hops[0].Pinned {
		t.Fatalf("pinned flow: %+v", fl[0])
	}
	got := c.readAll(t,
		&p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{}}},
		&p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: &p4v1.ActionProfileGroup{}}},
		&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}},
		&p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{}}},
	)
	kinds := map[string]int{}
	for _, e := range got {
		switch {
		case e.GetActionProfileMember() != nil:
			kinds["member"]++
		case e.GetTableEntry() != nil:
			kinds["entry"]++
			if e.GetTableEntry().GetMatch()[0].GetExact().GetValue()[0] != 10 {
				t.Errorf("entry read back with a non-canonical value: %v", e)
			}
		case e.GetCounterEntry() != nil:
			kinds["counter"]++
		}
	}
	// 2 members, 1 pin, 2 counters (rx, tx) × 3 connected ports.
	if kinds["member"] != 2 || kinds["entry"] != 1 || kinds["counter"] != 6 {
		t.Errorf("wildcard read: %v", kinds)
	}
	// The pin's direct counter advances with the flow.
	readPin := func() int64 {
		es := c.readAll(t, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin)}}}})
		if len(es) != 1 {
			t.Fatalf("direct counter read returned %d entities", len(es))
		}
		return es[0].GetDirectCounterEntry().GetData().GetByteCount()
	}
	first := readPin()
	deadline := time.Now().Add(10 * time.Second)
	for readPin() <= first {
		if time.Now().After(deadline) {
			t.Fatal("flow-pin counter does not advance")
		}
		<-time.After(20 * time.Millisecond)
	}
	// Counter data on a table read, when asked for.
	es := c.readAll(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin), CounterData: &p4v1.CounterData{}}}})
	if len(es) != 1 || es[0].GetTableEntry().GetCounterData().GetByteCount() == 0 {
		t.Errorf("table read with counter_data: %v", es)
	}
}

func lldpFrame() []byte {
	frame := make([]byte, 64)
	copy(frame, []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}) // LLDP multicast
	binary.BigEndian.PutUint16(frame[12:], 0x88cc)
	return frame
}

func TestP4RTPacketOutBecomesPacketInAtTheNeighbour(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	leaf, ls := primary(t, f.Switch("leaf1"))
	spine, ss := primary(t, f.Switch("spine1"))
	punt := &p4v1.TableEntry{
		TableId: ss.TableID(p4.TablePunt),
		Match:   []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{0x88, 0xcc}}}}},
		Action:  &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: ss.ActionID(p4.ActionSendToCPU)}}},
	}
	if err := spine.write(1, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: punt}}}); err != nil {
		t.Fatal(err)
	}
	// leaf1's uplink to spine1 is port 2; spine1 sees leaf1 on port 1.
	out := &p4v1.PacketOut{Payload: lldpFrame(), Metadata: []*p4v1.PacketMetadata{{MetadataId: ls.ControllerMetadataID("packet_out", "egress_port"), Value: []byte{2}}}}
	if err := leaf.stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: out}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := spine.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		in := resp.GetPacket()
		if in == nil {
			continue
		}
		if len(in.GetPayload()) != 64 || in.GetMetadata()[0].GetMetadataId() != ss.ControllerMetadataID("packet_in", "ingress_port") || in.GetMetadata()[0].GetValue()[0] != 1 {
			t.Fatalf("packet-in: %v", in)
		}
		break
	}
	// A packet-out without its port metadata is reported as a stream error.
	if err := leaf.stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: lldpFrame()}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := leaf.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetError(); e != nil {
			if codes.Code(e.GetCanonicalCode()) != codes.InvalidArgument || e.GetPacketOut() == nil {
				t.Fatalf("stream error: %v", e)
			}
			break
		}
	}
}

// gnmiClient opens a gNMI client on the switch.
func gnmiClient(t *testing.T, sw *Switch) gnmipb.GNMIClient {
	return gnmipb.NewGNMIClient(dial(t, sw).cc)
}

func statePath(name string, leaf ...string) *gnmipb.Path {
	return interfacePath(name, append([]string{"state"}, leaf...)...)
}

func TestGNMICapabilitiesGetAndValidation(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 2, 100)
	f := run(t, topo)
	g := gnmiClient(t, f.Switch("leaf1"))
	ctx := context.Background()
	caps, err := g.Capabilities(ctx, &gnmipb.CapabilityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(caps.GetSupportedEncodings(), gnmipb.Encoding_JSON_IETF) || !slices.Contains(caps.GetSupportedEncodings(), gnmipb.Encoding_PROTO) {
		t.Errorf("encodings: %v", caps.GetSupportedEncodings())
	}
	// Wildcard Get: oper-status of every interface (2 hosts + 2 uplinks).
	resp, err := g.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{statePath("*", "oper-status")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetNotification()) != 4 {
		t.Errorf("wildcard get returned %d notifications, want 4", len(resp.GetNotification()))
	}
	// Everything served validates against the OpenConfig schema.
	all, err := g.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{{Elem: []*gnmipb.PathElem{{Name: "interfaces"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all.GetNotification() {
		for _, u := range n.GetUpdate() {
			if err := validateOC(u.GetPath(), u.GetVal()); err != nil {
				t.Errorf("served value does not fit the OpenConfig model: %v", err)
			}
		}
	}
	// JSON_IETF encodes 64-bit counters as strings (RFC 7951).
	js, err := g.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_JSON_IETF, Path: []*gnmipb.Path{statePath("eth1", "counters", "in-octets")}})
	if err != nil {
		t.Fatal(err)
	}
	if v := string(js.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()); !strings.HasPrefix(v, `"`) {
		t.Errorf("JSON_IETF counter = %s, want a quoted number", v)
	}
	if _, err := g.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_ASCII, Path: []*gnmipb.Path{statePath("eth1", "oper-status")}}); status.Code(err) != codes.Unimplemented {
		t.Errorf("ASCII encoding: %v", err)
	}
	if _, err := g.Get(ctx, &gnmipb.GetRequest{Prefix: &gnmipb.Path{Target: "spine1"}, Path: []*gnmipb.Path{statePath("eth1", "oper-status")}}); status.Code(err) != codes.NotFound {
		t.Errorf("another switch's target: %v", err)
	}
}

func TestGNMISetChangesTheDataplane(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	g := gnmiClient(t, f.Switch("leaf1"))
	ctx := context.Background()
	cfg := func(leaf string) *gnmipb.Path { return interfacePath("eth2", "config", leaf) }
	// An invalid value anywhere in the request changes nothing.
	_, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{
		{Path: cfg("description"), Val: strVal("uplink to spine1")},
		{Path: cfg("mtu"), Val: strVal("jumbo")},
	}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("invalid mtu: %v", err)
	}
	if got := f.Switch("leaf1").gnmi.ifConfig(2); got.Description != "" {
		t.Fatal("a rejected Set was partly applied")
	}
	if _, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: cfg("nosuch"), Val: strVal("x")}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown leaf: %v", err)
	}
	if _, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: interfacePath("eth9", "config", "mtu"), Val: uintVal(4200)}}}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown interface: %v", err)
	}
	// MTU and description, then disabling the uplink.
	if _, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{
		{Path: cfg("mtu"), Val: uintVal(4200)},
		{Path: cfg("description"), Val: strVal("uplink to spine1")},
	}}); err != nil {
		t.Fatal(err)
	}
	resp, err := g.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{statePath("eth2", "mtu")}})
	if err != nil || resp.GetNotification()[0].GetUpdate()[0].GetVal().GetUintVal() != 4200 {
		t.Fatalf("state/mtu after Set: %v %v", resp, err)
	}
	if _, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: cfg("enabled"), Val: boolVal(false)}}}); err != nil {
		t.Fatal(err)
	}
	// The link is down at both ends.
	spine := gnmiClient(t, f.Switch("spine1"))
	peer, err := spine.Get(ctx, &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{statePath("eth1", "oper-status")}})
	if err != nil || peer.GetNotification()[0].GetUpdate()[0].GetVal().GetStringVal() != "DOWN" {
		t.Fatalf("peer oper-status: %v %v", peer, err)
	}
	l, _ := f.snap.LinkAt(models.Endpoint{Switch: "leaf1", Port: 2})
	f.mu.Lock()
	up := f.linkUpLocked(l)
	f.mu.Unlock()
	if up {
		t.Fatal("dataplane still uses a disabled link")
	}
	// Deleting the config restores the default (enabled).
	if _, err := g.Set(ctx, &gnmipb.SetRequest{Delete: []*gnmipb.Path{interfacePath("eth2", "config")}}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	up = f.linkUpLocked(l)
	f.mu.Unlock()
	if !up {
		t.Fatal("link still down after the config was deleted")
	}
}

// recvUntil reads a subscription until done returns true or the stream ends.
func recvUntil(t *testing.T, sub gnmipb.GNMI_SubscribeClient, done func(*gnmipb.SubscribeResponse) bool) {
	t.Helper()
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
		if done(resp) {
			return
		}
	}
}

func openSubscription(t *testing.T, g gnmipb.GNMIClient, list *gnmipb.SubscriptionList) gnmipb.GNMI_SubscribeClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	sub, err := g.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list.GetEncoding() == gnmipb.Encoding_JSON {
		list.Encoding = gnmipb.Encoding_PROTO
	}
	if err := sub.Send(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Subscribe{Subscribe: list}}); err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestGNMISubscribeOnceAndPoll(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 2, 100)
	f := run(t, topo)
	g := gnmiClient(t, f.Switch("leaf1"))
	once := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_ONCE,
		Subscription: []*gnmipb.Subscription{{Path: statePath("*", "oper-status")}}})
	updates, syncs := 0, 0
	for {
		resp, err := once.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSyncResponse() {
			syncs++
		} else {
			updates++
			if syncs > 0 {
				t.Error("update after sync_response in ONCE mode")
			}
		}
	}
	if updates != 3 || syncs != 1 {
		t.Errorf("ONCE: %d updates, %d syncs; want 3 and 1", updates, syncs)
	}

	poll := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_POLL,
		Subscription: []*gnmipb.Subscription{{Path: statePath("eth1", "counters", "in-octets")}}})
	for round := range 3 {
		if round > 0 {
			if err := poll.Send(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Poll{Poll: &gnmipb.Poll{}}}); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		recvUntil(t, poll, func(r *gnmipb.SubscribeResponse) bool {
			if r.GetUpdate() != nil {
				got++
			}
			return r.GetSyncResponse()
		})
		if got != 1 {
			t.Errorf("poll %d: %d updates before sync, want 1", round, got)
		}
	}
}

func TestGNMISubscribeStreamModes(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	g := gnmiClient(t, f.Switch("leaf1"))

	// ON_CHANGE with a heartbeat: oper-status of the uplink. Exactly one
	// sync_response; then a link-down arrives as a change.
	onChange := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_STREAM,
		Subscription: []*gnmipb.Subscription{{Path: statePath("eth2", "oper-status"), Mode: gnmipb.SubscriptionMode_ON_CHANGE, HeartbeatInterval: uint64(50 * time.Millisecond)}}})
	recvUntil(t, onChange, func(r *gnmipb.SubscribeResponse) bool { return r.GetSyncResponse() })
	heartbeats := 0
	recvUntil(t, onChange, func(r *gnmipb.SubscribeResponse) bool {
		if r.GetSyncResponse() {
			t.Fatal("a second sync_response")
		}
		heartbeats++
		return heartbeats == 2 // unchanged UP values re-sent by the heartbeat
	})
	l, _ := f.snap.LinkAt(models.Endpoint{Switch: "leaf1", Port: 2})
	if err := f.InjectFault(FaultSpec{Kind: FaultLinkDown, Target: string(l.ID())}); err != nil {
		t.Fatal(err)
	}
	recvUntil(t, onChange, func(r *gnmipb.SubscribeResponse) bool {
		for _, u := range r.GetUpdate().GetUpdate() {
			if u.GetVal().GetStringVal() == "DOWN" {
				return true
			}
		}
		return false
	})

	// SAMPLE honours sample_interval: two subscriptions on one stream,
	// 40 ms and 400 ms, over values that do not change; by the time the
	// slow one has sent 3 samples the fast one has sent several times as
	// many (a ratio, so a loaded machine slows both alike).
	sample := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_STREAM, UpdatesOnly: true,
		Subscription: []*gnmipb.Subscription{
			{Path: statePath("eth1", "counters", "in-octets"), Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: uint64(40 * time.Millisecond)},
			{Path: statePath("eth1", "counters", "out-octets"), Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: uint64(400 * time.Millisecond)},
		}})
	fast, slow := 0, 0
	recvUntil(t, sample, func(r *gnmipb.SubscribeResponse) bool {
		for _, u := range r.GetUpdate().GetUpdate() {
			switch u.GetPath().GetElem()[len(u.GetPath().GetElem())-1].GetName() {
			case "in-octets":
				fast++
			case "out-octets":
				slow++
			}
		}
		return slow == 3
	})
	if fast < 3*slow {
		t.Errorf("40ms subscription sent %d samples while the 400ms one sent %d", fast, slow)
	}

	// TARGET_DEFINED: counters are sampled, status is sent on change;
	// both arrive, validated against the model.
	td := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_STREAM,
		Subscription: []*gnmipb.Subscription{{Path: statePath("*"), Mode: gnmipb.SubscriptionMode_TARGET_DEFINED}}})
	syncs := 0
	recvUntil(t, td, func(r *gnmipb.SubscribeResponse) bool {
		if r.GetSyncResponse() {
			syncs++
			return true
		}
		for _, u := range r.GetUpdate().GetUpdate() {
			if err := validateOC(u.GetPath(), u.GetVal()); err != nil {
				t.Errorf("streamed value does not fit the model: %v", err)
			}
		}
		return false
	})
	if syncs != 1 {
		t.Errorf("%d sync responses", syncs)
	}

	// Bad requests.
	bad := openSubscription(t, g, &gnmipb.SubscriptionList{Mode: gnmipb.SubscriptionList_STREAM,
		Subscription: []*gnmipb.Subscription{{Path: statePath("eth1"), Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: 10}}})
	if _, err := bad.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("10ns sample interval: %v", err)
	}
}

func TestSwitchDownAndRestart(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("spine1")
	c, s := primary(t, sw)
	if err := c.write(1, member(s, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.InjectFault(FaultSpec{Kind: FaultSwitchDown, Target: "spine1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.stream.Recv(); err == nil {
		t.Fatal("stream survived the switch going down")
	}
	if err := c.write(1, member(s, 2, 2)); status.Code(err) != codes.Unavailable {
		t.Fatalf("write to a down switch: %v", err)
	}
	leaf := gnmiClient(t, f.Switch("leaf1"))
	resp, err := leaf.Get(context.Background(), &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{statePath("eth2", "oper-status")}})
	if err != nil || resp.GetNotification()[0].GetUpdate()[0].GetVal().GetStringVal() != "DOWN" {
		f.tick(time.Now())
		resp, err = leaf.Get(context.Background(), &gnmipb.GetRequest{Encoding: gnmipb.Encoding_PROTO, Path: []*gnmipb.Path{statePath("eth2", "oper-status")}})
		if err != nil || resp.GetNotification()[0].GetUpdate()[0].GetVal().GetStringVal() != "DOWN" {
			t.Fatalf("the neighbour's port stays up: %v %v", resp, err)
		}
	}
	if err := f.InjectFault(FaultSpec{Kind: FaultSwitchUp, Target: "spine1"}); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, sw)
	c2.arbitrate(t, 1)
	if err := c2.write(1, member(s, 1, 1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a restarted switch should have no pipeline: %v", err)
	}
	// Injected write errors and their clearing.
	c2.setPipeline(t, 1)
	if err := f.InjectFault(FaultSpec{Kind: FaultWriteError, Target: "spine1", Code: "RESOURCE_EXHAUSTED"}); err != nil {
		t.Fatal(err)
	}
	if err := c2.write(1, member(s, 1, 1)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("injected error: %v", err)
	}
	if err := f.InjectFault(FaultSpec{Kind: FaultWriteError, Target: "spine1", Code: "OK"}); err != nil {
		t.Fatal(err)
	}
	if err := c2.write(1, member(s, 1, 1)); err != nil {
		t.Fatalf("after clearing: %v", err)
	}
	if got := f.Faults(); len(got.History) != 4 || len(got.SwitchesDown) != 0 {
		t.Errorf("fault record: %+v", got)
	}
	if err := f.InjectFault(FaultSpec{Kind: "meteor", Target: "spine1"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("unknown fault kind: %v", err)
	}
}

// TestInteropGNMICLI drives fabricsim with gnmi_cli, the gnmi module's own
// client, built from the tools module.
func TestInteropGNMICLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gnmi_cli")
	}
	bin := filepath.Join(t.TempDir(), "gnmi_cli")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/openconfig/gnmi/cmd/gnmi_cli")
	build.Dir = filepath.Join("..", "tools")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gnmi_cli: %v\n%s", err, out)
	}
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	addr := f.Switch("leaf1").Addr()
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"-a", addr, "-insecure", "-logtostderr", "-timeout", "10s"}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		// A timed streaming query ends with the client's own deadline.
		if err != nil && !strings.Contains(string(out), "DeadlineExceeded") {
			t.Fatalf("gnmi_cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := cli("-capabilities"); !strings.Contains(out, "openconfig-interfaces") {
		t.Errorf("capabilities: %s", out)
	}
	if out := cli("-t", "leaf1", "-q", "interfaces/interface[name=*]/state/oper-status", "-qt", "once"); strings.Count(out, "UP") != 2 {
		t.Errorf("subscribe once: %s", out)
	}
	if out := cli("-t", "leaf1", "-q", "interfaces/interface[name=eth1]/state/counters/in-octets", "-qt", "polling", "-pi", "50ms", "-c", "2"); !strings.Contains(out, "in-octets") {
		t.Errorf("subscribe poll: %s", out)
	}
	if out := cli("-t", "leaf1", "-q", "interfaces/interface[name=eth1]/state/counters/out-octets", "-qt", "streaming", "-streaming_duration", "300ms"); !strings.Contains(out, "out-octets") {
		t.Errorf("subscribe stream: %s", out)
	}
	if out := cli("-get", "-proto", `path: <elem: <name: "interfaces"> elem: <name: "interface" key: <key: "name" value: "eth2">> elem: <name: "state"> elem: <name: "admin-status">> encoding: PROTO`); !strings.Contains(out, "UP") {
		t.Errorf("get: %s", out)
	}
	cli("-set", "-proto", `update: <path: <elem: <name: "interfaces"> elem: <name: "interface" key: <key: "name" value: "eth2">> elem: <name: "config"> elem: <name: "description">> val: <string_val: "set by gnmi_cli">>`)
	if got := f.Switch("leaf1").gnmi.ifConfig(2).Description; got != "set by gnmi_cli" {
		t.Errorf("description after gnmi_cli set: %q", got)
	}
}

func TestDisconnectAndSlowWrites(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	c, s := primary(t, sw)
	if err := c.write(1, member(s, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// A disconnect drops the stream but keeps the switch's state.
	if err := f.InjectFault(FaultSpec{Kind: FaultDisconnect, Target: "leaf1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.stream.Recv(); err == nil {
		t.Fatal("stream survived a disconnect")
	}
	c2 := dial(t, sw)
	if got := c2.arbitrate(t, 1); got != code.Code_OK {
		t.Fatalf("reconnect: %s", got)
	}
	if got := sw.memberCount(s); got != 1 {
		t.Fatalf("disconnect lost state: %d members", got)
	}
	// Slow writes: a client whose deadline is shorter than the delay times out.
	if err := f.InjectFault(FaultSpec{Kind: FaultSlowWrites, Target: "leaf1", DelayMS: 2000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c2.Write(ctx, &p4v1.WriteRequest{DeviceId: c2.device, ElectionId: &p4v1.Uint128{Low: 1}, Updates: []*p4v1.Update{member(s, 2, 2)}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("write to a slow switch with a short deadline: %v", err)
	}
	if got := f.Faults().SlowWritesMS["leaf1"]; got != 2000 {
		t.Errorf("slow writes reported as %d ms", got)
	}
	if err := f.InjectFault(FaultSpec{Kind: FaultSlowWrites, Target: "leaf1", DelayMS: 0}); err != nil {
		t.Fatal(err)
	}
	if err := c2.write(1, member(s, 2, 2)); err != nil {
		t.Fatalf("after clearing slow writes: %v", err)
	}
}

// TestP4RTFlowSampleDigests: a DigestEntry is validated like any entity
// (unknown ID, double INSERT), and once it and a flow_sample entry for the
// host's port are in, the flows that host sends are reported in
// flow_sample_t digest lists on the primary's stream (sampled before
// forwarding: here the leaf has no routes and drops them).
func TestP4RTFlowSampleDigests(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	id := s.DigestID(p4.DigestFlowSample)
	digest := func(typ p4v1.Update_Type, id uint32) *p4v1.Update {
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{
			DigestId: id, Config: &p4v1.DigestEntry_Config{MaxListSize: 2, MaxTimeoutNs: 1e6}}}}}
	}
	if got := updateErrors(c.write(1, digest(p4v1.Update_INSERT, 0x17000099))); !slices.Equal(got, []codes.Code{codes.NotFound}) {
		t.Fatalf("unknown digest: %v", got)
	}
	if err := c.write(1, digest(p4v1.Update_INSERT, id)); err != nil {
		t.Fatal(err)
	}
	if got := updateErrors(c.write(1, digest(p4v1.Update_INSERT, id))); !slices.Equal(got, []codes.Code{codes.AlreadyExists}) {
		t.Fatalf("second insert: %v", got)
	}
	if got := c.readAll(t, &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id}}}); len(got) != 1 || got[0].GetDigestEntry().GetConfig().GetMaxListSize() != 2 {
		t.Fatalf("read back: %v", got)
	}
	prm, _ := s.Param(p4.ActionSample, p4.ParamOneIn)
	sample := &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowSample),
		Match: []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableFlowSample, p4.FieldIngressPort), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{1}}}}},
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSample),
			Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: []byte{0x04, 0x00}}}}}}}
	if err := c.write(1, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: sample}}}); err != nil {
		t.Fatal(err)
	}
	spec := FlowSpec{Src: topo.Hosts[0].IP, Dst: topo.Hosts[1].IP, SrcPort: 49200, DemandGbps: 100}
	if _, err := f.AddFlows([]FlowSpec{spec}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		list := resp.GetDigest()
		if list == nil {
			continue
		}
		if list.GetDigestId() != id || len(list.GetData()) == 0 || len(list.GetData()) > 2 {
			t.Fatalf("digest list: %v", list)
		}
		m := list.GetData()[0].GetStruct().GetMembers()
		if len(m) != 5 || p4.Uint(m[0].GetBitstring()) != 1 || p4.Addr(m[1].GetBitstring()) != spec.Src || p4.Addr(m[2].GetBitstring()) != spec.Dst || p4.Uint(m[3].GetBitstring()) != 49200 {
			t.Fatalf("sample: %v", m)
		}
		if err := c.stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_DigestAck{DigestAck: &p4v1.DigestListAck{DigestId: id, ListId: list.GetListId()}}}); err != nil {
			t.Fatal(err)
		}
		break
	}
}

// TestSampledPortsFollowWrites: the sampler's view of what a leaf samples
// is read once per change of its tables — kept while nothing is written,
// read again after a flow_sample entry goes in and after it goes out —
// and the sampler knows when no switch samples at all.
func TestSampledPortsFollowWrites(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	c, s := primary(t, sw)
	sampled := func() map[uint32]uint64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		ports := f.sampledPortsLocked(sw)
		if any := f.anySampledLocked(); any != (len(ports) > 0) {
			t.Fatalf("some switch samples: %v, but leaf1 (the only one that may) samples %v", any, ports)
		}
		return ports
	}
	if err := c.write(1, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{
		DigestId: s.DigestID(p4.DigestFlowSample), Config: &p4v1.DigestEntry_Config{MaxListSize: 2, MaxTimeoutNs: 1e6}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := sampled(); len(got) != 0 {
		t.Fatalf("sampled before any flow_sample entry: %v", got)
	}
	prm, _ := s.Param(p4.ActionSample, p4.ParamOneIn)
	entry := &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowSample),
		Match: []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableFlowSample, p4.FieldIngressPort), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{1}}}}},
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSample),
			Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: []byte{0x04, 0x00}}}}}}}}}
	if err := c.write(1, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: entry}); err != nil {
		t.Fatal(err)
	}
	first := sampled()
	if !maps.Equal(first, map[uint32]uint64{1: 1024}) {
		t.Fatalf("sampled after the insert: %v, want port 1 one in 1024", first)
	}
	if again := sampled(); reflect.ValueOf(again).Pointer() != reflect.ValueOf(first).Pointer() {
		t.Fatal("read again although nothing was written")
	}
	if err := c.write(1, &p4v1.Update{Type: p4v1.Update_DELETE, Entity: entry}); err != nil {
		t.Fatal(err)
	}
	if got := sampled(); len(got) != 0 {
		t.Fatalf("sampled after the delete: %v", got)
	}
}

// TestP4RTDefaultEntriesAndDigestReads: as PI answers on BMv2 — the
// hash_seed table's default entry can be modified and read back (and
// seeds the selector hash), not inserted; a const default is refused
// (PERMISSION_DENIED), as is a default on a table an action selector
// implements (UNIMPLEMENTED); reading a digest not configured yet is
// NOT_FOUND, and reading digests needs an ID.
func TestP4RTDefaultEntriesAndDigestReads(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	sw := f.Switch("leaf1")
	c, s := primary(t, sw)
	prm, _ := s.Param(p4.ActionSetHashSeed, p4.ParamSeed)
	seedEntry := func(table string, seed byte) *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: s.TableID(table), IsDefaultAction: true,
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetHashSeed),
				Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: []byte{0, 0, 0, seed}}}}}}}
	}
	up := func(typ p4v1.Update_Type, e *p4v1.TableEntry) *p4v1.Update {
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}}
	}
	if err := c.write(1, up(p4v1.Update_MODIFY, seedEntry(p4.TableHashSeed, 42))); err != nil {
		t.Fatal(err)
	}
	got := c.readAll(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableHashSeed), IsDefaultAction: true}}})
	if len(got) != 1 || p4.Uint(got[0].GetTableEntry().GetAction().GetAction().GetParams()[0].GetValue()) != 42 {
		t.Fatalf("default entry read back as %v", got)
	}
	sw.mu.Lock()
	seed := sw.compileFIBLocked().seed
	sw.mu.Unlock()
	if seed != 42 {
		t.Errorf("the selector hashes with seed %d, want the default entry's 42", seed)
	}
	for _, tc := range []struct {
		name string
		u    *p4v1.Update
		want codes.Code
	}{
		{"insert a default entry", up(p4v1.Update_INSERT, seedEntry(p4.TableHashSeed, 1)), codes.InvalidArgument},
		{"modify a const default", up(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin), IsDefaultAction: true,
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionNop)}}}}), codes.PermissionDenied},
		{"a default on the selector's table", up(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: s.TableID(p4.TableIPv4LPM), IsDefaultAction: true,
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionDrop)}}}}), codes.Unimplemented},
	} {
		if got := updateErrors(c.write(1, tc.u)); !slices.Equal(got, []codes.Code{tc.want}) {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
	read := func(id uint32) error {
		rs, err := c.Read(context.Background(), &p4v1.ReadRequest{DeviceId: c.device, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id}}}}})
		if err != nil {
			return err
		}
		_, err = rs.Recv()
		return err
	}
	if err := read(s.DigestID(p4.DigestFlowSample)); status.Code(err) != codes.NotFound {
		t.Errorf("reading a digest not configured: %v, want NOT_FOUND", err)
	}
	if err := read(0); status.Code(err) != codes.Unimplemented {
		t.Errorf("reading digests without an ID: %v, want UNIMPLEMENTED", err)
	}
}

// TestGNMIAsIndependentClientsUseIt: what an independent gNMI client
// (gnmic) sends works: Set in every encoding Capabilities lists (JSON
// included), JSON_IETF numbers as RFC 7951 has them (a uint16 MTU is a
// number, a counter64 a string), and paths whose origin is "openconfig".
func TestGNMIAsIndependentClientsUseIt(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 2, 100)
	f := run(t, topo)
	g := gnmiClient(t, f.Switch("leaf1"))
	ctx := context.Background()
	mtu := func(port int) *gnmipb.Path {
		return &gnmipb.Path{Origin: "openconfig", Elem: []*gnmipb.PathElem{{Name: "interfaces"},
			{Name: "interface", Key: map[string]string{"name": models.InterfaceName(uint32(port))}}, {Name: "config"}, {Name: "mtu"}}}
	}
	for _, tc := range []struct {
		name string
		val  *gnmipb.TypedValue
	}{
		{"JSON", &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonVal{JsonVal: []byte("4000")}}},
		{"JSON_IETF", &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("4100")}}},
		{"PROTO", &gnmipb.TypedValue{Value: &gnmipb.TypedValue_UintVal{UintVal: 4200}}},
	} {
		if _, err := g.Set(ctx, &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: mtu(1), Val: tc.val}}}); err != nil {
			t.Errorf("Set mtu in %s with origin openconfig: %v", tc.name, err)
		}
	}
	resp, err := g.Get(ctx, &gnmipb.GetRequest{Path: []*gnmipb.Path{mtu(1)}, Encoding: gnmipb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatalf("Get with origin openconfig: %v", err)
	}
	if len(resp.GetNotification()) == 0 || len(resp.GetNotification()[0].GetUpdate()) == 0 ||
		string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()) != "4200" {
		t.Fatalf("mtu in JSON_IETF: %v, want the number 4200", resp)
	}
	counter := &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": models.InterfaceName(1)}}, {Name: "state"}, {Name: "counters"}, {Name: "in-octets"}}}
	resp, err = g.Get(ctx, &gnmipb.GetRequest{Path: []*gnmipb.Path{counter}, Encoding: gnmipb.Encoding_JSON_IETF})
	if err != nil {
		t.Fatal(err)
	}
	if v := string(resp.GetNotification()[0].GetUpdate()[0].GetVal().GetJsonIetfVal()); !strings.HasPrefix(v, `"`) {
		t.Errorf("a counter64 in JSON_IETF is %s, want a string (RFC 7951)", v)
	}
	if _, err := g.Get(ctx, &gnmipb.GetRequest{Path: []*gnmipb.Path{{Origin: "openconfig-other", Elem: mtu(1).GetElem()}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an origin not served: %v, want INVALID_ARGUMENT", err)
	}
}

// validateOC checks a path and value against the ygot-generated OpenConfig
// schema, as a real target would before accepting or serving it.
func validateOC(p *gnmipb.Path, v *gnmipb.TypedValue) error {
	return ytypes.SetNode(oc.SchemaTree["Device"], &oc.Device{}, p, v, &ytypes.InitMissingElements{})
}

// TestDecodeConfigAsFromTheRoot: Set checks and decodes a value from the
// interface's config container; that must accept, refuse and decode
// exactly what the schema checked from the device's root does.
func TestDecodeConfigAsFromTheRoot(t *testing.T) {
	js := func(s string) *gnmipb.TypedValue {
		return &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(s)}}
	}
	values := []*gnmipb.TypedValue{
		boolVal(true), boolVal(false), uintVal(0), uintVal(68), uintVal(9000), uintVal(65535), uintVal(65536),
		{Value: &gnmipb.TypedValue_IntVal{IntVal: 4200}}, {Value: &gnmipb.TypedValue_IntVal{IntVal: -1}},
		strVal(""), strVal("uplink to spine1"), strVal("jumbo"), strVal("true"),
		{Value: &gnmipb.TypedValue_FloatVal{FloatVal: 1.5}}, {Value: &gnmipb.TypedValue_BytesVal{BytesVal: []byte("x")}},
		js("true"), js("4100"), js(`"4100"`), js(`"a description"`), js("70000"), js("{}"), js("not json"),
		js(`{"mtu": 9000, "enabled": false, "description": "to spine1"}`),
		js(`{"openconfig-interfaces:mtu": 1500}`), js(`{"mtu": 70000}`), js(`{"mtu": "9000"}`),
		js(`{"nosuch": 1}`), js(`{"enabled": "yes"}`), js(`{"name": "eth2", "type": "iana-if-type:ethernetCsmacd"}`),
		{},
	}
	accepted := 0
	for _, leaf := range []string{"enabled", "mtu", "description", "name", "type", "loopback-mode", ""} {
		for _, v := range values {
			path := interfacePath("eth2", "config", leaf)
			if leaf == "" {
				path = interfacePath("eth2", "config")
			}
			dev := &oc.Device{}
			rootErr := ytypes.SetNode(oc.SchemaTree["Device"], dev, path, v, &ytypes.InitMissingElements{})
			got, err := decodeConfig(path.GetElem()[3:], v)
			if (err == nil) != (rootErr == nil) {
				t.Errorf("%s = %v: from the container %v, from the root %v", leaf, v, err, rootErr)
				continue
			}
			if err != nil {
				continue
			}
			accepted++
			want := dev.GetInterfaces().GetInterface("eth2").GetConfig()
			if want == nil {
				want = &oc.OpenconfigInterfaces_Interfaces_Interface_Config{}
			}
			if !reflect.DeepEqual(want, got) {
				w, _ := json.Marshal(want)
				g, _ := json.Marshal(got)
				t.Errorf("%s = %v decoded as %s from the container, %s from the root", leaf, v, g, w)
			}
		}
	}
	if accepted < 10 {
		t.Fatalf("only %d values accepted: the comparison says little", accepted)
	}
}

// TestMatchKey: an entry's key names each match field by ID and its
// value in hex (an LPM one with its prefix length), in field order.
func TestMatchKey(t *testing.T) {
	e := &p4v1.TableEntry{Match: []*p4v1.FieldMatch{
		{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{0x0a, 0xff}}}},
		{FieldId: 12, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{10, 0, 0, 0}, PrefixLen: 8}}},
	}}
	if got, want := matchKey(e), "1=0aff;12=0a000000/8;"; got != want {
		t.Fatalf("matchKey = %q, want %q", got, want)
	}
}

// BenchmarkDecodeConfig: one config leaf as accelnet sets it (a typed
// mtu) and as JSON (through ygot).
//
//	go test ./fabricsim -run '^$' -bench DecodeConfig -benchmem
func BenchmarkDecodeConfig(b *testing.B) {
	leaf := interfacePath("eth2", "config", "mtu").GetElem()[3:]
	for _, c := range []struct {
		name string
		v    *gnmipb.TypedValue
	}{
		{"typed", uintVal(9000)},
		{"json", &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: []byte("9000")}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeConfig(leaf, c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
