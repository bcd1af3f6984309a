// Command build builds the Kubernetes control plane the tests run against
// (kube-apiserver, kube-scheduler and kube-controller-manager of
// tools/kube's release), if this machine has not built it yet, and prints
// the directory that holds them. .ci/run runs it before the tests, so its
// minutes are not spent inside a test's timeout.
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
