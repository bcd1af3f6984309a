package fabricsim

import (
	"context"
	"math"
	"testing"
	"time"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/ocpath"
	"github.com/accelnet/accelnet/topology"
)

// TestQueueModel: the steady-state depth of an egress queue is none when
// idle or fed by one paced flow, a few packets under load, the ECN
// marking threshold when the port is exactly full, Kmax at 2:1 offered,
// towards the buffer past that; downstream of another bottleneck, what
// the port sends decides, not what the senders wanted. Thresholds scale
// with the port's speed, so their delays do not.
func TestQueueModel(t *testing.T) {
	const g = 100e9
	for _, c := range []struct {
		name            string
		sent, offered   float64
		flows           int
		lowest, highest float64
	}{
		{"idle", 0, 0, 0, 0, 0},
		{"one paced flow at line rate", g, g, 1, 0, 0},
		{"many flows at half load", 0.5 * g, 0.5 * g, 64, 0.2 * packetBytes, 0.3 * packetBytes},
		{"many flows at 90%", 0.9 * g, 0.9 * g, 64, 3.9 * packetBytes, 4.1 * packetBytes},
		{"exactly full", g, g, 8, queueKminPer100G, queueKminPer100G},
		{"2:1 offered", g, 2 * g, 2, queueKmaxPer100G, queueKmaxPer100G},
		{"4:1 incast", g, 4 * g, 4, (queueKmaxPer100G + queueBufferPer100G) / 2, (queueKmaxPer100G + queueBufferPer100G) / 2},
		{"downstream of a bottleneck", 0.5 * g, 2 * g, 2, 0.1 * packetBytes, 0.15 * packetBytes},
	} {
		got := queueBytes(100, c.sent, c.offered, c.flows)
		if got < c.lowest-1e-6 || got > c.highest+1e-6 {
			t.Errorf("%s: %.0f bytes, want %.0f to %.0f", c.name, got, c.lowest, c.highest)
		}
	}
	prev := 0.0
	for o := 1.0; o <= 64; o *= 1.5 {
		q := queueBytes(100, g, o*g, 8)
		if q < prev || q > queueBufferPer100G {
			t.Fatalf("offered %.1f× capacity: %.0f bytes after %.0f (deeper with more offered, within the buffer)", o, q, prev)
		}
		prev = q
	}
	if a, b := queueBytes(100, g, 2*g, 2)/100, queueBytes(400, 4*g, 8*g, 2)/400; math.Abs(a-b) > 1e-6 {
		t.Errorf("2:1 at 100 and 400 Gb/s: %.1f and %.1f bytes per Gb/s: the delay should match", a, b)
	}
}

// TestQueuesBuildWhereFlowsCollide: two hosts sending at line rate to a
// third on their leaf fill the third's port 2:1, which queues to Kmax.
// One sender stops: the port is exactly full of one flow, and empties.
func TestQueuesBuildWhereFlowsCollide(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 3, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	h1, h2, h3 := topo.Hosts[0], topo.Hosts[1], topo.Hosts[2]
	out := topo.Hosts[2].Attach
	if err := c.write(1, member(s, 3, out.Port)); err != nil {
		t.Fatal(err)
	}
	if err := c.write(1, route(s, h3.IP.String()+"/32", 3)); err != nil {
		t.Fatal(err)
	}
	ids, err := f.AddFlows([]FlowSpec{{Src: h1.IP, Dst: h3.IP, SrcPort: 1, DemandGbps: 100}, {Src: h2.IP, Dst: h3.IP, SrcPort: 2, DemandGbps: 100}})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.recomputeLocked()
	f.mu.Unlock()
	if q := f.QueueBytes(out); q != queueKmaxPer100G {
		t.Errorf("the receiver's port, 2:1: %.0f bytes, want %d", q, queueKmaxPer100G)
	}
	f.RemoveFlows(ids[1:])
	f.mu.Lock()
	f.recomputeLocked()
	f.mu.Unlock()
	if q := f.QueueBytes(out); q != 0 {
		t.Errorf("the receiver's port with one flow left: %.0f bytes, want none", q)
	}
}

// TestQueueDepthsSentWhenTheyChange: a SAMPLE subscription to the queues'
// depths with suppress_redundant gets every port's depth in its initial
// values and its first sample, then nothing while no depth changes: the
// next value it gets, however many intervals later, is the port whose
// queue filled.
func TestQueueDepthsSentWhenTheyChange(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 3, 100)
	f := run(t, topo)
	c, s := primary(t, f.Switch("leaf1"))
	h1, h2, h3 := topo.Hosts[0], topo.Hosts[1], topo.Hosts[2]
	out := h3.Attach
	if err := c.write(1, member(s, 3, out.Port)); err != nil {
		t.Fatal(err)
	}
	if err := c.write(1, route(s, h3.IP.String()+"/32", 3)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := gnmipb.NewGNMIClient(c.cc).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 20 * time.Millisecond
	if err := sub.Send(&gnmipb.SubscribeRequest{Request: &gnmipb.SubscribeRequest_Subscribe{Subscribe: &gnmipb.SubscriptionList{
		Prefix: &gnmipb.Path{Target: "leaf1"}, Mode: gnmipb.SubscriptionList_STREAM, Encoding: gnmipb.Encoding_PROTO,
		Subscription: []*gnmipb.Subscription{{Path: ocpath.Queue("*", "*", "avg-queue-len"), Mode: gnmipb.SubscriptionMode_SAMPLE,
			SampleInterval: uint64(interval), SuppressRedundant: true}},
	}}}); err != nil {
		t.Fatal(err)
	}
	type depth struct {
		iface string
		bytes uint64
	}
	updates := make(chan depth, 64)
	go func() {
		for {
			resp, err := sub.Recv()
			if err != nil {
				close(updates)
				return
			}
			for _, u := range resp.GetUpdate().GetUpdate() {
				updates <- depth{u.GetPath().GetElem()[2].GetKey()["interface-id"], u.GetVal().GetUintVal()}
			}
		}
	}()
	next := func(what string) depth {
		t.Helper()
		select {
		case d, ok := <-updates:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return d
		case <-ctx.Done():
			t.Fatalf("%s: nothing came", what)
		}
		return depth{}
	}
	// The initial values (the subscription's snapshot) and at least one
	// sample: every port's depth, all empty.
	ports := len(f.snap.Ports("leaf1"))
	for range 2 * ports {
		if d := next("every port's depth, twice"); d.bytes != 0 {
			t.Fatalf("%s at %d bytes on an idle switch", d.iface, d.bytes)
		}
	}
	if _, err := f.AddFlows([]FlowSpec{{Src: h1.IP, Dst: h3.IP, SrcPort: 1, DemandGbps: 100}, {Src: h2.IP, Dst: h3.IP, SrcPort: 2, DemandGbps: 100}}); err != nil {
		t.Fatal(err)
	}
	if d := next("the filled queue"); d.iface != models.InterfaceName(out.Port) || d.bytes != queueKmaxPer100G {
		t.Fatalf("the next depth sent: %s at %d bytes, want %s at %d (the rest did not change)", d.iface, d.bytes, models.InterfaceName(out.Port), queueKmaxPer100G)
	}
}
