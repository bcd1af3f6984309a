// Package proctest runs accelnet's binaries as separate processes, for
// tests that need real process boundaries: a leader killed with SIGKILL,
// and the deploy files' commands run as plain processes.
package proctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Bin returns the path of one of the module's commands (accelnet,
// fabricsim, accelnetctl, accelnet-kube), built once per test binary.
func Bin(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "accelnet-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"github.com/accelnet/accelnet/cmd/accelnet", "github.com/accelnet/accelnet/cmd/fabricsim", "github.com/accelnet/accelnet/cmd/accelnetctl",
			"github.com/accelnet/accelnet/cmd/accelnet-kube", "github.com/accelnet/accelnet/internal/kubetest/cluster")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// Tool builds pkg from the separate tools module in dir (a third-party
// program the tests run against, such as gnxi's gnmi_target) and returns
// the binary's path; the build takes up to a few minutes on a fresh
// machine, as it downloads the module's dependencies.
func Tool(t testing.TB, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s in %s: %v\n%s", pkg, dir, err, out)
	}
	return bin
}

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Proc is a running process whose output goes to a log file.
type Proc struct {
	Name string
	Args []string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start runs bin with args; the process is stopped when the test ends.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	return StartEnv(t, name, nil, bin, args...)
}

// StartEnv is Start with env (NAME=value) added to the environment.
func StartEnv(t testing.TB, name string, env []string, bin string, args ...string) *Proc {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Name: name, Args: args, log: logFile, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s log (%s):\n%s", name, strings.Join(args, " "), p.Log())
		}
	})
	return p
}

// Pid is the process's ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Log is what the process printed so far.
func (p *Proc) Log() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// Exited says whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr waits up to timeout for the process to end and returns how it
// ended (nil: exit status 0).
func (p *Proc) ExitErr(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still runs after %s", p.Name, timeout)
	}
}

// Kill sends SIGKILL and waits: nothing of the process runs after it.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop sends SIGTERM and waits up to 10s, then kills.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Wait polls cond every 10ms until it holds (nil) or timeout passes, and
// returns how long it took.
func Wait(t testing.TB, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		<-tick.C
	}
}

// WaitFabricUp waits until fabricsim's control API at api (host:port)
// says its switches serve, and returns how long that took and the control
// API's token, read from tokenFile (its -token-file).
func WaitFabricUp(t testing.TB, timeout time.Duration, api, tokenFile string) (time.Duration, string) {
	t.Helper()
	var token string
	took := Wait(t, timeout, "fabricsim's switches up", func() error {
		if token == "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return err
			}
			token = strings.TrimSpace(string(data))
		}
		var st struct {
			Up bool `json:"up"`
		}
		if code, err := Call(context.Background(), nil, "GET", "http://"+api+"/sim/v1/stats", token, nil, &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("HTTP %d %v", code, err)
		}
		if !st.Up {
			return errors.New("the control API answers; the switches are not up yet")
		}
		return nil
	})
	return took, token
}

// DefaultClient is what Call uses when given none.
var DefaultClient = &http.Client{Timeout: 5 * time.Second}

// Call sends a JSON request (body nil for none) with client (nil:
// DefaultClient) and an optional bearer token, and decodes the answer
// into out (if not nil); it returns the status code.
func Call(ctx context.Context, client *http.Client, method, url, token string, body, out any, headers ...string) (int, error) {
	if client == nil {
		client = DefaultClient
	}
	req, err := fabrictest.NewRequest(ctx, method, url, token, body, headers...)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("HTTP %d: %v: %s", resp.StatusCode, err, data)
		}
	}
	return resp.StatusCode, nil
}
