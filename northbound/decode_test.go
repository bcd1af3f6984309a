package northbound

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

// bodyTargets are the types every request body the API reads decodes into.
var bodyTargets = []func() any{
	func() any { return new(api.IntentRequest) },
	func() any { return new(api.IntentBatchRequest) },
	func() any { return new(models.Tenant) },
	func() any { return new(api.TokenRequest) },
	func() any { return new(models.Drain) },
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is the most decoding a body of n bytes may allocate: a small
// multiple of its size and a fixed part, whatever its shape.
func allocBound(n int) uint64 { return uint64(32*n + 64<<10) }

// FuzzDecoders drives every request body the API reads through its
// decoder: any input is either refused with a 400 that says why, or
// decodes to a value whose JSON, decoded again, is accepted and equal —
// never a panic, never an answer without a reason, and never more
// allocated than allocBound.
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"first":1,"last":1}}`,
		`{"tenant":"ml","name":"c","src_ports":{"first":5,"last":8},"collective":{"pattern":"all-to-all","endpoints":["h1-1","h2-1"],"gbps_per_gpu":30}}`,
		`{"name":"x","max_gbps":100,"max_intents":3}`,
		`{"role":"tenant","tenant":"ml"}`,
		`{"switch":"spine1","reason":"optics","force":true}`,
		`{"link":"leaf1:3<->spine1:1"}`,
		`{"GBPS":1}`, `{"a":1,"a":2}`, `[]`, `{"constraints":{"avoid_switches":["s1","s1"]}}`,
		strings.Repeat("[", 200), `{"hosts":[` + strings.Repeat(`"h",`, 100) + `"h"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range bodyTargets {
			v := target()
			var p api.Problem
			var ok bool
			if n := allocated(func() { p, ok = decodeJSON(body, v) }); n > allocBound(len(body)) {
				t.Fatalf("%T: a %d-byte body allocated %d bytes", v, len(body), n)
			}
			if !ok {
				if p.Status != http.StatusBadRequest || p.Detail == "" {
					t.Fatalf("%T: refused with %d %q", v, p.Status, p.Detail)
				}
				continue
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%T: decoded, then cannot encode: %v", v, err)
			}
			w := target()
			if p, ok := decodeJSON(again, w); !ok {
				t.Fatalf("%T: its own encoding %s refused: %s", v, again, p.Detail)
			}
		}
	})
}

// TestDecodersBoundAllocations: bodies built to cost (up to the 1 MiB a
// body may have) are refused or decoded within allocBound by every
// decoder. The check that walked keys per level of nesting allocated
// hundreds of megabytes for 20,000 nested arrays (and gigabytes past it).
func TestDecodersBoundAllocations(t *testing.T) {
	bodies := map[string]string{
		"nested arrays":      strings.Repeat("[", maxBody),
		"nested, 20,000":     strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000),
		"nested objects":     strings.Repeat(`{"name":`, maxBody/8),
		"wide array":         `{"hosts":[` + strings.Repeat(`"h",`, maxBody/4-8) + `"h"]}`,
		"numbers":            `{"hosts":[` + strings.Repeat(`1e999,`, maxBody/6-8) + `1]}`,
		"long string":        `{"name":"` + strings.Repeat("a", maxBody-16) + `"}`,
		"escaped long key":   `{"` + strings.Repeat(`\u0061`, maxBody/6-4) + `":1}`,
		"keys in other case": `{"NAME":"` + strings.Repeat("a", maxBody-16) + `"}`,
	}
	for name, body := range bodies {
		for _, target := range bodyTargets {
			v := target()
			var p api.Problem
			n := allocated(func() { p, _ = decodeJSON([]byte(body), v) })
			if n > allocBound(len(body)) {
				t.Errorf("%s into %T: %d bytes allocated for a %d-byte body (%s)", name, v, n, len(body), p.Detail)
			}
			if len(p.Detail) > 500 {
				t.Errorf("%s into %T: the problem repeats the body (%d characters)", name, v, len(p.Detail))
			}
		}
	}
}
