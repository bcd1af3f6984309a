package models

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
)

// TestEqualIsDeepEqual: ForwardingState.Equal says what reflect.DeepEqual
// says of two states, over random pairs that differ in one entry or not
// at all (copied, or sharing their tables), with tables nil and empty
// alike.
func TestEqualIsDeepEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	state := func() ForwardingState {
		var s ForwardingState
		for i := range rng.IntN(4) {
			s.Members = append(s.Members, Member{ID: uint32(i), Port: uint32(rng.IntN(3))})
		}
		for i := range rng.IntN(3) {
			g := Group{ID: uint32(i)}
			for j := range rng.IntN(3) {
				g.Members = append(g.Members, GroupMember{MemberID: uint32(j), Weight: int32(1 + rng.IntN(2))})
			}
			s.Groups = append(s.Groups, g)
		}
		for i := range rng.IntN(4) {
			s.Routes = append(s.Routes, Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24), GroupID: uint32(rng.IntN(3))})
		}
		for range rng.IntN(2) {
			s.FlowPins = append(s.FlowPins, FlowPin{Key: FlowKey{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.1"), SrcPort: uint16(rng.IntN(3))}, Port: 1})
		}
		for i := range rng.IntN(3) {
			s.PortMACs = append(s.PortMACs, PortMAC{Port: uint32(i), Src: MAC{2, byte(rng.IntN(2))}})
		}
		if rng.IntN(2) == 0 {
			seed := uint32(rng.IntN(2))
			s.HashSeed = &seed
		}
		if rng.IntN(2) == 0 {
			s.Punts = []uint16{EtherTypeLLDP}
		}
		return s
	}
	// nonNil gives DeepEqual's view of empty tables: nil.
	nonNil := func(s ForwardingState) ForwardingState {
		s.Members, s.Groups, s.Routes = nilIfEmpty(s.Members), nilIfEmpty(s.Groups), nilIfEmpty(s.Routes)
		s.FlowPins, s.PortMACs, s.Punts = nilIfEmpty(s.FlowPins), nilIfEmpty(s.PortMACs), nilIfEmpty(s.Punts)
		return s
	}
	equal, differ := 0, 0
	for range 5000 {
		a := state()
		var b ForwardingState
		switch rng.IntN(3) {
		case 0:
			b = a // shares every table
		case 1:
			b = a.Canonical() // copies (the test's states are already sorted or not: either way)
		default:
			b = state()
		}
		if len(a.Members) == 0 && rng.IntN(2) == 0 {
			a.Members = []Member{} // empty, not nil
		}
		want := reflect.DeepEqual(nonNil(a), nonNil(b))
		if got := a.Equal(b); got != want {
			t.Fatalf("Equal = %v, DeepEqual %v:\n%+v\n%+v", got, want, a, b)
		}
		if want {
			equal++
		} else {
			differ++
		}
	}
	if equal < 1000 || differ < 1000 {
		t.Fatalf("%d equal pairs, %d different: the test does not exercise both", equal, differ)
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestIsCanonical: a state is canonical when Canonical would change none
// of its lists' orders: a canonical state's is, and one with any list out
// of order (group members included) is not.
func TestIsCanonical(t *testing.T) {
	p := func(i byte) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, i, 0}), 24) }
	seed := uint32(7)
	s := ForwardingState{
		Members:  []Member{{ID: 2, Port: 2}, {ID: 1, Port: 1}},
		Groups:   []Group{{ID: 9, Members: []GroupMember{{MemberID: 2, Weight: 1}, {MemberID: 1, Weight: 1}}}, {ID: 3}},
		Routes:   []Route{{Prefix: p(2), GroupID: 9}, {Prefix: p(1), MemberID: 1}},
		FlowPins: []FlowPin{{Key: FlowKey{SrcPort: 2}, Port: 1}, {Key: FlowKey{SrcPort: 1}, Port: 2}},
		PortMACs: []PortMAC{{Port: 2}, {Port: 1}},
		Punts:    []uint16{EtherTypeLLDP, 1},
		HashSeed: &seed,
	}
	c := s.Canonical()
	if !c.IsCanonical() {
		t.Fatal("a canonical state is not canonical")
	}
	out := []func(*ForwardingState){
		func(x *ForwardingState) { x.Members = s.Members },
		func(x *ForwardingState) { x.Groups = []Group{c.Groups[1], c.Groups[0]} },
		func(x *ForwardingState) { x.Groups = []Group{s.Groups[1], s.Groups[0]} }, // ordered, one's members not
		func(x *ForwardingState) { x.Routes = s.Routes },
		func(x *ForwardingState) { x.FlowPins = s.FlowPins },
		func(x *ForwardingState) { x.PortMACs = s.PortMACs },
		func(x *ForwardingState) { x.Punts = s.Punts },
	}
	for i, unsort := range out {
		x := c
		unsort(&x)
		if x.IsCanonical() {
			t.Errorf("case %d: a state with a list out of order is canonical", i)
		}
	}
}
