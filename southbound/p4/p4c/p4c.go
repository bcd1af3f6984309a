// Package p4c runs the P4 compiler's BMv2 back end (p4c-bm2-ss) on
// accelnet.p4: what go generate uses to regenerate the committed P4Info
// and BMv2 JSON, and what the test that compares them runs.
package p4c

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNotInstalled means no p4c-bm2-ss was found.
var ErrNotInstalled = errors.New("p4c: p4c-bm2-ss not found (set P4C_BM2_SS or put it on PATH)")

// Find locates the compiler: $P4C_BM2_SS, else p4c-bm2-ss on PATH.
func Find() (string, error) {
	if p := os.Getenv("P4C_BM2_SS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: P4C_BM2_SS=%s: %v", ErrNotInstalled, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("p4c-bm2-ss")
	if err != nil {
		return "", ErrNotInstalled
	}
	return p, nil
}

// Expected says whether a compiler warning is the one p4c's BMv2 back
// end gives every table an action selector implements, whatever the
// program: its front end gives every table a default action (NoAction
// when the program declares none, as accelnet.p4 does for ipv4_lpm) and
// BMv2 has none for such tables; the back end calls the warning directly,
// so @noWarn cannot silence it. accelnet.p4 drops a miss in apply. Any
// other warning fails go generate and the test.
func Expected(warning string) bool {
	return strings.Contains(warning, "Target does not support default_action for .Ingress.ipv4_lpm (due to action profiles)")
}

// Output is what the compiler made of a program.
type Output struct {
	JSON     []byte   // the BMv2 JSON
	P4Info   []byte   // the P4Info, text format
	Warnings []string // the compiler's warnings (a clean program has none)
	Version  string   // p4c-bm2-ss --version
}

// Compile compiles source (a P4_16 program for v1model) in a temporary
// directory.
func Compile(ctx context.Context, compiler string, source []byte) (Output, error) {
	dir, err := os.MkdirTemp("", "accelnet-p4c-")
	if err != nil {
		return Output{}, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "accelnet.p4")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return Output{}, err
	}
	jsonPath, infoPath := filepath.Join(dir, "accelnet.json"), filepath.Join(dir, "accelnet.p4info.txtpb")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, compiler, "--arch", "v1model", "--std", "p4-16",
		"-o", jsonPath, "--p4runtime-files", infoPath, src)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return Output{}, fmt.Errorf("p4c: %s: %w\n%s", compiler, err, strings.ReplaceAll(stderr.String(), dir+"/", ""))
	}
	var out Output
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "warning") && !Expected(line) {
			out.Warnings = append(out.Warnings, strings.ReplaceAll(strings.TrimSpace(line), dir+"/", ""))
		}
	}
	if out.JSON, err = os.ReadFile(jsonPath); err != nil {
		return Output{}, err
	}
	if out.P4Info, err = os.ReadFile(infoPath); err != nil {
		return Output{}, err
	}
	// The JSON records the source's path: keep the temporary one out of
	// what gets committed.
	out.JSON = bytes.ReplaceAll(out.JSON, []byte(src), []byte("accelnet.p4"))
	out.JSON = bytes.ReplaceAll(out.JSON, []byte(dir+"/"), nil)
	if v, err := exec.CommandContext(ctx, compiler, "--version").CombinedOutput(); err == nil {
		out.Version = strings.TrimSpace(string(v))
	}
	return out, nil
}
