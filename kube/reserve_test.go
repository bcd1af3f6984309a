package kube_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/kubetest"
	"github.com/accelnet/accelnet/kube"
	"github.com/accelnet/accelnet/models"
)

// jobsCluster is a cluster that runs Jobs: kube-scheduler binds their
// pods, kube-controller-manager makes and collects them, the stand-in
// kubelet runs them; and an accelnet with tenant team-a.
type jobsCluster struct {
	*cluster
	batch   batchv1client.BatchV1Interface
	kubelet *kubetest.Kubelet
	h       *fabrictest.Harness
}

func newJobsCluster(t testing.TB, h *fabrictest.Harness) *jobsCluster {
	t.Helper()
	c := newCluster(t)
	c.RunScheduler(t)
	c.RunControllerManager(t)
	batch, err := batchv1client.NewForConfig(c.Config(kubetest.Admin))
	if err != nil {
		t.Fatal(err)
	}
	jc := &jobsCluster{cluster: c, batch: batch, kubelet: c.RunKubelet(t), h: h}
	jc.h.Eventually(t, 30*time.Second, "every switch in sync", func() bool { return jc.h.Converged() == nil })
	if r := jc.h.Do(t, "POST", "/api/v1/tenants", jc.h.OperatorToken, models.Tenant{Name: "team-a", MaxGbps: 100000, MaxIntents: 2000}, nil); r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusOK {
		t.Fatalf("tenant team-a: HTTP %d", r.StatusCode)
	}
	for _, ns := range []string{"team-a", "other"} {
		if _, err := c.core.Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return jc
}

// reserving runs accelnet kube as its service account, reserving for
// namespace team-a, until the returned stop.
func (jc *jobsCluster) reserving(t testing.TB, identity string, accelnet *apiclient.Client, tune ...func(*kube.Config)) (stop func()) {
	return runKube(t, jc.cluster, jc.h, kubetest.KubeServiceAccount, identity, nil, nil, append([]func(*kube.Config){func(c *kube.Config) {
		c.Accelnet = accelnet
		forTeamA(c)
	}}, tune...)...)
}

// forTeamA has accelnet kube reserve for namespace team-a's jobs, as
// tenant team-a, asking again 2 s after a refusal.
func forTeamA(c *kube.Config) {
	c.Tenants = map[string]models.TenantName{"team-a": "team-a"}
	c.RetryRefused = 2 * time.Second
}

// ringJob is a Job of n pods, one a node, that asks for a ring all-reduce
// of gbps per GPU, its pods gated on the fabric.
func ringJob(ns, name string, n int32, gbps string) *batchv1.Job {
	mode := batchv1.IndexedCompletion
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: batchv1.JobSpec{
		Parallelism: &n, Completions: &n, CompletionMode: &mode,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kube.AnnotationCollective: "ring-allreduce", kube.AnnotationGbpsPerGPU: gbps}},
			Spec: corev1.PodSpec{
				RestartPolicy:  corev1.RestartPolicyNever,
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: kube.ConditionFabric}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: kube.LabelHostname,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.JobNameLabel: name}}}},
				Containers: []corev1.Container{{Name: "train", Image: "trainer"}},
			},
		},
	}}
}

func (jc *jobsCluster) createJob(t testing.TB, j *batchv1.Job) {
	t.Helper()
	if _, err := jc.batch.Jobs(j.Namespace).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (jc *jobsCluster) deleteJob(t testing.TB, ns, name string) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := jc.batch.Jobs(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
}

// pods are a Job's pods.
func (jc *jobsCluster) pods(t testing.TB, ns, job string) []corev1.Pod {
	t.Helper()
	list, err := jc.core.Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func podCondition(p corev1.Pod, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

// fabricReasons are the reasons of the accelnet.io/fabric condition of a
// Job's pods ("" for a pod without it); ready counts its Ready pods.
func (jc *jobsCluster) fabricReasons(t testing.TB, ns, job string) (reasons []string, ready int) {
	t.Helper()
	for _, p := range jc.pods(t, ns, job) {
		reasons = append(reasons, podCondition(p, kube.ConditionFabric).Reason)
		if podCondition(p, corev1.PodReady).Status == corev1.ConditionTrue {
			ready++
		}
	}
	slices.Sort(reasons)
	return reasons, ready
}

// jobIntents are accelnet's intents of accelnet kube, by name: the live
// and the refused ones (a Deleted one is on its way out).
func (jc *jobsCluster) jobIntents(t testing.TB) map[string][]models.Intent {
	t.Helper()
	var list api.IntentList
	jc.h.Do(t, "GET", "/api/v1/intents?limit=1000", jc.h.OperatorToken, nil, &list)
	out := map[string][]models.Intent{}
	for _, in := range list.Items {
		if strings.HasPrefix(in.Spec.Name, kube.IntentPrefix) && in.Status.State != models.StateDeleted {
			out[in.Spec.Name] = append(out[in.Spec.Name], in)
		}
	}
	return out
}

// intentOf is the one intent of a Job's group ("" if there is none or
// more than one), by the group's name prefix.
func (jc *jobsCluster) intentOf(t testing.TB, ns, job string) (models.Intent, bool) {
	t.Helper()
	var found []models.Intent
	for name, ins := range jc.jobIntents(t) {
		if strings.HasPrefix(name, kube.IntentPrefix+ns+"/"+job+"-") {
			found = append(found, ins...)
		}
	}
	if len(found) != 1 {
		return models.Intent{}, false
	}
	return found[0], true
}

// TestJobsReserveTheirFabric runs Jobs on a real control plane (the
// scheduler binds their pods, the Job controller makes and collects them)
// with accelnet kube, under deploy/k8s's RBAC, between it and a real
// accelnet: a ring job's pods get one intent over their nodes' hosts and
// are Ready once it is Installed; a job that does not fit is refused with
// where and how much is left, its pods not Ready, and is asked for again
// until it fits; a namespace mapped to no tenant is told so; an intent
// deleted behind accelnet kube's back is made again; a job's intent stays
// while its workers finish one by one and goes with the last, and a
// deleted job's goes at once.
func TestJobsReserveTheirFabric(t *testing.T) {
	jc := newJobsCluster(t, fabrictest.New(t, fabrictest.LeafSpine(2, 2, 2)))
	// Two pools of two nodes, one per leaf.
	for i, host := range []string{"h1-1", "h2-1", "h1-2", "h2-2"} {
		name := "gpu-" + string(rune('a'+i))
		jc.addNode(t, name, map[string]string{kube.AnnotationHosts: host})
		jc.label(t, name, "pool", []string{"x", "y"}[i/2])
	}
	jc.reserving(t, "kube-1", &apiclient.Client{Server: jc.h.API.URL, Token: jc.h.OperatorToken})

	jc.createJob(t, inPool(ringJob("team-a", "ring", 2, "40"), "x"))
	jc.h.Eventually(t, time.Minute, "the ring's pods Ready on its Installed intent", func() bool {
		reasons, ready := jc.fabricReasons(t, "team-a", "ring")
		return ready == 2 && slices.Equal(reasons, []string{"Installed", "Installed"})
	})
	in, ok := jc.intentOf(t, "team-a", "ring")
	if !ok {
		t.Fatalf("the ring's intents: %v", jc.jobIntents(t))
	}
	c := in.Spec.Collective
	if in.Tenant != "team-a" || !in.Spec.SampledFlows || c == nil || c.Pattern != "ring-allreduce" || c.GbpsPerGPU != 40 || in.Status.State != models.StateInstalled {
		t.Fatalf("the ring's intent: %+v", in)
	}
	if hosts := slices.Sorted(slices.Values(c.Endpoints)); !slices.Equal(hosts, []string{"h1-1", "h2-1"}) {
		t.Errorf("the ring's intent is over %v, its nodes' hosts are h1-1 and h2-1", c.Endpoints)
	}
	if msg := podCondition(jc.pods(t, "team-a", "ring")[0], kube.ConditionFabric).Message; !strings.Contains(msg, in.ID) {
		t.Errorf("the pods' condition %q does not name intent %s", msg, in.ID)
	}
	if ev := jc.eventsOf(t, "team-a", "ring"); !slices.Contains(ev, "FabricInstalled") {
		t.Errorf("the ring Job's events %v: no FabricInstalled", ev)
	}

	// What does not fit (another intent holds most of h1-2's NIC):
	// refused, where and how much is left said, not Ready.
	var hog models.Intent
	if r := jc.h.Do(t, "POST", "/api/v1/intents", jc.h.OperatorToken, map[string]any{"tenant": "team-a", "name": "hog",
		"src": "h1-2", "dst": "h2-2", "gbps": 70, "src_ports": map[string]int{"first": 50000, "last": 50000}}, &hog); r.StatusCode != http.StatusCreated {
		t.Fatalf("intent hog: HTTP %d", r.StatusCode)
	}
	jc.createJob(t, inPool(ringJob("team-a", "wide", 2, "60"), "y"))
	jc.h.Eventually(t, time.Minute, "the wide job refused", func() bool {
		reasons, _ := jc.fabricReasons(t, "team-a", "wide")
		return slices.Equal(reasons, []string{"Refused", "Refused"})
	})
	if msg := podCondition(jc.pods(t, "team-a", "wide")[0], kube.ConditionFabric).Message; !regexp.MustCompile(`at most [0-9.]+ Gb/s reservable on nic h1-2`).MatchString(msg) {
		t.Errorf("the refusal says %q: not where or what fits", msg)
	}
	if _, ready := jc.fabricReasons(t, "team-a", "wide"); ready != 0 {
		t.Errorf("%d pods of a refused job Ready", ready)
	}
	if ev := jc.eventsOf(t, "team-a", "wide"); !slices.Contains(ev, "FabricRefused") {
		t.Errorf("the wide Job's events %v: no FabricRefused", ev)
	}
	// Room made: the refused job is asked for again, and fits.
	jc.h.Do(t, "DELETE", "/api/v1/intents/"+hog.ID, jc.h.OperatorToken, nil, nil)
	jc.h.Eventually(t, time.Minute, "the wide job Installed once hog is gone", func() bool {
		reasons, ready := jc.fabricReasons(t, "team-a", "wide")
		return ready == 2 && slices.Equal(reasons, []string{"Installed", "Installed"})
	})

	// Deleted: the ring's job releases its intent.
	jc.deleteJob(t, "team-a", "ring")
	jc.h.Eventually(t, time.Minute, "the ring's intent released", func() bool {
		_, has := jc.intentOf(t, "team-a", "ring")
		return !has
	})

	// A namespace that maps to no tenant is told so.
	jc.createJob(t, ringJob("other", "stray", 1, "10"))
	jc.h.Eventually(t, time.Minute, "the stray job told it has no tenant", func() bool {
		reasons, _ := jc.fabricReasons(t, "other", "stray")
		return slices.Equal(reasons, []string{"NoTenant"})
	})

	// Lost by accelnet (deleted behind accelnet kube's back): made again.
	lost, _ := jc.intentOf(t, "team-a", "wide")
	jc.h.Do(t, "DELETE", "/api/v1/intents/"+lost.ID, jc.h.OperatorToken, nil, nil)
	jc.h.Eventually(t, time.Minute, "the wide job's intent made again", func() bool {
		in, ok := jc.intentOf(t, "team-a", "wide")
		return ok && in.ID != lost.ID && in.Status.State == models.StateInstalled
	})

	// Finished: the intent stands while workers finish one by one, and
	// goes with the last.
	wide, _ := jc.intentOf(t, "team-a", "wide")
	pods := jc.pods(t, "team-a", "wide")
	if err := jc.kubelet.Finish(t.Context(), pods[0].Namespace, pods[0].Name); err != nil {
		t.Fatal(err)
	}
	jc.h.Eventually(t, time.Minute, "the first finished pod seen", func() bool {
		return slices.ContainsFunc(jc.pods(t, "team-a", "wide"), func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	})
	if in, ok := jc.intentOf(t, "team-a", "wide"); !ok || in.ID != wide.ID || in.Revision != wide.Revision {
		t.Errorf("a worker finished and the intent changed: %+v, was %+v", in, wide)
	}
	for _, p := range pods[1:] {
		if err := jc.kubelet.Finish(t.Context(), p.Namespace, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	jc.h.Eventually(t, time.Minute, "the finished job's intent released", func() bool {
		_, has := jc.intentOf(t, "team-a", "wide")
		return !has
	})
	// (The Event is recorded once the intent is deleted.)
	jc.h.Eventually(t, time.Minute, "a FabricReleased Event on the wide Job", func() bool {
		return slices.Contains(jc.eventsOf(t, "team-a", "wide"), "FabricReleased")
	})
	if left := jc.jobIntents(t); len(left) != 0 {
		t.Errorf("intents left: %v", fmt.Sprint(left))
	}
}
