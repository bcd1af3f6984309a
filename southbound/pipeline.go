package southbound

import (
	"context"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// A pipeline push carries the P4Info and the compiled program, about
// 90 KB, the same for every switch of a target. It is encoded once and
// each push sends those bytes after the request's own fields: encoded
// afresh for each of a k=48 cold start's 2,880 switches it would be
// 260 MB, 3.6% of the controller's CPU.

// configField is SetForwardingPipelineConfigRequest.config's number.
var configField = (&p4v1.SetForwardingPipelineConfigRequest{}).ProtoReflect().Descriptor().Fields().ByName("config").Number()

// encodedPipeline is the ForwardingPipelineConfig a switch of target
// is pushed (the P4Info, the device config its target needs, the
// cookie), encoded once per target.
func (d *P4RT) encodedPipeline(target models.Target) ([]byte, error) {
	if b, ok := d.pipelines.Load(target); ok {
		return b.([]byte), nil
	}
	deviceConfig, err := p4.DeviceConfig(target)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(&p4v1.ForwardingPipelineConfig{P4Info: d.schema.Info, P4DeviceConfig: deviceConfig,
		Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: p4.Cookie()}})
	if err != nil {
		return nil, err
	}
	got, _ := d.pipelines.LoadOrStore(target, b)
	return got.([]byte), nil
}

// pipelineRequest is req (without a config) with the encoded config
// appended: the encoding of req with that config set.
func pipelineRequest(req *p4v1.SetForwardingPipelineConfigRequest, config []byte) (encodedMessage, error) {
	head, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	return protowire.AppendBytes(protowire.AppendTag(head, configField, protowire.BytesType), config), nil
}

// pushPipeline sends req (without a config) with config, an
// encodedPipeline.
func (d *P4RT) pushPipeline(ctx context.Context, cc grpc.ClientConnInterface, req *p4v1.SetForwardingPipelineConfigRequest, config []byte) error {
	msg, err := pipelineRequest(req, config)
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, "/p4.v1.P4Runtime/SetForwardingPipelineConfig", msg, new(p4v1.SetForwardingPipelineConfigResponse), grpc.ForceCodec(encodedCodec{}))
}

// encodedMessage is a request already encoded.
type encodedMessage []byte

// encodedCodec sends an encodedMessage as it is and decodes answers as
// protobuf does.
type encodedCodec struct{ protoRequests }

func (encodedCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(encodedMessage)
	if !ok {
		return nil, fmt.Errorf("an encoded request is a %T", v)
	}
	return b, nil
}

func (encodedCodec) Unmarshal(data []byte, v any) error {
	return proto.Unmarshal(data, v.(proto.Message))
}
