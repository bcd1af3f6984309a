package northbound

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is
// still running once they are done: every goroutine has an owner that
// waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
