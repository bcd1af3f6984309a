package intents

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology/topotest"
)

// stalledStore is an etcd whose commits wait until released: a slow or
// partitioned etcd, as the intent manager sees one.
type stalledStore struct {
	release chan struct{}
	commits atomic.Int64 // commits under way or done
	rev     atomic.Int64
}

func (s *stalledStore) Follow(ctx context.Context, _ string, _ func([]store.KV, bool)) error {
	<-ctx.Done()
	return nil
}

func (s *stalledStore) ListSince(context.Context, string, int64) ([]store.KV, []store.KV, int64, error) {
	return nil, nil, 1, nil
}

func (s *stalledStore) Changes(context.Context, string, int64) ([]store.KV, int64, int64, error) {
	return nil, 1, 0, nil
}

func (s *stalledStore) List(context.Context, string, int64) ([]store.KV, int64, error) {
	return nil, 1, nil
}

func (s *stalledStore) Commit(ctx context.Context, _ []clientv3.Cmp, _ []clientv3.Op) (int64, error) {
	s.commits.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.rev.Add(1) + 1, nil
}

// TestReadsGoOnDuringCommit: while an admission's etcd commit hangs, the
// manager's reads (get, list, usage, the counts /metrics scrapes) and the
// reconcilers' pin reads answer: no lock is held across the commit.
func TestReadsGoOnDuringCommit(t *testing.T) {
	snap := topotest.LeafSpine(t, 2, 2, 1)
	s := &stalledStore{release: make(chan struct{})}
	m, err := New(Config{Store: s, Auth: tenantList{"ml": {Name: "ml"}}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetFabric(snap, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	created := make(chan error, 1)
	go func() {
		// Retried until the manager has loaded and planned.
		for {
			_, err := m.Create(ctx, CreateRequest{Tenant: "ml", Spec: models.IntentSpec{Name: "a", Src: "h1-1", Dst: "h2-1", Gbps: 10, SrcPorts: models.PortRange{First: 1, Last: 1}}})
			if err == nil || ctx.Err() != nil {
				created <- err
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	backstop := time.After(30 * time.Second)
	for s.commits.Load() == 0 {
		select {
		case <-backstop:
			t.Fatal("no commit began in 30 s")
		case <-time.After(time.Millisecond):
		}
	}
	// A commit hangs now. Reads must answer (each in its own goroutine,
	// so that a blocked one fails the test rather than hangs it).
	reads := map[string]func(){
		"list":       func() { m.List(Scope{Operator: true}, ListOptions{}) },
		"usage":      func() { m.Usage("ml") },
		"counts":     func() { m.Counts() },
		"pins":       func() { m.Overlay().PinsFor("leaf1") },
		"pins ready": func() { m.Overlay().PinsReady() },
		"held":       func() { m.Held("ml") },
	}
	for name, read := range reads {
		done := make(chan struct{})
		go func() { read(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s waited on the hanging etcd commit", name)
		}
	}
	close(s.release)
	if err := <-created; err != nil {
		t.Fatalf("the admission, once etcd answered: %v", err)
	}
}
