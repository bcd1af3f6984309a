package fabrictest_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// TestCongestionAwareWeights: an intent pins 70 Gb/s onto one of leaf1's
// two uplinks and ECMP spreads 75 Gb/s of small flows over both, so that
// uplink is offered more than it can carry. Measured load biases leaf1's
// WCMP weight away from it until it carries less than its capacity; then
// the weights stop moving (bounded steps, a floor and the hysteresis band).
func TestCongestionAwareWeights(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 4), func(o *stack.Config) { o.CongestionInterval = 300 * time.Millisecond })
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var in models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("big", "h1-1", "h2-1", 70, 49152, 1), &in)
	h.Eventually(t, 10*time.Second, "the intent installed", func() bool { return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled })
	hot := intentState(t, h, tok, in.ID).Status.Flows[0].Path[0] // leaf1's uplink it uses
	if _, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 49152, DemandGbps: 70}}); err != nil {
		t.Fatal(err)
	}
	var bg []fabricsim.FlowSpec
	for hst := 2; hst <= 4; hst++ {
		for p := range 10 {
			bg = append(bg, fabricsim.FlowSpec{Src: netip.MustParseAddr(fmt.Sprintf("10.0.1.%d", hst)), Dst: netip.MustParseAddr(fmt.Sprintf("10.0.2.%d", hst)), SrcPort: uint16(50000 + p), DemandGbps: 2.5})
		}
	}
	if _, err := h.Fabric.AddFlows(bg); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	uplink, ok := snap.LinkAt(hot)
	if !ok {
		t.Fatalf("no link at %v", hot)
	}
	offered := func() float64 { // what the flows send into the uplink, Gb/s
		total := 0.0
		for _, f := range h.Fabric.Flows() {
			for _, hop := range f.Hops {
				if hop.Switch == hot.Switch && hop.OutPort == hot.Port {
					total += f.Spec.DemandGbps
				}
			}
		}
		return total
	}
	h.Eventually(t, 10*time.Second, "the uplink over its capacity first", func() bool { return offered() > uplink.Gbps })
	h.Eventually(t, 30*time.Second, "weight moved off the hot uplink until it fits", func() bool {
		return h.Controller.Biases()[hot] < 1 && offered() <= uplink.Gbps && h.Controller.Settled()
	})
	// Settles: the weights stop moving (ten intervals without a change)
	// rather than swinging the share back and forth.
	last, since := fmt.Sprint(h.Controller.Biases()), time.Now()
	h.Eventually(t, 20*time.Second, "weights steady for ten intervals", func() bool {
		if now := fmt.Sprint(h.Controller.Biases()); now != last {
			last, since = now, time.Now()
		}
		return time.Since(since) > 3*time.Second
	})
	if offered() > uplink.Gbps {
		t.Errorf("the uplink is offered %.0f Gb/s again, over its %.0f", offered(), uplink.Gbps)
	}
}

// TestDelaySparesAPacedFullLink: one flow of 95 Gb/s from h1-1 to h2-1,
// hashed (elephants not sampled), fills one of leaf1's uplinks to 95%
// while the other is idle. A single paced stream builds no queue: where
// the switches report their queues, congestion judged by delay leaves the
// uplink's weight alone for twelve intervals; where they report none
// (fabricsim.Options.NoQueueDepths), utilization alone reads it as hot
// and cuts its weight, rerouting hashed traffic for nothing.
func TestDelaySparesAPacedFullLink(t *testing.T) {
	for _, queues := range []bool{true, false} {
		t.Run(fmt.Sprintf("queues=%v", queues), func(t *testing.T) {
			f := fabrictest.StartFabricWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *fabricsim.Options) { o.NoQueueDepths = !queues })
			h := fabrictest.NewServeWith(t, f.Topology(), func(o *stack.Config) {
				o.CongestionInterval = 300 * time.Millisecond
				o.Elephants.SampleOneIn = 0
			})
			h.Eventually(t, 20*time.Second, "the fabric programmed", func() bool { return h.Converged() == nil })
			if _, err := f.AddFlows([]fabricsim.FlowSpec{{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 50000, DemandGbps: 95}}); err != nil {
				t.Fatal(err)
			}
			snap, _ := h.Controller.Snapshot()
			var full models.Link
			h.Eventually(t, 20*time.Second, "an uplink read at 95%", func() bool {
				for _, l := range snap.FabricLinks() {
					if ll := h.Controller.LinkLoad(l); l.A.Switch == "leaf1" && ll.Utilization > 0.9 && ll.Measured {
						full = l
						return true
					}
				}
				return false
			})
			rounds := h.Controller.CongestionRounds()
			if !queues {
				h.Eventually(t, 30*time.Second, "utilization alone to cut the full uplink's weight", func() bool { return h.Controller.WeightChanges() > 0 })
				return
			}
			h.Eventually(t, 60*time.Second, "twelve congestion rounds with the uplink full", func() bool {
				if n := h.Controller.WeightChanges(); n > 0 {
					t.Fatalf("weights changed %d times over a full uplink with no queue (%s, biases %v)", n, full.ID(), h.Controller.Biases())
				}
				return h.Controller.CongestionRounds() >= rounds+12
			})
		})
	}
}
