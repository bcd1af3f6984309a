package main

import (
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	noEnv := func(string) string { return "" }
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(f string) ([]byte, error) {
			if v, ok := m[f]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	v2, v1 := cgroupMemoryFiles[0], cgroupMemoryFiles[1]
	for _, c := range []struct {
		spec   string
		env    func(string) string
		files  map[string]string
		want   int64
		source string
	}{
		{"1800MiB", noEnv, nil, 1800 << 20, "--memory-limit"},
		{"2GiB", noEnv, nil, 2 << 30, "--memory-limit"},
		{"1.5GiB", noEnv, nil, 3 << 29, "--memory-limit"},
		{"1048576", noEnv, nil, 1 << 20, "--memory-limit"},
		{"none", noEnv, map[string]string{v2: "4294967296\n"}, 0, "none"},
		{"auto", noEnv, map[string]string{v2: "4294967296\n"}, 3865470566, "90% of the container's 4.0GiB"},
		{"auto", noEnv, map[string]string{v2: "max\n", v1: "2147483648\n"}, 1932735283, "memory.limit_in_bytes"},
		{"auto", noEnv, map[string]string{v1: "9223372036854771712\n"}, 0, "no container memory limit"}, // v1: unlimited
		{"auto", noEnv, nil, 0, "no container memory limit"},
		{"auto", func(string) string { return "3GiB" }, map[string]string{v2: "4294967296"}, 0, "GOMEMLIMIT=3GiB"},
	} {
		got, source, err := memoryLimit(c.spec, c.env, files(c.files))
		if err != nil || got != c.want || !strings.Contains(source, c.source) {
			t.Errorf("%s with %v: %d (%q, %v), want %d (%q)", c.spec, c.files, got, source, err, c.want, c.source)
		}
	}
	for _, bad := range []string{"lots", "-1GiB", "2 GB", "0MiB", "1e30TiB"} {
		if _, _, err := memoryLimit(bad, noEnv, files(nil)); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("%q: err %v, want a --memory-limit error", bad, err)
		}
	}
}

// TestMemoryLimitApplied: the runtime's soft limit is what the flag says,
// and none lifts it.
func TestMemoryLimitApplied(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if _, err := applyMemoryLimit("1800MiB"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 1800<<20 {
		t.Fatalf("runtime limit %d after --memory-limit 1800MiB", got)
	}
	if _, err := applyMemoryLimit("none"); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("runtime limit %d after --memory-limit none", got)
	}
}
