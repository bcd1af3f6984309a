package fabrictest_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// send sends req and returns its status, closing the body.
func send(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAuthorizationHeader: the Bearer scheme's name is case-insensitive;
// two Authorization headers are refused, not "first wins"; another scheme
// is no token.
func TestAuthorizationHeader(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	for _, tc := range []struct {
		name   string
		values []string
		want   int
	}{
		{name: "Bearer", values: []string{"Bearer " + h.OperatorToken}, want: http.StatusOK},
		{name: "lowercase scheme", values: []string{"bearer " + h.OperatorToken}, want: http.StatusOK},
		{name: "capitals and spaces", values: []string{"  BEARER   " + h.OperatorToken + " "}, want: http.StatusOK},
		{name: "two headers", values: []string{"Bearer " + h.OperatorToken, "Bearer anet_other"}, want: http.StatusBadRequest},
		{name: "another scheme", values: []string{"Basic " + h.OperatorToken}, want: http.StatusUnauthorized},
		{name: "scheme alone", values: []string{"Bearer"}, want: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := fabrictest.NewRequest(t.Context(), http.MethodGet, h.API.URL+"/api/v1/whoami", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.values {
				req.Header.Add("Authorization", v)
			}
			if got := send(t, req); got != tc.want {
				t.Fatalf("HTTP %d, want %d", got, tc.want)
			}
		})
	}
}

// TestIfMatchAny: If-Match: * updates an intent whatever its revision; a
// revision that is not one is refused.
func TestIfMatchAny(t *testing.T) {
	h, tok, in := oneIntent(t, "ml")
	var updated models.Intent
	if r := h.Do(t, "PUT", "/api/v1/intents/"+in.ID, tok, spec("a", "h1-1", "h2-1", 20, 49152, 1), &updated, "If-Match", "*"); r.StatusCode != http.StatusOK || updated.Spec.Gbps != 20 {
		t.Fatalf("If-Match: *: HTTP %d, %v Gb/s", r.StatusCode, updated.Spec.Gbps)
	}
	var p api.Problem
	for _, bad := range []string{"0", "-3", "abc"} {
		if r := h.Do(t, "PUT", "/api/v1/intents/"+in.ID, tok, spec("a", "h1-1", "h2-1", 30, 49152, 1), &p, "If-Match", fmt.Sprintf("%q", bad)); r.StatusCode != http.StatusPreconditionFailed {
			t.Errorf("If-Match %q: HTTP %d, want 412", bad, r.StatusCode)
		}
	}
}

// TestStrictJSONKeys: a key in another case than the field's, or a key
// given twice, is refused (encoding/json alone takes "GBPS" for "gbps"
// and keeps the last of two), on every endpoint that reads a body.
func TestStrictJSONKeys(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	for _, tc := range []struct {
		name, path, token, body string
	}{
		{"intent, key in capitals", "/api/v1/intents", tok, `{"name":"a","src":"h1-1","dst":"h2-1","GBPS":10,"src_ports":{"first":1,"last":1}}`},
		{"intent, nested key in another case", "/api/v1/intents", tok, `{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"First":1,"last":1}}`},
		{"intent, key twice", "/api/v1/intents", tok, `{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"gbps":90,"src_ports":{"first":1,"last":1}}`},
		{"tenant, key twice", "/api/v1/tenants", h.OperatorToken, `{"name":"x","name":"y"}`},
		{"drain, key in another case", "/api/v1/drains", h.OperatorToken, `{"Switch":"spine1"}`},
		{"token, key twice", "/api/v1/tokens", h.OperatorToken, `{"role":"operator","role":"tenant","tenant":"ml"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.Problem
			if r := h.Do(t, "POST", tc.path, tc.token, tc.body, &p); r.StatusCode != http.StatusBadRequest {
				t.Fatalf("HTTP %d %+v, want 400", r.StatusCode, p)
			}
		})
	}
}

// TestIdempotentReplayIsTheSameRequest: the same request under the same
// Idempotency-Key is a replay of the first, not a different request,
// with its keys in another order or a default spelled out that the first
// left out (class, priority, empty constraints).
func TestIdempotentReplayIsTheSameRequest(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	first := `{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"first":1,"last":1}}`
	var a models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, first, &a, "Idempotency-Key", "k1"); r.StatusCode != http.StatusCreated {
		t.Fatalf("first: HTTP %d", r.StatusCode)
	}
	for _, tc := range []struct{ name, again string }{
		{"keys reordered", `{"src_ports":{"last":1,"first":1}, "gbps":10, "dst":"h2-1", "src":"h1-1", "name":"a"}`},
		{"defaults spelled out", `{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"class":"lossless-rdma","priority":0,"constraints":{},"src_ports":{"first":1,"last":1}}`},
	} {
		var b models.Intent
		r := h.Do(t, "POST", "/api/v1/intents", tok, tc.again, &b, "Idempotency-Key", "k1")
		if r.StatusCode != http.StatusCreated || b.ID != a.ID || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the same request, %s: HTTP %d, intent %s (first %s), replayed %q", tc.name, r.StatusCode, b.ID, a.ID, r.Header.Get("Idempotent-Replayed"))
		}
	}
}

// TestInputRefused: what must not be admitted — one host named twice in a
// collective (by name and by IP), a capacity question from a host to
// itself, a rate under 1 Mb/s, UDP source port 0 — is refused with the
// field that is wrong, and nothing is reserved.
func TestInputRefused(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	snap, _ := h.Controller.Snapshot()
	host := snap.Hosts()[0]
	twice := models.IntentSpec{Name: "c", SrcPorts: models.PortRange{First: 5, Last: 5},
		Collective: &models.Collective{Pattern: models.PatternAllToAll, Endpoints: []string{host.Name, "h2-1", host.IP.String()}, GbpsPerGPU: 10}}
	tiny := spec("t", "h1-1", "h2-1", 5e-324, 49152, 1)
	port0 := spec("p", "h1-1", "h2-1", 10, 0, 2) // ports 0-1
	for _, tc := range []struct {
		name  string
		body  models.IntentSpec
		field string
	}{
		{"one host twice", twice, "collective.endpoints[2]"},
		{"a rate of 5e-324", tiny, "gbps"},
		{"source port 0", port0, "src_ports.first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.Problem
			r := h.Do(t, "POST", "/api/v1/intents", tok, tc.body, &p)
			if r.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
				t.Fatalf("HTTP %d %+v, want 422 on %s", r.StatusCode, p, tc.field)
			}
		})
	}
	var p api.Problem
	if r := h.Do(t, "GET", "/api/v1/capacity?src="+host.Name+"&dst="+host.IP.String(), tok, nil, &p); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("capacity from a host to itself: HTTP %d %+v, want 422", r.StatusCode, p)
	}
	if g, n := h.Intents.Usage("ml"); g != 0 || n != 0 {
		t.Errorf("refused requests reserved %v Gb/s in %d intents", g, n)
	}
}

// TestSimAPINeedsOperator: the emulator's control API mounted on the
// demo's server takes switches down and shows every tenant's flows: no
// token is refused (401), a tenant's too (403), reads and writes alike;
// the operator's works. So does Go's profiler (/debug/pprof/): it costs
// CPU and shows the process's insides.
func TestSimAPINeedsOperator(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	fault := map[string]string{"kind": "switch-down", "target": "spine1"}
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		want                      int
	}{
		{"anonymous fault", "POST", "/sim/v1/faults", "", fault, http.StatusUnauthorized},
		{"anonymous trace", "GET", "/sim/v1/trace?src=h1-1&dst=h2-1", "", nil, http.StatusUnauthorized},
		{"anonymous flows", "GET", "/sim/v1/flows", "", nil, http.StatusUnauthorized},
		{"tenant fault", "POST", "/sim/v1/faults", tok, fault, http.StatusForbidden},
		{"tenant flows", "GET", "/sim/v1/flows", tok, nil, http.StatusForbidden},
		{"operator flows", "GET", "/sim/v1/flows", h.OperatorToken, nil, http.StatusOK},
		{"anonymous profile", "GET", "/debug/pprof/heap", "", nil, http.StatusUnauthorized},
		{"tenant profile", "GET", "/debug/pprof/heap", tok, nil, http.StatusForbidden},
		{"operator profile", "GET", "/debug/pprof/heap", h.OperatorToken, nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := h.Do(t, tc.method, tc.path, tc.token, tc.body, nil); r.StatusCode != tc.want {
				t.Fatalf("HTTP %d, want %d", r.StatusCode, tc.want)
			}
		})
	}
	if faults := h.Fabric.Faults(); len(faults.SwitchesDown) != 0 || len(faults.History) != 0 {
		t.Fatalf("a refused request injected faults: %+v", faults)
	}
}

// TestUnknownTokenFloodLimited: an address that keeps sending unknown
// tokens is refused (429) before they are looked up once its budget of
// failures is spent; the answer says to slow down.
func TestUnknownTokenFloodLimited(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	unauthorized := 0
	for i := range 5000 { // a backstop: the budget is 40 at once, 20 a second
		code := h.Do(t, "GET", "/api/v1/whoami", fmt.Sprintf("anet_bogus%d", i), nil, nil).StatusCode
		switch code {
		case http.StatusUnauthorized:
			unauthorized++
			continue
		case http.StatusTooManyRequests:
			if unauthorized < 40 {
				t.Fatalf("refused after %d unknown tokens, before the burst of 40 was spent", unauthorized)
			}
			return
		default:
			t.Fatalf("unknown token %d: HTTP %d", i, code)
		}
	}
	t.Fatalf("5000 unknown tokens from one address, all looked up (401)")
}
