//go:build tools

// Package tools pins the third-party programs accelnet's tests run against
// fabricsim (an independent gNMI client), in a module of their own so their
// dependencies stay out of accelnet's.
package tools

import _ "github.com/openconfig/gnmi/cmd/gnmi_cli"
