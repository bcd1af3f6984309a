package models

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// TestProbeFrame: a probe built, taken through three egresses and parsed
// has its hops in path order, one TTL less per egress, lengths and an
// IPv4 checksum that hold; past ProbeMaxHops records a switch forwards it
// without one; every truncation and a wrong opcode is refused, not a
// panic.
func TestProbeFrame(t *testing.T) {
	want := Probe{ID: 7, Src: netip.MustParseAddr("10.0.1.1"), Dst: netip.MustParseAddr("10.0.2.1"), SrcPort: 50123, TTL: 3}
	f, err := ProbeFrame(want)
	if err != nil {
		t.Fatal(err)
	}
	hops := []ProbeHop{{EgressPort: 3, QueueDepth: 1, QueueUs: 2, HopUs: 4}, {EgressPort: 511, QueueDepth: 1 << 18, QueueUs: 90, HopUs: 91}, {EgressPort: 1}}
	for _, h := range hops {
		if f, err = ProbeEgress(f, h); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ParseProbe(f)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 7 || got.Src != want.Src || got.Dst != want.Dst || got.SrcPort != 50123 || got.TTL != 0 || len(got.Hops) != 3 {
		t.Fatalf("parsed %+v", got)
	}
	for i, h := range hops {
		if got.Hops[i] != h {
			t.Errorf("hop %d: %+v, want %+v", i, got.Hops[i], h)
		}
	}
	ip := f[14:]
	if n := int(binary.BigEndian.Uint16(ip[2:])); n != len(f)-14 {
		t.Errorf("IPv4 total length %d, frame carries %d", n, len(f)-14)
	}
	if n := int(binary.BigEndian.Uint16(ip[24:])); n != len(f)-14-20 {
		t.Errorf("UDP length %d, frame carries %d", n, len(f)-34)
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv4 header checksum does not verify: %#x", sum)
	}
	full := f
	for range ProbeMaxHops {
		full, _ = ProbeEgress(full, ProbeHop{EgressPort: 9})
	}
	if p, err := ParseProbe(full); err != nil || len(p.Hops) != ProbeMaxHops {
		t.Errorf("past %d egresses: %d hops, %v", ProbeMaxHops, len(p.Hops), err)
	}
	for n := range len(f) {
		if _, err := ParseProbe(f[:n]); !errors.Is(err, ErrNotLatencyProbe) {
			t.Fatalf("%d of %d bytes: %v, want ErrNotLatencyProbe", n, len(f), err)
		}
	}
	other := append([]byte(nil), f...)
	other[14+20+8] = 0x04 // RC SEND_ONLY: RDMA traffic, no probe
	if _, err := ParseProbe(other); !errors.Is(err, ErrNotLatencyProbe) {
		t.Errorf("an RDMA packet parsed as a probe: %v", err)
	}
	if _, err := ProbeFrame(Probe{Src: netip.MustParseAddr("::1"), Dst: want.Dst}); err == nil {
		t.Error("an IPv6 probe was built")
	}
}
