package fabrictest

import (
	"path/filepath"
	"testing"

	"github.com/accelnet/accelnet/internal/pki"
)

// Certs are PEM files of a throwaway CA and certificates it signed, for
// TLS tests. Server and client certificates are valid for 127.0.0.1 and
// localhost and carry both server and client auth (a replica is both).
type Certs struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// OtherCA is an unrelated CA: nothing here verifies against it.
	OtherCA string
}

// NewCerts writes a fresh CA, a server and a client certificate to a
// temporary directory (with internal/pki, as `accelnet certs` does).
func NewCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"), "accelnet test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(filepath.Join(dir, "other"), "someone else's CA")
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"localhost", "127.0.0.1"}
	server, err := ca.Issue("server", hosts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("client", hosts)
	if err != nil {
		t.Fatal(err)
	}
	return Certs{CA: ca.CertFile, OtherCA: other.CertFile, ServerCert: server.Cert, ServerKey: server.Key, ClientCert: client.Cert, ClientKey: client.Key}
}
