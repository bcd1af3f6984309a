package intents

import (
	"errors"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// TestAdmission: admission's decisions on their own, without etcd: what
// fits on a 2-spine, 3-leaf, 100 Gb/s fabric, what does not and why, and
// the refusals that come before any placement.
func TestAdmission(t *testing.T) {
	m := dryRunManager(t)
	m.cfg.Auth = tenantList{
		"fuzz":  {Name: "fuzz", MaxGbps: 1000, MaxIntents: 10},
		"small": {Name: "small", MaxGbps: 40},
	}
	one := func(src, dst string, gbps float64) models.IntentSpec {
		return models.IntentSpec{Name: "x", Src: src, Dst: dst, Gbps: gbps, SrcPorts: models.PortRange{First: 49152, Last: 49152}}
	}
	for _, tc := range []struct {
		name    string
		tenant  models.TenantName
		spec    models.IntentSpec
		fits    bool
		wantErr error // nil: answered with a fit or a reasoned no-fit
	}{
		{name: "across the spines", tenant: "fuzz", spec: one("h1-1", "h2-1", 50), fits: true},
		{name: "past the NIC less headroom", tenant: "fuzz", spec: one("h1-1", "h2-1", 96)},
		{name: "over the tenant's quota", tenant: "small", spec: one("h1-1", "h2-1", 50), wantErr: ErrQuota},
		{name: "unknown tenant", tenant: "nobody", spec: one("h1-1", "h2-1", 1), wantErr: store.ErrNotFound},
		{name: "no source", tenant: "fuzz", spec: one("", "h2-1", 1), wantErr: models.ErrInvalid},
		{name: "unknown host", tenant: "fuzz", spec: one("h9-9", "h2-1", 1), wantErr: models.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := m.Create(t.Context(), CreateRequest{Tenant: tc.tenant, Spec: tc.spec, DryRun: true})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Fit.Fits != tc.fits {
				t.Fatalf("fits %v, want %v (reason %q)", out.Fit.Fits, tc.fits, out.Fit.Reason)
			}
			if tc.fits {
				if len(out.Fit.Paths) != 1 || len(out.Fit.Paths[0]) == 0 || out.Fit.MLU > 1 {
					t.Fatalf("fit with paths %v, MLU %v", out.Fit.Paths, out.Fit.MLU)
				}
				return
			}
			if out.Fit.Reason == "" || out.Fit.Bottleneck == "" {
				t.Fatalf("no fit, with reason %q at %q: want both said", out.Fit.Reason, out.Fit.Bottleneck)
			}
		})
	}
	if g, n := m.Usage("fuzz"); g != 0 || n != 0 {
		t.Fatalf("dry runs reserved %v Gb/s in %d intents", g, n)
	}
}
