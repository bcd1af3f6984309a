// Package deploy_test checks the deploy files against the code: every
// command and flag in docker-compose.yml and the Kubernetes manifests
// exists in the binaries, the compose file's accelnet, etcd and fabricsim
// services run as plain processes and work together, and the Grafana
// dashboard only asks for metrics accelnet exports.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/internal/proctest"
	"github.com/accelnet/accelnet/topology"
)

func TestMain(m *testing.M) {
	defer proctest.Cleanup()
	fabrictest.Main(m)
}

type composeFile struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image       string    `yaml:"image"`
	Restart     string    `yaml:"restart"`
	Profiles    []string  `yaml:"profiles"`
	Command     []string  `yaml:"command"`
	Volumes     []string  `yaml:"volumes"`
	Ports       []string  `yaml:"ports"`
	RawDepends  yaml.Node `yaml:"depends_on"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// oneShot says whether the service runs to completion (a first-run
// step), not as a server.
func (s service) oneShot() bool { return s.Restart == "no" }

// deps lists what a service depends on (either compose form).
func (s service) deps(t *testing.T) []string {
	switch s.RawDepends.Kind {
	case 0:
		return nil
	case yaml.SequenceNode:
		var out []string
		if err := s.RawDepends.Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	default:
		var m map[string]any
		if err := s.RawDepends.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// binaryOf is the binary a service of ours runs ("" for others' images).
func binaryOf(s service) string {
	switch s.Image {
	case "accelnet:dev":
		return "accelnet"
	case "accelnet-fabricsim:dev":
		return "fabricsim"
	}
	return ""
}

var (
	flagsMu    sync.Mutex
	flagsCache = map[string]map[string]bool{}
	cobraFlag  = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)`)
	goFlag     = regexp.MustCompile(`^\s+-([a-z0-9-]+)`)
)

// flagsOf lists the flags of a binary's subcommand, from its help.
func flagsOf(t *testing.T, bin, sub string) map[string]bool {
	t.Helper()
	flagsMu.Lock()
	defer flagsMu.Unlock()
	key := bin + " " + sub
	if f, ok := flagsCache[key]; ok {
		return f
	}
	args := []string{"-h"}
	re := goFlag
	switch bin {
	case "accelnet", "accelnetctl":
		args, re = []string{sub, "--help"}, cobraFlag
	case "accelnet-kube":
		args, re = []string{"--help"}, cobraFlag
	}
	out, _ := exec.Command(proctest.Bin(t, bin), args...).CombinedOutput() // Go's flag exits 2 on -h
	flags := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = true
		}
	}
	if len(flags) == 0 {
		t.Fatalf("%s %s: no flags in its help:\n%s", bin, sub, out)
	}
	flagsCache[key] = flags
	return flags
}

// checkArgs fails for a subcommand or flag the binary does not have.
func checkArgs(t *testing.T, where, bin string, args []string) {
	t.Helper()
	sub := ""
	if bin == "accelnet" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			t.Errorf("%s: accelnet needs a subcommand, got %q", where, args)
			return
		}
		sub, args = args[0], args[1:]
		if !slices.Contains([]string{"serve", "demo", "etcd", "probe", "eval", "version", "certs", "token"}, sub) {
			t.Errorf("%s: accelnet has no subcommand %q", where, sub)
			return
		}
	}
	flags := flagsOf(t, bin, sub)
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: %s %s has no flag %s", where, bin, sub, a)
		}
	}
}

// TestComposeFile: the services the production layout needs exist, our
// images are built from multi-stage Dockerfiles into static binaries run
// by an unprivileged user, every mounted file exists, and every command,
// flag and health check names something the binaries have.
func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"etcd1", "etcd2", "etcd3", "fabricsim", "accelnet-1", "accelnet-2", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no service %s", name)
		}
	}
	for name, s := range c.Services {
		serves := binaryOf(s) == "accelnet" && len(s.Command) > 0 && s.Command[0] == "serve"
		for _, p := range s.Ports {
			// Only the controller's API is published; anything else only
			// on demand (a profile) and on loopback.
			if !serves && (len(s.Profiles) == 0 || !strings.HasPrefix(p, "127.0.0.1:")) {
				t.Errorf("%s publishes %s: only the controller's API may be published (others on 127.0.0.1, in a profile)", name, p)
			}
		}
		var want []string
		switch {
		case serves:
			want = []string{"--tls-cert", "--etcd-cert", "--etcd-ca", "--southbound-tls-cert", "--southbound-tls-ca", "--tls-ca"}
		case binaryOf(s) == "accelnet" && len(s.Command) > 0 && s.Command[0] == "etcd":
			want = []string{"--tls-cert", "--tls-client-ca", "--peer-tls-cert", "--peer-tls-ca"}
		case binaryOf(s) == "fabricsim":
			want = []string{"-tls-cert", "-tls-client-ca", "-token-file"}
		}
		for _, f := range want {
			if !slices.Contains(s.Command, f) {
				t.Errorf("%s runs without %s: every shipped service speaks TLS", name, f)
			}
		}
		for _, d := range s.deps(t) {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("%s depends on unknown service %s", name, d)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s mounts undeclared volume %s", name, src)
			}
		}
		if s.Build != nil {
			checkDockerfile(t, filepath.Join("..", s.Build.Context, s.Build.Dockerfile))
		}
		bin := binaryOf(s)
		if bin == "" {
			if s.Image == "" {
				t.Errorf("%s: no image", name)
			}
			continue
		}
		checkArgs(t, name+" command", bin, s.Command)
		if s.oneShot() {
			continue // runs to completion: what depends on it waits for that
		}
		if hc := s.Healthcheck.Test; len(hc) > 2 && hc[0] == "CMD" {
			checkArgs(t, name+" healthcheck", filepath.Base(hc[1]), hc[2:])
		} else {
			t.Errorf("%s: no CMD health check", name)
		}
	}
}

func checkDockerfile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("dockerfile: %v", err)
		return
	}
	text := string(data)
	stages := strings.Count(text, "\nFROM ")
	if strings.HasPrefix(text, "FROM ") {
		stages++
	}
	final := text[strings.LastIndex(text, "FROM "):]
	switch {
	case stages < 2:
		t.Errorf("%s: not a multi-stage build", path)
	case !strings.Contains(text, "CGO_ENABLED=0"):
		t.Errorf("%s: binaries not static (CGO_ENABLED=0)", path)
	case !regexp.MustCompile(`(?m)^USER [1-9][0-9]*`).MatchString(final):
		t.Errorf("%s: the final image does not run as a non-root user", path)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY (deploy/\S+)`).FindAllStringSubmatch(text, -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("%s copies %s: %v", path, m[1], err)
		}
	}
}

// translator turns a compose service's command into a local process's:
// every service's ports become free loopback ports, volumes and the
// image's baked-in paths become directories of the test.
type translator struct {
	t     *testing.T
	ports map[string]string // "service:port" → "127.0.0.1:free"
	vols  map[string]string // named volume → directory
	repo  string
	tmp   string
}

var hostPort = regexp.MustCompile(`([A-Za-z0-9.-]+):(\d{2,5})\b`)

func (tr *translator) addr(svc, host, port string) string {
	if host == "0.0.0.0" || host == "localhost" || host == "127.0.0.1" {
		host = svc
	}
	key := host + ":" + port
	if a, ok := tr.ports[key]; ok {
		return a
	}
	a := fabrictest.FreeAddr(tr.t)
	tr.ports[key] = a
	return a
}

func (tr *translator) args(svc string, s service, in []string) []string {
	mounts := map[string]string{
		"/etc/accelnet/topologies": filepath.Join(tr.repo, "deploy", "topologies"), // COPY'd into the images
		"/tmp":                     tr.tmp,
	}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		src, dst := parts[0], parts[1]
		if strings.HasPrefix(src, "./") {
			mounts[dst] = filepath.Join(tr.repo, src)
			continue
		}
		if tr.vols[src] == "" {
			tr.vols[src] = tr.t.TempDir()
		}
		mounts[dst] = tr.vols[src]
	}
	dsts := make([]string, 0, len(mounts))
	for d := range mounts {
		dsts = append(dsts, d)
	}
	sort.Slice(dsts, func(i, j int) bool { return len(dsts[i]) > len(dsts[j]) })
	out := make([]string, len(in))
	for i, a := range in {
		a = hostPort.ReplaceAllStringFunc(a, func(m string) string {
			p := hostPort.FindStringSubmatch(m)
			return tr.addr(svc, p[1], p[2])
		})
		if i > 0 && strings.HasSuffix(in[i-1], "-host") { // a bare host: listen on, or advertise, loopback
			a = "127.0.0.1"
		}
		for _, d := range dsts {
			if a == d || strings.HasPrefix(a, d+"/") {
				a = mounts[d] + strings.TrimPrefix(a, d)
				break
			}
		}
		out[i] = a
	}
	return out
}

// TestComposeServicesRunAsProcesses runs the compose file's etcd members,
// fabricsim and both accelnet replicas as plain processes on loopback,
// with their health checks, in depends_on order; then checks that one
// replica leads, the other forwards a write to it, and the Grafana
// dashboard's metrics are all exported.
func TestComposeServicesRunAsProcesses(t *testing.T) {
	c := loadCompose(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tr := &translator{t: t, ports: map[string]string{}, vols: map[string]string{}, repo: repo, tmp: t.TempDir()}
	started := map[string]bool{}
	var ours []string
	for name, s := range c.Services {
		if binaryOf(s) != "" {
			ours = append(ours, name)
		}
	}
	sort.Strings(ours)
	for len(started) < len(ours) {
		var wave []string
		for _, name := range ours {
			if started[name] {
				continue
			}
			ready := true
			for _, d := range c.Services[name].deps(t) {
				ready = ready && started[d]
			}
			if ready {
				wave = append(wave, name)
			}
		}
		if len(wave) == 0 {
			t.Fatalf("depends_on cycle among %v", ours)
		}
		procs := map[string]*proctest.Proc{}
		for _, name := range wave { // together: etcd members wait for each other
			s := c.Services[name]
			procs[name] = proctest.Start(t, name, proctest.Bin(t, binaryOf(s)), tr.args(name, s, s.Command)...)
		}
		for _, name := range wave {
			s := c.Services[name]
			if s.oneShot() {
				if err := procs[name].ExitErr(60 * time.Second); err != nil {
					t.Fatalf("%s: %v\n%s", name, err, procs[name].Log())
				}
				started[name] = true
				continue
			}
			hc := tr.args(name, s, s.Healthcheck.Test[1:])
			proctest.Wait(t, 60*time.Second, name+"'s health check", func() error {
				out, err := exec.Command(proctest.Bin(t, filepath.Base(hc[0])), hc[1:]...).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
			started[name] = true
		}
	}

	// The API speaks HTTPS with a certificate of the deployment's CA.
	clientTLS, err := pki.Files{CA: filepath.Join(tr.vols["certs"], "ca.crt")}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	if _, err := proctest.Call(context.Background(), nil, "GET", "http://"+tr.ports["accelnet-1:8080"]+"/readyz", "", nil, nil); err == nil {
		if code, _ := proctest.Call(context.Background(), nil, "GET", "http://"+tr.ports["accelnet-1:8080"]+"/readyz", "", nil, nil); code == http.StatusOK {
			t.Error("the API answers plain HTTP")
		}
	}
	// One replica leads; the other follows it.
	roles := map[string]string{}
	for _, name := range []string{"accelnet-1", "accelnet-2"} {
		var v struct{ Role, Leader string }
		if _, err := proctest.Call(context.Background(), client, "GET", "https://"+tr.ports[name+":8080"]+"/readyz", "", nil, &v); err != nil {
			t.Fatal(err)
		}
		roles[v.Role] = name
	}
	leader, follower := roles["leader"], roles["follower"]
	if leader == "" || follower == "" {
		t.Fatalf("roles %v: want a leader and a follower", roles)
	}
	var token []byte
	for _, vol := range []string{"accelnet-1", "accelnet-2"} {
		if data, err := os.ReadFile(filepath.Join(tr.vols[vol], "operator.token")); err == nil {
			token = bytes.TrimSpace(data)
		}
	}
	api := "https://" + tr.ports[follower+":8080"] + "/api/v1"
	code, err := proctest.Call(context.Background(), client, "POST", api+"/tenants", string(token), map[string]any{"name": "compose"}, nil)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("write through the follower: HTTP %d %v", code, err)
	}
	intent := map[string]any{"tenant": "compose", "name": "i1", "src": "h1-1", "dst": "h2-1", "gbps": 10, "src_ports": map[string]int{"first": 49152, "last": 49152}}
	if code, err := proctest.Call(context.Background(), client, "POST", api+"/intents", string(token), intent, nil); err != nil || code != http.StatusCreated {
		t.Fatalf("intent through the follower: HTTP %d %v", code, err)
	}
	// A switch drops its connections: the leader's RPC error counters
	// move. fabricsim's control API takes the token in the shared volume.
	simToken, err := os.ReadFile(filepath.Join(tr.vols["shared"], "fabricsim.token"))
	if err != nil {
		t.Fatal(err)
	}
	fault := map[string]any{"kind": "disconnect", "target": "leaf1"}
	sim := "http://" + tr.ports["fabricsim:8081"] + "/sim/v1/faults"
	if code, err := proctest.Call(context.Background(), nil, "POST", sim, "", fault, nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("fabricsim's control API without its token: HTTP %d %v, want 401", code, err)
	}
	if code, err := proctest.Call(context.Background(), nil, "POST", sim, string(bytes.TrimSpace(simToken)), fault, nil); err != nil || code != http.StatusOK {
		t.Fatalf("disconnect leaf1: HTTP %d %v", code, err)
	}

	// Prometheus scrapes both replicas where compose runs them.
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	data, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	for _, want := range []string{"accelnet-1:8080", "accelnet-2:8080"} {
		if !slices.Contains(targets, want) {
			t.Errorf("prometheus.yml does not scrape %s (targets %v)", want, targets)
		}
	}

	// Every metric the dashboard queries is exported by the leader (a
	// vector shows once it has a sample: wait for them).
	wanted := dashboardMetrics(t)
	var missing []string
	proctest.Wait(t, 20*time.Second, "the dashboard's metrics", func() error {
		exported := metricNames(t, client, "https://"+tr.ports[leader+":8080"]+"/metrics")
		missing = missing[:0]
		for _, m := range wanted {
			if !exported[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %v", missing)
		}
		return nil
	})
}

func metricNames(t *testing.T, client *http.Client, url string) map[string]bool {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[f[2]+s] = true
				}
			}
		}
	}
	return names
}

// dashboardMetrics lists the accelnet_ metrics the dashboard's queries use.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("grafana/dashboards/accelnet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range regexp.MustCompile(`accelnet_[a-z_]+`).FindAllString(q.Expr, -1) {
				seen[m] = true
			}
		}
	}
	if len(seen) < 10 {
		t.Errorf("the dashboard uses only %d accelnet metrics", len(seen))
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// deployment is what the tests read of a Deployment manifest.
type deployment struct {
	Spec struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				ServiceAccountName string `yaml:"serviceAccountName"`
				SecurityContext    struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
				} `yaml:"securityContext"`
				Containers []struct {
					Command []string `yaml:"command"`
					Args    []string `yaml:"args"`
					Env     []struct {
						Name string `yaml:"name"`
					} `yaml:"env"`
					Ports []struct {
						ContainerPort int `yaml:"containerPort"`
					} `yaml:"ports"`
					ReadinessProbe struct {
						HTTPGet struct {
							Path string `yaml:"path"`
						} `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
					LivenessProbe struct {
						HTTPGet struct {
							Path string `yaml:"path"`
						} `yaml:"httpGet"`
					} `yaml:"livenessProbe"`
				} `yaml:"containers"`
				Volumes []struct {
					Secret struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesManifests: the Deployment runs two replicas of `accelnet
// serve` with flags, environment and config keys the binary has, probes
// on the health endpoints, as non-root; the Service selects its pods; the
// ConfigMap's topology loads; kustomization lists files that exist.
func TestKubernetesManifests(t *testing.T) {
	docs := map[string]map[string]any{} // kind/name → object
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			md, _ := obj["metadata"].(map[string]any)
			kind, _ := obj["kind"].(string)
			name, _ := md["name"].(string)
			if kind != "Kustomization" && (kind == "" || name == "") {
				t.Errorf("%s: a document without kind or name", f)
			}
			docs[kind+"/"+name] = obj
		}
	}
	var dep deployment
	convert(t, docs["Deployment/accelnet"], &dep)
	if dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas %d, want 2", dep.Spec.Replicas)
	}
	if !dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Error("pods may run as root")
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(dep.Spec.Template.Spec.Containers))
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	checkArgs(t, "Deployment args", "accelnet", ctr.Args)
	serveFlags := flagsOf(t, "accelnet", "serve")
	for _, e := range ctr.Env {
		if name, ok := strings.CutPrefix(e.Name, "ACCELNET_"); ok && !serveFlags[strings.ToLower(strings.ReplaceAll(name, "_", "-"))] {
			t.Errorf("Deployment sets %s, which matches no flag of accelnet serve", e.Name)
		}
	}
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %q and %q, want /readyz and /healthz", ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path)
	}
	var svc struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
		} `yaml:"spec"`
	}
	convert(t, docs["Service/accelnet"], &svc)
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}

	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	convert(t, docs["ConfigMap/accelnet"], &cm)
	var config map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["accelnet.yaml"]), &config); err != nil || len(config) == 0 {
		t.Fatalf("ConfigMap accelnet.yaml: %v", err)
	}
	for k := range config {
		if !serveFlags[k] {
			t.Errorf("ConfigMap accelnet.yaml sets %q, which is not a flag of accelnet serve", k)
		}
	}
	topo := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(topo, []byte(cm.Data["topology.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.Load(topo); err != nil {
		t.Errorf("ConfigMap topology.yaml: %v", err)
	}
	checkKubeDeployment(t, docs)

	var kust struct {
		Resources []string `yaml:"resources"`
	}
	convert(t, docs["Kustomization/"], &kust)
	for _, r := range kust.Resources {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("kustomization lists %s: %v", r, err)
		}
	}
}

// checkKubeDeployment: accelnet-kube's Deployment runs the binary with
// flags it has, as its service account (bound to its ClusterRole and
// Role), non-root, with probes on its --metrics-addr port, and mounts the
// CA of the Secret the certs Job makes and the token the operator gives
// it.
func checkKubeDeployment(t *testing.T, docs map[string]map[string]any) {
	var dep deployment
	convert(t, docs["Deployment/accelnet-kube"], &dep)
	spec := dep.Spec.Template.Spec
	if dep.Spec.Replicas != 2 || !spec.SecurityContext.RunAsNonRoot || len(spec.Containers) != 1 {
		t.Fatalf("accelnet-kube Deployment: %d replicas, non-root %v, %d containers", dep.Spec.Replicas, spec.SecurityContext.RunAsNonRoot, len(spec.Containers))
	}
	ctr := spec.Containers[0]
	if !slices.Equal(ctr.Command, []string{"accelnet-kube"}) {
		t.Errorf("accelnet-kube Deployment runs %q", ctr.Command)
	}
	checkArgs(t, "accelnet-kube Deployment args", "accelnet-kube", ctr.Args)
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/healthz" || len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != 8090 {
		t.Errorf("accelnet-kube probes %q, %q on ports %v; want /readyz and /healthz on 8090 (--metrics-addr)", ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path, ctr.Ports)
	}
	if _, ok := docs["ServiceAccount/"+spec.ServiceAccountName]; !ok || spec.ServiceAccountName == "" {
		t.Errorf("accelnet-kube runs as service account %q, which deploy/k8s does not make", spec.ServiceAccountName)
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if _, ok := docs[kind+"/accelnet-kube"]; !ok {
			t.Errorf("no %s accelnet-kube", kind)
		}
	}
	if len(spec.Volumes) != 2 || spec.Volumes[0].Secret.SecretName != "accelnet-tls" || spec.Volumes[1].Secret.SecretName != "accelnet-kube-token" {
		t.Errorf("accelnet-kube mounts %+v, want the CA of Secret accelnet-tls and the token of Secret accelnet-kube-token", spec.Volumes)
	}
	if !slices.Contains(ctr.Args, "--token-file=/etc/accelnet/token/token") {
		t.Errorf("accelnet-kube args %q: no --token-file of the mounted token", ctr.Args)
	}
}

// convert re-decodes a parsed YAML object into a typed one.
func convert(t *testing.T, obj map[string]any, into any) {
	t.Helper()
	if obj == nil {
		t.Fatalf("manifest missing for %T", into)
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}
