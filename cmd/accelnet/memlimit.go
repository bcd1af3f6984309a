package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The memory limit: Go's garbage collector lets the heap grow to twice
// what is live before it collects (GOGC=100), so a controller holding
// 1 GB of state runs at 2–2.7 GB of RSS, and a container sized for its
// state is killed for memory it did not need. A soft limit makes the
// collector run more often as the heap nears it instead. accelnet at k=48
// with 100,000 intents: 2.6 GiB of RSS without a limit, 1.8 GiB with
// --memory-limit 1800MiB, at the same admission rate (docs/scaling.md).

// cgroupMemoryFiles are where a container's memory limit is read: cgroup
// v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// autoShare is the share of a container's memory limit "auto" takes as
// the soft limit: the rest is for what the collector does not count
// (stacks beyond it, etcd's mapped database, the binary).
const autoShare = 0.9

// memoryLimit is what --memory-limit asks for, in bytes (0: none), and
// where it came from, for the log. spec is "auto", "none" or a size
// (bytes, or with KiB, MiB, GiB or TiB). "auto" keeps GOMEMLIMIT when the
// environment sets it, else takes 90% of the container's memory limit,
// else sets none. read reads a file (os.ReadFile).
func memoryLimit(spec string, getenv func(string) string, read func(string) ([]byte, error)) (int64, string, error) {
	switch spec {
	case "none", "0":
		return 0, "--memory-limit none", nil
	case "auto", "":
		if v := getenv("GOMEMLIMIT"); v != "" {
			return 0, "GOMEMLIMIT=" + v + " (the Go runtime's own)", nil
		}
		for _, f := range cgroupMemoryFiles {
			data, err := read(f)
			if err != nil {
				continue
			}
			s := strings.TrimSpace(string(data))
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 || n >= 1<<62 { // "max", or v1's "no limit"
				continue
			}
			return int64(float64(n) * autoShare), fmt.Sprintf("90%% of the container's %s (%s)", size(n), f), nil
		}
		return 0, "none: no container memory limit found", nil
	}
	n, err := parseSize(spec)
	if err != nil {
		return 0, "", fmt.Errorf("--memory-limit %q: %v", spec, err)
	}
	return n, "--memory-limit", nil
}

// checkMemoryLimit says whether spec is a --memory-limit value, before
// anything starts (what auto finds is looked up when it is applied:
// nothing is read here).
func checkMemoryLimit(spec string) error {
	_, _, err := memoryLimit(spec, func(string) string { return "" }, func(string) ([]byte, error) { return nil, os.ErrNotExist })
	return err
}

// parseSize reads bytes, or a number with KiB, MiB, GiB or TiB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := 1.0
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*mult >= math.MaxInt64 {
		return 0, errors.New("want auto, none, or a size such as 1800MiB or 2GiB")
	}
	return int64(v * mult), nil
}

// size writes bytes in the largest binary unit that keeps one decimal.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dB", n)
}

// applyMemoryLimit sets the runtime's soft memory limit for spec and says
// what it did.
func applyMemoryLimit(spec string) (string, error) {
	n, source, err := memoryLimit(spec, os.Getenv, os.ReadFile)
	if err != nil {
		return "", err
	}
	switch {
	case n > 0:
		debug.SetMemoryLimit(n)
		return size(n) + " from " + source, nil
	case spec == "none" || spec == "0":
		debug.SetMemoryLimit(math.MaxInt64)
	}
	return source, nil
}
