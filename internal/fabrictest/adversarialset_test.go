package fabrictest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAdversarialSetIsWhole: the command docs/production.md gives for the
// adversarial tests names only tests that exist, and runs every test of
// this package's adversarial and hardening files, so a renamed or an
// added one cannot drop out of it unnoticed.
func TestAdversarialSetIsWhole(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "production.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### The adversarial tests")
	if !ok {
		t.Fatal(`docs/production.md has no "### The adversarial tests"`)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	m := regexp.MustCompile(`-run '([^']+)' \\\n\s+([^\n]+)`).FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("no `go test -run '…' \\` and its packages in the section:\n%s", section)
	}
	run, err := regexp.Compile("^(?:" + m[1] + ")")
	if err != nil {
		t.Fatalf("the -run pattern does not compile: %v", err)
	}
	alternatives := regexp.MustCompile(`^Test\((.*)\)$`).FindStringSubmatch(m[1])
	if alternatives == nil {
		t.Fatalf("the -run pattern %q is not Test(A|B|…)", m[1])
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	var names []string
	for _, pkg := range strings.Fields(m[2]) {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
		if len(files) == 0 {
			t.Errorf("the command names %s, which has no tests", pkg)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, fm := range testFunc.FindAllStringSubmatch(string(src), -1) {
				names = append(names, fm[1])
			}
		}
	}
	for _, alt := range strings.Split(alternatives[1], "|") {
		found := false
		for _, n := range names {
			found = found || strings.HasPrefix(n, "Test"+alt)
		}
		if !found {
			t.Errorf("the adversarial set runs Test%s…, which no test of its packages is", alt)
		}
	}
	for _, file := range []string{"adversarial_test.go", "hardening_test.go", "bounds_test.go", "slowclients_test.go", "tenants_test.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, fm := range testFunc.FindAllStringSubmatch(string(src), -1) {
			if !run.MatchString(fm[1]) {
				t.Errorf("%s (%s) is not in the adversarial set's command", fm[1], file)
			}
		}
	}
}
