// Package storetest starts a real etcd for tests outside the store
// package: one embedded member in the test's temporary directory.
package storetest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/store"
)

// Etcd starts a one-member embedded etcd and a client of it, both
// stopped when the test ends, and the store over that client.
func Etcd(t testing.TB) (*store.Store, *clientv3.Client) {
	t.Helper()
	e, err := store.StartEmbedded(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := store.Dial(e.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return store.NewStore(cli, 5*time.Second), cli
}
