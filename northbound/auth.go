package northbound

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/gin-gonic/gin"
)

const scopeKey = "accelnet.scope"

const tokenKey = "accelnet.token"

// authenticate requires a bearer token and puts its scope in the context.
func (a *server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		c.Header("WWW-Authenticate", `Bearer realm="accelnet"`)
		problem(c, http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
		return
	}
	tok, err := a.opts.Auth.Authenticate(c.Request.Context(), strings.TrimSpace(secret))
	if err != nil {
		if errors.Is(err, tenancy.ErrUnauthenticated) {
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
	scope := intents.Scope{Tenant: tok.Tenant, Operator: tok.Role == models.RoleOperator}
	c.Set(scopeKey, scope)
	c.Set(tokenKey, tok)
	c.Next()
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

func (a *server) whoami(c *gin.Context) {
	t, _ := c.Get(tokenKey)
	c.JSON(http.StatusOK, t)
}
