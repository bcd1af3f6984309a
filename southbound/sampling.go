package southbound

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// Digest list settings: a switch sends a list when it holds this many
// samples or when its oldest waited this long.
const (
	digestMaxList    = 1024
	digestMaxTimeout = 50 * time.Millisecond
	digestAckTimeout = time.Second
)

// SetSampling makes a switch sample 1 in oneIn RoCEv2 packets arriving on
// ports (a leaf's host-facing ports) and report them as flow_sample_t
// digests, which reach OnSamples; the flow_sample table then holds exactly
// those ports. oneIn 0 turns sampling off (entries and digest removed).
func (d *P4RT) SetSampling(ctx context.Context, id models.SwitchID, ports []uint32, oneIn uint32) error {
	c, err := d.conn(ctx, id)
	if err != nil {
		return err
	}
	s := d.schema
	digestID, tableID := s.DigestID(p4.DigestFlowSample), s.TableID(p4.TableFlowSample)
	var haveDigest bool
	have := map[uint32]uint64{} // port → one_in
	// The digest is read on its own: a switch answers NOT_FOUND for a
	// digest not configured yet (PI does), which fails a whole request.
	err = d.readAll(ctx, c, &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: []*p4v1.Entity{
		{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: digestID}}},
	}}, "read digest config of "+string(id), func(e *p4v1.Entity) {
		haveDigest = haveDigest || e.GetDigestEntry() != nil
	})
	if err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	req := &p4v1.ReadRequest{DeviceId: c.deviceID, Entities: []*p4v1.Entity{
		{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: tableID}}},
	}}
	if err := d.readAll(ctx, c, req, "read sampling of "+string(id), func(e *p4v1.Entity) {
		if te := e.GetTableEntry(); te != nil && len(te.GetMatch()) == 1 {
			n := uint64(0)
			for _, p := range te.GetAction().GetAction().GetParams() {
				n = p4.Uint(p.GetValue())
			}
			have[uint32(p4.Uint(te.GetMatch()[0].GetExact().GetValue()))] = n
		}
	}); err != nil {
		return err
	}
	entry := func(port uint32, withAction bool) *p4v1.Entity {
		te := &p4v1.TableEntry{TableId: tableID, Match: []*p4v1.FieldMatch{{
			FieldId:        s.MatchFieldID(p4.TableFlowSample, p4.FieldIngressPort),
			FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: minimal(uint64(port))}},
		}}}
		if withAction {
			prm, _ := s.Param(p4.ActionSample, p4.ParamOneIn)
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
				ActionId: s.ActionID(p4.ActionSample),
				Params:   []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: minimal(uint64(oneIn))}},
			}}}
		}
		return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
	}
	var updates []*p4v1.Update
	add := func(t p4v1.Update_Type, e *p4v1.Entity) {
		updates = append(updates, &p4v1.Update{Type: t, Entity: e})
	}
	digest := &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: digestID,
		Config: &p4v1.DigestEntry_Config{MaxTimeoutNs: digestMaxTimeout.Nanoseconds(), MaxListSize: digestMaxList, AckTimeoutNs: digestAckTimeout.Nanoseconds()}}}}
	if oneIn > 0 && !haveDigest {
		add(p4v1.Update_INSERT, digest) // before the entries that feed it
	}
	for _, port := range ports {
		n, ok := have[port]
		switch {
		case oneIn == 0:
		case !ok:
			add(p4v1.Update_INSERT, entry(port, true))
		case n != uint64(oneIn):
			add(p4v1.Update_MODIFY, entry(port, true))
		}
	}
	for port := range have {
		if oneIn == 0 || !slices.Contains(ports, port) {
			add(p4v1.Update_DELETE, entry(port, false))
		}
	}
	if oneIn == 0 && haveDigest {
		add(p4v1.Update_DELETE, digest)
	}
	if len(updates) == 0 {
		return nil
	}
	_, err = c.client.Write(ctx, &p4v1.WriteRequest{DeviceId: c.deviceID, ElectionId: &p4v1.Uint128{Low: c.election},
		Updates: updates, Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR})
	if err != nil {
		return fmt.Errorf("set sampling of %s: %w", id, writeError(err))
	}
	return nil
}

// minimal is v as the shortest big-endian bytestring (P4Runtime's
// canonical form).
func minimal(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	i := 0
	for i < 7 && b[i] == 0 {
		i++
	}
	return b[i:]
}

// samplesOf decodes a digest list into its flow samples (none for
// another digest), each standing for itself (streamCodec reads the
// lists it can from the wire; this decodes the rest).
func (d *P4RT) samplesOf(list *p4v1.DigestList) *digestList {
	out := &digestList{digestID: list.GetDigestId(), listID: list.GetListId()}
	if list.GetDigestId() != d.schema.DigestID(p4.DigestFlowSample) {
		return out
	}
	var at time.Time
	if ts := list.GetTimestamp(); ts > 0 {
		at = time.Unix(0, ts)
	}
	out.samples = make([]models.FlowSample, 0, len(list.GetData()))
	for _, data := range list.GetData() {
		m := data.GetStruct().GetMembers()
		if len(m) != len(p4.FlowSampleFields) {
			continue
		}
		var members [5][]byte
		for i := range members {
			members[i] = m[i].GetBitstring()
		}
		s := flowSample(members)
		s.At = at
		out.samples = append(out.samples, s)
	}
	return out
}

// digestQueue is how many digest lists a switch's stream holds for the
// sample handler; past it, lists are dropped (and acknowledged) so that
// the stream's reader never waits on samples: packet-ins (link
// discovery's probes) and arbitration updates behind them keep moving
// however many samples arrive.
const digestQueue = 8

// takeDigest hands a digest list to the sample handler, or drops it when
// the handler is behind (counted, so the next list taken stands for it).
func (d *P4RT) takeDigest(c *p4conn, list *digestList) {
	select {
	case c.digests <- list:
	default:
		c.droppedSamples.Add(uint64(len(list.samples)))
		d.ackDigest(c, list)
	}
}

// handleDigests runs the sample handler over a stream's digest lists
// until the stream ends, acknowledging each after it.
func (d *P4RT) handleDigests(sw models.SwitchID, c *p4conn) {
	for list := range c.digests {
		if n := float64(len(list.samples)); n > 0 {
			if dropped := c.droppedSamples.Swap(0); dropped > 0 {
				stands := (n + float64(dropped)) / n
				for i := range list.samples {
					list.samples[i].Stands = stands
				}
			}
			if d.opts.OnSamples != nil {
				d.opts.OnSamples(sw, list.samples)
			}
		}
		d.ackDigest(c, list)
	}
}

func (d *P4RT) ackDigest(c *p4conn, list *digestList) {
	_ = c.send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_DigestAck{
		DigestAck: &p4v1.DigestListAck{DigestId: list.digestID, ListId: list.listID}}})
}
