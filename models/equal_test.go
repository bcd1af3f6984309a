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
