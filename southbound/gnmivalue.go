package southbound

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	gnmipb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// negotiateEncoding picks the encoding to ask a target for from the ones
// its Capabilities list: PROTO (typed scalars) when offered, else
// JSON_IETF, else JSON. A target that does not answer Capabilities is
// asked for PROTO, as gNMI targets that skip Capabilities usually serve it.
func negotiateEncoding(ctx context.Context, cc *grpc.ClientConn) gnmipb.Encoding {
	enc, _ := capabilityEncoding(ctx, cc)
	return enc
}

// capabilityEncoding is negotiateEncoding's choice, and whether it is
// only for now: an error when Capabilities could not be asked (the target
// unreachable, or out of time), so PROTO is a guess not to keep.
func capabilityEncoding(ctx context.Context, cc *grpc.ClientConn) (gnmipb.Encoding, error) {
	caps, err := gnmipb.NewGNMIClient(cc).Capabilities(ctx, &gnmipb.CapabilityRequest{})
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return gnmipb.Encoding_PROTO, err
	}
	if err != nil || len(caps.GetSupportedEncodings()) == 0 {
		return gnmipb.Encoding_PROTO, nil
	}
	for _, e := range []gnmipb.Encoding{gnmipb.Encoding_PROTO, gnmipb.Encoding_JSON_IETF, gnmipb.Encoding_JSON} {
		if slices.Contains(caps.GetSupportedEncodings(), e) {
			return e, nil
		}
	}
	return caps.GetSupportedEncodings()[0], nil
}

// leafJSON returns the JSON text of a value encoded as JSON or JSON_IETF.
func leafJSON(v *gnmipb.TypedValue) ([]byte, bool) {
	switch x := v.GetValue().(type) {
	case *gnmipb.TypedValue_JsonIetfVal:
		return x.JsonIetfVal, true
	case *gnmipb.TypedValue_JsonVal:
		return x.JsonVal, true
	}
	return nil, false
}

// uintValue decodes an unsigned leaf: a typed scalar, or JSON where
// RFC 7951 writes 64-bit integers as strings and smaller ones as numbers.
func uintValue(v *gnmipb.TypedValue) (uint64, bool) {
	switch x := v.GetValue().(type) {
	case *gnmipb.TypedValue_UintVal:
		return x.UintVal, true
	case *gnmipb.TypedValue_IntVal:
		return uint64(x.IntVal), x.IntVal >= 0
	}
	raw, ok := leafJSON(v)
	if !ok {
		return 0, false
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var anyVal any
	if d.Decode(&anyVal) != nil {
		return 0, false
	}
	switch a := anyVal.(type) {
	case json.Number:
		n = a
	case string:
		n = json.Number(a)
	default:
		return 0, false
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	return u, err == nil
}

// stringValue decodes a string or enumeration leaf, typed or JSON.
func stringValue(v *gnmipb.TypedValue) (string, bool) {
	if x, ok := v.GetValue().(*gnmipb.TypedValue_StringVal); ok {
		return x.StringVal, true
	}
	raw, ok := leafJSON(v)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// boolValue decodes a boolean leaf, typed or JSON.
func boolValue(v *gnmipb.TypedValue) (bool, bool) {
	if x, ok := v.GetValue().(*gnmipb.TypedValue_BoolVal); ok {
		return x.BoolVal, true
	}
	raw, ok := leafJSON(v)
	if !ok {
		return false, false
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}

// leaf is one scalar of a notification with its full path.
type leaf struct {
	elems []*gnmipb.PathElem
	val   *gnmipb.TypedValue
}

func (l leaf) Len() int                       { return len(l.elems) }
func (l leaf) NameIs(i int, name string) bool { return l.elems[i].GetName() == name }
func (l leaf) Key(i int, key string) string   { return l.elems[i].GetKey()[key] }
func (l leaf) Uint() (uint64, bool)           { return uintValue(l.val) }
func (l leaf) String() (string, bool)         { return stringValue(l.val) }
func (l leaf) Bool() (bool, bool)             { return boolValue(l.val) }

// leavesOf flattens a notification's updates into scalar leaves with full
// paths: typed scalars as they are, JSON subtrees (what a target answers
// for a container when asked for JSON_IETF) walked down to their scalars.
// JSON list entries are keyed by their "name" member, OpenConfig's
// convention for the lists read here (interface, queue); an entry without
// one is skipped. Module prefixes ("openconfig-interfaces:") are dropped.
func leavesOf(n *gnmipb.Notification) []leaf {
	out := make([]leaf, 0, len(n.GetUpdate()))
	prefix := n.GetPrefix().GetElem()
	for _, u := range n.GetUpdate() {
		elems := u.GetPath().GetElem() // read only: no copy unless a prefix joins it
		if len(prefix) > 0 {
			elems = append(slices.Clip(prefix), elems...)
		}
		raw, isJSON := leafJSON(u.GetVal())
		if !isJSON {
			out = append(out, leaf{elems, u.GetVal()})
			continue
		}
		var tree any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // a uint64 written as a JSON number keeps its digits
		if d.Decode(&tree) != nil {
			continue
		}
		out = flattenJSON(out, elems, tree)
	}
	return out
}

func flattenJSON(out []leaf, elems []*gnmipb.PathElem, v any) []leaf {
	at := func(name string, key map[string]string) []*gnmipb.PathElem {
		if i := strings.IndexByte(name, ':'); i >= 0 {
			name = name[i+1:]
		}
		return append(slices.Clip(elems), &gnmipb.PathElem{Name: name, Key: key})
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if list, ok := child.([]any); ok {
				for _, e := range list {
					entry, ok := e.(map[string]any)
					name, named := entry["name"].(string)
					if !ok || !named {
						continue
					}
					out = flattenJSON(out, at(k, map[string]string{"name": name}), entry)
				}
				continue
			}
			out = flattenJSON(out, at(k, nil), child)
		}
	default:
		raw, err := json.Marshal(x)
		if err != nil || len(elems) == 0 {
			return out
		}
		out = append(out, leaf{elems, &gnmipb.TypedValue{Value: &gnmipb.TypedValue_JsonIetfVal{JsonIetfVal: raw}}})
	}
	return out
}
