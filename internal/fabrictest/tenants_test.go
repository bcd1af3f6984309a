package fabrictest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// openEvents opens /api/v1/events with token on h and returns its lines
// (closed when the stream ends).
func openEvents(t *testing.T, h *fabrictest.Harness, token string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := fabrictest.NewRequest(ctx, http.MethodGet, h.API.URL+"/api/v1/events", token, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("events: HTTP %d", resp.StatusCode)
	}
	lines := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// streamEnds waits (with a generous backstop) for a stream to end and
// says whether it announced its revocation before it did.
func streamEnds(t *testing.T, lines <-chan string) bool {
	t.Helper()
	backstop := time.After(30 * time.Second)
	revoked := false
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return revoked
			}
			revoked = revoked || l == "event: revoked"
		case <-backstop:
			t.Fatal("the event stream is still open 30 s after its token lost its authority")
			return false
		}
	}
}

// TestRevocationEndsEventStreams: an open event stream ends when its
// token is revoked or its tenant deleted, on the replica that did it and
// on another (no more of the tenant's events are delivered); a stream
// of a token still valid stays open.
func TestRevocationEndsEventStreams(t *testing.T) {
	_, a, b := twoReplicas(t, fabrictest.LeafSpine(1, 2, 1))
	tenant(t, a, "ml", 0, 0)
	tenant(t, a, "hpc", 0, 0)
	revoked, kept, other := tokenFor(t, a, "ml"), tokenFor(t, a, "ml"), tokenFor(t, a, "hpc")

	onLeader, onFollower := openEvents(t, a, revoked.Secret), openEvents(t, b, revoked.Secret)
	keptStream := openEvents(t, b, kept.Secret)
	if r := a.Do(t, "DELETE", "/api/v1/tokens/"+revoked.Token.ID, a.OperatorToken, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: HTTP %d", r.StatusCode)
	}
	if !streamEnds(t, onLeader) || !streamEnds(t, onFollower) {
		t.Error("a revoked token's stream ended without a revoked event")
	}
	if r := a.Do(t, "POST", "/api/v1/intents", kept.Secret, spec("a", "h1-1", "h2-1", 10, 40000, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("ml creates: HTTP %d", r.StatusCode)
	}
	waitEvent(t, keptStream, "the stream of a token not revoked")
	if r := b.Do(t, "GET", "/api/v1/events", revoked.Secret, nil, nil); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a new stream with the revoked token: HTTP %d, want 401", r.StatusCode)
	}

	// Deleting the tenant ends its other token's streams, not another
	// tenant's.
	otherStream := openEvents(t, b, other.Secret)
	if r := a.Do(t, "DELETE", "/api/v1/tenants/ml", a.OperatorToken, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete tenant: HTTP %d", r.StatusCode)
	}
	if !streamEnds(t, keptStream) {
		t.Error("the deleted tenant's stream ended without a revoked event")
	}
	// The other tenant's stream is open: its own intent's events come.
	if r := a.Do(t, "POST", "/api/v1/intents", other.Secret, spec("b", "h1-1", "h2-1", 10, 49152, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("hpc creates: HTTP %d", r.StatusCode)
	}
	waitEvent(t, otherStream, "another tenant's stream, after the deletion")
}

// waitEvent waits (with a generous backstop) for an intent's event on an
// open stream.
func waitEvent(t *testing.T, lines <-chan string, what string) {
	t.Helper()
	backstop := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			if strings.HasPrefix(l, "event: intent") {
				return
			}
		case <-backstop:
			t.Fatalf("%s: no intent event in 30 s", what)
		}
	}
}

// TestDeletedTenantLeavesNothing: deleting a tenant deletes its intents
// (their entries go from the switches) and every token of it in etcd;
// a tenant created again under the name starts empty, and its token
// cannot touch the old reservation.
func TestDeletedTenantLeavesNothing(t *testing.T) {
	h, tok, in := oneIntent(t, "x")
	h.Eventually(t, 30*time.Second, "the intent installed", func() bool {
		return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
	})
	// A second token, and one written to etcd by another replica that
	// this one has not cached (its watch is not needed to find it).
	tenant2 := tokenFor(t, h, "x")
	foreign, _ := json.Marshal(models.Token{ID: "00000000feedbeef", Tenant: "x", Role: models.RoleTenant})
	if _, err := h.Store.Commit(t.Context(), nil, []clientv3.Op{clientv3.OpPut(store.KeyTokens+"00000000feedbeef"+strings.Repeat("0", 48), string(foreign))}); err != nil {
		t.Fatal(err)
	}

	if r := h.Do(t, "DELETE", "/api/v1/tenants/x", h.OperatorToken, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("delete tenant: HTTP %d", r.StatusCode)
	}
	kvs, _, err := h.Store.List(t.Context(), store.KeyTokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		var tk models.Token
		if json.Unmarshal(kv.Value, &tk) == nil && tk.Tenant == "x" {
			t.Errorf("token %s of the deleted tenant is still in etcd", tk.ID)
		}
	}
	h.Eventually(t, 30*time.Second, "the deleted tenant's intent removed, with its entries", func() bool {
		r := h.Do(t, "GET", "/api/v1/intents/"+in.ID, h.OperatorToken, nil, nil)
		return r.StatusCode == http.StatusNotFound && pinsOn(t, h) == 0
	})

	// Created again, it starts empty.
	h.Eventually(t, 30*time.Second, "tenant x created again", func() bool {
		r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "x"}, nil)
		return r.StatusCode == http.StatusCreated
	})
	fresh := tokenFor(t, h, "x")
	var list api.IntentList
	h.Do(t, "GET", "/api/v1/intents", fresh.Secret, nil, &list)
	if len(list.Items) != 0 {
		t.Fatalf("the new tenant x sees %d intents, want none", len(list.Items))
	}
	if r := h.Do(t, "DELETE", "/api/v1/intents/"+in.ID, fresh.Secret, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("the new tenant deletes the old intent: HTTP %d, want 404", r.StatusCode)
	}
	for _, old := range []string{tok, tenant2.Secret} {
		if r := h.Do(t, "GET", "/api/v1/whoami", old, nil, nil); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("an old token of x: HTTP %d, want 401", r.StatusCode)
		}
	}
}

// TestOrphanedIntentsSwept: an intent whose tenant is gone from etcd
// without the API (a deletion that did not finish, an intent admitted
// beside it) is deleted by the leader's sweep.
func TestOrphanedIntentsSwept(t *testing.T) {
	h, _, in := oneIntent(t, "x")
	if err := h.Store.Delete(t.Context(), store.KeyTenants+"x"); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 60*time.Second, "the orphaned intent removed, with its entries", func() bool {
		r := h.Do(t, "GET", "/api/v1/intents/"+in.ID, h.OperatorToken, nil, nil)
		return r.StatusCode == http.StatusNotFound && pinsOn(t, h) == 0
	})
}

// pinsOn counts the flow pins programmed on h's switches (read back).
func pinsOn(t *testing.T, h *fabrictest.Harness) int {
	t.Helper()
	snap, _ := h.Controller.Snapshot()
	n := 0
	for _, sw := range snap.Switches() {
		st, err := h.Driver.Read(t.Context(), sw.Name)
		if err != nil {
			t.Fatal(err)
		}
		n += len(st.FlowPins)
	}
	return n
}

// TestHostOwnership: the operator grants hosts to tenants (hosts they may
// use) and gives hosts to hold (theirs alone). A tenant reserves (or asks capacity) only between hosts it
// may use; one host has one exclusive holder; the refusal does not name
// the holder. Before, any tenant could reserve every NIC of a rack.
func TestHostOwnership(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	put := func(tn models.Tenant) int {
		return h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, tn, nil).StatusCode
	}
	if code := put(models.Tenant{Name: "rack1", Holds: []string{"h1-*"}}); code != http.StatusCreated {
		t.Fatalf("exclusive tenant: HTTP %d", code)
	}
	if code := put(models.Tenant{Name: "squatter", Holds: []string{"h1-2"}}); code != http.StatusConflict {
		t.Fatalf("a second exclusive holder of h1-2: HTTP %d, want 409", code)
	}
	if code := put(models.Tenant{Name: "bad", Holds: []string{"h1-[x"}}); code != http.StatusUnprocessableEntity {
		t.Fatalf("a malformed pattern: HTTP %d, want 422", code)
	}
	rack1 := tokenFor(t, h, "rack1").Secret
	anyHost := tenant(t, h, "any", 0, 0)
	if code := put(models.Tenant{Name: "narrow", Hosts: []string{"h2-1"}}); code != http.StatusCreated {
		t.Fatalf("narrow tenant: HTTP %d", code)
	}
	narrow := tokenFor(t, h, "narrow").Secret

	for _, tc := range []struct {
		name, token, src, dst string
		want                  int
	}{
		{"the holder, its own host to a shared one", rack1, "h1-1", "h2-1", http.StatusCreated},
		{"another tenant, from a held host", anyHost, "h1-2", "h2-2", http.StatusForbidden},
		{"another tenant, by the held host's address", anyHost, "10.0.1.2", "h2-2", http.StatusForbidden},
		{"another tenant, between shared hosts", anyHost, "h2-1", "h2-2", http.StatusCreated},
		{"a narrow grant, outside it", narrow, "h2-1", "h2-2", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body json.RawMessage
			r := h.Do(t, "POST", "/api/v1/intents", tc.token, spec("x", tc.src, tc.dst, 1, 40000+len(tc.name), 1), &body)
			if r.StatusCode != tc.want {
				t.Fatalf("HTTP %d %s, want %d", r.StatusCode, body, tc.want)
			}
			if strings.Contains(string(body), "rack1") && tc.token != rack1 {
				t.Errorf("the refusal names the holder: %s", body)
			}
			capCode := h.Do(t, "GET", "/api/v1/capacity?src="+tc.src+"&dst="+tc.dst, tc.token, nil, nil).StatusCode
			if (tc.want == http.StatusForbidden) != (capCode == http.StatusForbidden) {
				t.Errorf("capacity between the same hosts: HTTP %d", capCode)
			}
		})
	}
}

// TestRefusalsNameNoOtherTenant: what one tenant is told when another
// tenant's intent is in its way — a flow already pinned, a preemption,
// a dry run that would preempt — names neither that intent nor its tenant
// (a 409 gives no intent ID of another tenant).
func TestRefusalsNameNoOtherTenant(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(c *stack.Config) { c.Intents.Preemption = true })
	converged(t, h)
	a := tenant(t, h, "alpha", 0, 0)
	b := tenantWith(t, h, models.Tenant{Name: "bravo", MaxPriority: 7})
	var low models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", a, spec("low", "h1-1", "h2-1", 60, 49152, 1), &low); r.StatusCode != http.StatusCreated {
		t.Fatalf("alpha: HTTP %d", r.StatusCode)
	}
	leaks := func(what, text string) {
		t.Helper()
		if strings.Contains(text, low.ID) || strings.Contains(text, "alpha") {
			t.Errorf("%s names alpha's intent: %q", what, text)
		}
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", b, spec("same", "h1-1", "h2-1", 1, 49152, 1), &p); r.StatusCode != http.StatusConflict {
		t.Fatalf("the same flow: HTTP %d, want 409", r.StatusCode)
	}
	leaks("the flow-taken refusal", p.Detail)
	high := spec("high", "h1-1", "h2-1", 60, 50000, 1)
	high.Priority = 7
	var dry api.DryRunView
	h.Do(t, "POST", "/api/v1/intents?dryRun=true", b, high, &dry)
	if len(dry.Preempts) != 1 {
		t.Fatalf("dry run: %+v, want one intent preempted", dry)
	}
	leaks("the dry run", strings.Join(dry.Preempts, " "))
	var hi models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", b, high, &hi); r.StatusCode != http.StatusCreated {
		t.Fatalf("bravo's high-priority intent: HTTP %d", r.StatusCode)
	}
	got := intentState(t, h, a, low.ID)
	if got.Status.State != models.StatePending || !strings.Contains(got.Status.Reason, "preempted by") {
		t.Fatalf("alpha's intent: %s %q, want preempted", got.Status.State, got.Status.Reason)
	}
	if strings.Contains(got.Status.Reason, hi.ID) || strings.Contains(got.Status.Reason, "bravo") {
		t.Errorf("alpha is told who preempted it: %q", got.Status.Reason)
	}
}
