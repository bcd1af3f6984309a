package southbound

import (
	"context"
	"fmt"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/ocpath"
)

// SubscribeCounters streams a switch's interface counters (SAMPLE at
// interval) and oper-status (ON_CHANGE, so a failed link is reported at
// once rather than at the next sample) and calls fn for each interface
// update until ctx ends or the stream breaks. synced is called once the
// target sends sync_response.
//
// Targets differ in what they serve, so the request is negotiated: the
// encoding from the target's Capabilities (PROTO, else JSON_IETF, else
// JSON), and four features a target may refuse before its first answer
// (Unimplemented, InvalidArgument or NotFound): ON_CHANGE for oper-status,
// the asked sample interval (without it, 0: the target's own lowest), the
// OpenConfig QoS queues' ECN counters (not every target models QoS) and
// their depths (avg-queue-len, max-queue-len). Feature sets are tried most
// wanted first: ON_CHANGE over the interval over ECN over depths. gnxi's
// gnmi_target, for instance, ends up with JSON_IETF, SAMPLE, its 1 s floor
// and no queues.
func SubscribeCounters(ctx context.Context, dialer *Dialer, sw models.Switch, interval time.Duration, fn func(models.CounterSample), synced func()) error {
	if sw.GNMIAddr == "" {
		return fmt.Errorf("%w: %s has no gNMI address", ErrUnavailable, sw.Name)
	}
	cc, release, err := dialer.Conn(sw.GNMIAddr)
	if err != nil {
		return fmt.Errorf("%w: gnmi %s: %v", ErrUnavailable, sw.Name, err)
	}
	defer release()
	enc := negotiateEncoding(ctx, cc)
	for want := allFeatures; ; want-- {
		answered, err := subscribe(ctx, cc, sw, interval, enc, want, fn, synced)
		code := status.Code(err)
		refused := !answered && (code == codes.Unimplemented || code == codes.InvalidArgument || code == codes.NotFound)
		if !refused || ctx.Err() != nil || want == 0 {
			return err
		}
	}
}

// SubscribeCounters is the package function SubscribeCounters through d.
func (d *Dialer) SubscribeCounters(ctx context.Context, sw models.Switch, interval time.Duration, fn func(models.CounterSample), synced func()) error {
	return SubscribeCounters(ctx, d, sw, interval, fn, synced)
}

// subscribeFeatures are what a target may refuse; as a number, a larger
// set is a more wanted one, so counting down tries them in order.
type subscribeFeatures uint8

const (
	wantQueueLen subscribeFeatures = 1 << iota // the QoS queues' depths
	wantECN                                    // the QoS queues' ECN counters
	wantInterval                               // the asked sample interval, not the target's own
	wantOnChange                               // oper-status ON_CHANGE rather than SAMPLE
	allFeatures  = wantQueueLen | wantECN | wantInterval | wantOnChange
)

// queueLeaves are the egress queues' leaves subscribed to, each with the
// feature it needs: the ECN-marked octets (congestion before drops; as
// SONiC serves it), the queue's depth in bytes now and the highest since
// the last sample. The depths are gauges, sent only when they change
// (suppress_redundant): most queues sit at one depth (most at none), and
// two more values per port each interval would be a third more samples to
// take in (telemetry keeps a depth until the next one comes).
var queueLeaves = []struct {
	leaf    string
	feature subscribeFeatures
	gauge   bool
}{{"ecn-marked-octets", wantECN, false}, {"avg-queue-len", wantQueueLen, true}, {"max-queue-len", wantQueueLen, true}}

// subscribe runs one Subscribe stream; answered says whether the target
// sent anything before the stream ended.
func subscribe(ctx context.Context, cc *grpc.ClientConn, sw models.Switch, interval time.Duration, enc gnmipb.Encoding, want subscribeFeatures, fn func(models.CounterSample), synced func()) (answered bool, _ error) {
	sub := &gnmipb.SubscriptionList{
		Prefix:   &gnmipb.Path{Target: string(sw.Name)},
		Mode:     gnmipb.SubscriptionList_STREAM,
		Encoding: enc,
	}
	sample := uint64(0)
	if want&wantInterval != 0 {
		sample = uint64(interval.Nanoseconds())
	}
	for _, leaf := range ocpath.Counters {
		p := &gnmipb.Path{Elem: []*gnmipb.PathElem{
			{Name: "interfaces"},
			{Name: "interface", Key: map[string]string{"name": "*"}},
			{Name: "state"},
		}}
		for _, l := range leaf {
			p.Elem = append(p.Elem, &gnmipb.PathElem{Name: l})
		}
		s := &gnmipb.Subscription{Path: p, Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: sample}
		if leaf[len(leaf)-1] == "oper-status" && want&wantOnChange != 0 {
			s.Mode, s.SampleInterval = gnmipb.SubscriptionMode_ON_CHANGE, 0
		}
		sub.Subscription = append(sub.Subscription, s)
	}
	for _, q := range queueLeaves {
		if want&q.feature != 0 {
			sub.Subscription = append(sub.Subscription, &gnmipb.Subscription{Path: ocpath.Queue("*", "*", q.leaf),
				Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: sample, SuppressRedundant: q.gauge})
		}
	}
	// Answers are read straight from the wire (gnmiwire.go).
	stream, err := cc.NewStream(ctx, &grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true, ClientStreams: true},
		gnmipb.GNMI_Subscribe_FullMethodName, grpc.ForceCodec(subscribeCodec{}))
	if err != nil {
		return false, fmt.Errorf("%w: gnmi subscribe %s: %w", ErrUnavailable, sw.Name, err)
	}
	if err := stream.SendMsg(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Subscribe{Subscribe: sub}}); err != nil {
		return false, fmt.Errorf("%w: gnmi subscribe %s: %w", ErrUnavailable, sw.Name, err)
	}
	var msg wireMessage
	for {
		if err := stream.RecvMsg(&msg); err != nil {
			msg.release()
			if ctx.Err() != nil {
				return answered, ctx.Err()
			}
			return answered, fmt.Errorf("%w: gnmi stream %s: %w", ErrUnavailable, sw.Name, err)
		}
		answered = true
		sync := msg.r.sampled(sw.Name, fn)
		msg.release()
		if sync && synced != nil {
			synced()
		}
	}
}

// sampled calls fn for every counter sample of one answer and reports
// whether it was sync_response.
func (r *wireResponse) sampled(sw models.SwitchID, fn func(models.CounterSample)) (sync bool) {
	if r.slow != nil {
		if r.slow.GetSyncResponse() {
			return true
		}
		n := r.slow.GetUpdate()
		if n == nil {
			return false
		}
		at := time.Unix(0, n.GetTimestamp())
		for _, l := range leavesOf(n) {
			if s, ok := sampleOf(sw, at, l); ok {
				fn(s)
			}
		}
		return false
	}
	if r.sync || !r.update {
		return r.sync
	}
	at := time.Unix(0, r.ts)
	for i := range r.leaves {
		if s, ok := sampleOf(sw, at, wirePath{r, &r.leaves[i]}); ok {
			fn(s)
		}
	}
	return false
}

// leafView is what sampleOf and the Gets' readers (LLDP, configuration)
// read of a leaf: its path's element names and keys, and its value as an
// unsigned number, a string or a boolean. A leaf of
// gNMI's generated messages (leaf) and one read from the wire (wirePath)
// are both.
type leafView interface {
	Len() int
	NameIs(i int, name string) bool
	Key(i int, key string) string
	Uint() (uint64, bool)
	String() (string, bool)
	Bool() (bool, bool)
}

// sampleOf decodes one leaf of /interfaces/interface[name=ethN]/state/...
// or of a queue's ECN counter.
func sampleOf(sw models.SwitchID, at time.Time, l leafView) (models.CounterSample, bool) {
	n := l.Len()
	if n == 8 && l.NameIs(0, "qos") && l.NameIs(2, "interface") && l.NameIs(5, "queue") {
		port, ok := models.PortFromInterface(l.Key(2, "interface-id"))
		v, isUint := l.Uint()
		if !ok || !isUint {
			return models.CounterSample{}, false
		}
		s := models.CounterSample{Switch: sw, Port: port, Timestamp: at, Queue: l.Key(5, "name")}
		switch {
		case l.NameIs(7, "ecn-marked-octets"):
			s.ECNOctets, s.Has = v, models.HasECNOctets
		case l.NameIs(7, "avg-queue-len"):
			s.QueueBytes, s.Has = v, models.HasQueueLen
		case l.NameIs(7, "max-queue-len"):
			s.QueueMaxBytes, s.Has = v, models.HasQueueMax
		default:
			return models.CounterSample{}, false
		}
		return s, true
	}
	if n < 4 || !l.NameIs(0, "interfaces") || !l.NameIs(1, "interface") || !l.NameIs(2, "state") {
		return models.CounterSample{}, false
	}
	port, ok := models.PortFromInterface(l.Key(1, "name"))
	if !ok {
		return models.CounterSample{}, false
	}
	s := models.CounterSample{Switch: sw, Port: port, Timestamp: at}
	counter := func(dst *uint64, has models.SampleFields) bool {
		v, ok := l.Uint()
		*dst, s.Has = v, has
		return ok
	}
	switch {
	case l.NameIs(n-1, "in-octets"):
		ok = counter(&s.InOctets, models.HasInOctets)
	case l.NameIs(n-1, "out-octets"):
		ok = counter(&s.OutOctets, models.HasOutOctets)
	case l.NameIs(n-1, "out-discards"):
		ok = counter(&s.OutDiscards, models.HasOutDiscards)
	case l.NameIs(n-1, "oper-status"):
		var v string
		v, ok = l.String()
		s.OperUp, s.Has = v == "UP", models.HasOperStatus
	default:
		ok = false
	}
	return s, ok
}
