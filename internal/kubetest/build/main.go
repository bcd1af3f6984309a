// Command build builds the kube-apiserver the Kubernetes tests run
// against (tools/kube's release), if this machine has not built it yet,
// and prints its path. .ci/run runs it before the tests, so its minutes
// are not spent inside a test's timeout.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/accelnet/accelnet/internal/kubetest"
)

func main() {
	bin, err := kubetest.Build(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
