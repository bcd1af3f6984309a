package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

type inner struct {
	AvoidSwitches []string `json:"avoid_switches"`
}

type embedded struct {
	Name string `json:"name"`
}

type request struct {
	embedded
	Gbps        float64           `json:"gbps"`
	Ports       *inner            `json:"ports,omitempty"`
	Labels      map[string]string `json:"labels"`
	Items       []inner           `json:"items"`
	Any         any               `json:"any"`
	When        time.Time         `json:"when"`
	NoTag       int
	unexported  int //nolint:unused // encoding/json ignores it, and so must the check
	SkippedName int `json:"-"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		// want is "" for success, else a substring of the error.
		want  string
		limit bool // errors.Is(err, ErrLimit)
	}{
		{name: "plain", body: `{"name":"a","gbps":1.5e2,"ports":{"avoid_switches":["s1"]},"labels":{"A":"b","a":"c"},"NoTag":3}`},
		{name: "whitespace everywhere", body: " \n{ \"name\" : \"a\" ,\t\"items\" : [ { } , {\"avoid_switches\":[]} ] }\r\n"},
		{name: "escaped key", body: `{"gb\u0070s":1}`},
		{name: "escapes in strings", body: `{"name":"\"\\\/\b\f\n\r\t\u00e9"}`},
		{name: "anything under any", body: `{"any":{"GBPS":1,"x":[{"y":null}]}}`},
		{name: "time decodes itself", body: `{"when":"2026-12-06T00:00:00Z"}`},
		{name: "null", body: `null`},
		{name: "key in another case", body: `{"GBPS":1}`, want: `key "GBPS": field names are case-sensitive (want "gbps")`},
		{name: "nested key in another case", body: `{"items":[{},{"Avoid_Switches":[]}]}`, want: `key "items[1].Avoid_Switches": field names are case-sensitive (want "items[1].avoid_switches")`},
		{name: "key twice", body: `{"name":"a","gbps":1,"name":"b"}`, want: `key "name": given twice`},
		{name: "escaped key twice", body: `{"name":"a","n\u0061me":"b"}`, want: `key "name": given twice`},
		{name: "map key twice", body: `{"labels":{"a":"1","a":"2"}}`, want: `key "labels.a": given twice`},
		{name: "many keys, one twice", body: manyKeys(40, true), want: `given twice`},
		{name: "many keys", body: manyKeys(40, false)},
		{name: "unknown field", body: `{"nope":1}`, want: `key "nope": unknown field`},
		{name: "unexported field", body: `{"unexported":1}`, want: `unknown field`},
		{name: "skipped field", body: `{"SkippedName":1}`, want: `unknown field`},
		{name: "empty", body: ``, want: "empty body"},
		{name: "trailing data", body: `{} {}`, want: "data after the value at byte 3"},
		{name: "unterminated", body: `{"name":"a"`, want: "unexpected end"},
		{name: "unterminated string", body: `{"name":"a`, want: "unexpected end of JSON in a string"},
		{name: "control character", body: "{\"name\":\"a\x01\"}", want: "control character"},
		{name: "bad escape", body: `{"name":"\x"}`, want: "invalid escape"},
		{name: "bad unicode escape", body: `{"name":"\u12g4"}`, want: `invalid \u escape`},
		{name: "leading zero", body: `{"gbps":01}`, want: "want ',' or '}'"},
		{name: "bare dot", body: `{"gbps":1.}`, want: "want a digit after '.'"},
		{name: "bare exponent", body: `{"gbps":1e}`, want: "want a digit in the exponent"},
		{name: "bad literal", body: `{"any":tru}`, want: "invalid literal"},
		{name: "type mismatch", body: `{"gbps":"fast"}`, want: "cannot unmarshal string"},
		{name: "too deep", body: strings.Repeat("[", 33) + strings.Repeat("]", 33), want: "nested more than 32 levels deep", limit: true},
		{name: "deep enough", body: `{"any":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`},
		{name: "too many values", body: `{"any":[` + strings.Repeat("0,", 100_000) + `0]}`, want: "more than 100000 values", limit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v request
			err := Decode([]byte(tc.body), &v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			case errors.Is(err, ErrLimit) != tc.limit:
				t.Fatalf("errors.Is(%v, ErrLimit) = %v", err, !tc.limit)
			}
		})
	}
}

// manyKeys is an object of n map keys (past the short list the check
// keeps in place), the last a repeat of the first if dup.
func manyKeys(n int, dup bool) string {
	var b strings.Builder
	b.WriteString(`{"labels":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":"v"`)
	}
	if dup {
		b.WriteString(`,"k0":"again"`)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestDecodesLikeEncodingJSON: what the check lets through decodes to what
// encoding/json makes of it.
func TestDecodesLikeEncodingJSON(t *testing.T) {
	body := []byte(`{"name":"x","gbps":12.5,"ports":{"avoid_switches":["a","b"]},"labels":{"k":"v"},"items":[{"avoid_switches":null}],"any":[1,"2",{"3":true}],"NoTag":7}`)
	var got, want request
	if err := Decode(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, encoding/json %+v", got, want)
	}
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is what a body of n bytes may allocate while it is checked
// and, if accepted, decoded into the test's request type: a small multiple of its
// size (the values decoded) and a fixed part.
func allocBound(n int) uint64 { return uint64(32*n + 64<<10) }

// adversarial are bodies built to cost: deep nesting, wide arrays, many
// keys, long strings and keys, escapes.
func adversarial() map[string][]byte {
	const size = 1 << 20
	return map[string][]byte{
		"nested arrays":           []byte(strings.Repeat("[", size)),
		"nested objects":          []byte(strings.Repeat(`{"any":`, size/7)),
		"nested under any":        []byte(`{"any":` + strings.Repeat("[", size)),
		"wide array":              []byte(`{"any":[` + strings.Repeat("0,", size/2) + `0]}`),
		"wide object":             []byte(manyKeys(size/16, false)),
		"long string":             []byte(`{"name":"` + strings.Repeat("a", size) + `"}`),
		"long key":                []byte(`{"` + strings.Repeat("k", size) + `":1}`),
		"escaped keys":            []byte(`{"labels":{` + strings.Repeat(`"\u0061":1,`, size/12) + `"b":2}}`),
		"many small objects":      []byte(`{"items":[` + strings.Repeat(`{"avoid_switches":["s"]},`, size/26) + `{}]}`),
		"strings in a wide array": []byte(`{"ports":{"avoid_switches":[` + strings.Repeat(`"abcdefgh",`, size/12) + `"x"]}}`),
	}
}

// TestAllocationsBounded: no body, however built, makes the decoder
// allocate more than a small multiple of its size; the deep ones are
// refused at once (a quadratic check allocated gigabytes for them).
func TestAllocationsBounded(t *testing.T) {
	for name, body := range adversarial() {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				var v request
				err = Decode(body, &v)
			})
			if bound := allocBound(len(body)); n > bound {
				t.Fatalf("%d-byte body allocated %d bytes (bound %d); err=%v", len(body), n, bound, err)
			}
			if err != nil && len(err.Error()) > 300 {
				t.Fatalf("the error repeats the body: %.300s…", err)
			}
			t.Logf("%d bytes: allocated %d, err=%v", len(body), n, err)
		})
	}
}

// FuzzDecode: any input either is refused, or decodes exactly as
// encoding/json decodes it; and it never allocates past the bound.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{"name":"a","gbps":1}`, `{"GBPS":1}`, `{"a":1,"a":2}`, `[[[[]]]]`, `{"any":{"x":[1,2,{"y":"z"}]}}`,
		`{"labels":{"\u0061":"1","a":"2"}}`, `{"items":[{"avoid_switches":["a"]}]}`, `"\ud800"`, `-0.0e+1`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got request
		var err error
		n := allocated(func() { err = Decode(body, &got) })
		if bound := allocBound(len(body)); n > bound {
			t.Fatalf("%d-byte body allocated %d bytes (bound %d)", len(body), n, bound)
		}
		var want request
		plainErr := json.Unmarshal(body, &want)
		if err == nil && plainErr != nil {
			t.Fatalf("accepted what encoding/json refuses (%v): %q", plainErr, body)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, encoding/json %+v", got, want)
		}
		var syntax *SyntaxError
		if errors.As(err, &syntax) && json.Valid(body) {
			t.Fatalf("valid JSON refused as malformed: %v: %q", err, body)
		}
	})
}

// BenchmarkNestedBody is the body that took the quadratic check to
// gigabytes: 100,000 nested arrays (200 KB).
func BenchmarkNestedBody(b *testing.B) {
	body := []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))
	b.ReportAllocs()
	for b.Loop() {
		var v request
		if err := Decode(body, &v); !errors.Is(err, ErrLimit) {
			b.Fatal(err)
		}
	}
}
