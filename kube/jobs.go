package kube

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accelnet/accelnet/models"
)

// What a job's pods say, and what accelnet kube answers on them.
const (
	// AnnotationCollective opts a pod's group in: ring-allreduce,
	// all-to-all, or none (the group asks for no reservation).
	AnnotationCollective = "accelnet.io/collective"
	// AnnotationGbpsPerGPU is each fabric host's (RDMA NIC's) share, Gb/s.
	AnnotationGbpsPerGPU = "accelnet.io/gbps-per-gpu"
	// AnnotationClass and AnnotationPriority are optional: the traffic
	// class (lossless-rdma, best-effort) and priority 0-7, within what
	// the tenant is granted.
	AnnotationClass    = "accelnet.io/class"
	AnnotationPriority = "accelnet.io/priority"
	// AnnotationGroupSize, if set, is how many pods the group has: the
	// intent waits until that many are bound. Else Kueue's pod-group
	// total count, else every pod of the group seen.
	AnnotationGroupSize = "accelnet.io/group-size"
	annotationKueueSize = "kueue.x-k8s.io/pod-group-total-count"
	// LabelGroup names a group of pods explicitly (within a namespace).
	LabelGroup = "accelnet.io/group"
	// GroupByOwner groups pods by their controller (a Job, a Volcano Job,
	// a PyTorchJob…): its UID.
	GroupByOwner = "owner"

	// ConditionFabric is the pods' readiness gate: True once the group's
	// intent is Installed.
	ConditionFabric corev1.PodConditionType = "accelnet.io/fabric"

	// IntentPrefix starts the name of every intent accelnet kube makes:
	// "k8s:NAMESPACE/GROUP". accelnet kube deletes such intents whose
	// group is gone, so nothing else should use the prefix.
	IntentPrefix = "k8s:"
)

// DefaultGroupBy is how pods are grouped unless the operator says
// otherwise: an explicit accelnet.io/group label, else a JobSet (its pods
// belong to several Jobs), else the pod's controller.
var DefaultGroupBy = []string{LabelGroup, "jobset.sigs.k8s.io/jobset-uid", GroupByOwner}

// Group is a job's pods that share one intent.
type Group struct {
	// Intent is the intent's name, which is also the group's key:
	// "k8s:NAMESPACE/NAME", NAME the group label's value or the owner's
	// name with a prefix of its UID.
	Intent    string
	Namespace string
	// ID is what identifies the group for good (an owner's UID, a
	// label's value): with the spec, the intent's Idempotency-Key.
	ID string
	// Owner is the object Events go to (the pods' controller), if any.
	Owner *metav1.OwnerReference
}

// groupOf is pod's group by the first rule of groupBy that applies; ok is
// false if none does.
func groupOf(pod *corev1.Pod, groupBy []string) (Group, bool) {
	owner := metav1.GetControllerOfNoCopy(pod)
	for _, rule := range groupBy {
		var id, name string
		if rule == GroupByOwner {
			if owner == nil {
				continue
			}
			id, name = string(owner.UID), owner.Name+"-"+prefix(string(owner.UID), 8)
		} else {
			v := pod.Labels[rule]
			if v == "" {
				continue
			}
			id, name = v, v
			// A UID label's "-name" sibling names the group (JobSet's).
			if base, ok := strings.CutSuffix(rule, "-uid"); ok && pod.Labels[base+"-name"] != "" {
				name = pod.Labels[base+"-name"] + "-" + prefix(v, 8)
			}
		}
		g := Group{Intent: intentName(pod.Namespace, name), Namespace: pod.Namespace, ID: id}
		if owner != nil {
			o := *owner
			g.Owner = &o
		}
		return g, true
	}
	return Group{}, false
}

func prefix(s string, n int) string { return s[:min(n, len(s))] }

// intentName is "k8s:NAMESPACE/NAME", cut to the 128 characters an
// intent's name may have (with a digest of what was cut).
func intentName(ns, name string) string {
	full := IntentPrefix + ns + "/" + name
	if len(full) <= 128 {
		return full
	}
	return full[:119] + "-" + digest(full)[:8]
}

// JobSpec is what a group's pods ask for.
type JobSpec struct {
	Pattern    string // a models.Pattern…, or "none"
	GbpsPerGPU float64
	Class      models.TrafficClass
	Priority   int
	// Size is how many pods to wait for (0: those seen).
	Size int
}

// jobSpecOf reads a pod's annotations; a problem is said in words.
func jobSpecOf(pod *corev1.Pod) (JobSpec, string) {
	a := pod.Annotations
	s := JobSpec{Pattern: a[AnnotationCollective], Class: models.TrafficClass(a[AnnotationClass])}
	switch s.Pattern {
	case "none":
		return s, ""
	case models.PatternRingAllReduce, models.PatternAllToAll:
	default:
		return s, fmt.Sprintf("%s=%q: want %s, %s or none", AnnotationCollective, s.Pattern, models.PatternRingAllReduce, models.PatternAllToAll)
	}
	var err error
	if s.GbpsPerGPU, err = strconv.ParseFloat(a[AnnotationGbpsPerGPU], 64); err != nil || !(s.GbpsPerGPU >= models.MinGbps) || s.GbpsPerGPU > models.MaxGbps {
		return s, fmt.Sprintf("%s=%q: want a rate from %g to %g Gb/s", AnnotationGbpsPerGPU, a[AnnotationGbpsPerGPU], models.MinGbps, models.MaxGbps)
	}
	switch s.Class {
	case "", models.ClassLosslessRDMA, models.ClassBestEffort:
	default:
		return s, fmt.Sprintf("%s=%q: want %s or %s", AnnotationClass, s.Class, models.ClassLosslessRDMA, models.ClassBestEffort)
	}
	if v, ok := a[AnnotationPriority]; ok {
		if s.Priority, err = strconv.Atoi(v); err != nil || s.Priority < 0 || s.Priority > 7 {
			return s, fmt.Sprintf("%s=%q: want 0-7", AnnotationPriority, v)
		}
	}
	for _, k := range []string{AnnotationGroupSize, annotationKueueSize} {
		if v, ok := a[k]; ok {
			if s.Size, err = strconv.Atoi(v); err != nil || s.Size < 1 {
				return s, fmt.Sprintf("%s=%q: want a number of pods", k, v)
			}
			break
		}
	}
	return s, ""
}

// live says whether a pod still counts in its group: not finished, not
// being deleted.
func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Want is what a group should have: an intent spec, or none and why.
type Want struct {
	Spec *models.IntentSpec
	// Tenant the intent is for.
	Tenant models.TenantName
	// Without a spec: the condition's status and reason, and a message.
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// want decides what a group's live pods ask for, given the tenant of
// their namespace ("" if none) and every node's place.
func want(g Group, pods []*corev1.Pod, tenant models.TenantName, places map[string]NodePlace) Want {
	if tenant == "" {
		return Want{Status: corev1.ConditionFalse, Reason: "NoTenant",
			Message: fmt.Sprintf("namespace %s is mapped to no accelnet tenant (accelnet-kube --tenant)", g.Namespace)}
	}
	slices.SortFunc(pods, podOrder)
	spec, problem := jobSpecOf(pods[0])
	if problem != "" {
		return Want{Status: corev1.ConditionFalse, Reason: "InvalidAnnotation", Message: "pod " + pods[0].Name + ": " + problem}
	}
	for _, p := range pods[1:] {
		if s, _ := jobSpecOf(p); s != spec {
			return Want{Status: corev1.ConditionFalse, Reason: "InvalidAnnotation",
				Message: fmt.Sprintf("pods %s and %s of the group ask for different things", pods[0].Name, p.Name)}
		}
	}
	if spec.Pattern == "none" {
		return Want{Status: corev1.ConditionTrue, Reason: "NoReservation", Message: AnnotationCollective + "=none: no fabric reservation asked for"}
	}
	bound := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	total := max(spec.Size, len(pods))
	if bound < total {
		return Want{Status: corev1.ConditionFalse, Reason: "WaitingForPods", Message: fmt.Sprintf("%d of %d pods bound to nodes", bound, total)}
	}
	// The ring: each NIC (rail) of every node in the pods' order, rail
	// by rail, so neighbours share a rail where the nodes have one.
	var nodes []string
	var rails [][]string
	for _, p := range pods {
		if slices.Contains(nodes, p.Spec.NodeName) {
			continue // pods on one node talk over NVLink
		}
		nodes = append(nodes, p.Spec.NodeName)
		pl, ok := places[p.Spec.NodeName]
		if !ok || len(pl.Hosts) == 0 {
			why := "unknown to accelnet kube"
			if ok {
				why = pl.Problem
			}
			return Want{Status: corev1.ConditionFalse, Reason: "NotOnFabric", Message: fmt.Sprintf("node %s of pod %s is not on the fabric: %s", p.Spec.NodeName, p.Name, why)}
		}
		for i, h := range pl.Hosts {
			if i == len(rails) {
				rails = append(rails, nil)
			}
			rails[i] = append(rails[i], h)
		}
	}
	var endpoints []string
	for _, r := range rails {
		endpoints = append(endpoints, r...)
	}
	if len(endpoints) < 2 {
		return Want{Status: corev1.ConditionTrue, Reason: "OneHost", Message: "the group's pods share one fabric host: nothing crosses the fabric"}
	}
	return Want{Tenant: tenant, Spec: &models.IntentSpec{
		Name: g.Intent, Class: spec.Class, Priority: spec.Priority, SampledFlows: true,
		Collective: &models.Collective{Pattern: spec.Pattern, Endpoints: endpoints, GbpsPerGPU: spec.GbpsPerGPU},
	}}
}

// podOrder orders a group's pods by rank: the Job's completion index,
// else the name, numbers in names compared as numbers.
func podOrder(a, b *corev1.Pod) int {
	ia, erra := strconv.Atoi(a.Annotations["batch.kubernetes.io/job-completion-index"])
	ib, errb := strconv.Atoi(b.Annotations["batch.kubernetes.io/job-completion-index"])
	if erra == nil && errb == nil && ia != ib {
		return cmp.Compare(ia, ib)
	}
	return naturalCompare(a.Name, b.Name)
}

// naturalCompare compares names with their runs of digits as numbers
// (worker-2 before worker-10).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// idempotencyKey is the key of a group's create: the same group asking
// for the same thing is one intent, however often it is sent.
func idempotencyKey(g Group, tenant models.TenantName, spec models.IntentSpec) string {
	data, _ := json.Marshal(struct {
		Tenant models.TenantName
		Spec   models.IntentSpec
	}{tenant, spec.WithDefaults()})
	sum := sha256.Sum256(data)
	return g.Namespace + "/" + g.ID + "/" + hex.EncodeToString(sum[:8])
}

// sameRequest says whether an intent's spec is what want asks for.
func sameRequest(have, want models.IntentSpec) bool {
	a, _ := json.Marshal(have.WithDefaults())
	b, _ := json.Marshal(want.WithDefaults())
	return string(a) == string(b)
}
