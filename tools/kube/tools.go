//go:build tools

// Package kube pins the Kubernetes control plane the tests of accelnet's
// Kubernetes side run against: k8s.io/kubernetes's kube-apiserver, and
// the kube-scheduler and kube-controller-manager that bind a Job's pods
// and make them, in a module of its own so its dependencies stay out of
// accelnet's.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
