package northbound

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/httpserve"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/gin-gonic/gin"
)

const scopeKey = "accelnet.scope"

const tokenKey = "accelnet.token"

// authFailuresPerSecond is how many unknown tokens a client address may
// send a second (bursts of twice that) before it is refused outright.
const authFailuresPerSecond = 20

// authenticate requires a bearer token and puts its scope in the context.
func (a *server) authenticate(c *gin.Context) {
	values := c.Request.Header.Values("Authorization")
	if len(values) > 1 {
		problem(c, http.StatusBadRequest, "more than one Authorization header: send one")
		return
	}
	secret, ok := "", false
	if len(values) == 1 {
		secret, ok = bearer(values[0])
	}
	if !ok {
		c.Header("WWW-Authenticate", `Bearer realm="accelnet"`)
		problem(c, http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
		return
	}
	// An address that keeps sending unknown tokens is refused their look
	// up (each costs an etcd read); a valid token from it is still served
	// (from the cache): the limit is on what is unknown, never on a
	// credential for its neighbour's mistakes.
	client, now := c.RemoteIP(), time.Now()
	tok, err := a.opts.Auth.Authenticate(c.Request.Context(), secret, func() bool { return a.authFailures.Has(client, now) })
	if errors.Is(err, tenancy.ErrLookupRefused) {
		c.Header("Retry-After", "1")
		problem(c, http.StatusTooManyRequests, "too many unknown tokens from this address; slow down")
		return
	}
	if err != nil {
		if errors.Is(err, tenancy.ErrUnauthenticated) {
			a.authFailures.Allow(client, now)
			c.Header("WWW-Authenticate", `Bearer realm="accelnet", error="invalid_token"`)
			problem(c, http.StatusUnauthorized, "unknown or revoked token")
			return
		}
		fail(c, err)
		return
	}
	// A tenant's tokens share one budget (more tokens buy no more).
	budget, whose := "token/"+tok.ID, "this token"
	if tok.Tenant != "" {
		budget, whose = "tenant/"+string(tok.Tenant), "tenant "+string(tok.Tenant)
	}
	if !a.limiter.Allow(budget, time.Now()) {
		c.Header("Retry-After", "1")
		problem(c, http.StatusTooManyRequests, "rate limit exceeded for "+whose+"; slow down")
		return
	}
	httpserve.Trust(c.Request.Context()) // its connection is not closed to make room
	scope := intents.Scope{Tenant: tok.Tenant, Operator: tok.Role == models.RoleOperator}
	c.Set(scopeKey, scope)
	c.Set(tokenKey, tok)
	c.Next()
}

// bearer is the token of an Authorization header's value of the Bearer
// scheme, whose name is case-insensitive (RFC 9110, 11.1).
func bearer(value string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(value), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

func scopeOf(c *gin.Context) intents.Scope {
	s, _ := c.Get(scopeKey)
	scope, _ := s.(intents.Scope)
	return scope
}

func operatorOnly(c *gin.Context) {
	if !scopeOf(c).Operator {
		problem(c, http.StatusForbidden, "operators only")
		return
	}
	c.Next()
}

func (a *server) whoami(c *gin.Context) {
	t, _ := c.Get(tokenKey)
	c.JSON(http.StatusOK, t)
}
