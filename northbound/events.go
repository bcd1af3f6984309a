package northbound

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/httpserve"
)

// endless lifts the server's read and write timeouts for a response that
// streams until the client goes away (server-sent events): an expired read
// deadline would end the request's context, a write deadline the stream.
// It also says the request holds its connection for long
// (httpserve.LongHold); call done when the stream ends.
func endless(c *gin.Context) (done func()) {
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	return httpserve.LongHold(c.Request.Context())
}

// events streams intent and topology changes as server-sent events; a
// tenant sees only its own intents.
func (a *server) events(c *gin.Context) {
	// The stream lasts only as long as its token: revoked, or its tenant
	// deleted (on any replica), it ends with a "revoked" event. (Checked
	// once after taking the channel: a revocation since authentication.)
	secret, _ := bearer(c.GetHeader("Authorization"))
	revocation := a.opts.Auth.Revocation()
	if !a.opts.Auth.Holds(c.Request.Context(), secret) {
		problem(c, http.StatusUnauthorized, "unknown or revoked token")
		return
	}
	ch, cancel := a.opts.Events.Subscribe(scopeOf(c))
	defer cancel()
	defer endless(c)()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	if _, err := io.WriteString(c.Writer, ": accelnet events\n\n"); err != nil {
		return
	}
	// The current state first (unless ?current=false: a client that lists
	// the intents itself), then the changes. A change the subscription
	// queued before the current state was read, and which that state
	// already shows, is not sent again.
	var seen map[string]int64
	if c.Query("current") != "false" {
		var ok bool
		if seen, ok = a.sendCurrent(c); !ok {
			return
		}
	}
	c.Writer.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-revocation:
			revocation = a.opts.Auth.Revocation()
			if !a.opts.Auth.Holds(c.Request.Context(), secret) {
				fmt.Fprint(c.Writer, "event: revoked\ndata: {\"type\":\"revoked\"}\n\n")
				c.Writer.Flush()
				return
			}
		case ev, ok := <-ch:
			if !ok {
				fmt.Fprint(c.Writer, "event: resync\ndata: {\"type\":\"resync\"}\n\n")
				c.Writer.Flush()
				return
			}
			if rev, ok := seen[ev.ID]; ok && ev.Revision <= rev && ev.ID != "" {
				continue // the current state sent showed it already
			}
			if !writeEvent(c, ev) {
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

// sendCurrent sends every intent the caller sees as an "intent" event,
// then a "synced" event with their count, and returns the revision each
// was sent at.
func (a *server) sendCurrent(c *gin.Context) (map[string]int64, bool) {
	seen := map[string]int64{}
	scope := scopeOf(c)
	after := ""
	for {
		page, next := a.opts.Intents.List(scope, intents.ListOptions{After: after, Limit: 1000})
		for i := range page {
			in := page[i]
			seen[in.ID] = in.Revision
			if !writeEvent(c, api.Event{Type: "intent", Revision: in.Revision, Tenant: in.Tenant, ID: in.ID, Intent: &in}) {
				return nil, false
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	ok := writeEvent(c, api.Event{Type: "synced", Count: len(seen)})
	return seen, ok
}

// writeEvent writes one server-sent event.
func writeEvent(c *gin.Context, ev api.Event) bool {
	data, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	_, err = fmt.Fprintf(c.Writer, "id: %d\nevent: %s\ndata: %s\n\n", ev.Revision, ev.Type, data)
	return err == nil
}
