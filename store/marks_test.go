package store

import (
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
)

// TestMarks: marks round-trip, past maxOps in several transactions; a
// fence that no longer holds writes and removes nothing; a mark that does
// not decode is left out (its switch is read in full).
func TestMarks(t *testing.T) {
	s := testStore(t)
	ctx := t.Context()
	fenceKey := Prefix + "test/fence"
	rev, err := s.Commit(ctx, nil, []clientv3.Op{clientv3.OpPut(fenceKey, "term")})
	if err != nil {
		t.Fatal(err)
	}
	fence := clientv3.Compare(clientv3.CreateRevision(fenceKey), "=", rev)
	m := s.Marks(3)
	want := map[models.SwitchID]models.SwitchMark{}
	for i := range 7 { // three transactions
		want[models.SwitchID(fmt.Sprintf("leaf%d", i))] = models.SwitchMark{Tables: fmt.Sprintf("%032x", i), Pins: fmt.Sprintf("%032x", i+100), Term: 5}
	}
	want["spine1"] = models.SwitchMark{Tables: "ab", Pins: "cd", Renames: map[uint32]uint32{9: 5}, Term: 5}
	if err := m.Commit(ctx, fence, want, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJSON(ctx, KeyHandover+"garbled", "not a mark"); err != nil {
		t.Fatal(err)
	}
	got, err := m.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loaded %v, want %v", got, want)
	}

	if err := m.Commit(ctx, fence, nil, []models.SwitchID{"leaf0", "leaf1", "leaf2", "leaf3"}); err != nil {
		t.Fatal(err)
	}
	for _, sw := range []models.SwitchID{"leaf0", "leaf1", "leaf2", "leaf3"} {
		delete(want, sw)
	}
	if got, err = m.Load(ctx); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after removing four: %v (%v), want %v", got, err, want)
	}

	// A new term: the old fence no longer holds.
	if err := s.Delete(ctx, fenceKey); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJSON(ctx, fenceKey, "next term"); err != nil {
		t.Fatal(err)
	}
	err = m.Commit(ctx, fence, map[models.SwitchID]models.SwitchMark{"leaf9": {Tables: "ff", Pins: "ee"}}, []models.SwitchID{"leaf4"})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a deposed term's marks: %v, want ErrConflict", err)
	}
	if got, err = m.Load(ctx); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a deposed term's commit: %v (%v), want %v unchanged", got, err, want)
	}
}
