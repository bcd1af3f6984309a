package fabrictest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/chromedp/chromedp"
)

// TestHistoryKeptByServer: the API keeps every link's and switch's recent
// load, so a page opened now charts what happened before it opened
// (its charts do not start empty).
func TestHistoryKeptByServer(t *testing.T) {
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(c *stack.Config) { c.HistoryInterval = 100 * time.Millisecond })
	converged(t, h)
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	snap, _ := h.Controller.Snapshot()
	var busy string
	h.Eventually(t, 30*time.Second, "a link's history with load in it", func() bool {
		for _, l := range snap.Links() {
			var hist api.History
			if h.GetJSON(t, "/api/v1/history?link="+string(l.ID()), &hist) != http.StatusOK {
				continue
			}
			for _, p := range hist.Points {
				if p.V > 0.05 && len(hist.Points) >= 5 {
					busy = string(l.ID())
					return true
				}
			}
		}
		return false
	})
	var sw api.History
	if code := h.GetJSON(t, "/api/v1/history?switch=leaf1", &sw); code != http.StatusOK || len(sw.Points) == 0 {
		t.Fatalf("leaf1's history: HTTP %d, %d points", code, len(sw.Points))
	}
	for path, want := range map[string]int{
		"/api/v1/history?link=nosuch":                    http.StatusNotFound,
		"/api/v1/history":                                http.StatusBadRequest,
		"/api/v1/history?link=" + busy + "&switch=leaf1": http.StatusBadRequest,
	} {
		if code := h.GetJSON(t, path, nil); code != want {
			t.Errorf("%s: HTTP %d, want %d", path, code, want)
		}
	}

	// A page opened now charts the link from before it opened.
	if testing.Short() {
		return
	}
	ctx, poll, _ := openDashboard(t, chromium(t), h)
	poll("the dashboard", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.accelnet.select('link', '`+busy+`'), true)`)); err != nil {
		t.Fatal(err)
	}
	poll("the server's points in the chart", `window.accelnet.historyLength('link:`+busy+`') >= 5 + window.accelnet.updates`, 15*time.Second)
}
