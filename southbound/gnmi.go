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
)

// CounterSample is one interface's state at a switch-side timestamp.
type CounterSample struct {
	Switch    models.SwitchID
	Port      uint32
	Timestamp time.Time
	// Exactly the fields the update carried are set; Has says which.
	InOctets, OutOctets, OutDiscards uint64
	OperUp                           bool
	// ECNOctets is one egress queue's ECN-marked octets (Queue names it):
	// OpenConfig QoS /qos/interfaces/interface/output/queues/queue/state/
	// ecn-marked-octets, as SONiC serves it.
	ECNOctets uint64
	Queue     string
	Has       SampleFields
}

// SampleFields says which fields of a CounterSample an update carried.
type SampleFields uint8

const (
	HasInOctets SampleFields = 1 << iota
	HasOutOctets
	HasOutDiscards
	HasOperStatus
	HasECNOctets
)

// counterPaths are what Subscribe asks for, relative to /interfaces/interface[name=*]/state.
var counterPaths = [][]string{
	{"counters", "in-octets"},
	{"counters", "out-octets"},
	{"counters", "out-discards"},
	{"oper-status"},
}

// SubscribeCounters streams a switch's interface counters (SAMPLE at
// interval) and oper-status (ON_CHANGE, so a failed link is reported at
// once rather than at the next sample) and calls fn for each interface
// update until ctx ends or the stream breaks. A target that refuses
// ON_CHANGE (Unimplemented or InvalidArgument before its first answer) is
// subscribed again with SAMPLE for everything. synced is called once the
// target sends sync_response.
func SubscribeCounters(ctx context.Context, dialer *Dialer, sw models.Switch, interval time.Duration, fn func(CounterSample), synced func()) error {
	if sw.GNMIAddr == "" {
		return fmt.Errorf("%w: %s has no gNMI address", ErrUnavailable, sw.Name)
	}
	cc, err := grpc.NewClient(sw.GNMIAddr, dialer.Options("gnmi")...)
	if err != nil {
		return fmt.Errorf("%w: gnmi %s: %v", ErrUnavailable, sw.Name, err)
	}
	defer cc.Close()
	// What a target may refuse, most wanted first: oper-status ON_CHANGE
	// (gnxi's target implements SAMPLE only), then the QoS queues' ECN
	// counters (not every target models QoS). Each refusal before the
	// first answer moves to the next.
	attempts := []subscribeOptions{
		{operMode: gnmipb.SubscriptionMode_ON_CHANGE, ecn: true},
		{operMode: gnmipb.SubscriptionMode_SAMPLE, ecn: true},
		{operMode: gnmipb.SubscriptionMode_SAMPLE},
	}
	for i, o := range attempts {
		answered, err := subscribe(ctx, cc, sw, interval, o, fn, synced)
		code := status.Code(err)
		refused := !answered && (code == codes.Unimplemented || code == codes.InvalidArgument || code == codes.NotFound)
		if !refused || ctx.Err() != nil || i == len(attempts)-1 {
			return err
		}
	}
	return nil
}

type subscribeOptions struct {
	operMode gnmipb.SubscriptionMode // ON_CHANGE or SAMPLE for oper-status
	ecn      bool                    // also the QoS queues' ECN counters
}

// subscribe runs one Subscribe stream; answered says whether the target
// sent anything before the stream ended.
func subscribe(ctx context.Context, cc *grpc.ClientConn, sw models.Switch, interval time.Duration, o subscribeOptions, fn func(CounterSample), synced func()) (answered bool, _ error) {
	sub := &gnmipb.SubscriptionList{
		Prefix:   &gnmipb.Path{Target: string(sw.Name)},
		Mode:     gnmipb.SubscriptionList_STREAM,
		Encoding: gnmipb.Encoding_PROTO,
	}
	for _, leaf := range counterPaths {
		p := &gnmipb.Path{Elem: []*gnmipb.PathElem{
			{Name: "interfaces"},
			{Name: "interface", Key: map[string]string{"name": "*"}},
			{Name: "state"},
		}}
		for _, l := range leaf {
			p.Elem = append(p.Elem, &gnmipb.PathElem{Name: l})
		}
		s := &gnmipb.Subscription{Path: p, Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: uint64(interval.Nanoseconds())}
		if leaf[len(leaf)-1] == "oper-status" && o.operMode == gnmipb.SubscriptionMode_ON_CHANGE {
			s.Mode, s.SampleInterval = o.operMode, 0
		}
		sub.Subscription = append(sub.Subscription, s)
	}
	if o.ecn {
		sub.Subscription = append(sub.Subscription, &gnmipb.Subscription{Path: QueuePath("*", "*", "ecn-marked-octets"),
			Mode: gnmipb.SubscriptionMode_SAMPLE, SampleInterval: uint64(interval.Nanoseconds())})
	}
	stream, err := gnmipb.NewGNMIClient(cc).Subscribe(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: gnmi subscribe %s: %w", ErrUnavailable, sw.Name, err)
	}
	if err := stream.Send(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Subscribe{Subscribe: sub}}); err != nil {
		return false, fmt.Errorf("%w: gnmi subscribe %s: %w", ErrUnavailable, sw.Name, err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return answered, ctx.Err()
			}
			return answered, fmt.Errorf("%w: gnmi stream %s: %w", ErrUnavailable, sw.Name, err)
		}
		answered = true
		if resp.GetSyncResponse() {
			if synced != nil {
				synced()
			}
			continue
		}
		n := resp.GetUpdate()
		if n == nil {
			continue
		}
		for _, u := range n.GetUpdate() {
			s, ok := sampleOf(sw.Name, n, u)
			if ok {
				fn(s)
			}
		}
	}
}

// QueuePath is OpenConfig QoS's
// /qos/interfaces/interface[interface-id]/output/queues/queue[name]/state/leaf.
func QueuePath(iface, queue, leaf string) *gnmipb.Path {
	return &gnmipb.Path{Elem: []*gnmipb.PathElem{
		{Name: "qos"}, {Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"interface-id": iface}},
		{Name: "output"}, {Name: "queues"},
		{Name: "queue", Key: map[string]string{"name": queue}},
		{Name: "state"}, {Name: leaf},
	}}
}

// sampleOf decodes one update of /interfaces/interface[name=ethN]/state/...
// or of a queue's ECN counter.
func sampleOf(sw models.SwitchID, n *gnmipb.Notification, u *gnmipb.Update) (CounterSample, bool) {
	elems := append(append([]*gnmipb.PathElem{}, n.GetPrefix().GetElem()...), u.GetPath().GetElem()...)
	if len(elems) == 8 && elems[0].GetName() == "qos" && elems[2].GetName() == "interface" && elems[5].GetName() == "queue" && elems[7].GetName() == "ecn-marked-octets" {
		port, ok := models.PortFromInterface(elems[2].GetKey()["interface-id"])
		if !ok {
			return CounterSample{}, false
		}
		return CounterSample{Switch: sw, Port: port, Timestamp: time.Unix(0, n.GetTimestamp()),
			ECNOctets: u.GetVal().GetUintVal(), Queue: elems[5].GetKey()["name"], Has: HasECNOctets}, true
	}
	if len(elems) < 4 || elems[0].GetName() != "interfaces" || elems[1].GetName() != "interface" || elems[2].GetName() != "state" {
		return CounterSample{}, false
	}
	port, ok := models.PortFromInterface(elems[1].GetKey()["name"])
	if !ok {
		return CounterSample{}, false
	}
	s := CounterSample{Switch: sw, Port: port, Timestamp: time.Unix(0, n.GetTimestamp())}
	leaf := elems[len(elems)-1].GetName()
	switch leaf {
	case "in-octets":
		s.InOctets, s.Has = u.GetVal().GetUintVal(), HasInOctets
	case "out-octets":
		s.OutOctets, s.Has = u.GetVal().GetUintVal(), HasOutOctets
	case "out-discards":
		s.OutDiscards, s.Has = u.GetVal().GetUintVal(), HasOutDiscards
	case "oper-status":
		s.OperUp, s.Has = u.GetVal().GetStringVal() == "UP", HasOperStatus
	default:
		return CounterSample{}, false
	}
	return s, true
}
