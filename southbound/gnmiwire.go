package southbound

import (
	"context"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
)

// A telemetry stream's answers are read straight from the wire: at k=48
// the controller takes in tens of thousands of counter values a second,
// and decoding each SubscribeResponse into gNMI's generated messages (a
// map per keyed path element, a message per value) was a third of its CPU
// during a failure. subscribeCodec reads the fields sampleOf needs —
// notification timestamp, prefix and update paths with their keys, typed
// scalar values, sync_response — into flat arrays reused from one answer
// to the next, shared by every stream (wirePool): a stream waits most of
// its life for its next answer, and at k=48 2,880 streams each keeping
// its own arrays (and, through them, its last answer's bytes) would hold
// 100 MB. Anything else (a JSON value, a field that appears twice
// where protobuf would merge the two, bytes that do not parse) falls back
// to proto.Unmarshal of the whole answer and the generated messages, so
// both ways read a stream alike (TestWireDecodingIsProto). What it pays
// (BenchmarkWireDecoding: a k=48 leaf's counter answer, 144 values, one
// 2-core AMD EPYC): 51 µs, 3 KB, 288 allocations against 234 µs,
// 186 KB, 3,900 allocations.

// protoRequests is the half of a codec that sends requests as protobuf
// does; the codecs here differ in how they read answers.
type protoRequests struct{}

func (protoRequests) Name() string { return "proto" }

func (protoRequests) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }

// subscribeCodec sends gNMI requests as protobuf does and decodes answers
// into a *wireMessage, with a *wireResponse from wirePool.
type subscribeCodec struct{ protoRequests }

func (subscribeCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*wireMessage)
	if !ok {
		return fmt.Errorf("gnmi answer decoded into a %T", v)
	}
	m.r = wirePool.Get().(*wireResponse)
	r := m.r
	if r.parse(data) {
		return nil
	}
	r.slow = &gnmipb.SubscribeResponse{}
	return proto.Unmarshal(data, r.slow)
}

// A Get's answer is read the same way (readGet): link discovery reads
// every switch's LLDP neighbours each round and the resync every
// switch's interface configuration, and decoding those answers into
// generated messages makes about 1 GB of garbage per 40 s at k=48
// (LLDP) and costs 5% of the controller's CPU during failures
// (configuration). What it pays (BenchmarkLLDPDecoding: a k=48 switch's
// neighbours, 240 leaves): 0.14 ms, 20 KB against 0.54 ms, 450 KB.

// rawCodec sends requests as protobuf does and keeps an answer's bytes
// (a *rawAnswer) for the caller to read from the wire.
type rawCodec struct{ protoRequests }

func (rawCodec) Unmarshal(data []byte, v any) error {
	a, ok := v.(*rawAnswer)
	if !ok {
		return fmt.Errorf("gnmi answer decoded into a %T", v)
	}
	a.b = data // gRPC hands a legacy codec bytes of its own
	return nil
}

// rawAnswer is an answer's bytes as they came.
type rawAnswer struct{ b []byte }

// unreadCodec sends requests as protobuf does and leaves answers unread:
// a SetResponse repeats every update's path, and a Set that failed says
// so in its status, not its answer. Decoding the answers would be 3.7%
// of the controller's CPU over a k=48 cold start (414,720 paths):
// BenchmarkSetAnswer, a k=48 switch's answer of 144 paths, decodes in
// 0.15–0.18 ms, 145 KB and 3,000 allocations, which unread costs none.
type unreadCodec struct{ protoRequests }

func (unreadCodec) Unmarshal([]byte, any) error { return nil }

// getRaw sends a gNMI Get and returns its answer's bytes, for readGet.
func getRaw(ctx context.Context, cc *grpc.ClientConn, req *gnmipb.GetRequest) ([]byte, error) {
	var ans rawAnswer
	err := cc.Invoke(ctx, "/gnmi.gNMI/Get", req, &ans, grpc.ForceCodec(rawCodec{}))
	return ans.b, err
}

// getResponseFields are GetResponse's: notification, error (deprecated),
// extension.
var getResponseFields = messageFields{1: messageField, 2: messageField, 3: messageField}

// readGet calls take with each update of each notification of the
// GetResponse b (its path prefix first): read from the wire where it can
// (wire), else through gNMI's generated messages, as JSON values, an
// error or extension field, or what parse would leave to protobuf are.
// When the wire reading gives up midway, restart is called before the
// leaves are taken again the slow way.
func readGet(b []byte, wire bool, restart func(), take func(leafView)) error {
	if wire && getLeaves(b, take) {
		return nil
	}
	if wire {
		restart()
	}
	var resp gnmipb.GetResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return fmt.Errorf("undecodable answer: %w", err)
	}
	for _, n := range resp.GetNotification() {
		for _, l := range leavesOf(n) {
			take(l)
		}
	}
	return nil
}

// getLeaves reads a GetResponse from the wire and calls f with each
// update of each notification; false means it could not (f may have
// been called for some leaves).
func getLeaves(b []byte, f func(leafView)) bool {
	r := wirePool.Get().(*wireResponse)
	defer func() {
		r.reset()
		wirePool.Put(r)
	}()
	return fields(b, &getResponseFields, func(num protowire.Number, _ uint64, data []byte) bool {
		if num != 1 {
			return false
		}
		r.reset()
		if !r.notification(data) {
			return false
		}
		for i := range r.leaves {
			f(wirePath{r, &r.leaves[i]})
		}
		return true
	})
}

// wireMessage is what a stream receives into: an answer's working, taken
// from wirePool for it and given back (release) once it is read.
type wireMessage struct{ r *wireResponse }

var wirePool = sync.Pool{New: func() any { return new(wireResponse) }}

func (m *wireMessage) release() {
	if m.r != nil {
		m.r.reset()
		wirePool.Put(m.r)
		m.r = nil
	}
}

// wireResponse is one SubscribeResponse: slow when the fast reading gave
// up, else sync or a notification's leaves.
type wireResponse struct {
	slow   *gnmipb.SubscribeResponse
	sync   bool
	update bool
	ts     int64
	// prefix is the notification prefix's elements; elems holds every
	// update path's elements, keys every element's keys.
	prefix []wireElem
	elems  []wireElem
	keys   []wireKey
	leaves []wireLeaf
}

// wireElem is a path element: its name and its keys (keys[from:to]).
type wireElem struct {
	name     []byte
	from, to int
}

type wireKey struct{ k, v []byte }

// wireLeaf is one update: its path (elems[from:to] after the prefix) and
// its value.
type wireLeaf struct {
	from, to int
	kind     valueKind
	u        uint64
	i        int64
	s        []byte
}

type valueKind uint8

const (
	noValue valueKind = iota
	uintKind
	intKind
	stringKind
	boolKind
	otherKind // a type sampleOf does not read
)

func (r *wireResponse) reset() {
	r.slow, r.sync, r.update, r.ts = nil, false, false, 0
	r.prefix, r.elems, r.keys, r.leaves = r.prefix[:0], r.elems[:0], r.keys[:0], r.leaves[:0]
}

// field kinds of the messages the fast reading knows, by field number.
// A known field of another wire type, a string that is not UTF-8 (both
// protobuf refuses) or a message the reading does not look into (whose
// content protobuf would check) is left to protobuf.
type fieldKind uint8

const (
	varintField fieldKind = iota + 1
	bytesField
	stringField
	messageField
	fixed32Field
	fixed64Field
)

// messageFields are one message's known fields, by number (0: unknown):
// every message read here numbers its fields below 16. An array, not a
// map: it is looked up for every field of every answer.
type messageFields [16]fieldKind

var (
	responseFields     = messageFields{1: messageField, 3: varintField, 4: messageField, 5: messageField}
	notificationFields = messageFields{1: varintField, 2: messageField, 4: messageField, 5: messageField, 6: varintField}
	updateFields       = messageFields{1: messageField, 2: messageField, 3: messageField, 4: varintField}
	pathFields         = messageFields{1: stringField, 2: stringField, 3: messageField, 4: stringField}
	elemFields         = messageFields{1: stringField, 2: messageField}
	keyFields          = messageFields{1: stringField, 2: stringField}
	valueFields        = messageFields{1: stringField, 2: varintField, 3: varintField, 4: varintField, 5: bytesField,
		6: fixed32Field, 7: messageField, 8: messageField, 9: messageField, 10: bytesField, 11: bytesField, 12: stringField,
		13: bytesField, 14: fixed64Field}
)

// kind is field num's kind, 0 if unknown.
func (m *messageFields) kind(num protowire.Number) fieldKind {
	if num < 0 || int(num) >= len(m) {
		return 0
	}
	return m[num]
}

// wireTypeOf is each kind's wire type.
var wireTypeOf = [...]protowire.Type{varintField: protowire.VarintType, bytesField: protowire.BytesType,
	stringField: protowire.BytesType, messageField: protowire.BytesType, fixed32Field: protowire.Fixed32Type, fixed64Field: protowire.Fixed64Type}

// fields walks b's fields, calling f with each known one's number and
// value (a varint's in v, a length-delimited one's in data); false if b
// does not parse, a known field has another wire type or a string field
// is not UTF-8, or f says stop (f must stop at a message field it does
// not read). Unknown fields are skipped, as protobuf keeps them unread.
func fields(b []byte, known *messageFields, f func(num protowire.Number, v uint64, data []byte) bool) bool {
	return walk(b, known, false, f)
}

// strictFields is fields that also says false at an unknown field: for a
// message whose every field the reading must have seen (P4Runtime's
// FieldMatch numbers one of its oneof's fields 100).
func strictFields(b []byte, known *messageFields, f func(num protowire.Number, v uint64, data []byte) bool) bool {
	return walk(b, known, true, f)
}

func walk(b []byte, known *messageFields, strict bool, f func(num protowire.Number, v uint64, data []byte) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		kind := known.kind(num)
		isKnown := kind != 0
		if !isKnown && strict || isKnown && typ != wireTypeOf[kind] {
			return false
		}
		var v uint64
		var data []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 || kind == stringField && !utf8.Valid(data) {
			return false
		}
		if isKnown && !f(num, v, data) {
			return false
		}
		b = b[n:]
	}
	return true
}

// parse reads a SubscribeResponse; false means read it the slow way.
func (r *wireResponse) parse(b []byte) bool {
	r.reset()
	seen := false // one of the oneof's fields: a second is left to protobuf
	return fields(b, &responseFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch num {
		case 1: // update
			if seen {
				return false
			}
			seen, r.update = true, true
			return r.notification(data)
		case 3: // sync_response
			if seen {
				return false
			}
			seen, r.sync = true, v != 0
		case 4, 5: // error (deprecated), extensions: left to protobuf
			return false
		}
		return true
	})
}

func (r *wireResponse) notification(b []byte) bool {
	prefixSeen := false
	return fields(b, &notificationFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch num {
		case 1:
			r.ts = int64(v)
		case 2:
			if prefixSeen {
				return false
			}
			prefixSeen = true
			start := len(r.elems)
			if !r.path(data) {
				return false
			}
			r.prefix = append(r.prefix, r.elems[start:]...)
			r.elems = r.elems[:start]
		case 4:
			return r.updateOf(data)
		case 5: // delete: left to protobuf
			return false
		}
		return true // atomic
	})
}

func (r *wireResponse) updateOf(b []byte) bool {
	l := wireLeaf{from: len(r.elems)}
	l.to = l.from
	pathSeen, valSeen := false, false
	ok := fields(b, &updateFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch num {
		case 1:
			if pathSeen {
				return false
			}
			pathSeen = true
			if !r.path(data) {
				return false
			}
			l.to = len(r.elems)
		case 3:
			if valSeen {
				return false
			}
			valSeen = true
			return l.value(data)
		case 2: // value (deprecated): left to protobuf
			return false
		}
		return true // duplicates
	})
	if !ok {
		return false
	}
	r.leaves = append(r.leaves, l)
	return true
}

func (r *wireResponse) path(b []byte) bool {
	return fields(b, &pathFields, func(num protowire.Number, v uint64, data []byte) bool {
		if num != 3 {
			return true // element (deprecated), origin, target
		}
		e := wireElem{from: len(r.keys)}
		ok := fields(data, &elemFields, func(num protowire.Number, v uint64, data []byte) bool {
			switch num {
			case 1:
				e.name = data // a string field given twice: the last counts
			case 2:
				return r.key(data, e.from)
			}
			return true
		})
		e.to = len(r.keys)
		r.elems = append(r.elems, e)
		return ok
	})
}

// key reads a map entry into keys (from: the element's first), the last
// of one key winning as protobuf's map does.
func (r *wireResponse) key(b []byte, from int) bool {
	var kv wireKey
	ok := fields(b, &keyFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch num { // a map entry's key and value: fields 1 and 2, both strings
		case 1:
			kv.k = data
		case 2:
			kv.v = data
		}
		return true
	})
	if !ok {
		return false
	}
	for i := from; i < len(r.keys); i++ {
		if string(r.keys[i].k) == string(kv.k) {
			r.keys[i].v = kv.v
			return true
		}
	}
	r.keys = append(r.keys, kv)
	return true
}

// value reads a TypedValue (a oneof: the last field wins); JSON is left
// to the slow way, which walks JSON subtrees.
func (l *wireLeaf) value(b []byte) bool {
	return fields(b, &valueFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch num {
		case 1:
			l.kind, l.s = stringKind, data
		case 2:
			l.kind, l.i = intKind, int64(v)
		case 3:
			l.kind, l.u = uintKind, v
		case 4:
			l.kind, l.u = boolKind, v
		case 7, 8, 9, 10, 11:
			return false // JSON (walked the slow way), messages
		default:
			l.kind = otherKind
		}
		return true
	})
}

// wirePath is a leaf's full path, prefix first, for sampleOf.
type wirePath struct {
	r *wireResponse
	l *wireLeaf
}

func (p wirePath) elem(i int) wireElem {
	if i < len(p.r.prefix) {
		return p.r.prefix[i]
	}
	return p.r.elems[p.l.from+i-len(p.r.prefix)]
}

func (p wirePath) Len() int { return len(p.r.prefix) + p.l.to - p.l.from }

func (p wirePath) NameIs(i int, name string) bool { return string(p.elem(i).name) == name }

func (p wirePath) Key(i int, key string) string {
	e := p.elem(i)
	for _, kv := range p.r.keys[e.from:e.to] {
		if string(kv.k) == key {
			return string(kv.v)
		}
	}
	return ""
}

func (p wirePath) Uint() (uint64, bool) {
	switch p.l.kind {
	case uintKind:
		return p.l.u, true
	case intKind:
		return uint64(p.l.i), p.l.i >= 0
	}
	return 0, false
}

func (p wirePath) Bool() (bool, bool) {
	if p.l.kind == boolKind {
		return p.l.u != 0, true
	}
	return false, false
}

func (p wirePath) String() (string, bool) {
	if p.l.kind == stringKind {
		return string(p.l.s), true
	}
	return "", false
}
