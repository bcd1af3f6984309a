package fabrictest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkAdmission measures intent admission end to end: 64 concurrent
// clients (one tenant and token each) POST intents over HTTP; each answer
// comes after the intent's etcd commit (embedded etcd, fsync on), and the
// emulated switches are programmed and read back meanwhile, all in this
// one process. It reports intents/s, the p50/p99 latency the clients
// saw and the process's CPU time per intent. ACCELNET_ADMISSION_CLIENTS
// sets another number of clients.
//
//	go test -run '^$' -bench 'Admission$' -benchtime 20000x ./internal/fabrictest/
func BenchmarkAdmission(b *testing.B) { benchAdmission(b, 1) }

// BenchmarkAdmissionBatch is BenchmarkAdmission with each request a
// batch of 50 intents (POST /api/v1/intents:batch, each item decided on
// its own); latency is a request's. ACCELNET_ADMISSION_BATCH sets
// another batch size.
//
//	go test -run '^$' -bench 'AdmissionBatch$' -benchtime 100000x ./internal/fabrictest/
func BenchmarkAdmissionBatch(b *testing.B) {
	size := 50
	if v, err := strconv.Atoi(os.Getenv("ACCELNET_ADMISSION_BATCH")); err == nil && v > 0 {
		size = v
	}
	benchAdmission(b, size)
}

// benchAdmission admits b.N intents from the clients, batch intents per
// request (1: POST /api/v1/intents).
func benchAdmission(b *testing.B, batch int) {
	topo, err := topology.LeafSpine(4, 8, 8, 400)
	if err != nil {
		b.Fatal(err)
	}
	h := fabrictest.NewWith(b, topo, func(o *stack.Config) {
		// The harness samples fast for tests; measure at the defaults.
		o.APIRateLimit, o.TelemetryInterval, o.CounterInterval, o.Elephants.ObserveInterval = -1, 0, 0, 0
	})
	h.Eventually(b, 30*time.Second, "fabric programmed", func() bool { return h.Converged() == nil })
	clients := 64
	if v, err := strconv.Atoi(os.Getenv("ACCELNET_ADMISSION_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	tokens := make([]string, clients)
	for i := range tokens {
		name := fmt.Sprintf("bench%d", i)
		h.Do(b, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: models.TenantName(name)}, nil)
		var tok struct {
			Token string `json:"token"`
		}
		h.Do(b, "POST", "/api/v1/tokens", h.OperatorToken, map[string]string{"tenant": name, "role": "tenant"}, &tok)
		tokens[i] = tok.Token
	}
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	cl := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	specOf := func(i int64) models.IntentSpec {
		src, dst := hosts[int(i)%len(hosts)], hosts[(int(i)/len(hosts)+1+int(i))%len(hosts)]
		if src.Name == dst.Name {
			dst = hosts[(int(i)+1)%len(hosts)]
		}
		port := uint16(1 + i/int64(len(hosts)))
		return models.IntentSpec{Name: "b", Src: src.Name, Dst: dst.Name, Gbps: 0.001,
			SrcPorts: models.PortRange{First: port, Last: port}}
	}

	var next atomic.Int64
	latencies := make([][]time.Duration, clients)
	var failed atomic.Int64
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				first := next.Add(int64(batch)) - int64(batch)
				if first >= int64(b.N) {
					return
				}
				n := min(int64(batch), int64(b.N)-first)
				path, want := "/api/v1/intents:batch", http.StatusOK
				var body []byte
				if batch == 1 {
					path, want = "/api/v1/intents", http.StatusCreated
					body, _ = json.Marshal(specOf(first))
				} else {
					req := api.IntentBatchRequest{Items: make([]models.IntentSpec, n)}
					for j := range n {
						req.Items[j] = specOf(first + j)
					}
					body, _ = json.Marshal(req)
				}
				req, _ := http.NewRequest("POST", h.API.URL+path, bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokens[c])
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err != nil {
					failed.Add(n)
					continue
				}
				var res struct {
					Failed int `json:"failed"`
				}
				if batch == 1 {
					var sink json.RawMessage
					_ = json.NewDecoder(resp.Body).Decode(&sink)
				} else {
					_ = json.NewDecoder(resp.Body).Decode(&res)
				}
				resp.Body.Close()
				latencies[c] = append(latencies[c], time.Since(t0))
				switch {
				case resp.StatusCode != want:
					failed.Add(n)
				case batch > 1:
					failed.Add(int64(res.Failed))
				}
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d admissions failed", n, b.N)
	}
	for _, name := range []string{"accelnet_intent_commit_seconds", "accelnet_intent_commit_ops"} {
		n, sum := histogram(b, h, name)
		b.Logf("%s: %d commits, mean %.4f", name, n, sum/float64(max(n, 1)))
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "intents/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99_ms")
	// The process's CPU per intent (clients, etcd and the emulated
	// switches included): steadier from run to run than the rate, which
	// moves with what else the machine runs.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/intent")
}
