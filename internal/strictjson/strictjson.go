// Package strictjson decodes request bodies strictly and at a bounded cost:
// an object key that names a field in another case, a key given twice, an
// unknown field, trailing data, nesting past a depth or more values than a
// body may hold are refused with an error that names the place. It is what
// every endpoint that reads a body uses (the REST API and fabricsim's
// control API), so no body can cost more than a linear pass over its bytes.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Limits bound one document.
type Limits struct {
	// MaxDepth is how deeply arrays and objects may nest (the document's
	// top level is depth 1).
	MaxDepth int
	// MaxValues is how many values (scalars, arrays, objects) the whole
	// document may hold.
	MaxValues int
}

// Default fits every body the APIs take with room to spare: an intent
// nests three levels, a batch of them five; a tenant lists at most 2,048
// host patterns.
var Default = Limits{MaxDepth: 32, MaxValues: 100_000}

// ErrLimit is what a document past Limits is refused with (errors.Is).
var ErrLimit = errors.New("over the limits of a request body")

// Decode decodes data into v (a pointer) under Default.
func Decode(data []byte, v any) error { return Default.Decode(data, v) }

// Decode checks data against v's type in one pass over its bytes, then
// decodes it with encoding/json (DisallowUnknownFields). The check refuses
// what encoding/json lets through (keys matched in another case, the last
// of two equal keys kept) and bounds the work: nothing is allocated per
// level of nesting, and a document is refused as soon as it goes past a
// limit, so the decode that follows runs on a document known to be small
// and shallow.
func (l Limits) Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: decode into %T: want a non-nil pointer", v)
	}
	s := scanner{data: data, lim: l}
	if err := s.document(rv.Type()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// SyntaxError is malformed JSON at a byte offset.
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.Offset) }

// KeyError is an object key refused: unknown, in another case than its
// field's, or given twice. Path names it ("constraints.avoid_switches").
type KeyError struct {
	Path   string
	Reason string
}

func (e *KeyError) Error() string { return fmt.Sprintf("key %q: %s", e.Path, e.Reason) }

// scanner walks a document once. path holds the keys and indexes above the
// value being read; it is turned into a string only for an error.
type scanner struct {
	data   []byte
	pos    int
	values int
	lim    Limits
	path   []step
}

type step struct {
	key   string
	index int // -1 for a key
}

func (s *scanner) document(t reflect.Type) error {
	s.space()
	if s.pos == len(s.data) {
		return &SyntaxError{Offset: s.pos, msg: "empty body: want a JSON value"}
	}
	if err := s.value(t, 1); err != nil {
		return err
	}
	s.space()
	if s.pos != len(s.data) {
		return &SyntaxError{Offset: s.pos, msg: "data after the value"}
	}
	return nil
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) syntax(msg string) error { return &SyntaxError{Offset: s.pos, msg: msg} }

// where is the current path, for messages (a long key shortened: an
// error never repeats much of the body).
func (s *scanner) where() string {
	var b strings.Builder
	for _, st := range s.path {
		if st.index >= 0 {
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if len(st.key) > maxKeyShown {
			b.WriteString(strings.ToValidUTF8(st.key[:maxKeyShown], "") + "…")
			continue
		}
		b.WriteString(st.key)
	}
	return b.String()
}

// maxKeyShown is how much of a key an error shows.
const maxKeyShown = 64

// value reads one value at depth, checking objects against t (nil: any
// keys go, below too).
func (s *scanner) value(t reflect.Type, depth int) error {
	s.values++
	if s.values > s.lim.MaxValues {
		return fmt.Errorf("%w: more than %d values", ErrLimit, s.lim.MaxValues)
	}
	t = expected(t)
	if s.pos == len(s.data) {
		return s.syntax("unexpected end of JSON")
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if depth > s.lim.MaxDepth {
			return fmt.Errorf("%w: nested more than %d levels deep", ErrLimit, s.lim.MaxDepth)
		}
		if c == '{' {
			return s.object(t, depth)
		}
		return s.array(t, depth)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.syntax(fmt.Sprintf("invalid character %q looking for a value", s.data[s.pos]))
}

func (s *scanner) object(t reflect.Type, depth int) error {
	var fields *structFields
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	s.pos++ // {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	start := len(s.path)
	defer func() { s.path = s.path[:start] }()
	// Keys seen in this object: a short list compared in place, since
	// objects of our types have few keys; a map past that.
	var seen []string
	var seenSet map[string]struct{}
	for {
		s.space()
		if s.pos == len(s.data) || s.data[s.pos] != '"' {
			return s.syntax("want an object key in double quotes")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		s.path = append(s.path[:start], step{key: key, index: -1})
		dup := false
		if seenSet != nil {
			_, dup = seenSet[key]
		} else {
			for _, k := range seen {
				if k == key {
					dup = true
					break
				}
			}
		}
		if dup {
			return &KeyError{Path: s.where(), Reason: "given twice"}
		}
		if seenSet == nil && len(seen) < 16 {
			seen = append(seen, key)
		} else {
			if seenSet == nil {
				seenSet = make(map[string]struct{}, 32)
				for _, k := range seen {
					seenSet[k] = struct{}{}
				}
			}
			seenSet[key] = struct{}{}
		}
		next := elem
		if fields != nil {
			ft, ok := fields.byName[key]
			if !ok {
				if name, folded := fields.byFold[strings.ToLower(key)]; folded {
					s.path[len(s.path)-1].key = name
					want := s.where()
					s.path[len(s.path)-1].key = key
					return &KeyError{Path: s.where(), Reason: fmt.Sprintf("field names are case-sensitive (want %q)", want)}
				}
				return &KeyError{Path: s.where(), Reason: "unknown field"}
			}
			next = ft
		}
		s.space()
		if s.pos == len(s.data) || s.data[s.pos] != ':' {
			return s.syntax("want ':' after an object key")
		}
		s.pos++
		s.space()
		if err := s.value(next, depth+1); err != nil {
			return err
		}
		if done, err := s.next('}', "an object"); done || err != nil {
			return err
		}
	}
}

// next reads what follows a member or an element: ',' (more to come) or
// close (done), in what ("an object", "an array").
func (s *scanner) next(close byte, what string) (done bool, err error) {
	s.space()
	if s.pos == len(s.data) {
		return false, s.syntax("unexpected end of JSON in " + what)
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case close:
		s.pos++
		return true, nil
	}
	return false, s.syntax(fmt.Sprintf("want ',' or '%c' in %s", close, what))
}

func (s *scanner) array(t reflect.Type, depth int) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	start := len(s.path)
	defer func() { s.path = s.path[:start] }()
	for i := 0; ; i++ {
		s.path = append(s.path[:start], step{index: i})
		s.space()
		if err := s.value(elem, depth+1); err != nil {
			return err
		}
		if done, err := s.next(']', "an array"); done || err != nil {
			return err
		}
	}
}

// str reads a string; its value is returned unescaped (only keys need it).
func (s *scanner) str() (string, error) {
	begin := s.pos
	s.pos++ // "
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			raw := s.data[begin:s.pos]
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return "", &SyntaxError{Offset: begin, msg: "invalid string: " + err.Error()}
			}
			return out, nil
		case c == '\\':
			escaped = true
			if s.pos+1 == len(s.data) {
				return "", s.syntax("unexpected end of JSON in a string")
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) {
					return "", s.syntax("unexpected end of JSON in a string")
				}
				for _, h := range s.data[s.pos+2 : s.pos+6] {
					if !isHex(h) {
						return "", s.syntax("invalid \\u escape in a string")
					}
				}
				s.pos += 6
			default:
				return "", s.syntax("invalid escape in a string")
			}
		case c < 0x20:
			return "", s.syntax("control character in a string")
		default:
			s.pos++
		}
	}
	return "", s.syntax("unexpected end of JSON in a string")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a number as JSON's grammar has it.
func (s *scanner) number() error {
	d := s.data
	if d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
	case s.pos < len(d) && isDigit(d[s.pos]):
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	default:
		return s.syntax("invalid number")
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if s.pos == len(d) || !isDigit(d[s.pos]) {
			return s.syntax("invalid number: want a digit after '.'")
		}
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if s.pos == len(d) || !isDigit(d[s.pos]) {
			return s.syntax("invalid number: want a digit in the exponent")
		}
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	}
	return nil
}

func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.syntax("invalid literal")
	}
	s.pos += len(word)
	return nil
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// expected is what t's JSON is checked against: pointers followed; nil
// for a type that decodes itself (its keys are its own business) or takes
// anything (interfaces).
func expected(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// structFields are a struct's JSON keys as encoding/json names them
// (embedded structs' fields included), and the keys by lower case, to say
// which field a key in another case meant.
type structFields struct {
	byName map[string]reflect.Type
	byFold map[string]string
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: jsonFields(t), byFold: map[string]string{}}
	for name := range f.byName {
		f.byFold[strings.ToLower(name)] = name
	}
	fieldCache.Store(t, f)
	return f
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}
