package p4

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSchemaResolvesEverythingTheControllerUses fails if the P4Info lacks a
// name, ID or bit width that the controller or fabricsim programs through.
func TestSchemaResolvesEverythingTheControllerUses(t *testing.T) {
	s, err := LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	lim := s.Limits()
	if lim.RouteEntries != 4096 || lim.FlowPinEntries != 16384 || lim.MaxGroupSize != 64 || lim.SelectorSize != 4096 {
		t.Errorf("limits = %+v", lim)
	}
	if s.TableID(TableFlowPin)>>24 != 0x02 || s.ActionID(ActionSetEgress)>>24 != 0x01 || s.ProfileID(ProfileECMP)>>24 != 0x11 || s.CounterID(CounterPortRx)>>24 != 0x12 {
		t.Error("IDs do not carry the P4Runtime prefixes")
	}
}

// TestSourceAndP4InfoAgree checks every @id in accelnet.p4 against the P4Info:
// the object declared right after the annotation must have that ID there,
// and every P4Info object must be declared in the source.
func TestSourceAndP4InfoAgree(t *testing.T) {
	info, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uint32]string{}
	for _, x := range info.GetTables() {
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	for _, x := range info.GetActions() {
		if x.GetPreamble().GetName() == "NoAction" {
			continue // core.p4's, which p4c gives tables without a default action
		}
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	for _, x := range info.GetActionProfiles() {
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	for _, x := range info.GetCounters() {
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	for _, x := range info.GetDirectCounters() {
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	for _, x := range info.GetControllerPacketMetadata() {
		byID[x.GetPreamble().GetId()] = x.GetPreamble().GetName()
	}
	// @id(0x...) followed (after other annotations) by a declaration whose name we extract.
	re := regexp.MustCompile(`@id\((0x[0-9a-fA-F]+)\)\s*(?:@\w+\([^)]*\)\s*)*(?:action|table|counter\([^;]*\)|direct_counter\([^;]*\)|action_selector\([^;]*\)|header)\s+(\w+)`)
	matches := re.FindAllStringSubmatch(string(Source), -1)
	if len(matches) != len(byID) {
		t.Errorf("source has %d @id objects, P4Info has %d", len(matches), len(byID))
	}
	for _, m := range matches {
		id, _ := strconv.ParseUint(m[1], 0, 32)
		name, ok := byID[uint32(id)]
		if !ok {
			t.Errorf("@id(%s) %s is not in the P4Info", m[1], m[2])
			continue
		}
		short := m[2]
		short = strings.TrimSuffix(short, "_t") // controller headers are named after their header type minus _t
		if !strings.HasSuffix(name, short) {
			t.Errorf("@id(%s): source declares %s, P4Info names it %s", m[1], m[2], name)
		}
	}
}

func TestCookieIsStable(t *testing.T) {
	if Cookie() != Cookie() || Cookie() == 0 {
		t.Fatal("cookie must be a stable non-zero hash of the P4Info")
	}
}
