package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store/embedded"
)

func testStore(t *testing.T) *Store {
	t.Helper()
	e, err := embedded.Start(t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := Dial(e.Endpoints, e.ClientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return NewStore(cli, 5*time.Second)
}

// TestStore: a transaction whose comparison fails is ErrConflict and
// writes nothing; List reads a prefix at a past revision; JSON round-trips;
// a missing key is not found; the topology is checked on its mod revision.
func TestStore(t *testing.T) {
	s := testStore(t)
	ctx := t.Context()
	key := Prefix + "test/a"
	rev1, err := s.Commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{clientv3.OpPut(key, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{clientv3.OpPut(key, "2")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	if err := s.PutJSON(ctx, Prefix+"test/b", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	now, rev, err := s.List(ctx, Prefix+"test/", 0)
	if err != nil || len(now) != 2 || rev <= rev1 {
		t.Fatalf("list: %d keys at %d, %v; want 2 after revision %d", len(now), rev, err, rev1)
	}
	then, _, err := s.List(ctx, Prefix+"test/", rev1)
	if err != nil || len(then) != 1 || string(then[0].Value) != "1" || then[0].Revision != rev1 {
		t.Fatalf("list at revision %d: %+v, %v; want a=1 alone", rev1, then, err)
	}
	var got map[string]int
	if found, _, err := s.GetJSON(ctx, Prefix+"test/b", &got); !found || err != nil || got["n"] != 2 {
		t.Fatalf("get b: %v %v %v", found, got, err)
	}
	if found, _, err := s.GetJSON(ctx, Prefix+"test/none", &got); found || err != nil {
		t.Fatalf("get a missing key: found %v, %v", found, err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeletePrefix(ctx, Prefix+"test/"); n != 1 || err != nil {
		t.Fatalf("delete prefix: %d keys, %v; want 1", n, err)
	}

	if _, _, _, err := s.Topology(ctx); !errors.Is(err, ErrNoTopology) {
		t.Fatalf("topology before any: %v, want ErrNoTopology", err)
	}
	topo := models.Topology{Switches: []models.Switch{{Name: "leaf1", Role: models.RoleLeaf, DeviceID: 1}}}
	if _, err := s.PutTopology(ctx, topo, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutTopology(ctx, topo, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("second first topology: %v, want ErrConflict", err)
	}
	if got, mod, _, err := s.Topology(ctx); err != nil || len(got.Switches) != 1 || mod == 0 {
		t.Fatalf("topology: %+v at %d, %v", got, mod, err)
	}
}

// TestPutJSONIfUnchanged: a put decided on a listing stands while nothing
// under the prefix was written since; a write after the listing makes it a
// conflict, a deletion does not.
func TestPutJSONIfUnchanged(t *testing.T) {
	s := testStore(t)
	ctx := t.Context()
	prefix := Prefix + "d/"
	if err := s.PutJSON(ctx, prefix+"a", 1); err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.List(ctx, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutJSONIfUnchanged(ctx, prefix, rev, prefix+"b", 2); err != nil {
		t.Fatalf("nothing changed since the listing: %v", err)
	}
	if err := s.PutJSONIfUnchanged(ctx, prefix, rev, prefix+"c", 3); !errors.Is(err, ErrConflict) {
		t.Fatalf("b was written after the listing: %v, want ErrConflict", err)
	}
	_, rev, err = s.List(ctx, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, prefix+"a"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJSONIfUnchanged(ctx, prefix, rev, prefix+"c", 3); err != nil {
		t.Fatalf("only a deletion since the listing: %v", err)
	}
	if err := s.PutJSONIfUnchanged(ctx, Prefix+"empty/", 1, Prefix+"empty/x", 1); err != nil {
		t.Fatalf("an empty prefix: %v", err)
	}
}

// TestWatches: Follow lists then streams changes; WatchKey streams one
// key's changes from a revision, deletions marked.
func TestWatches(t *testing.T) {
	s := testStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := s.PutJSON(ctx, Prefix+"f/x", 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	changed := make(chan struct{}, 1) // a callback ran: look again
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	followed := map[string]string{}
	resets := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.Follow(ctx, Prefix+"f/", func(kvs []KV, reset bool) {
			mu.Lock()
			defer mu.Unlock()
			defer poke()
			if reset {
				resets++
				clear(followed)
			}
			for _, kv := range kvs {
				if kv.Deleted {
					delete(followed, kv.Key)
				} else {
					followed[kv.Key] = string(kv.Value)
				}
			}
		})
	})
	_, _, rev, err := s.Topology(ctx)
	if !errors.Is(err, ErrNoTopology) {
		t.Fatal(err)
	}
	var watched []KV
	wg.Go(func() {
		_ = s.WatchKey(ctx, KeyTopology, rev+1, func(kv KV) {
			mu.Lock()
			defer mu.Unlock()
			defer poke()
			watched = append(watched, kv)
		})
	})
	if err := s.PutJSON(ctx, Prefix+"f/y", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, Prefix+"f/x"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJSON(ctx, KeyTopology, models.Topology{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, KeyTopology); err != nil {
		t.Fatal(err)
	}
	backstop := time.After(30 * time.Second)
	for {
		mu.Lock()
		done := len(followed) == 1 && followed[Prefix+"f/y"] == "2" && len(watched) == 2
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
		case <-backstop:
			mu.Lock()
			t.Fatalf("followed %v (resets %d), watched %+v", followed, resets, watched)
		}
	}
	mu.Lock()
	if resets != 1 || watched[0].Deleted || !watched[1].Deleted {
		t.Errorf("resets %d, watched %+v: want one listing, a put then a delete", resets, watched)
	}
	mu.Unlock()
	cancel()
	wg.Wait()
}

// TestNewID: IDs of later times sort after earlier ones; two at the same
// millisecond differ.
func TestNewID(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	ids := []string{NewID(t0), NewID(t0.Add(time.Millisecond)), NewID(t0.Add(time.Hour))}
	if !slices.IsSorted(ids) {
		t.Errorf("IDs out of time order: %v", ids)
	}
	if a, b := NewID(t0), NewID(t0); a == b || !strings.HasPrefix(a, ids[0][:11]) {
		t.Errorf("two IDs at one millisecond: %s %s", a, b)
	}
}

// TestChanges: what was written under a prefix after a revision comes in
// order (puts and deletions, nothing from outside the prefix), with the
// revision it brings a copy to and the prefix's key count there; with
// nothing written since, it answers at once; compacted revisions are an
// error.
func TestChanges(t *testing.T) {
	s := testStore(t)
	ctx := t.Context()
	put := func(key string, v int) int64 {
		t.Helper()
		if err := s.PutJSON(ctx, key, v); err != nil {
			t.Fatal(err)
		}
		_, rev, err := s.List(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	put(Prefix+"c/a", 1)
	since := put(Prefix+"c/b", 2)
	put(Prefix+"c/a", 3)
	put(Prefix+"other", 4)
	if err := s.Delete(ctx, Prefix+"c/b"); err != nil {
		t.Fatal(err)
	}
	last := put(Prefix+"c/c", 5)

	changes, rev, count, err := s.Changes(ctx, Prefix+"c/", since)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range changes {
		got = append(got, fmt.Sprintf("%s deleted=%v %s", strings.TrimPrefix(kv.Key, Prefix), kv.Deleted, kv.Value))
	}
	want := []string{"c/a deleted=false 3", "c/b deleted=true ", "c/c deleted=false 5"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes since %d: %q, want %q", since, got, want)
	}
	if rev < last || count != 2 {
		t.Fatalf("brought to revision %d with %d keys; want at least %d with 2", rev, count, last)
	}
	if changes, rev, count, err := s.Changes(ctx, Prefix+"c/", rev); err != nil || len(changes) != 0 || count != 2 {
		t.Fatalf("nothing written since %d: %d changes, %d keys, %v", rev, len(changes), count, err)
	}
	if _, err := s.cli.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Changes(ctx, Prefix+"c/", since); err == nil {
		t.Fatal("changes from compacted revisions answered")
	}
}

// TestInProcessClient: the embedded member's in-process client commits,
// lists and watches as a client over the network does, and once the
// member stops its errors are ErrStoreUnavailable, not hangs.
func TestInProcessClient(t *testing.T) {
	e, err := embedded.Start(t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli := e.InProcess()
	t.Cleanup(func() { cli.Close() })
	s := NewStore(cli, 2*time.Second)
	ctx := t.Context()
	seen := make(chan KV, 4)
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		_ = s.Follow(fctx, Prefix+"inproc/", func(kvs []KV, reset bool) {
			for _, kv := range kvs {
				seen <- kv
			}
		})
	}()
	key := Prefix + "inproc/a"
	rev, err := s.Commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{clientv3.OpPut(key, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{clientv3.OpPut(key, "2")}); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	select {
	case kv := <-seen:
		if kv.Key != key || string(kv.Value) != "1" || kv.Revision != rev {
			t.Fatalf("followed %+v, want %s=1 at %d", kv, key, rev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow saw nothing of the commit in 30 s")
	}
	stop()
	<-followed
	e.Close()
	if _, _, err = s.List(ctx, Prefix+"inproc/", 0); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("list after the member stopped: %v, want ErrStoreUnavailable", err)
	}
	if _, err = s.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, "3")}); !errors.Is(err, ErrStoreUnavailable) {
		t.Errorf("commit after the member stopped: %v, want ErrStoreUnavailable", err)
	}
}
