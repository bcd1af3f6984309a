package fabrictest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// TestOpenAPIMatchesResponses sends real requests, good and bad, and checks
// each request and response against the served OpenAPI document: every
// path, status code and body the API produces is documented as it is.
func TestOpenAPIMatchesResponses(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) { o.SampleOneIn = 1024 })
	converged(t, h)
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
	checked := map[string]bool{}
	call := func(method, path, token string, body any, headers ...string) []byte {
		t.Helper()
		req, err := fabrictest.NewRequest(context.Background(), method, h.API.URL+path, token, body, headers...)
		if err != nil {
			t.Fatal(err)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s is not in the document: %v", method, path, err)
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
			t.Errorf("%s %s → HTTP %d does not match the document: %v\n%s", method, path, resp.StatusCode, err, got)
		}
		checked[fmt.Sprintf("%s %s %d", method, route.Path, resp.StatusCode)] = true
		return got
	}
	tok := tenant(t, h, "docs", 0, 0)
	call("GET", "/api/v1/topology", "", nil)
	call("GET", "/api/v1/whoami", tok, nil)
	call("GET", "/api/v1/whoami", "", nil)
	good := spec("doc", "h1-1", "h2-1", 10, 49152, 2)
	var in models.Intent
	json.Unmarshal(call("POST", "/api/v1/intents", tok, good), &in)
	call("POST", "/api/v1/intents?dryRun=true", tok, spec("doc2", "h1-2", "h2-2", 10, 49152, 1))
	call("POST", "/api/v1/intents", tok, spec("huge", "h1-2", "h2-2", 500, 49152, 1))
	call("POST", "/api/v1/intents", tok, `{"name": 1}`)
	call("POST", "/api/v1/intents", tok, spec("bad", "h1-1", "nowhere", 10, 49152, 1))
	call("GET", "/api/v1/intents", tok, nil)
	call("GET", "/api/v1/intents?state=Bogus", tok, nil)
	call("GET", "/api/v1/intents/"+in.ID, tok, nil)
	call("GET", "/api/v1/intents/nosuch", tok, nil)
	call("PUT", "/api/v1/intents/"+in.ID, tok, good, "If-Match", "1")
	call("PUT", "/api/v1/intents/"+in.ID, tok, good)
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
	if len(checked) < 25 {
		t.Errorf("only %d distinct (method, path, status) checked: %v", len(checked), checked)
	}
}
