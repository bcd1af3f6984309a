package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/accelnet/accelnet/store"
)

// lockDataDir takes the data directory for this process: a second
// accelnet on it would wait forever on embedded etcd's own lock, deaf to
// Ctrl-C. The lock is the kernel's (flock), so it goes with the process,
// however it ends; the file says which process holds it.
func lockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, "accelnet.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if data, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
					holder = fmt.Sprintf("process %d", pid)
				}
			}
			return nil, fmt.Errorf("data directory %s is in use by %s (another accelnet demo or serve): stop it, or give this one its own --data-dir", dir, holder)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// freshDataDir removes what an earlier run left in dir (etcd's data: the
// topology, tenants, tokens, intents, drains; the operator token).
func freshDataDir(dir string) error {
	for _, name := range []string{"etcd", "operator.token"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("--fresh: %w", err)
		}
	}
	return nil
}

// reloaded says what an earlier run left in etcd ("" if nothing): tenants,
// tokens besides the operator's first, intents and drains.
func reloaded(ctx context.Context, s *store.Store) string {
	var parts []string
	for _, k := range []struct{ prefix, what string }{
		{store.KeyTenants, "tenant"}, {store.KeyIntents, "intent"}, {store.KeyDrains, "drain"},
	} {
		kvs, _, err := s.List(ctx, k.prefix, 0)
		if err != nil || len(kvs) == 0 {
			continue
		}
		what := k.what
		if len(kvs) > 1 {
			what += "s"
		}
		parts = append(parts, fmt.Sprintf("%d %s", len(kvs), what))
	}
	return strings.Join(parts, ", ")
}
