package proctest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
)

// demoUnderFileLimit starts `accelnet demo` on a small fabric with its
// open-file limit (soft and hard) set to files, and returns it with its
// API address and operator token once every switch is programmed.
func demoUnderFileLimit(t *testing.T, files int, args ...string) (*proctest.Proc, string, string) {
	t.Helper()
	dir := t.TempDir()
	addr := fabrictest.FreeAddr(t)
	all := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, files), proctest.Bin(t, "accelnet"),
		"demo", "--topology", "leafspine:2x1x2", "--workload", "none", "--sample-one-in", "0",
		"--data-dir", dir, "--http-addr", addr}, args...)
	p := proctest.Start(t, "accelnet", "/bin/sh", all...)
	proctest.Wait(t, fabrictest.Backstop(60*time.Second), "the demo ready", func() error {
		if p.Exited() {
			t.Fatalf("the demo exited:\n%s", p.Log())
		}
		code, err := proctest.Call(context.Background(), nil, "GET", "http://"+addr+"/readyz", "", nil, nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("HTTP %d", code)
		}
		return err
	})
	return p, addr, operatorToken(t, filepath.Join(dir, "operator.token"))
}

// TestConnectionFloodUnderAFileLimit: with 1,024 open files, 3,000 idle
// anonymous connections from 20 addresses go past the API's limits while
// the operator creates tenants and tokens and reads them back, each over
// a new connection: every one of the operator's requests is served, the
// process is alive after the flood, it says at start what its limits
// are, and it counts what it closed. (Without limits the flood took the
// file descriptors; the process could accept nothing, and the embedded
// etcd, unable to open a file, ended it without a word.)
func TestConnectionFloodUnderAFileLimit(t *testing.T) {
	p, addr, op := demoUnderFileLimit(t, 1024)
	if log := p.Log(); !strings.Contains(log, "open files") || !strings.Contains(log, "limit=1024") {
		t.Fatalf("no log line says the open-file limit:\n%s", log)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var flood sync.WaitGroup
	var mu sync.Mutex
	opened, failed := 0, 0
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	const sources, perSource = 20, 150
	for s := range sources {
		flood.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(s+1))}, Timeout: 2 * time.Second}
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for range perSource {
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
				c, err := d.DialContext(ctx, "tcp", addr)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					opened++
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}

	// The operator, each request on a connection of its own, while the
	// flood goes on: a failed connection is tried again once, as a client
	// would (a connection the flood's next one closed before its request
	// was read).
	operator := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func(method, path string, body, out any) int {
		t.Helper()
		for try := 0; ; try++ {
			code, err := proctest.Call(context.Background(), operator, method, "http://"+addr+path, op, body, out)
			if err == nil {
				return code
			}
			if try == 1 {
				t.Fatalf("%s %s during the flood: %v", method, path, err)
			}
		}
	}
	for i := 0; i < 30; i++ {
		name := models.TenantName(fmt.Sprintf("team-%d", i))
		if code := call("POST", "/api/v1/tenants", models.Tenant{Name: name}, nil); code != http.StatusCreated {
			t.Fatalf("create tenant %s during the flood: HTTP %d", name, code)
		}
		var tok api.NewTokenView
		if code := call("POST", "/api/v1/tokens", api.TokenRequest{Tenant: name, Role: models.RoleTenant}, &tok); code != http.StatusCreated || tok.Secret == "" {
			t.Fatalf("create a token during the flood: HTTP %d", code)
		}
		var list struct {
			Items []api.TenantView `json:"items"`
		}
		if code := call("GET", "/api/v1/tenants", nil, &list); code != http.StatusOK || len(list.Items) != i+1 {
			t.Fatalf("list tenants during the flood: HTTP %d, %d tenants, want %d", code, len(list.Items), i+1)
		}
	}
	flood.Wait()
	if p.Exited() {
		t.Fatalf("the process ended during the flood:\n%s", p.Log())
	}
	metrics, err := scrape(operator, "http://"+addr, "accelnet_api_connections_evicted_total", "accelnet_api_connections")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d connections opened, %d failed; the API closed %v to make room and holds %v",
		opened, failed, metrics["accelnet_api_connections_evicted_total"], metrics["accelnet_api_connections"])
	if metrics["accelnet_api_connections_evicted_total"] < 1 {
		t.Error("the flood went past no limit: nothing was closed to make room")
	}
	if code := call("GET", "/healthz", nil, nil); code != http.StatusOK {
		t.Errorf("healthz after the flood: HTTP %d", code)
	}
}

// operatorToken reads the operator token a first start wrote to file.
func operatorToken(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
