package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/accelnet/accelnet/tenancy"
)

// secretsAPI records the Secrets of one namespace as the Kubernetes API
// would keep them (GET one, POST one; 409 for a name taken). It stands in
// for a kube-apiserver, which this module's tests do not build.
type secretsAPI struct {
	mu      sync.Mutex
	token   string
	secrets map[string]secret
	calls   []string
}

func (a *secretsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, r.Method+" "+r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	const prefix = "/api/v1/namespaces/gpu-fabric/secrets"
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix+"/"):
		s, ok := a.secrets[strings.TrimPrefix(r.URL.Path, prefix+"/")]
		if !ok {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(s)
	case r.Method == http.MethodPost && r.URL.Path == prefix:
		var s secret
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, ok := a.secrets[s.Metadata.Name]; ok {
			http.Error(w, `{"kind":"Status","code":409}`, http.StatusConflict)
			return
		}
		a.secrets[s.Metadata.Name] = s
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(s)
	default:
		http.Error(w, "not this", http.StatusMethodNotAllowed)
	}
}

// inPod makes this process look like a pod of namespace gpu-fabric whose
// Kubernetes API is api.
func inPod(t *testing.T, api *secretsAPI) {
	t.Helper()
	srv := httptest.NewTLSServer(api)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, data := range map[string][]byte{"token": []byte(api.token + "\n"), "ca.crt": caPEM, "namespace": []byte("gpu-fabric")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := serviceAccountDir
	serviceAccountDir = dir
	t.Cleanup(func() { serviceAccountDir = old })
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
}

// TestKubernetesSecrets: `accelnet certs --kubernetes` makes the CA, a
// kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) valid for the
// Service's names in its namespace, and an operator token BootstrapOperator
// takes; run again it keeps them all; with the certificate's Secret
// deleted it issues one signed by the same CA.
func TestKubernetesSecrets(t *testing.T) {
	api := &secretsAPI{token: "sa-token", secrets: map[string]secret{}}
	inPod(t, api)
	run := func() string {
		t.Helper()
		var out bytes.Buffer
		cmd := newCertsCommand()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--kubernetes", "accelnet-tls=accelnet"})
		cmd.SetContext(context.Background())
		if err := cmd.Execute(); err != nil {
			t.Fatalf("accelnet certs --kubernetes: %v\n%s", err, out.String())
		}
		return out.String()
	}
	first := run()
	if strings.Count(first, ": made") != 3 {
		t.Fatalf("first run:\n%s", first)
	}
	tlsSecret := api.secrets["accelnet-tls"]
	if tlsSecret.Type != "kubernetes.io/tls" || len(tlsSecret.Data["tls.crt"]) == 0 || len(tlsSecret.Data["tls.key"]) == 0 || len(tlsSecret.Data["ca.crt"]) == 0 {
		t.Fatalf("accelnet-tls: type %q, keys %v", tlsSecret.Type, keys(tlsSecret.Data))
	}
	verify := func(s secret) {
		t.Helper()
		pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(api.secrets[caSecret].Data["ca.crt"])
		for _, name := range []string{"accelnet", "accelnet.gpu-fabric.svc", "accelnet.gpu-fabric.svc.cluster.local"} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
				t.Errorf("the certificate does not verify for %s against accelnet-ca: %v", name, err)
			}
		}
	}
	verify(tlsSecret)
	if token := string(api.secrets[operatorTokenSecret].Data["token"]); !tenancy.ValidSecret(token) {
		t.Errorf("the operator token %q is not a token", token)
	}

	before := len(api.calls)
	if again := run(); strings.Contains(again, "made") || strings.Count(again, "kept") != 3 {
		t.Fatalf("second run:\n%s", again)
	}
	for _, c := range api.calls[before:] {
		if strings.HasPrefix(c, "POST") {
			t.Errorf("the second run created something: %s", c)
		}
	}

	api.mu.Lock()
	delete(api.secrets, "accelnet-tls")
	caBefore := api.secrets[caSecret].Data["ca.crt"]
	api.mu.Unlock()
	if third := run(); !strings.Contains(third, "Secret accelnet-tls: made") {
		t.Fatalf("third run:\n%s", third)
	}
	if !bytes.Equal(caBefore, api.secrets[caSecret].Data["ca.crt"]) {
		t.Error("the CA changed")
	}
	verify(api.secrets["accelnet-tls"])
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
