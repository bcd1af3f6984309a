package fabrictest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// TestDashboardOperatorScreens: what an operator's side panel and map
// must finish. The intents list filters by state and tenant and collapses
// Failed and Rejected by default; a switch picked from the list at the
// bottom of the panel brings Details (at its top) into view; the fabric
// summary counts drains; the 15-minute chart has a scale and a time axis
// with units; hovering a link draws its tooltip.
func TestDashboardOperatorScreens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	h := fabrictest.New(t, fabrictest.LeafSpine(2, 4, 2))
	converged(t, h)
	a := tenant(t, h, "alpha", 0, 0)
	b := tenant(t, h, "bravo", 0, 0)
	for i := range 12 {
		if r := h.Do(t, "POST", "/api/v1/intents", a, spec(fmt.Sprintf("job%d", i), "h1-1", "h2-1", 1, 49152+i, 1), nil); r.StatusCode != http.StatusCreated {
			t.Fatalf("intent %d: HTTP %d", i, r.StatusCode)
		}
	}
	if r := h.Do(t, "POST", "/api/v1/intents", a, spec("too-big", "h1-2", "h2-2", 500, 50000, 1), nil); r.StatusCode != http.StatusConflict {
		t.Fatalf("a rejected intent: HTTP %d", r.StatusCode)
	}
	if r := h.Do(t, "POST", "/api/v1/intents", b, spec("b1", "h3-1", "h4-1", 1, 49152, 1), nil); r.StatusCode != http.StatusCreated {
		t.Fatalf("bravo's intent: HTTP %d", r.StatusCode)
	}
	var d api.DrainView
	if r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: "spine2"}, &d); r.StatusCode != http.StatusCreated {
		t.Fatalf("drain: HTTP %d", r.StatusCode)
	}

	ctx, poll, consoleErrors := openDashboardSized(t, bin, h.API.URL, 1280, 640)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	signInWith(t, ctx, h.OperatorToken)

	// Intents: 13 live, the rejected one collapsed.
	poll("the live intents listed, the rejected one collapsed", `window.accelnet.listedIntents.length === 13 &&
		document.getElementById('intents-finished').textContent === 'show 1 failed or rejected'`, 20*time.Second)
	do(t, ctx, chromedp.Click(chromedp.CSS(`#intents-finished`)))
	poll("every intent listed", `window.accelnet.listedIntents.length === 14`, 10*time.Second)
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#intent-tenant`), "bravo"))
	eval[bool](t, ctx, `document.getElementById('intent-tenant').dispatchEvent(new Event('change'))`)
	poll("bravo's alone", `window.accelnet.listedIntents.length === 1`, 10*time.Second)
	eval[bool](t, ctx, `(window.accelnet.setIntentFilter('Rejected', ''), true)`)
	poll("the rejected alone", `window.accelnet.listedIntents.length === 1 && window.accelnet.intents.find((i) => i.id === window.accelnet.listedIntents[0]).state === 'Rejected'`, 10*time.Second)

	// The summary counts the drain.
	poll("the drain in the summary", `document.getElementById('summary-drained').textContent === '1 switch, 4 links'`, 20*time.Second)

	// A switch picked from the list at the bottom: Details come into view.
	eval[bool](t, ctx, `(document.getElementById('side').scrollTop = document.getElementById('side').scrollHeight, true)`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`#switch-list button[data-name="leaf3"]`)))
	poll("leaf3's details in view", `(() => {
		const side = document.getElementById('side').getBoundingClientRect();
		const det = document.getElementById('details').getBoundingClientRect();
		return document.getElementById('details').textContent.includes('leaf3') && det.top >= side.top && det.top < side.bottom;
	})()`, 10*time.Second)
	poll("the chart's scale and time axis", `(() => { const l = window.accelnet.chartLabels;
		return l.includes('now') && l.includes('−15 min') && l.some((x) => / b\/s$/.test(x)); })()`, 10*time.Second)
	eval[bool](t, ctx, `(window.accelnet.select('link', 'leaf1:3<->spine1:1'), true)`)
	poll("a link's chart in percent", `window.accelnet.chartLabels.includes('100%') && window.accelnet.chartLabels.includes('0%')`, 10*time.Second)

	// Hover a link: its tooltip is drawn, with its name and load.
	at := eval[[]float64](t, ctx, `(() => { const m = window.accelnet.linkMidpoint('leaf1:3<->spine1:1'); const r = document.getElementById('fabric').getBoundingClientRect();
		return [r.left + m.x, r.top + m.y]; })()`)
	do(t, ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at[0], at[1]))
	poll("the link's tooltip", `(() => { const t = document.getElementById('tooltip');
		return !t.hidden && t.textContent.startsWith('leaf1:3<->spine1:1') && t.textContent.includes('utilization') && t.getBoundingClientRect().width > 0; })()`, 10*time.Second)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// TestDashboardFatTreeViews: a k=4 fat-tree's "every switch" view draws
// its links faint (a tangle otherwise) and the selected switch's at full
// strength; in a pod's view every label fits its box and every box the
// map (a spine's name ran over its box and the map's edge).
func TestDashboardFatTreeViews(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	topo, err := topology.FatTree(4, 100)
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.New(t, topo)
	converged(t, h)
	snap, _ := h.Controller.Snapshot()
	ctx, poll, consoleErrors := openDashboardSized(t, bin, h.API.URL, 1280, 640)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	eval[bool](t, ctx, `(window.accelnet.setView('full'), true)`)
	poll("every link faint before a selection", `window.accelnet.view === 'full' && window.accelnet.drawn.length === 20 && window.accelnet.strongLinks.length === 0`, 10*time.Second)
	leaf := "p1-leaf1"
	want := len(snap.Neighbors(models.SwitchID(leaf)))
	eval[bool](t, ctx, fmt.Sprintf(`(window.accelnet.select('switch', %q), true)`, leaf))
	poll(leaf+"'s links at full strength, the rest faint", fmt.Sprintf(`window.accelnet.strongLinks.length === %d &&
		window.accelnet.strongLinks.every((id) => id.split('<->').some((end) => end.startsWith(%q)))`, want, leaf+":"), 10*time.Second)

	eval[bool](t, ctx, `(window.accelnet.setView('pod', 2), true)`)
	poll("pod 2's switches labelled inside their boxes, inside the map", `(() => {
		const w = document.getElementById('fabric').clientWidth;
		const boxes = window.accelnet.boxes;
		return window.accelnet.view === 'pod' && boxes.length > 0 && window.accelnet.labelled.length === boxes.length &&
			boxes.every((b) => b.text > 0 && b.text <= b.w && b.x - b.w / 2 >= 0 && b.x + b.w / 2 <= w);
	})()`, 10*time.Second)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// do runs a chromedp action, failing the test on an error.
func do(t *testing.T, ctx context.Context, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	if _, err := chromedp.Run(ctx, a); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}
