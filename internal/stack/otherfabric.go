package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// OtherFabric is what etcd holds over a stored topology that a start is
// about to replace with another: intents and drains made for that fabric.
type OtherFabric struct {
	Stored, New models.Topology
	// Intents are the stored intents; Stranded those with a host the new
	// fabric does not have (they will fail).
	Intents, Stranded int
	// Drains are the stored drains; Dangling those of a switch or link
	// the new fabric does not have (kept, draining nothing).
	Drains, Dangling int
}

// Any says whether anything was made for the other fabric.
func (o OtherFabric) Any() bool { return o.Intents > 0 || o.Drains > 0 }

// String says what the data holds and what will happen to it.
func (o OtherFabric) String() string {
	var parts []string
	if o.Intents > 0 {
		p := plural(o.Intents, "intent")
		if o.Stranded > 0 {
			p += fmt.Sprintf(" (%d over hosts the new fabric does not have: they will fail)", o.Stranded)
		}
		parts = append(parts, p)
	}
	if o.Drains > 0 {
		p := plural(o.Drains, "drain") + " (applied to the new fabric's switches and links of the same names"
		if o.Dangling > 0 {
			p += fmt.Sprintf("; %d of ones it does not have", o.Dangling)
		}
		parts = append(parts, p+")")
	}
	return fmt.Sprintf("the stored state is of another fabric (%s) than this one (%s): %s",
		describe(o.Stored), describe(o.New), strings.Join(parts, ", "))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func describe(t models.Topology) string {
	s := fmt.Sprintf("%d switches, %d hosts", len(t.Switches), len(t.Hosts))
	if t.Name != "" {
		s = t.Name + ": " + s
	}
	return s
}

// otherFabric reads what etcd holds over stored, the topology next
// replaces.
func otherFabric(ctx context.Context, st *store.Store, stored, next models.Topology) (OtherFabric, error) {
	o := OtherFabric{Stored: stored, New: next}
	hosts := map[string]bool{}
	for _, h := range next.Hosts {
		hosts[h.Name] = true
		hosts[h.IP.String()] = true
	}
	switches := map[models.SwitchID]bool{}
	for _, s := range next.Switches {
		switches[s.Name] = true
	}
	links := map[models.LinkID]bool{}
	for _, l := range next.Links {
		links[l.ID()] = true
	}
	kvs, _, err := st.List(ctx, store.KeyIntents, 0)
	if err != nil {
		return o, err
	}
	for _, kv := range kvs {
		var in models.Intent
		if json.Unmarshal(kv.Value, &in) != nil {
			continue
		}
		o.Intents++
		names := []string{in.Spec.Src, in.Spec.Dst}
		if c := in.Spec.Collective; c != nil {
			names = c.Endpoints
		}
		for _, n := range names {
			if a, err := netip.ParseAddr(n); err == nil {
				n = a.String()
			}
			if !hosts[n] {
				o.Stranded++
				break
			}
		}
	}
	kvs, _, err = st.List(ctx, store.KeyDrains, 0)
	if err != nil {
		return o, err
	}
	for _, kv := range kvs {
		var d models.Drain
		if json.Unmarshal(kv.Value, &d) != nil {
			continue
		}
		o.Drains++
		if d.Switch != "" && !switches[d.Switch] || d.Link != "" && !links[d.Link] {
			o.Dangling++
		}
	}
	return o, nil
}
