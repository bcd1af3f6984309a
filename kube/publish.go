package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Publisher writes the fabric's shape into the Kubernetes API: the
// nodes' labels, annotation, condition (and taint if asked), the
// HyperNodes and the Kueue Topology. Each Publish makes what is there
// what the shape says, touching only what differs, so it can run after
// any change and after a restart of either side.
type Publisher struct {
	Core    corev1client.CoreV1Interface
	Dynamic dynamic.Interface
	// Topology names the Kueue Topology ("" for none).
	Topology string
	// Taint puts a NoSchedule taint on a node whose fabric link is
	// degraded, besides the label and the condition.
	Taint bool
	Log   *slog.Logger
	// Component names the writer in Events.
	Component string

	// missing remembers which custom resources are not served, to say
	// so once.
	missing map[schema.GroupVersionResource]bool
}

// Published is what one Publish did.
type Published struct {
	// Nodes on the fabric, nodes not on it, nodes degraded.
	OnFabric, Off, Degraded int
	// Writes counts the objects written (nodes, HyperNodes, Topology).
	Writes int
	// HyperNodes is how many HyperNodes accelnet kube keeps (-1 if the
	// resource is not served); Topology whether the Kueue Topology is.
	HyperNodes int
	Topology   bool

	// places are the nodes' places the publish wrote.
	places map[string]NodePlace
}

// Publish makes the Kubernetes objects say what shape says of nodes.
// Every write is attempted; the errors are joined.
func (p *Publisher) Publish(ctx context.Context, s Shape, nodes []*corev1.Node) (Published, error) {
	places := Places(s, nodes)
	res := Published{places: places}
	var errs []error
	for _, n := range nodes {
		pl := places[n.Name]
		switch {
		case len(pl.Hosts) == 0:
			res.Off++
		case pl.Degraded != "":
			res.OnFabric++
			res.Degraded++
		default:
			res.OnFabric++
		}
		w, err := p.node(ctx, s, n, pl)
		res.Writes += w
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
		}
	}
	w, n, err := p.hyperNodes(ctx, s, places)
	res.Writes += w
	res.HyperNodes = n
	if err != nil {
		errs = append(errs, err)
	}
	if p.Topology != "" {
		w, ok, err := p.topology(ctx, s)
		res.Writes += w
		res.Topology = ok
		if err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// node brings one node's labels, annotation, condition and taint to what
// pl says, and records an Event when its place or state changes.
func (p *Publisher) node(ctx context.Context, s Shape, n *corev1.Node, pl NodePlace) (int, error) {
	writes := 0
	want := pl.Labels(s.Fabric)
	labels := map[string]any{}
	for _, k := range ownLabels {
		v, has := n.Labels[k]
		w, wanted := want[k]
		switch {
		case wanted && v != w:
			labels[k] = w
		case !wanted && has:
			labels[k] = nil
		}
	}
	found := pl.found()
	before := n.Annotations[AnnotationFound]
	if len(labels) > 0 || before != found {
		patch := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": map[string]any{AnnotationFound: found}}}
		if err := p.patch(ctx, n.Name, types.MergePatchType, patch, ""); err != nil {
			return writes, err
		}
		writes++
		switch {
		case len(pl.Hosts) == 0 && !strings.HasPrefix(before, "none: "+pl.Problem):
			p.event(ctx, n, corev1.EventTypeWarning, "NotOnFabric", pl.Problem)
		case len(pl.Hosts) > 0 && before != found:
			p.event(ctx, n, corev1.EventTypeNormal, "OnFabric", fmt.Sprintf("hosts %s of fabric %s: leaf %s, block %s", found, s.Fabric, pl.Leaf, pl.Block))
		}
	}
	// The condition: on the fabric, True or False; off it, Unknown if it
	// was ever set.
	cond := corev1.NodeCondition{Type: ConditionDegraded, Status: corev1.ConditionFalse, Reason: "FabricLinkHealthy",
		Message: "the node's links to fabric " + s.Fabric + " carry routes"}
	switch {
	case len(pl.Hosts) == 0:
		cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NotOnFabric", pl.Problem
	case pl.Degraded != "":
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, "FabricLinkDegraded", pl.Degraded
	}
	var have *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionDegraded {
			have = &n.Status.Conditions[i]
		}
	}
	if (have != nil || len(pl.Hosts) > 0) && (have == nil || have.Status != cond.Status || have.Reason != cond.Reason || have.Message != cond.Message) {
		now := metav1.Now()
		cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
		if have != nil && have.Status == cond.Status {
			cond.LastTransitionTime = have.LastTransitionTime
		}
		patch := map[string]any{"status": map[string]any{"conditions": []any{cond}}}
		if err := p.patch(ctx, n.Name, types.StrategicMergePatchType, patch, "status"); err != nil {
			return writes, err
		}
		writes++
		if have != nil && have.Status != cond.Status || have == nil && cond.Status == corev1.ConditionTrue {
			switch cond.Status {
			case corev1.ConditionTrue:
				p.event(ctx, n, corev1.EventTypeWarning, "FabricDegraded", pl.Degraded)
			case corev1.ConditionFalse:
				p.event(ctx, n, corev1.EventTypeNormal, "FabricRestored", cond.Message)
			}
		}
	}
	if p.Taint || hasTaint(n) {
		wantTaint := p.Taint && pl.Degraded != ""
		if wantTaint != hasTaint(n) {
			t := map[string]any{"key": TaintDegraded, "effect": string(corev1.TaintEffectNoSchedule)}
			if !wantTaint {
				t = map[string]any{"key": TaintDegraded, "$patch": "delete"}
			} else {
				t["value"] = "true"
			}
			if err := p.patch(ctx, n.Name, types.StrategicMergePatchType, map[string]any{"spec": map[string]any{"taints": []any{t}}}, ""); err != nil {
				return writes, err
			}
			writes++
		}
	}
	return writes, nil
}

func hasTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintDegraded })
}

func (p *Publisher) patch(ctx context.Context, name string, pt types.PatchType, patch any, sub string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err = p.Core.Nodes().Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: managedBy}, subs...)
	return err
}

// event records an Event on a node (in namespace default, where the
// Events of cluster-scoped objects live); a failure is logged, not
// returned (an Event is a courtesy, the labels are the state).
func (p *Publisher) event(ctx context.Context, n *corev1.Node, typ, reason, message string) {
	recordEvent(ctx, p.Core, corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID, APIVersion: "v1"}, typ, reason, message, p.Component, p.log())
}

func (p *Publisher) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// served says whether err means the resource is not served (its CRD is
// not installed), and says so once.
func (p *Publisher) served(gvr schema.GroupVersionResource, err error) bool {
	if err == nil || !apierrors.IsNotFound(err) {
		if p.missing[gvr] {
			p.log().Info("custom resource served now: publishing it", "resource", gvr.String())
			delete(p.missing, gvr)
		}
		return true
	}
	if p.missing == nil {
		p.missing = map[schema.GroupVersionResource]bool{}
	}
	if !p.missing[gvr] {
		p.log().Info("custom resource not served (its CRD is not installed): not publishing it", "resource", gvr.String())
		p.missing[gvr] = true
	}
	return false
}

// hyperNodes makes the HyperNodes accelnet kube keeps the wanted ones:
// created bottom-up, updated, the rest of its own deleted. It returns the
// writes and how many it keeps (-1 if HyperNodes are not served).
func (p *Publisher) hyperNodes(ctx context.Context, s Shape, places map[string]NodePlace) (int, int, error) {
	res := p.Dynamic.Resource(HyperNodes)
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy})
	if !p.served(HyperNodes, err) {
		return 0, -1, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("list hypernodes: %w", err)
	}
	want := wantedHyperNodes(s, places)
	have := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		have[list.Items[i].GetName()] = &list.Items[i]
	}
	writes := 0
	var errs []error
	names := slices.SortedFunc(maps.Keys(want), func(a, b string) int { return want[a].tier - want[b].tier })
	for _, name := range names {
		h := want[name]
		cur, ok := have[name]
		switch {
		case !ok:
			if _, err := res.Create(ctx, h.object(s.Fabric), metav1.CreateOptions{FieldManager: managedBy}); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("create hypernode %s: %w", name, err))
				continue
			}
			writes++
		case !sameHyperNode(cur, h, s.Fabric):
			obj := h.object(s.Fabric)
			obj.SetResourceVersion(cur.GetResourceVersion())
			// Keep annotations others wrote; own the ones accelnet kube writes.
			ann := cur.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			delete(ann, AnnotationUplinks)
			delete(ann, AnnotationDegraded)
			maps.Copy(ann, h.annotations)
			obj.SetAnnotations(ann)
			if _, err := res.Update(ctx, obj, metav1.UpdateOptions{FieldManager: managedBy}); err != nil {
				errs = append(errs, fmt.Errorf("update hypernode %s: %w", name, err))
				continue
			}
			writes++
		}
	}
	// Delete what is no longer wanted, top tier first.
	stale := slices.SortedFunc(maps.Keys(have), func(a, b string) int {
		ta, _, _ := unstructured.NestedInt64(have[a].Object, "spec", "tier")
		tb, _, _ := unstructured.NestedInt64(have[b].Object, "spec", "tier")
		return int(tb - ta)
	})
	for _, name := range stale {
		if _, ok := want[name]; ok {
			continue
		}
		if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete hypernode %s: %w", name, err))
			continue
		}
		writes++
	}
	return writes, len(want), errors.Join(errs...)
}

// topology keeps the Kueue Topology: created if missing, its levels put
// back if changed. An object of the name accelnet kube did not make is
// left alone (and said).
func (p *Publisher) topology(ctx context.Context, s Shape) (int, bool, error) {
	res := p.Dynamic.Resource(Topologies)
	want := topologyObject(p.Topology, s.Fabric)
	cur, err := res.Get(ctx, p.Topology, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := res.Create(ctx, want, metav1.CreateOptions{FieldManager: managedBy})
		if !p.served(Topologies, err) {
			return 0, false, nil
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, false, fmt.Errorf("create topology %s: %w", p.Topology, err)
		}
		return 1, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("get topology %s: %w", p.Topology, err)
	}
	p.served(Topologies, nil)
	if cur.GetLabels()[LabelManagedBy] != managedBy {
		return 0, true, fmt.Errorf("topology %s exists and was not made by %s: left alone", p.Topology, managedBy)
	}
	hs, _, _ := unstructured.NestedFieldNoCopy(cur.Object, "spec")
	ws, _, _ := unstructured.NestedFieldNoCopy(want.Object, "spec")
	if equalJSON(hs, ws) {
		return 0, true, nil
	}
	cur.Object["spec"] = want.Object["spec"]
	if _, err := res.Update(ctx, cur, metav1.UpdateOptions{FieldManager: managedBy}); err != nil {
		return 0, true, fmt.Errorf("update topology %s: %w", p.Topology, err)
	}
	return 1, true, nil
}

// backoff is the wait before retry n (from 0): doubling from 500 ms to 30 s.
func backoff(n int) time.Duration {
	d := 500 * time.Millisecond
	for range min(n, 6) {
		d *= 2
	}
	return min(d, 30*time.Second)
}
