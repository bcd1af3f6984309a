package kube

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/accelnet/accelnet/models"
)

// jobPod is a pod of a Job (its controller) with the annotations given
// as key, value pairs, bound to node ("" for none).
func jobPod(name, job, node string, kv ...string) *corev1.Pod {
	yes := true
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{}, Annotations: map[string]string{},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: types.UID("0123456789abcdef-" + job), Controller: &yes}}}}
	p.Spec.NodeName = node
	for i := 0; i+1 < len(kv); i += 2 {
		p.Annotations[kv[i]] = kv[i+1]
	}
	return p
}

func TestGroupOf(t *testing.T) {
	p := jobPod("train-0-x", "train", "")
	g, ok := groupOf(p, DefaultGroupBy)
	if !ok || g.Intent != "k8s:ml/train-01234567" || g.ID != "0123456789abcdef-train" || g.Owner == nil || g.Owner.Kind != "Job" {
		t.Errorf("a Job's pod: %+v, %v", g, ok)
	}
	// A JobSet's pods belong to several Jobs: its UID label groups them,
	// its name label names the group.
	p.Labels["jobset.sigs.k8s.io/jobset-uid"] = "fedcba98-7654"
	p.Labels["jobset.sigs.k8s.io/jobset-name"] = "llama"
	if g, _ := groupOf(p, DefaultGroupBy); g.Intent != "k8s:ml/llama-fedcba98" || g.ID != "fedcba98-7654" {
		t.Errorf("a JobSet's pod: %+v", g)
	}
	// The explicit label comes first.
	p.Labels[LabelGroup] = "sweep-7"
	if g, _ := groupOf(p, DefaultGroupBy); g.Intent != "k8s:ml/sweep-7" || g.ID != "sweep-7" {
		t.Errorf("a labelled pod: %+v", g)
	}
	// A bare pod with no rule that applies is in no group.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ml"}}
	if g, ok := groupOf(bare, DefaultGroupBy); ok {
		t.Errorf("a bare pod grouped: %+v", g)
	}
	// Names are cut to what an intent's name may hold, distinctly.
	long := strings.Repeat("n", 63)
	a, b := intentName(long, long+"a"), intentName(long, long+"b")
	if len(a) > 128 || a == b || models.IntentSpec.Validate(models.IntentSpec{Name: a, Src: "x", Dst: "y", Gbps: 1, SampledFlows: true}) != nil {
		t.Errorf("long names %q, %q", a, b)
	}
}

func TestPodOrder(t *testing.T) {
	names := []string{"w-10", "w-2", "w-1", "master-0", "w-02x"}
	var pods []*corev1.Pod
	for _, n := range names {
		pods = append(pods, jobPod(n, "j", ""))
	}
	slices.SortFunc(pods, podOrder)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	if want := []string{"master-0", "w-1", "w-2", "w-02x", "w-10"}; !slices.Equal(got, want) {
		t.Errorf("pods in order %v, want %v", got, want)
	}
	// An indexed Job's completion index wins over the name.
	a, b := jobPod("z", "j", ""), jobPod("a", "j", "")
	a.Annotations["batch.kubernetes.io/job-completion-index"] = "1"
	b.Annotations["batch.kubernetes.io/job-completion-index"] = "2"
	if podOrder(a, b) >= 0 {
		t.Error("completion index 1 not before 2")
	}
}

func TestWant(t *testing.T) {
	places := map[string]NodePlace{
		"n1": {Hosts: []string{"h1-1", "h1-2"}}, // two NICs (rails)
		"n2": {Hosts: []string{"h2-1", "h2-2"}},
		"n3": {Problem: "no address of the node is a host of fabric f"},
	}
	ring := []string{AnnotationCollective, "ring-allreduce", AnnotationGbpsPerGPU, "100"}
	g := Group{Intent: "k8s:ml/j-01234567", Namespace: "ml", ID: "uid"}
	for _, tc := range []struct {
		name   string
		pods   []*corev1.Pod
		tenant models.TenantName
		want   string // the endpoints, or the condition's reason
	}{
		{"bound on two nodes: rail by rail", []*corev1.Pod{jobPod("j-1", "j", "n2", ring...), jobPod("j-0", "j", "n1", ring...)}, "t", "h1-1,h2-1,h1-2,h2-2"},
		{"two pods on one node count it once", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "n1", ring...), jobPod("j-2", "j", "n2", ring...)}, "t", "h1-1,h2-1,h1-2,h2-2"},
		{"no tenant", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...)}, "", "NoTenant"},
		{"one unbound", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "", ring...)}, "t", "WaitingForPods"},
		{"fewer than the group size", []*corev1.Pod{jobPod("j-0", "j", "n1", append(ring, AnnotationGroupSize, "3")...), jobPod("j-1", "j", "n2", append(ring, AnnotationGroupSize, "3")...)}, "t", "WaitingForPods"},
		{"a node off the fabric", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "n3", ring...)}, "t", "NotOnFabric"},
		{"a node unknown", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "n9", ring...)}, "t", "NotOnFabric"},
		{"none asked for", []*corev1.Pod{jobPod("j-0", "j", "n1", AnnotationCollective, "none")}, "t", "NoReservation"},
		{"a bad rate", []*corev1.Pod{jobPod("j-0", "j", "n1", AnnotationCollective, "ring-allreduce", AnnotationGbpsPerGPU, "fast")}, "t", "InvalidAnnotation"},
		{"a bad pattern", []*corev1.Pod{jobPod("j-0", "j", "n1", AnnotationCollective, "tree", AnnotationGbpsPerGPU, "1")}, "t", "InvalidAnnotation"},
		{"pods that disagree", []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "n2", AnnotationCollective, "all-to-all", AnnotationGbpsPerGPU, "100")}, "t", "InvalidAnnotation"},
		{"one pod, one NIC", []*corev1.Pod{jobPod("j-0", "j", "n4", ring...)}, "t", "OneHost"},
	} {
		pl := places
		if tc.name == "one pod, one NIC" {
			pl = map[string]NodePlace{"n4": {Hosts: []string{"h4-1"}}}
		}
		w := want(g, tc.pods, tc.tenant, pl)
		got := w.Reason
		if w.Spec != nil {
			got = strings.Join(w.Spec.Collective.Endpoints, ",")
			if !w.Spec.SampledFlows || w.Spec.Name != g.Intent || w.Tenant != "t" || w.Spec.Collective.GbpsPerGPU != 100 || w.Spec.Validate() != nil {
				t.Errorf("%s: spec %+v for %s", tc.name, w.Spec, w.Tenant)
			}
		} else if w.Message == "" {
			t.Errorf("%s: %s without a message", tc.name, w.Reason)
		}
		if got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, w.Message, tc.want)
		}
	}
	// The same request whatever the defaults said.
	a := want(g, []*corev1.Pod{jobPod("j-0", "j", "n1", ring...), jobPod("j-1", "j", "n2", ring...)}, "t", places)
	b := *a.Spec
	b.Class = models.ClassLosslessRDMA
	if !sameRequest(*a.Spec, b) || idempotencyKey(g, "t", *a.Spec) != idempotencyKey(g, "t", b) {
		t.Error("a default said is another request")
	}
	b.Collective = &models.Collective{Pattern: "ring-allreduce", Endpoints: []string{"h1-1", "h2-1"}, GbpsPerGPU: 100}
	if sameRequest(*a.Spec, b) || idempotencyKey(g, "t", *a.Spec) == idempotencyKey(g, "t", b) {
		t.Error("other endpoints are the same request")
	}
}
