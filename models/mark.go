package models

import "time"

// SwitchMark is what a leader's term confirmed a switch holds, kept in
// etcd for the next term: a switch whose mark matches what the next term
// computes for it is taken as it is (probed, not read in full). A term
// removes a switch's mark before it writes to the switch and records a
// new one once the switch has been quiet and confirmed, so a switch
// written when its leader died has no mark (see controller/handover.go).
type SwitchMark struct {
	// Tables is the digest (StateDigest) of the switch's entries but its
	// flow pins, under the switch's own group IDs; Pins is its flow pins'.
	Tables string `json:"tables"`
	Pins   string `json:"pins"`
	// PinCount is how many flow pins the switch holds (for the logs).
	PinCount int `json:"pin_count"`
	// Renames maps the plan's group IDs to those the switch holds the
	// same groups under, where the leader adopted the switch's (a
	// re-weighting that changed a group's ID but not its routes).
	Renames map[uint32]uint32 `json:"renames,omitempty"`
	// Term is the election ID of the term that recorded it.
	Term uint64 `json:"term"`
}

// ForeignPrimary records that a controller other than accelnet's
// replicas holds a switch's primary role (a higher election ID), as the
// leader saw it.
type ForeignPrimary struct {
	Switch SwitchID  `json:"switch"`
	Since  time.Time `json:"since"`
	// Error is what the switch answered.
	Error string `json:"error"`
}
