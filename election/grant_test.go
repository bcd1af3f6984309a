package election

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestGrantWaitsLongerAfterTimeouts: a lease grant that ran out of time
// gives the next one twice as long, up to a minute (a starved etcd that
// needs 8 s for its fsync is granted on the third try, not never); any
// other outcome starts over at 5 s.
func TestGrantWaitsLongerAfterTimeouts(t *testing.T) {
	timedOut := []error{context.DeadlineExceeded, fmt.Errorf("grant: %w", context.DeadlineExceeded), status.Error(codes.DeadlineExceeded, "context deadline exceeded")}
	for _, err := range timedOut {
		if got := nextGrantTimeout(5*time.Second, err); got != 10*time.Second {
			t.Errorf("after %v: %s, want 10s", err, got)
		}
	}
	wait := grantTimeoutMin
	for range 10 {
		wait = nextGrantTimeout(wait, context.DeadlineExceeded)
	}
	if wait != time.Minute {
		t.Errorf("after ten timeouts: %s, want the minute at most", wait)
	}
	for _, err := range []error{nil, errors.New("connection refused"), status.Error(codes.Unavailable, "no leader")} {
		if got := nextGrantTimeout(40*time.Second, err); got != grantTimeoutMin {
			t.Errorf("after %v: %s, want %s again", err, got, grantTimeoutMin)
		}
	}
}
