package northbound

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/accelnet/accelnet/controller"
)

// maxLatencyWindow bounds ?window= (the telemetry keeps 64 intervals of
// each queue: a longer window spans what is kept).
const maxLatencyWindow = time.Hour

// latency serves GET /api/v1/latency: with src and dst (two leaves or two
// hosts, and optionally window, a Go duration), their latency over each
// path; with neither, the leaf×leaf matrix.
func (a *server) latency(c *gin.Context) {
	src, dst := c.Query("src"), c.Query("dst")
	if src == "" && dst == "" {
		m, err := a.opts.Fabric.LatencyMatrix()
		if err != nil {
			latencyProblem(c, err)
			return
		}
		c.JSON(http.StatusOK, m)
		return
	}
	if src == "" || dst == "" {
		problem(c, http.StatusBadRequest, "give both src and dst (two leaves or two hosts), or neither for the leaf×leaf matrix")
		return
	}
	var window time.Duration
	if w := c.Query("window"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 || d > maxLatencyWindow {
			problem(c, http.StatusBadRequest, "window must be a duration such as 30s or 5m, above 0 and at most 1h: "+w)
			return
		}
		window = d
	}
	p, err := a.opts.Fabric.PairLatency(src, dst, window)
	if err != nil {
		latencyProblem(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

func latencyProblem(c *gin.Context, err error) {
	if errors.Is(err, controller.ErrLatency) {
		problem(c, http.StatusBadRequest, err.Error())
		return
	}
	problem(c, http.StatusServiceUnavailable, err.Error())
}
