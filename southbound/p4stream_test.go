package southbound

import (
	"math/rand/v2"
	"reflect"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/accelnet/accelnet/southbound/p4"
)

// flowSampleDatum is one flow_sample_t digest datum as a switch sends it:
// a struct of the five members, each a bitstring.
func flowSampleDatum(rng *rand.Rand) *p4v1.P4Data {
	bits := func(n int) *p4v1.P4Data {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: minimal(p4.Uint(b))}}
	}
	return &p4v1.P4Data{Data: &p4v1.P4Data_Struct{Struct: &p4v1.P4StructLike{Members: []*p4v1.P4Data{
		bits(2), bits(4), bits(4), bits(2), bits(2)}}}}
}

// TestSamplesReadFromTheWire: a flow_sample digest list of the declared
// shape is read straight from the stream's bytes into the same samples
// (ports, keys, lengths, stamps) and acknowledgement as protobuf decoding
// and samplesOf give; a list of any other shape, another digest, or
// another message is decoded by protobuf, exactly as sent.
func TestSamplesReadFromTheWire(t *testing.T) {
	d, schema := testDriver(t)
	codec := streamCodec{digestID: schema.DigestID(p4.DigestFlowSample)}
	rng := rand.New(rand.NewPCG(3, 4))
	list := func(n int) *p4v1.DigestList {
		l := &p4v1.DigestList{DigestId: codec.digestID, ListId: rng.Uint64N(1 << 40), Timestamp: rng.Int64N(1 << 62)}
		for range n {
			l.Data = append(l.Data, flowSampleDatum(rng))
		}
		return l
	}
	digest := func(l *p4v1.DigestList) *p4v1.StreamMessageResponse {
		return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: l}}
	}
	struct0 := func(l *p4v1.DigestList) *p4v1.P4StructLike { return l.Data[0].GetStruct() }
	cases := []struct {
		name string
		msg  *p4v1.StreamMessageResponse
		wire bool // read from the wire
	}{
		{"a list as switches send it", digest(list(600)), true},
		{"one sample", digest(list(1)), true},
		{"no samples", digest(list(0)), true},
		{"no timestamp", func() *p4v1.StreamMessageResponse { l := list(5); l.Timestamp = 0; return digest(l) }(), true},
		{"a negative timestamp", func() *p4v1.StreamMessageResponse { l := list(5); l.Timestamp = -5; return digest(l) }(), false},
		{"another digest", func() *p4v1.StreamMessageResponse { l := list(5); l.DigestId++; return digest(l) }(), false},
		{"four members", func() *p4v1.StreamMessageResponse {
			l := list(5)
			struct0(l).Members = struct0(l).Members[:4]
			return digest(l)
		}(), false},
		{"six members", func() *p4v1.StreamMessageResponse {
			l := list(5)
			struct0(l).Members = append(struct0(l).Members, struct0(l).Members[0])
			return digest(l)
		}(), false},
		{"a member that is not a bitstring", func() *p4v1.StreamMessageResponse {
			l := list(5)
			struct0(l).Members[2] = &p4v1.P4Data{Data: &p4v1.P4Data_Bool{Bool: true}}
			return digest(l)
		}(), false},
		{"a tuple, not a struct", func() *p4v1.StreamMessageResponse {
			l := list(5)
			l.Data[3] = &p4v1.P4Data{Data: &p4v1.P4Data_Tuple{Tuple: l.Data[3].GetStruct()}}
			return digest(l)
		}(), false},
		{"arbitration", &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
			DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 7}, Status: &status.Status{Code: 0}}}}, false},
		{"packet-in", &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: &p4v1.PacketIn{Payload: []byte{1, 2, 3}}}}, false},
		{"other", &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Other{Other: &anypb.Any{TypeUrl: "x"}}}, false},
	}
	for _, c := range cases {
		data, err := proto.Marshal(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		var in streamMessage
		if err := codec.Unmarshal(data, &in); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (in.list != nil) != c.wire || (in.resp != nil) == c.wire {
			t.Errorf("%s: read from the wire %v (decoded %v), want %v", c.name, in.list != nil, in.resp != nil, c.wire)
			continue
		}
		var back p4v1.StreamMessageResponse
		if err := proto.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if in.resp != nil {
			if !proto.Equal(in.resp, &back) {
				t.Errorf("%s: decoded %v, want %v", c.name, in.resp, &back)
			}
			continue
		}
		want := d.samplesOf(back.GetDigest())
		if len(want.samples) == 0 {
			want.samples = nil // the wire reading allocates only for samples
		}
		if !reflect.DeepEqual(in.list, want) {
			t.Errorf("%s: from the wire %+v, want %+v", c.name, in.list, want)
		}
	}
	// A message that does not parse is an error, not a silent nothing.
	var in streamMessage
	if err := codec.Unmarshal([]byte{0x1a, 0x05, 0x08}, &in); err == nil {
		t.Error("a truncated message decoded")
	}
}

// BenchmarkReadSamples decodes a digest list of 600 flow samples (a
// leaf's 50 ms at about 12,000 samples a second) from the wire and, for
// comparison, through protobuf and samplesOf.
//
//	go test ./southbound -run '^$' -bench ReadSamples -benchmem
func BenchmarkReadSamples(b *testing.B) {
	d, schema := testDriver(b)
	codec := streamCodec{digestID: schema.DigestID(p4.DigestFlowSample)}
	rng := rand.New(rand.NewPCG(5, 6))
	l := &p4v1.DigestList{DigestId: codec.digestID, ListId: 1, Timestamp: 1}
	for range 600 {
		l.Data = append(l.Data, flowSampleDatum(rng))
	}
	data, err := proto.Marshal(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: l}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("wire", func(b *testing.B) {
		for b.Loop() {
			var in streamMessage
			if err := codec.Unmarshal(data, &in); err != nil || in.list == nil || len(in.list.samples) != 600 {
				b.Fatal("not read from the wire", err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		for b.Loop() {
			var resp p4v1.StreamMessageResponse
			if err := proto.Unmarshal(data, &resp); err != nil {
				b.Fatal(err)
			}
			if got := d.samplesOf(resp.GetDigest()); len(got.samples) != 600 {
				b.Fatal("samples lost")
			}
		}
	})
}
