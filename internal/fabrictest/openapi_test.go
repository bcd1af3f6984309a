package fabrictest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// TestOpenAPIMatchesResponses sends real requests, good and bad, and checks
// each request and response against the served OpenAPI document: every
// path, status code and body the API produces is documented as it is.
func TestOpenAPIMatchesResponses(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) { o.Elephants.SampleOneIn = 1024; o.ProbeRate = 100 })
	converged(t, h)
	h.Eventually(t, 20*time.Second, "leaf1 → leaf2 probed (a pair's probes are documented too)", func() bool {
		var p api.PairLatency
		return h.GetJSON(t, "/api/v1/latency?src=leaf1&dst=leaf2", &p) == http.StatusOK && p.Probes != nil
	})

	checked := map[string]bool{}
	send := conformance(t, h, checked)
	call := func(method, path, token string, body any, headers ...string) []byte {
		t.Helper()
		req, err := fabrictest.NewRequest(context.Background(), method, h.API.URL+path, token, body, headers...)
		if err != nil {
			t.Fatal(err)
		}
		return send(req)
	}
	tok := tenant(t, h, "docs", 0, 0)
	call("GET", "/api/v1/topology", "", nil)
	call("GET", "/api/v1/latency", "", nil)
	call("GET", "/api/v1/latency?src=leaf1&dst=leaf2", "", nil)
	call("GET", "/api/v1/latency?src=h1-1&dst=h2-2&window=30s", "", nil)
	call("GET", "/api/v1/latency?src=h1-1", "", nil)
	call("GET", "/api/v1/whoami", tok, nil)
	call("GET", "/api/v1/whoami", "", nil)
	good := spec("doc", "h1-1", "h2-1", 10, 49152, 2)
	var in models.Intent
	json.Unmarshal(call("POST", "/api/v1/intents", tok, good), &in)
	call("POST", "/api/v1/intents?dryRun=true", tok, spec("doc2", "h1-2", "h2-2", 10, 49152, 1))
	call("POST", "/api/v1/intents", tok, spec("huge", "h1-2", "h2-2", 500, 49152, 1))
	call("POST", "/api/v1/intents", tok, `{"name": 1}`)
	call("POST", "/api/v1/intents", tok, spec("bad", "h1-1", "nowhere", 10, 49152, 1))
	call("POST", "/api/v1/intents:batch", tok, api.IntentBatchRequest{Items: []models.IntentSpec{
		spec("batch1", "h1-2", "h2-2", 1, 50000, 1), spec("batch1", "h1-2", "h2-2", 1, 50000, 1), spec("huge", "h1-2", "h2-2", 500, 50001, 1)}})
	call("POST", "/api/v1/intents:batch", tok, api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{spec("batch2", "h1-2", "h2-1", 1, 50010, 1)}}, "Idempotency-Key", "b2")
	call("POST", "/api/v1/intents:batch", tok, api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{spec("batch2", "h1-2", "h2-1", 1, 50010, 1)}}, "Idempotency-Key", "b2")
	call("POST", "/api/v1/intents:batch?dryRun=true", tok, api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{spec("batch3", "h1-2", "h2-1", 1, 50020, 1)}})
	call("POST", "/api/v1/intents:batch", tok, api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{spec("huge", "h1-2", "h2-1", 500, 50030, 1)}})
	call("POST", "/api/v1/intents:batch", tok, api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{spec("ghost", "h1-2", "nowhere", 1, 50040, 1)}})
	call("GET", "/api/v1/intents", tok, nil)
	call("GET", "/api/v1/intents?state=Bogus", tok, nil)
	call("GET", "/api/v1/intents/"+in.ID, tok, nil)
	call("GET", "/api/v1/intents/nosuch", tok, nil)
	call("PUT", "/api/v1/intents/"+in.ID, tok, good, "If-Match", "1")
	call("PUT", "/api/v1/intents/"+in.ID, tok, good)
	overPriority := good
	overPriority.Priority = 7
	call("PUT", "/api/v1/intents/"+in.ID, tok, overPriority, "If-Match", "*")                                                                // 403: not granted
	call("POST", "/api/v1/intents", h.OperatorToken, api.IntentRequest{Tenant: "ghost", IntentSpec: spec("x", "h1-1", "h2-1", 1, 40000, 1)}) // 404
	call("GET", "/api/v1/capacity?src=h1-1&dst=h2-2", tok, nil)
	call("GET", "/api/v1/capacity?src=h1-1&dst=zz", tok, nil)
	call("GET", "/api/v1/tenants", h.OperatorToken, nil)
	call("GET", "/api/v1/tenants", tok, nil)
	call("POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "other", MaxGbps: 10})
	call("POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "other", MaxGbps: 20})
	call("POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "bad name!"})
	call("GET", "/api/v1/tenants/other", h.OperatorToken, nil)
	var nt api.NewTokenView
	json.Unmarshal(call("POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "other", Role: models.RoleTenant}), &nt)
	call("POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "ghost", Role: models.RoleTenant})
	call("GET", "/api/v1/tokens", h.OperatorToken, nil)
	call("DELETE", "/api/v1/tokens/"+nt.ID, h.OperatorToken, nil)
	call("DELETE", "/api/v1/tenants/other", h.OperatorToken, nil)
	call("DELETE", "/api/v1/tenants/other", h.OperatorToken, nil)
	call("DELETE", "/api/v1/intents/"+in.ID, tok, nil)
	call("POST", "/api/v1/drains?dryRun=true", h.OperatorToken, models.Drain{Switch: "spine1"})
	call("POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: "leaf1"})
	call("POST", "/api/v1/drains", h.OperatorToken, `{"switch":"spine1","colour":"red"}`)
	var dr struct {
		ID string `json:"id"`
	}
	json.Unmarshal(call("POST", "/api/v1/drains", h.OperatorToken, models.Drain{Link: "leaf1:3<->spine1:1", Reason: "test"}), &dr)
	call("GET", "/api/v1/drains", h.OperatorToken, nil)
	call("GET", "/api/v1/drains/"+dr.ID, h.OperatorToken, nil)
	call("DELETE", "/api/v1/drains/"+dr.ID, h.OperatorToken, nil)
	call("GET", "/api/v1/drains/"+dr.ID, h.OperatorToken, nil)
	// An undeclared elephant, found by sampling.
	oneElephant(t, h)
	call("GET", "/api/v1/elephants", h.OperatorToken, nil)
	call("GET", "/api/v1/elephants", "", nil)
	call("GET", "/api/v1/elephants", tok, nil)
	for _, want := range []string{"PUT /intents/{id} 403", "POST /intents 404", "POST /intents:batch 200", "POST /intents:batch 201",
		"POST /intents:batch 409", "POST /intents:batch 422"} {
		if !checked[want] {
			t.Errorf("%s was not answered (a status the document lists must be one the server gives)", want)
		}
	}
	if len(checked) < 25 {
		t.Errorf("only %d distinct (method, path, status) checked: %v", len(checked), checked)
	}
}

// conformance loads the served OpenAPI document and returns a function
// that sends a request and checks it and its response against the
// document: its path and method are there, its status is listed (no
// "default" catches the rest) and its body matches. Each checked
// (method, path, status) is noted in checked.
func conformance(t *testing.T, h *fabrictest.Harness, checked map[string]bool) func(*http.Request) []byte {
	t.Helper()
	ctx := context.Background()
	var raw json.RawMessage
	if code := h.Do(t, "GET", "/api/v1/openapi.json", "", nil, &raw).StatusCode; code != 200 {
		t.Fatalf("openapi.json: HTTP %d", code)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: h.API.URL + "/api/v1"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return func(req *http.Request) []byte {
		t.Helper()
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s %s is not in the document: %v", req.Method, req.URL.Path, err)
			return nil
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s %s → HTTP %d does not match the document: %v\n%s", req.Method, req.URL.Path, resp.StatusCode, err, got)
		}
		checked[fmt.Sprintf("%s %s %d", req.Method, route.Path, resp.StatusCode)] = true
		return got
	}
}

// TestOpenAPIListsEveryStatus walks every route the API serves (from its
// router, not the document) and sends each the requests every client can
// get wrong — no token, two Authorization headers, a tenant's token, an
// empty or malformed or oversized body, an ID that does not exist — and
// checks every answer against the document: a route or a status it does
// not list fails.
func TestOpenAPIListsEveryStatus(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	tok := tenant(t, h, "docs", 0, 0)
	checked := map[string]bool{}
	send := conformance(t, h, checked)
	eng, ok := h.Handler.(*gin.Engine)
	if !ok {
		t.Fatalf("the API handler is a %T, not a gin engine", h.Handler)
	}
	routes := 0
	for _, r := range eng.Routes() {
		if !strings.HasPrefix(r.Path, "/api/v1/") || r.Path == "/api/v1/openapi.json" {
			continue
		}
		routes++
		var parts []string
		for _, p := range strings.Split(servedPath(r), "/") {
			if strings.HasPrefix(p, ":") {
				p = "nosuch"
			}
			parts = append(parts, p)
		}
		url := h.API.URL + strings.Join(parts, "/")
		streams := r.Path == "/api/v1/events" || r.Path == "/api/v1/stream"
		type attempt struct {
			token   string
			body    string
			headers []string
		}
		attempts := []attempt{{}, {token: h.OperatorToken, headers: []string{"Authorization", "Bearer " + tok}}}
		if !streams {
			attempts = append(attempts, attempt{token: tok}, attempt{token: h.OperatorToken})
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPut {
			attempts = append(attempts, attempt{token: h.OperatorToken, body: "{"}, attempt{token: h.OperatorToken, body: "{}"},
				attempt{token: h.OperatorToken, body: `{"name":"` + strings.Repeat("x", 1<<20) + `"}`})
		}
		if r.Path == "/api/v1/stream" {
			attempts = nil // public: every request streams
		}
		for _, a := range attempts {
			var body io.Reader
			if a.body != "" {
				body = strings.NewReader(a.body)
			}
			req, err := http.NewRequest(r.Method, url, body)
			if err != nil {
				t.Fatal(err)
			}
			if a.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if a.token != "" {
				req.Header.Set("Authorization", "Bearer "+a.token)
			}
			for i := 0; i+1 < len(a.headers); i += 2 {
				req.Header.Add(a.headers[i], a.headers[i+1])
			}
			send(req)
		}
	}
	if routes < 20 {
		t.Fatalf("only %d routes found under /api/v1/", routes)
	}
	t.Logf("%d routes, %d distinct (method, path, status) checked", routes, len(checked))
}

// servedPath is the path a gin route serves: its pattern with the
// escaped colons of custom methods (/intents\:batch) unescaped.
func servedPath(r gin.RouteInfo) string { return strings.ReplaceAll(r.Path, `\:`, ":") }
