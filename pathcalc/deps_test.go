package pathcalc

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPurePackagesStayPure: models, topology and pathcalc compute; they must
// not pull in etcd, gRPC, gin or protobuf (tailscale's depaware idea).
func TestPurePackagesStayPure(t *testing.T) {
	forbidden := []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gin-gonic/", "google.golang.org/protobuf", "github.com/p4lang/", "github.com/openconfig/", "net/http"}
	for _, pkg := range []string{"../models", "../topology", "."} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
