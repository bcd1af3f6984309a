package southbound

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestPinFieldsAreP4Runtimes: the field tables the wire reading walks
// are p4runtime.proto's, every field below 16 of each message.
func TestPinFieldsAreP4Runtimes(t *testing.T) {
	for _, c := range []struct {
		m     proto.Message
		known *messageFields
	}{
		{&p4v1.Entity{}, &entityFields}, {&p4v1.TableEntry{}, &tableEntryFields}, {&p4v1.FieldMatch{}, &fieldMatchFields},
		{&p4v1.FieldMatch_Exact{}, &exactFields}, {&p4v1.FieldMatch_LPM{}, &lpmFields}, {&p4v1.TableAction{}, &tableActionFields}, {&p4v1.Action{}, &actionFields},
		{&p4v1.Action_Param{}, &paramFields}, {&p4v1.DirectCounterEntry{}, &directCounterFields}, {&p4v1.CounterData{}, &counterDataFields},
	} {
		var want messageFields
		fs := c.m.ProtoReflect().Descriptor().Fields()
		for i := range fs.Len() {
			f := fs.Get(i)
			if f.Number() >= 16 {
				continue
			}
			switch f.Kind() {
			case protoreflect.MessageKind:
				want[f.Number()] = messageField
			case protoreflect.BytesKind:
				want[f.Number()] = bytesField
			case protoreflect.StringKind:
				want[f.Number()] = stringField
			default:
				want[f.Number()] = varintField
			}
		}
		if want != *c.known {
			t.Errorf("%s: fields %v, p4runtime.proto says %v", c.m.ProtoReflect().Descriptor().Name(), *c.known, want)
		}
	}
}

// TestPinsReadFromTheWire: a Read answer's entities decode to the same
// state read from the wire as through the generated messages, whatever
// a pin entry holds (the controller's shape, foreign metadata, fields
// it never writes, another table's entries, fields in another order),
// and the controller's own pins are the ones read from the wire.
func TestPinsReadFromTheWire(t *testing.T) {
	d, schema := testDriver(t)
	rng := rand.New(rand.NewPCG(1, 2))
	variants := []func(*p4v1.TableEntry){
		func(*p4v1.TableEntry) {}, // as the controller writes it
		func(te *p4v1.TableEntry) { te.Metadata = []byte("someone else") },
		func(te *p4v1.TableEntry) { te.Metadata = nil },
		func(te *p4v1.TableEntry) { slices.Reverse(te.Match) },
		func(te *p4v1.TableEntry) { te.Priority = 7 },
		func(te *p4v1.TableEntry) { te.Match = te.Match[:2] },
		func(te *p4v1.TableEntry) { te.Match = append(te.Match, te.Match[0]) },
		func(te *p4v1.TableEntry) { te.Action.GetAction().ActionId = schema.ActionID(p4.ActionDrop) },
		func(te *p4v1.TableEntry) {
			te.Action.GetAction().Params = append(te.Action.GetAction().Params, &p4v1.Action_Param{ParamId: 9, Value: []byte{1}})
		},
		func(te *p4v1.TableEntry) {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: 3}}
		},
		func(te *p4v1.TableEntry) {
			te.Match[0].FieldMatchType = &p4v1.FieldMatch_Other{Other: &anypb.Any{TypeUrl: "x"}}
		},
		func(te *p4v1.TableEntry) { te.Match[1].FieldId = 99 },
		func(te *p4v1.TableEntry) { te.TableId = schema.TableID(p4.TablePunt) },
	}
	for _, tagged := range []bool{false, true} {
		d.opts.KeepForeign = tagged
		var resp p4v1.ReadResponse
		wireOnly := 0
		for i := range 300 {
			pin := randPin(rng)
			e := d.entities(models.ForwardingState{FlowPins: []models.FlowPin{pin}}, false)[0]
			v := i % len(variants)
			variants[v](e.GetTableEntry())
			if v == 0 {
				wireOnly++
			}
			resp.Entities = append(resp.Entities, e)
		}
		resp.Entities = append(resp.Entities, d.entities(models.ForwardingState{Members: []models.Member{{ID: 3, Port: 3}},
			Routes: []models.Route{{Prefix: randPrefix(rng), MemberID: 3}}}, false)...)
		data, err := proto.Marshal(&resp)
		if err != nil {
			t.Fatal(err)
		}
		m, fast, fastOther, slow, slowOther := readBothWays(t, d, data, tagged, readCodec{w: d.wireIDs, pins: true, counters: true})
		if !fast.Canonical().Equal(slow.Canonical()) || !fastOther.Canonical().Equal(slowOther.Canonical()) {
			t.Fatalf("tagged=%v: read from the wire %d pins (%d foreign), through protobuf %d (%d foreign)",
				tagged, len(fast.FlowPins), len(fastOther.FlowPins), len(slow.FlowPins), len(slowOther.FlowPins))
		}
		if len(m.pins) < wireOnly {
			t.Errorf("tagged=%v: %d pins read from the wire, want at least the %d the controller's shape", tagged, len(m.pins), wireOnly)
		}
		if len(m.entities) < len(resp.Entities)-len(m.pins) {
			t.Errorf("entities lost: %d pins + %d others of %d", len(m.pins), len(m.entities), len(resp.Entities))
		}
	}
}

// readBothWays decodes a Read answer through P4Runtime's generated
// messages (slow) and with codec (m, and fast: what it read from the
// wire, with the rest decoded), each split as Read splits it: with
// tagged, a table entry without the controller's tag is foreign (other).
func readBothWays(t *testing.T, d *P4RT, data []byte, tagged bool, codec readCodec) (m readMessage, fast, fastOther, slow, slowOther models.ForwardingState) {
	t.Helper()
	split := func(e *p4v1.Entity, st, other *models.ForwardingState) {
		if te := e.GetTableEntry(); te != nil && tagged && string(te.GetMetadata()) != string(d.opts.EntryTag) {
			d.decode(e, other)
			return
		}
		d.decode(e, st)
	}
	var back p4v1.ReadResponse
	if err := proto.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, e := range back.GetEntities() {
		split(e, &slow, &slowOther)
	}
	if tagged {
		codec.tag = d.opts.EntryTag
	}
	if err := codec.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	fast = models.ForwardingState{FlowPins: slices.Clone(m.pins), Routes: slices.Clone(m.routes)}
	for _, e := range m.entities {
		split(e, &fast, &fastOther)
	}
	return m, fast, fastOther, slow, slowOther
}

// TestRoutesReadFromTheWire: routes read from the wire are the routes
// read through the generated messages, whatever an entry holds (the
// controller's shape to a member or a group, foreign or no metadata,
// fields it never writes, another match, another table, odd values),
// split alike into the controller's and foreign ones; and the
// controller's own are the ones read from the wire.
func TestRoutesReadFromTheWire(t *testing.T) {
	d, schema := testDriver(t)
	rng := rand.New(rand.NewPCG(5, 6))
	lpm := func(te *p4v1.TableEntry) *p4v1.FieldMatch_LPM { return te.Match[0].GetLpm() }
	variants := []func(*p4v1.TableEntry){
		func(*p4v1.TableEntry) {}, // as the controller writes it, to a member
		func(te *p4v1.TableEntry) { // to a group
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileGroupId{ActionProfileGroupId: 7}}
		},
		func(te *p4v1.TableEntry) { te.Metadata = []byte("someone else") },
		func(te *p4v1.TableEntry) { te.Metadata = nil },
		func(te *p4v1.TableEntry) { te.Priority = 7 },
		func(te *p4v1.TableEntry) { te.Match = append(te.Match, te.Match[0]) },
		func(te *p4v1.TableEntry) { te.Match = nil },
		func(te *p4v1.TableEntry) { te.Match[0].FieldId = 99 },
		func(te *p4v1.TableEntry) {
			te.Match[0].FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: []byte{10, 0, 0, 1}}}
		},
		func(te *p4v1.TableEntry) { lpm(te).PrefixLen = -1 },
		func(te *p4v1.TableEntry) { lpm(te).PrefixLen = 0 },
		func(te *p4v1.TableEntry) { lpm(te).Value = []byte{1, 2, 3, 4, 5, 6} },
		func(te *p4v1.TableEntry) { te.Action = nil },
		func(te *p4v1.TableEntry) {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: 0}}
		},
		func(te *p4v1.TableEntry) {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: schema.ActionID(p4.ActionDrop)}}}
		},
		func(te *p4v1.TableEntry) { te.TableId = schema.TableID(p4.TablePunt) },
		func(te *p4v1.TableEntry) { te.IsDefaultAction = true },
	}
	for _, tagged := range []bool{false, true} {
		d.opts.KeepForeign = tagged
		var resp p4v1.ReadResponse
		wireOnly := 0
		for i := range 340 {
			e := d.entities(models.ForwardingState{Routes: []models.Route{{Prefix: randPrefix(rng), MemberID: uint32(1 + rng.IntN(64))}}}, false)[0]
			v := i % len(variants)
			variants[v](e.GetTableEntry())
			if v < 2 {
				wireOnly++
			}
			resp.Entities = append(resp.Entities, e)
		}
		resp.Entities = append(resp.Entities, d.entities(models.ForwardingState{Members: []models.Member{{ID: 3, Port: 3}},
			FlowPins: []models.FlowPin{randPin(rng)}}, false)...)
		data, err := proto.Marshal(&resp)
		if err != nil {
			t.Fatal(err)
		}
		m, fast, fastOther, slow, slowOther := readBothWays(t, d, data, tagged, readCodec{w: d.wireIDs, pins: true, routes: true})
		byPrefix := func(rs []models.Route) []models.Route {
			rs = slices.Clone(rs)
			slices.SortFunc(rs, func(a, b models.Route) int {
				return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.MemberID, b.MemberID), cmp.Compare(a.GroupID, b.GroupID))
			})
			return rs
		}
		if !slices.Equal(byPrefix(fast.Routes), byPrefix(slow.Routes)) || !slices.Equal(byPrefix(fastOther.Routes), byPrefix(slowOther.Routes)) ||
			!slices.Equal(fast.FlowPins, slow.FlowPins) || !slices.Equal(fast.Members, slow.Members) {
			for i, r := range byPrefix(fast.Routes) {
				if w := byPrefix(slow.Routes)[i]; r != w {
					t.Logf("first difference: %v from the wire, %v through protobuf", r, w)
					break
				}
			}
			t.Fatalf("tagged=%v: read from the wire %d routes (%d foreign), through protobuf %d (%d foreign)",
				tagged, len(fast.Routes), len(fastOther.Routes), len(slow.Routes), len(slowOther.Routes))
		}
		if len(m.routes) < wireOnly {
			t.Errorf("tagged=%v: %d routes read from the wire, want at least the %d of the controller's shape", tagged, len(m.routes), wireOnly)
		}
		if len(m.entities)+len(m.routes)+len(m.pins) != len(resp.Entities) {
			t.Errorf("entities lost: %d routes + %d pins + %d others of %d", len(m.routes), len(m.pins), len(m.entities), len(resp.Entities))
		}
	}
}

// TestPinCountersReadFromTheWire: flow pins' direct counters read from
// the wire are the counts read through the generated messages, whatever
// the entries hold.
func TestPinCountersReadFromTheWire(t *testing.T) {
	d, schema := testDriver(t)
	rng := rand.New(rand.NewPCG(3, 4))
	variants := []func(*p4v1.DirectCounterEntry){
		func(dc *p4v1.DirectCounterEntry) { dc.TableEntry.Action, dc.TableEntry.Metadata = nil, nil }, // match only
		func(*p4v1.DirectCounterEntry) {}, // with its action and tag
		func(dc *p4v1.DirectCounterEntry) { dc.Data = nil },
		func(dc *p4v1.DirectCounterEntry) { dc.Data.ByteCount = -5 },
		func(dc *p4v1.DirectCounterEntry) { dc.Data.PacketCount = 0 },
		func(dc *p4v1.DirectCounterEntry) { dc.TableEntry.TableId = schema.TableID(p4.TableIPv4LPM) },
		func(dc *p4v1.DirectCounterEntry) { dc.TableEntry.Match = dc.TableEntry.Match[1:] },
		func(dc *p4v1.DirectCounterEntry) { dc.TableEntry.Priority = 3 },
	}
	var resp p4v1.ReadResponse
	for i := range 200 {
		pin := randPin(rng)
		te := d.entities(models.ForwardingState{FlowPins: []models.FlowPin{pin}}, false)[0].GetTableEntry()
		dc := &p4v1.DirectCounterEntry{TableEntry: te, Data: &p4v1.CounterData{ByteCount: rng.Int64N(1 << 40), PacketCount: 9}}
		variants[i%len(variants)](dc)
		resp.Entities = append(resp.Entities, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: dc}})
	}
	data, err := proto.Marshal(&resp)
	if err != nil {
		t.Fatal(err)
	}
	slowCount := func(e *p4v1.Entity, out map[models.FlowKey]uint64) {
		dc := e.GetDirectCounterEntry()
		var st models.ForwardingState
		d.decode(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: dc.GetTableEntry()}}, &st)
		if len(st.FlowPins) == 1 {
			out[st.FlowPins[0].Key] = uint64(dc.GetData().GetByteCount())
		}
	}
	slow := map[models.FlowKey]uint64{}
	var back p4v1.ReadResponse
	if err := proto.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, e := range back.GetEntities() {
		slowCount(e, slow)
	}
	var m readMessage
	if err := (readCodec{w: d.wireIDs, counters: true}).Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	fast := map[models.FlowKey]uint64{}
	for _, c := range m.counters {
		fast[c.key] = c.bytes
	}
	for _, e := range m.entities {
		slowCount(e, fast)
	}
	if len(m.counters) < 125 { // the first five variants are of the shape read from the wire
		t.Errorf("%d of 200 counters read from the wire, want 125", len(m.counters))
	}
	if len(fast) != len(slow) {
		t.Fatalf("%d counts from the wire, %d through protobuf", len(fast), len(slow))
	}
	for k, n := range slow {
		if fast[k] != n {
			t.Fatalf("%s: %d from the wire, %d through protobuf", k, fast[k], n)
		}
	}
}

func randPin(rng *rand.Rand) models.FlowPin {
	return models.FlowPin{Key: models.FlowKey{Src: randAddr(rng), Dst: randAddr(rng), SrcPort: uint16(rng.IntN(65536))}, Port: uint32(rng.IntN(64))}
}

func randAddr(rng *rand.Rand) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
}

func randPrefix(rng *rand.Rand) netip.Prefix { return netip.PrefixFrom(randAddr(rng), 24).Masked() }

// BenchmarkReadPins: one Read answer of 1,000 flow pins decoded from the
// wire (wire) and through P4Runtime's generated messages (proto).
//
//	go test ./southbound -run '^$' -bench ReadPins -benchmem
func BenchmarkReadPins(b *testing.B) {
	d, _ := testDriver(b)
	rng := rand.New(rand.NewPCG(1, 2))
	var st models.ForwardingState
	for range 1000 {
		st.FlowPins = append(st.FlowPins, randPin(rng))
	}
	data, err := proto.Marshal(&p4v1.ReadResponse{Entities: d.entities(st, false)})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkRead(b, d, data, readCodec{w: d.wireIDs, tag: d.opts.EntryTag, pins: true}, func(m readMessage) int { return len(m.pins) })
}

// benchmarkRead decodes data, a Read answer of 1,000 entities of one
// kind, from the wire with codec (read says how many it took that way)
// and through P4Runtime's generated messages.
func benchmarkRead(b *testing.B, d *P4RT, data []byte, codec readCodec, read func(readMessage) int) {
	b.Run("wire", func(b *testing.B) {
		var m readMessage
		for b.Loop() {
			if err := codec.Unmarshal(data, &m); err != nil || read(m) != 1000 {
				b.Fatal(err, read(m))
			}
		}
	})
	b.Run("proto", func(b *testing.B) {
		for b.Loop() {
			var resp p4v1.ReadResponse
			if err := proto.Unmarshal(data, &resp); err != nil {
				b.Fatal(err)
			}
			var got models.ForwardingState
			for _, e := range resp.GetEntities() {
				d.decode(e, &got)
			}
		}
	})
}

// BenchmarkReadRoutes: one Read answer of 1,000 routes decoded from the
// wire (wire) and through P4Runtime's generated messages (proto).
//
//	go test ./southbound -run '^$' -bench ReadRoutes -benchmem
func BenchmarkReadRoutes(b *testing.B) {
	d, _ := testDriver(b)
	rng := rand.New(rand.NewPCG(1, 2))
	var st models.ForwardingState
	for i := range 1000 {
		st.Routes = append(st.Routes, models.Route{Prefix: randPrefix(rng), GroupID: uint32(1 + i%64)})
	}
	data, err := proto.Marshal(&p4v1.ReadResponse{Entities: d.entities(st, false)})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkRead(b, d, data, readCodec{w: d.wireIDs, tag: d.opts.EntryTag, routes: true}, func(m readMessage) int { return len(m.routes) })
}
