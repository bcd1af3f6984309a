package fabrictest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// postBatch sends a batch and returns the HTTP response and its body:
// the result, or the problem.
func postBatch(t *testing.T, h *fabrictest.Harness, token string, req api.IntentBatchRequest, query string, headers ...string) (*http.Response, api.IntentBatchResult, api.Problem) {
	t.Helper()
	var raw json.RawMessage
	resp := h.Do(t, "POST", "/api/v1/intents:batch"+query, token, req, &raw, headers...)
	var out api.IntentBatchResult
	var p api.Problem
	var err error
	if resp.StatusCode < 300 {
		err = json.Unmarshal(raw, &out)
	} else {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		t.Fatalf("HTTP %d: %v\n%s", resp.StatusCode, err, raw)
	}
	return resp, out, p
}

func statuses(r api.IntentBatchResult) []int {
	var s []int
	for _, it := range r.Items {
		s = append(s, it.Status)
	}
	return s
}

func stored(t *testing.T, h *fabrictest.Harness, token string) int {
	t.Helper()
	var list api.IntentList
	h.Do(t, "GET", "/api/v1/intents?limit=1000", token, nil, &list)
	return len(list.Items)
}

// TestBatchDecidesEachItem: a batch that is not atomic answers each item
// as a create of its own would be answered, in order (admitted, taken by
// an earlier item, refused for capacity and stored Rejected, malformed),
// keeps the admitted ones, which are installed on the switches, and a
// retry with its Idempotency-Key replays what it made.
func TestBatchDecidesEachItem(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "launcher", 0, 0)
	bad := spec("bad", "h1-1", "h2-1", -1, 300, 1)
	req := api.IntentBatchRequest{Items: []models.IntentSpec{
		spec("a", "h1-1", "h2-1", 10, 100, 1),
		spec("b", "h1-2", "h2-2", 10, 100, 1),
		spec("again", "h1-1", "h2-1", 10, 100, 1), // a's flow
		spec("huge", "h1-2", "h2-1", 500, 200, 1),
		bad,
		spec("ghost", "h1-1", "nowhere", 1, 400, 1),
	}}
	resp, out, _ := postBatch(t, h, tok, req, "", "Idempotency-Key", "wave-1")
	want := []int{201, 201, 409, 409, 422, 422}
	if resp.StatusCode != http.StatusOK || !slices.Equal(statuses(out), want) {
		t.Fatalf("HTTP %d, items %v; want 200, %v: %+v", resp.StatusCode, statuses(out), want, out)
	}
	if out.Created != 2 || out.Failed != 4 {
		t.Errorf("created %d, failed %d; want 2, 4", out.Created, out.Failed)
	}
	if p := out.Items[3].Problem; p == nil || p.Intent == nil || p.Intent.Status.State != models.StateRejected {
		t.Errorf("the refused item: %+v; want its Rejected record", p)
	}
	if p := out.Items[4].Problem; p == nil || len(p.Errors) == 0 {
		t.Errorf("the malformed item: %+v; want its field errors", p)
	}
	a, b := out.Items[0].Intent, out.Items[1].Intent
	for _, in := range []*models.Intent{a, b} {
		h.Eventually(t, 20*time.Second, in.Spec.Name+" installed", func() bool {
			return intentState(t, h, tok, in.ID).Status.State == models.StateInstalled
		})
	}
	if n := stored(t, h, tok); n != 3 { // a, b and the Rejected record
		t.Errorf("%d intents stored, want 3", n)
	}

	resp, again, _ := postBatch(t, h, tok, req, "", "Idempotency-Key", "wave-1")
	if resp.StatusCode != http.StatusOK || !slices.Equal(statuses(again), want) {
		t.Fatalf("retry: HTTP %d, items %v; want 200, %v", resp.StatusCode, statuses(again), want)
	}
	for i, in := range []*models.Intent{a, b} {
		if got := again.Items[i]; got.Intent == nil || got.Intent.ID != in.ID || !got.Replayed {
			t.Errorf("retry, item %d: %+v; want %s replayed", i, got, in.ID)
		}
	}
	if !again.Items[3].Replayed || again.Items[3].Problem.Intent.ID != out.Items[3].Problem.Intent.ID {
		t.Errorf("retry, the refused item: %+v; want its Rejected record replayed", again.Items[3])
	}
	if n := stored(t, h, tok); n != 3 {
		t.Errorf("%d intents stored after the retry, want 3", n)
	}
	other := req
	other.Items = slices.Clone(req.Items)
	other.Items[4] = spec("fixed", "h1-1", "h2-2", 1, 300, 1)
	if resp, _, p := postBatch(t, h, tok, other, "", "Idempotency-Key", "wave-1"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("the key with another body: HTTP %d %+v; want 422", resp.StatusCode, p)
	}
	if n := stored(t, h, tok); n != 3 {
		t.Errorf("%d intents stored after the key came with another body, want 3", n)
	}
}

// TestBatchAtomic: an atomic batch is admitted all together (one
// commit, every intent installed) or not at all: a malformed item, or
// flows that fit one by one in part but not all together, store nothing
// and say which item or link stood in the way.
func TestBatchAtomic(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "launcher", 0, 0)
	job := api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{
		spec("r0", "h1-1", "h2-1", 20, 100, 2),
		spec("r1", "h2-1", "h1-2", 20, 100, 2),
		spec("r2", "h1-2", "h2-2", 20, 100, 2),
	}}
	resp, out, p := postBatch(t, h, tok, job, "", "Idempotency-Key", "job-7")
	if resp.StatusCode != http.StatusCreated || out.Created != 3 || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("HTTP %d (replayed %q), %+v %+v; want 201 with 3", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), out, p)
	}
	var rev int64
	for _, it := range out.Items {
		if it.Status != http.StatusCreated || it.Intent == nil || it.Intent.Revision == 0 {
			t.Fatalf("item %+v: want created, stored", it)
		}
		if rev != 0 && it.Intent.Revision != rev {
			t.Errorf("revisions %d and %d: want one commit", rev, it.Intent.Revision)
		}
		rev = it.Intent.Revision
	}
	h.Eventually(t, 20*time.Second, "the job's intents installed", func() bool {
		for _, it := range out.Items {
			if intentState(t, h, tok, it.Intent.ID).Status.State != models.StateInstalled {
				return false
			}
		}
		return h.Converged() == nil
	})
	resp, again, _ := postBatch(t, h, tok, job, "", "Idempotency-Key", "job-7")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: HTTP %d, replayed %q; want 201, true", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	for i, it := range again.Items {
		if it.Intent == nil || it.Intent.ID != out.Items[i].Intent.ID {
			t.Errorf("retry, item %d: %+v; want %s", i, it, out.Items[i].Intent.ID)
		}
	}

	malformed := api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{
		spec("ok", "h1-1", "h2-2", 1, 500, 1), spec("ghost", "h1-1", "nowhere", 1, 501, 1)}}
	resp, _, p = postBatch(t, h, tok, malformed, "")
	if resp.StatusCode != http.StatusUnprocessableEntity || p.Index == nil || *p.Index != 1 {
		t.Errorf("an unknown host in item 1: HTTP %d %+v; want 422 naming index 1", resp.StatusCode, p)
	}
	// Each of these fits alone; together they need 100 Gb/s of h2-2's
	// 100 Gb/s link (less headroom).
	tooMuch := api.IntentBatchRequest{Atomic: true, Items: []models.IntentSpec{
		spec("x", "h2-2", "h1-1", 30, 600, 1), spec("y", "h2-2", "h1-2", 30, 601, 1), spec("z", "h2-2", "h1-1", 40, 602, 1)}}
	resp, _, p = postBatch(t, h, tok, tooMuch, "")
	if resp.StatusCode != http.StatusConflict || p.Bottleneck == "" {
		t.Errorf("more than h2-2's link together: HTTP %d %+v; want 409 naming the bottleneck", resp.StatusCode, p)
	}
	if n := stored(t, h, tok); n != 3 {
		t.Errorf("%d intents stored, want the job's 3 only", n)
	}
	for i := range tooMuch.Items[:2] {
		var in models.Intent
		if r := h.Do(t, "POST", "/api/v1/intents", tok, tooMuch.Items[i], &in); r.StatusCode != http.StatusCreated {
			t.Errorf("item %d alone: HTTP %d; want it to fit", i, r.StatusCode)
		}
	}
}

// TestBatchDryRun: a dry run decides the items in order as they would
// be decided now, each seeing the ones before it, and keeps nothing.
func TestBatchDryRun(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "launcher", 0, 0)
	// Each fits alone; the second does not fit beside the first.
	req := api.IntentBatchRequest{Items: []models.IntentSpec{
		spec("p", "h1-1", "h2-1", 60, 100, 1), spec("q", "h1-1", "h2-2", 60, 101, 1)}}
	resp, out, _ := postBatch(t, h, tok, req, "?dryRun=true")
	if resp.StatusCode != http.StatusOK || !out.DryRun || !slices.Equal(statuses(out), []int{201, 409}) {
		t.Fatalf("dry run: HTTP %d %+v; want 200 with [201 409]", resp.StatusCode, out)
	}
	req.Atomic = true
	if resp, _, p := postBatch(t, h, tok, req, "?dryRun=true"); resp.StatusCode != http.StatusConflict {
		t.Errorf("atomic dry run: HTTP %d %+v; want 409", resp.StatusCode, p)
	}
	if n := stored(t, h, tok); n != 0 {
		t.Errorf("dry runs stored %d intents", n)
	}
	if g, n := h.Intents.Usage("launcher"); g != 0 || n != 0 {
		t.Errorf("dry runs reserved %v Gb/s in %d intents", g, n)
	}
}

// TestBatchRefusesWholeRequests: what is wrong with a batch as a whole
// is answered as a problem, and nothing is stored.
func TestBatchRefusesWholeRequests(t *testing.T) {
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2))
	converged(t, h)
	tok := tenant(t, h, "launcher", 0, 0)
	tenant(t, h, "other", 0, 0)
	one := []models.IntentSpec{spec("a", "h1-1", "h2-1", 1, 100, 1)}
	many := make([]models.IntentSpec, 1001)
	for i := range many {
		many[i] = spec(fmt.Sprint("m", i), "h1-1", "h2-1", 0.01, 1000+i, 1)
	}
	collective := spec("c", "h1-1", "h2-1", 1, 100, 1)
	collective.Collective = &models.Collective{Pattern: models.PatternRingAllReduce, Endpoints: []string{"h1-1", "h2-1"}, GbpsPerGPU: 1}
	collective.Src, collective.Dst, collective.SrcPorts = "", "", models.PortRange{}
	for _, tc := range []struct {
		name  string
		token string
		req   api.IntentBatchRequest
		want  int
	}{
		{"no items", tok, api.IntentBatchRequest{}, http.StatusUnprocessableEntity},
		{"over 1,000 items", tok, api.IntentBatchRequest{Items: many}, http.StatusUnprocessableEntity},
		{"another tenant's", tok, api.IntentBatchRequest{Tenant: "other", Items: one}, http.StatusForbidden},
		{"an operator naming no tenant", h.OperatorToken, api.IntentBatchRequest{Items: one}, http.StatusUnprocessableEntity},
		{"an operator naming a tenant that does not exist", h.OperatorToken, api.IntentBatchRequest{Tenant: "ghost", Items: one}, http.StatusNotFound},
		{"a collective in an atomic batch", tok, api.IntentBatchRequest{Atomic: true, Items: append(slices.Clone(one), collective)}, http.StatusUnprocessableEntity},
	} {
		if resp, _, p := postBatch(t, h, tc.token, tc.req, ""); resp.StatusCode != tc.want {
			t.Errorf("%s: HTTP %d %+v; want %d", tc.name, resp.StatusCode, p, tc.want)
		}
	}
	var p api.Problem
	if r := h.Do(t, "POST", "/api/v1/intents:batch", tok, `{"items":[{"name":"a"}],"atomic":"yes"}`, &p); r.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed JSON: HTTP %d %+v; want 400", r.StatusCode, p)
	}
	if n := stored(t, h, h.OperatorToken); n != 0 {
		t.Errorf("%d intents stored", n)
	}
}
