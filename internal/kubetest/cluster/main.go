// Command cluster runs a Kubernetes control plane to try accelnet kube
// on, as the README's walkthrough does: kube-apiserver on an embedded
// etcd, kube-scheduler, kube-controller-manager (Jobs and garbage
// collection) and kubetest's stand-in kubelet (no kubelet runs without a
// container runtime: pods bound to a Node run at once, Ready as a
// kubelet computes it), with the Volcano HyperNode and Kueue Topology
// CRDs installed. It writes an administrator's kubeconfig and runs until
// stopped. Not for production: everything lives in a temporary
// directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/accelnet/accelnet/internal/kubetest"
)

// env stands for a test: its clean-ups run when the command stops, a
// fatal error stops it.
type env struct {
	ctx      context.Context
	dir      string
	mu       sync.Mutex
	cleanups []func()
	n        int
}

func (e *env) Helper()                  {}
func (e *env) Context() context.Context { return e.ctx }
func (e *env) Failed() bool             { return false }
func (e *env) Logf(f string, a ...any)  { log.Printf(f, a...) }
func (e *env) Fatal(a ...any)           { e.Fatalf("%s", fmt.Sprint(a...)) }
func (e *env) Fatalf(f string, a ...any) {
	log.Printf(f, a...)
	e.stop()
	os.Exit(1)
}
func (e *env) Cleanup(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, fn)
}
func (e *env) TempDir() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	dir := filepath.Join(e.dir, fmt.Sprint(e.n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	return dir
}

// stop runs the clean-ups, last first.
func (e *env) stop() {
	e.mu.Lock()
	fns := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "/tmp/accelnet-kubeconfig", "where to write the administrator's kubeconfig")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "accelnet-cluster-")
	if err != nil {
		log.Fatal(err)
	}
	e := &env{ctx: ctx, dir: dir}
	e.Cleanup(func() { os.RemoveAll(dir) })
	log.Printf("starting kube-apiserver (the first run builds the control plane: minutes)")
	ks := kubetest.Start(e)
	_, file, _, _ := runtime.Caller(0)
	crds := filepath.Join(filepath.Dir(file), "..", "..", "..", "kube", "testdata", "crds")
	ks.InstallCRDs(e, filepath.Join(crds, "topology.volcano.sh_hypernodes.yaml"), filepath.Join(crds, "kueue.x-k8s.io_topologies.yaml"))
	ks.RunScheduler(e)
	ks.RunControllerManager(e)
	ks.RunKubelet(e)
	data, err := os.ReadFile(ks.Kubeconfig(e, kubetest.Admin))
	if err != nil {
		e.Fatal(err)
	}
	if err := os.WriteFile(*kubeconfig, data, 0o600); err != nil {
		e.Fatal(err)
	}
	log.Printf("ready: %s (kubeconfig %s); runs until stopped", ks.URL, *kubeconfig)
	<-ctx.Done()
	e.stop()
}
