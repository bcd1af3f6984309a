package northbound

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// events streams intent and topology changes as server-sent events; a
// tenant sees only its own intents.
func (a *server) events(c *gin.Context) {
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
