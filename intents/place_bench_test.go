package intents

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
)

// BenchmarkPlaceLoaded measures what a new term does before it can decide:
// placing the intents it loaded (the ledger rebuilt from their stored
// paths, every switch's pins derived). The intents are admitted by one
// manager, their records handed to another as etcd would (a takeover's
// copy); etcd is not involved, so this is the placing alone. With
// ACCELNET_PLACE_FOLLOWED=1 it measures a follower placing its copy
// ahead of a term instead (followplace.go).
//
//	ACCELNET_PLACE_INTENTS=100000 go test ./intents -run '^$' -bench PlaceLoaded -benchtime 5x
func BenchmarkPlaceLoaded(b *testing.B) {
	n := benchIntents(b, 20000)
	snap, auth, stored := storedIntents(b, n)
	// A follower's placing of its copy (placeFollowed), or a term's of
	// what it loaded (replan).
	followed := os.Getenv("ACCELNET_PLACE_FOLLOWED") != ""
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		m, err := New(Config{Store: &store.Store{}, Auth: auth})
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range stored {
			m.p.all[in.ID] = newStoredEntry(in)
		}
		m.loaded, m.followed.mirrored = !followed, followed
		m.SetFabric(snap, nil, nil)
		b.StartTimer()
		if followed {
			m.placeFollowed(b.Context())
		} else {
			m.mu.Lock()
			m.replanIfDue(m.p.scratch())
			m.mu.Unlock()
		}
		b.StopTimer()
		if got := len(m.p.flowOwner); got != n {
			b.Fatalf("%d of %d intents' flows placed", got, n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/intent")
}

// benchIntents is ACCELNET_PLACE_INTENTS, or def.
func benchIntents(b *testing.B, def int) int {
	if v, err := strconv.Atoi(os.Getenv("ACCELNET_PLACE_INTENTS")); err == nil && v > 0 {
		return v
	}
	return def
}

// storedIntents admits n small intents over a k=16 fat-tree, spread over
// 64 tenants and every host pair in turn, and returns them as a term
// would load them from etcd (Installed, revisions stamped).
func storedIntents(b testing.TB, n int) (*topology.Snapshot, tenantList, []models.Intent) {
	b.Helper()
	topo, err := topology.Load("fattree:16@100")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := topology.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	auth := tenantList{}
	for i := range 64 {
		name := models.TenantName(fmt.Sprintf("t%d", i))
		auth[name] = models.Tenant{Name: name}
	}
	first := placedManager(b, Config{Auth: auth}, snap)
	hosts := snap.Hosts()
	stored := make([]models.Intent, 0, n)
	for i := range n {
		src, dst := hosts[i%len(hosts)], hosts[(i/len(hosts)+1+i)%len(hosts)]
		if src.Name == dst.Name {
			dst = hosts[(i+1)%len(hosts)]
		}
		port := uint16(1 + i/len(hosts))
		tenant := models.TenantName(fmt.Sprintf("t%d", i%64))
		bt := &batch{m: first, ctx: b.Context(), touched: map[models.SwitchID]bool{}, maxOps: 1 << 20, maxBytes: 1 << 30}
		out, err := first.decideCreate(bt, CreateRequest{Tenant: tenant, Spec: models.IntentSpec{Name: "b", Src: src.Name, Dst: dst.Name, Gbps: 0.001,
			SrcPorts: models.PortRange{First: port, Last: port}}}, auth[tenant])
		if err != nil {
			b.Fatalf("admitting intent %d: %v", i, err)
		}
		in := out.Intent
		in.Status.State = models.StateInstalled
		in.Revision = int64(i + 2)
		stored = append(stored, in)
	}
	return snap, auth, stored
}

// BenchmarkHousekeep measures what the intents loop does under its lock
// once a second (tick) and every AdaptInterval (adapt), and what the
// controller's PinnedLoad holds its read lock for each telemetry
// interval (pinned-load), with n intents
// Installed and settled: nothing to settle or fail, links measured at 50%
// but those of one leaf at 95% (adapt looks for intents to move off its
// uplinks).
//
//	ACCELNET_PLACE_INTENTS=100000 go test ./intents -run '^$' -bench Housekeep -benchtime 20x
func BenchmarkHousekeep(b *testing.B) {
	n := benchIntents(b, 20000)
	snap, auth, stored := storedIntents(b, n)
	hot := snap.Switches()[len(snap.Switches())-1].Name
	m := settledManager(b, snap, auth, stored, func(e models.Endpoint) (float64, bool) {
		if e.Switch == hot {
			return 0.95, true
		}
		return 0.5, true
	})
	// One intent in ten measured sending (PinnedLoad adds their rates
	// along their paths for the controller's WCMP weights).
	observed := map[string]float64{}
	for i, in := range stored {
		if i%10 == 0 {
			observed[in.ID] = 0.5
		} else {
			observed[in.ID] = 0
		}
	}
	m.obs.mu.Lock()
	m.obs.byIntent = observed
	m.obs.mu.Unlock()
	b.Run("pinned-load", func(b *testing.B) {
		for range b.N {
			m.PinnedLoad()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
	})
	for _, name := range []string{"tick", "adapt"} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				m.mu.Lock()
				m.adaptive.due = name == "adapt"
				m.housekeep(m.p.scratch(), name == "tick")
				m.mu.Unlock()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/op")
		})
	}
}

// settledManager is a leader's manager that loaded stored and placed it,
// every switch read back and every intent settled, its links measured by
// util.
func settledManager(t testing.TB, snap *topology.Snapshot, auth tenantList, stored []models.Intent, util func(models.Endpoint) (float64, bool)) *Manager {
	t.Helper()
	m := loadedManager(t, snap, auth, stored, util)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sw := range snap.Switches() {
		m.Overlay().Synced(sw.Name, 1<<62)
	}
	m.housekeep(m.p.scratch(), false) // settles the placed intents
	if len(m.p.awaiting) != 0 {
		t.Fatalf("%d intents still awaiting", len(m.p.awaiting))
	}
	return m
}

// loadedManager is a leader's manager that loaded stored (as a term
// loads etcd's records) and placed it on snap's fabric, its links
// measured by util (nil: none).
func loadedManager(t testing.TB, snap *topology.Snapshot, auth tenantList, stored []models.Intent, util func(models.Endpoint) (float64, bool)) *Manager {
	t.Helper()
	m, err := New(Config{Store: &store.Store{}, Auth: auth, Utilization: util})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range stored {
		m.p.all[in.ID] = newStoredEntry(in)
	}
	m.loaded = true
	m.SetFabric(snap, nil, nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replanIfDue(m.p.scratch())
	return m
}
