// Package p4 holds accelnet's forwarding pipeline (accelnet.p4, v1model) and
// its P4Info, and resolves the names the controller and fabricsim use into
// P4Runtime IDs. Nothing else in accelnet hard-codes a P4Runtime ID.
package p4

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"

	p4config "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/accelnet/accelnet/models"
)

// P4InfoText is accelnet.p4info.txt, the P4Info of accelnet.p4 in text format.
//
//go:embed accelnet.p4info.txt
var P4InfoText []byte

// Source is accelnet.p4.
//
//go:embed accelnet.p4
var Source []byte

// BMv2JSON is accelnet.json, p4c-bm2-ss's compiled program for BMv2's
// simple_switch (the device config simple_switch_grpc needs).
//
//go:embed accelnet.json
var BMv2JSON []byte

//go:generate go run ./gen

// Names the controller programs through. Each must exist in the P4Info with
// the bit widths the controller assumes; NewSchema checks that.
const (
	TableFlowPin       = "Ingress.flow_pin"
	TableIPv4LPM       = "Ingress.ipv4_lpm"
	TableQoSClassify   = "Ingress.qos_classify"
	TablePunt          = "Ingress.punt_table"
	TableFlowSample    = "Ingress.flow_sample"
	ActionSample       = "Ingress.sample"
	ParamOneIn         = "one_in"
	FieldIngressPort   = "ingress_port"
	DigestFlowSample   = "flow_sample_t"
	ActionSetEgress    = "Ingress.set_egress_port"
	ActionPinEgress    = "Ingress.pin_egress_port"
	ActionDrop         = "Ingress.drop"
	ActionNop          = "Ingress.nop"
	ActionSetTC        = "Ingress.set_traffic_class"
	ActionSendToCPU    = "Ingress.send_to_cpu"
	ProfileECMP        = "Ingress.ecmp_selector"
	CounterPortRx      = "Ingress.port_rx_counter"
	CounterPortTx      = "Egress.port_tx_counter"
	DirectCounterPin   = "Ingress.flow_pin_counter"
	FieldIPv4Src       = "ipv4_src"
	FieldIPv4Dst       = "ipv4_dst"
	FieldUDPSrcPort    = "udp_src_port"
	FieldDSCP          = "dscp"
	ParamPort          = "port"
	PortBits           = 9
	ControllerPacketIn = "packet_in"
	TableHashSeed      = "Ingress.hash_seed"
	ActionSetHashSeed  = "Ingress.set_hash_seed"
	ParamSeed          = "seed"
	TablePortMACs      = "Egress.port_macs"
	ActionRewriteMACs  = "Egress.rewrite_macs"
	ParamSrcMAC        = "src_mac"
	ParamDstMAC        = "dst_mac"
	FieldEgressPort    = "egress_port"
	FieldEtherType     = "ether_type"
)

// ErrSchema reports a P4Info that lacks something the controller needs.
var ErrSchema = errors.New("pipeline does not match what accelnet needs")

// Cookie identifies this pipeline version (P4Info and compiled program)
// in SetForwardingPipelineConfig, so a controller can tell whether a
// switch already runs it. It hashes both once: every dial compares it, and
// hashing their 89 KB each time would cost a k=48 takeover (2,880 dials)
// 0.4 s of CPU and a cold start 0.5 s.
var Cookie = sync.OnceValue(func() uint64 {
	h := fnv.New64a()
	h.Write(P4InfoText)
	h.Write(BMv2JSON)
	return h.Sum64()
})

// DeviceConfig is the target-specific part of the pipeline a switch of
// target needs: the BMv2 JSON for simple_switch_grpc, and for fabricsim
// too (it implements the same program and checks that it is this one).
func DeviceConfig(target models.Target) ([]byte, error) {
	switch target {
	case "", models.TargetFabricsim, models.TargetBMv2:
		return BMv2JSON, nil
	}
	return nil, fmt.Errorf("%w: no device config for target %q", ErrSchema, target)
}

// Load parses the embedded P4Info.
func Load() (*p4config.P4Info, error) {
	return Parse(P4InfoText)
}

// Parse reads a P4Info in text format. Fields newer than the P4Runtime
// release accelnet is built with (p4c writes initial_default_action, for
// one) are skipped, not refused: they carry nothing the controller uses.
func Parse(text []byte) (*p4config.P4Info, error) {
	info := &p4config.P4Info{}
	if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(text, info); err != nil {
		return nil, fmt.Errorf("parse P4Info: %w", err)
	}
	return info, nil
}

// Schema is a P4Info indexed by name and by ID.
type Schema struct {
	Info           *p4config.P4Info
	tablesByName   map[string]*p4config.Table
	tablesByID     map[uint32]*p4config.Table
	actionsByName  map[string]*p4config.Action
	actionsByID    map[uint32]*p4config.Action
	profilesByName map[string]*p4config.ActionProfile
	profilesByID   map[uint32]*p4config.ActionProfile
	countersByName map[string]*p4config.Counter
	digestsByName  map[string]*p4config.Digest
	digestsByID    map[uint32]*p4config.Digest
}

// NewSchema indexes info and checks that every name, ID and bit width the
// controller relies on is there.
func NewSchema(info *p4config.P4Info) (*Schema, error) {
	s := &Schema{
		Info:           info,
		tablesByName:   map[string]*p4config.Table{},
		tablesByID:     map[uint32]*p4config.Table{},
		actionsByName:  map[string]*p4config.Action{},
		actionsByID:    map[uint32]*p4config.Action{},
		profilesByName: map[string]*p4config.ActionProfile{},
		profilesByID:   map[uint32]*p4config.ActionProfile{},
		countersByName: map[string]*p4config.Counter{},
		digestsByName:  map[string]*p4config.Digest{},
		digestsByID:    map[uint32]*p4config.Digest{},
	}
	for _, t := range info.GetTables() {
		s.tablesByName[t.GetPreamble().GetName()] = t
		s.tablesByID[t.GetPreamble().GetId()] = t
	}
	for _, a := range info.GetActions() {
		s.actionsByName[a.GetPreamble().GetName()] = a
		s.actionsByID[a.GetPreamble().GetId()] = a
	}
	for _, p := range info.GetActionProfiles() {
		s.profilesByName[p.GetPreamble().GetName()] = p
		s.profilesByID[p.GetPreamble().GetId()] = p
	}
	for _, c := range info.GetCounters() {
		s.countersByName[c.GetPreamble().GetName()] = c
	}
	for _, d := range info.GetDigests() {
		s.digestsByName[d.GetPreamble().GetName()] = d
		s.digestsByID[d.GetPreamble().GetId()] = d
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadSchema is NewSchema of the embedded P4Info.
func LoadSchema() (*Schema, error) {
	info, err := Load()
	if err != nil {
		return nil, err
	}
	return NewSchema(info)
}

func (s *Schema) check() error {
	type field struct {
		table, name string
		bits        int32
		kind        p4config.MatchField_MatchType
	}
	for _, f := range []field{
		{TableFlowPin, FieldIPv4Src, 32, p4config.MatchField_EXACT},
		{TableFlowPin, FieldIPv4Dst, 32, p4config.MatchField_EXACT},
		{TableFlowPin, FieldUDPSrcPort, 16, p4config.MatchField_EXACT},
		{TableIPv4LPM, FieldIPv4Dst, 32, p4config.MatchField_LPM},
		{TableQoSClassify, FieldDSCP, 6, p4config.MatchField_EXACT},
		{TableFlowSample, FieldIngressPort, PortBits, p4config.MatchField_EXACT},
		{TablePortMACs, FieldEgressPort, PortBits, p4config.MatchField_EXACT},
	} {
		mf, err := s.MatchField(f.table, f.name)
		if err != nil {
			return err
		}
		if mf.GetBitwidth() != f.bits || mf.GetMatchType() != f.kind {
			return fmt.Errorf("%w: %s.%s is %d-bit %s, want %d-bit %s", ErrSchema, f.table, f.name,
				mf.GetBitwidth(), mf.GetMatchType(), f.bits, f.kind)
		}
	}
	for _, a := range []struct{ action, table string }{
		{ActionSetEgress, TableIPv4LPM}, {ActionDrop, TableIPv4LPM},
		{ActionPinEgress, TableFlowPin}, {ActionSetTC, TableQoSClassify}, {ActionSendToCPU, TablePunt},
		{ActionSample, TableFlowSample}, {ActionSetHashSeed, TableHashSeed}, {ActionRewriteMACs, TablePortMACs},
	} {
		if err := s.ActionAllowed(a.table, a.action); err != nil {
			return err
		}
	}
	for _, a := range []string{ActionSetEgress, ActionPinEgress} {
		p, err := s.Param(a, ParamPort)
		if err != nil {
			return err
		}
		if p.GetBitwidth() != PortBits {
			return fmt.Errorf("%w: %s(%s) is %d bits, want %d", ErrSchema, a, ParamPort, p.GetBitwidth(), PortBits)
		}
	}
	prof, err := s.Profile(ProfileECMP)
	if err != nil {
		return err
	}
	lpm, _ := s.Table(TableIPv4LPM)
	if !prof.GetWithSelector() || lpm.GetImplementationId() != prof.GetPreamble().GetId() {
		return fmt.Errorf("%w: %s must be implemented by action selector %s", ErrSchema, TableIPv4LPM, ProfileECMP)
	}
	for _, c := range []string{CounterPortRx, CounterPortTx} {
		if _, ok := s.countersByName[c]; !ok {
			return fmt.Errorf("%w: no counter %s", ErrSchema, c)
		}
	}
	for _, p := range []struct {
		action, param string
		bits          int32
	}{{ActionSample, ParamOneIn, 32}, {ActionSetHashSeed, ParamSeed, 32}, {ActionRewriteMACs, ParamSrcMAC, 48}, {ActionRewriteMACs, ParamDstMAC, 48}} {
		prm, err := s.Param(p.action, p.param)
		if err != nil {
			return err
		}
		if prm.GetBitwidth() != p.bits {
			return fmt.Errorf("%w: %s(%s) is %d bits, want %d", ErrSchema, p.action, p.param, prm.GetBitwidth(), p.bits)
		}
	}
	if t, _ := s.Table(TableHashSeed); len(t.GetMatchFields()) != 0 {
		return fmt.Errorf("%w: %s must have no key (its default entry is the seed)", ErrSchema, TableHashSeed)
	}
	return s.checkDigest()
}

// FlowSampleFields are the members of the flow_sample_t digest, in order,
// with their bit widths.
var FlowSampleFields = []struct {
	Name string
	Bits int32
}{{"ingress_port", PortBits}, {"ipv4_src", 32}, {"ipv4_dst", 32}, {"udp_src_port", 16}, {"ip_len", 16}}

func (s *Schema) checkDigest() error {
	d, ok := s.digestsByName[DigestFlowSample]
	if !ok {
		return fmt.Errorf("%w: no digest %s", ErrSchema, DigestFlowSample)
	}
	st, ok := s.Info.GetTypeInfo().GetStructs()[d.GetTypeSpec().GetStruct().GetName()]
	if !ok || len(st.GetMembers()) != len(FlowSampleFields) {
		return fmt.Errorf("%w: digest %s is not the struct of %d members accelnet reads", ErrSchema, DigestFlowSample, len(FlowSampleFields))
	}
	for i, m := range st.GetMembers() {
		f := FlowSampleFields[i]
		if m.GetName() != f.Name || m.GetTypeSpec().GetBitstring().GetBit().GetBitwidth() != f.Bits {
			return fmt.Errorf("%w: digest %s member %d is %s, want %s bit<%d>", ErrSchema, DigestFlowSample, i, m.GetName(), f.Name, f.Bits)
		}
	}
	return nil
}

// DigestByID looks a digest up by ID.
func (s *Schema) DigestByID(id uint32) (*p4config.Digest, bool) {
	d, ok := s.digestsByID[id]
	return d, ok
}

// DigestID returns a digest's ID, or 0.
func (s *Schema) DigestID(name string) uint32 {
	return s.digestsByName[name].GetPreamble().GetId()
}

// Table looks a table up by name.
func (s *Schema) Table(name string) (*p4config.Table, error) {
	t, ok := s.tablesByName[name]
	if !ok {
		return nil, fmt.Errorf("%w: no table %s", ErrSchema, name)
	}
	return t, nil
}

// TableByID looks a table up by ID.
func (s *Schema) TableByID(id uint32) (*p4config.Table, bool) {
	t, ok := s.tablesByID[id]
	return t, ok
}

// TableID returns a table's ID, or 0 if there is none of that name.
func (s *Schema) TableID(name string) uint32 {
	return s.tablesByName[name].GetPreamble().GetId()
}

// MatchField looks a table's match field up by name.
func (s *Schema) MatchField(table, name string) (*p4config.MatchField, error) {
	t, err := s.Table(table)
	if err != nil {
		return nil, err
	}
	for _, mf := range t.GetMatchFields() {
		if mf.GetName() == name {
			return mf, nil
		}
	}
	return nil, fmt.Errorf("%w: table %s has no match field %s", ErrSchema, table, name)
}

// MatchFieldID returns the ID of a table's match field, or 0.
func (s *Schema) MatchFieldID(table, name string) uint32 {
	mf, err := s.MatchField(table, name)
	if err != nil {
		return 0
	}
	return mf.GetId()
}

// Action looks an action up by name.
func (s *Schema) Action(name string) (*p4config.Action, error) {
	a, ok := s.actionsByName[name]
	if !ok {
		return nil, fmt.Errorf("%w: no action %s", ErrSchema, name)
	}
	return a, nil
}

// ActionByID looks an action up by ID.
func (s *Schema) ActionByID(id uint32) (*p4config.Action, bool) {
	a, ok := s.actionsByID[id]
	return a, ok
}

// ControllerMetadataID returns the ID of a controller header's field
// (packet_in/packet_out metadata) by name, or 0.
func (s *Schema) ControllerMetadataID(header, field string) uint32 {
	for _, h := range s.Info.GetControllerPacketMetadata() {
		if h.GetPreamble().GetName() != header {
			continue
		}
		for _, m := range h.GetMetadata() {
			if m.GetName() == field {
				return m.GetId()
			}
		}
	}
	return 0
}

// ActionName returns an action's name by ID, or "".
func (s *Schema) ActionName(id uint32) string {
	return s.actionsByID[id].GetPreamble().GetName()
}

// ActionID returns an action's ID, or 0.
func (s *Schema) ActionID(name string) uint32 {
	return s.actionsByName[name].GetPreamble().GetId()
}

// Param looks an action parameter up by name.
func (s *Schema) Param(action, name string) (*p4config.Action_Param, error) {
	a, err := s.Action(action)
	if err != nil {
		return nil, err
	}
	for _, p := range a.GetParams() {
		if p.GetName() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: action %s has no parameter %s", ErrSchema, action, name)
}

// ActionAllowed checks that a table lists an action for its entries.
func (s *Schema) ActionAllowed(table, action string) error {
	t, err := s.Table(table)
	if err != nil {
		return err
	}
	a, err := s.Action(action)
	if err != nil {
		return err
	}
	for _, ref := range t.GetActionRefs() {
		if ref.GetId() == a.GetPreamble().GetId() && ref.GetScope() != p4config.ActionRef_DEFAULT_ONLY {
			return nil
		}
	}
	return fmt.Errorf("%w: table %s does not allow action %s for entries", ErrSchema, table, action)
}

// Profile looks an action profile up by name.
func (s *Schema) Profile(name string) (*p4config.ActionProfile, error) {
	p, ok := s.profilesByName[name]
	if !ok {
		return nil, fmt.Errorf("%w: no action profile %s", ErrSchema, name)
	}
	return p, nil
}

// ProfileByID looks an action profile up by ID.
func (s *Schema) ProfileByID(id uint32) (*p4config.ActionProfile, bool) {
	p, ok := s.profilesByID[id]
	return p, ok
}

// ProfileID returns an action profile's ID, or 0.
func (s *Schema) ProfileID(name string) uint32 {
	return s.profilesByName[name].GetPreamble().GetId()
}

// CounterID returns an indirect counter's ID, or 0.
func (s *Schema) CounterID(name string) uint32 {
	return s.countersByName[name].GetPreamble().GetId()
}

// CounterSize is how many cells the indexed counter id has (0: none).
func (s *Schema) CounterSize(id uint32) int64 {
	for _, c := range s.countersByName {
		if c.GetPreamble().GetId() == id {
			return c.GetSize()
		}
	}
	return 0
}

// Limits are the table and group sizes pathcalc must respect.
type Limits struct {
	RouteEntries   int // ipv4_lpm size
	FlowPinEntries int // flow_pin size
	SelectorSize   int // members the action selector holds
	MaxGroupSize   int // members per group (0: no stated limit)
}

// Limits reads the sizes the P4Info declares.
func (s *Schema) Limits() Limits {
	lpm, _ := s.Table(TableIPv4LPM)
	pin, _ := s.Table(TableFlowPin)
	prof, _ := s.Profile(ProfileECMP)
	return Limits{
		RouteEntries:   int(lpm.GetSize()),
		FlowPinEntries: int(pin.GetSize()),
		SelectorSize:   int(prof.GetSize()),
		MaxGroupSize:   int(prof.GetMaxGroupSize()),
	}
}

// Uint reads a big-endian P4Runtime bytestring as a number (the low 64
// bits of a longer one).
func Uint(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// Addr reads a 32-bit P4Runtime bytestring as an IPv4 address.
func Addr(b []byte) netip.Addr {
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], uint32(Uint(b)))
	return netip.AddrFrom4(a)
}
