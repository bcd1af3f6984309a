package southbound

import (
	"fmt"
	"testing"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
)

// BenchmarkSetAnswer: one k=48 switch's interface configuration Set
// answer (48 interfaces, three leaves each, every path repeated as
// SetResponse does), left unread (unreadCodec) and decoded into the
// generated messages.
//
//	go test ./southbound -run '^$' -bench SetAnswer -benchmem
func BenchmarkSetAnswer(b *testing.B) {
	resp := &gnmipb.SetResponse{Prefix: &gnmipb.Path{Target: "leaf1"}, Timestamp: 1}
	for port := 1; port <= 48; port++ {
		for _, leaf := range []string{"enabled", "mtu", "description"} {
			resp.Response = append(resp.Response, &gnmipb.UpdateResult{Op: gnmipb.UpdateResult_UPDATE,
				Path: &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": fmt.Sprintf("eth%d", port)}},
					{Name: "config"}, {Name: leaf}}}})
		}
	}
	data, err := proto.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unread", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (unreadCodec{}).Unmarshal(data, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got gnmipb.SetResponse
			if err := proto.Unmarshal(data, &got); err != nil || len(got.Response) != 144 {
				b.Fatal(err, len(got.Response))
			}
		}
	})
}

// BenchmarkPipelinePush: the request of one switch's pipeline push (the
// shipped P4Info and BMv2 program) encoded as the generated client does
// it, and with the config's bytes encoded once per target appended (what
// a codec of its own would send: it pays too little to keep, see
// pipeline).
//
//	go test ./southbound -run '^$' -bench PipelinePush -benchmem
func BenchmarkPipelinePush(b *testing.B) {
	d, _ := testDriver(b)
	config, err := d.pipeline(models.TargetBMv2)
	if err != nil {
		b.Fatal(err)
	}
	encoded, err := proto.Marshal(config)
	if err != nil {
		b.Fatal(err)
	}
	req := &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 7}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT}
	field := req.ProtoReflect().Descriptor().Fields().ByName("config").Number()
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			full := proto.Clone(req).(*p4v1.SetForwardingPipelineConfigRequest)
			full.Config = config
			if _, err := proto.Marshal(full); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoded-once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			head, err := proto.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			_ = protowire.AppendBytes(protowire.AppendTag(head, field, protowire.BytesType), encoded)
		}
	})
}
