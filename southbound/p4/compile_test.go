package p4

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/accelnet/accelnet/southbound/p4/p4c"
)

// TestCompilerOutputMatches compiles accelnet.p4 with p4c-bm2-ss (when it
// is installed) and checks that what the controller embeds is exactly the
// compiler's output: the P4Info — every table, action, match field,
// parameter, ID, width, size, counter, selector and digest — and the BMv2
// JSON, and that the program compiles without a warning. go generate
// ./southbound/p4 regenerates both.
func TestCompilerOutputMatches(t *testing.T) {
	compiler, err := p4c.Find()
	if err != nil {
		t.Skipf("%v: the committed P4Info and BMv2 JSON are not rechecked here", err)
	}
	out, err := p4c.Compile(context.Background(), compiler, Source)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compiled with %s", out.Version)
	if len(out.Warnings) > 0 {
		t.Errorf("accelnet.p4 compiles with warnings: %q", out.Warnings)
	}
	compiled, err := Parse(out.P4Info)
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(compiled, embedded, protocmp.Transform()); diff != "" {
		t.Errorf("the embedded P4Info is not the compiler's (-compiler +embedded); run go generate ./southbound/p4:\n%s", diff)
	}
	if !bytes.Equal(out.JSON, BMv2JSON) {
		t.Errorf("the embedded BMv2 JSON (%d bytes) is not the compiler's (%d bytes); run go generate ./southbound/p4", len(BMv2JSON), len(out.JSON))
	}
	if _, err := NewSchema(compiled); err != nil {
		t.Errorf("the compiler's P4Info lacks what the controller needs: %v", err)
	}
}
