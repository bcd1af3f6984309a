package fabrictest_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
)

// countingHandler counts log records by level and message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int // "INFO switch programmed"
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Level.String()+" "+r.Message]++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[key]
}

// TestProgrammingLogsSummed: programming a fabric logs a summed line
// every couple of seconds at info, not a line per switch (a fabric of
// hundreds of switches logged hundreds of lines per change, and as many
// "pipeline pushed" and "interface config applied" at start); the
// per-switch lines are at debug.
func TestProgrammingLogsSummed(t *testing.T) {
	logs := &countingHandler{counts: map[string]int{}}
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(4, 16, 1), func(c *stack.Config) { c.Logger = slog.New(logs) })
	converged(t, h)
	h.Stop() // flushes the last summary
	switches := 20
	for _, perSwitch := range []string{"switch programmed", "pipeline pushed"} {
		if n := logs.count("INFO " + perSwitch); n != 0 {
			t.Errorf("%d per-switch %q lines at info on a fresh fabric", n, perSwitch)
		}
	}
	if n := logs.count("INFO interface config applied"); n < 1 || n >= switches/2 {
		t.Errorf("%d interface-config lines at info for %d switches, want summed", n, switches)
	}
	if n := logs.count("DEBUG switch programmed"); n < 1 {
		t.Errorf("no per-switch line at debug")
	}
	if n := logs.count("INFO switches programmed"); n < 1 || n >= switches/2 {
		t.Errorf("%d summed lines at info for %d switches, want at least one and far fewer than the switches", n, switches)
	}
}
