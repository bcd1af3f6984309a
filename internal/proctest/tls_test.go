package proctest_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/proctest"
)

// TestProductionTLS runs what docs/production.md
// describes, as processes: the API over HTTPS with client certificates
// required, P4Runtime and gNMI over mutual TLS to fabricsim, a follower
// forwarding to the leader over mutual TLS; settings from a --config file
// and from the environment. A client without a certificate is refused.
func TestProductionTLS(t *testing.T) {
	certs := fabrictest.NewCerts(t)
	config := filepath.Join(t.TempDir(), "accelnet.yaml")
	yaml := fmt.Sprintf("tls-cert: %s\ntls-key: %s\ntls-client-ca: %s\ntls-ca: %s\nsouthbound-tls-ca: %s\nsouthbound-tls-cert: %s\n",
		certs.ServerCert, certs.ServerKey, certs.CA, certs.CA, certs.CA, certs.ClientCert)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	clientTLS, err := pki.Files{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	d := deployWith(t, "leafspine:2x2x2@100", 2, setup{
		simArgs:     []string{"-tls-cert", certs.ServerCert, "-tls-key", certs.ServerKey, "-tls-client-ca", certs.CA},
		replicaArgs: []string{"--config", config},
		env:         []string{"ACCELNET_SOUTHBOUND_TLS_KEY=" + certs.ClientKey},
		https:       true,
		client:      withCert,
	})
	lead, follow := d.leader()

	tok := d.tenantToken(follow, "ml") // forwarded to the leader over mutual TLS
	ids := d.createN(follow, tok, "tls", 3)
	proctest.Wait(t, 20*time.Second, "intents installed over mutual TLS", func() error { return d.installed(lead, tok, ids) })

	// Without a certificate only the probes answer.
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: clientTLS.RootCAs}}}
	if code, err := proctest.Call(context.Background(), noCert, "GET", lead.url()+"/api/v1/topology", "", nil, nil); err != nil || code != http.StatusUnauthorized {
		t.Errorf("topology without a client certificate: HTTP %d %v, want 401", code, err)
	}
	if code, err := proctest.Call(context.Background(), noCert, "GET", lead.url()+"/readyz", "", nil, nil); err != nil || code != http.StatusOK {
		t.Errorf("readiness probe without a client certificate: HTTP %d %v, want 200", code, err)
	}
	// Go's HTTPS server answers a plain HTTP request with a bare 400.
	if code, err := proctest.Call(context.Background(), nil, "GET", "http://"+lead.addr+"/readyz", "", nil, nil); err == nil && code != http.StatusBadRequest {
		t.Errorf("plain HTTP was served: HTTP %d", code)
	}
}
