package fabricsim

import (
	"context"
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
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f, err := New(Options{Topology: topo, CounterInterval: time.Hour}) // no ticks: the test publishes
	if err != nil {
		t.Fatal(err)
	}
	defer f.closeListeners()
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
	if err := g.publish(t0, port, portCounters{}, true, true); err != nil {
		t.Fatal(err)
	}
	if err := g.publishOper(t0+2, port, false); err != nil { // the link fails
		t.Fatal(err)
	}
	if err := g.publish(t0+1, port, portCounters{inOctets: 1}, true, true); err == nil { // a sample from before the failure
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

// TestSetPublishesOnlyWhatItSets: a gNMI Set of one port's MTU is in the
// published state at once, and neither that port's counters nor any other
// port's state are published again by it (the counter tick's job: a Set
// of a whole switch used to republish every port's counters).
func TestSetPublishesOnlyWhatItSets(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 2, 100)
	f, err := New(Options{Topology: topo, CounterInterval: time.Hour}) // no ticks
	if err != nil {
		t.Fatal(err)
	}
	defer f.closeListeners()
	g := f.Switch("leaf1").gnmi
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
		if err := g.publish(t0, port, portCounters{}, true, true); err != nil {
			t.Fatal(err)
		}
	}
	path := interfacePath(models.InterfaceName(2), "config", "mtu")
	if _, err := g.Set(context.Background(), &gnmipb.SetRequest{Update: []*gnmipb.Update{{Path: path, Val: uintVal(4200)}}}); err != nil {
		t.Fatal(err)
	}
	if ts, v := stamp(2, "config", "mtu"); ts <= t0 || v.GetUintVal() != 4200 {
		t.Errorf("port 2's MTU after the Set: %v at %d (published at %d before)", v, ts, t0)
	}
	for _, port := range []uint32{1, 2, 3} {
		if ts, _ := stamp(port, "state", "counters", "in-octets"); ts != t0 {
			t.Errorf("port %d's counters published again by a Set of port 2's MTU (timestamp %d, was %d)", port, ts, t0)
		}
	}
	if ts, _ := stamp(3, "config", "mtu"); ts != t0 {
		t.Errorf("port 3's config published again by a Set of port 2's (timestamp %d, was %d)", ts, t0)
	}
}
