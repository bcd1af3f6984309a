package fabrictest_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkFailureReaction measures, on a k=16 fat-tree (320 switches,
// 1,024 hosts) carrying a multi-tenant workload, the time from a link
// failing in fabricsim to the last switch whose tables change being
// written: gNMI reports the oper-status change, the controller recomputes
// the routes around the link and reprograms the switches that need it —
// first every switch drops the next hops that lead nowhere, then the new
// routes roll out stage by stage (loop-free) — and to the first write
// (first_write_p50_ms: the pruning starts landing).
// Each iteration fails a different inter-switch link, waits for the
// fabric to settle, and restores it. It reports p50 and p99 (the largest,
// with 20 iterations) in milliseconds, and seen_p99_ms: when the
// controller routes around the link (polled every 20 ms), which tells a
// slow failure's detection from its rollout. ACCELNET_FAILURE_DETAIL=1
// prints each failure's three times.
//
//	go test ./internal/fabrictest -run '^$' -bench FailureReaction -benchtime 20x -timeout 30m
func BenchmarkFailureReaction(b *testing.B) {
	topo, err := topology.FatTree(16, 100)
	if err != nil {
		b.Fatal(err)
	}
	h := fabrictest.NewWith(b, topo, func(o *stack.Config) {
		o.TelemetryInterval, o.CounterInterval, o.Elephants.ObserveInterval = 0, 0, 0 // the defaults
	})
	h.Eventually(b, 120*time.Second, "k=16 fabric programmed and configured", func() bool {
		if h.Converged() != nil {
			return false
		}
		for _, st := range h.Controller.Status() {
			if !st.ConfigInSync {
				return false
			}
		}
		return true
	})
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternMultiTenant, Gbps: 100, Tenants: 64, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	links := snap.FabricLinks()
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(links), func(i, j int) { links[i], links[j] = links[j], links[i] })
	switches := snap.Switches()
	lastWrite := func() time.Time {
		var t time.Time
		for _, sw := range switches {
			if w := h.Switch(string(sw.Name)).LastWrite(); w.After(t) {
				t = w
			}
		}
		return t
	}
	// settled waits until the controller routes around (or over) link id
	// and has finished rolling the change out, its last writes included;
	// it returns when the controller was seen routing so (within the
	// 20 ms of a poll).
	settled := func(id models.LinkID, down bool) time.Time {
		h.Eventually(b, 60*time.Second, fmt.Sprintf("controller to see %s down=%v", id, down), func() bool { return h.Controller.DownLinks()[id] == down })
		seen := time.Now()
		h.Eventually(b, 60*time.Second, "the rollout finished", h.Controller.Settled)
		return seen
	}
	firstWrite := func(since time.Time) time.Time {
		var t time.Time
		for _, sw := range switches {
			if w := h.Switch(string(sw.Name)).FirstWriteSince(since); !w.IsZero() && (t.IsZero() || w.Before(t)) {
				t = w
			}
		}
		return t
	}
	var took, first, seen []time.Duration
	detail := os.Getenv("ACCELNET_FAILURE_DETAIL") != ""
	b.ResetTimer()
	for i := range b.N {
		l := links[i%len(links)]
		t0 := time.Now()
		if err := h.Fabric.SetLinkUp(l.ID(), false); err != nil {
			b.Fatal(err)
		}
		setTook := time.Since(t0) // the emulator's own lock, before it reports
		seenAt := settled(l.ID(), true).Sub(t0)
		if w := lastWrite(); w.After(t0) {
			took = append(took, w.Sub(t0))
			first = append(first, firstWrite(t0).Sub(t0))
			seen = append(seen, seenAt)
			if detail { // where a slow one's time went: seeing the failure, or the rollout
				fmt.Printf("failure %d %s: failed in the emulator after %s, seen %s, first write %s, last write %s\n", i, l.ID(), setTook.Round(time.Millisecond), seenAt.Round(time.Millisecond),
					first[len(first)-1].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
			}
		}
		if err := h.Fabric.SetLinkUp(l.ID(), true); err != nil {
			b.Fatal(err)
		}
		settled(l.ID(), false)
	}
	b.StopTimer()
	if len(took) == 0 {
		b.Fatal("no failure caused a write")
	}
	slices.Sort(took)
	slices.Sort(first)
	slices.Sort(seen)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first_write_p50_ms")
	b.ReportMetric(float64(seen[(len(seen)*99)/100].Microseconds())/1000, "seen_p99_ms")
	b.ReportMetric(float64(len(took)), "failures")
}
