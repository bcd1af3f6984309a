package fabrictest

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// tailLines is how many of a replica's last log lines a failed test shows.
const tailLines = 300

// tailLog keeps the last lines written to it (a replica's log in a test):
// a live-loop test that fails on a busy CI machine and passes on a quiet
// one is understood from what the controller said, not rerun until it
// fails again with the log switched on.
type tailLog struct {
	mu    sync.Mutex
	lines []string // a ring of tailLines; next is the oldest once full
	next  int
	total int
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		if len(l.lines) < tailLines {
			l.lines = append(l.lines, line)
		} else {
			l.lines[l.next] = line
			l.next = (l.next + 1) % tailLines
		}
		l.total++
	}
	return len(p), nil
}

// String is the kept lines, oldest first, after how many were dropped.
func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if dropped := l.total - len(l.lines); dropped > 0 {
		fmt.Fprintf(&b, "… %d earlier lines\n", dropped)
	}
	for i := range l.lines {
		b.WriteString(l.lines[(l.next+i)%len(l.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}

// Logger is the logger in a test of a replica (or of another part, such
// as accelnet kube). ACCELNET_TEST_LOG=1 sends it to standard error as it
// comes; otherwise its last lines are kept
// and shown if the test fails. ACCELNET_TEST_LOG_LEVEL=debug logs the
// per-switch and per-read lines too (either way).
func Logger(t testing.TB) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if strings.EqualFold(os.Getenv("ACCELNET_TEST_LOG_LEVEL"), "debug") {
		opts.Level = slog.LevelDebug
	}
	if os.Getenv("ACCELNET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	tail := &tailLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replica's last log lines:\n%s", tail)
		}
	})
	return slog.New(slog.NewTextHandler(tail, opts))
}
