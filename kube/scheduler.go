package kube

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/accelnet/accelnet/models"
)

// The scheduler's objects accelnet kube keeps: Volcano's HyperNodes and
// Kueue's Topology (both cluster-scoped custom resources).
var (
	HyperNodes = schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}
	Topologies = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "topologies"}
)

const (
	// LabelManagedBy marks the objects accelnet kube made; it deletes
	// those of them it no longer wants, and touches no others.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "accelnet-kube"

	// AnnotationUplinks on a HyperNode: how many of its leaves' uplinks
	// carry routes, of how many ("14/16").
	AnnotationUplinks = "accelnet.io/uplinks"
	// AnnotationDegraded on a HyperNode: what it has lost.
	AnnotationDegraded = "accelnet.io/degraded"
)

// Tiers of the HyperNodes.
const (
	TierLeaf   = 1
	TierBlock  = 2
	TierFabric = 3
)

// notInName is what a DNS subdomain cannot hold.
var notInName = regexp.MustCompile(`[^a-z0-9.-]+`)

// objectName is s made a valid object name (a DNS subdomain).
func objectName(s string) string {
	s = strings.ToLower(s)
	s = notInName.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-.")
	if len(s) > 253 {
		s = s[:244] + "-" + digest(s)
	}
	return s
}

// HyperNodeName is the name of the HyperNode of a tier-1 or tier-2
// group of fabric ("" names the fabric's own).
func HyperNodeName(fabric, group string) string {
	if group == "" {
		return objectName(fabric)
	}
	return objectName(fabric + "-" + group)
}

// hyperNode is a HyperNode accelnet kube wants.
type hyperNode struct {
	name        string
	tier        int
	tierName    string
	memberType  string // Node or HyperNode
	members     []string
	annotations map[string]string
}

func (h hyperNode) object(fabric string) *unstructured.Unstructured {
	members := make([]any, 0, len(h.members))
	for _, m := range h.members {
		members = append(members, map[string]any{"type": h.memberType, "selector": map[string]any{"exactMatch": map[string]any{"name": m}}})
	}
	annotations := map[string]any{}
	for k, v := range h.annotations {
		annotations[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": HyperNodes.GroupVersion().String(),
		"kind":       "HyperNode",
		"metadata": map[string]any{
			"name":        h.name,
			"labels":      map[string]any{LabelManagedBy: managedBy, LabelFabric: fabric},
			"annotations": annotations,
		},
		"spec": map[string]any{"tier": int64(h.tier), "tierName": h.tierName, "members": members},
	}}
}

// wantedHyperNodes are the HyperNodes of the fabric's nodes that are on
// it and not degraded: one per leaf group (tier 1, its nodes), one per
// block (tier 2, its leaf groups' HyperNodes), one for the fabric (tier
// 3, its blocks'). A group without a node has none.
func wantedHyperNodes(s Shape, places map[string]NodePlace) map[string]hyperNode {
	leafNodes := map[string][]string{}
	leafBlock := map[string]string{}
	for node, p := range places {
		if len(p.Hosts) == 0 || p.Degraded != "" {
			continue
		}
		leafNodes[p.Leaf] = append(leafNodes[p.Leaf], node)
		leafBlock[p.Leaf] = p.Block
	}
	out := map[string]hyperNode{}
	blockLeaves := map[string][]string{}
	for leaf, nodes := range leafNodes {
		slices.Sort(nodes)
		name := HyperNodeName(s.Fabric, leaf)
		h := hyperNode{name: name, tier: TierLeaf, tierName: "leaf", memberType: "Node", members: nodes, annotations: map[string]string{}}
		if ls, ok := s.Leaves[models.SwitchID(leaf)]; ok {
			h.annotations[AnnotationUplinks] = strconv.Itoa(ls.Up) + "/" + strconv.Itoa(ls.Uplinks)
		}
		out[name] = h
		blockLeaves[leafBlock[leaf]] = append(blockLeaves[leafBlock[leaf]], name)
	}
	var blocks []string
	for block, leaves := range blockLeaves {
		slices.Sort(leaves)
		name := HyperNodeName(s.Fabric, block)
		h := hyperNode{name: name, tier: TierBlock, tierName: "block", memberType: "HyperNode", members: leaves, annotations: map[string]string{}}
		if b, ok := s.Blocks[block]; ok {
			h.annotations[AnnotationUplinks] = strconv.Itoa(b.Up) + "/" + strconv.Itoa(b.Uplinks)
			if b.Degraded != "" {
				h.annotations[AnnotationDegraded] = b.Degraded
			}
		}
		out[name] = h
		blocks = append(blocks, name)
	}
	if len(blocks) > 0 {
		slices.Sort(blocks)
		name := HyperNodeName(s.Fabric, "")
		out[name] = hyperNode{name: name, tier: TierFabric, tierName: "fabric", memberType: "HyperNode", members: blocks, annotations: map[string]string{}}
	}
	return out
}

// sameHyperNode says whether an existing HyperNode is what is wanted.
func sameHyperNode(have *unstructured.Unstructured, want hyperNode, fabric string) bool {
	w := want.object(fabric)
	hs, _, _ := unstructured.NestedMap(have.Object, "spec")
	ws, _, _ := unstructured.NestedMap(w.Object, "spec")
	if !equalJSON(hs, ws) {
		return false
	}
	for k, v := range want.annotations {
		if have.GetAnnotations()[k] != v {
			return false
		}
	}
	for _, k := range []string{AnnotationUplinks, AnnotationDegraded} {
		if _, ok := want.annotations[k]; !ok && have.GetAnnotations()[k] != "" {
			return false
		}
	}
	return have.GetLabels()[LabelManagedBy] == managedBy && have.GetLabels()[LabelFabric] == fabric
}

// topologyObject is the Kueue Topology whose levels are the labels
// accelnet kube writes: block, leaf group, node.
func topologyObject(name, fabric string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Topologies.GroupVersion().String(),
		"kind":       "Topology",
		"metadata": map[string]any{
			"name":   name,
			"labels": map[string]any{LabelManagedBy: managedBy, LabelFabric: fabric},
		},
		"spec": map[string]any{"levels": []any{
			map[string]any{"nodeLabel": LabelBlock},
			map[string]any{"nodeLabel": LabelLeaf},
			map[string]any{"nodeLabel": LabelHostname},
		}},
	}}
}

// equalJSON says whether two values encode to the same JSON.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
