package northbound

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
)

func dryRunView(out intents.Outcome) api.DryRunView {
	f := out.Fit
	if f.Paths == nil {
		f.Paths = [][]models.Endpoint{}
	}
	v := api.DryRunView{Fits: f.Fits, Paths: f.Paths, MLU: f.MLU, Bottleneck: f.Bottleneck, FreeGbps: f.FreeGbps, Reason: f.Reason, Preempts: out.Preempts, QPHint: out.QPHint}
	if out.QPHint != nil {
		v.Hint = out.QPHint.String()
	}
	return v
}

func (a *server) createIntent(c *gin.Context) {
	var req api.IntentRequest
	ok := decodeStrict(c, &req)
	if !ok {
		return
	}
	o, ok := createOptionsOf(c, req.Tenant)
	if !ok {
		return
	}
	req.Tenant = o.tenant
	digest, err := digestOf(o.key, func() any {
		digested := req
		digested.IntentSpec = canonicalSpec(req.IntentSpec)
		return digested
	})
	if err != nil {
		fail(c, err)
		return
	}
	out, err := a.opts.Intents.Create(c.Request.Context(), intents.CreateRequest{
		Tenant: req.Tenant, Spec: req.IntentSpec, IdempotencyKey: o.key, BodyDigest: digest, DryRun: o.dry,
	})
	if err != nil {
		fail(c, err)
		return
	}
	if o.dry {
		c.JSON(http.StatusOK, dryRunView(out))
		return
	}
	if out.Replayed {
		c.Header("Idempotent-Replayed", "true")
		if err := replayedRefusal(out); err != nil {
			fail(c, err)
			return
		}
	}
	setETag(c, out.Intent.Revision)
	c.Header("Location", "/api/v1/intents/"+out.Intent.ID)
	c.JSON(http.StatusCreated, out.Intent)
}

// replayedRefusal is the refusal a replayed create answers again when
// the intent it made was stored Rejected (nil otherwise).
func replayedRefusal(out intents.Outcome) error {
	if out.Intent.Status.State != models.StateRejected {
		return nil
	}
	return &intents.RefusedError{Err: intents.ErrNoCapacity, Intent: &out.Intent, Fit: pathcalc.Fit{Reason: out.Intent.Status.Reason}}
}

func (a *server) listIntents(c *gin.Context) {
	scope := scopeOf(c)
	var v models.ValidationError
	opts := intents.ListOptions{After: c.Query("page_token")}
	if s := c.Query("state"); s != "" {
		opts.State = models.IntentState(s)
		valid := false
		for _, x := range models.ValidStates {
			valid = valid || x == opts.State
		}
		if !valid {
			v.Errors = append(v.Errors, models.FieldError{Field: "state", Message: fmt.Sprintf("want one of %v", models.ValidStates)})
		}
	}
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			v.Errors = append(v.Errors, models.FieldError{Field: "limit", Message: "want 1-1000"})
		}
		opts.Limit = n
	}
	if t := c.Query("tenant"); t != "" {
		if !scope.Operator && models.TenantName(t) != scope.Tenant {
			problem(c, http.StatusForbidden, "a tenant token lists its own tenant's intents only")
			return
		}
		scope = intents.Scope{Tenant: models.TenantName(t)}
	}
	if len(v.Errors) > 0 {
		fail(c, &v)
		return
	}
	items, next := a.opts.Intents.List(scope, opts)
	c.JSON(http.StatusOK, api.IntentList{Items: items, NextPageToken: next})
}

func (a *server) getIntent(c *gin.Context) {
	in, err := a.opts.Intents.Get(scopeOf(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	setETag(c, in.Revision)
	if a.opts.Fabric != nil {
		var paths [][]models.Endpoint
		for _, f := range in.Status.Flows {
			if len(f.Path) > 0 {
				paths = append(paths, f.Path)
			}
		}
		if l, ok := a.opts.Fabric.FlowsLatency(paths, 0); ok {
			in.Status.Latency = &l
		}
	}
	c.JSON(http.StatusOK, in)
}

func (a *server) putIntent(c *gin.Context) {
	header := strings.TrimSpace(c.GetHeader("If-Match"))
	if header == "" {
		problem(c, http.StatusPreconditionRequired, "If-Match with the intent's ETag (revision) is required to update it")
		return
	}
	revs, ok := parseIfMatch(header)
	if !ok {
		writeProblem(c, api.Problem{Status: http.StatusPreconditionFailed, Detail: "If-Match names no revision this API issued (a strong ETag such as \"42\", a list of them, or *): " + header})
		return
	}
	var req api.IntentRequest
	if !decodeStrict(c, &req) {
		return
	}
	if req.Tenant != "" {
		if cur, err := a.opts.Intents.Get(scopeOf(c), c.Param("id")); err == nil && cur.Tenant != req.Tenant {
			fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: "an intent cannot move to another tenant"}}})
			return
		}
	}
	out, err := a.opts.Intents.Update(c.Request.Context(), scopeOf(c), c.Param("id"), req.IntentSpec, revs)
	if err != nil {
		fail(c, err)
		return
	}
	setETag(c, out.Intent.Revision)
	c.JSON(http.StatusOK, out.Intent)
}

func (a *server) deleteIntent(c *gin.Context) {
	in, err := a.opts.Intents.Delete(c.Request.Context(), scopeOf(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, in)
}

func (a *server) capacity(c *gin.Context) {
	src, dst := c.Query("src"), c.Query("dst")
	var v models.ValidationError
	if src == "" {
		v.Errors = append(v.Errors, models.FieldError{Field: "src", Message: "required (a host name or IP)"})
	}
	if dst == "" {
		v.Errors = append(v.Errors, models.FieldError{Field: "dst", Message: "required (a host name or IP)"})
	}
	if len(v.Errors) > 0 {
		fail(c, &v)
		return
	}
	cap, err := a.opts.Intents.Capacity(c.Request.Context(), scopeOf(c), src, dst)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, cap)
}

// parseIfMatch reads an If-Match header (RFC 9110, 13.1.1): "*" matches
// any revision (nil); otherwise a list of entity tags, compared strongly:
// a weak tag (W/"3", W/"*") matches nothing, nor does a tag that is not a
// revision this API issued. A revision without its quotes (12) is taken
// as its tag, as clients that drop them mean. ok is false when nothing in
// it can match.
func parseIfMatch(header string) (revs []int64, ok bool) {
	if header == "*" {
		return intents.AnyRevision, true
	}
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if strings.HasPrefix(tag, "W/") {
			continue
		}
		if len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' {
			tag = tag[1 : len(tag)-1]
		}
		if rev, err := strconv.ParseInt(tag, 10, 64); err == nil && rev > 0 {
			revs = append(revs, rev)
		}
	}
	return revs, len(revs) > 0
}
