package fabricsim

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"

	p4config "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound/p4"
)

// tableStore holds one switch's P4Runtime entities, validated against the
// P4Info the way a P4Runtime server must: unknown IDs, bad match kinds,
// values wider than their fields, unmasked LPM values, actions a table does
// not allow, dangling member/group references and full tables are refused
// with the status code the P4Runtime specification gives.
type tableStore struct {
	schema  *p4.Schema
	entries map[uint32]map[string]*p4v1.TableEntry // table ID → match key → entry
	members map[uint32]map[uint32]*p4v1.ActionProfileMember
	groups  map[uint32]map[uint32]*p4v1.ActionProfileGroup
	// pins is the flow-pin table decoded (key → egress port), kept as
	// entries are written so the dataplane need not decode it again. It
	// is guarded by pinsMu too, which the dataplane's lookups take alone
	// (pin): a Write or Read of thousands of entries holds the switch's
	// mu for milliseconds, the dataplane's lock waiting behind it.
	pins   map[models.FlowKey]uint32
	pinsMu sync.RWMutex
	// digests are the configured digests (DigestEntry) by ID.
	digests map[uint32]*p4v1.DigestEntry
	// sel models each action selector as BMv2 keeps it (member handles,
	// weights as repeated handles), by action profile ID.
	sel map[uint32]*selector
	// defaults are tables' default entries the controller set (others
	// have the program's); hashSeed is the hash_seed table's.
	defaults map[uint32]*p4v1.TableEntry
	hashSeed uint32
	// limit, if set, is a table's capacity by name when the switch has
	// less room than the P4Info says (0: as the P4Info says).
	limit func(table string) int
}

func newTableStore(schema *p4.Schema, limit func(string) int) *tableStore {
	return &tableStore{
		schema:   schema,
		limit:    limit,
		entries:  map[uint32]map[string]*p4v1.TableEntry{},
		members:  map[uint32]map[uint32]*p4v1.ActionProfileMember{},
		groups:   map[uint32]map[uint32]*p4v1.ActionProfileGroup{},
		pins:     map[models.FlowKey]uint32{},
		digests:  map[uint32]*p4v1.DigestEntry{},
		sel:      map[uint32]*selector{},
		defaults: map[uint32]*p4v1.TableEntry{},
	}
}

// selectorOf is an action profile's selector model.
func (s *tableStore) selectorOf(pid uint32) *selector {
	sel := s.sel[pid]
	if sel == nil {
		sel = newSelector()
		s.sel[pid] = sel
	}
	return sel
}

// defaultEntry is a table's default entry: the one the controller set,
// else the program's (hash_seed's sets seed 0; a const default; else
// NoAction).
func (s *tableStore) defaultEntry(tid uint32) *p4v1.TableEntry {
	if e, ok := s.defaults[tid]; ok {
		return proto.Clone(e).(*p4v1.TableEntry)
	}
	out := &p4v1.TableEntry{TableId: tid, IsDefaultAction: true}
	t, _ := s.schema.TableByID(tid)
	switch {
	case tid == s.schema.TableID(p4.TableHashSeed):
		prm, _ := s.schema.Param(p4.ActionSetHashSeed, p4.ParamSeed)
		out.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{
			ActionId: s.schema.ActionID(p4.ActionSetHashSeed), Params: []*p4v1.Action_Param{{ParamId: prm.GetId(), Value: []byte{0}}}}}}
	case t.GetConstDefaultActionId() != 0:
		out.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: t.GetConstDefaultActionId()}}}
	default:
		if id := s.schema.ActionID("NoAction"); id != 0 {
			out.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: id}}}
		}
	}
	return out
}

// writeDefault changes a table's default entry, as PI does on BMv2: only
// MODIFY, not of a const default, not of a table an action selector
// implements (BMv2 has no default action there), with an action the
// table allows and no match.
func (s *tableStore) writeDefault(typ p4v1.Update_Type, e *p4v1.TableEntry) error {
	t, ok := s.schema.TableByID(e.GetTableId())
	if !ok {
		return errf(codes.InvalidArgument, "invalid P4 id: unknown table id %d", e.GetTableId())
	}
	name := t.GetPreamble().GetName()
	switch {
	case typ != p4v1.Update_MODIFY:
		return errf(codes.InvalidArgument, "table %s: the default entry can only be modified", name)
	case len(e.GetMatch()) > 0 || e.GetPriority() != 0:
		return errf(codes.InvalidArgument, "table %s: a default entry has no match and no priority", name)
	case t.GetConstDefaultActionId() != 0:
		return errf(codes.PermissionDenied, "table %s has a const default action", name)
	case t.GetImplementationId() != 0:
		return errf(codes.Unimplemented, "table %s: no default action with an action profile", name)
	}
	a := e.GetAction().GetAction()
	if a == nil {
		return errf(codes.InvalidArgument, "table %s: the default entry needs a direct action", name)
	}
	info, ok := s.schema.ActionByID(a.GetActionId())
	if !ok {
		return errf(codes.InvalidArgument, "invalid P4 id: unknown action id %d", a.GetActionId())
	}
	if !slices.ContainsFunc(t.GetActionRefs(), func(r *p4config.ActionRef) bool {
		return r.GetId() == a.GetActionId() && r.GetScope() != p4config.ActionRef_TABLE_ONLY
	}) {
		return errf(codes.InvalidArgument, "table %s does not allow %s as its default action", name, info.GetPreamble().GetName())
	}
	norm := proto.Clone(e).(*p4v1.TableEntry)
	params := map[uint32]*p4config.Action_Param{}
	for _, p := range info.GetParams() {
		params[p.GetId()] = p
	}
	if len(norm.GetAction().GetAction().GetParams()) != len(params) {
		return errf(codes.InvalidArgument, "action %s: want %d parameters", info.GetPreamble().GetName(), len(params))
	}
	for _, p := range norm.GetAction().GetAction().GetParams() {
		decl, ok := params[p.GetParamId()]
		if !ok {
			return errf(codes.InvalidArgument, "action %s: unknown parameter id %d", info.GetPreamble().GetName(), p.GetParamId())
		}
		v, err := canonical(p.GetValue(), decl.GetBitwidth())
		if err != nil {
			return errf(codes.InvalidArgument, "action %s(%s): %v", info.GetPreamble().GetName(), decl.GetName(), err)
		}
		p.Value = v
	}
	norm.Metadata = nil
	s.defaults[norm.GetTableId()] = norm
	if norm.GetTableId() == s.schema.TableID(p4.TableHashSeed) {
		prm, _ := s.schema.Param(p4.ActionSetHashSeed, p4.ParamSeed)
		s.hashSeed = uint32(paramValue(norm.GetAction().GetAction(), prm.GetId()))
	}
	return nil
}

// p4err is an error carrying the gRPC code a P4Runtime server answers with.
type p4err struct {
	code codes.Code
	msg  string
}

func (e *p4err) Error() string { return e.code.String() + ": " + e.msg }

func errf(c codes.Code, format string, args ...any) *p4err {
	return &p4err{code: c, msg: fmt.Sprintf(format, args...)}
}

// canonical strips leading zero bytes (P4Runtime's canonical bytestring) and
// checks the value fits in bits.
func canonical(v []byte, bits int32) ([]byte, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("empty bytestring")
	}
	i := 0
	for i < len(v)-1 && v[i] == 0 {
		i++
	}
	v = v[i:]
	if new(big.Int).SetBytes(v).BitLen() > int(bits) {
		return nil, fmt.Errorf("value 0x%x does not fit in %d bits", v, bits)
	}
	return slices.Clone(v), nil
}

// normalizeEntry validates a table entry and makes it canonical in place
// (bytestrings, match fields sorted by ID), returning it and its match
// key. It changes e: callers hand over entries they own (a request's,
// decoded for this call); copying each would be two fifths of what a
// Write costs the emulator.
func (s *tableStore) normalizeEntry(e *p4v1.TableEntry, forDelete bool) (*p4v1.TableEntry, string, error) {
	t, ok := s.schema.TableByID(e.GetTableId())
	if !ok {
		return nil, "", errf(codes.InvalidArgument, "invalid P4 id: unknown table id %d", e.GetTableId())
	}
	if e.GetIsDefaultAction() {
		return nil, "", errf(codes.InvalidArgument, "table %s: a default entry is not an entry", t.GetPreamble().GetName())
	}
	if len(t.GetMatchFields()) == 0 && !forDelete {
		// As BMv2 answers (UNKNOWN): a keyless table holds its default
		// entry and nothing else.
		return nil, "", errf(codes.Unknown, "table %s has no key: it holds only its default entry", t.GetPreamble().GetName())
	}
	field := func(id uint32) (*p4config.MatchField, bool) { // a table has a handful
		for _, mf := range t.GetMatchFields() {
			if mf.GetId() == id {
				return mf, true
			}
		}
		return nil, false
	}
	var seen []uint32
	needsPriority := false
	for _, mf := range t.GetMatchFields() {
		switch mf.GetMatchType() {
		case p4config.MatchField_TERNARY, p4config.MatchField_RANGE, p4config.MatchField_OPTIONAL:
			needsPriority = true
		}
	}
	for _, m := range e.Match {
		mf, ok := field(m.GetFieldId())
		if !ok {
			return nil, "", errf(codes.InvalidArgument, "table %s: unknown match field id %d", t.GetPreamble().GetName(), m.GetFieldId())
		}
		if slices.Contains(seen, m.GetFieldId()) {
			return nil, "", errf(codes.InvalidArgument, "table %s: match field %s given twice", t.GetPreamble().GetName(), mf.GetName())
		}
		seen = append(seen, m.GetFieldId())
		name := t.GetPreamble().GetName() + "." + mf.GetName()
		switch mf.GetMatchType() {
		case p4config.MatchField_EXACT:
			x := m.GetExact()
			if x == nil {
				return nil, "", errf(codes.InvalidArgument, "%s: want an exact match", name)
			}
			v, err := canonical(x.GetValue(), mf.GetBitwidth())
			if err != nil {
				return nil, "", errf(codes.InvalidArgument, "%s: %v", name, err)
			}
			x.Value = v
		case p4config.MatchField_LPM:
			x := m.GetLpm()
			if x == nil {
				return nil, "", errf(codes.InvalidArgument, "%s: want an LPM match", name)
			}
			v, err := canonical(x.GetValue(), mf.GetBitwidth())
			if err != nil {
				return nil, "", errf(codes.InvalidArgument, "%s: %v", name, err)
			}
			if x.GetPrefixLen() < 1 || x.GetPrefixLen() > mf.GetBitwidth() {
				return nil, "", errf(codes.InvalidArgument, "%s: prefix length %d out of range 1..%d (omit the field for a wildcard)", name, x.GetPrefixLen(), mf.GetBitwidth())
			}
			host := new(big.Int).Lsh(big.NewInt(1), uint(mf.GetBitwidth()-x.GetPrefixLen()))
			host.Sub(host, big.NewInt(1))
			if new(big.Int).And(new(big.Int).SetBytes(v), host).Sign() != 0 {
				return nil, "", errf(codes.InvalidArgument, "%s: value 0x%x has bits set beyond prefix length %d", name, v, x.GetPrefixLen())
			}
			x.Value = v
		default:
			return nil, "", errf(codes.Unimplemented, "%s: match type %s", name, mf.GetMatchType())
		}
	}
	for _, mf := range t.GetMatchFields() {
		if mf.GetMatchType() == p4config.MatchField_EXACT && !slices.Contains(seen, mf.GetId()) {
			return nil, "", errf(codes.InvalidArgument, "table %s: exact field %s is missing", t.GetPreamble().GetName(), mf.GetName())
		}
	}
	if !needsPriority && e.GetPriority() != 0 {
		return nil, "", errf(codes.InvalidArgument, "table %s: priority must be 0 for a table without ternary, range or optional fields", t.GetPreamble().GetName())
	}
	slices.SortFunc(e.Match, func(a, b *p4v1.FieldMatch) int { return int(a.GetFieldId()) - int(b.GetFieldId()) })
	if !forDelete {
		if err := s.checkTableAction(t, e.GetAction()); err != nil {
			return nil, "", err
		}
	}
	return e, matchKey(e), nil
}

func matchKey(e *p4v1.TableEntry) string {
	b := make([]byte, 0, 64)
	for _, m := range e.Match {
		b = strconv.AppendUint(b, uint64(m.GetFieldId()), 10)
		b = append(b, '=')
		switch {
		case m.GetExact() != nil:
			b = hex.AppendEncode(b, m.GetExact().GetValue())
		case m.GetLpm() != nil:
			b = hex.AppendEncode(b, m.GetLpm().GetValue())
			b = append(b, '/')
			b = strconv.AppendInt(b, int64(m.GetLpm().GetPrefixLen()), 10)
		}
		b = append(b, ';')
	}
	return string(b)
}

func (s *tableStore) checkTableAction(t *p4config.Table, a *p4v1.TableAction) error {
	name := t.GetPreamble().GetName()
	if a == nil {
		return errf(codes.InvalidArgument, "table %s: entry has no action", name)
	}
	if prof := t.GetImplementationId(); prof != 0 {
		switch x := a.GetType().(type) {
		// As PI answers: a reference to a member or group that does not
		// exist is an invalid argument; one to a group with no members is
		// refused by BMv2 (UNKNOWN, "error when adding match entry").
		case *p4v1.TableAction_ActionProfileMemberId:
			if _, ok := s.members[prof][x.ActionProfileMemberId]; !ok {
				return errf(codes.InvalidArgument, "table %s: invalid member id %d", name, x.ActionProfileMemberId)
			}
		case *p4v1.TableAction_ActionProfileGroupId:
			g, ok := s.groups[prof][x.ActionProfileGroupId]
			if !ok {
				return errf(codes.InvalidArgument, "table %s: invalid group id %d", name, x.ActionProfileGroupId)
			}
			if len(g.GetMembers()) == 0 {
				return errf(codes.Unknown, "table %s: error when adding match entry to target: group %d is empty", name, x.ActionProfileGroupId)
			}
		case *p4v1.TableAction_ActionProfileActionSet:
			return errf(codes.Unimplemented, "table %s: one-shot action sets are not supported", name)
		default:
			return errf(codes.InvalidArgument, "table %s is implemented by an action profile: want a member or group id", name)
		}
		return nil
	}
	direct := a.GetAction()
	if direct == nil {
		return errf(codes.InvalidArgument, "table %s has no action profile: want a direct action", name)
	}
	return s.checkAction(t, direct)
}

// checkAction checks that t allows the action for entries and that its
// parameters are exactly the declared ones, each fitting its width.
func (s *tableStore) checkAction(t *p4config.Table, a *p4v1.Action) error {
	info, ok := s.schema.ActionByID(a.GetActionId())
	if !ok {
		return errf(codes.InvalidArgument, "invalid P4 id: unknown action id %d", a.GetActionId())
	}
	listed, entries := false, false
	for _, ref := range t.GetActionRefs() {
		if ref.GetId() == a.GetActionId() {
			listed = true
			entries = entries || ref.GetScope() != p4config.ActionRef_DEFAULT_ONLY
		}
	}
	switch {
	case !listed:
		return errf(codes.InvalidArgument, "table %s does not allow action %s", t.GetPreamble().GetName(), info.GetPreamble().GetName())
	case !entries: // as PI answers
		return errf(codes.PermissionDenied, "table %s: action %s is for its default entry only", t.GetPreamble().GetName(), info.GetPreamble().GetName())
	}
	params := map[uint32]*p4config.Action_Param{}
	for _, p := range info.GetParams() {
		params[p.GetId()] = p
	}
	seen := map[uint32]bool{}
	for _, p := range a.GetParams() {
		decl, ok := params[p.GetParamId()]
		if !ok {
			return errf(codes.InvalidArgument, "action %s: unknown parameter id %d", info.GetPreamble().GetName(), p.GetParamId())
		}
		if seen[p.GetParamId()] {
			return errf(codes.InvalidArgument, "action %s: parameter %s given twice", info.GetPreamble().GetName(), decl.GetName())
		}
		seen[p.GetParamId()] = true
		v, err := canonical(p.GetValue(), decl.GetBitwidth())
		if err != nil {
			return errf(codes.InvalidArgument, "action %s(%s): %v", info.GetPreamble().GetName(), decl.GetName(), err)
		}
		p.Value = v
	}
	if len(seen) != len(params) {
		return errf(codes.InvalidArgument, "action %s: want %d parameters, got %d", info.GetPreamble().GetName(), len(params), len(seen))
	}
	return nil
}

func (s *tableStore) tableSize(id uint32) int {
	t, _ := s.schema.TableByID(id)
	size := int(t.GetSize())
	if s.limit != nil {
		if l := s.limit(t.GetPreamble().GetName()); l > 0 && (size == 0 || l < size) {
			size = l
		}
	}
	return size
}

func (s *tableStore) writeTableEntry(typ p4v1.Update_Type, e *p4v1.TableEntry) error {
	if e.GetIsDefaultAction() {
		return s.writeDefault(typ, e)
	}
	norm, key, err := s.normalizeEntry(e, typ == p4v1.Update_DELETE)
	if err != nil {
		return err
	}
	tbl := s.entries[norm.TableId]
	if tbl == nil {
		tbl = map[string]*p4v1.TableEntry{}
		s.entries[norm.TableId] = tbl
	}
	_, exists := tbl[key]
	switch typ {
	case p4v1.Update_INSERT:
		if exists {
			return errf(codes.AlreadyExists, "table entry %s already exists", key)
		}
		if size := s.tableSize(norm.TableId); size > 0 && len(tbl) >= size {
			return errf(codes.ResourceExhausted, "table %d is full (%d entries)", norm.TableId, size)
		}
		tbl[key] = norm
	case p4v1.Update_MODIFY:
		if !exists {
			return errf(codes.NotFound, "table entry %s does not exist", key)
		}
		tbl[key] = norm
	case p4v1.Update_DELETE:
		if !exists {
			return errf(codes.NotFound, "table entry %s does not exist", key)
		}
		delete(tbl, key)
	default:
		return errf(codes.InvalidArgument, "update type %s", typ)
	}
	if norm.TableId == s.schema.TableID(p4.TableFlowPin) {
		k := flowKey(s.schema, norm)
		if typ == p4v1.Update_DELETE {
			s.pinsMu.Lock()
			delete(s.pins, k)
			s.pinsMu.Unlock()
		} else {
			portParam, _ := s.schema.Param(p4.ActionPinEgress, p4.ParamPort)
			port := uint32(paramValue(norm.GetAction().GetAction(), portParam.GetId()))
			s.pinsMu.Lock()
			s.pins[k] = port
			s.pinsMu.Unlock()
		}
	}
	return nil
}

// pin returns the port the flow-pin table sends the flow out of. It takes
// pinsMu alone: callers may hold the fabric's mu, or the switch's.
func (s *tableStore) pin(k models.FlowKey) (uint32, bool) {
	s.pinsMu.RLock()
	defer s.pinsMu.RUnlock()
	port, ok := s.pins[k]
	return port, ok
}

func (s *tableStore) profile(id uint32) (*p4config.ActionProfile, error) {
	prof, ok := s.schema.ProfileByID(id)
	if !ok {
		return nil, errf(codes.InvalidArgument, "invalid P4 id: unknown action profile id %d", id)
	}
	return prof, nil
}

func (s *tableStore) writeMember(typ p4v1.Update_Type, m *p4v1.ActionProfileMember) error {
	prof, err := s.profile(m.GetActionProfileId())
	if err != nil {
		return err
	}
	pid := m.GetActionProfileId()
	m = proto.Clone(m).(*p4v1.ActionProfileMember)
	if m.GetMemberId() == 0 && typ != p4v1.Update_DELETE {
		return errf(codes.InvalidArgument, "member id 0 is reserved")
	}
	if typ != p4v1.Update_DELETE {
		if m.GetAction() == nil {
			return errf(codes.InvalidArgument, "member %d has no action", m.GetMemberId())
		}
		for _, tid := range prof.GetTableIds() {
			t, _ := s.schema.TableByID(tid)
			if err := s.checkAction(t, m.GetAction()); err != nil {
				return err
			}
		}
	}
	mem := s.members[pid]
	if mem == nil {
		mem = map[uint32]*p4v1.ActionProfileMember{}
		s.members[pid] = mem
	}
	_, exists := mem[m.GetMemberId()]
	switch typ {
	case p4v1.Update_INSERT:
		if exists {
			return errf(codes.AlreadyExists, "member %d already exists", m.GetMemberId())
		}
		if size := int(prof.GetSize()); size > 0 && len(mem) >= size {
			return errf(codes.ResourceExhausted, "action profile %s is full (%d members)", prof.GetPreamble().GetName(), size)
		}
		mem[m.GetMemberId()] = m
		s.selectorOf(pid).addMember(m.GetMemberId())
	case p4v1.Update_MODIFY:
		if !exists {
			return errf(codes.NotFound, "member %d does not exist", m.GetMemberId())
		}
		mem[m.GetMemberId()] = m
	case p4v1.Update_DELETE:
		if !exists {
			return errf(codes.NotFound, "member %d does not exist", m.GetMemberId())
		}
		if by := s.memberUser(pid, m.GetMemberId()); by != "" {
			return errf(codes.Unknown, "error when deleting member on target: member %d is still used by %s", m.GetMemberId(), by)
		}
		delete(mem, m.GetMemberId())
		s.selectorOf(pid).deleteMember(m.GetMemberId())
	default:
		return errf(codes.InvalidArgument, "update type %s", typ)
	}
	return nil
}

func (s *tableStore) memberUser(pid, id uint32) string {
	for gid, g := range s.groups[pid] {
		for _, gm := range g.GetMembers() {
			if gm.GetMemberId() == id {
				return fmt.Sprintf("group %d", gid)
			}
		}
	}
	for _, tid := range s.profileTables(pid) {
		for key, e := range s.entries[tid] {
			if e.GetAction().GetActionProfileMemberId() == id {
				return "table entry " + key
			}
		}
	}
	return ""
}

func (s *tableStore) profileTables(pid uint32) []uint32 {
	prof, _ := s.schema.ProfileByID(pid)
	return prof.GetTableIds()
}

func (s *tableStore) writeGroup(typ p4v1.Update_Type, g *p4v1.ActionProfileGroup) error {
	prof, err := s.profile(g.GetActionProfileId())
	if err != nil {
		return err
	}
	pid := g.GetActionProfileId()
	g = proto.Clone(g).(*p4v1.ActionProfileGroup)
	if g.GetGroupId() == 0 && typ != p4v1.Update_DELETE {
		return errf(codes.InvalidArgument, "0 is not a valid group id")
	}
	grp := s.groups[pid]
	if grp == nil {
		grp = map[uint32]*p4v1.ActionProfileGroup{}
		s.groups[pid] = grp
	}
	cur, exists := grp[g.GetGroupId()]
	// members checks a group's membership as PI does once the group
	// exists: weights, their sum against the group's size, then each
	// member. PI creates a group before checking its members, so a group
	// INSERT whose members are refused leaves the group, empty.
	members := func(maxSize int32) error {
		sum := 0
		for _, gm := range g.GetMembers() {
			if gm.GetWeight() < 1 {
				return errf(codes.InvalidArgument, "group %d: member weight must be a positive integer value", g.GetGroupId())
			}
			sum += int(gm.GetWeight())
		}
		// PI on BMv2 makes a member of weight w into w BMv2 members: the
		// weights' sum is what the group's size bounds.
		if limit := cmp.Or(int(maxSize), int(prof.GetMaxGroupSize())); limit > 0 && sum > limit {
			return errf(codes.ResourceExhausted, "group %d: sum of member weights %d exceeds maximum group size %d", g.GetGroupId(), sum, limit)
		}
		seen := map[uint32]bool{}
		for _, gm := range g.GetMembers() {
			if _, ok := s.members[pid][gm.GetMemberId()]; !ok {
				return errf(codes.NotFound, "member id does not exist: %d", gm.GetMemberId())
			}
			if seen[gm.GetMemberId()] {
				return errf(codes.InvalidArgument, "duplicate member id %d for group %d, use weights instead", gm.GetMemberId(), g.GetGroupId())
			}
			seen[gm.GetMemberId()] = true
		}
		return nil
	}
	switch typ {
	case p4v1.Update_INSERT:
		if g.GetMaxSize() < 0 {
			return errf(codes.InvalidArgument, "group max_size cannot be less than 0")
		}
		if max := prof.GetMaxGroupSize(); max > 0 && g.GetMaxSize() > max {
			return errf(codes.InvalidArgument, "group max_size cannot exceed static max_group_size (from P4Info)")
		}
		if exists {
			return errf(codes.AlreadyExists, "duplicate group id: %d", g.GetGroupId())
		}
		if size := int(prof.GetSize()); size > 0 && len(grp) >= size {
			return errf(codes.ResourceExhausted, "action profile %s is full (%d groups)", prof.GetPreamble().GetName(), size)
		}
		if err := members(g.GetMaxSize()); err != nil {
			grp[g.GetGroupId()] = &p4v1.ActionProfileGroup{ActionProfileId: pid, GroupId: g.GetGroupId(), MaxSize: g.GetMaxSize()}
			s.selectorOf(pid).setGroup(g.GetGroupId(), nil)
			return err
		}
		grp[g.GetGroupId()] = g
		s.selectorOf(pid).setGroup(g.GetGroupId(), groupWeights(g))
	case p4v1.Update_MODIFY:
		if !exists {
			return errf(codes.NotFound, "group id does not exist: %d", g.GetGroupId())
		}
		if g.GetMaxSize() != 0 && g.GetMaxSize() != cur.GetMaxSize() {
			return errf(codes.InvalidArgument, "cannot change group max_size after group creation")
		}
		if err := members(cur.GetMaxSize()); err != nil {
			return err
		}
		g.MaxSize = cur.GetMaxSize()
		grp[g.GetGroupId()] = g
		s.selectorOf(pid).setGroup(g.GetGroupId(), groupWeights(g))
	case p4v1.Update_DELETE:
		if !exists {
			return errf(codes.NotFound, "group id does not exist: %d", g.GetGroupId())
		}
		for _, tid := range s.profileTables(pid) {
			for key, e := range s.entries[tid] {
				if e.GetAction().GetActionProfileGroupId() == g.GetGroupId() {
					return errf(codes.Unknown, "error when deleting group on target: group %d is still used by table entry %s", g.GetGroupId(), key)
				}
			}
		}
		delete(grp, g.GetGroupId())
		s.selectorOf(pid).deleteGroup(g.GetGroupId())
	default:
		return errf(codes.InvalidArgument, "update type %s", typ)
	}
	return nil
}

func groupWeights(g *p4v1.ActionProfileGroup) map[uint32]int32 {
	out := make(map[uint32]int32, len(g.GetMembers()))
	for _, gm := range g.GetMembers() {
		out[gm.GetMemberId()] = gm.GetWeight()
	}
	return out
}

// apply writes one update. It takes u: the store may keep its entity,
// or change it (see normalizeEntry).
func (s *tableStore) apply(u *p4v1.Update) error {
	switch e := u.GetEntity().GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return s.writeTableEntry(u.GetType(), e.TableEntry)
	case *p4v1.Entity_ActionProfileMember:
		return s.writeMember(u.GetType(), e.ActionProfileMember)
	case *p4v1.Entity_ActionProfileGroup:
		return s.writeGroup(u.GetType(), e.ActionProfileGroup)
	case *p4v1.Entity_DigestEntry:
		return s.writeDigest(u.GetType(), e.DigestEntry)
	case nil:
		return errf(codes.InvalidArgument, "update without an entity")
	default:
		return errf(codes.Unimplemented, "writing %T is not supported", e)
	}
}

// readTable returns entries matching a read request's table entry: table 0
// means all tables; no match fields means all entries of the table. The
// entries are the store's own (a write replaces an entry, never changes
// it): callers read them, and clone one before changing it. A read-back
// of a whole switch copies no entry (at k=16 with 100,000 intents,
// copies would be two thirds of a takeover's reading cost).
func (s *tableStore) readTable(q *p4v1.TableEntry) ([]*p4v1.Entity, error) {
	var tables []uint32
	if q.GetTableId() == 0 {
		for _, t := range s.schema.Info.GetTables() {
			tables = append(tables, t.GetPreamble().GetId())
		}
	} else {
		if _, ok := s.schema.TableByID(q.GetTableId()); !ok {
			return nil, errf(codes.InvalidArgument, "invalid P4 id: unknown table id %d", q.GetTableId())
		}
		tables = []uint32{q.GetTableId()}
	}
	var out []*p4v1.Entity
	if q.GetIsDefaultAction() {
		if q.GetTableId() == 0 {
			return nil, errf(codes.InvalidArgument, "reading default entries needs a table id")
		}
		return []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: s.defaultEntry(q.GetTableId())}}}, nil
	}
	if len(q.GetMatch()) > 0 && q.GetTableId() != 0 {
		_, key, err := s.normalizeEntry(q, true)
		if err != nil {
			return nil, err
		}
		if e, ok := s.entries[q.GetTableId()][key]; ok {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}})
		}
		return out, nil
	}
	for _, tid := range tables {
		keys := make([]string, 0, len(s.entries[tid]))
		for k := range s.entries[tid] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: s.entries[tid][k]}})
		}
	}
	return out, nil
}

func (s *tableStore) profileIDs(q uint32) ([]uint32, error) {
	if q != 0 {
		if _, ok := s.schema.ProfileByID(q); !ok {
			return nil, errf(codes.InvalidArgument, "invalid P4 id: unknown action profile id %d", q)
		}
		return []uint32{q}, nil
	}
	var ids []uint32
	for _, p := range s.schema.Info.GetActionProfiles() {
		ids = append(ids, p.GetPreamble().GetId())
	}
	return ids, nil
}

func (s *tableStore) readMembers(q *p4v1.ActionProfileMember) ([]*p4v1.Entity, error) {
	pids, err := s.profileIDs(q.GetActionProfileId())
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for _, pid := range pids {
		ids := make([]uint32, 0, len(s.members[pid]))
		for id := range s.members[pid] {
			if q.GetMemberId() == 0 || q.GetMemberId() == id {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: proto.Clone(s.members[pid][id]).(*p4v1.ActionProfileMember)}})
		}
	}
	return out, nil
}

func (s *tableStore) readGroups(q *p4v1.ActionProfileGroup) ([]*p4v1.Entity, error) {
	pids, err := s.profileIDs(q.GetActionProfileId())
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for _, pid := range pids {
		ids := make([]uint32, 0, len(s.groups[pid]))
		for id := range s.groups[pid] {
			if q.GetGroupId() == 0 || q.GetGroupId() == id {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: proto.Clone(s.groups[pid][id]).(*p4v1.ActionProfileGroup)}})
		}
	}
	return out, nil
}

// count returns the number of entries in a table by name.
func (s *tableStore) count(table string) int {
	return len(s.entries[s.schema.TableID(table)])
}
