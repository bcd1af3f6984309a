package controller

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestInflightAdapts: timeouts on several switches, as an overload makes
// them, halve the bound (once per spacing: reconciles in flight together
// time out together); one silent switch among healthy ones cuts nothing;
// completions in time bring the bound back one per round; acquire waits
// at the bound.
func TestInflightAdapts(t *testing.T) {
	now := time.Unix(0, 0)
	l := newInflight(64, 10*time.Second, func() time.Time { return now })
	if got := l.bound(); got != 64 {
		t.Fatalf("bound %d at start, want every worker (64)", got)
	}
	ctx := context.Background()
	for range 64 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.acquire(short); err == nil {
		t.Fatal("a 65th reconcile started beside 64 with a bound of 64")
	}
	// An overload: reconciles of many switches time out.
	cuts := 0
	for i := range 20 {
		if cut, bound := l.release(fmt.Sprint("sw", i), true); cut {
			cuts++
			if bound != 32 {
				t.Fatalf("cut to %d, want 32", bound)
			}
		}
	}
	if cuts != 1 {
		t.Fatalf("%d cuts for one burst of timeouts, want 1", cuts)
	}
	now = now.Add(10 * time.Second)
	for i := range 4 {
		l.release(fmt.Sprint("sw", i), true)
	}
	if got := l.bound(); got != 16 {
		t.Fatalf("bound %d after timeouts on 4 switches a spacing later, want 16", got)
	}
	for range 40 { // the rest finish in time
		l.release("ok", false)
	}
	if got := l.bound(); got <= 16 || got > 20 {
		t.Fatalf("bound %d after 40 completions from 16, want 17-20 (one per round)", got)
	}
	for range 5000 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		l.release("ok", false)
	}
	if got := l.bound(); got != 64 {
		t.Fatalf("bound %d after a long healthy run, want back at the maximum 64", got)
	}
	// One silent switch timing out again and again, others completing:
	// no cut, however long.
	for range 30 {
		now = now.Add(10 * time.Second)
		for _, sw := range []string{"silent", "a", "b"} {
			if err := l.acquire(ctx); err != nil {
				t.Fatal(err)
			}
			l.release(sw, sw == "silent")
		}
	}
	if got := l.bound(); got != 64 {
		t.Fatalf("bound %d with one silent switch, want 64 (no cut)", got)
	}
	// Never below one.
	for i := range 200 {
		now = now.Add(10 * time.Second)
		for j := range overloadSwitches {
			if err := l.acquire(ctx); err != nil {
				t.Fatal(err)
			}
			l.release(fmt.Sprint(i, "-", j), true)
		}
	}
	if got := l.bound(); got != 1 {
		t.Fatalf("bound %d after many overloads, want 1", got)
	}
	// A waiter is woken by a release.
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- l.acquire(ctx) }()
	select {
	case <-started:
		t.Fatal("a second reconcile started with a bound of 1")
	case <-time.After(20 * time.Millisecond):
	}
	l.release("ok", false)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// TestInflightWidens: a sweep's extra room raises the bound and its
// maximum, a waiting reconcile starts at once, and taking it back leaves
// the bound as it was.
func TestInflightWidens(t *testing.T) {
	l := newInflight(4, 10*time.Second, time.Now)
	ctx := context.Background()
	for range 4 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan error, 1)
	go func() { started <- l.acquire(ctx) }() // waits at the bound
	l.widen(12)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if got := l.bound(); got != 16 {
		t.Fatalf("widened by 12: bound %d, want 16", got)
	}
	for range 5 {
		l.release("sw", false)
	}
	l.widen(-12)
	if got := l.bound(); got != 4 {
		t.Fatalf("narrowed again: bound %d, want 4", got)
	}
}
