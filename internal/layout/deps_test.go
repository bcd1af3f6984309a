package layout

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/accelnet/accelnet/"

// io are the libraries that talk to the outside: the pure core and the
// wire types never pull them in.
var io = []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gin-gonic/", "google.golang.org/protobuf", "github.com/p4lang/", "github.com/openconfig/", "net/http", "k8s.io/"}

// deps lists pkg's dependencies, direct and indirect (test files excluded).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// forbidden says whether dep is what f forbids: a package of this module
// exactly (its subpackages are other packages), anything else by prefix.
func forbidden(dep, f string) bool {
	if strings.HasPrefix(f, module) {
		return dep == f
	}
	return strings.HasPrefix(dep, f)
}

// TestLayout: every arrow between packages points the way
// docs/architecture.md draws it. only, when set, is every package of this
// module pkg may reach; forbid are prefixes it must not reach.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pkg    string
		only   []string
		forbid []string
	}{
		{name: "models is pure", pkg: "models", only: []string{}, forbid: io},
		{name: "topology is pure", pkg: "topology", only: []string{"models"}, forbid: io},
		{name: "pathcalc is pure", pkg: "pathcalc", only: []string{"models", "topology"}, forbid: io},
		{name: "api is wire types over models", pkg: "api", only: []string{"models"}, forbid: io},
		{name: "the CLI links no server, raft, gin or gRPC", pkg: "cmd/accelnetctl", only: []string{"api", "apiclient", "models"},
			forbid: []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gin-gonic/", "k8s.io/"}},
		{name: "the API's client is wire types over HTTP", pkg: "apiclient", only: []string{"api", "models"}, forbid: []string{"go.etcd.io/", "github.com/gin-gonic/", "k8s.io/"}},
		{name: "the Kubernetes side reaches accelnet only through its API", pkg: "kube", only: []string{"api", "apiclient", "models"},
			forbid: []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gin-gonic/"}},
		{name: "accelnet-kube links no etcd, controller or driver", pkg: "cmd/accelnet-kube", only: []string{"api", "apiclient", "internal/httpserve", "internal/pki", "kube", "models"},
			forbid: []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gin-gonic/", "github.com/p4lang/", "github.com/openconfig/"}},
		{name: "the controller's binary links no Kubernetes client", pkg: "cmd/accelnet", forbid: []string{"k8s.io/client-go", "k8s.io/api/", "k8s.io/apimachinery"}},
		{name: "the emulator's binary links no etcd, gin, controller, intents or driver", pkg: "cmd/fabricsim",
			forbid: []string{"go.etcd.io/", "github.com/gin-gonic/", module + "controller", module + "intents", module + "southbound", module + "internal/stack", "k8s.io/"}},
		{name: "store knows only the domain types", pkg: "store", only: []string{"models"}, forbid: []string{"k8s.io/"}},
		{name: "election sits on store", pkg: "election", only: []string{"models", "store"}},
		{name: "tenancy sits on store", pkg: "tenancy", only: []string{"models", "store"}},
		{name: "telemetry declares its sources", pkg: "telemetry", only: []string{"models"}},
		{name: "intents never reach a driver or the reconciler", pkg: "intents",
			only: []string{"api", "election", "models", "pathcalc", "store", "telemetry", "topology"}, forbid: []string{"k8s.io/"}},
		{name: "the reconciler never reaches intents or a driver", pkg: "controller",
			only: []string{"api", "election", "models", "pathcalc", "store", "telemetry", "topology"}, forbid: []string{"k8s.io/"}},
		{name: "fabricsim shares contracts, never the driver", pkg: "fabricsim",
			forbid: []string{module + "southbound", module + "controller", module + "intents", "go.etcd.io/"}},
		{name: "the driver knows nothing of the controller", pkg: "southbound",
			only: []string{"models", "southbound/ocpath", "southbound/p4"}},
		{name: "the REST edge talks to the parts, not to switches", pkg: "northbound",
			forbid: []string{module + "southbound", "github.com/p4lang/", "github.com/openconfig/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, dep := range deps(t, tc.pkg) {
				if inner, ok := strings.CutPrefix(dep, module); ok && tc.only != nil && inner != tc.pkg &&
					!slices.Contains(tc.only, inner) && !slices.ContainsFunc(tc.only, func(o string) bool { return strings.HasPrefix(inner, o+"/") }) {
					t.Errorf("%s depends on %s", tc.pkg, inner)
				}
				for _, f := range tc.forbid {
					if forbidden(dep, f) {
						t.Errorf("%s depends on %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}
