package tenancy

import (
	"testing"
	"time"
)

// TestRateLimiter: a key gets a burst of twice its rate, then its rate a
// second; keys do not share buckets; rate 0 limits nothing.
func TestRateLimiter(t *testing.T) {
	l := NewRateLimiter(5)
	t0 := time.Unix(100, 0)
	for i := range 10 {
		if !l.Allow("a", t0) {
			t.Fatalf("request %d of a burst of 10 refused", i+1)
		}
	}
	if l.Allow("a", t0) {
		t.Fatal("11th request of the burst allowed")
	}
	if !l.Allow("b", t0) {
		t.Fatal("another key's request refused")
	}
	allowed := 0
	for range 10 {
		if l.Allow("a", t0.Add(time.Second)) {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("a second later %d requests allowed, want 5", allowed)
	}
	if !NewRateLimiter(0).Allow("a", t0) {
		t.Fatal("rate 0 refused a request")
	}
}
