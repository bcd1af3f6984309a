#!/bin/sh
# Regenerates oc.go, the ygot Go bindings for the OpenConfig interface models
# that fabricsim serves over gNMI. The YANG files ship with the ygot module.
set -e
yang="$(go list -m -f '{{.Dir}}' github.com/openconfig/ygot)/demo/getting_started/yang"
go run github.com/openconfig/ygot/generator@v0.36.0 \
  -path="$yang" -output_file=oc.go -package_name=oc \
  -generate_fakeroot -fakeroot_name=device -compress_paths=false \
  -shorten_enum_leaf_names -typedef_enum_with_defmod -exclude_modules=ietf-interfaces \
  -generate_getters -generate_simple_unions \
  "$yang/openconfig-interfaces.yang" "$yang/openconfig-if-ethernet.yang"
# The generator records the machine's paths in its header; keep them out.
sed -i "s|$yang/|yang/|g; s|[^ ]*/genutil/names.go|github.com/openconfig/ygot/genutil|g" oc.go
gofmt -w oc.go
