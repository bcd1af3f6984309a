package fabricsim

import (
	"context"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/topology"
)

// TestSwitchesShareTheirPipeline: switches given the same program hold
// one P4Info and schema between them (not a copy each), and each still
// answers with the config it was given, its own cookie included.
func TestSwitchesShareTheirPipeline(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f := run(t, topo)
	held := func(name models.SwitchID) *Switch {
		sw := f.Switch(name)
		c := dial(t, sw)
		c.arbitrate(t, 10)
		c.setPipeline(t, 10)
		return sw
	}
	a, b := held("leaf1"), held("leaf2")
	a.mu.Lock()
	b.mu.Lock()
	sameInfo, sameSchema := a.config.GetP4Info() == b.config.GetP4Info(), a.store.schema == b.store.schema
	b.mu.Unlock()
	a.mu.Unlock()
	if !sameInfo || !sameSchema {
		t.Errorf("two switches given one program: shared P4Info %v, shared schema %v; want both shared", sameInfo, sameSchema)
	}
	c := dial(t, f.Switch("spine1"))
	c.arbitrate(t, 10)
	info, err := p4.Load()
	if err != nil {
		t.Fatal(err)
	}
	sent := &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: p4.BMv2JSON, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 11}}
	if _, err := c.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: c.device, ElectionId: &p4v1.Uint128{Low: 10}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, Config: sent,
	}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{
		DeviceId: c.device, ResponseType: p4v1.GetForwardingPipelineConfigRequest_ALL})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetConfig(), sent) {
		t.Errorf("spine1 answers a config other than the one it was given (cookie %d, want 11)", got.GetConfig().GetCookie().GetCookie())
	}
}
