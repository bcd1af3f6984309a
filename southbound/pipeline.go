package southbound

import (
	"context"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// pipeline is the ForwardingPipelineConfig a switch of target is pushed
// (the P4Info, the device config its target needs, the cookie), made
// once per target. A push sends it through the generated client:
// encoding its 90 KB each time costs 26–36 µs a push against 18–33 µs
// for bytes encoded once (BenchmarkPipelinePush on a 2-core AMD EPYC),
// under 0.1 s of CPU over a k=48 cold start's 2,880 pushes: not worth a
// codec of its own.
func (d *P4RT) pipeline(target models.Target) (*p4v1.ForwardingPipelineConfig, error) {
	if c, ok := d.pipelines.Load(target); ok {
		return c.(*p4v1.ForwardingPipelineConfig), nil
	}
	deviceConfig, err := p4.DeviceConfig(target)
	if err != nil {
		return nil, err
	}
	c := &p4v1.ForwardingPipelineConfig{P4Info: d.schema.Info, P4DeviceConfig: deviceConfig,
		Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: p4.Cookie()}}
	got, _ := d.pipelines.LoadOrStore(target, c)
	return got.(*p4v1.ForwardingPipelineConfig), nil
}

// pushPipeline sends req with config (a pipeline: shared, not changed).
func (d *P4RT) pushPipeline(ctx context.Context, cc grpc.ClientConnInterface, req *p4v1.SetForwardingPipelineConfigRequest, config *p4v1.ForwardingPipelineConfig) error {
	req.Config = config
	_, err := p4v1.NewP4RuntimeClient(cc).SetForwardingPipelineConfig(ctx, req)
	return err
}
