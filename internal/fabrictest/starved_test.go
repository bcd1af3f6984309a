package fabrictest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
)

// burnEnv makes the test binary a burner instead of running tests:
// "cpu" spins, "disk:<dir>" writes and fsyncs a file in dir, until
// killed.
const burnEnv = "ACCELNET_TEST_BURN"

func init() {
	switch v := os.Getenv(burnEnv); {
	case v == "cpu":
		for n := 0; ; n++ {
			_ = n * n
		}
	case len(v) > 5 && v[:5] == "disk:":
		f, err := os.CreateTemp(v[5:], "burn-")
		if err != nil {
			os.Exit(1)
		}
		block := make([]byte, 1<<20)
		for i := 0; ; i++ {
			if i%64 == 0 {
				_ = f.Truncate(0)
				_, _ = f.Seek(0, 0)
			}
			_, _ = f.Write(block)
			_ = f.Sync()
		}
	}
}

// burn starts the test binary as a burner of kind, at niceness (0:
// the test's own priority, 19: the lowest); it is killed when the test
// ends.
func burn(t testing.TB, kind string, niceness int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), burnEnv+"="+kind)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a %s burner: %v", kind, err)
	}
	if niceness != 0 {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, niceness); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("renice the %s burner to %d: %v", kind, niceness, err)
		}
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// TestLeadershipBesideBurners: a single replica with its etcd embedded,
// at the command line's lease (2 s), beside two CPU burners and a disk
// burner that fsyncs without pause on etcd's disk, for seven leases,
// keeps deciding: every intent asked for meanwhile is admitted and then
// deleted, each within a generous backstop, retried on 503 as a client
// retries (with its Idempotency-Key). A lease lost to starvation is
// granted again (the test revokes it once, midway), without a deadline
// a starved fsync always misses, and twice as long as the one lost.
func TestLeadershipBesideBurners(t *testing.T) {
	var etcdDir string
	h := fabrictest.NewWith(t, fabrictest.LeafSpine(2, 2, 2), func(o *stack.Config) {
		o.ElectionTTL = stack.DefaultElectionTTL
		etcdDir = o.Etcd.Dir
	})
	converged(t, h)
	tok := tenant(t, h, "starved", 0, 0)
	burn(t, "cpu", 0)
	burn(t, "cpu", 0)
	burn(t, "disk:"+etcdDir, 0)
	terms := termsBegun(t, h)
	// The burn lasts seven leases; intents are asked for one after
	// another throughout.
	start := time.Now()
	i := 0
	revoked := false
	for ; time.Since(start) < 7*stack.DefaultElectionTTL; i++ {
		if !revoked && time.Since(start) > 2*stack.DefaultElectionTTL {
			// A lease lost in the middle of the burn, as a replica starved
			// past its lease loses it: leadership must be granted again
			// under the burn.
			revoked = true
			revokeTerm(t, h)
		}
		spec := spec(fmt.Sprint("s", i), "h1-1", "h2-1", 1, 1000+i%1000, 1)
		var in models.Intent
		h.Eventually(t, 2*time.Minute, fmt.Sprintf("intent %d admitted beside the burners", i), func() bool {
			var answer json.RawMessage
			r := h.Do(t, "POST", "/api/v1/intents", tok, spec, &answer, "Idempotency-Key", fmt.Sprint("starved-", i))
			return r.StatusCode == http.StatusCreated && json.Unmarshal(answer, &in) == nil
		})
		h.Eventually(t, 2*time.Minute, fmt.Sprintf("intent %d deleted beside the burners", i), func() bool {
			code := h.Do(t, "DELETE", "/api/v1/intents/"+in.ID, tok, nil, nil).StatusCode
			return code == http.StatusOK || code == http.StatusAccepted || code == http.StatusNoContent
		})
	}
	begun := termsBegun(t, h) - terms
	t.Logf("%d intents admitted and deleted in %s beside the burners; terms begun meanwhile: %v", i, time.Since(start).Round(time.Millisecond), begun)
	if begun < 1 {
		t.Errorf("no term begun after the lease was revoked")
	}
	// Every term begun meanwhile followed a lease that ended under its
	// leader (revoked, or expired in the burn): each lease twice the last
	// (or one more doubling, if another expired since begun was read).
	want := stack.DefaultElectionTTL.Seconds()
	for range int(begun) {
		want = min(2*want, 30)
	}
	if lease, _ := metric(t, h, "accelnet_leader_lease_ttl_seconds", "", ""); lease != want && lease != min(2*want, 30) {
		t.Errorf("lease of %vs after %v terms begun, want %vs", lease, begun, want)
	}
}

// revokeTerm revokes the lease of h's current term.
func revokeTerm(t *testing.T, h *fabrictest.Harness) {
	t.Helper()
	term := h.Leadership.Term()
	if term == nil {
		return // lost already: it is being granted again
	}
	resp, err := h.Etcd.Get(context.Background(), term.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the term's key: %v %v", resp, err)
	}
	if _, err := h.Etcd.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
}

// termsBegun is how many terms h's replica began as leader.
func termsBegun(t *testing.T, h *fabrictest.Harness) float64 {
	t.Helper()
	v, ok := metric(t, h, "accelnet_leader_terms_total", "", "")
	if !ok {
		t.Fatal("no accelnet_leader_terms_total")
	}
	return v
}
