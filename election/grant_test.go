package election

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/accelnet/accelnet/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestGrantWaitsLongerAfterTimeouts: a lease grant that ran out of time
// gives the next one twice as long, up to a minute (a starved etcd that
// needs 8 s for its fsync is granted on the third try, not never); any
// other outcome starts over at 5 s.
func TestGrantWaitsLongerAfterTimeouts(t *testing.T) {
	timedOut := []error{context.DeadlineExceeded, fmt.Errorf("grant: %w", context.DeadlineExceeded), status.Error(codes.DeadlineExceeded, "context deadline exceeded")}
	for _, err := range timedOut {
		if got := nextGrantTimeout(5*time.Second, err); got != 10*time.Second {
			t.Errorf("after %v: %s, want 10s", err, got)
		}
	}
	wait := grantTimeoutMin
	for range 10 {
		wait = nextGrantTimeout(wait, context.DeadlineExceeded)
	}
	if wait != time.Minute {
		t.Errorf("after ten timeouts: %s, want the minute at most", wait)
	}
	for _, err := range []error{nil, errors.New("connection refused"), status.Error(codes.Unavailable, "no leader")} {
		if got := nextGrantTimeout(40*time.Second, err); got != grantTimeoutMin {
			t.Errorf("after %v: %s, want %s again", err, got, grantTimeoutMin)
		}
	}
}

// TestLeaseLastsLongerAfterItExpiredWhileLeading: a lease that ends
// under its leader (revoked here, as etcd's lessor does when it runs out
// unrenewed) ends the term; the replica leads again with a lease twice as
// long, and again twice as long after that, up to leaseTTLMax.
func TestLeaseLastsLongerAfterItExpiredWhileLeading(t *testing.T) {
	_, cli := storetest.Etcd(t)
	reg := prometheus.NewRegistry()
	l := NewLeadership(cli, "http://a", time.Second, nil, reg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	defer func() { cancel(); <-done }()

	granted := func(term *Term) int64 {
		resp, err := cli.Get(t.Context(), term.Key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the term's key: %v (%d keys)", err, len(resp.Kvs))
		}
		ttl, err := cli.TimeToLive(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		return ttl.GrantedTTL
	}
	var term *Term
	waitFor(t, "a leads", func() bool { term = l.Term(); return term != nil })
	for _, want := range []int64{1, 2, 4} {
		if got := granted(term); got != want {
			t.Fatalf("term %d: lease of %ds, want %ds", term.ID, got, want)
		}
		if got := testutil.ToFloat64(l.leaseGauge); got != float64(want) {
			t.Errorf("accelnet_leader_lease_ttl_seconds %v, want %d", got, want)
		}
		resp, err := cli.Get(t.Context(), term.Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
			t.Fatal(err)
		}
		last := term
		waitFor(t, "a leads again", func() bool { term = l.Term(); return term != nil && term.ID > last.ID })
	}
	ttl := 1
	for range 10 {
		ttl = leaseTTLFor(ttl)
	}
	if ttl != 30 {
		t.Errorf("after ten expiries: %ds, want leaseTTLMax (30s)", ttl)
	}
	if leaseTTLFor(45) != 45 {
		t.Errorf("a configured lease above leaseTTLMax became %ds", leaseTTLFor(45))
	}
}
