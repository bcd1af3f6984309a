package topology

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/accelnet/accelnet/models"
)

// The topology file is YAML:
//
//	name: lab
//	defaults: {link_gbps: 400, nic_gbps: 400}
//	switches:
//	  - {name: spine1, role: spine, device_id: 1, p4rt: "10.0.0.1:9559", gnmi: "10.0.0.1:9339", target: bmv2}
//	  - {name: leaf1, role: leaf, device_id: 2, prefix: 10.0.1.0/24}
//	links:
//	  - leaf1:3 <-> spine1:1                      # speed from defaults.link_gbps
//	  - {ends: "leaf1:4 <-> spine2:1", gbps: 100}
//	hosts:
//	  - {name: h1, ip: 10.0.1.1, attach: "leaf1:1"} # NIC speed from defaults.nic_gbps
//	  - {name: h2, ip: 10.0.1.2, attach: "leaf1:2", mac: "06:00:0a:00:01:02"}
//
// Errors name the line and the field.

// FileError is a problem at a place in a topology file.
type FileError struct {
	Line  int
	Field string
	Err   error
}

func (e *FileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %s: %v", e.Line, e.Field, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

func fileErr(n *yaml.Node, field string, format string, args ...any) error {
	return &FileError{Line: n.Line, Field: field, Err: fmt.Errorf("%w: %s", models.ErrInvalid, fmt.Sprintf(format, args...))}
}

// LoadFile reads and parses a topology file.
func LoadFile(path string) (models.Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return models.Topology{}, fmt.Errorf("read topology: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return models.Topology{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// mapping walks a YAML mapping, rejecting keys not in allowed.
func mapping(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fileErr(n, what, "want a mapping")
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		known := false
		for _, a := range allowed {
			if k.Value == a {
				known = true
				break
			}
		}
		if !known {
			return nil, fileErr(k, what, "unknown field %q (want one of %s)", k.Value, strings.Join(allowed, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, fileErr(k, what+"."+k.Value, "given twice")
		}
		out[k.Value] = v
	}
	return out, nil
}

func scalar(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fileErr(n, field, "want a single value")
	}
	return n.Value, nil
}

func number(n *yaml.Node, field string) (float64, error) {
	s, err := scalar(n, field)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fileErr(n, field, "%q is not a number", s)
	}
	return v, nil
}

// Parse reads a topology file and validates it.
func Parse(data []byte) (models.Topology, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return models.Topology{}, fmt.Errorf("%w: %v", models.ErrInvalid, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return models.Topology{}, fmt.Errorf("%w: empty topology file", models.ErrInvalid)
	}
	top, err := mapping(doc.Content[0], "topology", "name", "defaults", "switches", "links", "hosts")
	if err != nil {
		return models.Topology{}, err
	}
	var t models.Topology
	if n := top["name"]; n != nil {
		if t.Name, err = scalar(n, "name"); err != nil {
			return t, err
		}
	}
	linkGbps, nicGbps := 0.0, 0.0
	if n := top["defaults"]; n != nil {
		d, err := mapping(n, "defaults", "link_gbps", "nic_gbps")
		if err != nil {
			return t, err
		}
		if v := d["link_gbps"]; v != nil {
			if linkGbps, err = number(v, "defaults.link_gbps"); err != nil {
				return t, err
			}
		}
		if v := d["nic_gbps"]; v != nil {
			if nicGbps, err = number(v, "defaults.nic_gbps"); err != nil {
				return t, err
			}
		}
	}
	lines := map[string]*yaml.Node{} // object key → node, to place validation errors
	if n := top["switches"]; n != nil {
		if n.Kind != yaml.SequenceNode {
			return t, fileErr(n, "switches", "want a list")
		}
		for i, item := range n.Content {
			sw, err := parseSwitch(item, fmt.Sprintf("switches[%d]", i))
			if err != nil {
				return t, err
			}
			t.Switches = append(t.Switches, sw)
			lines["switch "+string(sw.Name)] = item
		}
	}
	if n := top["links"]; n != nil {
		if n.Kind != yaml.SequenceNode {
			return t, fileErr(n, "links", "want a list")
		}
		for i, item := range n.Content {
			l, err := parseLink(item, fmt.Sprintf("links[%d]", i), linkGbps)
			if err != nil {
				return t, err
			}
			t.Links = append(t.Links, l)
			lines["link "+string(l.ID())] = item
		}
	}
	if n := top["hosts"]; n != nil {
		if n.Kind != yaml.SequenceNode {
			return t, fileErr(n, "hosts", "want a list")
		}
		for i, item := range n.Content {
			h, err := parseHost(item, fmt.Sprintf("hosts[%d]", i), nicGbps)
			if err != nil {
				return t, err
			}
			t.Hosts = append(t.Hosts, h)
			lines["host "+h.Name] = item
		}
	}
	if err := t.Validate(); err != nil {
		// Point at the object the message names, when we can find it.
		msg := err.Error()
		best, bestLen := doc.Content[0], 0
		for key, node := range lines {
			if strings.Contains(msg, key+":") || strings.Contains(msg, key+" ") {
				if len(key) > bestLen {
					best, bestLen = node, len(key)
				}
			}
		}
		return t, &FileError{Line: best.Line, Err: err}
	}
	return t, nil
}

func parseSwitch(n *yaml.Node, where string) (models.Switch, error) {
	m, err := mapping(n, where, "name", "role", "device_id", "p4rt", "gnmi", "prefix", "pod", "target")
	if err != nil {
		return models.Switch{}, err
	}
	var sw models.Switch
	for _, req := range []string{"name", "role", "device_id"} {
		if m[req] == nil {
			return sw, fileErr(n, where+"."+req, "required")
		}
	}
	name, err := scalar(m["name"], where+".name")
	if err != nil {
		return sw, err
	}
	sw.Name = models.SwitchID(name)
	role, err := scalar(m["role"], where+".role")
	if err != nil {
		return sw, err
	}
	sw.Role = models.Role(role)
	dev, err := scalar(m["device_id"], where+".device_id")
	if err != nil {
		return sw, err
	}
	if sw.DeviceID, err = strconv.ParseUint(dev, 0, 64); err != nil {
		return sw, fileErr(m["device_id"], where+".device_id", "%q is not an unsigned integer", dev)
	}
	if v := m["p4rt"]; v != nil {
		if sw.P4RTAddr, err = scalar(v, where+".p4rt"); err != nil {
			return sw, err
		}
	}
	if v := m["gnmi"]; v != nil {
		if sw.GNMIAddr, err = scalar(v, where+".gnmi"); err != nil {
			return sw, err
		}
	}
	if v := m["prefix"]; v != nil {
		s, err := scalar(v, where+".prefix")
		if err != nil {
			return sw, err
		}
		if sw.Prefix, err = netip.ParsePrefix(s); err != nil {
			return sw, fileErr(v, where+".prefix", "%q is not an IPv4 prefix", s)
		}
	}
	if v := m["pod"]; v != nil {
		s, err := scalar(v, where+".pod")
		if err != nil {
			return sw, err
		}
		if sw.Pod, err = strconv.Atoi(s); err != nil {
			return sw, fileErr(v, where+".pod", "%q is not an integer", s)
		}
	}
	if v := m["target"]; v != nil {
		s, err := scalar(v, where+".target")
		if err != nil {
			return sw, err
		}
		sw.Target = models.Target(s)
		if err := sw.Target.Validate(); err != nil {
			return sw, &FileError{Line: v.Line, Field: where + ".target", Err: err}
		}
	}
	if err := sw.Validate(); err != nil {
		return sw, &FileError{Line: n.Line, Field: where, Err: err}
	}
	return sw, nil
}

func parseEnds(n *yaml.Node, field, s string) (models.Endpoint, models.Endpoint, error) {
	a, b, ok := strings.Cut(s, "<->")
	if !ok {
		return models.Endpoint{}, models.Endpoint{}, fileErr(n, field, "%q: want \"switch:port <-> switch:port\"", s)
	}
	ea, err := models.ParseEndpoint(a)
	if err != nil {
		return ea, ea, &FileError{Line: n.Line, Field: field, Err: err}
	}
	eb, err := models.ParseEndpoint(b)
	if err != nil {
		return ea, eb, &FileError{Line: n.Line, Field: field, Err: err}
	}
	return ea, eb, nil
}

func parseLink(n *yaml.Node, where string, defaultGbps float64) (models.Link, error) {
	l := models.Link{Gbps: defaultGbps}
	var ends string
	endsNode := n
	switch n.Kind {
	case yaml.ScalarNode:
		ends = n.Value
	case yaml.MappingNode:
		m, err := mapping(n, where, "ends", "gbps")
		if err != nil {
			return l, err
		}
		if m["ends"] == nil {
			return l, fileErr(n, where+".ends", "required")
		}
		endsNode = m["ends"]
		if ends, err = scalar(endsNode, where+".ends"); err != nil {
			return l, err
		}
		if v := m["gbps"]; v != nil {
			if l.Gbps, err = number(v, where+".gbps"); err != nil {
				return l, err
			}
		}
	default:
		return l, fileErr(n, where, "want \"a:port <-> b:port\" or {ends: ..., gbps: ...}")
	}
	var err error
	if l.A, l.B, err = parseEnds(endsNode, where, ends); err != nil {
		return l, err
	}
	if l.Gbps == 0 {
		return l, fileErr(n, where+".gbps", "no speed given and no defaults.link_gbps")
	}
	if err := l.Validate(); err != nil {
		return l, &FileError{Line: n.Line, Field: where, Err: err}
	}
	return l, nil
}

func parseHost(n *yaml.Node, where string, defaultGbps float64) (models.Host, error) {
	h := models.Host{NICGbps: defaultGbps}
	m, err := mapping(n, where, "name", "ip", "attach", "gbps", "rail", "mac")
	if err != nil {
		return h, err
	}
	for _, req := range []string{"name", "ip", "attach"} {
		if m[req] == nil {
			return h, fileErr(n, where+"."+req, "required")
		}
	}
	if h.Name, err = scalar(m["name"], where+".name"); err != nil {
		return h, err
	}
	ip, err := scalar(m["ip"], where+".ip")
	if err != nil {
		return h, err
	}
	if h.IP, err = netip.ParseAddr(ip); err != nil {
		return h, fileErr(m["ip"], where+".ip", "%q is not an IP address", ip)
	}
	att, err := scalar(m["attach"], where+".attach")
	if err != nil {
		return h, err
	}
	if h.Attach, err = models.ParseEndpoint(att); err != nil {
		return h, &FileError{Line: m["attach"].Line, Field: where + ".attach", Err: err}
	}
	if v := m["gbps"]; v != nil {
		if h.NICGbps, err = number(v, where+".gbps"); err != nil {
			return h, err
		}
	}
	if h.NICGbps == 0 {
		return h, fileErr(n, where+".gbps", "no NIC speed given and no defaults.nic_gbps")
	}
	if v := m["rail"]; v != nil {
		s, err := scalar(v, where+".rail")
		if err != nil {
			return h, err
		}
		if h.Rail, err = strconv.Atoi(s); err != nil {
			return h, fileErr(v, where+".rail", "%q is not an integer", s)
		}
	}
	if v := m["mac"]; v != nil {
		s, err := scalar(v, where+".mac")
		if err != nil {
			return h, err
		}
		if err := h.MAC.UnmarshalText([]byte(s)); err != nil {
			return h, &FileError{Line: v.Line, Field: where + ".mac", Err: err}
		}
	}
	if err := h.Validate(); err != nil {
		return h, &FileError{Line: n.Line, Field: where, Err: err}
	}
	return h, nil
}

// Format writes t in the topology file format, one object per line.
func Format(t models.Topology) []byte {
	var b bytes.Buffer
	if t.Name != "" {
		fmt.Fprintf(&b, "name: %s\n", t.Name)
	}
	b.WriteString("switches:\n")
	for _, s := range t.Switches {
		fmt.Fprintf(&b, "  - {name: %s, role: %s, device_id: %d", s.Name, s.Role, s.DeviceID)
		if s.P4RTAddr != "" {
			fmt.Fprintf(&b, ", p4rt: %q", s.P4RTAddr)
		}
		if s.GNMIAddr != "" {
			fmt.Fprintf(&b, ", gnmi: %q", s.GNMIAddr)
		}
		if s.Prefix.IsValid() {
			fmt.Fprintf(&b, ", prefix: %s", s.Prefix)
		}
		if s.Pod != 0 {
			fmt.Fprintf(&b, ", pod: %d", s.Pod)
		}
		if s.Target != "" {
			fmt.Fprintf(&b, ", target: %s", s.Target)
		}
		b.WriteString("}\n")
	}
	b.WriteString("links:\n")
	for _, l := range t.Links {
		fmt.Fprintf(&b, "  - {ends: \"%s <-> %s\", gbps: %s}\n", l.A, l.B, strconv.FormatFloat(l.Gbps, 'g', -1, 64))
	}
	b.WriteString("hosts:\n")
	for _, h := range t.Hosts {
		rail := ""
		if h.Rail > 0 {
			rail = fmt.Sprintf(", rail: %d", h.Rail)
		}
		if !h.MAC.IsZero() {
			rail += fmt.Sprintf(", mac: %q", h.MAC)
		}
		fmt.Fprintf(&b, "  - {name: %s, ip: %s, attach: \"%s\", gbps: %s%s}\n", h.Name, h.IP, h.Attach, strconv.FormatFloat(h.NICGbps, 'g', -1, 64), rail)
	}
	return b.Bytes()
}

// ErrBadSpec is returned by ParseSpec for builder strings it cannot read.
var ErrBadSpec = errors.New("bad fabric spec")

// ParseSpec builds a fabric from a short spec, every link at GBPS (default
// 400): "leafspine:LEAVESxHOSTSxSPINES[@GBPS]" (leaves × hosts per leaf ×
// spines, the order pathcalc's evaluator uses), "oversub:…" (the same with
// more hosts than spines), "fattree:K[@GBPS]" or
// "rail:SERVERSxRAILSxSPINES[@GBPS]" (rail-optimized).
func ParseSpec(spec string) (models.Topology, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return models.Topology{}, fmt.Errorf("%w: %q: want leafspine:LEAVESxHOSTSxSPINES or fattree:K", ErrBadSpec, spec)
	}
	gbps := 400.0
	if dims, speed, ok := strings.Cut(rest, "@"); ok {
		v, err := strconv.ParseFloat(speed, 64)
		if err != nil {
			return models.Topology{}, fmt.Errorf("%w: %q: bad speed", ErrBadSpec, spec)
		}
		gbps, rest = v, dims
	}
	var nums []int
	for _, f := range strings.Split(rest, "x") {
		v, err := strconv.Atoi(f)
		if err != nil {
			return models.Topology{}, fmt.Errorf("%w: %q: %q is not a number", ErrBadSpec, spec, f)
		}
		nums = append(nums, v)
	}
	switch {
	case kind == "leafspine" && len(nums) == 3:
		return LeafSpine(nums[2], nums[0], nums[1], gbps)
	case kind == "oversub" && len(nums) == 3:
		if nums[1] <= nums[2] {
			return models.Topology{}, fmt.Errorf("%w: %q: an oversubscribed leaf-spine has more hosts than spines per leaf", ErrBadSpec, spec)
		}
		t, err := LeafSpine(nums[2], nums[0], nums[1], gbps)
		t.Name = fmt.Sprintf("oversub-%dx%dx%d", nums[0], nums[1], nums[2])
		return t, err
	case kind == "fattree" && len(nums) == 1:
		return FatTree(nums[0], gbps)
	case kind == "rail" && len(nums) == 3:
		return RailOptimized(nums[0], nums[1], nums[2], gbps)
	}
	return models.Topology{}, fmt.Errorf("%w: %q: want leafspine:LEAVESxHOSTSxSPINES, oversub:LEAVESxHOSTSxSPINES, fattree:K or rail:SERVERSxRAILSxSPINES", ErrBadSpec, spec)
}

// Load reads a fabric from a builder spec ("leafspine:…", "fattree:…") or,
// failing that prefix, from a topology file.
func Load(arg string) (models.Topology, error) {
	if IsSpec(arg) {
		return ParseSpec(arg)
	}
	return LoadFile(arg)
}

// IsSpec reports whether arg names a builder spec rather than a file.
func IsSpec(arg string) bool {
	for _, kind := range []string{"leafspine:", "oversub:", "fattree:", "rail:"} {
		if strings.HasPrefix(arg, kind) {
			return true
		}
	}
	return false
}
