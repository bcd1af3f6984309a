package southbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// Flow pins are read straight from the wire. A new leader reads every
// switch back (about 450,000 pins at k=16 with 100,000 intents), and
// decoding each entry into P4Runtime's generated messages (an entity, a
// table entry, three field matches, an action and its parameter, each
// with its bytes) would be a sixth of its CPU during a takeover, and
// much of the collector's work. readCodec takes a flow-pin entry of the shape the
// controller writes (three exact matches, the pin action with its port,
// the tag) straight to a models.FlowPin; any other entity, or a pin entry
// with anything else in it, goes through proto.Unmarshal and decode, so
// both ways read alike (TestPinsReadFromTheWire). The pins'
// direct counters, read for every installed intent every few seconds,
// are read the same way (TestPinCountersReadFromTheWire), and so are
// routes (a resync reads every switch's every 30 s; at k=48 decoding the
// reads into generated messages is 0.85 of the 4.7 GB the controller
// allocates over 45 s of failures; TestRoutesReadFromTheWire).
//
// What it pays (BenchmarkReadPins, BenchmarkReadRoutes: a Read answer of
// 1,000 entries, one 2-core AMD EPYC): pins 0.29 ms and no allocation
// against 1.87 ms, 1.2 MB and 25,000 allocations through the generated
// messages; routes 0.14 ms against 0.79 ms, 0.6 MB and 11,000.

// wireIDs is what a flow-pin entry and a route are named by in the
// P4Info: the IDs the driver writes them with (entities) and reads them
// back by.
type wireIDs struct {
	table, src, dst, sport, action, port uint32
	lpm, lpmDst                          uint32
}

func newWireIDs(s *p4.Schema) wireIDs {
	w := wireIDs{
		table:  s.TableID(p4.TableFlowPin),
		src:    s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Src),
		dst:    s.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Dst),
		sport:  s.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort),
		action: s.ActionID(p4.ActionPinEgress),
		lpm:    s.TableID(p4.TableIPv4LPM),
		lpmDst: s.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst),
	}
	if p, err := s.Param(p4.ActionPinEgress, p4.ParamPort); err == nil {
		w.port = p.GetId()
	}
	return w
}

// readCodec decodes Read answers into a *readMessage. tag, when set, is
// the only entry metadata a pin or route read from the wire may carry
// (others go the generated way, to be told apart as foreign).
type readCodec struct {
	protoRequests
	w   wireIDs
	tag []byte
	// pins, counters, routes: which the reading takes from the wire
	// (those not asked for are decoded into entities like any other).
	pins, counters, routes bool
}

// readMessage is one Read answer: its flow pins, routes and other
// entities.
type readMessage struct {
	pins     []models.FlowPin
	counters []pinCount
	routes   []models.Route
	entities []*p4v1.Entity
}

// pinCount is a flow pin's direct counter (bytes).
type pinCount struct {
	key   models.FlowKey
	bytes uint64
}

func (c readCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*readMessage)
	if !ok {
		return fmt.Errorf("read answer decoded into a %T", v)
	}
	m.pins, m.counters, m.routes, m.entities = m.pins[:0], m.counters[:0], m.routes[:0], m.entities[:0]
	var err error
	if !fields(data, &readResponseFields, func(_ protowire.Number, _ uint64, ent []byte) bool {
		var te []byte // the entity's table entry, if that is all it is
		isEntry := false
		if c.pins || c.routes {
			te, isEntry = only(ent, &entityFields, 2) // Entity.table_entry
		}
		if isEntry && c.pins {
			if p, ok := c.pin(te); ok {
				m.pins = append(m.pins, p)
				return true
			}
		}
		if isEntry && c.routes {
			if r, ok := c.route(te); ok {
				m.routes = append(m.routes, r)
				return true
			}
		}
		if !isEntry && c.counters {
			if k, n, ok := c.counter(ent); ok {
				m.counters = append(m.counters, pinCount{k, n})
				return true
			}
		}
		e := &p4v1.Entity{}
		if err = proto.Unmarshal(ent, e); err != nil {
			return false
		}
		m.entities = append(m.entities, e)
		return true
	}) && err == nil {
		err = errors.New("read answer does not parse")
	}
	return err
}

// The P4Runtime messages a flow pin is read through, with every field
// they declare below 16 (p4runtime.proto), so that one the reading does
// not expect is left to protobuf rather than skipped.
var (
	readResponseFields = messageFields{1: messageField}
	entityFields       = messageFields{1: messageField, 2: messageField, 3: messageField, 4: messageField, 5: messageField, 6: messageField, 7: messageField, 8: messageField, 9: messageField, 10: messageField, 11: messageField, 12: messageField}
	tableEntryFields   = messageFields{1: varintField, 2: messageField, 3: messageField, 4: varintField, 5: varintField, 6: messageField, 7: messageField, 8: varintField, 9: varintField, 10: messageField, 11: bytesField, 12: messageField}
	fieldMatchFields   = messageFields{1: varintField, 2: messageField, 3: messageField, 4: messageField, 6: messageField, 7: messageField}
	exactFields        = messageFields{1: bytesField}
	lpmFields          = messageFields{1: bytesField, 2: varintField}
	tableActionFields  = messageFields{1: messageField, 2: varintField, 3: varintField, 4: messageField}
	actionFields       = messageFields{1: varintField, 4: messageField}
	paramFields        = messageFields{2: varintField, 3: bytesField}

	directCounterFields = messageFields{1: messageField, 2: messageField}
	counterDataFields   = messageFields{1: varintField, 2: varintField}
)

// pin reads a TableEntry's bytes as a flow pin of the controller's shape.
func (c readCodec) pin(te []byte) (models.FlowPin, bool) {
	key, action, meta, ok := c.key(te)
	if !ok || action == nil || c.tag != nil && !bytes.Equal(meta, c.tag) {
		return models.FlowPin{}, false
	}
	port, ok := c.port(action)
	if !ok {
		return models.FlowPin{}, false
	}
	return models.FlowPin{Key: key, Port: port}, true
}

// route reads a TableEntry's bytes as a route of the controller's shape:
// an LPM entry on the destination alone, to one member or one group.
func (c readCodec) route(te []byte) (models.Route, bool) {
	var r models.Route
	matched := false
	table, action, meta, ok := entry(te, func(b []byte) bool { // the destination's, alone
		if matched {
			return false
		}
		r.Prefix, matched = c.lpmMatch(b)
		return matched
	})
	if !ok || table != uint64(c.w.lpm) || !matched || action == nil || c.tag != nil && !bytes.Equal(meta, c.tag) {
		return models.Route{}, false
	}
	set := false
	if !strictFields(action, &tableActionFields, func(num protowire.Number, v uint64, _ []byte) bool {
		if set || v == 0 || v > 1<<32-1 {
			return false
		}
		switch num {
		case 2: // action_profile_member_id
			r.MemberID = uint32(v)
		case 3: // action_profile_group_id
			r.GroupID = uint32(v)
		default:
			return false
		}
		set = true
		return true
	}) || !set {
		return models.Route{}, false
	}
	return r, true
}

// lpmMatch reads a route's FieldMatch: an LPM match on the destination.
func (c readCodec) lpmMatch(b []byte) (netip.Prefix, bool) {
	id, lpm, ok := fieldMatch(b, 4) // FieldMatch.lpm
	if !ok || id != uint64(c.w.lpmDst) {
		return netip.Prefix{}, false
	}
	var value []byte
	var bits uint64
	seenValue, seenBits := false, false
	if !strictFields(lpm, &lpmFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch {
		case num == 1 && !seenValue:
			value, seenValue = data, true
		case num == 2 && !seenBits && v <= 32:
			bits, seenBits = v, true
		default:
			return false
		}
		return true
	}) {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(p4.Addr(value), int(bits)), true
}

// counter reads an Entity's bytes as a flow pin's direct counter: its
// key and byte count.
func (c readCodec) counter(ent []byte) (models.FlowKey, uint64, bool) {
	dc, ok := only(ent, &entityFields, 8) // Entity.direct_counter_entry
	if !ok {
		return models.FlowKey{}, 0, false
	}
	var te, data []byte
	if !strictFields(dc, &directCounterFields, func(num protowire.Number, _ uint64, b []byte) bool {
		switch {
		case num == 1 && te == nil:
			te = b
		case num == 2 && data == nil:
			data = b
		default:
			return false
		}
		return true
	}) || te == nil {
		return models.FlowKey{}, 0, false
	}
	key, _, _, ok := c.key(te) // the action is ignored (p4runtime.proto)
	if !ok {
		return models.FlowKey{}, 0, false
	}
	var count uint64
	seen := false
	if !strictFields(data, &counterDataFields, func(num protowire.Number, v uint64, _ []byte) bool {
		if num == 1 {
			if seen {
				return false
			}
			count, seen = v, true
		}
		return true
	}) {
		return models.FlowKey{}, 0, false
	}
	return key, count, true
}

// only is the one field num of a message's bytes, where it is the only
// field there is.
func only(b []byte, known *messageFields, num protowire.Number) ([]byte, bool) {
	var out []byte
	if !strictFields(b, known, func(n protowire.Number, _ uint64, data []byte) bool {
		if n != num || out != nil {
			return false
		}
		out = data
		return true
	}) || out == nil {
		return nil, false
	}
	return out, true
}

// fieldMatch reads a FieldMatch that holds one match of kind (its field
// number in FieldMatch: 2 exact, 4 LPM): its field ID and that match's
// bytes.
func fieldMatch(b []byte, kind protowire.Number) (id uint64, match []byte, ok bool) {
	ok = strictFields(b, &fieldMatchFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch {
		case num == 1 && id == 0:
			id = v
		case num == kind && match == nil:
			match = data
		default:
			return false
		}
		return true
	})
	return id, match, ok && match != nil
}

// entry walks a TableEntry's bytes of the shape the controller writes:
// it returns its table ID and its action's and metadata's bytes (nil:
// none), and hands each match to match, which says whether it is one the
// reading takes. Any other field, or one given twice, and ok is false.
func entry(te []byte, match func([]byte) bool) (table uint64, action, meta []byte, ok bool) {
	ok = strictFields(te, &tableEntryFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch {
		case num == 1 && table == 0: // table_id
			table = v
		case num == 2: // match
			return match(data)
		case num == 3 && action == nil:
			action = data
		case num == 11 && meta == nil: // metadata
			meta = data
		default:
			return false
		}
		return true
	})
	return table, action, meta, ok
}

// key reads a flow-pin TableEntry: its key, its action's and metadata's
// bytes (nil: none).
func (c readCodec) key(te []byte) (key models.FlowKey, action, meta []byte, ok bool) {
	var matched [3]bool
	table, action, meta, ok := entry(te, func(b []byte) bool { return c.match(b, &key, &matched) })
	if !ok || table != uint64(c.w.table) || matched != [3]bool{true, true, true} {
		return models.FlowKey{}, nil, nil, false
	}
	return key, action, meta, true
}

// match reads one FieldMatch of a pin's key: an exact match on one of
// its three fields, each once.
func (c readCodec) match(b []byte, key *models.FlowKey, matched *[3]bool) bool {
	id, exact, ok := fieldMatch(b, 2) // FieldMatch.exact
	if !ok {
		return false
	}
	value, ok := only(exact, &exactFields, 1)
	if !ok {
		return false
	}
	var i int
	switch uint32(id) {
	case c.w.src:
		i, key.Src = 0, p4.Addr(value)
	case c.w.dst:
		i, key.Dst = 1, p4.Addr(value)
	case c.w.sport:
		i, key.SrcPort = 2, uint16(p4.Uint(value))
	default:
		return false
	}
	if matched[i] {
		return false
	}
	matched[i] = true
	return true
}

// port reads a TableAction that calls the pin action with its port as
// its one parameter.
func (c readCodec) port(b []byte) (uint32, bool) {
	a, ok := only(b, &tableActionFields, 1) // TableAction.action
	if !ok {
		return 0, false
	}
	var id uint64
	var port []byte
	params := 0
	ok = strictFields(a, &actionFields, func(num protowire.Number, v uint64, data []byte) bool {
		switch {
		case num == 1 && id == 0: // action_id
			id = v
		case num == 4: // params
			params++
			var pid uint64
			var value []byte
			return strictFields(data, &paramFields, func(num protowire.Number, v uint64, data []byte) bool {
				switch {
				case num == 2 && pid == 0:
					pid = v
				case num == 3 && value == nil:
					value = data
				default:
					return false
				}
				if pid == uint64(c.w.port) {
					port = value
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	if !ok || id != uint64(c.w.action) || params != 1 || port == nil {
		return 0, false
	}
	return uint32(p4.Uint(port)), true
}

// wireReads are what a read takes from the wire, each handed to its
// func (nil: not read that way).
type wireReads struct {
	pin   func(models.FlowPin)
	count func(models.FlowKey, uint64)
	route func(models.Route)
}

// readWire sends one ReadRequest and hands the answer's flow pins, their
// direct counters and routes to w, read from the wire, and every other
// entity to fn. tagged: a pin or route must carry the controller's tag to
// be read this way (Read with --foreign-entries keep tells the others
// apart).
func (d *P4RT) readWire(ctx context.Context, c *p4conn, req *p4v1.ReadRequest, what string, tagged bool, w wireReads, fn func(*p4v1.Entity)) error {
	codec := readCodec{w: d.wireIDs, pins: w.pin != nil, counters: w.count != nil, routes: w.route != nil}
	if tagged {
		codec.tag = d.opts.EntryTag
	}
	rs, err := c.cc.NewStream(ctx, &grpc.StreamDesc{StreamName: "Read", ServerStreams: true}, "/p4.v1.P4Runtime/Read", grpc.ForceCodec(codec))
	if err != nil {
		return mapStatus(what, err)
	}
	if err := rs.SendMsg(req); err != nil {
		return mapStatus(what, err)
	}
	if err := rs.CloseSend(); err != nil {
		return mapStatus(what, err)
	}
	var m readMessage
	for {
		err := rs.RecvMsg(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return mapStatus(what, err)
		}
		for _, p := range m.pins {
			w.pin(p)
		}
		for _, n := range m.counters {
			w.count(n.key, n.bytes)
		}
		for _, r := range m.routes {
			w.route(r)
		}
		for _, e := range m.entities {
			fn(e)
		}
	}
}
