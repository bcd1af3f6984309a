package controller

import (
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// livenessController is cabledController with liveness at the command
// line's default, and a function that runs liveness ticks on the test's
// clock.
func livenessController(t *testing.T) (*Controller, *cabling, func(ticks int)) {
	t.Helper()
	c, w, now := cabledController(t, DefaultLivenessInterval)
	if !c.disc.livenessOn() {
		t.Fatal("liveness off with an interval and packets")
	}
	ticks := func(n int) {
		for range n {
			*now = now.Add(c.cfg.LivenessInterval)
			c.disc.livenessTick(t.Context(), c.disc.watchedNow())
		}
	}
	return c, w, ticks
}

func setCut(w *cabling, l models.LinkID, cut bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cut {
		w.cut[l] = true
	} else {
		delete(w.cut, l)
	}
}

// TestLivenessLosesACutLinkInTicks: on switches that report no
// oper-status, liveness (on by default, no discovery round needed) finds
// a cut link after livenessMissed ticks without its probes (the end's
// switch heard its other ports meanwhile), routes around it, and
// confirms it at the first tick after its probes cross again.
func TestLivenessLosesACutLinkInTicks(t *testing.T) {
	c, w, ticks := livenessController(t)
	ticks(2)
	if s := discoveryStates(c); s[api.DiscoveryConfirmed] != 6 {
		t.Fatalf("after two ticks: %v, want 6 confirmed", s)
	}
	cut := w.snap.Neighbors("leaf1")[0].Link
	setCut(w, cut, true)
	ticks(livenessMissed)
	if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryConfirmed {
		t.Fatalf("cut link %s is %s after %d ticks, want still confirmed (a probe or two may be dropped)", cut, states[cut].State, livenessMissed)
	}
	ticks(1)
	states, _ := c.disc.LinkDiscovery()
	if states[cut].State != api.DiscoveryLost {
		t.Fatalf("cut link %s is %s after %d ticks, want lost", cut, states[cut].State, livenessMissed+1)
	}
	if m := c.disc.Miswired(); len(m) != 1 || m[0] != cut {
		t.Errorf("links out of routes: %v, want %s", m, cut)
	}
	setCut(w, cut, false)
	ticks(1) // the probes cross
	ticks(1) // and are counted
	if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryConfirmed || len(c.disc.Miswired()) != 0 {
		t.Errorf("repaired link %s is %s, routes avoid %v", cut, states[cut].State, c.disc.Miswired())
	}
}

// TestLivenessNeverLosesALinkThatIsBack: a link cut for fewer ticks than
// it takes to lose it, then back, is never lost, however many ticks
// follow; and one lost, then back, is confirmed and stays so.
func TestLivenessNeverLosesALinkThatIsBack(t *testing.T) {
	c, w, ticks := livenessController(t)
	ticks(2)
	cut := w.snap.Neighbors("leaf2")[1].Link
	for short := 1; short < livenessMissed; short++ {
		setCut(w, cut, true)
		ticks(short)
		setCut(w, cut, false)
		for i := range 3 * livenessMissed {
			ticks(1)
			if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryConfirmed {
				t.Fatalf("link cut for %d ticks, back for %d: %s, want confirmed", short, i+1, states[cut].State)
			}
		}
	}
	setCut(w, cut, true)
	ticks(livenessMissed + 3)
	setCut(w, cut, false)
	ticks(2)
	for i := range 3 * livenessMissed {
		ticks(1)
		if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryConfirmed {
			t.Fatalf("link back for %d ticks after being lost: %s, want confirmed", i+3, states[cut].State)
		}
	}
}

// TestLivenessLosesNoLinkToSilence: packet-ins that stop for many ticks,
// from one switch or from all, lose no link; a cut is still found while
// the switch at its far end is silent.
func TestLivenessLosesNoLinkToSilence(t *testing.T) {
	c, w, ticks := livenessController(t)
	losesNoLinkToSilence(t, c, w, ticks, "ticks", livenessMissed)
}

// TestLivenessWatchesWhatReportsNothing: only link ends on switches
// without oper-status reports are probed fast; past the budget the
// interval stretches.
func TestLivenessWatchesWhatReportsNothing(t *testing.T) {
	c, _, _ := livenessController(t)
	w := c.disc.watchedNow()
	if w.n != 12 || len(w.links) != 6 {
		t.Fatalf("watched %d ends of %d links, want all 12 ends of 6", w.n, len(w.links))
	}
	// The spines report oper-status: only the leaves' ends are watched,
	// probed from the spines.
	topo, err := topology.LeafSpine(2, 3, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range topo.Switches {
		if topo.Switches[i].Role == models.RoleSpine {
			topo.Switches[i].GNMIAddr = "127.0.0.1:1"
		}
	}
	c.setTopology(t.Context(), topo, 2)
	w = c.disc.watchedNow()
	if w.n != 6 || len(w.links) != 6 {
		t.Fatalf("watched %d ends of %d links, want the leaves' 6 ends of 6", w.n, len(w.links))
	}
	for _, f := range w.from {
		if f.sw.Role != models.RoleSpine {
			t.Errorf("probes go out of %s, want only the spines'", f.sw.Name)
		}
	}
	c.cfg.LivenessBudget = 10
	if d := c.disc.livenessInterval(w.n); d != 600*time.Millisecond {
		t.Errorf("6 probes a tick within 10 a second: every %s, want 600ms", d)
	}
	c.cfg.LivenessBudget = 1
	if d := c.disc.livenessInterval(w.n); d != c.cfg.DiscoveryInterval {
		t.Errorf("6 probes a tick within 1 a second: every %s, want the discovery interval %s (never longer)", d, c.cfg.DiscoveryInterval)
	}
}
