package kube_test

import (
	"testing"

	"github.com/accelnet/accelnet/internal/fabrictest"
)

// TestMain fails the package's tests if any goroutine they started is
// still running once they are done (fabrictest.Main: goleak, with the
// libraries' own daemons ignored).
func TestMain(m *testing.M) { fabrictest.Main(m) }
