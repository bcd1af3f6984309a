// Package storetest starts a real etcd for tests outside the store
// package: one embedded member in the test's temporary directory.
package storetest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/embedded"
)

// Etcd starts a one-member embedded etcd and a client of it, both
// stopped when the test ends, and the store over that client.
func Etcd(t testing.TB) (*store.Store, *clientv3.Client) {
	t.Helper()
	cli := Client(t, Embedded(t))
	return store.NewStore(cli, 5*time.Second), cli
}

// Embedded starts a one-member embedded etcd, stopped when the test ends
// (t is a testing.TB, or what stands for one in a command that runs test
// servers).
func Embedded(t interface {
	Helper()
	TempDir() string
	Fatal(...any)
	Cleanup(func())
}) *embedded.Server {
	t.Helper()
	e, err := embedded.Start(t.TempDir(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// Client is a client of e (with its client certificate), closed when the
// test ends.
func Client(t testing.TB, e *embedded.Server) *clientv3.Client {
	t.Helper()
	cli, err := store.Dial(e.Endpoints, e.ClientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
