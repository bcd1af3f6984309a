package fabrictest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestSouthboundMutualTLS: switches that demand client certificates are
// programmed and streamed from over mutual TLS; a client without a
// certificate, trusting another CA, or speaking plaintext is refused.
func TestSouthboundMutualTLS(t *testing.T) {
	certs := fabrictest.NewCerts(t)
	serverTLS, err := pki.Files{CA: certs.CA, Cert: certs.ServerCert, Key: certs.ServerKey}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	f := fabrictest.StartFabricWith(t, fabrictest.LeafSpine(1, 2, 1), func(o *fabricsim.Options) { o.TLS = serverTLS })
	h := fabrictest.NewServeWith(t, f.Topology(), func(o *stack.Config) {
		o.SouthboundTLS = pki.Files{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}
	})
	converged(t, h)
	h.Eventually(t, 10*time.Second, "link load streamed over gNMI with TLS", func() bool {
		var v api.TopologyView
		h.GetJSON(t, "/api/v1/topology", &v)
		for _, l := range v.Links {
			if !l.Load.Measured {
				return false
			}
		}
		return len(v.Links) > 0
	})
	if got := f.Switch("leaf1").Entries(p4.TableIPv4LPM); got == 0 {
		t.Error("leaf1 has no routes over TLS")
	}

	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	topo := f.Topology()
	resolve := func(id models.SwitchID) (models.Switch, error) {
		for _, s := range topo.Switches {
			if s.Name == id {
				return s, nil
			}
		}
		return models.Switch{}, errors.New("unknown")
	}
	for name, files := range map[string]pki.Files{
		"no client certificate": {CA: certs.CA},
		"another CA":            {CA: certs.OtherCA, Cert: certs.ClientCert, Key: certs.ClientKey},
		"plaintext":             {},
	} {
		dialer := &southbound.Dialer{}
		if files.Enabled() {
			if dialer.TLS, err = files.ClientConfig(); err != nil {
				t.Fatal(err)
			}
		}
		d := southbound.NewP4RT(schema, southbound.P4RTOptions{Resolve: resolve, ElectionID: 1 << 40, Dialer: dialer, ArbitrationTimeout: 2 * time.Second})
		_, err := d.Read(context.Background(), "leaf1")
		d.Close()
		if !errors.Is(err, southbound.ErrUnavailable) {
			t.Errorf("%s: want refused (ErrUnavailable), got %v", name, err)
		}
	}
}
