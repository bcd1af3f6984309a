package intents

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/storetest"
)

// listCounter counts the store's listings of every intent key.
type listCounter struct {
	*store.Store
	listings int
}

func (l *listCounter) ListSince(ctx context.Context, prefix string, since int64) ([]store.KV, []store.KV, int64, error) {
	l.listings++
	return l.Store.ListSince(ctx, prefix, since)
}

// TestTakeoverCatchesUpTheFollowersCopy: a follower's copy of the
// intents, current at some revision, is caught up at a new term instead
// of read again: intents written since are read (and only those: by a
// watch from the copy's revision, no listing), deleted ones dropped, the
// rest kept as the very entries the follower decoded. What comes out is
// what reading everything gives — also when the revisions since the copy
// were compacted away (then the keys are listed). A copy that disagrees
// with etcd (an entry missing or at another revision) is read again in
// full.
func TestTakeoverCatchesUpTheFollowersCopy(t *testing.T) {
	st, cli := storetest.Etcd(t)
	ctx := context.Background()
	put := func(tenant models.TenantName, id string, gbps float64) {
		t.Helper()
		in := models.Intent{ID: id, Tenant: tenant, Spec: models.IntentSpec{Name: id, Src: "h1-1", Dst: "h2-1", Gbps: gbps}}
		in.Status.State = models.StateInstalled
		if err := st.PutJSON(ctx, intentKey(tenant, id), in); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		put(models.TenantName(fmt.Sprintf("t%d", i%3)), fmt.Sprintf("i%02d", i), float64(i+1))
	}

	counted := &listCounter{Store: st}
	m, err := New(Config{Store: counted, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	// Follow until the copy holds all 50, then stop, as a follower does
	// when its term begins.
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Follow(fctx, store.KeyIntents, m.applyFollowed)
	}()
	backstop := time.After(time.Minute)
	for {
		m.mu.Lock()
		n := len(m.p.all)
		if m.followed.ch == nil {
			m.followed.ch = make(chan struct{})
		}
		grew := m.followed.ch
		m.mu.Unlock()
		if n == 50 {
			break
		}
		select {
		case <-grew:
		case <-backstop:
			t.Fatalf("the follower's copy has %d of 50 intents after a minute", n)
		}
	}
	stop()
	<-done
	copied := map[string]*entry{}
	m.mu.RLock()
	for id, e := range m.p.all {
		copied[id] = e
	}
	m.mu.RUnlock()

	// While nobody follows: one intent changes, one goes, one is new.
	put("t1", "i01", 99)
	if err := st.Delete(ctx, intentKey("t2", "i02")); err != nil {
		t.Fatal(err)
	}
	put("t0", "new", 7)

	full := func() map[string]models.Intent {
		kvs, _, err := st.List(ctx, store.KeyIntents, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]models.Intent{}
		for _, kv := range kvs {
			in, ok := decodeIntent(m.log, kv.Key, kv.Value, kv.Revision)
			if !ok {
				t.Fatalf("undecodable %s", kv.Key)
			}
			out[in.ID] = in
		}
		return out
	}
	intentsOf := func(all map[string]*entry) map[string]models.Intent {
		out := map[string]models.Intent{}
		for id, e := range all {
			out[id] = e.in
		}
		return out
	}
	// What a term loads: loadIntents' intents, or, caught up through
	// etcd's changes, the follower's copy with them applied (as load does).
	loaded := func() (map[string]*entry, error) {
		all, _, changes, caughtUp, err := m.loadIntents(ctx)
		if caughtUp {
			m.mu.RLock()
			all = maps.Clone(m.p.all)
			m.mu.RUnlock()
			apply(all, changes)
		}
		return all, err
	}
	all, err := loaded()
	if err != nil {
		t.Fatal(err)
	}
	want := full()
	if got := intentsOf(all); !reflect.DeepEqual(got, want) {
		t.Fatalf("caught up: %d intents, want the %d etcd has: %v", len(got), len(want), got)
	}
	if all["i01"].in.Spec.Gbps != 99 || all["new"] == nil || all["i02"] != nil {
		t.Errorf("the changes made while nobody followed are not all there")
	}
	reused := 0
	for id, e := range all {
		if copied[id] == e {
			reused++
		}
	}
	if reused != 48 {
		t.Errorf("%d of the follower's entries kept, want the 48 unchanged", reused)
	}
	if counted.listings != 0 {
		t.Errorf("caught up with %d listings of every key, want none (the changes watched)", counted.listings)
	}
	m.mu.Lock()
	m.p.all = maps.Clone(copied)
	m.mu.Unlock()
	if all, err = loaded(); err != nil || !reflect.DeepEqual(intentsOf(all), want) {
		t.Fatalf("caught up a second time from the same copy: %d intents, %v", len(all), err)
	}

	// A copy that disagrees with etcd is not trusted: everything is read.
	m.mu.Lock()
	m.p.all = maps.Clone(copied)
	delete(m.p.all, "i03")
	m.mu.Unlock()
	all, err = loaded()
	if err != nil {
		t.Fatal(err)
	}
	if got := intentsOf(all); !reflect.DeepEqual(got, want) {
		t.Fatalf("a copy missing an intent gave %d intents, want %d", len(got), len(want))
	}
	if all["i04"] == copied["i04"] {
		t.Error("a copy that disagrees with etcd was kept in part")
	}

	// The revisions since the copy compacted away: the keys are listed.
	listed := counted.listings
	now, err := cli.Get(ctx, "compact-here")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, now.Header.Revision); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.p.all = maps.Clone(copied)
	m.mu.Unlock()
	if all, err = loaded(); err != nil || !reflect.DeepEqual(intentsOf(all), want) {
		t.Fatalf("caught up after a compaction: %d intents, %v", len(all), err)
	}
	if counted.listings != listed+1 {
		t.Errorf("after a compaction: %d listings, want 1", counted.listings-listed)
	}
	if all["i04"] != copied["i04"] {
		t.Error("after a compaction the copy was not kept")
	}
}

// TestFollowerReadyOnceListed: a follower answers for the intents only
// once its copy is listed; before, every list would come back empty.
func TestFollowerReadyOnceListed(t *testing.T) {
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Ready() == nil {
		t.Fatal("ready before anything was read from etcd")
	}
	m.applyFollowed(nil, true) // the first listing: no intents at all
	if err := m.Ready(); err != nil {
		t.Fatalf("copy listed, yet: %v", err)
	}
}

// TestLoadedInstalledIntentsDoNotWait: a term (or a restart) places the
// stored intents again. Those Installed already do not wait for a
// read-back (nothing about them would change when it came, and at
// 100,000 intents the waiting was most of a new term's work under the
// manager's lock); Admitted ones wait to become Installed, Deleted ones
// to be removed. Every one's pins are on its switches either way.
func TestLoadedInstalledIntentsDoNotWait(t *testing.T) {
	snap, auth, stored := storedIntents(t, 40)
	stored[3].Status.State = models.StateAdmitted
	stored[7].Status.State = models.StateDeleted
	m := loadedManager(t, snap, auth, stored, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.housekeep(m.p.scratch(), false)
	want := map[string]bool{stored[3].ID: true, stored[7].ID: true}
	if !maps.Equal(m.p.awaiting, want) {
		t.Fatalf("awaiting a read-back after the load: %v, want only the Admitted and the Deleted intent %v", m.p.awaiting, want)
	}
	for i, in := range stored {
		if i == 7 {
			continue
		}
		for _, f := range in.Status.Flows {
			for _, hop := range f.Path {
				if _, ok := m.p.pins.at[hop.Switch][m.p.all[in.ID].flows[0].key]; !ok {
					t.Fatalf("%s (%s): no pin on %s", in.ID, in.Status.State, hop.Switch)
				}
			}
		}
	}
	for _, sw := range snap.Switches() {
		m.Overlay().Synced(sw.Name, m.p.pins.gen)
	}
	m.housekeep(m.p.scratch(), false)
	if got := m.p.all[stored[3].ID].in.Status.State; got != models.StateInstalled {
		t.Errorf("the Admitted intent is %s after its switches were read back", got)
	}
	if m.p.all[stored[7].ID] != nil || len(m.p.awaiting) != 0 {
		t.Errorf("after the read-back: the Deleted intent still there (%v), %d awaiting", m.p.all[stored[7].ID] != nil, len(m.p.awaiting))
	}
}
