package intents

import (
	"context"
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store/storetest"
	"github.com/accelnet/accelnet/topology/topotest"
)

// boundedStore refuses a transaction over max operations or comparisons,
// as etcd's --max-txn-ops does.
type boundedStore struct {
	Store
	max int
	mu  sync.Mutex
	// largest is the most operations one commit carried.
	largest int
}

func (s *boundedStore) Commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (int64, error) {
	if len(ops) > s.max || len(cmps) > s.max {
		return 0, fmt.Errorf("etcdserver: too many operations in txn request (%d ops, %d comparisons)", len(ops), len(cmps))
	}
	s.mu.Lock()
	s.largest = max(s.largest, len(ops))
	s.mu.Unlock()
	return s.Store.Commit(ctx, cmps, ops)
}

// TestBatchesShareCommitsWithinEtcdsBound: single creates and atomic
// batches sent together go into the loop's commits, and an atomic batch
// that does not fit in what is left of a commit's budget starts the next
// one instead of overflowing it: every request is answered with its
// intents, none with etcd's "too many operations".
func TestBatchesShareCommitsWithinEtcdsBound(t *testing.T) {
	snap := topotest.LeafSpine(t, 2, 2, 8)
	hosts := snap.Hosts()
	st, _ := storetest.Etcd(t)
	bounded := &boundedStore{Store: st, max: 24}
	m, err := New(Config{Store: bounded, Auth: tenantList{"ml": {Name: "ml"}}, MaxTxnOps: 24})
	if err != nil {
		t.Fatal(err)
	}
	m.SetFabric(snap, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	flow := func(i int) models.IntentSpec {
		src, dst := hosts[i%8], hosts[8+(i/8)%8] // leaf1 → leaf2
		return models.IntentSpec{Name: fmt.Sprint("f", i), Src: src.Name, Dst: dst.Name, Gbps: 0.1,
			SrcPorts: models.PortRange{First: uint16(1000 + i), Last: uint16(1000 + i)}}
	}
	for { // retried until the manager has loaded and planned
		_, err := m.Create(ctx, CreateRequest{Tenant: "ml", Spec: flow(200)})
		if err == nil {
			break
		}
		if !waitRetry(ctx) {
			t.Fatalf("first create: %v", err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for c := range 8 {
		wg.Go(func() { // single creates
			for i := range 6 {
				if _, err := m.Create(ctx, CreateRequest{Tenant: "ml", Spec: flow(c*6 + i)}); err != nil {
					errs <- fmt.Errorf("create %d: %w", c*6+i, err)
				}
			}
		})
		wg.Go(func() { // atomic batches of 10: 10 operations each, with their keys 20
			specs := make([]models.IntentSpec, 10)
			for i := range specs {
				specs[i] = flow(100 + c*10 + i)
			}
			res, err := m.CreateMany(ctx, BatchRequest{Tenant: "ml", Specs: specs, Atomic: true, IdempotencyKey: fmt.Sprint("job", c), BodyDigest: "d"})
			switch {
			case err != nil:
				errs <- fmt.Errorf("batch %d: %w", c, err)
			case len(res) != 10:
				errs <- fmt.Errorf("batch %d: %d results", c, len(res))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if all, _ := m.List(Scope{Operator: true}, ListOptions{Limit: 1000}); len(all) != 1+48+80 {
		t.Errorf("%d intents stored, want %d", len(all), 1+48+80)
	}
	if bounded.largest > 24 {
		t.Errorf("a commit carried %d operations", bounded.largest)
	}
}
