package fabrictest_test

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/tenancy"
)

// rejectedIDs lists a tenant's Rejected intents, oldest first.
func rejectedIDs(t *testing.T, h *fabrictest.Harness, token string) []string {
	t.Helper()
	var list api.IntentList
	if r := h.Do(t, "GET", "/api/v1/intents?state=Rejected", token, nil, &list); r.StatusCode != http.StatusOK {
		t.Fatalf("list: HTTP %d", r.StatusCode)
	}
	ids := []string{}
	for _, in := range list.Items {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestStoredDataBounded: what a tenant can make accelnet store without
// holding a reservation is bounded: every list and string of an intent
// (90,000 avoided switches would be 37 MB), the refused
// intents kept per tenant (the oldest go), and the tokens per tenant.
func TestStoredDataBounded(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 1), func(c *stack.Config) { c.Intents.MaxFinished = 3 })
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)

	huge := spec("a", "h1-1", "h2-1", 10, 49152, 1)
	for i := range 90000 {
		huge.Constraints.AvoidSwitches = append(huge.Constraints.AvoidSwitches, models.SwitchID(fmt.Sprintf("s%d", i)))
	}
	oneTooMany := spec("a", "h1-1", "h2-1", 10, 49152, 1)
	for i := range models.MaxAvoid + 1 {
		oneTooMany.Constraints.AvoidLinks = append(oneTooMany.Constraints.AvoidLinks, models.LinkID(fmt.Sprintf("leaf1:%d<->spine1:%d", i, i)))
	}
	long := spec("a", "h1-1", strings.Repeat("h", models.MaxEndpointLen+1), 10, 49152, 1)
	collective := models.IntentSpec{Name: "c", SrcPorts: models.PortRange{First: 5, Last: 5},
		Collective: &models.Collective{Pattern: models.PatternAllToAll, Endpoints: []string{"h1-1", strings.Repeat("x", 300)}, GbpsPerGPU: 10}}
	for _, tc := range []struct {
		name  string
		body  models.IntentSpec
		field string
	}{
		{"90,000 avoided switches", huge, "constraints.avoid_switches"},
		{"one avoided link too many", oneTooMany, "constraints.avoid_links"},
		{"a destination of 254 characters", long, "dst"},
		{"a collective endpoint of 300 characters", collective, "collective.endpoints[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.Problem
			r := h.Do(t, "POST", "/api/v1/intents", tok, tc.body, &p)
			if r.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
				t.Fatalf("HTTP %d %+v, want 422 on %s", r.StatusCode, p, tc.field)
			}
		})
	}

	// Refused for capacity, each is stored (Rejected); only the newest
	// three are kept.
	var made []string
	for i := range 8 {
		var p api.Problem
		r := h.Do(t, "POST", "/api/v1/intents", tok, spec(fmt.Sprintf("big%d", i), "h1-1", "h2-1", 400, 49152+i, 1), &p)
		if r.StatusCode != http.StatusConflict || p.Intent == nil {
			t.Fatalf("400 Gb/s on 100 Gb/s links: HTTP %d %+v, want 409 with the stored intent", r.StatusCode, p)
		}
		made = append(made, p.Intent.ID)
	}
	var kept []string
	h.Eventually(t, 30*time.Second, "three refused intents kept", func() bool {
		kept = rejectedIDs(t, h, tok)
		return len(kept) <= 3
	})
	// Sorted, as kept is: IDs made within one millisecond do not sort
	// in the order they were made.
	if want := slices.Sorted(slices.Values(made[len(made)-3:])); !slices.Equal(kept, want) {
		t.Errorf("kept %v, want the newest three %v", kept, want)
	}

	// Tokens: a tenant holds at most MaxTokensPerTenant (one is held).
	for i := 1; i < tenancy.MaxTokensPerTenant; i++ {
		if r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "ml", Role: models.RoleTenant}, nil); r.StatusCode != http.StatusCreated {
			t.Fatalf("token %d: HTTP %d", i+1, r.StatusCode)
		}
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "ml", Role: models.RoleTenant}, &p); r.StatusCode != http.StatusConflict {
		t.Fatalf("token %d: HTTP %d %+v, want 409", tenancy.MaxTokensPerTenant+1, r.StatusCode, p)
	}
}

// TestRefusedIntentsExpire: a refused intent's record goes once it is
// older than the time refused intents are kept.
func TestRefusedIntentsExpire(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 1), func(c *stack.Config) { c.Intents.KeepFinished = time.Second })
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("big", "h1-1", "h2-1", 400, 49152, 1), &p); r.StatusCode != http.StatusConflict || p.Intent == nil {
		t.Fatalf("HTTP %d %+v, want 409 with the stored intent", r.StatusCode, p)
	}
	h.Eventually(t, 60*time.Second, "the refused intent's record removed", func() bool {
		return h.Do(t, "GET", "/api/v1/intents/"+p.Intent.ID, tok, nil, nil).StatusCode == http.StatusNotFound
	})
}

// TestTenantRateLimitShared: a tenant's tokens share one request budget:
// a second token buys no more requests.
func TestTenantRateLimitShared(t *testing.T) {
	const rate = 2 // a second, burst 4
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(c *stack.Config) { c.APIRateLimit = rate })
	converged(t, h)
	a := tenant(t, h, "ml", 0, 0)
	second := tokenFor(t, h, "ml")
	start := time.Now()
	ok := 0
	for i := range 40 {
		tok := a
		if i%2 == 1 {
			tok = second.Secret
		}
		if h.Do(t, "GET", "/api/v1/whoami", tok, nil, nil).StatusCode == http.StatusOK {
			ok++
		}
	}
	// One shared budget allows the burst and what refilled meanwhile;
	// one per token would allow twice the burst at once.
	bound := 2*rate + int(math.Ceil(time.Since(start).Seconds()*rate))
	if ok > bound {
		t.Fatalf("%d of 40 requests over two tokens answered; one tenant's budget allows %d", ok, bound)
	}
}
