package election

import (
	"context"
	"testing"
	"time"

	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/store/storetest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitFor polls cond every 10 ms, with a backstop of a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// A backstop, not a bound: beside the rest of the suite on 2 cores an
	// etcd revoke alone may take up to 10 s (endGoneTerm waits that long).
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestLeadership: one of two candidates leads; the other knows where it
// is; the leader's fence holds in etcd only during its term. Resigning
// hands over at once, to a term with a higher election ID; stepping down
// comes back later with a higher one still.
func TestLeadership(t *testing.T) {
	_, cli := storetest.Etcd(t)

	run := func(l *Leadership) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = l.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	a := NewLeadership(cli, "http://a", time.Second, nil, nil)
	stopA := run(a)
	waitFor(t, "a leads", func() bool { return a.Term() != nil })
	b := NewLeadership(cli, "http://b", time.Second, nil, nil)
	stopB := run(b)
	defer stopB()
	waitFor(t, "b sees a lead", func() bool { url, self := b.Leader(); return url == "http://a" && !self })
	if b.Term() != nil {
		t.Fatal("two leaders")
	}
	termA := a.Term()
	fenced := func(term *Term) bool {
		resp, err := cli.Txn(context.Background()).If(term.Fence()).Then(clientv3.OpPut(store.Prefix+"probe", "x")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !fenced(termA) {
		t.Fatal("the leader's fence fails during its term")
	}

	stopA() // resigns
	waitFor(t, "b leads after a resigned", func() bool { return b.Term() != nil })
	termB := b.Term()
	if termB.ID <= termA.ID {
		t.Errorf("b's election ID %d not above a's %d", termB.ID, termA.ID)
	}
	if fenced(termA) {
		t.Error("a deposed leader's fence still holds")
	}
	if termA.Context().Err() == nil {
		t.Error("a's term context outlived its term")
	}

	b.StepDown("test")
	waitFor(t, "b's term ends", func() bool { return termB.Context().Err() != nil })
	waitFor(t, "b leads again (alone)", func() bool { return b.Term() != nil })
	if b.Term().ID <= termB.ID {
		t.Errorf("re-elected with election ID %d, not above %d", b.Term().ID, termB.ID)
	}
}
