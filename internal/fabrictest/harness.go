// Package fabrictest is the in-process test harness: embedded etcd in a
// temporary directory, fabricsim switches on 127.0.0.1:0 with real gRPC, the
// real controller, and the REST API on a real loopback HTTP server.
package fabrictest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// Harness is a running accelnet against an emulated fabric.
type Harness struct {
	*stack.Stack
	API *httptest.Server

	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	t      testing.TB
}

// LeafSpine builds a leaf-spine of 100 Gb/s links for tests.
func LeafSpine(spines, leaves, hostsPerLeaf int) models.Topology {
	t, err := topology.LeafSpine(spines, leaves, hostsPerLeaf, 100)
	if err != nil {
		panic(err) // a test's fixed arguments are wrong
	}
	return t
}

// New starts everything for topo, emulating its switches; it all stops in
// t.Cleanup.
func New(t testing.TB, topo models.Topology) *Harness {
	t.Helper()
	return start(t, topo, true, nil)
}

// NewWith is New with options adjusted by tune (preemption, rate limits...).
func NewWith(t testing.TB, topo models.Topology, tune func(*stack.Config)) *Harness {
	t.Helper()
	return start(t, topo, true, tune)
}

// NewServe starts accelnet for switches that already run at topo's
// addresses, as `accelnet serve` does.
func NewServe(t testing.TB, topo models.Topology) *Harness {
	t.Helper()
	return start(t, topo, false, nil)
}

// NewServeWith is NewServe with options adjusted by tune (an external
// etcd cluster, …).
func NewServeWith(t testing.TB, topo models.Topology, tune func(*stack.Config)) *Harness {
	t.Helper()
	return start(t, topo, false, tune)
}

// Join starts another replica against h's etcd (as `accelnet serve
// --etcd-endpoints` does): it follows the stored topology and competes
// for leadership. It stops in t.Cleanup, or with Stop or Crash.
func Join(t testing.TB, h *Harness) *Harness {
	t.Helper()
	return JoinWith(t, h, nil)
}

// JoinWith is Join with the new replica's options adjusted by tune.
func JoinWith(t testing.TB, h *Harness, tune func(*stack.Config)) *Harness {
	t.Helper()
	r := start(t, models.Topology{}, false, func(o *stack.Config) {
		o.Topology = nil
		o.Etcd.Dir = ""
		o.Etcd.Endpoints = h.EtcdEndpoints
		o.Etcd.TLS = h.EtcdTLS
		if tune != nil {
			tune(o)
		}
	})
	r.OperatorToken = h.OperatorToken // issued once, by the first
	return r
}

// Stop shuts the replica down as SIGTERM does: it resigns, so another
// replica leads at once.
func (h *Harness) Stop() {
	h.once.Do(func() {
		h.closeAPI()
		h.cancel()
		if err := <-h.done; err != nil {
			h.t.Errorf("stack run: %v", err)
		}
	})
	h.Stack.Close() // also after a Crash: the embedded etcd outlives it
}

// Crash ends the replica as kill -9 would, as far as the others can
// tell: its API stops listening and cuts its open requests, its etcd
// connection goes, so it revokes nothing (a follower that watches it
// ends its term; otherwise its lease expires); its switch connections
// drop; nothing resigns.
func (h *Harness) Crash() {
	h.once.Do(func() {
		h.closeAPI()
		h.Etcd.Close()
		h.Driver.Close()
		h.cancel()
		<-h.done // errors are expected: etcd went away under it
	})
}

func start(t testing.TB, topo models.Topology, emulate bool, tune func(*stack.Config)) *Harness {
	t.Helper()
	logger := Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	opts := stack.Config{
		Topology:          &topo,
		Emulate:           emulate,
		Etcd:              stack.Etcd{Dir: t.TempDir()},
		CounterInterval:   100 * time.Millisecond,
		TelemetryInterval: 100 * time.Millisecond,
		Elephants:         stack.Elephants{ObserveInterval: 250 * time.Millisecond},
		Intents:           intents.Policy{AdaptInterval: 500 * time.Millisecond},
		// Discovery and liveness as the command line runs them.
		DiscoveryInterval: stack.DefaultDiscoveryInterval,
		LivenessInterval:  controller.DefaultLivenessInterval,
		// A longer lease than the default 2 s: the race detector and a
		// busy CI machine starve a test process for seconds at a time,
		// and a replica that loses its lease starts a new term (every
		// switch read back, the detected elephants found again) in the
		// middle of whatever the test measures. Failover tests wait on
		// the lease expiring: 5 s is still short for them.
		ElectionTTL: 5 * time.Second,
		Logger:      logger,
	}
	if tune != nil {
		tune(&opts)
	}
	api := httptest.NewUnstartedServer(nil)
	opts.AdvertiseURL = "http://" + api.Listener.Addr().String()
	s, err := stack.New(ctx, opts)
	if err != nil {
		cancel()
		api.Close()
		t.Fatalf("start stack: %v", err)
	}
	api.Config.Handler = s.Handler
	api.Start()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	h := &Harness{Stack: s, API: api, cancel: cancel, done: done, t: t}
	t.Cleanup(func() {
		// Whatever the test did, the bandwidth ledger never held more
		// than capacity less headroom on any link direction or NIC.
		if n := s.Intents.Stats().Overcommitted; n > 0 {
			t.Errorf("the bandwidth ledger was over-committed after %d batches of decisions (see the log: ACCELNET_TEST_LOG=1)", n)
		}
		h.Stop()
	})
	return h
}

// closeAPI ends the replica's API as a process's exit does: nothing
// listens, and open requests are cut (Close alone would wait for them,
// and a follower holds /leaderz open for as long as the term lasts).
func (h *Harness) closeAPI() {
	h.API.Listener.Close()
	h.API.CloseClientConnections()
	h.API.Close()
}

// StartFabric runs fabricsim for topo on loopback, on its own (no etcd, no
// controller), until the test ends.
func StartFabric(t testing.TB, topo models.Topology) *fabricsim.Fabric {
	t.Helper()
	return StartFabricWith(t, topo, nil)
}

// StartFabricWith is StartFabric with options adjusted by tune (TLS, …).
func StartFabricWith(t testing.TB, topo models.Topology, tune func(*fabricsim.Options)) *fabricsim.Fabric {
	t.Helper()
	f, _ := RunFabric(t, topo, tune)
	return f
}

// RunFabric is StartFabricWith, and stop ends the fabric before t's
// cleanup does: a benchmark that starts a fabric per seed stops each
// before the next, or they all run until it ends.
func RunFabric(t testing.TB, topo models.Topology, tune func(*fabricsim.Options)) (f *fabricsim.Fabric, stop func()) {
	t.Helper()
	opts := fabricsim.Options{Topology: topo, CounterInterval: 50 * time.Millisecond}
	if tune != nil {
		tune(&opts)
	}
	f, err := fabricsim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("fabric: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return f, stop
}

// Switch returns an emulated switch by name.
func (h *Harness) Switch(name string) *fabricsim.Switch {
	return h.Fabric.Switch(models.SwitchID(name))
}

// Backstop stretches a wait's wall-clock limit for a slow or busy
// machine: four times under the race detector (which slows everything
// several times over), and by ACCELNET_TEST_PATIENCE (a factor) if set.
// Waits are for progress; the limit only stops a test that is stuck.
func Backstop(d time.Duration) time.Duration {
	if raceEnabled {
		d *= 4
	}
	if f, err := strconv.ParseFloat(os.Getenv("ACCELNET_TEST_PATIENCE"), 64); err == nil && f > 1 {
		d = time.Duration(float64(d) * f)
	}
	return d
}

// Eventually polls cond every 20ms until it holds or timeout (stretched
// by Backstop) passes.
func (h *Harness) Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = Backstop(timeout)
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// GetJSON fetches path from the API over HTTP as the operator and decodes
// the body into v; it returns the status code.
func (h *Harness) GetJSON(t testing.TB, path string, v any) int {
	t.Helper()
	return h.Do(t, http.MethodGet, path, h.OperatorToken, nil, v).StatusCode
}

// NewRequest builds an API request with token (if not empty) as its
// bearer and body (if not nil) as JSON, or as is when it is a []byte or a
// string; headers are extra request headers, name then value.
func NewRequest(ctx context.Context, method, url, token string, body any, headers ...string) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode body: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req, nil
}

// Do sends a request to the API over HTTP (see NewRequest); the response
// body is decoded into v (if not nil).
func (h *Harness) Do(t testing.TB, method, path, token string, body, v any, headers ...string) *http.Response {
	t.Helper()
	req, err := NewRequest(context.Background(), method, h.API.URL+path, token, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: HTTP %d: %v\n%s", method, path, resp.StatusCode, err, data)
		}
	}
	return resp
}

// Converged reports whether every switch's last reconcile left it in sync.
func (h *Harness) Converged() error { return h.Controller.Ready() }

// Main runs a test binary's tests with the harness's process setup: library
// logs go to a temporary directory that is removed afterwards, and leaked
// goroutines fail the run (opts add goleak exceptions).
func Main(m *testing.M, opts ...goleak.Option) {
	dir, err := os.MkdirTemp("", "accelnet-test-logs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := fabricsim.SetLibraryLogDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts = append(opts,
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		// etcd's embedded server leaves these behind until process exit.
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/pkg/v3/schedule.(*fifo).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
	code := m.Run()
	if code == 0 {
		// etcd members of a cluster leave peer connections that end only
		// when their read timeout (5s) passes: wait that long for them.
		err := goleak.Find(opts...)
		for deadline := time.Now().Add(15 * time.Second); err != nil && time.Now().Before(deadline); {
			<-time.After(500 * time.Millisecond)
			err = goleak.Find(opts...)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
