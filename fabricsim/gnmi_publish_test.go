package fabricsim

import (
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
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
	if err := g.publish(t0, port, portCounters{}, true); err != nil {
		t.Fatal(err)
	}
	if err := g.publishOper(t0+2, port, false); err != nil { // the link fails
		t.Fatal(err)
	}
	if err := g.publish(t0+1, port, portCounters{inOctets: 1}, true); err == nil { // a sample from before the failure
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
