package northbound

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/gin-gonic/gin"
)

// LeaderInfo says who leads: the leader's advertised API URL ("" while
// none is known) and whether this replica is it.
type LeaderInfo interface {
	Leader() (url string, self bool)
	// NoLeaderReason says why no leader is known.
	NoLeaderReason() string
}

// ForwardedHeader marks a request a follower passed to the leader; a
// replica that gets one and does not lead answers 503 rather than pass
// it on again (its view of the leader is stale).
const ForwardedHeader = "X-Accelnet-Forwarded-By"

// servedByAny says whether any replica can answer the request from its
// own state (followed from etcd): reads of the topology, intents, events,
// drains, tokens. Everything that decides or reads the leader's ledger,
// the switches or what only the leader hears from them (detected
// elephants) goes to the leader.
func servedByAny(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := strings.TrimPrefix(r.URL.Path, "/api/v1")
	for _, leaderOnly := range []string{"/capacity", "/tenants", "/switches/", "/elephants"} {
		if strings.HasPrefix(p, leaderOnly) {
			return false
		}
	}
	return true
}

// forward passes requests only the leader can serve to it, unchanged
// (token, Idempotency-Key, If-Match and body included), when this
// replica follows. The follower has authenticated them (its limits apply);
// the leader authenticates them again, as any request.
func (a *server) forward(c *gin.Context) {
	if a.opts.Leader == nil || servedByAny(c.Request) {
		c.Next()
		return
	}
	leader, self := a.opts.Leader.Leader()
	if self {
		c.Next()
		return
	}
	if leader == "" || c.GetHeader(ForwardedHeader) != "" {
		c.Header("Retry-After", "1")
		problem(c, http.StatusServiceUnavailable, "no leader right now ("+a.opts.Leader.NoLeaderReason()+"): nothing was done; retry in a second")
		return
	}
	target, err := url.Parse(leader)
	if err != nil {
		problem(c, http.StatusInternalServerError, fmt.Sprintf("the leader advertises an unusable URL %q: %v", leader, err))
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set(ForwardedHeader, "follower")
		},
		Transport: a.opts.ForwardTransport,
		ModifyResponse: func(resp *http.Response) error {
			// Read your writes: answer once this replica's own view has
			// the revision the leader committed.
			rev, err := strconv.ParseInt(strings.Trim(resp.Header.Get("ETag"), `"`), 10, 64)
			if err == nil && resp.StatusCode < 300 && a.opts.Intents != nil {
				ctx, cancel := context.WithTimeout(resp.Request.Context(), 2*time.Second)
				a.opts.Intents.WaitFollowed(ctx, rev)
				cancel()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// Nothing reached the leader, or its answer was lost: the
			// client retries (with its Idempotency-Key, a create is safe).
			body, _ := json.Marshal(api.Problem{Type: "about:blank", Title: http.StatusText(http.StatusServiceUnavailable), Status: http.StatusServiceUnavailable,
				Detail: fmt.Sprintf("the leader at %s did not answer (%v); retry in a second", leader, err)})
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(body)
		},
	}
	c.Abort()
	proxy.ServeHTTP(c.Writer, c.Request)
}
