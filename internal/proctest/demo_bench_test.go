package proctest_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
)

// BenchmarkDemo runs `accelnet demo` on a fabric of the size
// ACCELNET_DEMO_TOPOLOGY gives (default fattree:32), with no flag but
// the fabric's, as a user types it, and measures
//
//   - ready_s: the process's start → /readyz answers 200;
//
//   - ready_share: the share of /readyz polls (every 0.5 s, 2 s to answer)
//     that answered 200 over the ACCELNET_DEMO_WINDOW after it (default
//     60s): the demo stays up, not only comes up;
//
//   - rss_mib, peak_rss_mib: its resident memory at the window's end, and
//     at its peak.
//
//     ACCELNET_DEMO_TOPOLOGY=fattree:48 go test ./internal/proctest -run '^$' -bench 'Demo$' -benchtime 1x -timeout 30m
func BenchmarkDemo(b *testing.B) {
	spec := envOr("ACCELNET_DEMO_TOPOLOGY", "fattree:32")
	window, err := time.ParseDuration(envOr("ACCELNET_DEMO_WINDOW", "60s"))
	if err != nil {
		b.Fatalf("ACCELNET_DEMO_WINDOW: %v", err)
	}
	for range b.N { // one run is the measurement: -benchtime 1x
		addr := fabrictest.FreeAddr(b)
		t0 := time.Now()
		demo := proctest.Start(b, "accelnet", proctest.Bin(b, "accelnet"), "demo", "--topology", spec, "--http-addr", addr,
			"--data-dir", filepath.Join(b.TempDir(), "data"))
		client := &http.Client{Timeout: 2 * time.Second}
		ready := func() bool {
			resp, err := client.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		proctest.Wait(b, 10*time.Minute, "the demo ready", func() error {
			if demo.Exited() {
				b.Fatalf("the demo exited:\n%s", demo.Log())
			}
			if !ready() {
				return fmt.Errorf("not ready")
			}
			return nil
		})
		readyAfter := time.Since(t0)
		polls, up := 0, 0
		tick := time.NewTicker(500 * time.Millisecond)
		for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
			polls++
			if ready() {
				up++
			}
		}
		tick.Stop()
		now, peak := rss(b, demo.Pid())
		demo.Stop()
		b.ReportMetric(readyAfter.Seconds(), "ready_s")
		b.ReportMetric(float64(up)/float64(polls), "ready_share")
		b.ReportMetric(float64(now>>20), "rss_mib")
		b.ReportMetric(float64(peak>>20), "peak_rss_mib")
		b.Logf("%s: ready %s after the process started; ready in %d of %d polls over %s; %d MiB resident, %d at peak",
			spec, readyAfter.Round(time.Millisecond), up, polls, window, now>>20, peak>>20)
	}
}
