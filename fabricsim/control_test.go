package fabricsim

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/topology"
)

// bodyRoutes are the control API's routes that read a body.
var bodyRoutes = []string{"/sim/v1/flows", "/sim/v1/workloads", "/sim/v1/workloads/permutation", "/sim/v1/faults", "/sim/v1/links"}

// TestControlAPIDecodesStrictly: a key in another case or given twice is
// refused, not taken (a "slow-writes" fault whose body also said
// "Kind":"switch-down" took the switch down).
func TestControlAPIDecodesStrictly(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f, err := New(Options{Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	h := f.Handler()
	for _, body := range []string{
		`{"kind":"slow-writes","target":"leaf1","delay_ms":10,"Kind":"switch-down"}`,
		`{"kind":"slow-writes","target":"leaf1","delay_ms":10,"kind":"switch-down"}`,
		`{"KIND":"switch-down","target":"leaf1"}`,
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/sim/v1/faults", strings.NewReader(body)))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", body, w.Code)
		}
	}
	if fs := f.Faults(); len(fs.SwitchesDown) != 0 || len(fs.SlowWritesMS) != 0 {
		t.Errorf("a refused body injected a fault: %+v", fs)
	}
}

// TestControlAPIBoundsWhatABodyCosts: bodies built to cost — nested 100,000
// deep, a million values, long strings — are refused with 400 by every
// route that reads one, allocating a small multiple of their size.
func TestControlAPIBoundsWhatABodyCosts(t *testing.T) {
	topo, _ := topology.LeafSpine(1, 2, 1, 100)
	f, err := New(Options{Topology: topo})
	if err != nil {
		t.Fatal(err)
	}
	h := f.Handler()
	bodies := map[string]string{
		"nested":      strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		"nested keys": strings.Repeat(`{"flows":`, 50_000),
		"values":      `{"flows":[` + strings.Repeat("0,", 1_100_000) + `0]}`,
		"string":      `{"kind":"` + strings.Repeat("x", 4<<20) + `"}`,
		"too large":   `{"target":"` + strings.Repeat("x", maxBody) + `"}`,
	}
	for name, body := range bodies {
		for _, route := range bodyRoutes {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, route, strings.NewReader(body)))
			runtime.ReadMemStats(&after)
			if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s to %s: HTTP %d, want 400 or 413", name, route, w.Code)
			}
			// The body is read whole (up to maxBody): that, twice for the
			// reader's growth, and a small multiple for the decode.
			if n, bound := after.TotalAlloc-before.TotalAlloc, uint64(3*len(body)+32*min(len(body), maxBody)+1<<20); n > bound {
				t.Errorf("%s to %s: %d bytes allocated for a %d-byte body (bound %d)", name, route, n, len(body), bound)
			}
		}
	}
}
