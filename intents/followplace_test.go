package intents

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/storetest"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/topology/topotest"
)

// TestTermBeginsPlacedAsFollowed: a follower places its copy of the
// intents as it follows — listed, then each intent as it is created,
// changed or deleted — and a new term that catches the copy up keeps
// that placement, placing only what changed since. What the term holds
// then (the ledger's room between every pair of hosts, each switch's
// pins, each flow's owner, the intents waiting for a read-back, each
// tenant's usage) is what a replica that reads everything from etcd and
// places it afresh holds; and the term decides from it at once, without
// a replan. A copy placed on a fabric where some stored path no longer
// works replans in full at the term, with the same outcome as a fresh
// replica's.
func TestTermBeginsPlacedAsFollowed(t *testing.T) {
	snap := topotest.LeafSpine(t, 4, 4, 4)
	hosts := snap.Hosts()
	auth := tenantList{"a": {Name: "a"}, "b": {Name: "b"}}
	st, _ := storetest.Etcd(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	leader := newManager(t, st, auth, snap)
	lctx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan struct{})
	go func() { defer close(leaderDone); _ = leader.Run(lctx) }()
	var ids []string
	create := func(i int) {
		t.Helper()
		tenant := models.TenantName([]string{"a", "b"}[i%2])
		src, dst := hosts[i%len(hosts)], hosts[(i*7+5)%len(hosts)]
		if src.Attach.Switch == dst.Attach.Switch {
			dst = hosts[(i+len(hosts)/2)%len(hosts)]
		}
		spec := models.IntentSpec{Name: fmt.Sprint("i", i), Src: src.Name, Dst: dst.Name, Gbps: float64(1 + i%5),
			SrcPorts: models.PortRange{First: uint16(1000 + 4*i), Last: uint16(1000 + 4*i + i%3)}}
		for {
			out, err := leader.Create(ctx, CreateRequest{Tenant: tenant, Spec: spec})
			if err == nil {
				ids = append(ids, out.Intent.ID)
				return
			}
			if ctx.Err() != nil || !waitRetry(ctx) {
				t.Fatalf("create %d: %v", i, err)
			}
		}
	}
	change := func(k int) { // one update, one delete
		t.Helper()
		id := ids[k]
		in, err := leader.Get(Scope{Operator: true}, id)
		if err != nil {
			t.Fatal(err)
		}
		spec := in.Spec
		spec.Gbps += 2
		if _, err := leader.Update(ctx, Scope{Operator: true}, id, spec, AnyRevision); err != nil {
			t.Fatalf("update %s: %v", id, err)
		}
		if _, err := leader.Delete(ctx, Scope{Operator: true}, ids[k+1]); err != nil {
			t.Fatalf("delete %s: %v", ids[k+1], err)
		}
	}
	for i := range 60 {
		create(i)
	}
	change(0)

	follower := newManager(t, st, auth, snap)
	// And one that follows as long but never places its copy: its term
	// catches the copy up and replans it.
	unplaced := newManager(t, st, auth, snap)
	fctx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() { defer close(followed); _ = st.Follow(fctx, store.KeyIntents, follower.applyFollowed) }()
	unplacedFollowed := make(chan struct{})
	go func() { defer close(unplacedFollowed); _ = st.Follow(fctx, store.KeyIntents, unplaced.applyFollowed) }()
	waitCopy := func() {
		t.Helper()
		waitCopyOf(t, follower, leaderRev(t, leader))
	}
	waitCopy()
	waitCopyOf(t, unplaced, leaderRev(t, leader))
	if follower.PlacedForTerm() {
		t.Fatal("placed for a term before anything was placed")
	}
	follower.placeFollowed(ctx)
	if !follower.PlacedForTerm() {
		t.Fatal("the follower's copy is not placed")
	}
	// Written while it follows: placed one by one.
	for i := 60; i < 90; i++ {
		create(i)
	}
	change(10)
	waitCopy()
	waitCopyOf(t, unplaced, leaderRev(t, leader))
	stopFollowing()
	<-followed
	<-unplacedFollowed
	// Written after it stopped following: caught up at the term.
	for i := 90; i < 100; i++ {
		create(i)
	}
	change(20)
	stopLeader()
	<-leaderDone

	if err := follower.load(ctx); err != nil {
		t.Fatal(err)
	}
	if follower.planned != follower.fabricGen {
		t.Fatal("the term replans: the follower's placement was not kept")
	}
	fresh := newManager(t, st, auth, snap)
	if err := fresh.load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Manager{follower, fresh} {
		m.mu.Lock()
		m.replanIfDue(m.p.scratch())
		m.mu.Unlock()
	}
	samePlacement(t, follower, fresh, hosts)
	if unplaced.PlacedForTerm() {
		t.Fatal("a copy never placed says it is placed")
	}
	if err := unplaced.load(ctx); err != nil {
		t.Fatal(err)
	}
	unplaced.mu.Lock()
	unplaced.replanIfDue(unplaced.p.scratch())
	unplaced.mu.Unlock()
	samePlacement(t, unplaced, fresh, hosts)
	// The term decides at once.
	if _, err := follower.placeFor(ctx, "a", hosts[0].Name, hosts[len(hosts)-1].Name); err != nil {
		t.Fatalf("deciding in the new term: %v", err)
	}

	// A link down on the follower's fabric: some stored paths cross it,
	// so the copy is placed aside and the term replans in full.
	down := map[models.LinkID]bool{}
	for _, l := range snap.FabricLinks() {
		down[l.ID()] = true
		break
	}
	aside := newManager(t, st, auth, snap)
	aside.SetFabric(snap, down, nil)
	fctx, stopFollowing = context.WithCancel(ctx)
	followed = make(chan struct{})
	go func() { defer close(followed); _ = st.Follow(fctx, store.KeyIntents, aside.applyFollowed) }()
	follower = aside
	waitCopy()
	stopFollowing()
	<-followed
	aside.placeFollowed(ctx)
	if !aside.followed.placedValid || !aside.followed.placedAside || aside.PlacedForTerm() {
		t.Fatalf("placed %v, aside %v: a path crosses the link that is down", aside.followed.placedValid, aside.followed.placedAside)
	}
	if err := aside.load(ctx); err != nil {
		t.Fatal(err)
	}
	fresh = newManager(t, st, auth, snap)
	fresh.SetFabric(snap, down, nil)
	if err := fresh.load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Manager{aside, fresh} {
		m.mu.Lock()
		if m.planned == m.fabricGen {
			t.Error("a term whose copy has intents placed aside must replan")
		}
		m.replanIfDue(m.p.scratch())
		m.mu.Unlock()
	}
	samePlacement(t, aside, fresh, hosts)
}

// newManager is a manager on snap's fabric, deciding without leader
// election when run.
func newManager(t *testing.T, st *store.Store, auth tenantList, snap *topology.Snapshot) *Manager {
	t.Helper()
	m, err := New(Config{Store: st, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	m.SetFabric(snap, nil, nil)
	return m
}

// leaderRev is the newest revision the leader committed.
func leaderRev(t *testing.T, m *Manager) int64 {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	var rev int64
	for _, e := range m.p.all {
		rev = max(rev, e.in.Revision)
	}
	return rev
}

func waitRetry(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(10 * time.Millisecond):
		return true
	}
}

// placeFor asks the manager to place a new flow (a dry run: deciding).
func (m *Manager) placeFor(ctx context.Context, tenant models.TenantName, src, dst string) (Outcome, error) {
	return m.Create(ctx, CreateRequest{Tenant: tenant, DryRun: true, Spec: models.IntentSpec{Name: "probe", Src: src, Dst: dst, Gbps: 1,
		SrcPorts: models.PortRange{First: 60000, Last: 60000}}})
}

// samePlacement fails unless the two managers hold the same placement.
func samePlacement(t *testing.T, got, want *Manager, hosts []models.Host) {
	t.Helper()
	got.mu.RLock()
	defer got.mu.RUnlock()
	want.mu.RLock()
	defer want.mu.RUnlock()
	if len(got.p.all) != len(want.p.all) {
		t.Errorf("%d intents, want %d", len(got.p.all), len(want.p.all))
	}
	for id, e := range want.p.all {
		g := got.p.all[id]
		// Compared without times: a replan at each stamps its own.
		if g == nil || g.pinned != e.pinned || g.in.Status.State != e.in.Status.State || g.in.Revision != e.in.Revision ||
			!reflect.DeepEqual(g.in.Spec, e.in.Spec) || !reflect.DeepEqual(g.in.Status.Flows, e.in.Status.Flows) ||
			!reflect.DeepEqual(g.in.Status.ReservedGbps, e.in.Status.ReservedGbps) {
			t.Errorf("intent %s differs", id)
		}
	}
	nonEmpty := func(p map[models.SwitchID]map[models.FlowKey]uint32) map[models.SwitchID]map[models.FlowKey]uint32 {
		out := maps.Clone(p)
		maps.DeleteFunc(out, func(_ models.SwitchID, v map[models.FlowKey]uint32) bool { return len(v) == 0 })
		return out
	}
	if !reflect.DeepEqual(nonEmpty(got.p.pins.at), nonEmpty(want.p.pins.at)) {
		t.Error("the switches' pins differ")
	}
	if !reflect.DeepEqual(got.p.flowOwner, want.p.flowOwner) {
		t.Errorf("flow owners differ: %d, want %d", len(got.p.flowOwner), len(want.p.flowOwner))
	}
	if !reflect.DeepEqual(got.p.awaiting, want.p.awaiting) {
		t.Errorf("%d intents await a read-back, want %d", len(got.p.awaiting), len(want.p.awaiting))
	}
	if !reflect.DeepEqual(got.usage, want.usage) {
		t.Errorf("usage %v, want %v", got.usage, want.usage)
	}
	// Reservations summed in another order differ in the last bits.
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(got.p.book.MLU(), want.p.book.MLU()) {
		t.Errorf("ledger MLU %.4f, want %.4f", got.p.book.MLU(), want.p.book.MLU())
	}
	for _, s := range hosts {
		for _, d := range hosts {
			if s.Name == d.Name {
				continue
			}
			g, _ := got.p.book.Available(s, d)
			w, _ := want.p.book.Available(s, d)
			if !near(g, w) {
				t.Errorf("room %s -> %s: %.3f Gb/s, want %.3f", s.Name, d.Name, g, w)
				return
			}
		}
	}
	if n := len(want.p.flowOwner); n == 0 {
		t.Error("nothing placed: the comparison is empty")
	}
}

// waitCopyOf waits until m's copy of the intents has followed etcd to
// revision rev.
func waitCopyOf(t *testing.T, m *Manager, rev int64) {
	t.Helper()
	backstop := time.After(time.Minute)
	for {
		m.mu.Lock()
		at := m.followed.rev
		if m.followed.ch == nil {
			m.followed.ch = make(chan struct{})
		}
		grew := m.followed.ch
		m.mu.Unlock()
		if at >= rev {
			return
		}
		select {
		case <-grew:
		case <-backstop:
			t.Fatalf("the follower's copy is at revision %d, not %d, after a minute", at, rev)
		}
	}
}
