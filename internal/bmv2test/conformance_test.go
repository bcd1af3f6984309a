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
	type step struct {
		name string
		run  func(*p4Session) answer
	}
	write := func(updates ...*p4v1.Update) func(*p4Session) answer {
		return func(x *p4Session) answer {
			_, err := x.c.Write(ctx, &p4v1.WriteRequest{DeviceId: x.device, ElectionId: &p4v1.Uint128{Low: 10}, Updates: updates,
				Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR})
			return answerOf(err)
		}
	}
	read := func(e *p4v1.Entity) func(*p4Session) answer {
		return func(x *p4Session) answer {
			rs, err := x.c.Read(ctx, &p4v1.ReadRequest{DeviceId: x.device, Entities: []*p4v1.Entity{e}})
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
	hw, sim := openSession(t, hwAddr, 1), openSession(t, simAddr, 1)
	if a, b := hw.arbitrate(t, 10), sim.arbitrate(t, 10); a != b {
		t.Errorf("arbitration: BMv2 %s, fabricsim %s", a, b)
	}
	// A second client with a lower election ID is a backup on both.
	hw2, sim2 := openSession(t, hwAddr, 1), openSession(t, simAddr, 1)
	if a, b := hw2.arbitrate(t, 3), sim2.arbitrate(t, 3); a != b {
		t.Errorf("a backup's arbitration: BMv2 %s, fabricsim %s", a, b)
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
		t.Logf("all %d requests answered alike", len(steps)+2)
	}
}
