package kube_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/kubetest"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
)

// proxy stands between accelnet kube and accelnet as a Service does: it
// forwards TCP to its target, which can change (a failover), and can be
// cut (accelnet unreachable: connections closed, new ones refused).
type proxy struct {
	URL    string
	lis    net.Listener
	target atomic.Value // host:port
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{URL: "http://" + lis.Addr().String(), lis: lis, conns: map[net.Conn]bool{}}
	p.to(target)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		lis.Close()
		p.Cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if p.cut.Load() {
				c.Close()
				continue
			}
			wg.Go(func() { p.forward(c) })
		}
	})
	return p
}

// to points the proxy at an API's URL.
func (p *proxy) to(apiURL string) {
	u, _ := url.Parse(apiURL)
	p.target.Store(u.Host)
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target.Load().(string))
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones until Mend.
func (p *proxy) Cut() {
	p.cut.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) Mend() { p.cut.Store(false) }

// replica runs accelnet kube reserving for team-a as a Deployment's pod
// would: when Run fails it starts again, until the returned stop.
func (jc *jobsCluster) replica(t testing.TB, identity string, accelnet *apiclient.Client) (stop func()) {
	t.Helper()
	cfg := testConfig(t, jc.cluster, accelnet, kubetest.KubeServiceAccount, identity)
	forTeamA(&cfg)
	return keepRunning(t, cfg, true)
}

// installedAndReady says whether a Job's pods are Ready on its one
// Installed intent, and that intent.
func (jc *jobsCluster) installedAndReady(t testing.TB, job string, pods int) (models.Intent, bool) {
	in, ok := jc.intentOf(t, "team-a", job)
	reasons, ready := jc.fabricReasons(t, "team-a", job)
	return in, ok && in.Status.State == models.StateInstalled && ready == pods && len(reasons) == pods &&
		slices.Equal(slices.Compact(reasons), []string{"Installed"})
}

// TestJobsThroughFailures: two accelnet kube replicas (one acts) reach two
// accelnet replicas through a proxy, as through a Service. Through every
// failure the issue names, each job ends with exactly one intent, Ready
// pods once it is Installed, and nothing is left of a job that is gone:
// a second intent of a job's name is removed; accelnet's leader dies;
// accelnet is unreachable while a job is deleted and another made; both
// accelnet kube replicas are stopped meanwhile; the Kubernetes API is away
// while a job's intent is lost.
func TestJobsThroughFailures(t *testing.T) {
	fabric := fabrictest.StartFabric(t, fabrictest.LeafSpine(2, 2, 2))
	a := fabrictest.NewServe(t, fabric.Topology())
	a.Eventually(t, 30*time.Second, "every switch in sync", func() bool { return a.Converged() == nil })
	b := fabrictest.Join(t, a)
	jc := newJobsCluster(t, a)
	// Two pools of two nodes: two jobs' rings on the same hosts would
	// reserve the same flows, which accelnet refuses.
	for i, host := range []string{"h1-1", "h2-1", "h1-2", "h2-2"} {
		name := "gpu-" + string(rune('a'+i))
		jc.addNode(t, name, map[string]string{kube.AnnotationHosts: host})
		jc.label(t, name, "pool", []string{"x", "y"}[i/2])
	}
	px := newProxy(t, a.API.URL)
	client := &apiclient.Client{Server: px.URL, Token: a.OperatorToken}
	stop1 := jc.replica(t, "kube-1", client)
	stop2 := jc.replica(t, "kube-2", client)

	jc.createJob(t, inPool(ringJob("team-a", "one", 2, "10"), "x"))
	var one models.Intent
	jc.h.Eventually(t, time.Minute, "job one Installed and Ready", func() (ok bool) {
		one, ok = jc.installedAndReady(t, "one", 2)
		return ok
	})

	// The same job seen twice: a second intent of its name (made by hand
	// here) goes; the first stays.
	var dup models.Intent
	if r := a.Do(t, "POST", "/api/v1/intents", a.OperatorToken, map[string]any{"tenant": "team-a", "name": one.Spec.Name,
		"src": "h1-2", "dst": "h2-2", "gbps": 1, "src_ports": map[string]int{"first": 50000, "last": 50000}}, &dup); r.StatusCode != http.StatusCreated {
		t.Fatalf("a second intent of job one's name: HTTP %d", r.StatusCode)
	}
	jc.h.Eventually(t, time.Minute, "the second intent of job one's name removed, the first kept", func() bool {
		in, ok := jc.installedAndReady(t, "one", 2)
		return ok && in.ID == one.ID && len(jc.jobIntents(t)[one.Spec.Name]) == 1
	})

	// accelnet's leader dies; the Service sends to the other replica.
	a.Crash()
	px.to(b.API.URL)
	jc.h = b
	b.Eventually(t, time.Minute, "the second accelnet replica leads", func() bool { return b.Controller.Leading() && b.Converged() == nil })
	jc.createJob(t, inPool(ringJob("team-a", "two", 2, "10"), "y"))
	jc.h.Eventually(t, time.Minute, "job two Installed and Ready after the failover, job one as it was", func() bool {
		in, ok := jc.installedAndReady(t, "one", 2)
		_, ok2 := jc.installedAndReady(t, "two", 2)
		return ok && ok2 && in.ID == one.ID
	})

	// accelnet unreachable while job one is deleted and job three made.
	px.Cut()
	jc.deleteJob(t, "team-a", "one")
	jc.createJob(t, inPool(ringJob("team-a", "three", 2, "10"), "x"))
	jc.h.Eventually(t, time.Minute, "job one's pods gone and job three's bound", func() bool {
		bound := 0
		for _, p := range jc.pods(t, "team-a", "three") {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return len(jc.pods(t, "team-a", "one")) == 0 && bound == 2
	})
	if reasons, ready := jc.fabricReasons(t, "team-a", "three"); ready != 0 || slices.Contains(reasons, "Installed") {
		t.Errorf("job three's pods %v, %d Ready, while accelnet is unreachable", reasons, ready)
	}
	px.Mend()
	jc.h.Eventually(t, time.Minute, "job one released and job three Installed once accelnet is back", func() bool {
		_, has := jc.intentOf(t, "team-a", "one")
		_, ok := jc.installedAndReady(t, "three", 2)
		return !has && ok
	})

	// Both accelnet kube replicas stopped while job two is deleted and
	// job four made; a third one puts it right.
	stop1()
	stop2()
	jc.deleteJob(t, "team-a", "two")
	jc.createJob(t, ringJob("team-a", "four", 1, "10"))
	jc.h.Eventually(t, time.Minute, "job two's pods gone", func() bool { return len(jc.pods(t, "team-a", "two")) == 0 })
	jc.replica(t, "kube-3", client)
	jc.h.Eventually(t, time.Minute, "job two released and job four told it needs no reservation", func() bool {
		_, has := jc.intentOf(t, "team-a", "two")
		reasons, ready := jc.fabricReasons(t, "team-a", "four")
		return !has && slices.Equal(reasons, []string{"OneHost"}) && ready == 1
	})

	// The Kubernetes API away while job three's intent is lost.
	three, _ := jc.intentOf(t, "team-a", "three")
	jc.Down(t, func() {
		jc.h.Do(t, "DELETE", "/api/v1/intents/"+three.ID, jc.h.OperatorToken, nil, nil)
	})
	jc.h.Eventually(t, time.Minute, "job three's intent made again once the Kubernetes API is back", func() bool {
		in, ok := jc.installedAndReady(t, "three", 2)
		return ok && in.ID != three.ID
	})

	// Nothing leaked, nothing twice: job three's intent alone.
	left := jc.jobIntents(t)
	var names []string
	for name, ins := range left {
		names = append(names, name)
		if len(ins) != 1 {
			t.Errorf("%d intents named %s", len(ins), name)
		}
	}
	if len(names) != 1 || !strings.HasPrefix(names[0], "k8s:team-a/three-") {
		t.Errorf("intents left: %v, want job three's alone", names)
	}
}

// label sets a label of a node.
func (jc *jobsCluster) label(t testing.TB, node, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := jc.core.Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels[key] = value
		_, err = jc.core.Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// inPool keeps a job's pods on the nodes labelled pool.
func inPool(j *batchv1.Job, pool string) *batchv1.Job {
	j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": pool}
	return j
}
