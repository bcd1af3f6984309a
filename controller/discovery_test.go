package controller

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// cabling carries discovery's probes between a controller's switches:
// a probe sent out of a port arrives as a packet-in at the far end of its
// link, unless the link is cut; a held switch's packet-ins queue until it
// is released (a stalled stream, a busy controller's reader), and then
// arrive all at once.
type cabling struct {
	c    *Controller
	snap *topology.Snapshot

	mu     sync.Mutex
	cut    map[models.LinkID]bool
	held   map[models.SwitchID]bool
	queued []func()
}

func (w *cabling) SendPacket(_ context.Context, sw models.SwitchID, port uint32, payload []byte) error {
	for _, a := range w.snap.Neighbors(sw) {
		if a.LocalPort != port {
			continue
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.cut[a.Link] {
			return nil // sent, lost on the wire
		}
		deliver := func() { w.c.PacketIn(a.Peer, a.PeerPort, payload) }
		if w.held[a.Peer] {
			w.queued = append(w.queued, deliver)
		} else {
			defer deliver() // after the unlock (deferred first, run last)
		}
		return nil
	}
	return nil
}

// release delivers what a held switch queued, and holds it no more.
func (w *cabling) release(sw models.SwitchID) {
	w.mu.Lock()
	delete(w.held, sw)
	queued := w.queued
	w.queued = nil
	w.mu.Unlock()
	for _, f := range queued {
		f()
	}
}

// discoveryController is a leading controller over a 2-spine, 3-leaf
// fabric whose probes travel over a cabling, on a clock the test moves,
// with discovery's rounds alone (liveness off, as --liveness-interval 0).
func discoveryController(t *testing.T) (*Controller, *cabling, func(rounds int)) {
	t.Helper()
	c, w, now := cabledController(t, 0)
	rounds := func(n int) {
		for range n {
			*now = now.Add(time.Second)
			c.disc.probe(t.Context(), 0)
		}
	}
	return c, w, rounds
}

// cabledController is a leading controller over a 2-spine, 3-leaf fabric
// of switches that report no oper-status, whose probes travel over a
// cabling, on a clock the test moves; liveness as given.
func cabledController(t *testing.T, liveness time.Duration) (*Controller, *cabling, *time.Time) {
	t.Helper()
	now := time.Unix(1_000_000, 0)
	w := &cabling{cut: map[models.LinkID]bool{}, held: map[models.SwitchID]bool{}}
	c, _ := tableControllerWith(t, 2, 3, Config{Packets: w, DiscoveryInterval: time.Second, LivenessInterval: liveness, Now: func() time.Time { return now }})
	w.c, w.snap = c, c.current().snap
	return c, w, &now
}

// TestProbeRoundIsSpread: a round spread over a time sends its switches'
// probes in batches across that time, not at once (at k=48 a round sent
// at once kept both cores busy for seconds, and a failure that came
// meanwhile waited), and still sends every probe.
func TestProbeRoundIsSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the bubble's clock: no real waiting
		c, _, _ := discoveryController(t)
		const spread = time.Second
		began := time.Now()
		done := make(chan struct{})
		go func() {
			c.disc.probe(t.Context(), spread)
			close(done)
		}()
		synctest.Wait()
		// Five switches: one every 200 ms; the first's probes go at once.
		first := uint64(len(c.current().snap.Neighbors(c.current().snap.Switches()[0].Name)))
		if n := c.disc.ProbesSent(); n != first {
			t.Fatalf("%d probes sent as the round began, want the first switch's %d", n, first)
		}
		<-done
		if n := c.disc.ProbesSent(); n != 12 { // 6 links, both ends
			t.Fatalf("%d probes sent in the round, want 12", n)
		}
		if took := time.Since(began); took < spread*4/5 {
			t.Fatalf("the round took %s, want its switches spread over %s", took, spread)
		}
	})
}

func discoveryStates(c *Controller) map[api.DiscoveryState]int {
	states, _ := c.disc.LinkDiscovery()
	out := map[api.DiscoveryState]int{}
	for _, d := range states {
		out[d.State]++
	}
	return out
}

// TestDiscoveryLosesACutLink: a link that stops carrying probes (a target
// that reports no oper-status) is lost after probesMissed rounds and
// carries no routes; once it carries them again it is confirmed.
func TestDiscoveryLosesACutLink(t *testing.T) {
	c, w, rounds := discoveryController(t)
	rounds(2)
	if s := discoveryStates(c); s[api.DiscoveryConfirmed] != 6 {
		t.Fatalf("after two rounds: %v, want 6 confirmed", s)
	}
	cut := w.snap.Neighbors("leaf1")[0].Link
	w.mu.Lock()
	w.cut[cut] = true
	w.mu.Unlock()
	rounds(probesMissed + 2)
	states, _ := c.disc.LinkDiscovery()
	if states[cut].State != api.DiscoveryLost {
		t.Fatalf("cut link %s is %s after %d rounds, want lost", cut, states[cut].State, probesMissed+2)
	}
	if s := discoveryStates(c); s[api.DiscoveryConfirmed] != 5 {
		t.Errorf("the other links: %v, want 5 confirmed", s)
	}
	if m := c.disc.Miswired(); len(m) != 1 || m[0] != cut {
		t.Errorf("links out of routes: %v, want %s", m, cut)
	}
	w.mu.Lock()
	delete(w.cut, cut)
	w.mu.Unlock()
	rounds(1)
	if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryConfirmed || len(c.disc.Miswired()) != 0 {
		t.Errorf("repaired link %s is %s, routes avoid %v", cut, states[cut].State, c.disc.Miswired())
	}
}

// TestDiscoveryLosesNoLinkToSilence: packet-ins that stop coming for many
// rounds — from one switch (its stream stalled or its CPU path dropping),
// or from every switch (the controller starved of CPU, reading none) —
// lose no link: silence at every port of a switch at once is not a
// failed cable. When they come again, nothing changed.
func TestDiscoveryLosesNoLinkToSilence(t *testing.T) {
	c, w, rounds := discoveryController(t)
	losesNoLinkToSilence(t, c, w, rounds, "rounds", probesMissed)
}

// losesNoLinkToSilence holds packet-ins for many steps (rounds or ticks,
// missed of them making a link lost) from one switch, then from all, and
// checks that no link is lost, and that a cut is still found while the
// switch at its far end is silent.
func losesNoLinkToSilence(t *testing.T, c *Controller, w *cabling, step func(int), steps string, missed int) {
	t.Helper()
	step(2)
	for _, held := range [][]models.SwitchID{{"spine2"}, {"leaf1", "leaf2", "leaf3", "spine1", "spine2"}} {
		w.mu.Lock()
		for _, sw := range held {
			w.held[sw] = true
		}
		w.mu.Unlock()
		step(5 * missed)
		if s := discoveryStates(c); s[api.DiscoveryConfirmed] != 6 || len(c.disc.Miswired()) != 0 {
			t.Fatalf("packet-ins from %v held for %d %s: %v, routes avoid %v; want every link confirmed", held, 5*missed, steps, s, c.disc.Miswired())
		}
		for _, sw := range held {
			w.release(sw)
		}
		step(1)
		if s := discoveryStates(c); s[api.DiscoveryConfirmed] != 6 {
			t.Fatalf("after the packet-ins from %v came: %v", held, s)
		}
	}
	// A cut link is still found while a switch at its far end is silent:
	// its near end's switch hears its other ports.
	cut := w.snap.Neighbors("leaf2")[1].Link
	w.mu.Lock()
	w.cut[cut] = true
	w.held["leaf2"] = true
	w.mu.Unlock()
	step(missed + 2)
	if states, _ := c.disc.LinkDiscovery(); states[cut].State != api.DiscoveryLost {
		t.Errorf("link %s cut while leaf2 is silent: %s, want lost", cut, states[cut].State)
	}
}

// TestFailureDoesNotWaitForDiscovery: a link fails while discovery is
// judging its links (it holds disc.mu; at k=48 a round's judgement is
// 55,296 links): the failure is routed around at once, and the links
// discovery took out of routes stay out. Waiting for discovery there,
// with the controller's lock held, held every switch's reports.
func TestFailureDoesNotWaitForDiscovery(t *testing.T) {
	c, w, rounds := discoveryController(t)
	rounds(2)
	lost := w.snap.Neighbors("leaf1")[0].Link
	w.mu.Lock()
	w.cut[lost] = true
	w.mu.Unlock()
	rounds(probesMissed + 2)
	if m := c.disc.Miswired(); len(m) != 1 || m[0] != lost {
		t.Fatalf("links out of routes: %v, want %s", m, lost)
	}
	planInBackground(t, c)
	failed := w.snap.Neighbors("leaf2")[0]
	c.disc.mu.Lock() // a round being judged
	done := make(chan struct{})
	go func() {
		c.observeOperStatus(models.CounterSample{Switch: "leaf2", Port: failed.LocalPort, Has: models.HasOperStatus})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a backstop: it takes microseconds
		c.disc.mu.Unlock()
		t.Fatal("the failure waited for discovery's judgement")
	}
	down := c.DownLinks()
	c.disc.mu.Unlock()
	if !down[failed.Link] || !down[lost] || len(down) != 2 {
		t.Fatalf("routes avoid %v, want the failed %s and the lost %s", down, failed.Link, lost)
	}
}
