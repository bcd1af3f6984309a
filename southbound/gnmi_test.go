package southbound

import (
	"context"
	"net"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/accelnet/accelnet/models"
)

// sampleOnlyTarget is a gNMI target that, like gnxi's gnmi_target, does
// not implement ON_CHANGE (no real one of those can run here), and with
// noQoS does not model OpenConfig QoS either.
type sampleOnlyTarget struct {
	gnmipb.UnimplementedGNMIServer
	refused chan struct{}
	noQoS   bool
}

func (s *sampleOnlyTarget) Subscribe(stream gnmipb.GNMI_SubscribeServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	for _, sub := range req.GetSubscribe().GetSubscription() {
		if sub.GetMode() != gnmipb.SubscriptionMode_SAMPLE {
			s.refused <- struct{}{}
			return status.Error(codes.Unimplemented, "only SAMPLE subscriptions are supported")
		}
		if s.noQoS && sub.GetPath().GetElem()[0].GetName() == "qos" {
			return status.Error(codes.NotFound, "no such path: /qos")
		}
	}
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
// oper-status, and one that also has no QoS model for ECN counters, still
// get subscribed, with SAMPLE for what they have.
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
	target := &sampleOnlyTarget{refused: make(chan struct{}, 1), noQoS: noQoS}
	srv := grpc.NewServer()
	gnmipb.RegisterGNMIServer(srv, target)
	go srv.Serve(lis)
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan CounterSample, 4)
	synced := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- SubscribeCounters(ctx, nil, models.Switch{Name: "leaf1", GNMIAddr: lis.Addr().String()}, time.Second,
			func(s CounterSample) { got <- s }, func() { synced <- struct{}{} })
	}()
	select {
	case <-target.refused:
	case <-ctx.Done():
		t.Fatal("the client never asked for ON_CHANGE")
	}
	select {
	case s := <-got:
		if s.Has != HasOperStatus || s.OperUp || s.Port != 3 {
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
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("SubscribeCounters returned %v after cancel", err)
	}
}
