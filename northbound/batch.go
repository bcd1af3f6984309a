package northbound

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/models"
)

// createIntents is POST /api/v1/intents:batch: up to intents.MaxBatch
// intents of one tenant, atomic (201 and every intent, or the problem
// that refused them, with the item's index) or each on its own (200 and
// each item's status with its intent or problem).
func (a *server) createIntents(c *gin.Context) {
	var req api.IntentBatchRequest
	if !decodeStrict(c, &req) {
		return
	}
	o, ok := createOptionsOf(c, req.Tenant)
	if !ok {
		return
	}
	digest, err := digestOf(o.key, func() any {
		digested := req
		digested.Items = make([]models.IntentSpec, len(req.Items))
		for i, s := range req.Items {
			digested.Items[i] = canonicalSpec(s)
		}
		return digested
	})
	if err != nil {
		fail(c, err)
		return
	}
	results, err := a.opts.Intents.CreateMany(c.Request.Context(), intents.BatchRequest{
		Tenant: o.tenant, Specs: req.Items, Atomic: req.Atomic, IdempotencyKey: o.key, BodyDigest: digest, DryRun: o.dry,
	})
	if err != nil {
		fail(c, err)
		return
	}
	out := api.IntentBatchResult{Items: make([]api.IntentBatchItem, len(results)), DryRun: o.dry}
	replayed := req.Atomic
	var rev int64
	for i, r := range results {
		rev = max(rev, r.Intent.Revision)
		item := api.IntentBatchItem{Status: http.StatusCreated, Replayed: r.Replayed}
		replayed = replayed && r.Replayed
		if r.Err == nil && r.Replayed {
			r.Err = replayedRefusal(r.Outcome)
		}
		if r.Err != nil {
			p, _ := problemOf(r.Err)
			p = completed(p)
			item = api.IntentBatchItem{Status: p.Status, Problem: &p, Replayed: r.Replayed}
			out.Failed++
		} else {
			in := r.Intent
			item.Intent = &in
			out.Created++
		}
		out.Items[i] = item
	}
	status := http.StatusOK
	if req.Atomic && !o.dry {
		status = http.StatusCreated
	}
	if replayed && !o.dry {
		c.Header("Idempotent-Replayed", "true")
	}
	if rev > 0 {
		// The revision every created intent is stored at or below: a
		// follower that passed the request on answers once it has it.
		setETag(c, rev)
	}
	c.JSON(status, out)
}

// tenantFor is the tenant a create is for: the token's own, or for an
// operator the one the body names. It answers the request when neither
// holds.
func tenantFor(c *gin.Context, named models.TenantName) (models.TenantName, bool) {
	scope := scopeOf(c)
	switch {
	case named == "" && !scope.Operator:
		return scope.Tenant, true
	case named == "":
		fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: "required for an operator token: which tenant is this for?"}}})
		return "", false
	case !scope.Operator && named != scope.Tenant:
		problem(c, http.StatusForbidden, "a tenant token creates intents for its own tenant only")
		return "", false
	}
	return named, true
}

// createOptions are what a create says beside its body: the tenant it
// is for, whether it is a dry run, its Idempotency-Key ("" for none).
type createOptions struct {
	tenant models.TenantName
	dry    bool
	key    string
}

// createOptionsOf reads a create's options, the tenant its body names
// (if any) among them; it answers the request when they are wrong.
func createOptionsOf(c *gin.Context, named models.TenantName) (createOptions, bool) {
	tenant, ok := tenantFor(c, named)
	if !ok {
		return createOptions{}, false
	}
	dry, err := boolQuery(c, "dryRun")
	if err != nil {
		fail(c, err)
		return createOptions{}, false
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 255 {
		fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "Idempotency-Key", Message: "at most 255 characters"}}})
		return createOptions{}, false
	}
	return createOptions{tenant: tenant, dry: dry, key: key}, true
}

// canonicalSpec is s as digested for idempotency: the request as decoded,
// not its bytes, so the same request with its keys in another order,
// other spacing or a default said or left out is the same request.
// (Defaults are left out of the digest, as records stored before they
// were considered have them.)
func canonicalSpec(s models.IntentSpec) models.IntentSpec {
	if s.Class == models.ClassLosslessRDMA {
		s.Class = "" // the default, as if left out
	}
	return s
}

// digestOf is the digest an Idempotency-Key's record keeps of the
// request canonical gives: "" without a key, as nothing will compare it.
func digestOf(key string, canonical func() any) (string, error) {
	if key == "" {
		return "", nil
	}
	data, err := json.Marshal(canonical())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
