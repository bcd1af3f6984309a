package southbound

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestPipelinePushIsTheRequest: what a pipeline push sends, the config
// encoded once and appended, is the request with that config set, for
// every switch's own device ID and election ID, and the second encoding of
// a target's config is the first.
func TestPipelinePushIsTheRequest(t *testing.T) {
	d, schema := testDriver(t)
	deviceConfig, err := p4.DeviceConfig(models.TargetFabricsim)
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range []struct {
		device   uint64
		election uint64
	}{{1, 7}, {2880, 1 << 40}} {
		config, err := d.encodedPipeline(models.TargetFabricsim)
		if err != nil {
			t.Fatal(err)
		}
		head := &p4v1.SetForwardingPipelineConfigRequest{DeviceId: sw.device, ElectionId: &p4v1.Uint128{Low: sw.election},
			Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT}
		msg, err := pipelineRequest(head, config)
		if err != nil {
			t.Fatal(err)
		}
		var got p4v1.SetForwardingPipelineConfigRequest
		if err := proto.Unmarshal(msg, &got); err != nil {
			t.Fatalf("the push does not decode: %v", err)
		}
		want := &p4v1.SetForwardingPipelineConfigRequest{DeviceId: sw.device, ElectionId: &p4v1.Uint128{Low: sw.election},
			Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
			Config: &p4v1.ForwardingPipelineConfig{P4Info: schema.Info, P4DeviceConfig: deviceConfig,
				Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: p4.Cookie()}}}
		if !proto.Equal(&got, want) {
			t.Errorf("device %d: the push decodes to another request (device %d, election %v, cookie %v, %d bytes of device config)",
				sw.device, got.GetDeviceId(), got.GetElectionId(), got.GetConfig().GetCookie(), len(got.GetConfig().GetP4DeviceConfig()))
		}
	}
}
