// Package ocpath holds the OpenConfig paths accelnet reads and writes over
// gNMI, shared by the driver (southbound) and the emulated switches
// (fabricsim), so both sides name the same leaves.
package ocpath

import gnmipb "github.com/openconfig/gnmi/proto/gnmi"

// Counters are the interface leaves the controller subscribes to,
// relative to /interfaces/interface[name=*]/state.
var Counters = [][]string{
	{"counters", "in-octets"},
	{"counters", "out-octets"},
	{"counters", "out-discards"},
	{"oper-status"},
}

// Queue is OpenConfig QoS's
// /qos/interfaces/interface[interface-id]/output/queues/queue[name]/state/leaf.
func Queue(iface, queue, leaf string) *gnmipb.Path {
	return &gnmipb.Path{Elem: []*gnmipb.PathElem{
		{Name: "qos"}, {Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"interface-id": iface}},
		{Name: "output"}, {Name: "queues"},
		{Name: "queue", Key: map[string]string{"name": queue}},
		{Name: "state"}, {Name: leaf},
	}}
}

// InterfaceConfig is /interfaces/interface[name]/config[/leaf].
func InterfaceConfig(name, leaf string) *gnmipb.Path {
	p := &gnmipb.Path{Elem: []*gnmipb.PathElem{
		{Name: "interfaces"},
		{Name: "interface", Key: map[string]string{"name": name}},
		{Name: "config"},
	}}
	if leaf != "" {
		p.Elem = append(p.Elem, &gnmipb.PathElem{Name: leaf})
	}
	return p
}
