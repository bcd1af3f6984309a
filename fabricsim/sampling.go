package fabricsim

import (
	"math"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/southbound/p4"
)

// maxSamplesPerSecond bounds the digests one switch sends, as a switch's
// CPU path is rate-limited (the rest are lost, as on hardware).
const maxSamplesPerSecond = 40960

// sampleEvery is how often samples are emitted: a switch's digest engine
// sends lists as packets are sampled (within the digest's max_timeout),
// not once per counter tick, so a flow that stops stops yielding samples
// at once.
const sampleEvery = 50 * time.Millisecond

// sample emits the samples due since the last call (see sampleLocked).
func (f *Fabric) sample(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sampleSinceLocked(now)
}

// sampleSinceLocked emits the samples due between the last emission and
// now (its own clock: counter reads advance the counters' clock, not
// the sampler's, so no time is sampled twice or skipped). Under f.mu.
func (f *Fabric) sampleSinceLocked(now time.Time) {
	if f.lastSample.IsZero() {
		f.lastSample = now
		return
	}
	dt := now.Sub(f.lastSample).Seconds()
	if dt <= 0 {
		return
	}
	f.lastSample = now
	f.sampleLocked(dt)
}

// sampleLocked emits the flow_sample digests of the last dt seconds: for
// every flow entering the fabric on a port its first switch
// samples (a flow_sample entry, 1 in N packets) while that switch's
// flow_sample_t digest is configured, one digest per N packets at the rate
// the flow had, fractions carried to the next call; one DigestList per
// switch and call (split at the digest's max_list_size), sent to the
// primary client. Under f.mu.
func (f *Fabric) sampleLocked(dt float64) {
	if dt <= 0 {
		return
	}
	if !f.anySampledLocked() {
		return // nothing samples: the flows need not be walked (27,648 at k=48, 20 times a second)
	}
	limit := int(math.Ceil(maxSamplesPerSecond * dt))
	type due struct {
		datum *p4v1.P4Data
		n     int
	}
	dues := map[*Switch][]due{}
	for _, fl := range f.flows {
		if len(fl.Hops) == 0 {
			continue
		}
		first := fl.Hops[0]
		sw := f.switches[first.Switch]
		if sw == nil || sw.down.Load() {
			continue
		}
		n := f.sampledPortsLocked(sw)[first.InPort]
		if n == 0 {
			continue
		}
		// Sampling comes before forwarding: a flow dropped further on is
		// sampled at what it offers.
		gbps := fl.RateGbps
		if !fl.Delivered {
			gbps = f.offeredGbps(fl.Spec)
		}
		if gbps <= 0 {
			continue
		}
		fl.sampleCarry += gbps * 1e9 * dt / 8 / packetBytes / float64(n)
		k := math.Floor(fl.sampleCarry)
		fl.sampleCarry -= k
		if k > 0 {
			if fl.sample == nil || fl.samplePort != first.InPort {
				fl.sample, fl.samplePort = sampleData(first.InPort, fl.Spec), first.InPort
			}
			dues[sw] = append(dues[sw], due{datum: fl.sample, n: int(k)})
		}
	}
	// The flows' samples interleaved, as packets of concurrent flows are
	// sampled in time: every list a switch sends (and what the rate limit
	// keeps) is a cross-section of its flows, so losing a list, or the
	// limit, costs every flow alike rather than silencing the last ones.
	for sw, ds := range dues {
		var data []*p4v1.P4Data
		for round := 0; len(data) < limit; round++ {
			more := false
			for _, d := range ds {
				if round < d.n && len(data) < limit {
					data = append(data, d.datum) // only read from here on: lists share it
					more = more || round+1 < d.n
				}
			}
			if !more {
				break
			}
		}
		sw.sendDigests(data)
	}
}

// sampledPorts is what a switch's flow_sample table samples, with N, as
// of its tables' generation tablesGen.
type sampledPorts struct {
	gen   uint64
	ports map[uint32]uint64
}

// sampledPortsLocked is sw.sampledPorts(), read again only when sw's
// tables changed: the sampler asks every leaf every 50 ms, and reading
// the table each time would be a quarter of the emulator's CPU at k=48.
func (f *Fabric) sampledPortsLocked(sw *Switch) map[uint32]uint64 {
	gen := sw.tablesGen.Load() // before the read: a write during it reads again next time
	if c, ok := f.sampled[sw]; ok && c.gen == gen {
		return c.ports
	}
	ports := sw.sampledPorts()
	f.sampled[sw] = sampledPorts{gen: gen, ports: ports}
	return ports
}

// anySampledLocked says whether some switch samples a port.
func (f *Fabric) anySampledLocked() bool {
	for _, sw := range f.order {
		if !sw.down.Load() && len(f.sampledPortsLocked(sw)) > 0 {
			return true
		}
	}
	return false
}

// sampledPorts returns the ports the flow_sample table samples, with N,
// if the switch's flow_sample_t digest is configured (else none).
func (sw *Switch) sampledPorts() map[uint32]uint64 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store == nil {
		return nil
	}
	s := sw.store.schema
	if _, on := sw.store.digests[s.DigestID(p4.DigestFlowSample)]; !on {
		return nil
	}
	entries, err := sw.store.readTable(&p4v1.TableEntry{TableId: s.TableID(p4.TableFlowSample)})
	if err != nil {
		return nil
	}
	out := map[uint32]uint64{}
	for _, e := range entries {
		te := e.GetTableEntry()
		if len(te.GetMatch()) != 1 || te.GetAction().GetAction().GetActionId() != s.ActionID(p4.ActionSample) {
			continue
		}
		port := uint32(p4.Uint(te.GetMatch()[0].GetExact().GetValue()))
		for _, prm := range te.GetAction().GetAction().GetParams() {
			out[port] = p4.Uint(prm.GetValue())
		}
	}
	return out
}

// sampleData is one flow_sample_t digest: the members in the P4Info's order.
func sampleData(port uint32, spec FlowSpec) *p4v1.P4Data {
	src, dst := spec.Src.As4(), spec.Dst.As4()
	bits := func(b []byte) *p4v1.P4Data { return &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: b}} }
	return &p4v1.P4Data{Data: &p4v1.P4Data_Struct{Struct: &p4v1.P4StructLike{Members: []*p4v1.P4Data{
		bits(u16(uint16(port))),
		bits(src[:]),
		bits(dst[:]),
		bits(u16(spec.SrcPort)),
		bits(u16(uint16(min(packetBytes-14, 65535)))), // the IPv4 total length
	}}}}
}

// sendDigests sends samples to the primary client in lists of at most the
// digest's max_list_size, stamped with when they were taken (this round of
// sampling; f.mu held); a client that does not keep up loses them.
func (sw *Switch) sendDigests(data []*p4v1.P4Data) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.store == nil {
		return
	}
	id := sw.store.schema.DigestID(p4.DigestFlowSample)
	cfg, on := sw.store.digests[id]
	primary := sw.primaryLocked()
	if !on || primary == nil {
		return
	}
	size := int(cfg.GetConfig().GetMaxListSize())
	if size <= 0 {
		size = len(data)
	}
	for len(data) > 0 {
		n := min(size, len(data))
		sw.digestLists++
		list := &p4v1.DigestList{DigestId: id, ListId: sw.digestLists, Data: data[:n], Timestamp: sw.fabric.lastSample.UnixNano()}
		data = data[n:]
		select {
		case primary.bulk <- &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: list}}:
		default:
		}
	}
}

// writeDigest configures a digest (P4Runtime DigestEntry): INSERT enables
// it, MODIFY changes its list size and timeouts, DELETE disables it.
func (s *tableStore) writeDigest(typ p4v1.Update_Type, d *p4v1.DigestEntry) error {
	if _, ok := s.schema.DigestByID(d.GetDigestId()); !ok {
		return errf(codes.NotFound, "digest %d is not in the P4Info", d.GetDigestId())
	}
	_, exists := s.digests[d.GetDigestId()]
	switch typ {
	case p4v1.Update_INSERT:
		if exists {
			return errf(codes.AlreadyExists, "digest %d is already configured", d.GetDigestId())
		}
	case p4v1.Update_MODIFY, p4v1.Update_DELETE:
		if !exists {
			return errf(codes.NotFound, "digest %d is not configured", d.GetDigestId())
		}
	default:
		return errf(codes.InvalidArgument, "update type %s", typ)
	}
	if typ == p4v1.Update_DELETE {
		delete(s.digests, d.GetDigestId())
		return nil
	}
	if d.GetConfig() == nil {
		return errf(codes.InvalidArgument, "digest %d needs a config", d.GetDigestId())
	}
	s.digests[d.GetDigestId()] = proto.Clone(d).(*p4v1.DigestEntry)
	return nil
}

// readDigests answers a read of digest configurations (ID 0: all).
func (s *tableStore) readDigests(q *p4v1.DigestEntry) ([]*p4v1.Entity, error) {
	// As PI answers: a digest ID is required, and a digest that exists
	// but is not configured is NOT_FOUND like one that does not exist.
	if q.GetDigestId() == 0 {
		return nil, errf(codes.Unimplemented, "digest_id must be set when reading DigestEntry")
	}
	if _, ok := s.schema.DigestByID(q.GetDigestId()); !ok {
		return nil, errf(codes.NotFound, "%d is not a valid digest id", q.GetDigestId())
	}
	d, ok := s.digests[q.GetDigestId()]
	if !ok {
		return nil, errf(codes.NotFound, "digest %d not configured", q.GetDigestId())
	}
	return []*p4v1.Entity{{Entity: &p4v1.Entity_DigestEntry{DigestEntry: proto.Clone(d).(*p4v1.DigestEntry)}}}, nil
}
