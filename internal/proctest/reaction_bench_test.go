package proctest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkFailureReactionProcesses is BenchmarkFailureReaction (in
// internal/fabrictest) with the controller and the emulated fabric in
// processes of their own, as a controller and its switches are: the same
// k=16 fat-tree (320 switches) under the same multi-tenant workload, the
// same 30 links, failure → first and last switch written, read from
// fabricsim's write timestamps (GET /sim/v1/writes). The two processes
// still share the machine's cores; what they no longer share is a heap
// (the emulator's 320 switches of table entries are not the controller's
// garbage to scan). A failure has been handled when nothing was written
// for a second after the first write.
//
//	go test ./internal/proctest -run '^$' -bench FailureReactionProcesses -benchtime 30x -timeout 30m
func BenchmarkFailureReactionProcesses(b *testing.B) {
	d := deployWith(b, "fattree:16@100", 1, setup{replicaArgs: []string{"--congestion-interval", "0", "--sample-one-in", "0"}})
	r := d.replicas[0]
	d.waitRole(r, "leader", 5*time.Minute)
	ctx := context.Background()
	sim := "http://" + d.simAPI
	if code, err := proctest.Call(ctx, nil, "POST", sim+"/sim/v1/workloads", "", map[string]any{"pattern": "multi-tenant", "gbps": 100, "tenants": 64, "seed": 1}, nil); err != nil || code != 201 {
		b.Fatalf("start the workload: HTTP %d, %v", code, err)
	}
	topo, err := topology.Load(d.topoFile)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	links := snap.FabricLinks()
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(links), func(i, j int) { links[i], links[j] = links[j], links[i] })
	type writes struct {
		Last       int64 `json:"last"`
		FirstSince int64 `json:"first_since"`
	}
	read := func(since time.Time) writes {
		var w writes
		if _, err := proctest.Call(ctx, nil, "GET", fmt.Sprintf("%s/sim/v1/writes?since=%d", sim, since.UnixNano()), "", nil, &w); err != nil {
			b.Fatal(err)
		}
		return w
	}
	// quiet waits until something was written after t0 and then nothing
	// for a second, and returns the writes.
	quiet := func(t0 time.Time) writes {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(60 * time.Second)
		for range tick.C {
			w := read(t0)
			if w.FirstSince != 0 && time.Since(time.Unix(0, w.Last)) > time.Second {
				return w
			}
			if time.Now().After(deadline) {
				b.Fatalf("no quiet second within a minute of %s", t0)
			}
		}
		return writes{}
	}
	setLink := func(id string, up bool) {
		if code, err := proctest.Call(ctx, nil, "POST", sim+"/sim/v1/links", "", map[string]any{"link": id, "up": up}, nil); err != nil || code >= 300 {
			b.Fatalf("set %s up=%v: HTTP %d, %v", id, up, code, err)
		}
	}
	quiet(time.Unix(0, 1)) // the workload's start settled
	// One failure and return, not measured: the first after startup also
	// pays for warming what the controller keeps.
	warm := links[len(links)-1]
	t := time.Now()
	setLink(string(warm.ID()), false)
	quiet(t)
	t = time.Now()
	setLink(string(warm.ID()), true)
	quiet(t)
	var took, first []time.Duration
	b.ResetTimer()
	for i := range b.N {
		l := links[i%len(links)]
		t0 := time.Now()
		setLink(string(l.ID()), false)
		w := quiet(t0)
		took = append(took, time.Unix(0, w.Last).Sub(t0))
		first = append(first, time.Unix(0, w.FirstSince).Sub(t0))
		t1 := time.Now()
		setLink(string(l.ID()), true)
		quiet(t1)
	}
	b.StopTimer()
	slices.Sort(took)
	slices.Sort(first)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first_write_p50_ms")
}
