package controller

import (
	"context"
	"fmt"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/topology"
)

// desiredConfig is the fabric profile for a switch's ports: enabled, the
// profile MTU, and a description naming what is at the other end.
func desiredConfig(snap *topology.Snapshot, sw models.SwitchID, mtu uint16) map[uint32]models.InterfaceConfig {
	out := map[uint32]models.InterfaceConfig{}
	for _, port := range snap.Ports(sw) {
		e := models.Endpoint{Switch: sw, Port: port}
		desc := "unused"
		if l, ok := snap.LinkAt(e); ok {
			peer := l.B
			if l.B == e {
				peer = l.A
			}
			desc = "link to " + peer.String()
		} else if h, ok := snap.HostAt(e); ok {
			desc = "host " + h.Name
		}
		out[port] = models.InterfaceConfig{Enabled: true, MTU: mtu, Description: desc}
	}
	return out
}

// configUnmanaged says sw's interfaces are not ours to configure: a
// switch without gNMI (BMv2's simple_switch_grpc) has them configured some
// other way, so there is nothing to do or retry; its status says so.
func (c *Controller) configUnmanaged(sw models.SwitchID) bool {
	st := c.current()
	if st == nil {
		return false
	}
	s, err := st.snap.Switch(sw)
	if err != nil || s.GNMIAddr != "" {
		return false
	}
	c.mu.Lock()
	status := c.status[sw]
	status.ConfigInSync, status.ConfigError = false, "not managed: the switch has no gNMI address"
	c.status[sw] = status
	c.mu.Unlock()
	return true
}

// recordConfig records a config reconcile's outcome in sw's status.
func (c *Controller) recordConfig(sw models.SwitchID, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return
	}
	if _, gone := c.state.snap.Switch(sw); gone != nil {
		return
	}
	st := c.status[sw]
	st.ConfigInSync, st.ConfigError = err == nil, ""
	if err != nil {
		st.ConfigError = err.Error()
	}
	c.status[sw] = st
}

// ReconcileConfig makes a switch's interface configuration match the
// fabric profile: Get, Set what differs, Get again to verify. It returns
// how many ports it changed.
func (c *Controller) ReconcileConfig(ctx context.Context, sw models.SwitchID) (int, error) {
	st := c.current()
	if st == nil || c.cfg.Config == nil {
		return 0, nil
	}
	if _, err := st.snap.Switch(sw); err != nil {
		return 0, nil // gone from the topology
	}
	want := desiredConfig(st.snap, sw, c.cfg.MTU)
	have, err := c.cfg.Config.GetConfig(ctx, sw)
	if err != nil {
		return 0, fmt.Errorf("read config of %s: %w", sw, err)
	}
	change := map[uint32]models.InterfaceConfig{}
	for port, w := range want {
		if have[port] != w {
			change[port] = w
		}
	}
	if len(change) == 0 {
		return 0, nil
	}
	if err := c.cfg.Config.SetConfig(ctx, sw, change); err != nil {
		return 0, fmt.Errorf("write config of %s: %w", sw, err)
	}
	after, err := c.cfg.Config.GetConfig(ctx, sw)
	if err != nil {
		return 0, fmt.Errorf("verify config of %s: %w", sw, err)
	}
	for port := range change {
		if after[port] != want[port] {
			return 0, fmt.Errorf("config of %s port %d reads back %+v after setting %+v", sw, port, after[port], want[port])
		}
	}
	c.log.Debug("interface config applied", "switch", sw, "ports", len(change), "mtu", c.cfg.MTU)
	c.writeLog.addConfig(len(change)) // summed at info by logWrites
	return len(change), nil
}
