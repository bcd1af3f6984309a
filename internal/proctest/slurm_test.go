package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/models"
)

// TestSlurmPrologAndEpilog runs deploy/slurm's scripts as Slurm's
// controller would, against `accelnet demo`, with accelnetctl and a
// stand-in for scontrol (no Slurm runs here; it expands a node list as
// scontrol show hostnames does): the prolog reserves a sampled ring over
// the job's nodes' fabric hosts, again without a second intent; a node
// without fabric hosts, or a ring that does not fit, fails the prolog
// (or, with ACCELNET_REQUIRED=0, lets the job start); the epilog releases
// the reservation, and succeeds when there is none.
func TestSlurmPrologAndEpilog(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	dir := t.TempDir()
	addr := fabrictest.FreeAddr(t)
	data := filepath.Join(dir, "data")
	startDemo(t, data, addr, "--workload", "none", "--topology", "leafspine:2x2x2@100")
	server := "http://" + addr
	op, err := os.ReadFile(filepath.Join(data, "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	operator := &apiclient.Client{Server: server, Token: strings.TrimSpace(string(op))}
	if _, err := operator.Do(t.Context(), "POST", "/api/v1/tenants", models.Tenant{Name: "hpc"}, nil); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	var tok api.NewTokenView
	if _, err := operator.Do(t.Context(), "POST", "/api/v1/tokens", api.TokenRequest{Tenant: "hpc", Role: models.RoleTenant}, &tok); err != nil {
		t.Fatalf("create token: %v", err)
	}
	tenant := &apiclient.Client{Server: server, Token: tok.Secret}

	// Two GPU nodes with two NICs each, on both leaves; a node missing.
	hostsFile := filepath.Join(dir, "slurm-hosts")
	if err := os.WriteFile(hostsFile, []byte("gpu1 h1-1,h2-1\ngpu2 h1-2,h2-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// scontrol show hostnames LIST: one name a line (a comma list here).
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte("#!/bin/sh\n[ \"$1 $2\" = \"show hostnames\" ] || exit 2\necho \"$3\" | tr , '\\n'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(script, job, nodes string, env ...string) (string, error) {
		cmd := exec.Command(filepath.Join("..", "..", "deploy", "slurm", script))
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(Bin(t, "accelnetctl"))+":"+os.Getenv("PATH"),
			"ACCELNET_SERVER="+server, "ACCELNET_TOKEN="+tok.Secret, "ACCELNET_CONFIG="+filepath.Join(dir, "none.yaml"),
			"ACCELNET_HOSTS_FILE="+hostsFile, "SLURM_JOB_ID="+job, "SLURM_JOB_NODELIST="+nodes, "ACCELNET_GBPS_PER_GPU=40")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	intents := func() []models.Intent {
		var page api.IntentList
		if _, err := tenant.Do(t.Context(), "GET", "/api/v1/intents", nil, &page); err != nil {
			t.Fatal(err)
		}
		return page.Items
	}

	for range 2 { // the second run finds the first's intent (its Idempotency-Key)
		if out, err := run("accelnet-prolog.sh", "42", "gpu1,gpu2"); err != nil {
			t.Fatalf("prolog: %v\n%s", err, out)
		}
	}
	got := intents()
	if len(got) != 1 {
		t.Fatalf("%d intents after two prologs of one job, want 1: %+v", len(got), got)
	}
	in := got[0]
	if in.Spec.Name != "slurm-42" || !in.Spec.SampledFlows || in.Spec.Collective == nil ||
		!slices.Equal(in.Spec.Collective.Endpoints, []string{"h1-1", "h2-1", "h1-2", "h2-2"}) || !in.Status.State.Live() {
		t.Errorf("the job's intent: %+v", in)
	}

	if out, err := run("accelnet-prolog.sh", "43", "gpu1,gpu3"); err == nil || !strings.Contains(out, "node gpu3 has no fabric hosts") {
		t.Errorf("a node without fabric hosts: %v\n%s", err, out)
	}
	if out, err := run("accelnet-prolog.sh", "44", "gpu1,gpu2", "ACCELNET_GBPS_PER_GPU=1000"); err == nil {
		t.Errorf("a ring that does not fit started the job:\n%s", out)
	}
	if out, err := run("accelnet-prolog.sh", "45", "gpu1,gpu2", "ACCELNET_GBPS_PER_GPU=1000", "ACCELNET_REQUIRED=0"); err != nil || !strings.Contains(out, "starts without a reservation") {
		t.Errorf("ACCELNET_REQUIRED=0: %v\n%s", err, out)
	}
	if out, err := run("accelnet-prolog.sh", "46", "gpu1"); err != nil {
		t.Errorf("a one-node job: %v\n%s", err, out)
	}
	for _, in := range intents() {
		if in.Spec.Name != "slurm-42" && in.Status.State.Live() {
			t.Errorf("another live intent: %s %s", in.Spec.Name, in.Status.State)
		}
	}

	for range 2 { // the second finds none, and succeeds
		if out, err := run("accelnet-epilog.sh", "42", ""); err != nil {
			t.Fatalf("epilog: %v\n%s", err, out)
		}
	}
	backstop := time.Now().Add(time.Minute)
	for {
		live := 0
		for _, in := range intents() {
			if in.Spec.Name == "slurm-42" && in.Status.State.Live() {
				live++
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(backstop) {
			t.Fatal("the job's intent still live a minute after the epilog")
		}
		<-time.After(100 * time.Millisecond)
	}
}
