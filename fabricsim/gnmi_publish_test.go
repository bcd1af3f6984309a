package fabricsim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
)

// TestSampleOvertakenByLinkChange: a counter sample computed before a link
// changed but published after the change is refused by the cache as stale;
// the next change of that port must still be published (a sample that did
// not go out must not count as sent).
func TestSampleOvertakenByLinkChange(t *testing.T) {
	f := untickedFabric(t, 1, 2, 1) // the test publishes
	g := f.Switch("leaf1").gnmi
	const port = 2
	operStatus := func() string {
		ns, err := g.query([]string{"interfaces", "interface", models.InterfaceName(port), "state", "oper-status"})
		if err != nil || len(ns) == 0 {
			t.Fatalf("query: %v %v", ns, err)
		}
		for _, u := range ns[len(ns)-1].GetUpdate() {
			return u.GetVal().GetStringVal()
		}
		return ""
	}
	t0 := time.Now().UnixNano()
	if err := g.publish(t0, port, true); err != nil {
		t.Fatal(err)
	}
	if err := g.publishOper(t0+2, port, false); err != nil { // the link fails
		t.Fatal(err)
	}
	if err := g.publish(t0+1, port, true); err == nil { // a sample from before the failure
		t.Fatal("the cache took an older sample over a newer change")
	}
	if got := operStatus(); got != "DOWN" {
		t.Fatalf("oper-status %q after the failure", got)
	}
	if err := g.publishOper(t0+3, port, true); err != nil { // the link returns
		t.Fatal(err)
	}
	if got := operStatus(); got != "UP" {
		t.Errorf("oper-status %q after the link returned: the overtaken sample was counted as published", got)
	}
}

// untickedLeaf is leaf1's gNMI server in a 2×2 leaf-spine with two hosts
// per leaf whose counters never tick: the test publishes.
func untickedLeaf(t *testing.T) *gnmiServer {
	t.Helper()
	return untickedFabric(t, 2, 2, 2).Switch("leaf1").gnmi
}

// untickedFabric is a leaf-spine fabric whose counters never tick (the
// test advances and publishes them), its listeners closed at cleanup.
func untickedFabric(t *testing.T, spines, leaves, hostsPerLeaf int) *Fabric {
	t.Helper()
	topo, err := topology.LeafSpine(spines, leaves, hostsPerLeaf, 100)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{Topology: topo, CounterInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.closeListeners)
	return f
}

// TestSetPublishesOnlyWhatItSets: a gNMI Set of one port's MTU is in the
// published state at once, no other port's state is published again by
// it, and the dataplane is not recomputed for it (a port disabled is);
// counters are the last tick's, whatever Sets happen.
func TestSetPublishesOnlyWhatItSets(t *testing.T) {
	g := untickedLeaf(t)
	stamp := func(port uint32, leaf ...string) (int64, *gnmipb.TypedValue) {
		ns, err := g.query(append([]string{"interfaces", "interface", models.InterfaceName(port)}, leaf...))
		if err != nil || len(ns) == 0 {
			t.Fatalf("query %v of port %d: %v %v", leaf, port, ns, err)
		}
		n := ns[len(ns)-1]
		return n.GetTimestamp(), n.GetUpdate()[0].GetVal()
	}
	t0 := time.Now().UnixNano()
	for _, port := range []uint32{1, 2, 3} {
		if err := g.publish(t0, port, true); err != nil {
			t.Fatal(err)
		}
	}
	g.setCounters(t0, []uint32{1, 2, 3}, []portCounters{{inOctets: 10}, {inOctets: 20}, {inOctets: 30}})
	g.sw.fabric.takeDirty()
	path := interfacePath(models.InterfaceName(2), "config", "mtu")
	if _, err := g.Set(context.Background(), &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: path, Val: uintVal(4200)}}}); err != nil {
		t.Fatal(err)
	}
	// The dataplane models no MTU: its flows are not traced again.
	if d := g.sw.fabric.takeDirty(); d.all || d.flows || len(d.switches) > 0 {
		t.Errorf("a Set of an MTU marked the dataplane for a recompute: %+v", d)
	}
	enabled := interfacePath(models.InterfaceName(3), "config", "enabled")
	if _, err := g.Set(context.Background(), &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: enabled, Val: &gnmipb.TypedValue{Value: &gnmipb.TypedValue_BoolVal{BoolVal: false}}}}}); err != nil {
		t.Fatal(err)
	}
	if d := g.sw.fabric.takeDirty(); !d.all {
		t.Errorf("a port disabled: the dataplane not marked for a recompute (%+v)", d)
	}
	if ts, v := stamp(2, "config", "mtu"); ts <= t0 || v.GetUintVal() != 4200 {
		t.Errorf("port 2's MTU after the Set: %v at %d (published at %d before)", v, ts, t0)
	}
	for _, port := range []uint32{1, 2, 3} {
		if ts, v := stamp(port, "state", "counters", "in-octets"); ts != t0 || v.GetUintVal() != uint64(10*port) {
			t.Errorf("port %d's in-octets after a Set of port 2's MTU: %v at %d, want %d at %d", port, v, ts, 10*port, t0)
		}
	}
	if ts, _ := stamp(3, "config", "mtu"); ts != t0 {
		t.Errorf("port 3's config published again by a Set of port 2's (timestamp %d, was %d)", ts, t0)
	}
}

// TestCountersServedFromTheSample: counters are not in the cache but every
// way of reading them finds the last tick's: a path to one leaf, a
// container, wildcards (one element, or everything below), the RDMA
// queue's ECN counters; and an ON_CHANGE subscription to counters gets
// each tick's.
func TestCountersServedFromTheSample(t *testing.T) {
	g := untickedLeaf(t)
	ports := []uint32{1, 2, 3, 4}
	g.setCounters(7, ports, []portCounters{{inOctets: 1000}, {inOctets: 2000, ecnOctets: 500}, {}, {}})
	count := func(elems ...string) int {
		ns, err := g.query(elems)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range ns {
			if x.GetTimestamp() == 7 {
				n++
			}
		}
		return n
	}
	eth2 := models.InterfaceName(2)
	for _, tc := range []struct {
		elems []string
		want  int
	}{
		{[]string{"interfaces", "interface", eth2, "state", "counters", "in-octets"}, 1},
		{[]string{"interfaces", "interface", eth2, "state", "counters"}, 6},
		{[]string{"interfaces", "interface", "*", "state", "counters", "out-octets"}, 4},
		{[]string{"interfaces", "interface", eth2}, 6},
		{[]string{"interfaces", "*"}, 24},
		{[]string{"qos", "interfaces", "interface", "*", "output", "queues", "queue", "*", "state", "ecn-marked-octets"}, 4},
		{[]string{"interfaces", "interface", eth2, "config"}, 0},
	} {
		if got := count(tc.elems...); got != tc.want {
			t.Errorf("%v: %d counters of the sample, want %d", tc.elems, got, tc.want)
		}
	}
	ns, _ := g.query([]string{"interfaces", "interface", eth2, "state", "counters", "in-octets"})
	if v := ns[len(ns)-1].GetUpdate()[0].GetVal().GetUintVal(); v != 2000 {
		t.Errorf("port 2's in-octets: %d, want 2000", v)
	}
	// An ON_CHANGE subscriber gets the counters it covers at every tick.
	s := &subscriber{g: g, list: &gnmipb.SubscriptionList{Encoding: gnmipb.Encoding_PROTO}, wake: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer s.cancel()
	stop := g.watch(s, []string{"interfaces", "interface", "*", "state", "counters", "in-octets"})
	g.setCounters(8, ports, []portCounters{{inOctets: 1}, {inOctets: 2}, {inOctets: 3}, {inOctets: 4}})
	stop()
	g.setCounters(9, ports, []portCounters{{}, {}, {}, {}})
	got, _ := s.next()
	if len(got) != 4 {
		t.Fatalf("the ON_CHANGE subscriber got %d notifications, want the 4 ports' in-octets of one tick", len(got))
	}
	for _, r := range got {
		if ts := r.GetUpdate().GetTimestamp(); ts != 8 {
			t.Errorf("a notification of tick %d reached the subscriber (want only tick 8's)", ts)
		}
	}
}

// TestCountersStampedWhenAdvanced: a tick publishes the counters stamped
// with the time they were advanced to, even when a counter read (which
// advances them too) got there first and the tick's own time is older
// (it waited for the lock, or came late off a busy ticker). Stamped with
// the older time, the values would be ahead of their stamp, and a
// collector would read a spike, then a dip.
func TestCountersStampedWhenAdvanced(t *testing.T) {
	f := untickedFabric(t, 1, 2, 1)
	t0 := time.Unix(1000, 0)
	read := t0.Add(2 * time.Second) // a pin counter read, advancing the counters
	f.mu.Lock()
	f.last = t0
	f.advanceLocked(read)
	f.mu.Unlock()
	f.tick(t0.Add(500 * time.Millisecond)) // the tick due then, late
	g := f.Switch("leaf1").gnmi
	g.mu.Lock()
	ts := g.counters.ts
	g.mu.Unlock()
	if ts != read.UnixNano() {
		t.Errorf("counters advanced to %v published stamped %v", read, time.Unix(0, ts))
	}
	f.mu.Lock()
	last := f.last
	f.mu.Unlock()
	if !last.Equal(read) {
		t.Errorf("the counters' clock went from %v to %v: a tick must not move it back", read, last)
	}
}

// TestFailsWhileTheDataplaneIsBusy: a link or a switch fails, and every
// port it takes down reports it over gNMI, while the dataplane's lock is
// held (a recomputation holds it for tens of milliseconds at k=16,
// seconds at k=48): the failure is not delayed by the emulator's own
// work. The dataplane takes it once the lock is free: the link carries
// nothing.
func TestFailsWhileTheDataplaneIsBusy(t *testing.T) {
	for _, kind := range []string{"link", "switch"} {
		t.Run(kind, func(t *testing.T) {
			f := untickedFabric(t, 1, 2, 1)
			l := f.snap.FabricLinks()[0]
			fail := func() error { return f.SetLinkUp(l.ID(), false) }
			restore := func() error { return f.SetLinkUp(l.ID(), true) }
			ends := []models.Endpoint{l.A, l.B}
			if kind == "switch" {
				// The spine: the leaf's end of each of its links reports.
				sw := l.A.Switch
				if s, _ := f.snap.Switch(sw); s.Role != models.RoleSpine {
					sw = l.B.Switch
				}
				fail = func() error { return f.InjectFault(FaultSpec{Kind: FaultSwitchDown, Target: string(sw)}) }
				restore = func() error { return f.InjectFault(FaultSpec{Kind: FaultSwitchUp, Target: string(sw)}) }
				ends = f.peerPorts(sw)
			}
			operStatus := func(e models.Endpoint) string {
				ns, err := f.Switch(e.Switch).gnmi.query([]string{"interfaces", "interface", models.InterfaceName(e.Port), "state", "oper-status"})
				if err != nil || len(ns) == 0 {
					t.Fatalf("query %s: %v %v", e, ns, err)
				}
				for _, u := range ns[len(ns)-1].GetUpdate() {
					return u.GetVal().GetStringVal()
				}
				return ""
			}
			f.mu.Lock() // the dataplane busy
			done := make(chan error, 1)
			go func() { done <- fail() }()
			select {
			case err := <-done:
				if err != nil {
					f.mu.Unlock()
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second): // a backstop: it takes microseconds
				f.mu.Unlock()
				<-done
				t.Fatalf("the %s waited for the dataplane's lock to fail", kind)
			}
			for _, e := range ends {
				if got := operStatus(e); got != "DOWN" {
					f.mu.Unlock()
					t.Fatalf("%s reports %q while the dataplane is busy", e, got)
				}
			}
			up := f.linkUpLocked(l)
			f.mu.Unlock()
			if up {
				t.Errorf("the dataplane still counts %s up", l.ID())
			}
			if err := restore(); err != nil {
				t.Fatal(err)
			}
			for _, e := range ends {
				if got := operStatus(e); got != "UP" {
					t.Errorf("%s reports %q after the %s returned", e, got, kind)
				}
			}
		})
	}
}

// TestSwitchesSampleOutOfStep: the switches of a k=48 fat-tree send
// their samples at phases spread over the interval, each the same every
// time, not all at the moment they were subscribed to.
func TestSwitchesSampleOutOfStep(t *testing.T) {
	topo, err := topology.FatTree(48, 100)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 20 * time.Second
	var tenths [10]int
	for _, sw := range topo.Switches {
		p := samplePhase(sw.Name, interval)
		if p < 0 || p >= interval || p != samplePhase(sw.Name, interval) {
			t.Fatalf("%s: phase %s, want a fixed one within %s", sw.Name, p, interval)
		}
		tenths[p*10/interval]++
	}
	for i, n := range tenths {
		if n < len(topo.Switches)/20 { // half a tenth's fair share
			t.Fatalf("%d of %d switches sample in tenth %d of the interval (by tenth: %v)", n, len(topo.Switches), i, tenths)
		}
	}
}

// TestLeavesHeldPerPort: the leaves a port publishes are held as values,
// not notifications: a sample that changes nothing makes nothing; the
// common values are shared by every port; an ON_CHANGE subscription gets
// each change of the leaves it covers, in order, and nothing else; Get's
// wildcards find LLDP leaves as interface leaves.
func TestLeavesHeldPerPort(t *testing.T) {
	g := untickedLeaf(t)
	if l := publishedLeaves[operStatusLeaf]; len(l.path) != 2 || l.path[1] != "oper-status" {
		t.Fatalf("operStatusLeaf (%d) is %v", operStatusLeaf, l.path)
	}
	t0 := time.Now().UnixNano()
	for _, port := range []uint32{1, 2, 3} {
		if err := g.publish(t0, port, true); err != nil {
			t.Fatal(err)
		}
	}
	spine, err := g.sw.fabric.snap.Switch("spine1")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.publishLLDP(t0, 3, spine, 1); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := g.publish(t0+1, 2, true); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a sample that changes nothing allocated %.0f times", allocs)
	}
	g.mu.Lock()
	for _, port := range []uint32{1, 2} {
		if v := g.leaves[port].vals[operStatusLeaf]; v != upVal {
			t.Errorf("port %d's oper-status holds a value of its own (%v), not the shared UP", port, v)
		}
	}
	g.mu.Unlock()

	s := &subscriber{g: g, list: &gnmipb.SubscriptionList{Encoding: gnmipb.Encoding_PROTO}, wake: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer s.cancel()
	stop := g.watch(s, []string{"interfaces", "interface", "*", "state", "oper-status"})
	if err := g.publishOper(t0+2, 2, false); err != nil {
		t.Fatal(err)
	}
	if err := g.publishOper(t0+3, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := g.publish(t0+4, 2, true); err != nil { // no change
		t.Fatal(err)
	}
	if err := g.publishLLDP(t0+4, 3, spine, 2); err != nil { // not covered
		t.Fatal(err)
	}
	stop()
	if err := g.publishOper(t0+5, 1, false); err != nil { // no longer watched
		t.Fatal(err)
	}
	got, _ := s.next()
	var seen []string
	for _, r := range got {
		n := r.GetUpdate()
		seen = append(seen, fmt.Sprintf("%d %s", n.GetTimestamp()-t0, n.GetUpdate()[0].GetVal().GetStringVal()))
	}
	if want := []string{"2 DOWN", "3 UP"}; !slices.Equal(seen, want) {
		t.Errorf("the ON_CHANGE subscription got %v, want %v", seen, want)
	}

	ns, err := g.query([]string{"lldp", "interfaces", "interface", "*", "neighbors", "neighbor", "*", "state", "port-id"})
	if err != nil || len(ns) != 1 {
		t.Fatalf("LLDP port-id under wildcards: %d notifications, %v; want port 3's", len(ns), err)
	}
	if n := ns[0]; n.GetTimestamp() != t0+4 || n.GetUpdate()[0].GetVal().GetStringVal() != models.InterfaceName(2) ||
		n.GetUpdate()[0].GetPath().GetElem()[2].GetKey()["name"] != models.InterfaceName(3) {
		t.Errorf("LLDP port-id: %v", n)
	}
}

// TestCountersPublishedInPhases: with an interval of seconds, a tick
// publishes one phase's switches (every phases-th), the next tick the
// next phase's, so a cycle of phases publishes every switch once and
// none twice.
func TestCountersPublishedInPhases(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		switches int
		want     int
	}{{500 * time.Millisecond, 320, 1}, {time.Second, 320, 1}, {2 * time.Second, 320, 2}, {20 * time.Second, 2880, 20}, {time.Minute, 2880, 20}, {20 * time.Second, 3, 3}} {
		if got := counterPhases(c.interval, c.switches); got != c.want {
			t.Errorf("counterPhases(%v, %d) = %d, want %d", c.interval, c.switches, got, c.want)
		}
	}
	f := untickedFabric(t, 2, 5, 1)
	stamp := func(sw *Switch) int64 {
		sw.gnmi.mu.Lock()
		defer sw.gnmi.mu.Unlock()
		return sw.gnmi.counters.ts
	}
	const phases = 3
	t0 := time.Unix(1000, 0)
	f.mu.Lock()
	f.last = t0
	f.mu.Unlock()
	for phase := range phases {
		at := t0.Add(time.Duration(phase+1) * time.Second)
		f.tickPhase(at, phase, phases)
		for i, sw := range f.order {
			var want int64 // not published yet
			switch {
			case i%phases == phase:
				want = at.UnixNano()
			case i%phases < phase:
				want = t0.Add(time.Duration(i%phases+1) * time.Second).UnixNano() // its own phase's, kept
			}
			if got := stamp(sw); got != want {
				t.Errorf("after phase %d: %s (index %d) stamped %v, want %v", phase, sw.name, i, time.Unix(0, got), time.Unix(0, want))
			}
		}
	}
}
