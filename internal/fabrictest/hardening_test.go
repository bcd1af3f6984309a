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
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var in models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("a", "h1-1", "h2-1", 10, 49152, 1), &in); r.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d", r.StatusCode)
	}
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
