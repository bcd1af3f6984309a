package fabricsim

import (
	"slices"
	"testing"
)

// TestSelectorKeepsHandlesAsBMv2: the member handles, weighted copies and
// their order follow PI's ActionProfAccessManual on BMv2 step by step.
func TestSelectorKeepsHandlesAsBMv2(t *testing.T) {
	s := newSelector()
	for _, id := range []uint32{1, 2, 3} {
		s.addMember(id) // handles 0, 1, 2
	}
	s.setGroup(10, map[uint32]int32{1: 1, 2: 3}) // member 2 gets handles 3, 4
	if got := s.orderBy(s.owners(), 10); !slices.Equal(got, []uint32{1, 2, 2, 2}) {
		t.Fatalf("group 10 walks %v, want [1 2 2 2] (handles 0,1,3,4)", got)
	}
	// Member 1 up to 2 (new handle 5), member 2 out (its copies 3, 4
	// freed), member 3 in (handle 2): handles 0, 2, 5.
	s.setGroup(10, map[uint32]int32{1: 2, 3: 1})
	if got := s.orderBy(s.owners(), 10); !slices.Equal(got, []uint32{1, 3, 1}) {
		t.Fatalf("group 10 walks %v, want [1 3 1] (handles 0,2,5)", got)
	}
	if !slices.Equal(s.handles[2], []uint32{1}) {
		t.Errorf("member 2 keeps handles %v, want its own [1]", s.handles[2])
	}
	// A second group with member 2 at weight 2 takes the lowest free
	// handle (3) for its copy.
	s.setGroup(11, map[uint32]int32{2: 2})
	if !slices.Equal(s.handles[2], []uint32{1, 3}) || !slices.Equal(s.orderBy(s.owners(), 11), []uint32{2, 2}) {
		t.Fatalf("member 2 handles %v, group 11 %v", s.handles[2], s.orderBy(s.owners(), 11))
	}
	s.deleteGroup(11)
	s.deleteGroup(10)
	if !slices.Equal(s.handles[1], []uint32{0}) || !slices.Equal(s.handles[2], []uint32{1}) {
		t.Errorf("after the groups went, handles %v", s.handles)
	}
	s.deleteMember(2)
	s.addMember(4)
	if !slices.Equal(s.handles[4], []uint32{1}) {
		t.Errorf("a new member took handle %v, want the lowest free, 1", s.handles[4])
	}
}
