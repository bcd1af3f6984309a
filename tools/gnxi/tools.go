//go:build tools

// Package gnxi pins gnxi's gnmi_target, a gNMI target nobody here wrote,
// which southbound's interop test runs accelnet's gNMI client against. It
// is a module of its own because gnxi pins old gnmi and ygot releases.
package gnxi

import _ "github.com/google/gnxi/gnmi_target"
