//go:build tools

// Package kube pins the Kubernetes API server the tests of accelnet's
// Kubernetes side run against: k8s.io/kubernetes's cmd/kube-apiserver, in
// a module of its own so its dependencies stay out of accelnet's.
package kube

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
