package northbound

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
)

// maxBody bounds a request body; an intent is a few hundred bytes.
const maxBody = 1 << 20

const scopeKey = "accelnet.scope"
const tokenKey = "accelnet.token"

// authenticate requires a bearer token and puts its scope in the context.
func (a *api) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		c.Header("WWW-Authenticate", `Bearer realm="accelnet"`)
		problem(c, http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
		return
	}
	tok, err := a.opts.Auth.Authenticate(c.Request.Context(), strings.TrimSpace(secret))
	if err != nil {
		if errors.Is(err, controller.ErrUnauthenticated) {
			c.Header("WWW-Authenticate", `Bearer realm="accelnet", error="invalid_token"`)
			problem(c, http.StatusUnauthorized, "unknown or revoked token")
			return
		}
		fail(c, err)
		return
	}
	if !a.limiter.allow(tok.ID, time.Now()) {
		c.Header("Retry-After", "1")
		problem(c, http.StatusTooManyRequests, "rate limit exceeded for this token; slow down")
		return
	}
	scope := controller.Scope{Tenant: tok.Tenant, Operator: tok.Role == models.RoleOperator}
	c.Set(scopeKey, scope)
	c.Set(tokenKey, tok)
	c.Next()
}

func scopeOf(c *gin.Context) controller.Scope {
	s, _ := c.Get(scopeKey)
	scope, _ := s.(controller.Scope)
	return scope
}

func operatorOnly(c *gin.Context) {
	if !scopeOf(c).Operator {
		problem(c, http.StatusForbidden, "operators only")
		return
	}
	c.Next()
}

// limiter is a token bucket per API token.
type limiter struct {
	rate, burst float64
	mu          sync.Mutex
	buckets     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64) *limiter {
	return &limiter{rate: rate, burst: 2 * rate, buckets: map[string]*bucket{}}
}

func (l *limiter) allow(key string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// fail maps an error to its HTTP status and a problem document, once, here.
func fail(c *gin.Context, err error) {
	var v *models.ValidationError
	var refused *controller.RefusedError
	switch {
	case errors.As(err, &v):
		writeProblem(c, Problem{Status: http.StatusUnprocessableEntity, Detail: "the request is not valid", Errors: v.Errors})
	case errors.Is(err, models.ErrInvalid):
		writeProblem(c, Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()})
	case errors.Is(err, controller.ErrNotFound):
		writeProblem(c, Problem{Status: http.StatusNotFound, Detail: err.Error()})
	case errors.Is(err, controller.ErrQuota):
		writeProblem(c, Problem{Status: http.StatusForbidden, Detail: err.Error()})
	case errors.Is(err, controller.ErrPrecondition):
		writeProblem(c, Problem{Status: http.StatusPreconditionFailed, Detail: err.Error()})
	case errors.Is(err, controller.ErrIdempotencyReuse):
		writeProblem(c, Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()})
	case errors.As(err, &refused):
		p := Problem{Status: http.StatusConflict, Detail: err.Error(), Intent: refused.Intent}
		if refused.Fit.Bottleneck != "" {
			p.Bottleneck, p.FreeGbps = refused.Fit.Bottleneck, &refused.Fit.FreeGbps
		}
		writeProblem(c, p)
	case errors.Is(err, controller.ErrNotLeader):
		c.Header("Retry-After", "1")
		writeProblem(c, Problem{Status: http.StatusServiceUnavailable, Detail: "this replica stopped leading while the request waited (a failover): nothing was done; retry in a second"})
	case errors.Is(err, controller.ErrNoTopology), errors.Is(err, controller.ErrStoreUnavailable),
		errors.Is(err, controller.ErrConflict), errors.Is(err, context.DeadlineExceeded):
		c.Header("Retry-After", "2")
		writeProblem(c, Problem{Status: http.StatusServiceUnavailable, Detail: "the controller cannot serve this now: " + err.Error()})
	default:
		writeProblem(c, Problem{Status: http.StatusInternalServerError, Detail: err.Error()})
	}
}

// decodeStrict reads a JSON body into v, refusing unknown fields and
// trailing data, with a message that says where the problem is.
func decodeStrict(c *gin.Context, v any) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		writeProblem(c, Problem{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("body over %d bytes", maxBody)})
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		detail := "malformed JSON: " + err.Error()
		var typeErr *json.UnmarshalTypeError
		var field string
		if errors.As(err, &typeErr) {
			field = strings.TrimPrefix(typeErr.Field, "IntentSpec.") // embedded in IntentRequest
			detail = fmt.Sprintf("field %q: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
		}
		p := Problem{Status: http.StatusBadRequest, Detail: detail}
		if field != "" {
			p.Errors = []models.FieldError{{Field: field, Message: detail}}
		}
		writeProblem(c, p)
		return nil, false
	}
	if dec.More() {
		writeProblem(c, Problem{Status: http.StatusBadRequest, Detail: "malformed JSON: data after the object"})
		return nil, false
	}
	return body, true
}

// IntentRequest is the body of POST /intents: the spec plus, for an
// operator acting for a tenant, the tenant.
type IntentRequest struct {
	Tenant models.TenantName `json:"tenant,omitempty"`
	models.IntentSpec
}

// DryRunView answers ?dryRun=true.
type DryRunView struct {
	Fits       bool                `json:"fits"`
	Paths      [][]models.Endpoint `json:"paths"`
	MLU        float64             `json:"mlu"`
	Bottleneck string              `json:"bottleneck,omitempty"`
	FreeGbps   float64             `json:"free_gbps"`
	Reason     string              `json:"reason,omitempty"`
	Preempts   []string            `json:"preempts,omitempty"`
	// QPHint says how many QPs per connection (source ports) come
	// closest to the best; Hint says it in words.
	QPHint *models.QPHint `json:"qp_hint,omitempty"`
	Hint   string         `json:"hint,omitempty"`
}

func dryRunView(out controller.Outcome) DryRunView {
	f := out.Fit
	if f.Paths == nil {
		f.Paths = [][]models.Endpoint{}
	}
	v := DryRunView{Fits: f.Fits, Paths: f.Paths, MLU: f.MLU, Bottleneck: f.Bottleneck, FreeGbps: f.FreeGbps, Reason: f.Reason, Preempts: out.Preempts, QPHint: out.QPHint}
	if out.QPHint != nil {
		v.Hint = out.QPHint.String()
	}
	return v
}

func setETag(c *gin.Context, rev int64) { c.Header("ETag", `"`+strconv.FormatInt(rev, 10)+`"`) }

func (a *api) createIntent(c *gin.Context) {
	var req IntentRequest
	body, ok := decodeStrict(c, &req)
	if !ok {
		return
	}
	scope := scopeOf(c)
	switch {
	case req.Tenant == "" && !scope.Operator:
		req.Tenant = scope.Tenant
	case req.Tenant == "":
		fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: "required for an operator token: which tenant is this for?"}}})
		return
	case !scope.Operator && req.Tenant != scope.Tenant:
		problem(c, http.StatusForbidden, "a tenant token creates intents for its own tenant only")
		return
	}
	dry, err := boolQuery(c, "dryRun")
	if err != nil {
		fail(c, err)
		return
	}
	key := c.GetHeader("Idempotency-Key")
	if len(key) > 255 {
		fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "Idempotency-Key", Message: "at most 255 characters"}}})
		return
	}
	sum := sha256.Sum256(body)
	out, err := a.opts.Intents.Create(c.Request.Context(), controller.CreateRequest{
		Tenant: req.Tenant, Spec: req.IntentSpec, IdempotencyKey: key, BodyDigest: hex.EncodeToString(sum[:]), DryRun: dry,
	})
	if err != nil {
		fail(c, err)
		return
	}
	if dry {
		c.JSON(http.StatusOK, dryRunView(out))
		return
	}
	if out.Replayed {
		c.Header("Idempotent-Replayed", "true")
		if out.Intent.Status.State == models.StateRejected {
			fail(c, &controller.RefusedError{Err: controller.ErrNoCapacity, Intent: &out.Intent, Fit: pathcalc.Fit{Reason: out.Intent.Status.Reason}})
			return
		}
	}
	setETag(c, out.Intent.Revision)
	c.Header("Location", "/api/v1/intents/"+out.Intent.ID)
	c.JSON(http.StatusCreated, out.Intent)
}

func boolQuery(c *gin.Context, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &models.ValidationError{Errors: []models.FieldError{{Field: name, Message: "want true or false"}}}
	}
	return b, nil
}

// IntentList is a page of intents.
type IntentList struct {
	Items         []models.Intent `json:"items"`
	NextPageToken string          `json:"next_page_token,omitempty"`
}

func (a *api) listIntents(c *gin.Context) {
	scope := scopeOf(c)
	var v models.ValidationError
	opts := controller.ListOptions{After: c.Query("page_token")}
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
		scope = controller.Scope{Tenant: models.TenantName(t)}
	}
	if len(v.Errors) > 0 {
		fail(c, &v)
		return
	}
	items, next := a.opts.Intents.List(scope, opts)
	c.JSON(http.StatusOK, IntentList{Items: items, NextPageToken: next})
}

func (a *api) getIntent(c *gin.Context) {
	in, err := a.opts.Intents.Get(scopeOf(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	setETag(c, in.Revision)
	c.JSON(http.StatusOK, in)
}

func (a *api) putIntent(c *gin.Context) {
	match := strings.Trim(strings.TrimPrefix(c.GetHeader("If-Match"), "W/"), `"`)
	if match == "" {
		problem(c, http.StatusPreconditionRequired, "If-Match with the intent's ETag (revision) is required to update it")
		return
	}
	rev, err := strconv.ParseInt(match, 10, 64)
	if err != nil {
		writeProblem(c, Problem{Status: http.StatusPreconditionFailed, Detail: "If-Match is not a revision this API issued: " + match})
		return
	}
	var req IntentRequest
	if _, ok := decodeStrict(c, &req); !ok {
		return
	}
	if req.Tenant != "" {
		if cur, err := a.opts.Intents.Get(scopeOf(c), c.Param("id")); err == nil && cur.Tenant != req.Tenant {
			fail(c, &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: "an intent cannot move to another tenant"}}})
			return
		}
	}
	out, err := a.opts.Intents.Update(c.Request.Context(), scopeOf(c), c.Param("id"), req.IntentSpec, rev)
	if err != nil {
		fail(c, err)
		return
	}
	setETag(c, out.Intent.Revision)
	c.JSON(http.StatusOK, out.Intent)
}

func (a *api) deleteIntent(c *gin.Context) {
	in, err := a.opts.Intents.Delete(c.Request.Context(), scopeOf(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, in)
}

func (a *api) capacity(c *gin.Context) {
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
	cap, err := a.opts.Intents.Capacity(src, dst)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, cap)
}

// events streams intent and topology changes as server-sent events; a
// tenant sees only its own intents.
func (a *api) events(c *gin.Context) {
	ch, cancel := a.opts.Events.Subscribe(scopeOf(c))
	defer cancel()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	if _, err := io.WriteString(c.Writer, ": accelnet events\n\n"); err != nil {
		return
	}
	c.Writer.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				fmt.Fprint(c.Writer, "event: resync\ndata: {\"type\":\"resync\"}\n\n")
				c.Writer.Flush()
				return
			}
			data, err := json.Marshal(ev)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(c.Writer, "id: %d\nevent: %s\ndata: %s\n\n", ev.Revision, ev.Type, data); err != nil {
				return
			}
			c.Writer.Flush()
		case <-keepalive.C:
			if _, err := io.WriteString(c.Writer, ": keepalive\n\n"); err != nil {
				return
			}
			c.Writer.Flush()
		case <-c.Request.Context().Done():
			return
		case <-a.done:
			return
		}
	}
}

// TenantView is a tenant with what it has reserved.
type TenantView struct {
	models.Tenant
	ReservedGbps float64 `json:"reserved_gbps"`
	LiveIntents  int     `json:"live_intents"`
}

func (a *api) tenantView(t models.Tenant) TenantView {
	g, n := a.opts.Intents.Usage(t.Name)
	return TenantView{Tenant: t, ReservedGbps: g, LiveIntents: n}
}

func (a *api) putTenant(c *gin.Context) {
	var t models.Tenant
	if _, ok := decodeStrict(c, &t); !ok {
		return
	}
	t.Created = time.Time{}
	_, existed := a.opts.Auth.Tenant(c.Request.Context(), t.Name)
	saved, err := a.opts.Auth.PutTenant(c.Request.Context(), t)
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusCreated
	if existed == nil {
		status = http.StatusOK
	}
	c.JSON(status, a.tenantView(saved))
}

func (a *api) listTenants(c *gin.Context) {
	out := []TenantView{}
	for _, t := range a.opts.Auth.Tenants() {
		out = append(out, a.tenantView(t))
	}
	c.JSON(http.StatusOK, gin.H{"items": out})
}

func (a *api) getTenant(c *gin.Context) {
	t, err := a.opts.Auth.Tenant(c.Request.Context(), models.TenantName(c.Param("name")))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a.tenantView(t))
}

func (a *api) deleteTenant(c *gin.Context) {
	if err := a.opts.Auth.DeleteTenant(c.Request.Context(), models.TenantName(c.Param("name"))); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// TokenRequest asks for a token.
type TokenRequest struct {
	Tenant models.TenantName `json:"tenant,omitempty"`
	Role   models.TokenRole  `json:"role"`
}

// NewTokenView is a new token with its secret, shown only this once.
type NewTokenView struct {
	models.Token
	Secret string `json:"token"`
}

func (a *api) createToken(c *gin.Context) {
	var req TokenRequest
	if _, ok := decodeStrict(c, &req); !ok {
		return
	}
	tok, secret, err := a.opts.Auth.CreateToken(c.Request.Context(), models.Token{Tenant: req.Tenant, Role: req.Role})
	if err != nil {
		if errors.Is(err, controller.ErrNotFound) {
			err = &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: err.Error()}}}
		}
		fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, NewTokenView{Token: tok, Secret: secret})
}

func (a *api) listTokens(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Auth.Tokens()})
}

func (a *api) deleteToken(c *gin.Context) {
	if err := a.opts.Auth.DeleteToken(c.Request.Context(), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (a *api) whoami(c *gin.Context) {
	t, _ := c.Get(tokenKey)
	c.JSON(http.StatusOK, t)
}

func (a *api) createDrain(c *gin.Context) {
	var d models.Drain
	if _, ok := decodeStrict(c, &d); !ok {
		return
	}
	d.ID, d.Created = "", time.Time{}
	dry, err := boolQuery(c, "dryRun")
	if err != nil {
		fail(c, err)
		return
	}
	if dry {
		p, err := a.opts.Drains.Preview(d)
		if err != nil {
			fail(c, err)
			return
		}
		if p.Degraded == nil {
			p.Degraded = []string{}
		}
		c.JSON(http.StatusOK, p)
		return
	}
	saved, err := a.opts.Drains.Create(c.Request.Context(), d)
	if err != nil {
		fail(c, err)
		return
	}
	v, err := a.opts.Drains.Get(saved.ID)
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/drains/"+saved.ID)
	c.JSON(http.StatusCreated, v)
}

func (a *api) listDrains(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Drains.List()})
}

// listElephants lists the heavy flows sampling found that no intent
// declares, biggest first, and where they are pinned.
func (a *api) listElephants(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Intents.DetectedFlows()})
}

func (a *api) getDrain(c *gin.Context) {
	v, err := a.opts.Drains.Get(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (a *api) deleteDrain(c *gin.Context) {
	if err := a.opts.Drains.Delete(c.Request.Context(), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
