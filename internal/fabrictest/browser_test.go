package fabrictest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// chromium finds the browser .ci/run installs.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium")
	}
	t.Skip("no chromium on PATH (apt-get install -y chromium)")
	return ""
}

// artifactDir is where screenshots go: $ACCELNET_ARTIFACTS, or artifacts/
// at the repository root.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("ACCELNET_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser loads the dashboard in headless Chromium against a
// running controller and emulated fabric: no console errors, every switch
// drawn, a link shown down soon after fabricsim takes it down.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 4, 4), func(o *stack.Config) { o.DiscoveryInterval = 300 * time.Millisecond })
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	snap, _ := h.Controller.Snapshot()
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: 1}); err != nil {
		t.Fatal(err)
	}

	ctx, poll, consoleErrors := openDashboard(t, bin, h)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready && window.accelnet.drawn.length > 0`, 30*time.Second)
	drawn, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.accelnet.drawn`))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sw := range snap.Switches() {
		want = append(want, string(sw.Name))
	}
	slices.Sort(want)
	slices.Sort(drawn)
	if !slices.Equal(want, drawn) {
		t.Errorf("drawn switches %v, want %v", drawn, want)
	}
	poll("the live indicator", `document.getElementById('status').textContent === 'live'`, 10*time.Second)

	// Select a switch, let load show, and screenshot the fabric under load.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.accelnet.select('switch', 'leaf1'), true)`)); err != nil {
		t.Fatal(err)
	}
	poll("leaf1's details", `document.getElementById('details').textContent.includes('leaf1')`, 10*time.Second)
	poll("load on the links", `window.accelnet.maxUtilization() > 0`, 20*time.Second)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "dashboard.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	// Congestion shows as ECN marks: on a link whose egress marks (the
	// fabric is 2:1 oversubscribed under a line-rate permutation), the
	// details give the marked rate per direction.
	var marked string
	h.Eventually(t, 20*time.Second, "a link with ECN-marked traffic in the API", func() bool {
		var v api.TopologyView
		h.GetJSON(t, "/api/v1/topology", &v)
		for _, l := range v.Links {
			if l.Load.ABECNBps > 1e6 || l.Load.BAECNBps > 1e6 {
				marked = string(l.ID)
				return true
			}
		}
		return false
	})
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(window.accelnet.select('link', %q), true)`, marked))); err != nil {
		t.Fatal(err)
	}
	poll("the link's ECN marks in its details", `(() => {
		const dts = [...document.querySelectorAll('#details dt')];
		const dt = dts.find((d) => d.textContent === 'ECN-marked');
		return !!dt && /[MG]b\/s/.test(dt.nextElementSibling.textContent);
	})()`, 10*time.Second)

	// A tenant signs in: it sees its own intent (not another tenant's),
	// and selecting it highlights exactly its paths.
	tok := tenant(t, h, "vision", 0, 0)
	other := tenant(t, h, "speech", 0, 0)
	var mine, theirs models.Intent
	h.Do(t, "POST", "/api/v1/intents", tok, spec("resnet", "h1-1", "h3-2", 60, 49152, 2), &mine)
	h.Do(t, "POST", "/api/v1/intents", other, spec("whisper", "h2-1", "h4-1", 10, 49152, 1), &theirs)
	if mine.ID == "" || theirs.ID == "" {
		t.Fatal("intents not created")
	}
	signInWith(t, ctx, tok)
	poll("the tenant's intent listed", fmt.Sprintf(`window.accelnet.intents.some((i) => i.id === %q && i.state === 'Installed')`, mine.ID), 15*time.Second)
	if ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.accelnet.intents.map((i) => i.tenant)`)); err != nil || slices.Contains(ids, "speech") {
		t.Errorf("the tenant's dashboard lists %v (%v)", ids, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#intent-list button[data-id=%q]`, mine.ID)))); err != nil {
		t.Fatal(err)
	}
	// The intent's paths as they are now: a placement may move its flows
	// after it was created (the dashboard follows them live).
	wantLit := func(in models.Intent) []string {
		lit := []string{"host:h1-1"}
		for _, f := range in.Status.Flows {
			for _, e := range f.Path {
				id := "host:h3-2"
				if l, ok := snap.LinkAt(e); ok {
					id = string(l.ID())
				}
				if !slices.Contains(lit, id) {
					lit = append(lit, id)
				}
			}
		}
		slices.Sort(lit)
		return lit
	}
	poll("the intent's paths highlighted", `window.accelnet.highlighted.length > 0`, 5*time.Second)
	var said string
	h.Eventually(t, 10*time.Second, "exactly the intent's links highlighted", func() bool {
		want := wantLit(intentState(t, h, tok, mine.ID))
		lit, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.accelnet.highlighted`))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(lit)
		if now := fmt.Sprintf("highlighted %v, the intent's links %v", lit, want); !slices.Equal(lit, want) && now != said {
			said = now
			t.Log(now)
		}
		return slices.Equal(lit, want)
	})
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactDir(t), "dashboard-intent.png"), png, 0o644)
	}

	// An operator drains spine2: the page marks it and its links.
	var drain struct {
		ID string `json:"id"`
	}
	if r := h.Do(t, "POST", "/api/v1/drains", h.OperatorToken, models.Drain{Switch: "spine2", Reason: "browser test"}, &drain); r.StatusCode != 201 {
		t.Fatalf("drain spine2: HTTP %d", r.StatusCode)
	}
	var spine2Link string
	for _, a := range snap.Neighbors("spine2") {
		spine2Link = string(a.Link)
	}
	poll("spine2 shown drained", fmt.Sprintf(`window.accelnet.switchDrained('spine2') && window.accelnet.linkState(%q) === 'drained'`, spine2Link), 15*time.Second)
	h.Do(t, "DELETE", "/api/v1/drains/"+drain.ID, h.OperatorToken, nil, nil)
	poll("spine2 back in service", `!window.accelnet.switchDrained('spine2')`, 15*time.Second)

	// Two cables swapped: link discovery finds both links miswired, and
	// the page draws them so (and says what each end hears instead).
	l1, _ := snap.LinkAt(models.Endpoint{Switch: "leaf1", Port: 5})
	l2, _ := snap.LinkAt(models.Endpoint{Switch: "leaf2", Port: 5})
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultSwapCables, Target: string(l1.ID()), With: string(l2.ID())}); err != nil {
		t.Fatal(err)
	}
	poll("the swapped links shown miswired", fmt.Sprintf(`window.accelnet.linkState(%q) === 'miswired' && window.accelnet.linkState(%q) === 'miswired'`, l1.ID(), l2.ID()), 20*time.Second)
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultRestoreCables}); err != nil {
		t.Fatal(err)
	}
	poll("the links shown up again", fmt.Sprintf(`window.accelnet.linkState(%q) === 'up'`, l1.ID()), 20*time.Second)

	// A link goes down in the fabric; the page shows it within seconds.
	down := snap.Links()[0].ID()
	if err := h.Fabric.InjectFault(fabricsim.FaultSpec{Kind: fabricsim.FaultLinkDown, Target: string(down)}); err != nil {
		t.Fatal(err)
	}
	poll("link "+string(down)+" shown down", fmt.Sprintf(`window.accelnet.linkState(%q) === 'down'`, string(down)), 15*time.Second)
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactDir(t), "dashboard-link-down.png"), png, 0o644)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// signInWith types tok into the dashboard's sign-in form and submits it.
func signInWith(t *testing.T, ctx context.Context, tok string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.SendKeys(chromedp.CSS("#token"), tok)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#login button"))); err != nil {
		t.Fatal(err)
	}
}

// openDashboard opens the dashboard of h in headless Chromium (closed
// when the test ends); poll waits for a JavaScript condition, and
// consoleErrors returns what the page logged as errors so far.
func openDashboard(t *testing.T, bin string, h *fabrictest.Harness) (context.Context, func(what, expr string, timeout time.Duration), func() []string) {
	t.Helper()
	return openDashboardAt(t, bin, h.API.URL)
}

// openDashboardAt is openDashboard for the server at url.
func openDashboardAt(t *testing.T, bin, url string) (context.Context, func(what, expr string, timeout time.Duration), func() []string) {
	t.Helper()
	return openDashboardSized(t, bin, url, 1280, 800)
}

// openDashboardSized is openDashboardAt in a window of width × height.
func openDashboardSized(t *testing.T, bin, url string, width, height int) (context.Context, func(what, expr string, timeout time.Duration), func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium puts its singleton socket in a directory of its own in
		// TMPDIR and leaves it behind: in the test's, it goes with it.
		chromedp.Env("TMPDIR="+t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)

	var mu sync.Mutex
	var consoleErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value))
				}
				consoleErrors = append(consoleErrors, strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, e.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}

	poll := func(what, expr string, timeout time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatalf("open dashboard: %v", err)
	}
	return ctx, poll, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(consoleErrors)
	}
}

// TestDashboardElephants: an operator's dashboard lists the elephants
// sampling found (a tenant's does not show the section).
func TestDashboardElephants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) { o.Elephants.SampleOneIn = 1024 })
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	topo := oneElephant(t, h)
	ctx, poll, consoleErrors := openDashboard(t, bin, h)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	signIn := func(tok string) { signInWith(t, ctx, tok) }
	signIn(h.OperatorToken)
	poll("the elephant listed", fmt.Sprintf(`!document.getElementById('elephants-section').hidden &&
		window.accelnet.elephants.some((e) => e.src === %q && e.dst === %q && e.src_port === 50000 && e.pinned) &&
		document.getElementById('elephant-list').textContent.includes(%q)`, topo.Hosts[0].Name, topo.Hosts[3].Name, topo.Hosts[0].Name), 15*time.Second)
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactDir(t), "dashboard-elephants.png"), png, 0o644)
	}
	// A tenant: no elephants section.
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
		t.Fatal(err)
	}
	signIn(tenant(t, h, "vision", 0, 0))
	poll("a tenant's page without the section", `document.getElementById('who').textContent === 'tenant vision' && document.getElementById('elephants-section').hidden`, 15*time.Second)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// TestDashboardOperatorView: what a new operator tripped over. A refused
// token says so where it is seen (it only changed grey placeholder text);
// a switch's per-table entry counts stay (the once-a-second redraw put the
// total back); a long elephant list shows its biggest ten and a count,
// expandable; a lost connection greys the map out, not just the badge.
func TestDashboardOperatorView(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 4, 4), func(o *stack.Config) { o.Elephants.SampleOneIn = 1024 })
	h.Eventually(t, 20*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, poll, consoleErrors := openDashboard(t, bin, h)
	poll("the dashboard to draw", `window.accelnet && window.accelnet.ready`, 30*time.Second)
	signIn := func(tok string) { signInWith(t, ctx, tok) }
	signIn("anet_not-a-token")
	poll("'token refused' shown", `(() => { const e = document.getElementById('login-error'); return !e.hidden && e.textContent === 'token refused'; })()`, 15*time.Second)

	signIn(h.OperatorToken)
	poll("the error gone once signed in", `document.getElementById('login-error').hidden && document.getElementById('who').textContent === 'operator'`, 15*time.Second)
	poll("more than ten elephants, ten shown", `window.accelnet.elephants.length > 10 &&
		document.querySelectorAll('#elephant-list li').length === 10 &&
		document.getElementById('elephants-toggle').textContent === 'show all ' + window.accelnet.elephants.length`, 30*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#elephants-toggle"))); err != nil {
		t.Fatal(err)
	}
	poll("every elephant shown", `document.querySelectorAll('#elephant-list li').length === window.accelnet.elephants.length`, 10*time.Second)

	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.accelnet.select('switch', 'leaf1'), true)`)); err != nil {
		t.Fatal(err)
	}
	poll("leaf1's entries per table", `document.getElementById('entry-counts').textContent.includes('routes')`, 15*time.Second)
	updates, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.accelnet.updates`))
	if err != nil {
		t.Fatal(err)
	}
	poll("two more updates, the counts still shown", fmt.Sprintf(`window.accelnet.updates >= %d && document.getElementById('entry-counts').textContent.includes('routes')`, updates+2), 15*time.Second)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}

	// The controller goes away: nothing listens, open streams are cut.
	h.API.Listener.Close()
	h.API.CloseClientConnections()
	poll("the map greyed out", `document.getElementById('view').classList.contains('stale') && document.getElementById('status').classList.contains('lost')`, 30*time.Second)
}

// TestDashboardPodOverview: a fat-tree too big to draw switch by switch
// (k=8: 80 switches, which had no labels and a core layer nobody could
// click) opens on an overview of its pods; clicking a pod opens it with
// every one of its switches labelled; selecting a switch of another pod
// from the list opens that pod.
func TestDashboardPodOverview(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	topo, err := topology.FatTree(8, 100)
	if err != nil {
		t.Fatal(err)
	}
	// 80 switches: counters and telemetry at the loop tests' pace, not the
	// harness's 100 ms (under -race beside other load the fabric did not
	// come up in time), and no sampling (not needed here).
	h := fabrictest.NewWith(t, topo, func(o *stack.Config) {
		o.CounterInterval, o.TelemetryInterval, o.Elephants.SampleOneIn = 500*time.Millisecond, 500*time.Millisecond, 0
	})
	h.Eventually(t, 60*time.Second, "every switch in sync", func() bool { return h.Converged() == nil })
	if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 100, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, poll, consoleErrors := openDashboard(t, bin, h)
	poll("the overview of 8 pods", `window.accelnet && window.accelnet.ready && window.accelnet.view === 'overview' &&
		window.accelnet.pods.length === 8 && window.accelnet.labelled.includes('pod 8')`, 30*time.Second)
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactDir(t), "dashboard-fattree8-pods.png"), png, 0o644)
	}
	type box struct{ Pod, X, Y, W, H float64 }
	boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]box](`window.accelnet.podBoxes`))
	if err != nil || len(boxes) != 8 {
		t.Fatalf("pod boxes %v, %v", boxes, err)
	}
	// The canvas's offset in the page, to click inside a box.
	off, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.getElementById('fabric').getBoundingClientRect(); return [r.left, r.top]; })()`))
	if err != nil {
		t.Fatal(err)
	}
	b := boxes[2]
	if _, err := chromedp.Run(ctx, chromedp.MouseClickXY(off[0]+b.X+b.W/2, off[1]+b.Y+b.H/2)); err != nil {
		t.Fatal(err)
	}
	var pod3 []string
	for _, sw := range topo.Switches {
		if sw.Pod == int(b.Pod) {
			pod3 = append(pod3, string(sw.Name))
		}
	}
	want, _ := json.Marshal(pod3)
	poll("the pod opened, its switches labelled", fmt.Sprintf(`window.accelnet.view === 'pod' && window.accelnet.pod === %d &&
		%s.every((n) => window.accelnet.labelled.includes(n))`, int(b.Pod), want), 15*time.Second)
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(artifactDir(t), "dashboard-fattree8-pod.png"), png, 0o644)
	}
	var other models.Switch
	for _, sw := range topo.Switches {
		if sw.Pod == 7 && sw.Role == models.RoleLeaf {
			other = sw
			break
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#switch-list button[data-name=%q]`, other.Name)))); err != nil {
		t.Fatal(err)
	}
	poll("its pod opened", fmt.Sprintf(`window.accelnet.view === 'pod' && window.accelnet.pod === 7 && window.accelnet.labelled.includes(%q) &&
		document.getElementById('details').textContent.includes(%q)`, other.Name, other.Name), 15*time.Second)
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %v", errs)
	}
}

// TestDashboardScreenshots makes the screenshots in docs/: the default
// demo's fabric (leafspine:8x8x4) and a k=8 fat-tree's overview and one
// of its pods, each under a permutation. Run on demand:
// ACCELNET_SCREENSHOTS=1 go test ./internal/fabrictest -run TestDashboardScreenshots
func TestDashboardScreenshots(t *testing.T) {
	if os.Getenv("ACCELNET_SCREENSHOTS") == "" {
		t.Skip("set ACCELNET_SCREENSHOTS=1 to remake the screenshots in docs/")
	}
	bin := chromium(t)
	for _, tc := range []struct{ spec, file string }{
		{"leafspine:8x8x4@400", "dashboard-demo"},
		{"fattree:8@400", "dashboard-fattree8"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			topo, err := topology.Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			h := fabrictest.New(t, topo)
			h.Eventually(t, 5*time.Minute, "every switch in sync", func() bool { return h.Converged() == nil })
			if _, err := h.Fabric.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: 400, Seed: 1}); err != nil {
				t.Fatal(err)
			}
			shootDashboard(t, bin, h.API.URL, tc.file)
		})
	}
}

// shootDashboard saves screenshots of the dashboard at url in docs/: as
// it opens, and one of its pods if it has pods.
func shootDashboard(t *testing.T, bin, url, file string) {
	ctx, poll, _ := openDashboardAt(t, bin, url)
	poll("load drawn", `window.accelnet && window.accelnet.ready && window.accelnet.maxUtilization() > 0.3`, 60*time.Second)
	shot := func(name string) {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shot(file)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.accelnet.pods.length > 0 && (window.accelnet.setView('pod', 2), true))`)); err == nil {
		if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.accelnet.view`)); v == "pod" {
			shot(file + "-pod2")
		}
	}
}

// TestDashboardScreenshotOf saves screenshots of a dashboard already
// running (a fabric too big to emulate beside a browser in one test), as
// docs/$ACCELNET_SCREENSHOT_NAME.png: e.g. accelnet demo --topology
// fattree:16 --http-addr 127.0.0.1:18082, then
// ACCELNET_SCREENSHOT_URL=http://127.0.0.1:18082 ACCELNET_SCREENSHOT_NAME=dashboard-fattree16 go test ./internal/fabrictest -run TestDashboardScreenshotOf
func TestDashboardScreenshotOf(t *testing.T) {
	url, name := os.Getenv("ACCELNET_SCREENSHOT_URL"), os.Getenv("ACCELNET_SCREENSHOT_NAME")
	if url == "" || name == "" {
		t.Skip("set ACCELNET_SCREENSHOT_URL and ACCELNET_SCREENSHOT_NAME")
	}
	shootDashboard(t, chromium(t), url, name)
}
