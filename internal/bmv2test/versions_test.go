package bmv2test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/accelnet/accelnet/southbound/p4/p4c"
)

// TestReferenceToolsAreTheDocumented: where simple_switch_grpc or
// p4c-bm2-ss is installed, the version it says is the one
// docs/real-switches.md names and gives the build steps of. A newer
// build passes the tests too, perhaps; the docs must say which was run.
func TestReferenceToolsAreTheDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/real-switches.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	check := func(tool, bin string, version *regexp.Regexp) {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v: %s", bin, err, out)
			return
		}
		v := version.FindString(string(out))
		if v == "" {
			t.Errorf("%s --version says %q: no version in it", bin, out)
			return
		}
		ran++
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("the installed %s is %s, which docs/real-switches.md does not name: give the steps that build it there (and run the BMv2 tests), or install the version it names", tool, v)
			return
		}
		t.Logf("%s %s, as documented", tool, v)
	}
	if bin, _ := SimpleSwitch(); bin != "" {
		check("simple_switch_grpc", bin, regexp.MustCompile(`\d+\.\d+\.\d+-[0-9a-f]+`))
	} else if bin, err := exec.LookPath("simple_switch_grpc"); err == nil {
		check("simple_switch_grpc", bin, regexp.MustCompile(`\d+\.\d+\.\d+-[0-9a-f]+`))
	}
	if bin, err := p4c.Find(); err == nil {
		check("p4c-bm2-ss", bin, regexp.MustCompile(`\d+\.\d+\.\d+\.\d+`))
	}
	if ran == 0 {
		t.Skip("neither simple_switch_grpc nor p4c-bm2-ss is installed")
	}
}
