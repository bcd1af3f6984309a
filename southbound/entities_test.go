package southbound

import (
	"net/netip"
	"testing"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestEntitiesOnTheWire: what the driver writes is named by the P4Info's
// IDs, match values in canonical form (no leading zero bytes) and an LPM
// value with no bits past its prefix, and decodes back to what was
// written; entities to delete carry no action.
func TestEntitiesOnTheWire(t *testing.T) {
	d, schema := testDriver(t)
	st := models.ForwardingState{
		Members: []models.Member{{ID: 3, Port: 3}},
		Groups:  []models.Group{{ID: 7, Members: []models.GroupMember{{MemberID: 3, Weight: 2}}}},
		Routes: []models.Route{
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), MemberID: 3},
			{Prefix: netip.MustParsePrefix("10.1.2.0/24"), GroupID: 7},
		},
		FlowPins: []models.FlowPin{{Key: models.FlowKey{Src: netip.MustParseAddr("0.0.1.2"), Dst: netip.MustParseAddr("10.1.2.3"), SrcPort: 5}, Port: 3}},
	}
	ents := d.entities(st, false)
	if len(ents) != 5 {
		t.Fatalf("%d entities for 5 entries", len(ents))
	}
	lpm := ents[2].GetTableEntry()
	if lpm.GetTableId() != schema.TableID(p4.TableIPv4LPM) || lpm.GetMatch()[0].GetFieldId() != schema.MatchFieldID(p4.TableIPv4LPM, p4.FieldIPv4Dst) {
		t.Errorf("route named by table %d field %d", lpm.GetTableId(), lpm.GetMatch()[0].GetFieldId())
	}
	if v := lpm.GetMatch()[0].GetLpm().GetValue(); len(v) != 1 || v[0] != 0 {
		t.Errorf("0.0.0.0/0 written as %x, want 00", v)
	}
	pin := ents[4].GetTableEntry()
	want := map[uint32]string{
		schema.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Src):    "\x01\x02",
		schema.MatchFieldID(p4.TableFlowPin, p4.FieldIPv4Dst):    "\x0a\x01\x02\x03",
		schema.MatchFieldID(p4.TableFlowPin, p4.FieldUDPSrcPort): "\x05",
	}
	for _, m := range pin.GetMatch() {
		if got := string(m.GetExact().GetValue()); got != want[m.GetFieldId()] {
			t.Errorf("flow pin field %d written as %x, want %x", m.GetFieldId(), got, want[m.GetFieldId()])
		}
	}
	if a := pin.GetAction().GetAction(); a.GetActionId() != schema.ActionID(p4.ActionPinEgress) || len(a.GetParams()) != 1 {
		t.Errorf("flow pin's action %v", a)
	}
	var back models.ForwardingState
	for _, e := range ents {
		d.decode(e, &back)
	}
	if !back.Canonical().Equal(st.Canonical()) {
		t.Errorf("decoded %+v, wrote %+v", back, st)
	}
	for _, e := range d.entities(st, true) {
		if e.GetTableEntry().GetAction() != nil || e.GetActionProfileMember().GetAction() != nil {
			t.Errorf("an entity to delete carries an action: %v", e)
		}
	}
}

// testDriver is a driver of the embedded schema, connected to nothing:
// for what it builds and decodes.
func testDriver(tb testing.TB) (*P4RT, *p4.Schema) {
	tb.Helper()
	schema, err := p4.LoadSchema()
	if err != nil {
		tb.Fatal(err)
	}
	return NewP4RT(schema, P4RTOptions{}), schema
}
