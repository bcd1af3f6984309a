package southbound

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestPipelineIsMadeOncePerTarget: a target's pipeline is the P4Info,
// its device config and the cookie, and the second ask is the first's.
func TestPipelineIsMadeOncePerTarget(t *testing.T) {
	d, schema := testDriver(t)
	for _, target := range []models.Target{models.TargetFabricsim, models.TargetBMv2} {
		deviceConfig, err := p4.DeviceConfig(target)
		if err != nil {
			t.Fatal(err)
		}
		first, err := d.pipeline(target)
		if err != nil {
			t.Fatal(err)
		}
		want := &p4v1.ForwardingPipelineConfig{P4Info: schema.Info, P4DeviceConfig: deviceConfig,
			Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: p4.Cookie()}}
		if !proto.Equal(first, want) {
			t.Errorf("%s: the pipeline is another (cookie %v, %d bytes of device config)", target, first.GetCookie(), len(first.GetP4DeviceConfig()))
		}
		if again, _ := d.pipeline(target); again != first {
			t.Errorf("%s: made again", target)
		}
	}
	if _, err := d.pipeline("nosuch"); err == nil {
		t.Error("a target without a device config has a pipeline")
	}
}
