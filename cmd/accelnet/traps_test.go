package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/embedded"
	"github.com/accelnet/accelnet/store/storetest"
)

// execute runs the accelnet command line with args until ctx ends.
func execute(ctx context.Context, args ...string) error {
	root := newRootCommand()
	root.SetArgs(args)
	root.SilenceErrors = true
	return root.ExecuteContext(ctx)
}

// waitFile waits (with a generous backstop) for path to exist, or for
// the command under way to fail.
func waitFile(t *testing.T, path string, failed <-chan error) {
	t.Helper()
	backstop := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case err := <-failed:
			t.Fatalf("the first demo ended: %v", err)
		case <-backstop:
			t.Fatalf("%s did not appear in 60 s", path)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStartTraps: what would trap a new operator fails at once with
// what to do. A second demo on a data directory in use (not a wait
// forever on etcd's lock, deaf to Ctrl-C); a listen address in use (found
// before etcd starts and a token is issued); serve with a generated
// fabric (refused, not accepted and then warned about every switch).
// And --fresh starts clean: a new operator token, nothing reloaded.
func TestStartTraps(t *testing.T) {
	dir := t.TempDir()
	demo := []string{"demo", "--data-dir", dir, "--topology", "leafspine:2x1x1", "--workload", "none", "--log-level", "error"}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- execute(ctx, append(demo, "--http-addr", "127.0.0.1:0")...) }()
	token := filepath.Join(dir, "operator.token")
	waitFile(t, token, first)

	// A backstop only, should it wait on etcd's lock.
	second, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	err := execute(second, append(demo, "--http-addr", "127.0.0.1:0")...)
	if err == nil || !strings.Contains(err.Error(), "is in use by process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second demo on the same data directory: %v", err)
	}
	cancel()
	if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the first demo: %v", err)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	other := t.TempDir()
	err = execute(context.Background(), "demo", "--data-dir", other, "--topology", "leafspine:2x1x1", "--workload", "none", "--http-addr", taken.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listen on "+taken.Addr().String()) {
		t.Fatalf("a listen address in use: %v", err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("a demo that could not listen left %d files in its data directory (etcd started, a token issued?)", len(entries))
	}

	err = execute(context.Background(), "serve", "--data-dir", t.TempDir(), "--topology", "leafspine:2x2x2", "--http-addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "fabricsim -topology leafspine:2x2x2 -out") {
		t.Fatalf("serve with a generated fabric: %v", err)
	}

	// --fresh: the earlier run's token is gone and a new one issued.
	old, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	again := make(chan error, 1)
	go func() { again <- execute(ctx, append(demo, "--http-addr", "127.0.0.1:0", "--fresh")...) }()
	backstop := time.After(60 * time.Second)
	for {
		if now, err := os.ReadFile(token); err == nil && len(now) > 0 && string(now) != string(old) {
			break
		}
		select {
		case err := <-again:
			t.Fatalf("the fresh demo ended: %v", err)
		case <-backstop:
			t.Fatal("no new operator token 60 s after a --fresh start")
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	<-again
}

// TestReloadedSaysWhatWasLeft: what an earlier run left in etcd is named
// at start, not left to change what the demo shows silently.
func TestReloadedSaysWhatWasLeft(t *testing.T) {
	s, _ := storetest.Etcd(t)
	if got := reloaded(t.Context(), s); got != "" {
		t.Fatalf("an empty etcd: %q", got)
	}
	for _, k := range []string{store.KeyTenants + "a", store.KeyTenants + "b", store.KeyIntents + "a/1"} {
		if err := s.PutJSON(t.Context(), k, map[string]string{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := reloaded(t.Context(), s), "2 tenants, 1 intent"; got != want {
		t.Fatalf("reloaded %q, want %q", got, want)
	}
}

// TestDemoRefusesAnotherFabricsState: a data directory holding intents
// and drains made for another fabric (they changed what the demo showed:
// a drain carried into a bigger fabric, intents over hosts that did not
// exist) is refused by the demo, saying what it holds and what to do;
// --keep keeps it; the same fabric starts as before.
func TestDemoRefusesAnotherFabricsState(t *testing.T) {
	dir := t.TempDir()
	run := func(ctx context.Context, topo string, extra ...string) error {
		return execute(ctx, append([]string{"demo", "--data-dir", dir, "--topology", topo, "--workload", "none", "--log-level", "error",
			"--http-addr", "127.0.0.1:0"}, extra...)...)
	}
	// A first demo, then state made for its fabric, written as the API would.
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- run(ctx, "leafspine:2x2x2") }()
	waitFile(t, filepath.Join(dir, "operator.token"), first)
	cancel()
	<-first
	e, err := embedded.Start(filepath.Join(dir, "etcd"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := store.Dial(e.Endpoints, e.ClientTLS)
	if err != nil {
		t.Fatal(err)
	}
	s := store.NewStore(cli, 5*time.Second)
	intent := models.Intent{ID: "1", Tenant: "ml", Spec: models.IntentSpec{Name: "x", Src: "h2-2", Dst: "h1-1", Gbps: 1, SrcPorts: models.PortRange{First: 1, Last: 1}}}
	for k, v := range map[string]any{store.KeyIntents + "ml/1": intent, store.KeyDrains + "d1": models.Drain{ID: "d1", Switch: "spine2"}} {
		if err := s.PutJSON(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()
	e.Close()

	err = run(context.Background(), "leafspine:2x1x1")
	if err == nil || !strings.Contains(err.Error(), "another fabric") || !strings.Contains(err.Error(), "1 intent (1 over hosts the new fabric does not have: they will fail)") ||
		!strings.Contains(err.Error(), "1 drain (") || !strings.Contains(err.Error(), "--fresh") || !strings.Contains(err.Error(), "--keep") {
		t.Fatalf("another fabric: %v", err)
	}
	// Kept, it starts; the next start on that same fabric is not refused.
	for _, extra := range [][]string{{"--keep"}, nil} {
		addr := fabrictest.FreeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- execute(ctx, append([]string{"demo", "--data-dir", dir, "--topology", "leafspine:2x1x1", "--workload", "none",
				"--log-level", "error", "--http-addr", addr}, extra...)...)
		}()
		backstop := time.After(60 * time.Second)
		for ready := false; !ready; {
			select {
			case err := <-done:
				t.Fatalf("demo %v ended: %v", extra, err)
			case <-backstop:
				t.Fatalf("demo %v not ready in 60 s", extra)
			case <-time.After(20 * time.Millisecond):
			}
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("demo %v: %v", extra, err)
		}
	}
}
