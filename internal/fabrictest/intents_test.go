package fabrictest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
	"github.com/accelnet/accelnet/store/embedded"
)

// tenant creates a tenant with quotas and returns a token for it.
func tenant(t *testing.T, h *fabrictest.Harness, name string, maxGbps float64, maxIntents int) string {
	t.Helper()
	return tenantWith(t, h, models.Tenant{Name: models.TenantName(name), MaxGbps: maxGbps, MaxIntents: maxIntents})
}

// tenantWith creates tenant tn (as the operator) and returns a token of it.
func tenantWith(t *testing.T, h *fabrictest.Harness, tn models.Tenant) string {
	t.Helper()
	if r := h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, tn, nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("create tenant %s: HTTP %d", tn.Name, r.StatusCode)
	}
	return tokenFor(t, h, string(tn.Name)).Secret
}

// tokenFor issues a tenant token for the tenant name (as the operator).
func tokenFor(t *testing.T, h *fabrictest.Harness, name string) api.NewTokenView {
	t.Helper()
	var tok api.NewTokenView
	if r := h.Do(t, "POST", "/api/v1/tokens", h.OperatorToken, api.TokenRequest{Tenant: models.TenantName(name), Role: models.RoleTenant}, &tok); r.StatusCode != http.StatusCreated || tok.Secret == "" {
		t.Fatalf("token for %s: HTTP %d %+v", name, r.StatusCode, tok)
	}
	return tok
}

func spec(name, src, dst string, gbps float64, firstPort, ports int) models.IntentSpec {
	return models.IntentSpec{Name: name, Src: src, Dst: dst, Gbps: gbps,
		SrcPorts: models.PortRange{First: uint16(firstPort), Last: uint16(firstPort + ports - 1)}}
}

func intentState(t *testing.T, h *fabrictest.Harness, token, id string) models.Intent {
	t.Helper()
	var in models.Intent
	h.Do(t, "GET", "/api/v1/intents/"+id, token, nil, &in)
	return in
}

func converged(t *testing.T, h *fabrictest.Harness) {
	t.Helper()
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
}

// oneIntent is a converged 2x2x1 leaf-spine with one tenant (no quotas)
// and one 10 Gb/s intent of it from h1-1 to h2-1, admitted.
func oneIntent(t *testing.T, tenantName string) (*fabrictest.Harness, string, models.Intent) {
	t.Helper()
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 1))
	converged(t, h)
	tok := tenant(t, h, tenantName, 0, 0)
	var in models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("a", "h1-1", "h2-1", 10, 49152, 1), &in); r.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d", r.StatusCode)
	}
	return h, tok, in
}

// TestIntentLifecycle: admitted with reserved paths, installed once the
// switches confirm by read-back, traffic follows the pins, and deleting it
// removes the entries and then the record.
func TestIntentLifecycle(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	src, dst := hosts[0], hosts[2] // different leaves

	var in models.Intent
	r := h.Do(t, "POST", "/api/v1/intents", tok, spec("allreduce-a", src.Name, dst.IP.String(), 40, 49152, 4), &in)
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("create: HTTP %d %+v", r.StatusCode, in)
	}
	if in.Status.State != models.StateAdmitted || in.Tenant != "ml" || len(in.Status.Flows) != 4 || in.Revision == 0 {
		t.Fatalf("created intent: %+v", in)
	}
	if r.Header.Get("ETag") != fmt.Sprintf("%q", fmt.Sprint(in.Revision)) || r.Header.Get("Location") != "/api/v1/intents/"+in.ID {
		t.Errorf("headers: ETag %q Location %q", r.Header.Get("ETag"), r.Header.Get("Location"))
	}
	for _, f := range in.Status.Flows {
		if f.Gbps != 10 || len(f.Path) != 3 {
			t.Errorf("flow %+v: want 10 Gb/s over leaf, spine, leaf", f)
		}
	}
	h.Eventually(t, 10*time.Second, "intent Installed", func() bool {
		return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
	})
	// Every flow is forwarded by its pins, on the path the intent reports.
	for _, f := range in.Status.Flows {
		tr := h.Fabric.Trace(fabricsim.FlowSpec{Src: src.IP, Dst: dst.IP, SrcPort: f.SrcPort, DemandGbps: 1})
		if !tr.Delivered || len(tr.Hops) != len(f.Path) {
			t.Fatalf("trace of port %d: %+v", f.SrcPort, tr)
		}
		for i, hop := range tr.Hops {
			if !hop.Pinned || hop.Switch != f.Path[i].Switch || hop.OutPort != f.Path[i].Port {
				t.Errorf("port %d hop %d: %+v, intent says %v", f.SrcPort, i, hop, f.Path[i])
			}
		}
	}
	// Traffic on the intent's flows shows up as its observed rate, read
	// from the first-hop pins' counters.
	var specs []fabricsim.FlowSpec
	for _, f := range in.Status.Flows {
		specs = append(specs, fabricsim.FlowSpec{Src: src.IP, Dst: dst.IP, SrcPort: f.SrcPort, DemandGbps: 10})
	}
	if _, err := h.Fabric.AddFlows(specs); err != nil {
		t.Fatal(err)
	}
	var observed float64
	h.Eventually(t, 10*time.Second, "observed rate near the 40 Gb/s offered", func() bool {
		observed = intentState(t, h, tok, in.ID).Status.ObservedGbps
		return observed > 36 && observed < 44
	})
	var c api.Capacity
	h.Do(t, "GET", "/api/v1/capacity?src="+src.Name+"&dst="+dst.Name, tok, nil, &c)
	if c.AvailableGbps > 95-40+1e-9 || c.Bottleneck == "" {
		t.Errorf("capacity after reserving 40 of 95 reservable: %+v", c)
	}

	var del models.Intent
	if r := h.Do(t, "DELETE", "/api/v1/intents/"+in.ID, tok, nil, &del); r.StatusCode != http.StatusOK || del.Status.State != models.StateDeleted {
		t.Fatalf("delete: HTTP %d %+v", r.StatusCode, del)
	}
	h.Eventually(t, 10*time.Second, "deleted intent's record removed", func() bool {
		return h.Do(t, "GET", "/api/v1/intents/"+in.ID, tok, nil, nil).StatusCode == http.StatusNotFound
	})
	if n := pinsOn(t, h); n != 0 {
		t.Errorf("%d flow pins still on the switches after the delete", n)
	}
	h.Do(t, "GET", "/api/v1/capacity?src="+src.Name+"&dst="+dst.Name, tok, nil, &c)
	if c.AvailableGbps < 95-1e-9 {
		t.Errorf("capacity after the delete: %+v, want 95 back", c)
	}
}

// TestTenantIsolation: tenant B cannot list, read, modify, delete or watch
// tenant A's intents, nor act as A or as an operator.
func TestTenantIsolation(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	a := tenant(t, h, "team-a", 0, 0)
	b := tenant(t, h, "team-b", 0, 0)
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()

	// B watches events from before A's intent exists.
	lines := openEvents(t, h, b)

	var ina models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", a, spec("a-job", hosts[0].Name, hosts[2].Name, 10, 50000, 1), &ina); r.StatusCode != http.StatusCreated {
		t.Fatalf("A creates: HTTP %d", r.StatusCode)
	}
	var inb models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", b, spec("b-job", hosts[1].Name, hosts[3].Name, 10, 50000, 1), &inb); r.StatusCode != http.StatusCreated {
		t.Fatalf("B creates: HTTP %d", r.StatusCode)
	}
	path := "/api/v1/intents/" + ina.ID
	for _, c := range []struct {
		name, method, path string
		body               any
		headers            []string
		want               int
	}{
		{"read", "GET", path, nil, nil, http.StatusNotFound},
		{"modify", "PUT", path, spec("mine", hosts[0].Name, hosts[2].Name, 1, 50000, 1), []string{"If-Match", fmt.Sprint(ina.Revision)}, http.StatusNotFound},
		{"delete", "DELETE", path, nil, nil, http.StatusNotFound},
		{"list A's", "GET", "/api/v1/intents?tenant=team-a", nil, nil, http.StatusForbidden},
		{"create as A", "POST", "/api/v1/intents", api.IntentRequest{Tenant: "team-a", IntentSpec: spec("x", hosts[0].Name, hosts[2].Name, 1, 50001, 1)}, nil, http.StatusForbidden},
		{"make tokens", "POST", "/api/v1/tokens", api.TokenRequest{Tenant: "team-a", Role: models.RoleTenant}, nil, http.StatusForbidden},
		{"list tenants", "GET", "/api/v1/tenants", nil, nil, http.StatusForbidden},
		{"read entries", "GET", "/api/v1/switches/leaf1/entries", nil, nil, http.StatusForbidden},
	} {
		var p api.Problem
		if r := h.Do(t, c.method, c.path, b, c.body, &p, c.headers...); r.StatusCode != c.want || p.Status != c.want {
			t.Errorf("B %s: HTTP %d (%+v), want %d", c.name, r.StatusCode, p, c.want)
		}
	}
	var list api.IntentList
	h.Do(t, "GET", "/api/v1/intents", b, nil, &list)
	if len(list.Items) != 1 || list.Items[0].ID != inb.ID {
		t.Errorf("B lists %+v, want only its own", list.Items)
	}
	if got := intentState(t, h, a, ina.ID); got.Status.State == "" || got.Spec.Name != "a-job" {
		t.Errorf("A's intent changed: %+v", got)
	}
	h.Do(t, "GET", "/api/v1/intents", h.OperatorToken, nil, &list)
	if len(list.Items) != 2 {
		t.Errorf("the operator lists %d intents, want 2", len(list.Items))
	}
	// B's stream carries B's intent and never A's.
	deadline := time.After(10 * time.Second)
	sawB := false
	for !sawB {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended")
			}
			if strings.Contains(l, ina.ID) || strings.Contains(l, "team-a") {
				t.Fatalf("B saw A's event: %s", l)
			}
			sawB = sawB || strings.Contains(l, inb.ID)
		case <-deadline:
			t.Fatal("B never saw its own intent's event")
		}
	}
}

// TestAdmissionRace: many tenants race for the last of a link's capacity;
// exactly the requests that fit are admitted, never more.
func TestAdmissionRace(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	dst := hosts[3].Name // its 100G port (95 reservable) is the bottleneck
	tokens := []string{tenant(t, h, "red", 0, 0), tenant(t, h, "blue", 0, 0)}
	const racers = 16
	codes := make([]int, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			src := hosts[i%3].Name
			codes[i] = h.Do(t, "POST", "/api/v1/intents", tokens[i%2], spec(fmt.Sprint("racer-", i), src, dst, 60, 40000+i, 1), nil).StatusCode
		})
	}
	wg.Wait()
	won := 0
	for i, c := range codes {
		switch c {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
		default:
			t.Errorf("racer %d: HTTP %d", i, c)
		}
	}
	if won != 1 {
		t.Fatalf("%d racers got 60 Gb/s of the 95 reservable toward %s, want exactly 1", won, dst)
	}
	var rejected api.IntentList
	h.Do(t, "GET", "/api/v1/intents?state=Rejected", h.OperatorToken, nil, &rejected)
	if len(rejected.Items) != racers-1 {
		t.Fatalf("%d rejected intents stored, want %d", len(rejected.Items), racers-1)
	}
	if !strings.Contains(rejected.Items[0].Status.Reason, "reservable") {
		t.Errorf("rejection reason %q does not say what is reservable", rejected.Items[0].Status.Reason)
	}
}

// TestQuotaUnderConcurrency: a tenant's quotas hold when its requests race.
func TestQuotaUnderConcurrency(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 4, 4))
	converged(t, h)
	tok := tenant(t, h, "capped", 1000, 5)
	snap, _ := h.Controller.Snapshot()
	hosts := snap.Hosts()
	codes := make([]int, 20)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			codes[i] = h.Do(t, "POST", "/api/v1/intents", tok, spec(fmt.Sprint("q", i), hosts[i%8].Name, hosts[8+i%8].Name, 1, 30000+i, 1), nil).StatusCode
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[http.StatusCreated] != 5 || count[http.StatusForbidden] != 15 {
		t.Fatalf("outcomes %v, want 5 created and 15 refused by the 5-intent quota", count)
	}
	// The gigabit quota: 1000 allowed, 5 used, 996 more is over.
	h.Do(t, "POST", "/api/v1/tenants", h.OperatorToken, models.Tenant{Name: "capped", MaxGbps: 20, MaxIntents: 100}, nil)
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("big", hosts[0].Name, hosts[9].Name, 16, 31000, 1), &p); r.StatusCode != http.StatusForbidden || !strings.Contains(p.Detail, "quota") {
		t.Errorf("over the Gb/s quota: HTTP %d %+v", r.StatusCode, p)
	}
	var tv api.TenantView
	h.Do(t, "GET", "/api/v1/tenants/capped", h.OperatorToken, nil, &tv)
	if tv.LiveIntents != 5 || tv.ReservedGbps != 5 {
		t.Errorf("tenant usage %+v, want 5 intents and 5 Gb/s", tv)
	}
}

// TestIntentRequestsRefusedCleanly: bad requests get the right status, a
// problem document naming the field, and change nothing.
func TestIntentRequestsRefusedCleanly(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	good := spec("ok", "h1-1", "h2-1", 10, 49152, 1)
	for _, c := range []struct {
		name  string
		token string
		body  any
		want  int
		field string
	}{
		{"no token", "", good, http.StatusUnauthorized, ""},
		{"unknown token", "anet_nope", good, http.StatusUnauthorized, ""},
		{"malformed JSON", tok, `{"name": "x",`, http.StatusBadRequest, ""},
		{"unknown field", tok, `{"name":"x","src":"h1-1","dst":"h2-1","gbps":1,"src_ports":{"first":1,"last":1},"colour":"red"}`, http.StatusBadRequest, ""},
		{"wrong type", tok, `{"name":"x","src":"h1-1","dst":"h2-1","gbps":"lots","src_ports":{"first":1,"last":1}}`, http.StatusBadRequest, "gbps"},
		{"trailing data", tok, `{"name":"x"} {}`, http.StatusBadRequest, ""},
		{"no ports", tok, models.IntentSpec{Name: "x", Src: "h1-1", Dst: "h2-1", Gbps: 1}, http.StatusUnprocessableEntity, "src_ports"},
		{"negative bandwidth", tok, spec("x", "h1-1", "h2-1", -5, 1, 1), http.StatusUnprocessableEntity, "gbps"},
		{"unknown host", tok, spec("x", "h1-1", "nosuch", 1, 1, 1), http.StatusUnprocessableEntity, "dst"},
		{"unknown switch", tok, func() models.IntentSpec {
			s := spec("x", "h1-1", "h2-1", 1, 1, 1)
			s.Constraints.AvoidSwitches = []models.SwitchID{"spine9"}
			return s
		}(), http.StatusUnprocessableEntity, "constraints.avoid_switches[0]"},
		{"destination QPs", tok, func() models.IntentSpec { s := spec("x", "h1-1", "h2-1", 1, 1, 1); s.DstQPs = []uint32{7}; return s }(), http.StatusUnprocessableEntity, "dst_qps"},
		{"impossible bandwidth", tok, spec("x", "h1-1", "h2-1", 500, 1, 1), http.StatusConflict, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p api.Problem
			r := h.Do(t, "POST", "/api/v1/intents", c.token, c.body, &p)
			if r.StatusCode != c.want || p.Status != c.want || r.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("HTTP %d %q %+v, want %d", r.StatusCode, r.Header.Get("Content-Type"), p, c.want)
			}
			if c.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != c.field) {
				t.Errorf("errors %+v, want one for %q", p.Errors, c.field)
			}
		})
	}
	var list api.IntentList
	h.Do(t, "GET", "/api/v1/intents", tok, nil, &list)
	if len(list.Items) != 1 || list.Items[0].Status.State != models.StateRejected {
		t.Errorf("stored %+v; want only the Rejected impossible one", list.Items)
	}
	if gbps, n := h.Intents.Usage("ml"); gbps != 0 || n != 0 {
		t.Errorf("refused requests reserved %v Gb/s in %d intents", gbps, n)
	}
}

// TestIdempotencyDryRunAndIfMatch: a retried create returns the first
// result; a dry run answers without reserving; updates need the current
// revision.
func TestIdempotencyDryRunAndIfMatch(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	body := spec("retry-me", "h1-1", "h2-1", 30, 49152, 2)
	var first, second models.Intent
	r1 := h.Do(t, "POST", "/api/v1/intents", tok, body, &first, "Idempotency-Key", "k-1")
	r2 := h.Do(t, "POST", "/api/v1/intents", tok, body, &second, "Idempotency-Key", "k-1")
	if r1.StatusCode != 201 || r2.StatusCode != 201 || first.ID != second.ID || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %d, ids %s %s", r1.StatusCode, r2.StatusCode, first.ID, second.ID)
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("other", "h1-1", "h2-1", 5, 50000, 1), &p, "Idempotency-Key", "k-1"); r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: HTTP %d %+v", r.StatusCode, p)
	}
	if gbps, n := h.Intents.Usage("ml"); gbps != 30 || n != 1 {
		t.Errorf("after a retried create: %v Gb/s in %d intents, want 30 in 1", gbps, n)
	}

	var dry api.DryRunView
	if r := h.Do(t, "POST", "/api/v1/intents?dryRun=true", tok, spec("what-if", "h1-2", "h2-2", 50, 51000, 1), &dry); r.StatusCode != 200 || !dry.Fits || len(dry.Paths) != 1 || dry.MLU <= 0 {
		t.Errorf("dry run: HTTP %d %+v", r.StatusCode, dry)
	}
	h.Do(t, "POST", "/api/v1/intents?dryRun=true", tok, spec("too-much", "h1-2", "h2-1", 90, 51000, 1), &dry)
	if dry.Fits || dry.Bottleneck == "" || dry.Reason == "" {
		t.Errorf("dry run over capacity: %+v", dry)
	}
	if gbps, n := h.Intents.Usage("ml"); gbps != 30 || n != 1 {
		t.Errorf("dry runs reserved: %v Gb/s in %d intents", gbps, n)
	}

	path := "/api/v1/intents/" + first.ID
	bigger := spec("retry-me", "h1-1", "h2-1", 60, 49152, 2)
	if r := h.Do(t, "PUT", path, tok, bigger, &p); r.StatusCode != http.StatusPreconditionRequired {
		t.Errorf("PUT without If-Match: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "PUT", path, tok, bigger, &p, "If-Match", `"1"`); r.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("PUT with a stale If-Match: HTTP %d", r.StatusCode)
	}
	// Status changes move the revision too: read it once the intent settled.
	var cur models.Intent
	h.Eventually(t, 10*time.Second, "intent installed", func() bool {
		cur = intentState(t, h, tok, first.ID)
		return cur.Status.State == models.StateInstalled
	})
	var updated models.Intent
	if r := h.Do(t, "PUT", path, tok, bigger, &updated, "If-Match", fmt.Sprintf("%q", fmt.Sprint(cur.Revision))); r.StatusCode != 200 || updated.Spec.Gbps != 60 || updated.Revision <= cur.Revision {
		t.Fatalf("PUT: HTTP %d %+v", r.StatusCode, updated)
	}
	if gbps, _ := h.Intents.Usage("ml"); gbps != 60 {
		t.Errorf("after the update %v Gb/s reserved, want 60", gbps)
	}
	// An update that cannot fit is refused and the intent stays as it was.
	h.Eventually(t, 10*time.Second, "updated intent installed", func() bool {
		cur = intentState(t, h, tok, first.ID)
		return cur.Status.State == models.StateInstalled
	})
	if r := h.Do(t, "PUT", path, tok, spec("retry-me", "h1-1", "h2-1", 200, 49152, 2), &p, "If-Match", fmt.Sprint(cur.Revision)); r.StatusCode != http.StatusConflict {
		t.Errorf("PUT over capacity: HTTP %d %+v", r.StatusCode, p)
	}
	if got := intentState(t, h, tok, first.ID); got.Spec.Gbps != 60 || got.Revision != cur.Revision || !got.Status.State.Live() {
		t.Errorf("a refused update changed the intent: %+v", got)
	}
	// The key lives as long as its intent.
	h.Do(t, "DELETE", path, tok, nil, nil)
	h.Eventually(t, 10*time.Second, "deleted intent gone", func() bool {
		return h.Do(t, "GET", path, tok, nil, nil).StatusCode == http.StatusNotFound
	})
	var again models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, body, &again, "Idempotency-Key", "k-1"); r.StatusCode != 201 || again.ID == first.ID || r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the key after its intent was deleted: HTTP %d, id %s (first %s)", r.StatusCode, again.ID, first.ID)
	}
}

// TestIntentRerouteAndDegrade: when a link on an intent's path fails, it
// moves to a working path if there is room, and goes Degraded with the
// reason when there is none; when the link returns it is restored.
func TestIntentRerouteAndDegrade(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var a, b models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("a", "h1-1", "h2-1", 60, 49152, 1), &a)
	h.Do(t, "POST", "/api/v1/intents", tok, spec("b", "h1-2", "h2-2", 60, 49152, 1), &b)
	if a.Status.Flows[0].Path[0] == b.Status.Flows[0].Path[0] {
		t.Fatalf("two 60G intents share an uplink: %v %v", a.Status.Flows[0].Path, b.Status.Flows[0].Path)
	}
	snap, _ := h.Controller.Snapshot()
	up, _ := snap.LinkAt(a.Status.Flows[0].Path[0])
	if err := h.Fabric.SetLinkUp(up.ID(), false); err != nil {
		t.Fatal(err)
	}
	// Only one of them fits on the remaining spine: the other degrades.
	var states map[string]models.IntentState
	h.Eventually(t, 10*time.Second, "one intent moved, one degraded", func() bool {
		ga, gb := intentState(t, h, tok, a.ID), intentState(t, h, tok, b.ID)
		states = map[string]models.IntentState{"a": ga.Status.State, "b": gb.Status.State}
		return (ga.Status.State == models.StateDegraded) != (gb.Status.State == models.StateDegraded) &&
			(ga.Status.State == models.StateInstalled || gb.Status.State == models.StateInstalled)
	})
	for _, id := range []string{a.ID, b.ID} {
		in := intentState(t, h, tok, id)
		if in.Status.State == models.StateDegraded && !strings.Contains(in.Status.Reason, "went down") {
			t.Errorf("degraded reason: %q", in.Status.Reason)
		}
		for _, f := range in.Status.Flows {
			for _, e := range f.Path {
				if l, ok := snap.LinkAt(e); ok && l.ID() == up.ID() {
					t.Errorf("%s still routed over the failed link: %v", id, f.Path)
				}
			}
		}
	}
	if err := h.Fabric.SetLinkUp(up.ID(), true); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 10*time.Second, "both installed again", func() bool {
		return intentState(t, h, tok, a.ID).Status.State == models.StateInstalled &&
			intentState(t, h, tok, b.ID).Status.State == models.StateInstalled
	})
	_ = states
}

// TestPreemptionAndCollectives: a higher-priority collective displaces a
// lower-priority intent when the operator allows it; the displaced one
// waits in Pending with the reason.
func TestPreemptionAndCollectives(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) { o.Intents.Preemption = true })
	converged(t, h)
	tok := tenantWith(t, h, models.Tenant{Name: "ml", MaxPriority: 7})
	var low models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("low", "h1-1", "h2-1", 80, 49152, 1), &low)
	ring := models.IntentSpec{Name: "ring", Priority: 5, SrcPorts: models.PortRange{First: 60000, Last: 60001},
		Collective: &models.Collective{Pattern: models.PatternRingAllReduce, Endpoints: []string{"h1-1", "h2-1", "h1-2", "h2-2"}, GbpsPerGPU: 50}}
	var dry api.DryRunView
	h.Do(t, "POST", "/api/v1/intents?dryRun=true", tok, ring, &dry)
	if !dry.Fits || len(dry.Preempts) != 1 || dry.Preempts[0] != low.ID {
		t.Fatalf("dry run of the ring: %+v", dry)
	}
	var in models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, ring, &in); r.StatusCode != http.StatusCreated || len(in.Status.Flows) != 8 {
		t.Fatalf("ring: HTTP %d %+v", r.StatusCode, in.Status)
	}
	got := intentState(t, h, tok, low.ID)
	if got.Status.State != models.StatePending || !strings.Contains(got.Status.Reason, "preempted by "+in.ID) {
		t.Errorf("low-priority intent: %+v", got.Status)
	}
	// No resource carries more than it can: reservations add up per link.
	load := map[string]float64{}
	for _, f := range in.Status.Flows {
		for _, e := range f.Path {
			load[e.String()] += f.Gbps
		}
	}
	for r, g := range load {
		if g > 95+1e-9 {
			t.Errorf("%s reserved %v Gb/s", r, g)
		}
	}
	// Deleting the ring lets the pending one back in.
	h.Do(t, "DELETE", "/api/v1/intents/"+in.ID, tok, nil, nil)
	h.Eventually(t, 10*time.Second, "preempted intent admitted again", func() bool {
		return intentState(t, h, tok, low.ID).Status.State == models.StateInstalled
	})
}

// TestOperatorTokenBootstrap: the first start writes the operator token
// (0600) once; a restart on the same etcd issues none.
func TestOperatorTokenBootstrap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "operator.token")
	topo := fabrictest.LeafSpine(1, 2, 1)
	for round := range 2 {
		s, err := stack.New(context.Background(), stack.Config{Topology: &topo, Etcd: stack.Etcd{Dir: filepath.Join(dir, "etcd")}, OperatorTokenFile: file,
			DiscoveryInterval: stack.DefaultDiscoveryInterval, LivenessInterval: controller.DefaultLivenessInterval})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			data, err := os.ReadFile(file)
			fi, _ := os.Stat(file)
			if err != nil || s.OperatorToken == "" || strings.TrimSpace(string(data)) != s.OperatorToken || fi.Mode().Perm() != 0o600 {
				t.Errorf("first start: token %q, file %q %v mode %v", s.OperatorToken, data, err, fi.Mode())
			}
			tok, err := s.Auth.Authenticate(context.Background(), s.OperatorToken, nil)
			if err != nil || tok.Role != models.RoleOperator {
				t.Errorf("bootstrap token: %+v %v", tok, err)
			}
		} else if s.OperatorToken != "" {
			t.Errorf("second start issued another operator token")
		}
		s.Close()
	}
}

// TestRateLimit: a token that sends too fast gets 429 with Retry-After.
func TestRateLimit(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *stack.Config) { o.APIRateLimit = 2 })
	got429 := false
	for range 10 {
		r := h.Do(t, "GET", "/api/v1/whoami", h.OperatorToken, nil, nil)
		if r.StatusCode == http.StatusTooManyRequests {
			got429 = r.Header.Get("Retry-After") != ""
			break
		}
	}
	if !got429 {
		t.Error("10 requests at once under a 2/s limit (burst 4) were never limited")
	}
}

// TestEtcdDown: with etcd gone, writes get 503 with a clear message,
// reads still answer, and the switches keep their entries; when etcd
// returns (same address), writes work again. The etcd is outside the
// stack, as --etcd-endpoints gives it: one that can come back.
func TestEtcdDown(t *testing.T) {
	etcd, err := embedded.Start(t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) {
		o.Etcd = stack.Etcd{Endpoints: etcd.Endpoints, TLS: etcd.Client}
	})
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	var a models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("before", "h1-1", "h2-1", 20, 49152, 1), &a)
	h.Eventually(t, 10*time.Second, "installed", func() bool { return intentState(t, h, tok, a.ID).Status.State == models.StateInstalled })

	writesBefore := h.Fabric.WriteRPCs()
	addr := etcd.Endpoints[0]
	dir := etcd.Dir()
	etcd.Close()
	var p api.Problem
	r := h.Do(t, "POST", "/api/v1/intents", tok, spec("during", "h1-2", "h2-2", 20, 49152, 1), &p)
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "etcd") {
		t.Fatalf("create with etcd down: HTTP %d %+v", r.StatusCode, p)
	}
	if got := intentState(t, h, tok, a.ID); got.Status.State != models.StateInstalled {
		t.Errorf("the stored intent changed while etcd was down: %+v", got.Status)
	}
	// Unable to prove it still leads, the controller stops programming:
	// the switches keep what they have, untouched.
	if got := h.Switch("leaf1").Entries("Ingress.flow_pin"); got != 1 {
		t.Errorf("leaf1 has %d flow pins with etcd down, want 1", got)
	}
	if w := h.Fabric.WriteRPCs(); w != writesBefore {
		t.Errorf("%d writes to the switches while etcd was down", w-writesBefore)
	}

	if etcd, err = embedded.Start(dir, addr, nil); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "writes accepted again", func() bool {
		// A try that timed out may have committed anyway; the controller
		// then reloads from etcd and a retry finds the flow taken by it.
		code := h.Do(t, "POST", "/api/v1/intents", tok, spec("after", "h1-2", "h2-2", 20, 49152, 1), nil).StatusCode
		return code == http.StatusCreated || code == http.StatusConflict
	})
	var list api.IntentList
	h.Do(t, "GET", "/api/v1/intents", tok, nil, &list)
	if len(list.Items) != 2 {
		t.Errorf("%d intents after etcd returned, want 2 (before and after; the refused one stored nothing)", len(list.Items))
	}
}

// TestIntentConstraints: avoid a switch, stay disjoint from another
// intent, bound the hops; an all-to-all collective is placed whole.
func TestIntentConstraints(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	snap, _ := h.Controller.Snapshot()
	linksOf := func(in models.Intent) map[models.LinkID]bool {
		out := map[models.LinkID]bool{}
		for _, f := range in.Status.Flows {
			for _, e := range f.Path {
				if l, ok := snap.LinkAt(e); ok {
					out[l.ID()] = true
				}
			}
		}
		return out
	}
	avoid := spec("avoid", "h1-1", "h2-1", 10, 49152, 2)
	avoid.Constraints.AvoidSwitches = []models.SwitchID{"spine1"}
	var a models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, avoid, &a); r.StatusCode != http.StatusCreated {
		t.Fatalf("avoid spine1: HTTP %d", r.StatusCode)
	}
	for _, f := range a.Status.Flows {
		if f.Path[1].Switch == "spine1" {
			t.Errorf("flow crosses the avoided spine1: %v", f.Path)
		}
	}
	disjoint := spec("disjoint", "h1-2", "h2-2", 10, 49152, 1)
	disjoint.Constraints.DisjointFrom = a.ID
	var d models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, disjoint, &d); r.StatusCode != http.StatusCreated {
		t.Fatalf("disjoint: HTTP %d", r.StatusCode)
	}
	for l := range linksOf(d) {
		if linksOf(a)[l] {
			t.Errorf("disjoint intent shares %s with %s", l, a.ID)
		}
	}
	short := spec("short", "h1-1", "h2-2", 1, 50000, 1)
	short.Constraints.MaxHops = 2
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, short, &p); r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "constraints") {
		t.Errorf("2 switches across leaves: HTTP %d %+v", r.StatusCode, p)
	}
	a2a := models.IntentSpec{Name: "a2a", SrcPorts: models.PortRange{First: 51000, Last: 51000},
		Collective: &models.Collective{Pattern: models.PatternAllToAll, Endpoints: []string{"h1-1", "h1-2", "h2-1", "h2-2"}, GbpsPerGPU: 30}}
	var c models.Intent
	if r := h.Do(t, "POST", "/api/v1/intents", tok, a2a, &c); r.StatusCode != http.StatusCreated || len(c.Status.Flows) != 12 {
		t.Fatalf("all-to-all of 4: HTTP %d, %d flows", r.StatusCode, len(c.Status.Flows))
	}
	for _, f := range c.Status.Flows {
		if f.Gbps != 10 {
			t.Errorf("all-to-all flow %s→%s: %v Gb/s, want 30/3", f.Src, f.Dst, f.Gbps)
		}
	}
}

// TestPendingTimesOut: an intent preempted with nowhere to go waits in
// Pending, then fails with the reason when the timeout passes.
func TestPendingTimesOut(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *stack.Config) {
		o.Intents.Preemption, o.Intents.PendingTimeout = true, 500*time.Millisecond
	})
	converged(t, h)
	tok := tenantWith(t, h, models.Tenant{Name: "ml", MaxPriority: 7})
	var low, high models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("low", "h1-1", "h2-1", 80, 49152, 1), &low)
	high7 := spec("high", "h1-1", "h2-1", 80, 49153, 1)
	high7.Priority = 7
	if r := h.Do(t, "POST", "/api/v1/intents", tok, high7, &high); r.StatusCode != http.StatusCreated {
		t.Fatalf("high priority: HTTP %d", r.StatusCode)
	}
	h.Eventually(t, 10*time.Second, "the preempted intent failed", func() bool {
		return intentState(t, h, tok, low.ID).Status.State == models.StateFailed
	})
	got := intentState(t, h, tok, low.ID)
	if !strings.Contains(got.Status.Reason, "pending for over") || !strings.Contains(got.Status.Reason, "preempted by") {
		t.Errorf("reason %q", got.Status.Reason)
	}
	if gbps, n := h.Intents.Usage("ml"); gbps != 80 || n != 1 {
		t.Errorf("after the failure %v Gb/s in %d intents, want only the high one", gbps, n)
	}
}

// TestProgrammingFailureReported: while a switch on its path refuses
// writes, an intent stays Admitted with the reason; it is Installed once
// the switch takes them.
func TestProgrammingFailureReported(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultWriteError, Target: "leaf2", Code: "RESOURCE_EXHAUSTED"}); err != nil {
		t.Fatal(err)
	}
	var in models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("blocked", "h1-1", "h2-1", 10, 49152, 1), &in)
	h.Eventually(t, 10*time.Second, "the failure in the intent's reason", func() bool {
		got := intentState(t, h, tok, in.ID)
		return got.Status.State == models.StateAdmitted && strings.Contains(got.Status.Reason, "programming leaf2 failed") &&
			strings.Contains(got.Status.Reason, "ResourceExhausted")
	})
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultWriteError, Target: "leaf2", Code: ""}); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 30*time.Second, "installed once leaf2 takes the entries", func() bool {
		return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
	})
}

// TestIntentMovesOffHotLink: when other traffic makes an installed
// intent's link hot, the intent moves to the cooler spine, gets its rate,
// and then stays put (no ping-pong).
func TestIntentMovesOffHotLink(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	snap, _ := h.Controller.Snapshot()
	src, dst := snap.Hosts()[0], snap.Hosts()[2] // h1-1 → h2-1
	var a models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("a", src.Name, dst.Name, 40, 49152, 1), &a)
	h.Eventually(t, 10*time.Second, "installed", func() bool { return intentState(t, h, tok, a.ID).Status.State == models.StateInstalled })
	uplink := a.Status.Flows[0].Path[0]
	first := a.Status.Flows[0].Path[1].Switch
	// Background traffic between the other hosts, hashed onto the same uplink.
	bgSrc, bgDst := snap.Hosts()[1], snap.Hosts()[3]
	var bg fabricsim.FlowSpec
	for port := uint16(50000); port < 50200; port++ {
		s := fabricsim.FlowSpec{Src: bgSrc.IP, Dst: bgDst.IP, SrcPort: port, DemandGbps: 90}
		if tr := h.Fabric.Trace(s); len(tr.Hops) > 0 && tr.Hops[0].OutPort == uplink.Port {
			bg = s
			break
		}
	}
	if bg.SrcPort == 0 {
		t.Fatal("no source port hashes onto the intent's uplink")
	}
	if _, err := h.Fabric.AddFlows([]fabricsim.FlowSpec{bg, {Src: src.IP, Dst: dst.IP, SrcPort: 49152, DemandGbps: 40}}); err != nil {
		t.Fatal(err)
	}
	var moved models.Intent
	h.Eventually(t, 20*time.Second, "the intent moved to the other spine and installed", func() bool {
		moved = intentState(t, h, tok, a.ID)
		return moved.Status.State == models.StateInstalled && moved.Status.Flows[0].Path[1].Switch != first
	})
	if !slices.ContainsFunc(moved.Status.Events, func(e models.IntentEvent) bool { return strings.Contains(e.Reason, "cooler path") }) {
		t.Errorf("events do not say why it moved: %+v", moved.Status.Events)
	}
	h.Eventually(t, 10*time.Second, "the intent gets its 40 Gb/s", func() bool {
		return intentState(t, h, tok, a.ID).Status.ObservedGbps > 36
	})
	// Several adapt rounds later it has not moved back.
	events := len(intentState(t, h, tok, a.ID).Status.Events)
	forAdaptRounds(t, h, 6, func() {
		got := intentState(t, h, tok, a.ID)
		if got.Status.Flows[0].Path[1].Switch == first || len(got.Status.Events) != events {
			t.Fatalf("the intent moved again: %+v", got.Status.Events)
		}
	})
}

// forAdaptRounds runs check after each of the intent manager's next n
// adapt rounds: a check that something does not happen, counted in rounds
// (a busy machine runs fewer per second), with a generous backstop.
func forAdaptRounds(t *testing.T, h *fabrictest.Harness, n int, check func()) {
	t.Helper()
	start := h.Intents.Stats().AdaptRounds
	deadline := time.Now().Add(2 * time.Minute)
	for seen := start; seen < start+n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d adapt rounds did not run in 2 minutes (%d did)", n, seen-start)
		}
		<-time.After(50 * time.Millisecond)
		if r := h.Intents.Stats().AdaptRounds; r != seen {
			seen = r
			check()
		}
	}
}

// lockedBuffer is a log sink safe for the stack's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSecretsNeverLogged: with every log level on, issuing and using
// tokens (good and bad) writes no secret to the log.
func TestSecretsNeverLogged(t *testing.T) {
	var logs lockedBuffer
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *stack.Config) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	h.Do(t, "POST", "/api/v1/intents", tok, spec("x", "h1-1", "h2-1", 10, 49152, 1), nil)
	h.Do(t, "GET", "/api/v1/intents", "anet_not-a-real-token", nil, nil)
	h.Do(t, "GET", "/api/v1/whoami", tok, nil, nil)
	out := logs.String()
	if out == "" {
		t.Fatal("nothing was logged: the check would prove nothing")
	}
	for _, secret := range []string{tok, h.OperatorToken, "anet_not-a-real-token"} {
		if strings.Contains(out, secret) {
			t.Errorf("a token secret appears in the log")
		}
	}
}

// TestRefusedPinsTakenBack: a switch with less flow-pin room than its
// P4Info says refuses the entries past it, update by update. The intents
// it took are Installed regardless; those it refused are taken back
// (Pending, with the switch's reason, flows on the routes) instead of
// being retried forever; further intents through it are refused at
// admission; freeing room lets a waiting one in.
func TestRefusedPinsTakenBack(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 4))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultTableSize, Target: "leaf1", Table: p4.TableFlowPin, Size: 2}); err != nil {
		t.Fatal(err)
	}
	// leaf1 is slow to take writes while the four are admitted: none of
	// them reaches it (and is refused) before the last is admitted.
	h.Switch("leaf1").SetWriteDelay(2 * time.Second)
	var ids []string
	for i := range 4 {
		var in models.Intent
		if r := h.Do(t, "POST", "/api/v1/intents", tok, spec(fmt.Sprintf("i%d", i), fmt.Sprintf("h1-%d", i+1), "h2-1", 10, 49152, 1), &in); r.StatusCode != http.StatusCreated {
			t.Fatalf("create %d: HTTP %d", i, r.StatusCode)
		}
		ids = append(ids, in.ID)
	}
	h.Switch("leaf1").SetWriteDelay(0)
	states := func() (installed, pending []models.Intent) {
		for _, id := range ids {
			in := intentState(t, h, tok, id)
			switch in.Status.State {
			case models.StateInstalled:
				installed = append(installed, in)
			case models.StatePending:
				pending = append(pending, in)
			}
		}
		return
	}
	h.Eventually(t, 20*time.Second, "two installed, two taken back", func() bool {
		inst, pend := states()
		return len(inst) == 2 && len(pend) == 2
	})
	_, pend := states()
	for _, in := range pend {
		if !strings.Contains(in.Status.Reason, "leaf1 refused") || !strings.Contains(in.Status.Reason, "ResourceExhausted") || len(in.Status.ReservedGbps) != 0 {
			t.Errorf("taken-back intent %s: reason %q, reserved %v", in.ID, in.Status.Reason, in.Status.ReservedGbps)
		}
	}
	if got := h.Switch("leaf1").Entries(p4.TableFlowPin); got != 2 {
		t.Errorf("leaf1 holds %d flow pins, want 2", got)
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("more", "h1-1", "h2-2", 10, 50000, 1), &p); r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "leaf1") {
		t.Errorf("another intent through full leaf1: HTTP %d %q, want 409 naming leaf1", r.StatusCode, p.Detail)
	}

	// Room again: one installed intent goes, a waiting one comes in.
	inst, _ := states()
	if r := h.Do(t, "DELETE", "/api/v1/intents/"+inst[0].ID, tok, nil, nil); r.StatusCode >= 300 {
		t.Fatalf("delete: HTTP %d", r.StatusCode)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == inst[0].ID })
	h.Eventually(t, 30*time.Second, "a waiting intent installed in the freed room", func() bool {
		inst, pend := states()
		return len(inst) == 2 && len(pend) == 1
	})
}

// TestMovedIntentFlowsPlacedTogether: an intent's two flows sit on two
// hot spines and a third spine is cool but has room for only one of
// them (another intent reserved the rest). Moving off hot links checks
// room for the intent's flows together: one flow moves, the other stays,
// and no link direction is ever reserved beyond its capacity less the
// headroom (the harness fails the test on any over-commit).
func TestMovedIntentFlowsPlacedTogether(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(3, 2, 3))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	snap, _ := h.Controller.Snapshot()
	src, dst := snap.Hosts()[0], snap.Hosts()[3] // h1-1 → h2-1
	var a, b models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("a", src.Name, dst.Name, 60, 49152, 2), &a)
	h.Eventually(t, 10*time.Second, "a installed", func() bool { return intentState(t, h, tok, a.ID).Status.State == models.StateInstalled })
	a = intentState(t, h, tok, a.ID)
	used := map[models.SwitchID]bool{}
	for _, f := range a.Status.Flows {
		used[f.Path[1].Switch] = true
	}
	if len(used) != 2 {
		t.Fatalf("a's two flows share a spine: %+v", a.Status.Flows)
	}
	// b (from the other hosts, idle) takes the third spine's room but 40.
	h.Do(t, "POST", "/api/v1/intents", tok, spec("b", snap.Hosts()[1].Name, snap.Hosts()[4].Name, 55, 49152, 1), &b)
	h.Eventually(t, 10*time.Second, "b installed", func() bool { return intentState(t, h, tok, b.ID).Status.State == models.StateInstalled })
	b = intentState(t, h, tok, b.ID)
	cool := b.Status.Flows[0].Path[1].Switch
	if used[cool] {
		t.Fatalf("b was placed on a spine a uses: %+v", b.Status.Flows)
	}
	// Background traffic (from the two other hosts of leaf1) makes a's
	// two uplinks hot.
	var bg []fabricsim.FlowSpec
	for i, f := range a.Status.Flows {
		bgSrc, bgDst := snap.Hosts()[1+i], snap.Hosts()[4+i]
		for port := uint16(50000); port < 50400; port++ {
			s := fabricsim.FlowSpec{Src: bgSrc.IP, Dst: bgDst.IP, SrcPort: port, DemandGbps: 95}
			if tr := h.Fabric.Trace(s); len(tr.Hops) > 0 && tr.Hops[0].OutPort == f.Path[0].Port {
				bg = append(bg, s)
				break
			}
		}
	}
	if len(bg) != 2 {
		t.Fatal("no source ports hash onto both of a's uplinks")
	}
	if _, err := h.Fabric.AddFlows(bg); err != nil {
		t.Fatal(err)
	}
	h.Eventually(t, 20*time.Second, "one of a's flows moved to the cool spine", func() bool {
		got := intentState(t, h, tok, a.ID)
		return got.Status.State == models.StateInstalled && slices.ContainsFunc(got.Status.Flows, func(f models.FlowStatus) bool { return f.Path[1].Switch == cool })
	})
	// Six more adapt rounds: the other flow never joins it there.
	forAdaptRounds(t, h, 6, func() {
		on := 0
		for _, f := range intentState(t, h, tok, a.ID).Status.Flows {
			if f.Path[1].Switch == cool {
				on++
			}
		}
		if on != 1 {
			t.Fatalf("%d of a's flows on %s, which has room for one", on, cool)
		}
	})
}

// TestQPHintInDryRunAndRefusal: two intents leave 50 Gb/s reservable on
// each of leaf1's two uplinks. A 90 Gb/s connection on one QP does not
// fit; the dry run and the refusal say that 2 QPs per connection
// (source ports) would, and with two declared it is admitted.
func TestQPHintInDryRunAndRefusal(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 3))
	converged(t, h)
	tok := tenant(t, h, "ml", 0, 0)
	for _, s := range []models.IntentSpec{spec("a", "h1-2", "h2-2", 45, 49152, 1), spec("b", "h1-3", "h2-3", 45, 49152, 1)} {
		if r := h.Do(t, "POST", "/api/v1/intents", tok, s, nil); r.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: HTTP %d", s.Name, r.StatusCode)
		}
	}
	var dry api.DryRunView
	if r := h.Do(t, "POST", "/api/v1/intents?dryRun=true", tok, spec("c", "h1-1", "h2-1", 90, 50000, 1), &dry); r.StatusCode != http.StatusOK {
		t.Fatalf("dry run: HTTP %d", r.StatusCode)
	}
	if dry.Fits || dry.QPHint == nil || dry.QPHint.QPs != 2 || !dry.QPHint.Fits || !strings.Contains(dry.Hint, "with 2 QPs per connection") {
		t.Fatalf("dry run %+v (hint %+v): want no fit, and 2 QPs per connection that would", dry, dry.QPHint)
	}
	var p struct {
		Detail string `json:"detail"`
	}
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("c", "h1-1", "h2-1", 90, 50000, 1), &p); r.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "with 2 QPs per connection (source ports) it would fit") {
		t.Fatalf("create on one QP: HTTP %d %q: want 409 with the hint", r.StatusCode, p.Detail)
	}
	if r := h.Do(t, "POST", "/api/v1/intents", tok, spec("c2", "h1-1", "h2-1", 90, 50000, 2), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("create on two QPs: HTTP %d", r.StatusCode)
	}
}
