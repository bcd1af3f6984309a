// Package kubetest runs a real Kubernetes control plane for the tests of
// accelnet's Kubernetes side: kube-apiserver, and where a test asks
// kube-scheduler and kube-controller-manager (its Job controller and
// garbage collector), from k8s.io/kubernetes at the release tools/kube
// pins, built once per machine and kept in the user's cache directory, on
// an embedded etcd the test starts, with RBAC on and static tokens for an
// administrator and for accelnet kube's service account. No kubelet can
// run here (it needs a container runtime): RunKubelet stands in for the
// kubelets of the Nodes a test makes.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/store/storetest"
)

// Users with a static token on every Server.
const (
	// Admin is in system:masters: every right.
	Admin = "admin"
	// KubeServiceAccount is accelnet kube's identity in deploy/k8s (the
	// accelnet-kube service account in namespace accelnet): it has only
	// what deploy/k8s's RBAC grants it.
	KubeServiceAccount = "system:serviceaccount:accelnet:accelnet-kube"
	// Nobody is authenticated and granted nothing.
	Nobody = "nobody"
)

// T is what kubetest needs of a test: a testing.TB, or what stands for
// one in a command that runs the control plane (cmd cluster).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Context() context.Context
	Logf(format string, args ...any)
	Failed() bool
}

// toolsDir is tools/kube, from this package's directory.
func toolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kubetest: no source path")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "tools", "kube"), nil
}

// The control plane's commands tools/kube builds.
var commands = []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"}

// Binary is the path of one of the control plane's commands (commands),
// built from tools/kube if this machine has not built that module's
// release yet (several minutes on 2 cores; .ci/run builds them before the
// tests). A lock keeps test binaries running side by side from building
// them twice.
func Binary(t T, command string) string {
	t.Helper()
	dir, err := build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, command)
}

// Build builds the control plane if needed and returns its directory.
func Build(ctx context.Context) (string, error) { return build(ctx) }

func build(ctx context.Context) (string, error) {
	dir, err := toolsDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("kubetest: %w", err)
		}
		h.Write(data)
	}
	h.Write([]byte(runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "accelnet-tools")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "kube-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // built while this waited
	}
	tmp := bin + ".building"
	os.RemoveAll(tmp)
	args := []string{"build", "-o", tmp + "/"}
	for _, c := range commands {
		args = append(args, "k8s.io/kubernetes/cmd/"+c)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubetest: build the control plane in %s: %v\n%s", dir, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// Server is a running kube-apiserver.
type Server struct {
	URL    string
	caFile string
	tokens map[string]string
	log    string
	// args are kube-apiserver's; stop stops the running one (kill: at
	// once, as a crash) and waits.
	args []string
	stop func(kill bool)
}

// Start runs kube-apiserver on an embedded etcd of its own, both
// stopped when the test ends, and returns once it is ready (RBAC's
// bootstrap roles in place).
func Start(t T) *Server {
	t.Helper()
	etcd := storetest.Embedded(t)
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki"), "kubetest")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue("apiserver", []string{"localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := serviceAccountKeys(saKey, saPub); err != nil {
		t.Fatal(err)
	}
	s := &Server{caFile: serving.CA, tokens: map[string]string{}, log: filepath.Join(dir, "kube-apiserver.log")}
	var csv strings.Builder
	for _, u := range []struct{ name, groups string }{
		{Admin, "system:masters"},
		{KubeServiceAccount, "system:serviceaccounts,system:serviceaccounts:accelnet"},
		{Nobody, ""},
	} {
		tok := make([]byte, 16)
		rand.Read(tok)
		s.tokens[u.name] = hex.EncodeToString(tok)
		fmt.Fprintf(&csv, "%s,%s,%s,%q\n", s.tokens[u.name], u.name, u.name, u.groups)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fabrictest.FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	s.URL = "https://127.0.0.1:" + port
	s.args = []string{
		"--etcd-servers=" + strings.Join(etcd.Endpoints, ","),
		"--etcd-cafile=" + etcd.Client.CA, "--etcd-certfile=" + etcd.Client.Cert, "--etcd-keyfile=" + etcd.Client.Key,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + port,
		"--tls-cert-file=" + serving.Cert, "--tls-private-key-file=" + serving.Key, "--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokenFile, "--authorization-mode=RBAC", "--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/24", "--endpoint-reconciler-type=none",
		// No controller-manager makes the default service accounts.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false", "--profiling=false",
	}
	s.serve(t)
	return s
}

// serve runs kube-apiserver and returns once it is ready (RBAC's
// bootstrap roles in place).
func (s *Server) serve(t T) {
	t.Helper()
	var exited <-chan struct{}
	exited, s.stop = s.spawn(t, s.log, Binary(t, "kube-apiserver"), s.args...)
	// Ready: /readyz answers 200, which waits for the bootstrap roles.
	hc, err := rest.HTTPClientFor(s.Config(Admin))
	if err != nil {
		t.Fatal(err)
	}
	backstop := time.After(3 * time.Minute)
	for {
		resp, err := hc.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("kube-apiserver exited:\n%s", tail(s.log))
		case <-backstop:
			t.Fatalf("kube-apiserver not ready after 3 minutes (%v):\n%s", err, tail(s.log))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Down kills kube-apiserver, runs fn while it is away, and starts it again
// on the same address and etcd, returning once it is ready.
func (s *Server) Down(t T, fn func()) {
	t.Helper()
	s.stop(true)
	fn()
	s.log += ".again"
	s.serve(t)
}

// spawn runs a command of the control plane, its output to logFile,
// stopped (SIGTERM, then SIGKILL after 30 s) when the test ends or stop
// is called; the channel closes when it exits.
func (s *Server) spawn(t T, logFile, bin string, args ...string) (exited <-chan struct{}, stop func(kill bool)) {
	t.Helper()
	logf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	proc := exec.Command(bin, args...)
	proc.Stdout, proc.Stderr = logf, logf
	// Gone with the test's process, however it ends.
	proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		proc.Wait()
		logf.Close()
		close(done)
	}()
	var once sync.Once
	stop = func(kill bool) {
		once.Do(func() {
			if kill {
				proc.Process.Kill()
			}
			proc.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				proc.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop(false)
		if t.Failed() {
			t.Logf("--- %s log:\n%s", filepath.Base(bin), tail(logFile))
		}
	})
	return done, stop
}

// RunScheduler runs kube-scheduler on s (as Admin) until the test ends:
// it binds pods to the Nodes RunKubelet keeps ready.
func (s *Server) RunScheduler(t T) {
	t.Helper()
	s.spawn(t, filepath.Join(t.TempDir(), "kube-scheduler.log"), Binary(t, "kube-scheduler"),
		"--kubeconfig="+s.Kubeconfig(t, Admin), "--leader-elect=false", "--secure-port=0")
}

// RunControllerManager runs kube-controller-manager on s (as Admin) until
// the test ends, with the controllers a Job needs: the Job controller
// (it makes the pods) and the garbage collector (it deletes them with
// their Job).
func (s *Server) RunControllerManager(t T) {
	t.Helper()
	s.spawn(t, filepath.Join(t.TempDir(), "kube-controller-manager.log"), Binary(t, "kube-controller-manager"),
		"--kubeconfig="+s.Kubeconfig(t, Admin), "--leader-elect=false", "--secure-port=0",
		"--controllers=job,garbagecollector", "--use-service-account-credentials=false")
}

// Config is a client configuration of user (Admin, KubeServiceAccount
// or Nobody).
func (s *Server) Config(user string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: s.tokens[user], TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile},
		QPS: 500, Burst: 1000}
}

// Token is user's bearer token.
func (s *Server) Token(user string) string { return s.tokens[user] }

// CAFile is the CA that signed the server's certificate.
func (s *Server) CAFile() string { return s.caFile }

// Kubeconfig writes a kubeconfig of user for kubectl and returns its path.
func (s *Server) Kubeconfig(t T, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %q
  user: {token: %q}
contexts:
- name: kubetest
  context: {cluster: kubetest, user: %q}
current-context: kubetest
`, s.URL, s.caFile, user, s.tokens[user], user)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func serviceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// tail is the end of a log file.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 6000 {
		return "…" + string(data[len(data)-6000:])
	}
	return string(data)
}

// crds is the CustomResourceDefinition resource.
var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CustomResourceDefinitions of the YAML files and
// waits until each is established (served).
func (s *Server) InstallCRDs(t T, files ...string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Config(Admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var names []string
	for _, f := range files {
		for _, crd := range s.Apply(t, f, "CustomResourceDefinition") {
			names = append(names, crd.GetName())
		}
	}
	backstop := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			u, err := dyn.Resource(crds).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if established {
				break
			}
			if time.Now().After(backstop) {
				t.Fatalf("CRD %s not established after a minute", name)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// resources maps the kinds Apply knows to their resources.
var resources = map[string]schema.GroupVersionResource{
	"CustomResourceDefinition": crds,
	"Namespace":                {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":           {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":                {Version: "v1", Resource: "configmaps"},
	"Secret":                   {Version: "v1", Resource: "secrets"},
	"Service":                  {Version: "v1", Resource: "services"},
	"Pod":                      {Version: "v1", Resource: "pods"},
	"ClusterRole":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":       {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                     {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"Deployment":               {Group: "apps", Version: "v1", Resource: "deployments"},
	"Job":                      {Group: "batch", Version: "v1", Resource: "jobs"},
}

// Apply creates, as Admin, the objects of a YAML file whose kinds are
// in kinds (every kind Apply knows if none is given), and returns them.
func (s *Server) Apply(t T, file string, kinds ...string) []*unstructured.Unstructured {
	t.Helper()
	dyn, err := dynamic.NewForConfig(s.Config(Admin))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if len(kinds) > 0 && !slices.Contains(kinds, u.GetKind()) {
			continue
		}
		gvr, ok := resources[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kubetest does not know kind %s", file, u.GetKind())
		}
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns := u.GetNamespace(); ns != "" {
			ri = dyn.Resource(gvr).Namespace(ns)
		}
		created, err := ri.Create(t.Context(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: create %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
		out = append(out, created)
	}
	return out
}
