package api

import "github.com/accelnet/accelnet/models"

// DrainPreview is what a drain would do.
type DrainPreview struct {
	Links int `json:"links"`
	// ReservedMLU is the highest reserved utilization once intents on the
	// drained links moved; Degraded the intents that would find no room.
	ReservedMLU float64  `json:"reserved_mlu"`
	Degraded    []string `json:"degraded_intents"`
	Moved       int      `json:"moved_intents"`
	// HostsCutOff are hosts whose only link would be drained.
	HostsCutOff []string `json:"hosts_cut_off,omitempty"`
	// TrafficGbps is what the drained links carry now (it will move).
	TrafficGbps float64 `json:"traffic_gbps"`
}

// DrainView is a drain with where it stands.
type DrainView struct {
	models.Drain
	// State is "draining" while its links still carry traffic, "drained"
	// once they are empty.
	State       string  `json:"state"`
	TrafficGbps float64 `json:"traffic_gbps"`
}
