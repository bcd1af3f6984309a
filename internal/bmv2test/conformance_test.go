package bmv2test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// answer is what a switch said to one request: the call's code and, for
// a batch, every update's.
type answer struct {
	Code    codes.Code
	Updates []codes.Code
}

func (a answer) String() string {
	if len(a.Updates) == 0 {
		return a.Code.String()
	}
	return fmt.Sprintf("%s %v", a.Code, a.Updates)
}

func answerOf(err error) answer {
	st := status.Convert(err)
	a := answer{Code: st.Code()}
	for _, d := range st.Details() {
		if pe, ok := d.(*p4v1.Error); ok {
			a.Updates = append(a.Updates, codes.Code(pe.GetCanonicalCode()))
		}
	}
	return a
}

// readAnswer reads e from device through x's switch, to the end of the
// stream, and says how it was answered.
func readAnswer(x *p4Session, device uint64, e *p4v1.Entity) answer {
	rs, err := x.c.Read(context.Background(), &p4v1.ReadRequest{DeviceId: device, Entities: []*p4v1.Entity{e}})
	if err != nil {
		return answerOf(err)
	}
	for {
		if _, err := rs.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return answer{}
			}
			return answerOf(err)
		}
	}
}

// step is one request of the replay, and how to send it.
type step struct {
	name string
	run  func(*p4Session) answer
}

// p4Session is one P4Runtime client of one switch.
type p4Session struct {
	c      p4v1.P4RuntimeClient
	device uint64
	stream p4v1.P4Runtime_StreamChannelClient
}

func openSession(t *testing.T, addr string, device uint64) *p4Session {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &p4Session{c: p4v1.NewP4RuntimeClient(cc), device: device}
}

// arbitrate opens the stream and returns the arbitration's status code.
func (s *p4Session) arbitrate(t *testing.T, election uint64) code.Code {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := s.c.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.stream = st
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: s.device, ElectionId: &p4v1.Uint128{Low: election}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if a := resp.GetArbitration(); a != nil {
			return code.Code(a.GetStatus().GetCode())
		}
	}
}

// arbitrateAnswer opens a stream to addr and arbitrates as the given
// client: the stream's error code, or the arbitration's status.
func arbitrateAnswer(t *testing.T, addr string, device, election uint64, role string) codes.Code {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := p4v1.NewP4RuntimeClient(cc).StreamChannel(ctx)
	if err != nil {
		return status.Code(err)
	}
	a := &p4v1.MasterArbitrationUpdate{DeviceId: device, ElectionId: &p4v1.Uint128{Low: election}}
	if role != "" {
		a.Role = &p4v1.Role{Name: role}
	}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: a}}); err != nil {
		return status.Code(err)
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return status.Code(err)
		}
		if a := resp.GetArbitration(); a != nil {
			return codes.Code(a.GetStatus().GetCode())
		}
	}
}

// TestFabricsimAnswersAsBMv2 replays the same P4Runtime requests against
// a fabricsim switch and a BMv2 switch (simple_switch_grpc with PI) and
// compares every answer: codes of calls and of each update in a batch —
// arbitration, a pipeline read before any is set, the push, writes good
// and bad (missing references, duplicates, widths, a default entry),
// wildcard reads, a digest read before it is configured.
func TestFabricsimAnswersAsBMv2(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	topo := selectorTopology(t)
	lab := NewLab(t, bin)
	for port := uint32(1); port <= 2; port++ {
		lab.Stub(models.Endpoint{Switch: "leaf1", Port: port})
	}
	for port := uint32(9); port <= 12; port++ {
		lab.Stub(models.Endpoint{Switch: "leaf1", Port: port})
	}
	hwAddr := lab.Start(models.Switch{Name: "leaf1", DeviceID: 1})
	fab := fabrictest.StartFabric(t, topo)
	simAddr := fab.Switch("leaf1").Addr()
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	s := schema
	ctx := context.Background()
	member := func(id uint32, port []byte) *p4v1.Update {
		prm, _ := s.Param(p4.ActionSetEgress, p4.ParamPort)
		return &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{
			ActionProfileId: s.ProfileID(p4.ProfileECMP), MemberId: id,
			Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetEgress), Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: port}}}}}}}
	}
	group := func(typ p4v1.Update_Type, id uint32, members ...uint32) *p4v1.Update {
		g := &p4v1.ActionProfileGroup{ActionProfileId: s.ProfileID(p4.ProfileECMP), GroupId: id}
		for _, m := range members {
			g.Members = append(g.Members, &p4v1.ActionProfileGroup_Member{MemberId: m, Weight: 1})
		}
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: g}}}
	}
	route := func(prefix string, bits int32, groupID uint32) *p4v1.Update {
		var v [4]byte
		fmt.Sscanf(prefix, "%d.%d.%d.%d", &v[0], &v[1], &v[2], &v[3])
		return &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{
			TableId: s.TableID(p4.TableIPv4LPM),
			Match: []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst),
				FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v[:], PrefixLen: bits}}}},
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: groupID}}}}}}
	}
	seedDefault := func(typ p4v1.Update_Type) *p4v1.Update {
		prm, _ := s.Param(p4.ActionSetHashSeed, p4.ParamSeed)
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{
			TableId: s.TableID(p4.TableHashSeed), IsDefaultAction: true,
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetHashSeed),
				Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: []byte{0, 0, 0, 9}}}}}}}}}}
	}
	write := func(updates ...*p4v1.Update) func(*p4Session) answer {
		return func(x *p4Session) answer {
			_, err := x.c.Write(ctx, &p4v1.WriteRequest{DeviceId: x.device, ElectionId: &p4v1.Uint128{Low: 10}, Updates: updates,
				Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR})
			return answerOf(err)
		}
	}
	read := func(e *p4v1.Entity) func(*p4Session) answer {
		return func(x *p4Session) answer { return readAnswer(x, x.device, e) }
	}
	steps := []step{
		{"get pipeline before any is set", func(x *p4Session) answer {
			_, err := x.c.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: x.device,
				ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY})
			return answerOf(err)
		}},
		{"write before a pipeline", write(member(1, []byte{0, 9}))},
		{"push accelnet.p4", func(x *p4Session) answer {
			_, err := x.c.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: x.device,
				ElectionId: &p4v1.Uint128{Low: 10}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
				Config: &p4v1.ForwardingPipelineConfig{P4Info: s.Info, P4DeviceConfig: p4.BMv2JSON, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 5}}})
			return answerOf(err)
		}},
		{"members, one a duplicate", write(member(1, []byte{0, 9}), member(2, []byte{0, 10}), member(1, []byte{0, 9}))},
		{"a port wider than 9 bits", write(member(3, []byte{0x7f, 0xff}))},
		{"a group of a missing member", write(group(p4v1.Update_INSERT, 5, 1, 99))},
		{"a group", write(group(p4v1.Update_INSERT, 5, 1, 2))},
		{"routes: good, to a missing group, masked badly", write(route("10.0.2.0", 24, 5), route("10.0.3.0", 24, 77), route("10.0.4.1", 24, 5))},
		{"modify a missing group", write(group(p4v1.Update_MODIFY, 6, 1))},
		{"delete a member still in a group", write(&p4v1.Update{Type: p4v1.Update_DELETE, Entity: member(1, nil).GetEntity()})},
		{"the seed's default entry: modify", write(seedDefault(p4v1.Update_MODIFY))},
		{"the seed's default entry: insert", write(seedDefault(p4v1.Update_INSERT))},
		{"read every table entry", read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}})},
		{"read the seed's default entry", read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableHashSeed), IsDefaultAction: true}}})},
		{"read a digest not configured", read(&p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: s.DigestID(p4.DigestFlowSample)}}})},
		{"read an unknown table", read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: 0x02ffffff}}})},
	}
	steps = append(steps, moreSteps(s, write, read)...)
	hw, sim := openSession(t, hwAddr, 1), openSession(t, simAddr, 1)
	if a, b := hw.arbitrate(t, 10), sim.arbitrate(t, 10); a != b {
		t.Errorf("arbitration: BMv2 %s, fabricsim %s", a, b)
	}
	// A second client with a lower election ID is a backup on both.
	hw2, sim2 := openSession(t, hwAddr, 1), openSession(t, simAddr, 1)
	if a, b := hw2.arbitrate(t, 3), sim2.arbitrate(t, 3); a != b {
		t.Errorf("a backup's arbitration: BMv2 %s, fabricsim %s", a, b)
	}
	// Elections: a third client with the primary's election ID, one for a
	// named role, one for another device. Two differ on purpose, and must
	// differ as recorded: fabricsim has the default role only (a named
	// role is UNIMPLEMENTED: accelnet uses none), and tells a client that
	// arbitrates for a device it does not serve so (NOT_FOUND), where
	// simple_switch_grpc answers OK.
	for _, c := range []struct {
		name     string
		device   uint64
		election uint64
		role     string
		sim      codes.Code // fabricsim's own answer, where it differs on purpose
	}{{"the primary's election ID again", 1, 10, "", 0}, {"a role", 1, 20, "other", codes.Unimplemented}, {"another device", 99, 20, "", codes.NotFound}} {
		a, b := arbitrateAnswer(t, hwAddr, c.device, c.election, c.role), arbitrateAnswer(t, simAddr, c.device, c.election, c.role)
		switch {
		case c.sim != 0 && (b != c.sim || a == b):
			t.Errorf("arbitration with %s: BMv2 %s, fabricsim %s; want fabricsim %s, as recorded", c.name, a, b, c.sim)
		case c.sim == 0 && a != b:
			t.Errorf("arbitration with %s: BMv2 %s, fabricsim %s", c.name, a, b)
		case c.sim != 0:
			t.Logf("arbitration with %s: BMv2 %s, fabricsim %s, as recorded", c.name, a, b)
		default:
			t.Logf("arbitration with %s: both %s", c.name, a)
		}
	}
	differ := 0
	for _, st := range steps {
		a, b := st.run(hw), st.run(sim)
		if a.Code != b.Code || !slices.Equal(a.Updates, b.Updates) {
			differ++
			t.Errorf("%s: BMv2 answers %s, fabricsim %s", st.name, a, b)
		} else {
			t.Logf("%s: both %s", st.name, a)
		}
	}
	if differ == 0 {
		t.Logf("all %d requests answered alike (and 2 arbitrations differently, as recorded)", len(steps)+3)
	}
}

// moreSteps are requests beyond the first set: every entity kind, the
// pipeline's states, malformed values, wrong IDs, backups and elections.
// They run after the first set, on the state it left (accelnet.p4
// pushed, members 1 and 2, group 5, a route to it, the seed's default).
func moreSteps(s *p4.Schema, write func(...*p4v1.Update) func(*p4Session) answer, read func(*p4v1.Entity) func(*p4Session) answer) []step {
	ctx := context.Background()
	exact := func(table, field string, v []byte) *p4v1.FieldMatch {
		return &p4v1.FieldMatch{FieldId: s.MatchFieldID(table, field), FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}}
	}
	param := func(action, name string, v []byte) *p4v1.Action_Param {
		prm, _ := s.Param(action, name)
		return &p4v1.Action_Param{ParamId: prm.GetId(), Value: v}
	}
	entry := func(typ p4v1.Update_Type, e *p4v1.TableEntry) *p4v1.Update {
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}}
	}
	act := func(action string, params ...*p4v1.Action_Param) *p4v1.TableAction {
		return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: s.ActionID(action), Params: params}}}
	}
	pinMatch := func(src, dst []byte, sport []byte) []*p4v1.FieldMatch {
		return []*p4v1.FieldMatch{exact(p4.TableFlowPin, "ipv4_src", src), exact(p4.TableFlowPin, "ipv4_dst", dst), exact(p4.TableFlowPin, p4.FieldUDPSrcPort, sport)}
	}
	pin := func(typ p4v1.Update_Type, sport byte) *p4v1.Update {
		return entry(typ, &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin), Match: pinMatch([]byte{10, 0, 1, 1}, []byte{10, 0, 2, 1}, []byte{0xc0, sport}),
			Action: act(p4.ActionPinEgress, param(p4.ActionPinEgress, p4.ParamPort, []byte{9}))})
	}
	pinWith := func(e *p4v1.TableEntry) *p4v1.Update {
		e.TableId = s.TableID(p4.TableFlowPin)
		if e.Match == nil {
			e.Match = pinMatch([]byte{10, 0, 1, 2}, []byte{10, 0, 2, 2}, []byte{0xc0, 0x77})
		}
		if e.Action == nil {
			e.Action = act(p4.ActionPinEgress, param(p4.ActionPinEgress, p4.ParamPort, []byte{9}))
		}
		return entry(p4v1.Update_INSERT, e)
	}
	counter := func(name string, index int64) *p4v1.Entity {
		ce := &p4v1.CounterEntry{CounterId: s.CounterID(name)}
		if index >= 0 {
			ce.Index = &p4v1.Index{Index: index}
		}
		return &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: ce}}
	}
	directOf := func(sport byte) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: &p4v1.TableEntry{
			TableId: s.TableID(p4.TableFlowPin), Match: pinMatch([]byte{10, 0, 1, 1}, []byte{10, 0, 2, 1}, []byte{0xc0, sport})}}}}
	}
	digest := func(typ p4v1.Update_Type) *p4v1.Update {
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{
			DigestId: s.DigestID(p4.DigestFlowSample), Config: &p4v1.DigestEntry_Config{MaxTimeoutNs: 1000, MaxListSize: 1, AckTimeoutNs: 1000}}}}}
	}
	as := func(device, election uint64, updates ...*p4v1.Update) func(*p4Session) answer {
		return func(x *p4Session) answer {
			req := &p4v1.WriteRequest{DeviceId: device, Updates: updates}
			if election > 0 {
				req.ElectionId = &p4v1.Uint128{Low: election}
			}
			_, err := x.c.Write(ctx, req)
			return answerOf(err)
		}
	}
	readFrom := func(device uint64, e *p4v1.Entity) func(*p4Session) answer {
		return func(x *p4Session) answer { return readAnswer(x, device, e) }
	}
	push := func(election uint64, info bool, config []byte) func(*p4Session) answer {
		return func(x *p4Session) answer {
			cfg := &p4v1.ForwardingPipelineConfig{P4DeviceConfig: config, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 6}}
			if info {
				cfg.P4Info = s.Info
			}
			_, err := x.c.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: x.device,
				ElectionId: &p4v1.Uint128{Low: election}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY, Config: cfg})
			return answerOf(err)
		}
	}
	seed := param(p4.ActionSetHashSeed, p4.ParamSeed, []byte{0, 0, 0, 7})
	return []step{
		// Devices, elections.
		{"write to another device ID", as(99, 10, pin(p4v1.Update_INSERT, 1))},
		{"read from another device ID", readFrom(99, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}})},
		{"write as a backup (a lower election ID)", as(1, 3, pin(p4v1.Update_INSERT, 1))},
		{"write with no election ID", as(1, 0, pin(p4v1.Update_INSERT, 1))},
		{"write with an election ID no client holds", as(1, 11, pin(p4v1.Update_INSERT, 1))},
		{"verify a pipeline as a backup", push(3, true, p4.BMv2JSON)},
		{"verify a pipeline without its P4Info", push(10, false, p4.BMv2JSON)},
		{"get the pipeline, all of it", func(x *p4Session) answer {
			_, err := x.c.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: x.device,
				ResponseType: p4v1.GetForwardingPipelineConfigRequest_ALL})
			return answerOf(err)
		}},
		{"get another device's pipeline", func(x *p4Session) answer {
			_, err := x.c.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 99,
				ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY})
			return answerOf(err)
		}},
		{"capabilities", func(x *p4Session) answer {
			_, err := x.c.Capabilities(ctx, &p4v1.CapabilitiesRequest{})
			return answerOf(err)
		}},
		// Table entries.
		{"an entry in the keyless hash_seed table", write(entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TableHashSeed), Action: act(p4.ActionSetHashSeed, seed)}))},
		{"a default-only action in an entry", write(pinWith(&p4v1.TableEntry{Action: act(p4.ActionNop)}))},
		{"flow pins: new, again, another", write(pin(p4v1.Update_INSERT, 1), pin(p4v1.Update_INSERT, 1), pin(p4v1.Update_INSERT, 2))},
		{"flow pins: modify one, a missing one; delete a missing one", write(pin(p4v1.Update_MODIFY, 2), pin(p4v1.Update_MODIFY, 3), pin(p4v1.Update_DELETE, 4))},
		{"a flow pin missing a match field", write(pinWith(&p4v1.TableEntry{Match: pinMatch([]byte{10, 0, 1, 3}, []byte{10, 0, 2, 3}, []byte{0, 1})[:2]}))},
		{"a flow pin's match value too wide", write(pinWith(&p4v1.TableEntry{Match: pinMatch([]byte{10, 0, 1, 3}, []byte{10, 0, 2, 3}, []byte{1, 0, 1})}))},
		{"a flow pin with an unknown match field", write(pinWith(&p4v1.TableEntry{Match: append(pinMatch([]byte{10, 0, 1, 3}, []byte{10, 0, 2, 3}, []byte{0, 3}),
			&p4v1.FieldMatch{FieldId: 99, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{1}}}})}))},
		{"a flow pin with an unknown action", write(pinWith(&p4v1.TableEntry{Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: 0x01ffffff}}}}))},
		{"a flow pin with another table's action", write(pinWith(&p4v1.TableEntry{Action: act(p4.ActionSetHashSeed, seed)}))},
		{"a flow pin without its action's parameter", write(pinWith(&p4v1.TableEntry{Action: act(p4.ActionPinEgress)}))},
		{"a flow pin with a priority (an exact table)", write(pinWith(&p4v1.TableEntry{Priority: 10}))},
		{"a flow pin with no action", write(entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin), Match: pinMatch([]byte{10, 0, 1, 4}, []byte{10, 0, 2, 4}, []byte{0, 4})}))},
		{"a route to a member, not a group", write(entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TableIPv4LPM),
			Match:  []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst), FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{10, 0, 9, 0}, PrefixLen: 24}}}},
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: 2}}}))},
		{"a route with a direct action on a selector table", write(entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TableIPv4LPM),
			Match:  []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst), FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{10, 0, 8, 0}, PrefixLen: 24}}}},
			Action: act(p4.ActionSetEgress, param(p4.ActionSetEgress, p4.ParamPort, []byte{9}))}))},
		{"a route of prefix length 0 given", write(entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TableIPv4LPM),
			Match:  []*p4v1.FieldMatch{{FieldId: s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst), FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: []byte{0}, PrefixLen: 0}}}},
			Action: &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: 5}}}))},
		{"punts of ARP and LLDP", write(
			entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TablePunt), Match: []*p4v1.FieldMatch{exact(p4.TablePunt, p4.FieldEtherType, []byte{8, 6})}, Action: act(p4.ActionSendToCPU)}),
			entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TablePunt), Match: []*p4v1.FieldMatch{exact(p4.TablePunt, p4.FieldEtherType, []byte{0x88, 0xcc})}, Action: act(p4.ActionSendToCPU)}))},
		{"a port's MACs, and a port's of 10 bits", write(
			entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TablePortMACs), Match: []*p4v1.FieldMatch{exact(p4.TablePortMACs, p4.FieldEgressPort, []byte{9})},
				Action: act(p4.ActionRewriteMACs, param(p4.ActionRewriteMACs, p4.ParamSrcMAC, []byte{2, 0, 0, 1, 0, 9}), param(p4.ActionRewriteMACs, p4.ParamDstMAC, []byte{6, 0, 10, 0, 1, 1}))}),
			entry(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: s.TableID(p4.TablePortMACs), Match: []*p4v1.FieldMatch{exact(p4.TablePortMACs, p4.FieldEgressPort, []byte{2, 0})},
				Action: act(p4.ActionRewriteMACs, param(p4.ActionRewriteMACs, p4.ParamSrcMAC, []byte{2, 0, 0, 1, 0, 9}), param(p4.ActionRewriteMACs, p4.ParamDstMAC, []byte{6, 0, 10, 0, 1, 1}))}))},
		{"read one table's entries", read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin)}}})},
		{"read one entry by its match", read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin),
			Match: pinMatch([]byte{10, 0, 1, 1}, []byte{10, 0, 2, 1}, []byte{0xc0, 1})}}})},
		// Counters.
		{"read every port counter", read(counter(p4.CounterPortRx, -1))},
		{"read a port counter", read(counter(p4.CounterPortRx, 9))},
		{"read a port counter past its size", read(counter(p4.CounterPortRx, 600))},
		{"read an unknown counter", read(&p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: 0x12ffffff}}})},
		{"read a flow pin's direct counter", read(directOf(1))},
		{"read the direct counter of a missing entry", read(directOf(99))},
		{"read every direct counter of the table", read(&p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: &p4v1.TableEntry{TableId: s.TableID(p4.TableFlowPin)}}}})},
		// Action profiles.
		{"read every member and group", func(x *p4Session) answer {
			for _, e := range []*p4v1.Entity{
				{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{ActionProfileId: s.ProfileID(p4.ProfileECMP)}}},
				{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: &p4v1.ActionProfileGroup{ActionProfileId: s.ProfileID(p4.ProfileECMP)}}},
			} {
				if a := read(e)(x); a.Code != codes.OK {
					return a
				}
			}
			return answer{}
		}},
		{"a member of an unknown profile", write(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{
			ActionProfileId: 0x11ffffff, MemberId: 40, Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetEgress), Params: []*p4v1.Action_Param{param(p4.ActionSetEgress, p4.ParamPort, []byte{9})}}}}}})},
		{"a member with another table's action", write(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{
			ActionProfileId: s.ProfileID(p4.ProfileECMP), MemberId: 41, Action: &p4v1.Action{ActionId: s.ActionID(p4.ActionSetHashSeed), Params: []*p4v1.Action_Param{seed}}}}}})},
		// Digests.
		{"configure the digest, again", write(digest(p4v1.Update_INSERT), digest(p4v1.Update_INSERT))},
		{"reconfigure the digest", write(digest(p4v1.Update_MODIFY))},
		{"read the digest", read(&p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: s.DigestID(p4.DigestFlowSample)}}})},
		{"configure an unknown digest", write(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: 0x3ffffff}}}})},
	}
}
