package intents

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/topology"
	"github.com/accelnet/accelnet/topology/topotest"
)

// tenantList is a fixed set of tenants, for admission without etcd.
type tenantList map[models.TenantName]models.Tenant

func (l tenantList) Tenant(_ context.Context, name models.TenantName) (models.Tenant, error) {
	if t, ok := l[name]; ok {
		return t, nil
	}
	return models.Tenant{}, store.ErrNotFound
}

func (l tenantList) MayUse(t models.Tenant, host string) bool {
	return models.MayUse(t, host, maps.Values(l))
}

// dryRunManager is an intent manager over a small fabric that answers dry
// runs without etcd: admission logic only.
func dryRunManager(t testing.TB) *Manager {
	auth := tenantList{"fuzz": {Name: "fuzz", MaxGbps: 1000, MaxIntents: 10}}
	return placedManager(t, Config{Auth: auth, FlowPinEntries: 64}, topotest.LeafSpine(t, 2, 3, 2))
}

// placedManager is a leader's manager without etcd, loaded and placed on
// snap's fabric, for deciding in memory.
func placedManager(t testing.TB, cfg Config, snap *topology.Snapshot) *Manager {
	t.Helper()
	cfg.Store = &store.Store{}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.loaded = true
	m.SetFabric(snap, nil, nil)
	m.mu.Lock()
	m.replanIfDue(m.p.scratch())
	m.mu.Unlock()
	if m.p.book == nil {
		t.Fatal("no ledger")
	}
	return m
}

// FuzzIntentRequest: any JSON body either fails to decode, fails
// validation with ErrInvalid, or is answered by admission (fits or not,
// with a reason) — never a panic, never an unexplained refusal.
func FuzzIntentRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"first":49152,"last":49155}}`,
		`{"name":"b","src":"10.0.0.1","dst":"h3-2","gbps":400,"src_ports":{"first":1,"last":1},"priority":7}`,
		`{"name":"c","src_ports":{"first":5,"last":8},"collective":{"pattern":"all-to-all","endpoints":["h1-1","h2-1","h3-1"],"gbps_per_gpu":30}}`,
		`{"name":"d","src_ports":{"first":5,"last":5},"collective":{"pattern":"ring-allreduce","endpoints":["h1-1","h1-2","h2-2"],"gbps_per_gpu":90}}`,
		`{"name":"e","src":"h1-1","dst":"h2-2","gbps":1,"src_ports":{"first":9,"last":9},"constraints":{"max_hops":2,"avoid_switches":["spine1"],"avoid_links":["leaf1:3<->spine1:1"],"disjoint_from":"x"}}`,
		`{"name":"f","src":"h1-1","dst":"h1-1","gbps":1e308,"src_ports":{"first":65535,"last":0}}`,
	} {
		f.Add([]byte(seed))
	}
	m := dryRunManager(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec models.IntentSpec
		if json.Unmarshal(body, &spec) != nil {
			return
		}
		out, err := m.Create(context.Background(), CreateRequest{Tenant: "fuzz", Spec: spec, DryRun: true})
		var refused *RefusedError
		switch {
		case err == nil:
			if out.Fit.Fits != (out.Fit.Reason == "") {
				t.Fatalf("fit %v with reason %q", out.Fit.Fits, out.Fit.Reason)
			}
			if out.Fit.Fits && out.Fit.MLU > 1 {
				t.Fatalf("admitted past capacity: MLU %v", out.Fit.MLU)
			}
		case errors.Is(err, models.ErrInvalid), errors.As(err, &refused):
		default:
			t.Fatalf("unexplained error for %s: %v", body, err)
		}
		if g, n := m.Usage("fuzz"); g != 0 || n != 0 {
			t.Fatalf("a dry run reserved %v Gb/s", g)
		}
	})
}
