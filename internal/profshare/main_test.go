package main

import (
	"strings"
	"testing"
)

// TestTally: each sample of `go tool pprof -traces` goes to the first
// stage one of its frames matches, whatever the frame's depth, and a
// sample no stage matches to the rest.
func TestTally(t *testing.T) {
	const traces = `File: x.test
Type: cpu
-----------+-------------------------------------------------------
      10ms   runtime.memmove
             github.com/accelnet/accelnet/intents.(*batch).put
             github.com/accelnet/accelnet/intents.(*Manager).runBatch
-----------+-------------------------------------------------------
     1.5s   runtime.scanobject
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
     20ms   syscall.write
             net/http.(*conn).serve
             github.com/accelnet/accelnet/intents.(*Manager).Create
-----------+-------------------------------------------------------
     30ms   runtime.futex
             runtime.mstart
-----------+-------------------------------------------------------
`
	shares, total := tally(strings.NewReader(traces))
	want := map[string]float64{"decisions": 0.03, "garbage collection": 1.5, "the rest": 0.03}
	if total < 1.5599 || total > 1.5601 {
		t.Errorf("total %v, want 1.56", total)
	}
	for i, got := range shares {
		name := "the rest"
		if i < len(stages) {
			name = stages[i].name
		}
		if d := got - want[name]; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %v s, want %v", name, got, want[name])
		}
	}
}
