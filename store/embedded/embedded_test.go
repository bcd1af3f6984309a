package embedded

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// put writes one key through a client of endpoints with tlsConfig.
func put(endpoints []string, tlsConfig *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/accelnet/v1/tokens/forged", `{"role":"operator"}`)
	return err
}

// TestOnlyClientsWithItsCertificate: the embedded etcd serves a client
// presenting the certificate in its data directory, and no other local
// process (plaintext, or TLS without that certificate), which could
// otherwise write itself an operator token. Its keys are readable by the
// owner alone, and a restart keeps them.
func TestOnlyClientsWithItsCertificate(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := put(e.Endpoints, e.ClientTLS); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if err := put(e.Endpoints, nil); err == nil {
		t.Error("a plaintext client wrote a key")
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(e.Client.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(caPEM)
	if err := put(e.Endpoints, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS client without a certificate wrote a key")
	}
	for _, f := range []string{"", "ca.key", "client.key", "server.key"} {
		info, err := os.Stat(filepath.Join(dir, PKIDir, f))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if f == "" {
			want = 0o700 | os.ModeDir
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Join(PKIDir, f), info.Mode(), want)
		}
	}
	if got := ClientFiles(dir); got != e.Client {
		t.Errorf("ClientFiles(dir) = %+v, the server's client files %+v", got, e.Client)
	}

	caBefore, _ := os.ReadFile(e.Client.CA)
	e.Close()
	again, err := Start(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	caAfter, _ := os.ReadFile(again.Client.CA)
	if !bytes.Equal(caBefore, caAfter) {
		t.Error("a restart made a new CA")
	}
	if err := put(again.Endpoints, again.ClientTLS); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEtcdsFatalErrorIsLogged: the logger accelnet gives etcd writes a
// fatal error's line (with its fields) before the process ends, where a
// no-op logger would exit without a word; info lines are left out.
func TestEtcdsFatalErrorIsLogged(t *testing.T) {
	var out lockedBuffer
	core := slogCore{log: slog.New(slog.NewTextHandler(&out, nil))}
	// WriteThenPanic stands in for WriteThenFatal's os.Exit.
	lg := zap.New(core, zap.WithFatalHook(zapcore.WriteThenPanic)).With(zap.String("member", "m1"))
	lg.Info("compacted")
	func() {
		defer func() { _ = recover() }()
		lg.Fatal("failed to open WAL", zap.Error(os.ErrPermission))
	}()
	got := out.String()
	for _, want := range []string{"etcd stops the process: failed to open WAL", "member=m1", "permission denied", "level=ERROR"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "compacted") {
		t.Errorf("an info line was logged: %q", got)
	}
}
