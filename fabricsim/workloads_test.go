package fabricsim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

func TestWorkloadPatterns(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 4, 4, 100)
	f := run(t, topo)
	programECMP(t, f)
	tests := []struct {
		spec  WorkloadSpec
		flows int
		check func(t *testing.T, wf WorkloadFigures)
	}{
		{WorkloadSpec{Pattern: PatternPermutation, Gbps: 100, Seed: 3}, 16, nil},
		{WorkloadSpec{Pattern: PatternPermutation, Gbps: 100, Seed: 3, QPsPerConnection: 4}, 64, nil},
		{WorkloadSpec{Pattern: PatternStride, Gbps: 100, Stride: 4}, 16, nil},
		{WorkloadSpec{Pattern: PatternAllToAll, Gbps: 100}, 16 * 15, func(t *testing.T, wf WorkloadFigures) {
			if len(wf.Collectives) != 1 || wf.Collectives[0].Ranks != 16 {
				t.Errorf("collectives %+v", wf.Collectives)
			}
		}},
		{WorkloadSpec{Pattern: PatternRing, Gbps: 100}, 16, func(t *testing.T, wf WorkloadFigures) {
			// One ring per rail: the 4 hosts at the same port of the 4 leaves.
			if len(wf.Collectives) != 4 {
				t.Fatalf("%d rings, want 4", len(wf.Collectives))
			}
			for _, c := range wf.Collectives {
				// busbw of a ring all-reduce is its slowest link's rate.
				if c.Stalled || c.BusBWGBps <= 0 || c.BusBWGBps > 100.0/8+1e-9 {
					t.Errorf("ring figures %+v", c)
				}
				if want := 1.0 / c.BusBWGBps * 2 * 3 / 4; math.Abs(c.CompletionSeconds-want*float64(1<<30)/1e9) > 1e-6 {
					t.Errorf("completion %v, want %v", c.CompletionSeconds, want*float64(1<<30)/1e9)
				}
			}
		}},
		{WorkloadSpec{Pattern: PatternIncast, Gbps: 100, IncastSenders: 8}, 8, func(t *testing.T, wf WorkloadFigures) {
			// Eight senders into one 100G NIC: 1/8 of the demand gets through.
			if math.Abs(wf.ThroughputRatio-0.125) > 1e-9 {
				t.Errorf("incast throughput ratio %v, want 0.125", wf.ThroughputRatio)
			}
		}},
		{WorkloadSpec{Pattern: PatternMultiTenant, Gbps: 100, Tenants: 3, Seed: 9}, -1, func(t *testing.T, wf WorkloadFigures) {
			ranks := 0
			for _, c := range wf.Collectives {
				ranks += c.Ranks
			}
			if len(wf.Collectives) != 3 || ranks != 16 {
				t.Errorf("tenants %+v", wf.Collectives)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Pattern, func(t *testing.T) {
			id, err := f.StartWorkload(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer f.StopWorkload(id)
			wf, err := f.WorkloadFigures(id)
			if err != nil {
				t.Fatal(err)
			}
			if tt.flows >= 0 && wf.Flows != tt.flows {
				t.Errorf("%d flows, want %d", wf.Flows, tt.flows)
			}
			if wf.Delivered != wf.Flows {
				t.Errorf("%d of %d flows delivered", wf.Delivered, wf.Flows)
			}
			if wf.ThroughputRatio <= 0 || wf.ThroughputRatio > 1+1e-9 || wf.MinFlowGbps > wf.MedianFlowGbps {
				t.Errorf("figures %+v", wf)
			}
			if tt.check != nil {
				tt.check(t, wf)
			}
		})
	}
	if len(f.Flows()) != 0 {
		t.Error("stopped workloads left flows behind")
	}
	for _, bad := range []WorkloadSpec{{Pattern: "ring", Gbps: 1}, {Pattern: PatternIncast, Gbps: 0}, {Pattern: PatternIncast, Gbps: 1, IncastSenders: 99}} {
		if _, err := f.StartWorkload(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestSameSeedPolarizes(t *testing.T) {
	routes := []lpmRoute{{prefix: netip.MustParsePrefix("10.0.0.0/8"),
		slots: []uint32{1, 2, 3, 4}}}
	a, b, c := fib{seed: 7, routes: routes}, fib{seed: 7, routes: routes}, fib{seed: 8, routes: routes}
	same, agree := 0, 0
	for sport := range 4000 {
		spec := FlowSpec{Src: netip.MustParseAddr("10.1.0.1"), Dst: netip.MustParseAddr("10.9.0.1"), SrcPort: uint16(sport)}
		pa, _ := a.lookup(spec)
		pb, _ := b.lookup(spec)
		pc, _ := c.lookup(spec)
		if pa == pb {
			same++
		}
		if pa == pc {
			agree++
		}
	}
	if same != 4000 {
		t.Errorf("same seed agreed on %d of 4000 flows", same)
	}
	// Independent choices agree about a quarter of the time.
	if agree < 800 || agree > 1200 {
		t.Errorf("different seeds agreed on %d of 4000 flows, want about 1000", agree)
	}
}

func TestControlAPI(t *testing.T) {
	topo, _ := topology.LeafSpine(2, 2, 2, 100)
	f := run(t, topo)
	programECMP(t, f)
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	call := func(method, path string, body any, out any) int {
		t.Helper()
		var buf bytes.Buffer
		if body != nil {
			if s, ok := body.(string); ok {
				buf.WriteString(s)
			} else {
				json.NewEncoder(&buf).Encode(body)
			}
		}
		req, _ := http.NewRequest(method, srv.URL+path, &buf)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var created struct{ ID string }
	if code := call("POST", "/sim/v1/workloads", WorkloadSpec{Pattern: PatternAllToAll, Gbps: 100}, &created); code != http.StatusCreated || created.ID == "" {
		t.Fatalf("start workload: %d %+v", code, created)
	}
	var wf WorkloadFigures
	if code := call("GET", "/sim/v1/workloads/"+created.ID, nil, &wf); code != http.StatusOK || wf.Flows != 12 {
		t.Fatalf("figures: %d %+v", code, wf)
	}
	var tr FlowStatus
	if code := call("GET", "/sim/v1/trace?src=h1-1&dst=10.0.2.2&sport=50000", nil, &tr); code != http.StatusOK || !tr.Delivered || len(tr.Hops) != 3 {
		t.Fatalf("trace: %d %+v", code, tr)
	}
	link := string(models.Link{A: models.Endpoint{Switch: "spine1", Port: 1}, B: models.Endpoint{Switch: "leaf1", Port: 3}}.ID())
	var faults ActiveFaults
	if code := call("POST", "/sim/v1/faults", FaultSpec{Kind: FaultLinkDown, Target: "spine1:1<->leaf1:3"}, &faults); code != http.StatusOK || len(faults.LinksDown) != 1 || string(faults.LinksDown[0]) != link {
		t.Fatalf("link-down: %d %+v", code, faults)
	}
	// Traffic from leaf1 that hashed onto spine1 now drops at leaf1 until
	// the controller reroutes; the trace says why.
	dropped := 0
	for _, fl := range f.Flows() {
		if fl.Drop == DropLinkDown {
			dropped++
		}
	}
	if dropped == 0 {
		t.Error("no flow affected by the link failure")
	}
	if code := call("DELETE", "/sim/v1/workloads/"+created.ID, nil, nil); code != http.StatusNoContent {
		t.Errorf("stop: %d", code)
	}
	for _, bad := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/sim/v1/workloads", `{"pattern": "permutation", "gbps": `, http.StatusBadRequest},
		{"POST", "/sim/v1/workloads", `{"pattern": "permutation", "gbps": 1, "extra": 1}`, http.StatusBadRequest},
		{"POST", "/sim/v1/workloads", WorkloadSpec{Pattern: "nope", Gbps: 1}, http.StatusBadRequest},
		{"GET", "/sim/v1/workloads/w999", nil, http.StatusNotFound},
		{"POST", "/sim/v1/faults", FaultSpec{Kind: FaultSwitchDown, Target: "spine9"}, http.StatusNotFound},
		{"POST", "/sim/v1/faults", FaultSpec{Kind: FaultLinkDown, Target: "spine1:1"}, http.StatusBadRequest},
		{"GET", "/sim/v1/trace?src=nobody&dst=h1-1", nil, http.StatusNotFound},
		{"POST", "/sim/v1/flows", map[string]any{"flows": []FlowSpec{{Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.1.1"), DemandGbps: 1}}}, http.StatusBadRequest},
	} {
		if code := call(bad.method, bad.path, bad.body, nil); code != bad.want {
			t.Errorf("%s %s: %d, want %d", bad.method, bad.path, code, bad.want)
		}
	}
	if len(f.Flows()) != 0 {
		t.Error("bad requests added flows")
	}
}

// TestStatsSayWhenSwitchesServe: the control API answers before the
// switches serve (a large fabric publishes its initial state first);
// /sim/v1/stats says which.
func TestStatsSayWhenSwitchesServe(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 1, 1, 100)
	f, err := New(Options{Topology: topo, CounterInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	up := func() bool {
		t.Helper()
		resp, err := http.Get(srv.URL + "/sim/v1/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st Stats
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.Up
	}
	if up() {
		t.Fatal("stats say up before the fabric runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	<-f.Ready()
	if !up() {
		t.Fatal("stats do not say up once the switches serve")
	}
}
