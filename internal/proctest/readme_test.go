package proctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// readmeCommand is a command of the README and the output it shows
// ("" if none).
type readmeCommand struct {
	cmd, shown string
}

// readmeCommands are the commands of the README, in order: every line of
// its ```sh blocks, and the "$ " lines of its transcripts, continuation
// lines joined, each with the output the README shows for it: in a sh
// block the "#  " comment lines right after it (a leading HTTP status
// taken off), in a transcript the lines after it up to the next "$ ". A
// block after an HTML comment "not run by the README test" is left out,
// and so is a command that says it runs until Ctrl-C. errors are the
// HTTP statuses the README says its commands answer with besides 2xx
// (comment lines "#  409 …").
func readmeCommands(t *testing.T, path string) (commands []readmeCommand, errors []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	status := regexp.MustCompile(`^#\s+([45]\d\d) `)
	var block []string
	kind, skip, inBlock := "", false, false
	flush := func() {
		var cmd string
		last := -1 // the command the output lines belong to
		for _, l := range block {
			trimmed := strings.TrimSpace(l)
			if kind == "text" {
				if !strings.HasPrefix(l, "$ ") && cmd == "" {
					if last >= 0 {
						commands[last].shown += l + "\n"
					}
					continue // output
				}
				l = strings.TrimPrefix(l, "$ ")
			}
			if m := status.FindStringSubmatch(trimmed); m != nil && !skip {
				errors = append(errors, m[1])
			}
			if cmd == "" && kind == "sh" && strings.HasPrefix(l, "#  ") {
				if last >= 0 {
					out := strings.TrimPrefix(l, "#  ")
					if m := status.FindStringSubmatch(trimmed); m != nil && commands[last].shown == "" {
						out = strings.TrimPrefix(trimmed, m[0])
					}
					commands[last].shown += out + "\n"
				}
				continue
			}
			if cmd == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
				last = -1 // a comment or a blank line: what follows is not its output
				continue
			}
			cmd += l + "\n"
			if strings.HasSuffix(l, "\\") {
				continue
			}
			last = -1
			if !skip && !strings.Contains(cmd, "until Ctrl-C") {
				commands = append(commands, readmeCommand{cmd: strings.TrimSpace(cmd)})
				last = len(commands) - 1
			}
			cmd = ""
		}
		block = nil
	}
	lastComment := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(l, "```"):
			inBlock, kind = true, strings.TrimPrefix(l, "```")
			skip = lastComment || (kind != "sh" && kind != "text")
		case inBlock && l == "```":
			inBlock = false
			flush()
		case inBlock:
			block = append(block, l)
		}
		if !inBlock && strings.TrimSpace(l) != "" {
			lastComment = strings.HasPrefix(l, "<!-- not run by the README test")
		}
	}
	return commands, errors
}

// outputMatches says whether a command's output is what the README shows
// for it: compared without white space, with IDs, tokens and times
// masked, and "…" in what is shown standing for anything.
func outputMatches(shown, got string) bool {
	norm := func(s string) string {
		s = regexp.MustCompile(`anet_[A-Za-z0-9_-]{43}`).ReplaceAllString(s, "TOKEN")
		s = regexp.MustCompile(`\b[0-9a-f]{16,20}\b`).ReplaceAllString(s, "ID")
		s = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)`).ReplaceAllString(s, "TIME")
		return strings.Join(strings.Fields(s), "")
	}
	parts := strings.Split(norm(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^(?s:" + strings.Join(parts, ".*") + ")$").MatchString(norm(got))
}

// TestREADMECommands runs the README's commands as written, in order, in
// one shell, against `accelnet demo` (the newcomer's first hour): each
// must succeed, and the HTTP answers must be 2xx except the errors the
// README shows, and each output it shows must be what the command printed.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's commands need %s (.ci/run installs it)", tool)
		}
	}
	commands, wantErrors := readmeCommands(t, filepath.Join("..", "..", "README.md"))
	if len(commands) < 20 {
		t.Fatalf("found %d commands in the README", len(commands))
	}
	dir := t.TempDir()
	addr := fabrictest.FreeAddr(t)
	// Without its workload: the commands do not need the traffic, and at
	// line rate it would take both cores from the packages tested beside
	// this one.
	startDemo(t, filepath.Join(dir, "accelnet-data"), addr, "--workload", "none")

	var script strings.Builder
	fmt.Fprintf(&script, "set -eo pipefail\nexport PATH=%q:\"$PATH\" ACCELNET_CONFIG=%q\n", filepath.Dir(Bin(t, "accelnetctl")), filepath.Join(dir, "config.yaml"))
	// Every HTTP status to stderr, the answers untouched for pipes.
	script.WriteString("curl() { command curl -w '%{stderr}HTTP %{http_code}\\n' \"$@\"; }\n")
	outs := filepath.Join(dir, "outputs")
	if err := os.Mkdir(outs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, c := range commands {
		cmd := strings.ReplaceAll(c.cmd, "localhost:8080", addr)
		// A group, not a subshell: what a command assigns holds for the next.
		fmt.Fprintf(&script, "echo %q >&2\n{ %s\n} > %s\n", fmt.Sprintf("README command %d", i+1), cmd, filepath.Join(outs, strconv.Itoa(i+1)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = dir
	var stdout, stderr bytes.Buffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	err := sh.Run()
	where := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		if n, ok := strings.CutPrefix(l, "README command "); ok {
			where = n
		}
	}
	if err != nil {
		idx := 0
		fmt.Sscan(where, &idx)
		cmd := ""
		if idx > 0 && idx <= len(commands) {
			cmd = commands[idx-1].cmd
		}
		t.Fatalf("README command %s failed (%v):\n%s\nstderr:\n%s\nstdout:\n%s", where, err, cmd, tail(stderr.String()), tail(stdout.String()))
	}
	var gotErrors []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if code, ok := strings.CutPrefix(l, "HTTP "); ok && !strings.HasPrefix(code, "2") {
			gotErrors = append(gotErrors, code)
		}
	}
	slices.Sort(gotErrors)
	slices.Sort(wantErrors)
	if !slices.Equal(gotErrors, wantErrors) {
		t.Errorf("HTTP errors %v, the README shows %v\nstderr:\n%s", gotErrors, wantErrors, tail(stderr.String()))
	}
	// What the README shows a command print is what it printed.
	checked := 0
	for i, c := range commands {
		if c.shown == "" {
			continue
		}
		got, err := os.ReadFile(filepath.Join(outs, strconv.Itoa(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if !outputMatches(c.shown, string(got)) {
			t.Errorf("README command %d shows an output it did not print:\n%s\nshown:\n%s\nprinted:\n%s", i+1, c.cmd, c.shown, got)
		}
	}
	if checked < 8 {
		t.Errorf("only %d of the README's commands show an output", checked)
	}
	t.Logf("%d README commands ran, %d outputs checked", len(commands), checked)
}

// tail is the end of a long output.
func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// TestREADMERehearsal runs the README's rehearsal, fabricsim and `accelnet
// serve` in two processes, as written: the binaries stand for `go run`,
// the paths are the test's own and each server gets a free address. The
// controller must become ready on the fabric fabricsim wrote.
func TestREADMERehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fabricsim and the controller")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("the README's commands need bash")
	}
	lines := readmeBlockAfter(t, filepath.Join("..", "..", "README.md"), "both run until stopped")
	if len(lines) != 3 {
		t.Fatalf("the rehearsal is %d lines, want fabricsim, the wait and serve:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	dir := t.TempDir()
	api, simAPI := fabrictest.FreeAddr(t), fabrictest.FreeAddr(t)
	script := strings.Join(lines, "\n")
	// In this order: the data directory before the other /tmp paths, the
	// paths before the binaries (which may live in /tmp).
	for _, r := range [][2]string{
		{"/tmp/accelnet", filepath.Join(dir, "accelnet")},
		{"/tmp/", dir + "/"},
		{"go run ./cmd/fabricsim", Bin(t, "fabricsim") + " -http-addr " + simAPI},
		{"go run ./cmd/accelnet serve", Bin(t, "accelnet") + " serve --http-addr " + api},
	} {
		if !strings.Contains(script, r[0]) {
			t.Fatalf("the rehearsal no longer says %q:\n%s", r[0], script)
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	// Its own process group: the background fabricsim goes with the shell.
	sh := exec.Command("bash", "-c", "set -e\n"+script)
	sh.Dir = dir
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sh.Wait() }()
	defer func() {
		syscall.Kill(-sh.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	backstop := time.After(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the rehearsal stopped (%v):\n%s", err, tail(out.String()))
		case <-backstop:
			t.Fatalf("the controller is not ready (%v):\n%s", err, tail(out.String()))
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The controller programs the fabric fabricsim serves: fat-tree k=4 has
	// 20 switches.
	resp, err := http.Get("http://" + api + "/api/v1/topology")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var topo struct {
		Switches []json.RawMessage `json:"switches"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&topo); err != nil {
		t.Fatal(err)
	}
	if len(topo.Switches) != 20 {
		t.Errorf("the controller has %d switches, fat-tree k=4 has 20", len(topo.Switches))
	}
}

// readmeBlockAfter is the command lines (comments and blank lines taken
// off, trailing comments too) of the README's first code block after an
// HTML comment that contains marker.
func readmeBlockAfter(t *testing.T, path, marker string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	found, in := false, false
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case !found:
			found = strings.HasPrefix(l, "<!--") && strings.Contains(l, marker)
		case !in && strings.HasPrefix(l, "```"):
			in = true
		case in && l == "```":
			return lines
		case in:
			if i := strings.Index(l, "    #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}
	t.Fatalf("no code block after a comment saying %q in %s", marker, path)
	return nil
}

// TestREADMEStaysShort: the README is the front door, at most 260 lines;
// reference and depth go to docs/ (the headline table grows with the
// long benchmark rows, so this is checked, not remembered).
func TestREADMEStaysShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 260 {
		t.Errorf("README.md has %d lines, at most 260", n)
	}
}

// startDemo runs `accelnet demo` on dataDir and addr with args, stopped
// when the test ends, and returns once it is ready.
func startDemo(t *testing.T, dataDir, addr string, args ...string) {
	t.Helper()
	demo := Start(t, "demo", Bin(t, "accelnet"), append([]string{"demo", "--data-dir", dataDir, "--http-addr", addr}, args...)...)
	backstop := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if demo.Exited() || time.Now().After(backstop) {
			t.Fatalf("the demo is not ready (%v):\n%s", err, demo.Log())
		}
		<-time.After(100 * time.Millisecond)
	}
}

// TestREADMEKubernetes runs the README's Kubernetes walkthrough as
// written, beside `accelnet demo`: the control plane of
// internal/kubetest/cluster, accelnet-kube, Debian's kubectl. The
// binaries stand for `go run`, the paths and addresses are the test's
// own. The ring job's pods must be Ready on an Installed intent over the
// demo's hosts h2-3 and h6-3, and the HyperNodes of their leaves listed.
func TestREADMEKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo and a Kubernetes control plane")
	}
	for _, tool := range []string{"bash", "kubectl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s (.ci/run installs it)", tool)
		}
	}
	lines := readmeBlockAfter(t, filepath.Join("..", "..", "README.md"), "TestREADMEKubernetes runs it")
	dir := t.TempDir()
	addr := fabrictest.FreeAddr(t)
	startDemo(t, filepath.Join(dir, "accelnet-data"), addr, "--workload", "none")
	examples, err := filepath.Abs(filepath.Join("..", "..", "deploy", "k8s", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join(lines, "\n")
	for _, r := range [][2]string{
		{"/tmp/kubeconfig", filepath.Join(dir, "kubeconfig")},
		{"go run ./internal/kubetest/cluster", Bin(t, "cluster")},
		{"go run ./cmd/accelnet-kube", Bin(t, "accelnet-kube") + " --server http://" + addr},
		{"deploy/k8s/examples", examples},
	} {
		if !strings.Contains(script, r[0]) {
			t.Fatalf("the walkthrough no longer says %q:\n%s", r[0], script)
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Its own process group: the background servers go with the shell.
	sh := exec.CommandContext(ctx, "bash", "-c", "set -eo pipefail\n"+script)
	sh.Dir = dir
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(Bin(t, "accelnetctl"))+":"+os.Getenv("PATH"), "ACCELNET_SERVER=http://"+addr,
		"ACCELNET_CONFIG="+filepath.Join(dir, "config.yaml"))
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	// Files, not pipes: the servers it starts in the background keep
	// their output open after the script ends.
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	sh.Stdout, sh.Stderr = stdout, stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	// The script ends with the servers still running in its group.
	defer syscall.Kill(-sh.Process.Pid, syscall.SIGTERM)
	err = sh.Wait()
	outData, _ := os.ReadFile(stdout.Name())
	errData, _ := os.ReadFile(stderr.Name())
	out := string(outData)
	if err != nil {
		t.Fatalf("the walkthrough failed (%v):\nstdout:\n%s\nstderr:\n%s", err, tail(out), tail(string(errData)))
	}
	for _, want := range []string{"Installed: ring-allreduce over 2 fabric hosts, 100 Gb/s per GPU, for tenant training", "-leaf2", "-leaf6", "-spines"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough did not print %q:\n%s", want, out)
		}
	}
	// accelnet holds one Installed intent over the two nodes' hosts.
	token, err := os.ReadFile(filepath.Join(dir, "accelnet-data", "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	var list api.IntentList
	operator := &apiclient.Client{Server: "http://" + addr, Token: strings.TrimSpace(string(token))}
	if _, err := operator.Do(t.Context(), "GET", "/api/v1/intents?tenant=training", nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || !strings.HasPrefix(list.Items[0].Spec.Name, "k8s:default/ring-") || list.Items[0].Status.State != models.StateInstalled ||
		list.Items[0].Spec.Collective == nil || fmt.Sprint(slices.Sorted(slices.Values(list.Items[0].Spec.Collective.Endpoints))) != "[h2-3 h6-3]" {
		t.Errorf("tenant training's intents: %+v", list.Items)
	}
}
