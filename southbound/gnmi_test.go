package southbound

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
)

// sampleOnlyTarget is a gNMI target that does not implement ON_CHANGE,
// and with noQoS does not model OpenConfig QoS either: the refusals in
// isolation (TestGNXITarget runs against a real target refusing more).
type sampleOnlyTarget struct {
	gnmipb.UnimplementedGNMIServer
	noQoS bool

	mu       sync.Mutex
	refused  int
	accepted *gnmipb.SubscriptionList
}

func (s *sampleOnlyTarget) Subscribe(stream gnmipb.GNMI_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, sub := range req.GetSubscribe().GetSubscription() {
		if sub.GetMode() != gnmipb.SubscriptionMode_SAMPLE {
			s.refused++
			s.mu.Unlock()
			return status.Error(codes.Unimplemented, "only SAMPLE subscriptions are supported")
		}
		if s.noQoS && sub.GetPath().GetElem()[0].GetName() == "qos" {
			s.refused++
			s.mu.Unlock()
			return status.Error(codes.NotFound, "no such path: /qos")
		}
	}
	s.accepted = req.GetSubscribe()
	s.mu.Unlock()
	n := &gnmipb.Notification{Timestamp: time.Now().UnixNano(), Update: []*gnmipb.Update{{
		Path: &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth3"}}, {Name: "state"}, {Name: "oper-status"}}},
		Val:  &gnmipb.TypedValue{Value: &gnmipb.TypedValue_StringVal{StringVal: "DOWN"}},
	}}}
	if err := stream.Send(&gnmipb.SubscribeResponse{Response: &gnmipb.SubscribeResponse_Update{Update: n}}); err != nil {
		return err
	}
	if err := stream.Send(&gnmipb.SubscribeResponse{Response: &gnmipb.SubscribeResponse_SyncResponse{SyncResponse: true}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// TestSubscribeFallsBackToSample: a target that refuses ON_CHANGE for
// oper-status, and one that also has no QoS model for ECN counters and
// queue depths, still get subscribed, with SAMPLE for what they have.
func TestSubscribeFallsBackToSample(t *testing.T) {
	for _, noQoS := range []bool{false, true} {
		t.Run(map[bool]string{false: "with QoS", true: "without QoS"}[noQoS], func(t *testing.T) { testFallBack(t, noQoS) })
	}
}

func testFallBack(t *testing.T, noQoS bool) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &sampleOnlyTarget{noQoS: noQoS}
	srv := grpc.NewServer()
	gnmipb.RegisterGNMIServer(srv, target)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan models.CounterSample, 4)
	synced := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- SubscribeCounters(ctx, nil, models.Switch{Name: "leaf1", GNMIAddr: lis.Addr().String()}, time.Second,
			func(s models.CounterSample) { got <- s }, func() { synced <- struct{}{} })
	}()
	select {
	case s := <-got:
		if s.Has != models.HasOperStatus || s.OperUp || s.Port != 3 {
			t.Errorf("sample %+v, want eth3 oper-status DOWN", s)
		}
	case <-ctx.Done():
		t.Fatal("no sample after falling back to SAMPLE")
	}
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("no sync_response")
	}
	target.mu.Lock()
	// Refused: ON_CHANGE with and without the interval, the ECN
	// counters and the queues' depths (eight sets); then, without QoS,
	// SAMPLE with ECN or depths too (three more). Accepted: the four
	// interface leaves, and with QoS the ECN counters and both depths.
	wantRefused, wantSubs := 8, 7
	if noQoS {
		wantRefused, wantSubs = 11, 4
	}
	if target.refused != wantRefused || len(target.accepted.GetSubscription()) != wantSubs {
		t.Errorf("refused %d requests and accepted %d subscriptions, want %d and %d", target.refused, len(target.accepted.GetSubscription()), wantRefused, wantSubs)
	}
	for _, sub := range target.accepted.GetSubscription() {
		if sub.GetSampleInterval() != uint64(time.Second) {
			t.Errorf("accepted %v at %d ns, want the asked 1 s", sub.GetPath(), sub.GetSampleInterval())
		}
	}
	target.mu.Unlock()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("SubscribeCounters returned %v after cancel", err)
	}
}

// TestJSONLeaves: a JSON_IETF subtree (module-qualified names, uint64 as
// strings) and plain JSON (uint64 as numbers past 2^53) decode to the same
// samples and configuration as typed scalars.
func TestJSONLeaves(t *testing.T) {
	ifaces := &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}}}
	n := &gnmipb.Notification{Update: []*gnmipb.Update{
		{Path: ifaces, Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: []byte(
			`{"openconfig-interfaces:interface": [{"name": "eth2", "config": {"mtu": 4200, "enabled": true},
			  "state": {"oper-status": "UP", "counters": {"in-octets": "18446744073709551615"}}}, {"config": {"mtu": 1}}]}`)}}},
		{Path: &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}, {Name: "interface", Key: map[string]string{"name": "eth3"}}, {Name: "state"}}},
			Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonVal{JsonVal: []byte(`{"counters": {"out-octets": 9007199254740993}}`)}}},
	}}
	got := map[string]models.CounterSample{}
	cfg := map[string]string{}
	for _, l := range leavesOf(n) {
		if s, ok := sampleOf("leaf1", time.Unix(0, 0), l); ok {
			got[l.elems[len(l.elems)-1].GetName()+"@"+l.elems[1].GetKey()["name"]] = s
		}
		if l.elems[len(l.elems)-2].GetName() == "config" {
			v, _ := uintValue(l.val)
			b, _ := boolValue(l.val)
			cfg[l.elems[1].GetKey()["name"]+"/"+l.elems[len(l.elems)-1].GetName()] = fmt.Sprint(v, b)
		}
	}
	if s := got["in-octets@eth2"]; s.Port != 2 || s.InOctets != 18446744073709551615 || s.Has != models.HasInOctets {
		t.Errorf("eth2 in-octets: %+v", s)
	}
	if s := got["oper-status@eth2"]; !s.OperUp || s.Has != models.HasOperStatus {
		t.Errorf("eth2 oper-status: %+v", s)
	}
	if s := got["out-octets@eth3"]; s.Port != 3 || s.OutOctets != 9007199254740993 {
		t.Errorf("eth3 out-octets: %+v (a number past 2^53 must keep its digits)", s)
	}
	want := map[string]string{"eth2/mtu": "4200 false", "eth2/enabled": "0 true"}
	if !maps.Equal(cfg, want) {
		t.Errorf("config leaves %v, want %v (an unnamed list entry is skipped)", cfg, want)
	}
}

// FuzzJSONLeaves: whatever JSON a target sends for a subtree, decoding it
// into samples and configuration never panics.
func FuzzJSONLeaves(f *testing.F) {
	f.Add([]byte(`{"openconfig-interfaces:interface":[{"name":"eth1","state":{"counters":{"in-octets":"12"}}}]}`))
	f.Add([]byte(`{"interface":[{"config":{"mtu":1}},{"name":7},null,[1,2]]}`))
	f.Add([]byte(`"UP"`))
	f.Add([]byte(`[{"name":"x"}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		n := &gnmipb.Notification{Update: []*gnmipb.Update{{
			Path: &gnmipb.Path{Elem: []*gnmipb.PathElem{{Name: "interfaces"}}},
			Val:  &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: raw}},
		}}}
		for _, l := range leavesOf(n) {
			sampleOf("leaf1", time.Unix(0, 0), l)
			uintValue(l.val)
			boolValue(l.val)
			stringValue(l.val)
		}
	})
}

// flakyCapsTarget fails its first Capabilities (as an unreachable or
// restarting target would), then offers JSON_IETF alone; it records the
// encoding of every LLDP Get.
type flakyCapsTarget struct {
	gnmipb.UnimplementedGNMIServer
	mu    sync.Mutex
	caps  int
	asked []gnmipb.Encoding
}

func (f *flakyCapsTarget) Capabilities(context.Context, *gnmipb.CapabilityRequest) (*gnmipb.CapabilityResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.caps++
	if f.caps == 1 {
		return nil, status.Error(codes.Unavailable, "restarting")
	}
	return &gnmipb.CapabilityResponse{SupportedEncodings: []gnmipb.Encoding{gnmipb.Encoding_JSON_IETF}}, nil
}

func (f *flakyCapsTarget) Get(_ context.Context, req *gnmipb.GetRequest) (*gnmipb.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, req.GetEncoding())
	return &gnmipb.GetResponse{}, nil
}

// TestEncodingKeptOnlyOnceAnswered: a connection kept between calls
// keeps the encoding its target's Capabilities offered, but not the
// guess made when Capabilities could not be asked.
func TestEncodingKeptOnlyOnceAnswered(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &flakyCapsTarget{}
	srv := grpc.NewServer()
	gnmipb.RegisterGNMIServer(srv, target)
	go srv.Serve(lis)
	defer srv.Stop()
	sw := models.Switch{Name: "leaf1", GNMIAddr: lis.Addr().String()}
	g := &GNMIConfig{Resolve: func(models.SwitchID) (models.Switch, error) { return sw, nil }}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		if _, err := g.LLDPNeighbors(ctx, sw.Name); err != nil {
			t.Fatal(err)
		}
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	want := []gnmipb.Encoding{gnmipb.Encoding_PROTO, gnmipb.Encoding_JSON_IETF, gnmipb.Encoding_JSON_IETF}
	if !slices.Equal(target.asked, want) || target.caps != 2 {
		t.Fatalf("LLDP asked in %v after %d Capabilities calls; want %v after 2", target.asked, target.caps, want)
	}
}
