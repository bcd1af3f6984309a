package fabrictest_test

// The adversarial set: what a tenant, a neighbour on the management
// network or a careless script can do to the controller, each refused or
// bounded (docs/production.md "Security" says what each limit protects).

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/gin-gonic/gin"
)

// TestUnknownTokensDoNotLockOutValidOnes: an address that sends unknown
// tokens until it is refused (429) still has its valid tokens served,
// revocations included; a valid token is never refused for its
// neighbour's mistakes. Each valid request follows a refusal at once, so
// the address is limited when it arrives, however slow the machine.
func TestUnknownTokensDoNotLockOutValidOnes(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	unknown := 0
	limit := func() {
		t.Helper()
		for range 200 {
			unknown++
			if h.Do(t, "GET", "/api/v1/whoami", fmt.Sprintf("anet_unknown%d", unknown), nil, nil).StatusCode == http.StatusTooManyRequests {
				return
			}
		}
		t.Fatal("200 unknown tokens from one address in a row were never refused")
	}
	tok := tenant(t, h, "ml", 0, 0)
	for _, token := range []string{h.OperatorToken, tok} {
		limit()
		if r := h.Do(t, "GET", "/api/v1/whoami", token, nil, nil); r.StatusCode != http.StatusOK {
			t.Errorf("a valid token from the limited address: HTTP %d, want 200", r.StatusCode)
		}
	}
	// Revoking works from there too (the adversarial run saw 429s here).
	var list struct {
		Items []models.Token `json:"items"`
	}
	h.Do(t, "GET", "/api/v1/tokens", h.OperatorToken, nil, &list)
	for _, tk := range list.Items {
		if tk.Tenant == "ml" {
			limit()
			if r := h.Do(t, "DELETE", "/api/v1/tokens/"+tk.ID, h.OperatorToken, nil, nil); r.StatusCode != http.StatusNoContent {
				t.Errorf("revoke from the limited address: HTTP %d", r.StatusCode)
			}
		}
	}
}

// TestHoldsAreClaimedAtomically: six tenants created at once, each holding
// the same host: exactly one is created, the others are refused with the
// holder's name; and a hold over another tenant's live intent is refused.
func TestHoldsAreClaimedAtomically(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Go(func() {
			r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: models.TenantName(fmt.Sprintf("team%d", i)), Holds: []string{"h1-*"}}, nil)
			codes[i] = r.StatusCode
		})
	}
	wg.Wait()
	if created := tally(t, codes, http.StatusCreated, http.StatusConflict); created != 1 {
		t.Fatalf("%d tenants created holding h1-*, want 1 (codes %v)", created, codes)
	}

	tok := tenant(t, h, "other", 0, 0)
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("live", "h2-1", "h1-2", 10, 49152, 1), nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("an intent to a held host: HTTP %d, want 403", r.StatusCode)
	}
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("live", "h2-1", "h2-2", 10, 49152, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d", r.StatusCode)
	}
	var p api.Problem
	r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "grabber", Holds: []string{"h2-2"}}, &p)
	if r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "tenant other: 1") {
		t.Errorf("a hold over another tenant's live intent: HTTP %d %q, want 409 naming it", r.StatusCode, p.Detail)
	}
}

// TestGrantsNameHosts: a host grant or hold given as an address, in
// another case or matching nothing is refused with the reason, not kept
// to match nothing.
func TestGrantsNameHosts(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	snap, _ := h.Controller.Snapshot()
	h11, _ := snap.Host("h1-1")
	for _, tc := range []struct {
		name   string
		tenant models.Tenant
		field  string
		says   string
	}{
		{name: "address", tenant: models.Tenant{Name: "a", Holds: []string{h11.IP.String()}}, field: "holds[0]", says: "give the host's name (h1-1)"},
		{name: "case", tenant: models.Tenant{Name: "b", Holds: []string{"H1-1"}}, field: "holds[0]", says: "case-sensitive (h1-1)"},
		{name: "nothing", tenant: models.Tenant{Name: "c", Hosts: []string{"h1-1", "gpu-*"}}, field: "hosts[1]", says: "matches no host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.Problem
			r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, tc.tenant, &p)
			if r.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) != 1 || p.Errors[0].Field != tc.field || !strings.Contains(p.Errors[0].Message, tc.says) {
				t.Fatalf("HTTP %d %+v, want 422 on %s saying %q", r.StatusCode, p.Errors, tc.field, tc.says)
			}
		})
	}
	if r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "d", Hosts: []string{"h1-*"}, Holds: []string{"h2-1"}}, nil); r.StatusCode != http.StatusCreated {
		t.Errorf("a grant and a hold that name hosts: HTTP %d", r.StatusCode)
	}
}

// TestTokenCapHoldsUnderConcurrency: a tenant a few tokens short of the
// cap asked for 16 at once gets exactly what is left.
func TestTokenCapHoldsUnderConcurrency(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	tenant(t, h, "ml", 0, 0) // one token
	for range tenancy.MaxTokensPerTenant - 5 {
		tokenFor(t, h, "ml")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range 16 {
		wg.Go(func() {
			r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: "ml", Role: models.RoleTenant}, nil)
			mu.Lock()
			defer mu.Unlock()
			switch r.StatusCode {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
			default:
				t.Errorf("HTTP %d, want 201 or 409", r.StatusCode)
			}
		})
	}
	wg.Wait()
	if created != 4 {
		t.Errorf("%d tokens issued at once with 4 left under the cap", created)
	}
	var list struct {
		Items []models.Token `json:"items"`
	}
	h.Do(t, "GET", "/api/v1/tokens", h.OperatorToken, nil, &list)
	n := 0
	for _, tk := range list.Items {
		if tk.Tenant == "ml" {
			n++
		}
	}
	if n != tenancy.MaxTokensPerTenant {
		t.Errorf("the tenant holds %d tokens, want %d", n, tenancy.MaxTokensPerTenant)
	}
}

// TestLastOperatorTokenStays: the only operator token cannot be revoked
// (nothing could manage the controller after it); with a second one, the
// first can.
func TestLastOperatorTokenStays(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	var who models.Token
	h.Do(t, "GET", "/api/v1/whoami", h.OperatorToken, nil, &who)
	var p api.Problem
	if r := h.Do(t, "DELETE", "/api/v1/tokens/"+who.ID, h.OperatorToken, nil, &p); r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "only operator token") {
		t.Fatalf("revoke the last operator token: HTTP %d %q, want 409", r.StatusCode, p.Detail)
	}
	var second api.NewTokenView
	if r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Role: models.RoleOperator}, &second); r.StatusCode != http.StatusCreated {
		t.Fatalf("a second operator token: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "DELETE", "/api/v1/tokens/"+who.ID, second.Secret, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke the first with a second one: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "DELETE", "/api/v1/tokens/"+second.ID, second.Secret, nil, nil); r.StatusCode != http.StatusConflict {
		t.Errorf("revoke the second, now the last: HTTP %d, want 409", r.StatusCode)
	}
}

// TestPriorityIsGranted: under preemption, a tenant cannot choose a
// priority above what the operator granted it (0 by default) to displace
// another tenant's installed intent; granted one, it can.
func TestPriorityIsGranted(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *stack.Config) { o.Intents.Preemption = true })
	converged(t, h)
	victim := tenant(t, h, "victim", 0, 0)
	var installed models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", victim, spec("job", "h1-1", "h2-1", 80, 49152, 1), &installed); r.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d", r.StatusCode)
	}
	greedy := tenant(t, h, "greedy", 0, 0)
	high := spec("mine", "h1-1", "h2-1", 80, 49153, 1)
	high.Priority = 7
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", greedy, high, &p); r.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "at most 0") {
		t.Fatalf("priority 7 ungranted: HTTP %d %q, want 403", r.StatusCode, p.Detail)
	}
	if got := intentState(t, h, victim, installed.ID); !got.Status.State.Live() || got.Status.State == models.StatePending {
		t.Fatalf("the other tenant's intent is %s", got.Status.State)
	}
	if r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "greedy", MaxPriority: 7}, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("grant priority: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "POST", "/api/v1/intents", greedy, high, nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("priority 7 granted: HTTP %d", r.StatusCode)
	}
}

// TestTenantPinShare: with no quotas set, one tenant cannot fill a
// switch's flow-pin table for everyone: past its share (here a quarter of
// 16 entries) it is refused with the table named, and another tenant
// still gets in there.
func TestTenantPinShare(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *stack.Config) { o.Intents.TenantPinShare = 4.0 / float64(16384) })
	converged(t, h)
	hog := tenant(t, h, "hog", 0, 0)
	for i := range 4 { // one flow, pinned on leaf1, spine1 and leaf2: 4 entries each
		if r := h.Do(t, "POST", "/api/v1/intents", hog, spec(fmt.Sprintf("tiny%d", i), "h1-1", "h2-1", 0.01, 49152+i, 1), nil); r.StatusCode != http.StatusCreated {
			t.Fatalf("intent %d: HTTP %d", i, r.StatusCode)
		}
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", hog, spec("one-too-many", "h1-1", "h2-1", 0.01, 49200, 1), &p); r.StatusCode != http.StatusForbidden ||
		!strings.Contains(p.Detail, "flow-pin table") || !strings.Contains(p.Detail, "holds 4 of the 4 entries") {
		t.Fatalf("past the share: HTTP %d %q, want 403 naming the table", r.StatusCode, p.Detail)
	}
	other := tenant(t, h, "other", 0, 0)
	if r := h.Do(t, "POST", "/api/v1/intents", other, spec("fair", "h1-1", "h2-1", 0.01, 49300, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("another tenant on the same switches: HTTP %d", r.StatusCode)
	}
	// The operator raises the hog's share: it gets in.
	if r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "hog", MaxPinsPerSwitch: 100}, nil); r.StatusCode != http.StatusOK {
		t.Fatalf("raise the share: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "POST", "/api/v1/intents", hog, spec("one-too-many", "h1-1", "h2-1", 0.01, 49200, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("with the share raised: HTTP %d", r.StatusCode)
	}
}

// TestIfMatchComparesStrongly: If-Match follows RFC 9110 13.1.1: "*"
// matches, a list matches if any of its strong tags is the current one,
// a weak tag (W/"*" included) never matches; a revision without its
// quotes is taken as its tag.
func TestIfMatchComparesStrongly(t *testing.T) {
	h, tok, in := oneIntent(t, "ml")
	installed := func() {
		t.Helper()
		h.Eventually(t, 20*time.Second, "the intent installed (its revision settled)", func() bool {
			return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
		})
	}
	for _, tc := range []struct {
		header string
		want   int
	}{
		{`W/"*"`, http.StatusPreconditionFailed},
		{fmt.Sprintf(`W/"%d"`, in.Revision), http.StatusPreconditionFailed},
		{`"*"`, http.StatusPreconditionFailed},   // a tag named *, not "any"
		{fmt.Sprint(in.Revision), http.StatusOK}, // its quotes dropped
		{fmt.Sprintf(`"1", "%d"`, in.Revision), http.StatusOK},
	} {
		installed()
		var cur models.Intent
		h.Do(t, "GET", "/api/v1/intents/"+in.ID, tok, nil, &cur)
		header := strings.ReplaceAll(tc.header, fmt.Sprint(in.Revision), fmt.Sprint(cur.Revision))
		if r := h.Do(t, "PUT", "/api/v1/intents/"+in.ID, tok, spec("a", "h1-1", "h2-1", 11, 49152, 1), nil, "If-Match", header); r.StatusCode != tc.want {
			t.Errorf("If-Match: %s: HTTP %d, want %d", header, r.StatusCode, tc.want)
		}
	}
}

// TestConcurrentUpdatesAreSerialized: 16 updates of one intent at once
// with If-Match: * all succeed one after the other (never a 503: an
// update in a batch is not compared with the revision of one before it);
// with its revision, one wins and the rest get 412.
func TestConcurrentUpdatesAreSerialized(t *testing.T) {
	h, tok, in := oneIntent(t, "ml")
	for _, tc := range []struct {
		ifMatch string
		wantOK  int // how many 200s
	}{{"*", 16}, {"", 1}} {
		h.Eventually(t, 20*time.Second, "the intent installed (its revision settled)", func() bool {
			return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
		})
		var cur models.Intent
		h.Do(t, "GET", "/api/v1/intents/"+in.ID, tok, nil, &cur)
		ifMatch := tc.ifMatch
		if ifMatch == "" {
			ifMatch = fmt.Sprintf("%q", fmt.Sprint(cur.Revision))
		}
		codes := make([]int, 16)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() {
				codes[i] = h.Do(t, "PUT", "/api/v1/intents/"+in.ID, tok, spec("a", "h1-1", "h2-1", float64(20+i), 49152, 1), nil, "If-Match", ifMatch).StatusCode
			})
		}
		wg.Wait()
		if ok := tally(t, codes, http.StatusOK, http.StatusPreconditionFailed); ok != tc.wantOK {
			t.Errorf("If-Match %s: %d of 16 updates succeeded, want %d (%v)", ifMatch, ok, tc.wantOK, codes)
		}
	}
}

// TestUsageReturnsToZero: after intents of awkward rates are created and
// deleted, the tenant reserves exactly 0 (no float residue).
func TestUsageReturnsToZero(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var ids []string
	for i, gbps := range []float64{0.1, 0.2, 0.3, 1.7, 2.9, 0.07} {
		var in models.Intent
		if r := h.Do(t, "POST", "/api/v1/intents", tok, spec(fmt.Sprint(i), "h1-1", "h2-1", gbps, 49152+i, 1), &in); r.StatusCode != http.StatusCreated {
			t.Fatalf("create: HTTP %d", r.StatusCode)
		}
		ids = append(ids, in.ID)
	}
	for _, id := range ids {
		h.Do(t, "DELETE", "/api/v1/intents/"+id, tok, nil, nil)
	}
	h.Eventually(t, 20*time.Second, "nothing reserved", func() bool {
		var v api.TenantView
		h.Do(t, "GET", "/api/v1/tenants/ml", h.OperatorToken, nil, &v)
		return v.LiveIntents == 0 && v.ReservedGbps == 0
	})
}

// TestBodyTooSlowIs408: a body that does not arrive within the server's
// read timeout is answered 408 Request Timeout, not 413 as if it were
// too large.
func TestBodyTooSlowIs408(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	srv := httpserve.NewServer(h.Stack.Handler, nil)
	srv.ReadTimeout = 500 * time.Millisecond
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- httpserve.Serve(ctx, srv, lis, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/v1/tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"na", h.OperatorToken)
	_ = c.SetReadDeadline(time.Now().Add(fabrictest.Backstop(30 * time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a body that stopped coming: HTTP %d, want 408", resp.StatusCode)
	}
}

// TestDeepBodiesAreRefusedCheaply: 20,000 nested arrays (40 KB; the key
// check once cost 650 MB for them, and 100,000 ran the demo out of
// memory) sent to every route that takes a body, the emulator's control
// API included, are refused with 400, and the process allocates a few
// megabytes for all of them together, not hundreds.
func TestDeepBodiesAreRefusedCheaply(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(1, 2, 1))
	converged(t, h)
	eng, ok := h.Handler.(*gin.Engine)
	if !ok {
		t.Fatalf("the API handler is a %T, not a gin engine", h.Handler)
	}
	var paths []string
	for _, r := range eng.Routes() {
		if (r.Method == http.MethodPost || r.Method == http.MethodPut) && !strings.Contains(r.Path, "*") {
			paths = append(paths, r.Method+" "+strings.ReplaceAll(servedPath(r), ":id", "nosuch"))
		}
	}
	for _, p := range []string{"/sim/v1/flows", "/sim/v1/workloads", "/sim/v1/faults", "/sim/v1/links"} {
		paths = append(paths, "POST "+p)
	}
	if len(paths) < 8 {
		t.Fatalf("only %d routes take a body: %v", len(paths), paths)
	}
	body := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, p := range paths {
		method, path, _ := strings.Cut(p, " ")
		headers := []string{}
		if method == http.MethodPut {
			headers = []string{"If-Match", "*"}
		}
		var problem api.Problem
		if r := h.Do(t, method, path, h.OperatorToken, body, &problem, headers...); r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d (%s), want 400", p, r.StatusCode, problem.Detail)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
		t.Errorf("%d routes allocated %d MiB for %d-byte bodies (the controller's own work included)", len(paths), n>>20, len(body))
	}
}

// tally is how many of codes are ok; a code neither ok nor also fails the
// test.
func tally(t *testing.T, codes []int, ok, also int) int {
	t.Helper()
	n := 0
	for _, c := range codes {
		switch c {
		case ok:
			n++
		case also:
		default:
			t.Errorf("HTTP %d among %v, want %d or %d", c, codes, ok, also)
		}
	}
	return n
}
