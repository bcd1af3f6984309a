// Package oc holds ygot-generated Go bindings for the OpenConfig interface
// models (openconfig-interfaces, openconfig-if-ethernet). fabricsim validates
// what it serves and accepts over gNMI against them.
package oc

//go:generate sh gen.sh
