package northbound

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
)

// FuzzDecoders drives every request body the API reads through its
// decoder: any input is either refused with a 400 that says why, or
// decodes to a value whose JSON, decoded again, is accepted and equal —
// never a panic, never an answer without a reason.
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","src":"h1-1","dst":"h2-1","gbps":10,"src_ports":{"first":1,"last":1}}`,
		`{"tenant":"ml","name":"c","src_ports":{"first":5,"last":8},"collective":{"pattern":"all-to-all","endpoints":["h1-1","h2-1"],"gbps_per_gpu":30}}`,
		`{"name":"x","max_gbps":100,"max_intents":3}`,
		`{"role":"tenant","tenant":"ml"}`,
		`{"switch":"spine1","reason":"optics","force":true}`,
		`{"link":"leaf1:3<->spine1:1"}`,
		`{"GBPS":1}`, `{"a":1,"a":2}`, `[]`, `{"constraints":{"avoid_switches":["s1","s1"]}}`,
	} {
		f.Add([]byte(seed))
	}
	targets := []func() any{
		func() any { return new(api.IntentRequest) },
		func() any { return new(models.Tenant) },
		func() any { return new(api.TokenRequest) },
		func() any { return new(models.Drain) },
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range targets {
			v := target()
			p, ok := decodeJSON(body, v)
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
