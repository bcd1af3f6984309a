package main

import (
	"fmt"
	"syscall"

	"github.com/accelnet/accelnet/internal/httpserve"
)

// Open files: every connection is a file descriptor, and a process that
// runs out of them cannot open etcd's next WAL segment or accept the
// operator's next request. accelnet raises its soft limit to the hard one
// at start, reserves what etcd and the switches need, and lets the API's
// listener hold at most what is left (httpserve.Guard closes idle
// anonymous connections first, then refuses), so no flood of connections
// reaches the limit.

// raiseFileLimit raises the soft limit on open files to the hard limit
// (Go's runtime does too, on Linux; this says what it is) and returns
// the limit before and after.
func raiseFileLimit() (before, after uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	before = lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return before, before, fmt.Errorf("raise the open-file limit to %d: %w", lim.Max, err)
		}
	}
	return before, lim.Cur, nil
}

// File descriptors kept for the rest of the process: a base (etcd's files
// and connections, listeners, logs, the operator's CLI) and, per switch,
// the controller's connections (P4Runtime and gNMI) and, when the fabric
// is emulated in the process, the switch's listener and its ends of them.
const (
	reserveBase           = 512
	reservePerSwitch      = 2
	reservePerEmulated    = 5
	autoMaxConnsCeiling   = 16384
	minConnections        = 64
	defaultConnsPerSource = 256
)

// connectionLimits are the API listener's limits for an open-file limit
// of files and a fabric of switches (emulated here or not): maxConns, if
// positive, as asked; otherwise what the limit leaves after the reserve,
// at most autoMaxConnsCeiling. It says what it reserved, and whether the
// limit leaves less than asked.
func connectionLimits(files uint64, switches int, emulated bool, maxConns, perSource int) (lim httpserve.Limits, reserve int, short bool) {
	per := reservePerSwitch
	if emulated {
		per = reservePerEmulated
	}
	reserve = reserveBase + per*switches
	left := int(min(files, 1<<30)) - reserve
	lim = httpserve.Limits{MaxConns: maxConns, MaxPerSource: perSource}
	if lim.MaxConns <= 0 {
		lim.MaxConns = min(left, autoMaxConnsCeiling)
	}
	short = lim.MaxConns > left
	lim.MaxConns = max(lim.MaxConns, minConnections)
	if lim.MaxPerSource <= 0 {
		lim.MaxPerSource = defaultConnsPerSource
	}
	lim.MaxPerSource = min(lim.MaxPerSource, lim.MaxConns)
	return lim, reserve, short
}
