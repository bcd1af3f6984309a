package kube_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/kubetest"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
)

// BenchmarkJobs runs ring jobs (two pods, each pod a node, each job a pair
// of nodes of its own) in waves of 50 on the real control plane, with
// accelnet kube between it and accelnet; each iteration is one job. Per
// job it measures from its last pod bound (when a watch saw it) to its
// intent Installed (accelnet's time of that state change) and to both
// pods Ready (when the watch saw the last). Each wave must hold exactly
// one intent per job; its jobs are then deleted, and every intent must be
// released before the next wave. Nothing may be left at the end.
//
//	go test ./kube -run '^$' -bench Jobs -benchtime 200x     # the latencies
//	go test ./kube -run '^$' -bench Jobs -benchtime 1000x    # 20 waves
func BenchmarkJobs(b *testing.B) {
	const wave = 50
	topo := fabrictest.LeafSpine(4, 8, 16)
	jc := newJobsCluster(b, fabrictest.New(b, topo))
	// Pool p<i> is two nodes on different leaves.
	for i := range wave {
		for k, host := range []string{topo.Hosts[i].Name, topo.Hosts[(i+wave)%len(topo.Hosts)].Name} {
			name := fmt.Sprintf("gpu-%d-%d", i, k)
			jc.addNode(b, name, map[string]string{kube.AnnotationHosts: host})
			jc.label(b, name, "pool", fmt.Sprintf("p%d", i))
		}
	}
	jc.reserving(b, "kube-bench", &apiclient.Client{Server: jc.h.API.URL, Token: jc.h.OperatorToken}, func(c *kube.Config) {
		c.Resync = time.Minute
		c.Reserved = func(r kube.Reserved, err error) {
			if err != nil {
				b.Logf("%s: %v", r.Intent, err)
			}
		}
	})

	// Measured from when accelnet kube has published the fabric (it
	// reserves nothing before it knows where the nodes are).
	fabric := kube.ShapeOf(api.TopologyView{Name: topo.Name}).Fabric
	waitFor(b, "the nodes published", func() bool { return jc.countNodes(b, kube.LabelFabric+"="+fabric) == 2*wave })

	// When the watch saw each pod bound and Ready, by job.
	var mu sync.Mutex
	bound, ready := map[string]map[string]time.Time{}, map[string]map[string]time.Time{}
	see := func(seen map[string]map[string]time.Time, p *corev1.Pod) {
		job := p.Labels[batchv1.JobNameLabel]
		mu.Lock()
		defer mu.Unlock()
		if seen[job] == nil {
			seen[job] = map[string]time.Time{}
		}
		if _, ok := seen[job][p.Name]; !ok {
			seen[job][p.Name] = time.Now()
		}
	}
	client, err := kubernetes.NewForConfig(jc.Config(kubetest.Admin))
	if err != nil {
		b.Fatal(err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace("team-a"))
	record := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		if p.Spec.NodeName != "" {
			see(bound, p)
		}
		if podCondition(*p, corev1.PodReady).Status == corev1.ConditionTrue {
			see(ready, p)
		}
	}
	f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }})
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	last := func(m map[string]time.Time) (t time.Time) {
		for _, v := range m {
			if v.After(t) {
				t = v
			}
		}
		return t
	}

	var toInstalled, toReady []time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(wave, b.N-done)
		var jobs []string
		for i := range n {
			name := fmt.Sprintf("j%d", done+i)
			jobs = append(jobs, name)
			jc.createJob(b, inPool(ringJob("team-a", name, 2, "1"), fmt.Sprintf("p%d", i)))
		}
		waitFor(b, fmt.Sprintf("the %d jobs of a wave Ready", n), func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, j := range jobs {
				if len(ready[j]) < 2 {
					return false
				}
			}
			return true
		})
		held := jc.jobIntents(b)
		if len(held) != n {
			b.Fatalf("%d jobs hold intents of %d names", n, len(held))
		}
		for _, j := range jobs {
			in, ok := jc.intentOf(b, "team-a", j)
			if !ok {
				b.Fatalf("job %s has not exactly one intent: %v", j, held)
			}
			var installed time.Time
			for _, e := range in.Status.Events {
				if e.State == models.StateInstalled {
					installed = e.Time
				}
			}
			mu.Lock()
			lastBound, lastReady := last(bound[j]), last(ready[j])
			mu.Unlock()
			toInstalled = append(toInstalled, installed.Sub(lastBound))
			toReady = append(toReady, lastReady.Sub(lastBound))
		}
		for _, j := range jobs {
			jc.deleteJob(b, "team-a", j)
		}
		waitFor(b, "the wave's intents released", func() bool { return len(jc.jobIntents(b)) == 0 })
		done += n
	}
	b.StopTimer()
	if left := jc.jobIntents(b); len(left) != 0 {
		b.Fatalf("intents left after %d jobs: %v", b.N, left)
	}
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(float64(len(d))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(toInstalled, 0.5), "installed_p50_ms")
	b.ReportMetric(pct(toInstalled, 0.99), "installed_p99_ms")
	b.ReportMetric(pct(toReady, 0.5), "ready_p50_ms")
	b.ReportMetric(pct(toReady, 0.99), "ready_p99_ms")
	b.ReportMetric(float64(b.N), "jobs")
}
