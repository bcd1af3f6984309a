package proctest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/tenancy"
)

// whoami is the role of token on the API at addr (HTTP status and role).
func whoami(t *testing.T, addr, token string) (int, models.TokenRole) {
	t.Helper()
	var tok models.Token
	code, err := proctest.Call(context.Background(), nil, "GET", "http://"+addr+"/api/v1/whoami", token, nil, &tok)
	if err != nil {
		t.Fatal(err)
	}
	return code, tok.Role
}

// TestOperatorTokenRecovery: with every operator token lost, whoever
// holds the data directory issues a new one with `accelnet token create`,
// while accelnet runs (through the embedded etcd's client certificate)
// and while it does not (it starts the etcd itself).
func TestOperatorTokenRecovery(t *testing.T) {
	dir := t.TempDir()
	addr := fabrictest.FreeAddr(t)
	bin := proctest.Bin(t, "accelnet")
	start := func() *proctest.Proc {
		p := proctest.Start(t, "accelnet", bin, "demo", "--topology", "leafspine:2x1x2", "--workload", "none", "--sample-one-in", "0",
			"--data-dir", dir, "--http-addr", addr)
		proctest.Wait(t, fabrictest.Backstop(60*time.Second), "the demo ready", func() error {
			code, err := proctest.Call(context.Background(), nil, "GET", "http://"+addr+"/readyz", "", nil, nil)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("HTTP %d", code)
			}
			return err
		})
		return p
	}
	p := start()
	if err := os.Remove(filepath.Join(dir, "operator.token")); err != nil { // lost
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "token", "create", "--data-dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("token create beside the running demo: %v\n%s", err, out)
	}
	secret := regexp.MustCompile(`anet_[A-Za-z0-9_-]{43}`).FindString(string(out))
	if code, role := whoami(t, addr, secret); code != http.StatusOK || role != models.RoleOperator {
		t.Fatalf("the recovered token: HTTP %d, role %q\n%s", code, role, out)
	}

	p.Stop()
	file := filepath.Join(t.TempDir(), "op.token")
	if out, err := exec.Command(bin, "token", "create", "--data-dir", dir, "--out", file).CombinedOutput(); err != nil {
		t.Fatalf("token create with nothing running: %v\n%s", err, out)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("--out file: %v %v", info, err)
	}
	start()
	if code, role := whoami(t, addr, operatorToken(t, file)); code != http.StatusOK || role != models.RoleOperator {
		t.Fatalf("the token issued offline: HTTP %d, role %q", code, role)
	}
}

// TestOperatorTokenFromAFile: a deployment that provisions the first
// operator token (a Kubernetes Secret) has it registered on the first
// start; nothing is printed or written to the data directory.
func TestOperatorTokenFromAFile(t *testing.T) {
	dir := t.TempDir()
	secret, err := tenancy.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fabrictest.FreeAddr(t)
	p := proctest.Start(t, "accelnet", proctest.Bin(t, "accelnet"), "demo", "--topology", "leafspine:2x1x2", "--workload", "none",
		"--sample-one-in", "0", "--data-dir", dir, "--http-addr", addr, "--operator-token-file", file)
	proctest.Wait(t, fabrictest.Backstop(60*time.Second), "the demo ready", func() error {
		code, err := proctest.Call(context.Background(), nil, "GET", "http://"+addr+"/readyz", "", nil, nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("HTTP %d", code)
		}
		return err
	})
	if code, role := whoami(t, addr, secret); code != http.StatusOK || role != models.RoleOperator {
		t.Fatalf("the provisioned token: HTTP %d, role %q", code, role)
	}
	if strings.Contains(p.Log(), secret) {
		t.Error("the provisioned token was printed")
	}
	if _, err := os.Stat(filepath.Join(dir, "operator.token")); err == nil {
		t.Error("the provisioned token was written to the data directory")
	}
}
