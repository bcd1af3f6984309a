package fabrictest_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
)

// TestDashboardLatencyMap: leaf1's four hosts send to leaf2's at line
// rate, twice what leaf1's two uplinks carry. The dashboard's latency map
// draws a cell per leaf pair, leaf1 → leaf2 hotter than the way back; a
// click on that cell lists the pair's two paths with the hop that queues
// marked: leaf1's uplink (the spine's port on, fed by that one uplink,
// holds no queue), and what the pingmesh's probes measured, the queue a
// probe met at leaf1 marked. The screenshot goes to the artifacts (and to
// docs/dashboard-latency.png with ACCELNET_SCREENSHOTS=1).
func TestDashboardLatencyMap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 4, 4), func(o *stack.Config) { o.ProbeRate = 100 })
	converged(t, h)
	var flows []fabricsim.FlowSpec
	for i := 1; i <= 4; i++ {
		flows = append(flows, fabricsim.FlowSpec{Src: netip.MustParseAddr(fmt.Sprintf("10.0.1.%d", i)), Dst: netip.MustParseAddr(fmt.Sprintf("10.0.2.%d", i)), SrcPort: 50000, DemandGbps: 100})
	}
	if _, err := h.Fabric.AddFlows(flows); err != nil {
		t.Fatal(err)
	}
	ctx, poll, consoleErrors := openDashboardSized(t, bin, h.API.URL, 1280, 900)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	poll("the latency map with leaf1 → leaf2 hotter than the way back", `(() => {
		const l = window.accelnet.latency, m = l && l.matrix;
		return !!(m && l.drawn && l.drawn.leaves === 4 && m.leaves[0] === 'leaf1' && m.mean_us[0][1] > m.mean_us[1][0] + 10 && l.drawn.top >= m.mean_us[0][1]);
	})()`, 30*time.Second)
	eval[bool](t, ctx, `(document.getElementById('latency-h').scrollIntoView({ block: 'start' }), true)`)
	at := eval[[]float64](t, ctx, `(() => { const c = window.accelnet.latency.cellCentre('leaf1', 'leaf2'); return [c.x, c.y]; })()`)
	do(t, ctx, chromedp.MouseClickXY(at[0], at[1]))
	poll("leaf1 → leaf2's paths listed, the queueing hop marked", `(() => {
		const p = window.accelnet.latency.pair;
		const items = document.querySelectorAll('#latency-paths li');
		const hot = document.querySelectorAll('#latency-paths .hot');
		return !!(p && p.src === 'leaf1' && p.dst === 'leaf2' && items.length === p.paths.length && p.paths.length === 2 &&
			hot.length >= 1 && [...hot].every((el) => el.textContent.startsWith('leaf1:')));
	})()`, 20*time.Second)
	poll("leaf1 → leaf2's probes shown, the queue they met at leaf1 marked", `(() => {
		const pr = window.accelnet.latency.pair.probes, el = document.getElementById('latency-probes');
		if (!pr || !el || !el.textContent.startsWith('Probed')) return false; // the pair is fetched again with the map
		const hot = el.querySelectorAll('.hot');
		// One of leaf1's uplinks carries at least two of the four flows:
		// each cycle's probe leaves by the other uplink, so one soon meets it.
		return pr.last.hops.length === 2 && pr.last.queueing_us >= 1 && hot.length === 1 && hot[0].textContent.startsWith('leaf1:');
	})()`, 20*time.Second)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "dashboard-latency.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ACCELNET_SCREENSHOTS") != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard-latency.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}
