package kubetest

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Kubelet stands in for the kubelets of every Node, which cannot run here
// (a kubelet needs a container runtime). It does what the kubelet does to
// the API objects a test reads, nothing more:
//   - a Node gets its kubernetes.io/hostname label, capacity and a Ready
//     condition, and loses the not-ready taint the API server put on it
//     (the node lifecycle controller's part), so the scheduler binds pods
//     to it;
//   - a pod bound to a Node runs at once: phase Running, its containers
//     ready, and Ready as the kubelet computes it: containers ready and
//     the condition of every readiness gate True;
//   - a pod being deleted is deleted at once (its containers stopped);
//   - Finish ends a pod's containers (phase Succeeded).
type Kubelet struct {
	client kubernetes.Interface
	// wg holds the handlers' work, each in a goroutine of its own (an
	// informer's handlers must not block), waited for when it stops.
	wg sync.WaitGroup
}

// RunKubelet runs the stand-in kubelet of every Node of s until the test
// ends.
func (s *Server) RunKubelet(t T) *Kubelet {
	t.Helper()
	client, err := kubernetes.NewForConfig(s.Config(Admin))
	if err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{client: client}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		k.wg.Wait()
	})
	f := informers.NewSharedInformerFactory(client, 0)
	nodes, pods := f.Core().V1().Nodes().Informer(), f.Core().V1().Pods().Informer()
	nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.wg.Go(func() { k.node(ctx, o.(*corev1.Node)) }) },
		UpdateFunc: func(_, o any) { k.wg.Go(func() { k.node(ctx, o.(*corev1.Node)) }) },
	})
	pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.wg.Go(func() { k.pod(ctx, o.(*corev1.Pod)) }) },
		UpdateFunc: func(_, o any) { k.wg.Go(func() { k.pod(ctx, o.(*corev1.Pod)) }) },
	})
	k.wg.Go(func() { f.Start(ctx.Done()); f.WaitForCacheSync(ctx.Done()); <-ctx.Done(); f.Shutdown() })
	return k
}

// capacity is every stand-in node's.
var capacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("64"),
	corev1.ResourceMemory: resource.MustParse("512Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

func (k *Kubelet) node(ctx context.Context, n *corev1.Node) {
	notReady := func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }
	if slices.ContainsFunc(n.Spec.Taints, notReady) || n.Labels[corev1.LabelHostname] == "" {
		n = n.DeepCopy()
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, notReady)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[corev1.LabelHostname] = n.Name
		k.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}) // a conflict brings the node back
		return
	}
	ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
	if ready && n.Status.Allocatable.Pods().Value() > 0 {
		return
	}
	n = n.DeepCopy()
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	now := metav1.Now()
	n.Status.Conditions = append(slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }),
		corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubetest's stand-in kubelet", LastHeartbeatTime: now, LastTransitionTime: now})
	k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}) // a conflict brings the node back
}

func (k *Kubelet) pod(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	if p.DeletionTimestamp != nil {
		zero := int64(0)
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		_ = err // gone already, or looked at again on its next update
		return
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	// Ready as the kubelet says it: containers ready, and every readiness
	// gate's condition True.
	ready := corev1.ConditionTrue
	for _, g := range p.Spec.ReadinessGates {
		if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == g.ConditionType && c.Status == corev1.ConditionTrue
		}) {
			ready = corev1.ConditionFalse
		}
	}
	if p.Status.Phase == corev1.PodRunning && conditionIs(p, corev1.PodReady, ready) {
		return
	}
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	set := func(typ corev1.PodConditionType, st corev1.ConditionStatus, reason string) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == typ {
				if p.Status.Conditions[i].Status != st {
					p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason, p.Status.Conditions[i].LastTransitionTime = st, reason, now
				}
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: st, Reason: reason, LastTransitionTime: now})
	}
	set(corev1.PodInitialized, corev1.ConditionTrue, "")
	set(corev1.ContainersReady, corev1.ConditionTrue, "")
	reason := ""
	if ready == corev1.ConditionFalse {
		reason = "ReadinessGatesNotReady"
	}
	set(corev1.PodReady, ready, reason)
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	_, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	_ = err // a conflict: the newer pod's update comes here again
}

// Finish ends a pod's containers with exit code 0, as its kubelet would
// report a job's worker that completed.
func (k *Kubelet) Finish(ctx context.Context, namespace, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := k.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
			}
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready = false
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
		}
		_, err = k.client.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func conditionIs(p *corev1.Pod, typ corev1.PodConditionType, st corev1.ConditionStatus) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == typ && c.Status == st })
}
