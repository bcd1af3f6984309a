package fabrictest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// onCluster runs accelnet for an emulated fabric against a 3-member etcd
// cluster, as production does.
func onCluster(t *testing.T) (*fabrictest.Cluster, *fabrictest.Harness, func() int64) {
	t.Helper()
	c := fabrictest.NewCluster(t, 3)
	f := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 2, 2))
	h := fabrictest.NewServeWith(t, f.Topology(), func(o *stack.Config) {
		o.Etcd.Dir, o.Etcd.Endpoints, o.Etcd.MaxTxnOps = "", c.Endpoints(), 128
	})
	converged(t, h)
	return c, h, f.WriteRPCs
}

// createRetrying creates an intent, retrying 503s with the same
// Idempotency-Key as a client should, and returns it.
func createRetrying(t *testing.T, h *fabrictest.Harness, tok string, s models.IntentSpec) models.Intent {
	t.Helper()
	var in models.Intent
	h.Eventually(t, 30*time.Second, "intent "+s.Name+" created", func() bool {
		var body map[string]any
		r := h.Do(t, "POST", "/api/v1/intents", tok, s, &body, "Idempotency-Key", s.Name)
		if r.StatusCode == http.StatusServiceUnavailable {
			return false
		}
		if r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusOK {
			t.Fatalf("create %s: HTTP %d %v", s.Name, r.StatusCode, body)
		}
		h.Do(t, "GET", "/api/v1/intents/"+body["id"].(string), tok, nil, &in)
		return true
	})
	return in
}

func allInstalled(t *testing.T, h *fabrictest.Harness, tok string, want int) {
	t.Helper()
	h.Eventually(t, 30*time.Second, fmt.Sprintf("%d intents installed", want), func() bool {
		var list api.IntentList
		h.Do(t, "GET", "/api/v1/intents", tok, nil, &list)
		n := 0
		for _, in := range list.Items {
			if in.Status.State == models.StateInstalled {
				n++
			}
		}
		if len(list.Items) > want {
			t.Fatalf("%d intents stored, want %d: a retried create was stored twice", len(list.Items), want)
		}
		return n == want
	})
}

// TestEtcdClusterMemberDown: with the etcd member that leads the raft
// group stopped, writes continue (after etcd elects another) and nothing
// acknowledged is lost; the member catches up when it returns.
func TestEtcdClusterMemberDown(t *testing.T) {
	c, h, _ := onCluster(t)
	tok := tenant(t, h, "ml", 0, 0)
	for i := range 3 {
		createRetrying(t, h, tok, spec(fmt.Sprintf("before-%d", i), "h1-1", "h2-1", 10, 49152+i, 1))
	}
	allInstalled(t, h, tok, 3)

	down := c.Leader()
	if down < 0 {
		t.Fatal("the etcd cluster has no leader")
	}
	c.Stop(down)
	for i := range 3 {
		createRetrying(t, h, tok, spec(fmt.Sprintf("during-%d", i), "h1-2", "h2-2", 10, 49152+i, 1))
	}
	allInstalled(t, h, tok, 6)

	c.Start(down)
	cli, err := store.Dial([]string{c.Endpoints()[down]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	h.Eventually(t, 30*time.Second, "the returned member has all six intents", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, store.KeyIntents, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		return err == nil && resp.Count == 6
	})
}

// TestEtcdClusterAllDown: with every member down, REST writes get 503
// with Retry-After and a message that names etcd, reads still answer,
// the switches are not touched; when the cluster returns, everything
// resumes.
func TestEtcdClusterAllDown(t *testing.T) {
	c, h, writes := onCluster(t)
	tok := tenant(t, h, "ml", 0, 0)
	createRetrying(t, h, tok, spec("before", "h1-1", "h2-1", 10, 49152, 1))
	allInstalled(t, h, tok, 1)
	before := writes()

	for i := range 3 {
		c.Stop(i)
	}
	for _, wait := range []bool{false, true} {
		if wait { // also once the leader's lease has lapsed and it stepped down
			h.Eventually(t, 15*time.Second, "the controller stops leading", func() bool { return !h.Controller.Leading() })
		}
		var p api.Problem
		r := h.Do(t, "POST", "/api/v1/intents", tok, spec("during", "h1-2", "h2-2", 10, 49152, 1), &p)
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "etcd") {
			t.Fatalf("write with etcd down (after step-down: %v): HTTP %d %+v", wait, r.StatusCode, p)
		}
	}
	var list api.IntentList
	if r := h.Do(t, "GET", "/api/v1/intents", tok, nil, &list); r.StatusCode != http.StatusOK || len(list.Items) != 1 {
		t.Errorf("read with etcd down: HTTP %d, %d intents", r.StatusCode, len(list.Items))
	}
	if w := writes(); w != before {
		t.Errorf("%d switch writes while etcd was down", w-before)
	}

	c.Start(0, 1, 2)
	createRetrying(t, h, tok, spec("after", "h1-2", "h2-2", 10, 49152, 1))
	allInstalled(t, h, tok, 2)
}
