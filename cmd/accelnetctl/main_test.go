package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/spf13/cobra"
)

func TestMain(m *testing.M) { fabrictest.Main(m) }

// ctl runs accelnetctl with args and returns what it printed.
func ctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func mustCtl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := ctl(t, args...)
	if err != nil {
		t.Fatalf("accelnetctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestTenantSession is the README's session: an operator makes a tenant
// and its token; the tenant asks what fits, reserves, lists, inspects
// and deletes, against a running controller over HTTP.
func TestTenantSession(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	h.Eventually(t, 20*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
	t.Setenv("ACCELNET_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("ACCELNET_SERVER", "")
	t.Setenv("ACCELNET_TOKEN", "")

	mustCtl(t, "config", "set-context", "ops", "--server", h.API.URL, "--token", h.OperatorToken, "--use")
	if out := mustCtl(t, "whoami"); !strings.Contains(out, "operator") {
		t.Errorf("whoami: %s", out)
	}
	mustCtl(t, "tenants", "create", "vision", "--max-gbps", "400", "--max-intents", "10")
	var rack []api.TenantView
	if err := json.Unmarshal([]byte(mustCtl(t, "tenants", "create", "rack2", "--holds", "h2-2", "--hosts", "h1-*,h2-1", "-o", "json")), &rack); err != nil || len(rack) != 1 ||
		!slices.Equal(rack[0].Holds, []string{"h2-2"}) || !slices.Equal(rack[0].Hosts, []string{"h1-*", "h2-1"}) {
		t.Fatalf("a tenant with hosts: %+v %v", rack, err)
	}
	var tok api.NewTokenView
	if err := json.Unmarshal([]byte(mustCtl(t, "tokens", "create", "--tenant", "vision", "-o", "json")), &tok); err != nil || tok.Secret == "" {
		t.Fatalf("token: %+v %v", tok, err)
	}
	mustCtl(t, "config", "set-context", "vision", "--server", h.API.URL, "--token", tok.Secret, "--use")

	if out := mustCtl(t, "capacity", "--src", "h1-1", "--dst", "h2-1"); !strings.Contains(out, "95.0 Gb/s reservable") {
		t.Errorf("capacity: %s", out)
	}
	if out := mustCtl(t, "intents", "create", "--name", "resnet", "--src", "h1-1", "--dst", "h2-1", "--gbps", "80", "--ports", "49152-49155", "--dry-run"); !strings.Contains(out, "fits: true") || !strings.Contains(out, "flow 3:") {
		t.Errorf("dry run: %s", out)
	}
	var in models.Intent
	if err := json.Unmarshal([]byte(mustCtl(t, "intents", "create", "--name", "resnet", "--src", "h1-1", "--dst", "h2-1", "--gbps", "80", "--ports", "49152-49155", "-o", "json")), &in); err != nil || in.Status.State != models.StateAdmitted {
		t.Fatalf("create: %+v %v", in, err)
	}
	out, err := ctl(t, "intents", "create", "--name", "greedy", "--src", "h1-2", "--dst", "h2-1", "--gbps", "80", "--ports", "50000")
	if err == nil || !strings.Contains(out, "409") || !strings.Contains(out, "bottleneck") {
		t.Errorf("over capacity: err %v\n%s", err, out)
	}
	if out := mustCtl(t, "intents", "list"); !strings.Contains(out, in.ID) || !strings.Contains(out, "resnet") || !strings.Contains(out, "Rejected") {
		t.Errorf("list: %s", out)
	}
	if out := mustCtl(t, "intents", "get", in.ID); !strings.Contains(out, "h1-1:49152 → h2-1") {
		t.Errorf("get: %s", out)
	}
	if out := mustCtl(t, "intents", "delete", in.ID); !strings.Contains(out, "Deleted") {
		t.Errorf("delete: %s", out)
	}
	flows := filepath.Join(t.TempDir(), "flows.json")
	os.WriteFile(flows, []byte(`[{"name":"r0","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"first":100,"last":100}},
		{"name":"r1","src":"h2-1","dst":"h1-1","gbps":10,"src_ports":{"first":100,"last":100}}]`), 0o600)
	if out := mustCtl(t, "intents", "create-many", "-f", flows, "--atomic", "--idempotency-key", "job-1"); strings.Count(out, "Admitted") != 2 || !strings.Contains(out, "2 of 2 created") {
		t.Errorf("create-many: %s", out)
	}
	os.WriteFile(flows, []byte(`{"items":[{"name":"small","src":"h1-2","dst":"h2-1","gbps":1,"src_ports":{"first":7,"last":7}},
		{"name":"big","src":"h1-2","dst":"h2-1","gbps":300,"src_ports":{"first":8,"last":8}}]}`), 0o600)
	if out, err := ctl(t, "intents", "create-many", "-f", flows); err == nil || !strings.Contains(out, "409") || !strings.Contains(out, "1 of 2 created") {
		t.Errorf("create-many, one over capacity: err %v\n%s", err, out)
	}
	if _, err := ctl(t, "tenants", "list"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a tenant listing tenants: %v", err)
	}
	if out := mustCtl(t, "--context", "ops", "tenants", "list"); !strings.Contains(out, "vision") {
		t.Errorf("operator tenants list: %s", out)
	}
	if out := mustCtl(t, "topology"); !strings.Contains(out, "spine1") {
		t.Errorf("topology: %s", out)
	}
	if out := mustCtl(t, "--context", "ops", "drains", "create", "--switch", "spine2", "--dry-run"); !strings.Contains(out, "links drained: 2") {
		t.Errorf("drain dry run: %s", out)
	}
	out = mustCtl(t, "--context", "ops", "drains", "create", "--switch", "spine2", "--reason", "optics", "-o", "json")
	var drains []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &drains); err != nil || len(drains) != 1 {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	if out := mustCtl(t, "--context", "ops", "drains", "list"); !strings.Contains(out, drains[0].ID) || !strings.Contains(out, "optics") {
		t.Errorf("drains list: %s", out)
	}
	if out := mustCtl(t, "--context", "ops", "drains", "get", drains[0].ID); !strings.Contains(out, drains[0].ID) || !strings.Contains(out, "spine2") {
		t.Errorf("drains get: %s", out)
	}
	mustCtl(t, "--context", "ops", "drains", "delete", drains[0].ID)
	if out := mustCtl(t, "--context", "ops", "switches", "entries", "leaf1"); !strings.Contains(out, "routes") || !strings.Contains(out, "flow_pins") {
		t.Errorf("switches entries: %s", out)
	}
	if out := mustCtl(t, "--context", "ops", "elephants"); !strings.Contains(out, "SRC PORT") {
		t.Errorf("elephants: %s", out)
	}
	if out := mustCtl(t, "--context", "ops", "tenants", "get", "vision"); !strings.Contains(out, "vision") {
		t.Errorf("tenants get: %s", out)
	}
	if _, err := ctl(t, "drains", "list"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a tenant listing drains: %v", err)
	}
}

// TestMissingFlagsSaidFirst: a command missing what it needs says which
// flags, before any request (the server here is one nothing answers at).
func TestMissingFlagsSaidFirst(t *testing.T) {
	t.Setenv("ACCELNET_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("ACCELNET_SERVER", "http://127.0.0.1:1")
	t.Setenv("ACCELNET_TOKEN", "anet_x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"capacity", "--src", "h1-1"}, `"dst" not set`},
		{[]string{"intents", "create", "--name", "a", "--src", "h1-1"}, "missing --ports (or --sampled), --dst, --gbps"},
		{[]string{"intents", "create", "--name", "r", "--collective", "ring-allreduce", "--ports", "5"}, "missing --endpoints, --gbps-per-gpu"},
		{[]string{"drains", "create"}, "name a switch (--switch) or a link (--link)"},
		{[]string{"drains", "create", "--switch", "spine1", "--link", "leaf1:3<->spine1:1"}, "one of them"},
		{[]string{"tokens", "create"}, "needs --tenant"},
		{[]string{"tokens", "create", "--role", "admin"}, `--role "admin"`},
		{[]string{"switches", "entries", "bad name!"}, "switch name"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := ctl(t, tc.args...)
			if err == nil || !strings.Contains(err.Error()+out, tc.want) {
				t.Fatalf("err %v, output %q; want %q", err, out, tc.want)
			}
			if strings.Contains(err.Error()+out, "127.0.0.1:1") {
				t.Fatalf("it sent a request first: %v", err)
			}
		})
	}
}

// TestEveryCommandHasAnExample: each command that does something shows
// how to use it in its help.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Name() != "help" && c.Name() != "completion" && c.Parent() != nil && c.Parent().Name() != "completion" && c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// TestSaysWhatHappened: against no server the CLI says which server,
// where it came from and how to start one; deleting a drain says what may
// carry traffic again; watching intents shows each as it stands before
// any change.
func TestSaysWhatHappened(t *testing.T) {
	t.Setenv("ACCELNET_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	t.Setenv("ACCELNET_SERVER", "")
	t.Setenv("ACCELNET_TOKEN", "")
	out, err := ctl(t, "--server", "http://127.0.0.1:1", "intents", "list")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the accelnet API at http://127.0.0.1:1 (--server)") || !strings.Contains(err.Error(), "accelnet demo") {
		t.Errorf("no server: %v\n%s", err, out)
	}

	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	h.Eventually(t, 20*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
	mustCtl(t, "config", "set-context", "ops", "--server", h.API.URL, "--token", h.OperatorToken, "--use")
	var ds []api.DrainView
	if err := json.Unmarshal([]byte(mustCtl(t, "drains", "create", "--switch", "spine1", "-o", "json")), &ds); err != nil || len(ds) != 1 {
		t.Fatalf("drain: %+v %v", ds, err)
	}
	d := ds[0]
	if out := mustCtl(t, "drains", "delete", d.ID); !strings.Contains(out, "drain "+d.ID+" deleted: switch spine1 may carry traffic again") {
		t.Errorf("drains delete printed %q", out)
	}

	mustCtl(t, "tenants", "create", "ml")
	mustCtl(t, "intents", "create", "--tenant", "ml", "--name", "standing", "--src", "h1-1", "--dst", "h2-1", "--gbps", "10", "--ports", "49152")
	ctx, cancel := context.WithTimeout(context.Background(), fabrictest.Backstop(30*time.Second))
	defer cancel()
	var got lockedWriter
	got.onWrite = func(s string) {
		if strings.Contains(s, "as they stand") {
			cancel()
		}
	}
	root := newRoot()
	root.SetOut(&got)
	root.SetErr(&got)
	root.SetArgs([]string{"intents", "watch"})
	_ = root.ExecuteContext(ctx)
	text := got.String()
	if !strings.Contains(text, "ml/") || !strings.Contains(text, "1 intents as they stand") {
		t.Errorf("watch before any change printed %q", text)
	}
}

// lockedWriter collects output and calls onWrite with all of it so far.
type lockedWriter struct {
	mu      sync.Mutex
	b       strings.Builder
	onWrite func(string)
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.b.Write(p)
	s := w.b.String()
	w.mu.Unlock()
	if w.onWrite != nil {
		w.onWrite(s)
	}
	return len(p), nil
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
