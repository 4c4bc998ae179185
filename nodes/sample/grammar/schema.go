package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// FromSchema compiles a JSON Schema to GBNF whose sentences are JSON texts
// that validate against it. Annotations and unknown keywords are ignored;
// a keyword the grammar cannot enforce is an error naming it, rather than
// output that may not validate. A few keywords are enforced by admitting a
// subset of the valid texts (formats narrowed to what every validator
// accepts, no exponent under number limits, ...): docs/structured-output.md
// lists what each keyword does.
func FromSchema(schema json.RawMessage) (string, error) {
	return FromSchemaWork(schema, &Work{Limit: MaxSchemaWork})
}

// FromSchemaWork is FromSchema charging w (nil: no Work) for every step,
// the parse of the GBNF included: past w's limit it fails with an error
// wrapping ErrSchemaTooComplex, and when w's Interrupt returns an error
// it fails with that error, within a few thousand units.
func FromSchemaWork(schema json.RawMessage, w *Work) (string, error) {
	if w == nil {
		w = &Work{}
	}
	name, rules, err := SchemaRulesWork(schema, "", w)
	if err != nil {
		return "", err
	}
	src := "root ::= " + name + "\n" + JSONRules + rules
	if _, err := ParseWork(src, w); err != nil { // a schema that refers to itself before any output
		if w.Err() != nil {
			return "", stopped(w, "")
		}
		return "", fmt.Errorf("schema: %w", err)
	}
	return src, nil
}

// SchemaRules compiles a JSON Schema (as FromSchema) to GBNF rules whose
// names start with prefix (letters, digits and '-'), to be combined with
// JSONRules and a root of the caller's; name is the schema's rule.
func SchemaRules(schema json.RawMessage, prefix string) (name, rules string, err error) {
	return SchemaRulesWork(schema, prefix, &Work{Limit: MaxSchemaWork})
}

// SchemaRulesWork is SchemaRules charging w (nil: no Work), as
// FromSchemaWork.
func SchemaRulesWork(schema json.RawMessage, prefix string, w *Work) (name, rules string, err error) {
	if w == nil {
		w = &Work{}
	}
	if !w.reserve(len(schema)) {
		return "", "", stopped(w, "")
	}
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", "", fmt.Errorf("schema: %w", err)
	}
	c := newSchemaCompiler(root, prefix, w)
	name, err = c.rule("value", root, "")
	if w.Err() != nil { // whatever the branches that failed made of it
		return "", "", stopped(w, "")
	}
	if err != nil {
		return "", "", err
	}
	return name, c.rules(), nil
}

// MaxSchemaWork is the Work limit of FromSchema and SchemaRules: a unit
// is one subschema or keyword visited, one value compared, or a few bytes
// of GBNF written or parsed (20-60 ns each). The costliest schema of
// JSONSchemaBench needs under a tenth of it.
const MaxSchemaWork = 1 << 25

// Size limits of the schemas the compiler accepts, beyond its Work: a
// schema past one is refused with an error naming where.
const (
	MaxSchemaDepth   = 200     // subschemas nested in one another (properties, items, ...)
	MaxSchemaInline  = 16      // $ref, allOf, if/then and not resolved within one another
	MaxSchemaEnum    = 100_000 // values of one enum
	MaxSchemaPattern = 10_000  // characters of one pattern
)

// ErrSchemaTooComplex is wrapped by the errors of compilations stopped by
// their Work's limit.
var ErrSchemaTooComplex = errors.New("the schema needs more work to compile than the server allows; simplify it (fewer subschemas, $ref and allOf combinations, enum values or properties)")

// errNothing is matched (errors.Is) by the errors of schemas that admit
// no value (false, contradictory limits, types or enums): a branch, type
// or item schema failing with it is left out exactly. Any other error is a
// keyword the grammar cannot enforce, and leaving its part out would
// reject valid documents: it refuses the schema instead.
var errNothing = errors.New("the schema admits no value")

// nothingError is an error of a schema that admits no value.
type nothingError struct{ msg string }

func (e *nothingError) Error() string        { return e.msg }
func (e *nothingError) Is(target error) bool { return target == errNothing }

// nothingf is a nothingError with a formatted message.
func nothingf(format string, a ...any) error {
	return &nothingError{fmt.Sprintf(format, a...)}
}

// stopped is the error of a compilation whose Work w has stopped; at is
// where it was.
func stopped(w *Work, at string) error {
	if err := w.Err(); !errors.Is(err, ErrWorkLimit) {
		return fmt.Errorf("schema%s: %w", at, err)
	}
	return fmt.Errorf("schema%s: %w (more than %d units)", at, ErrSchemaTooComplex, w.Limit)
}

// spend charges n units of the compilation's Work: an error naming at
// once it has stopped.
func (c *schemaCompiler) spend(n int, at string) error {
	if c.work.reserve(n) {
		return nil
	}
	return stopped(c.work, at)
}

// emit adds a rule line to the output, charging a unit per byte (its
// parse is charged apart, by ParseWork).
func (c *schemaCompiler) emit(line string) {
	c.work.reserve(1 + len(line))
	c.out = append(c.out, line)
}

// object is a JSON object with its members in order.
type object struct {
	keys []string
	vals map[string]any
}

func decodeOrdered(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeAny(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func decodeAny(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			var out []any
			for dec.More() {
				v, err := decodeAny(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		}
		o := &object{vals: map[string]any{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeAny(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals[k.(string)] = v
		}
		_, err := dec.Token()
		return o, err
	}
	return t, nil
}

type schemaCompiler struct {
	root     any
	out      []string
	names    map[string]bool
	suffix   map[string]int     // the last number ruleName appended to a base name
	refs     map[string]string  // $ref -> rule name
	refOrder []string           // refs' keys in the order added
	memo     map[*object]string // schema objects' rules (named before compiled: recursion refers to them)
	memoKeys []*object          // memo's keys in the order added
	orig     map[*object]bool   // the schema's own objects (others are merged: memoized by content)
	byText   map[string]string  // merged objects' rules by canonical text
	textKeys []string           // byText's keys in the order added
	depth    int                // rules being compiled, nested
	modRules map[int64]bool     // multipleOf automata added
	shared   []string           // rule lines written once, after out (emitShared)
	// prefix starts every rule name.
	prefix   string
	work     *Work                     // charged by every step
	machines map[string]machineOrError // patternProperties compiled
	// refAlone: the schema declares a draft before 2019-09, where a
	// $ref's sibling keywords are ignored.
	refAlone bool
}

// refAloneDrafts are the $schema drafts in which a $ref's siblings are
// ignored.
var refAloneDrafts = []string{"draft-03/", "draft-04/", "draft-06/", "draft-07/"}

func newSchemaCompiler(root any, prefix string, w *Work) *schemaCompiler {
	c := &schemaCompiler{root: root, names: map[string]bool{}, suffix: map[string]int{}, refs: map[string]string{}, modRules: map[int64]bool{}, memo: map[*object]string{}, orig: map[*object]bool{}, byText: map[string]string{}, prefix: prefix, work: w}
	c.markOriginal(root)
	if o, ok := root.(*object); ok {
		if d, ok := o.vals["$schema"].(string); ok {
			c.refAlone = slices.ContainsFunc(refAloneDrafts, func(p string) bool { return strings.Contains(d, p) })
		}
	}
	return c
}

func (c *schemaCompiler) markOriginal(v any) {
	switch v := v.(type) {
	case *object:
		c.orig[v] = true
		for _, e := range v.vals {
			c.markOriginal(e)
		}
	case []any:
		for _, e := range v {
			c.markOriginal(e)
		}
	}
}

// ruleName is a fresh rule name from hint.
func (c *schemaCompiler) ruleName(hint string) string {
	c.work.reserve(1 + len(hint))
	var b strings.Builder
	for _, r := range hint {
		if r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	hint = b.String()
	if len(hint) > 48 {
		hint = hint[:48]
	}
	base := c.prefix + "s-" + hint
	name := base
	for c.names[name] {
		c.suffix[base]++
		name = base + "-" + strconv.Itoa(c.suffix[base]+1)
	}
	c.names[name] = true
	return name
}

// Keywords the compiler reads; every other keyword is an annotation or
// unknown and, as the JSON Schema specification asks, ignored.
var schemaKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "patternProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true, "$ref": true, "not": true, "if": true, "then": true, "else": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minProperties": true, "maxProperties": true, "dependencies": true, "dependentRequired": true,
	"dependentSchemas": true, "propertyNames": true,
	forbidKey: true, notTypesKey: true, notValuesKey: true,
}

// refusedKeywords constrain values in ways the grammar does not express.
var refusedKeywords = []string{"contains", "minContains", "maxContains", "$dynamicRef", "$recursiveRef"}

// Internal keywords (not JSON Schema's: they start with a NUL) that not
// and oneOf compile to.
const (
	forbidKey    = "\x00forbid"    // property names never generated
	notTypesKey  = "\x00notTypes"  // types excluded
	notValuesKey = "\x00notValues" // values excluded
)

// constraining reports whether o has a keyword that constrains values.
func constraining(o *object) bool {
	for _, k := range o.keys {
		if schemaKeywords[k] {
			return true
		}
	}
	return false
}

// rule adds the rule of schema s and returns its name; at is where s is,
// for errors.
func (c *schemaCompiler) rule(hint string, s any, at string) (string, error) {
	if err := c.spend(1, at); err != nil {
		return "", err
	}
	o, ok := s.(*object)
	if !ok {
		body, err := c.body(hint, s, at)
		if err != nil {
			return "", err
		}
		return body, nil // value
	}
	if r, ok := o.vals["$ref"]; ok && (len(o.keys) == 1 || c.refAlone) {
		return c.ref(r, at)
	}
	if name, ok := c.memo[o]; ok {
		return name, nil
	}
	text := ""
	if !c.orig[o] {
		b, err := c.canonical(o, at)
		if err != nil {
			return "", err
		}
		text = string(b)
		if name, ok := c.byText[text]; ok {
			return name, nil
		}
	}
	if c.depth > MaxSchemaDepth {
		return "", fmt.Errorf("schema%s: the schema nests too deeply (more than %d subschemas within one another)", at, MaxSchemaDepth)
	}
	c.depth++
	defer func() { c.depth-- }()
	name := c.ruleName(hint)
	if text != "" {
		c.byText[text] = name
		c.textKeys = append(c.textKeys, text)
	} else {
		c.memo[o] = name
		c.memoKeys = append(c.memoKeys, o)
	}
	body, err := c.body(hint, s, at)
	if err != nil {
		return "", err
	}
	c.emit(name + " ::= " + body)
	return name, nil
}

func literal(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonLiteral is the GBNF literal of a JSON value, as it is written.
func jsonLiteral(v any) (string, error) {
	b, err := canonical(v)
	if err != nil {
		return "", err
	}
	return literal(string(b)), nil
}

func canonical(v any) ([]byte, error) { return canonicalWork(v, nil) }

// canonicalUnits is the Work of writing one value's canonical text.
const canonicalUnits = 4

// canonical is the canonical text of v, charging the compilation: a
// schema merged from others shares their parts, and its text can be far
// larger than the document.
func (c *schemaCompiler) canonical(v any, at string) ([]byte, error) {
	b, err := canonicalWork(v, c.work)
	if c.work.Err() != nil {
		return nil, stopped(c.work, at)
	}
	return b, err
}

// canonicalWork is canonical charging w (nil: nothing) canonicalUnits
// per value: numbers and key order as the schema writes them.
func canonicalWork(v any, w *Work) ([]byte, error) { return encodeValue(v, w, false) }

// valueKeyWork is v's equality key, charging w like canonicalWork: equal
// JSON values (1, 1.0 and 1e0; -0 and 0; objects in any key order) have
// the same key. An error means the key is unknown: callers treat such a
// value as possibly equal to any other.
func valueKeyWork(v any, w *Work) ([]byte, error) { return encodeValue(v, w, true) }

// encodeValue writes v as JSON text: with byValue, numbers as numberKey
// and object members sorted by name.
func encodeValue(v any, w *Work, byValue bool) ([]byte, error) {
	if w != nil && !w.charge(canonicalUnits) {
		return nil, w.Err()
	}
	switch v := v.(type) {
	case *object:
		keys := v.keys
		if byValue {
			keys = slices.Clone(keys)
			slices.Sort(keys)
			keys = slices.Compact(keys)
		}
		var b bytes.Buffer
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			vb, err := encodeValue(v.vals[k], w, byValue)
			if err != nil {
				return nil, err
			}
			b.Write(vb)
		}
		b.WriteByte('}')
		return b.Bytes(), nil
	case []any:
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			eb, err := encodeValue(e, w, byValue)
			if err != nil {
				return nil, err
			}
			b.Write(eb)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case json.Number:
		if byValue {
			k, err := numberKey(string(v))
			return []byte(k), err
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// numberKey is the value of JSON number text n as [-]DIGITSeEXP with no
// leading or trailing zeros in DIGITS ("0" for zero of either sign), so
// numbers are equal exactly when their keys are. It works on the text, so
// an exponent such as 1e999999999 costs nothing; an exponent beyond int32
// is an error.
func numberKey(n string) (string, error) {
	neg := strings.HasPrefix(n, "-")
	mant, expText, hasExp := strings.Cut(strings.TrimPrefix(n, "-"), "e")
	if !hasExp {
		mant, expText, hasExp = strings.Cut(mant, "E")
	}
	exp := int64(0)
	if hasExp {
		e, err := strconv.ParseInt(strings.TrimPrefix(expText, "+"), 10, 32)
		if err != nil {
			return "", fmt.Errorf("number %q: exponent out of range", n)
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.FormatInt(exp, 10), nil
}

// jsonTypes are the JSON Schema types; integer is a subset of number.
var jsonTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// typeOf is the JSON Schema type of a decoded value (integer for
// integral numbers).
func typeOf(v any) string {
	switch v := v.(type) {
	case *object:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	}
	return ""
}

// typeList reads o's type keyword (nil: absent).
func typeList(o *object, at string) ([]string, error) {
	switch t := o.vals["type"].(type) {
	case nil:
		return nil, nil
	case string:
		if !slices.Contains(jsonTypes, t) {
			return nil, fmt.Errorf("schema%s.type: unknown type %q", at, t)
		}
		return []string{t}, nil
	case []any:
		var out []string
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("schema%s.type: expected strings", at)
			}
			if !slices.Contains(jsonTypes, s) {
				return nil, fmt.Errorf("schema%s.type: unknown type %q", at, s)
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("schema%s.type: an empty list of types matches nothing", at)
		}
		return out, nil
	}
	return nil, fmt.Errorf("schema%s.type: expected a string or an array of strings", at)
}

// typeAdmits reports whether a value of type v is of one of types.
func typeAdmits(types []string, v string) bool {
	return slices.Contains(types, v) || v == "integer" && slices.Contains(types, "number")
}

func (c *schemaCompiler) body(hint string, s any, at string) (string, error) {
	if b, ok := s.(bool); ok {
		if !b {
			return "", nothingf("schema%s: false matches nothing", at)
		}
		return "value", nil
	}
	o, ok := s.(*object)
	if !ok {
		return "", fmt.Errorf("schema%s: expected an object or a boolean", at)
	}
	if err := c.spend(1+len(o.keys), at); err != nil {
		return "", err
	}
	for _, k := range refusedKeywords {
		if _, ok := o.vals[k]; ok {
			return "", fmt.Errorf("schema%s: keyword %q is not supported", at, k)
		}
	}
	o, err := c.normalize(o, at, 0)
	if err != nil {
		return "", err
	}
	if r, ok := o.vals["$ref"]; ok {
		return c.ref(r, at)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if _, ok := o.vals[k]; ok {
			return c.alternatives(hint, k, o, at)
		}
	}
	types, err := typeList(o, at)
	if err != nil {
		return "", err
	}
	var values []any
	hasValues := false
	if v, ok := o.vals["const"]; ok {
		values, hasValues = []any{v}, true
	}
	if v, ok := o.vals["enum"]; ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return "", fmt.Errorf("schema%s.enum: expected a non-empty array", at)
		}
		if len(list) > MaxSchemaEnum {
			return "", fmt.Errorf("schema%s.enum: more than %d values", at, MaxSchemaEnum)
		}
		if hasValues {
			values = c.intersectValues(values, list)
		} else {
			values, hasValues = list, true
		}
	}
	if hasValues {
		return c.valuesRule(values, types, o, at)
	}
	var optional []string // types written where their keywords compile
	if types == nil {
		types = inferTypes(o)
		if types != nil && !hasKey(o, forbidKey) {
			optional = slices.DeleteFunc(slices.Clone(allKinds), func(t string) bool { return t == types[0] })
		}
	}
	if nt, ok := o.vals[notTypesKey].([]any); ok {
		if types == nil {
			types = []string{"object", "array", "string", "number", "boolean", "null"}
		}
		excluded := func(t string) bool {
			for _, n := range nt {
				if n == t || n == "number" && t == "integer" {
					return true
				}
			}
			return false
		}
		types = slices.DeleteFunc(slices.Clone(types), excluded)
		optional = slices.DeleteFunc(optional, excluded)
		if slices.Contains(nt, any("integer")) && (slices.Contains(types, "number") || slices.Contains(optional, "number")) {
			return "", fmt.Errorf("schema%s: keyword \"not\" excluding integers from numbers is not supported", at)
		}
		if len(types) == 0 && len(optional) == 0 {
			return "", nothingf("schema%s: \"not\" excludes every type", at)
		}
	}
	if types == nil {
		if _, ok := o.vals[notValuesKey]; ok {
			return "", fmt.Errorf("schema%s: keyword \"not\" is supported here only with type, enum or const", at)
		}
		return "value", nil
	}
	notValues, _ := o.vals[notValuesKey].([]any)
	for _, v := range notValues {
		k := kind(typeOf(v))
		if k != "string" && k != "boolean" && k != "null" && slices.ContainsFunc(append(slices.Clone(types), optional...), func(t string) bool { return kind(t) == k }) {
			return "", fmt.Errorf("schema%s: keyword \"not\" of %s values is supported only beside enum or const", at, k)
		}
	}
	var alts []string
	for _, t := range types {
		if t == "integer" && slices.Contains(types, "number") {
			continue
		}
		b, err := c.typed(hint, t, o, at)
		if err != nil {
			if errors.Is(err, errNothing) && len(types) > 1 {
				continue
			}
			return "", err
		}
		alts = append(alts, "( "+b+" )")
	}
	for _, t := range optional {
		m := c.mark()
		b, err := c.typed(hint, t, o, at)
		if err != nil {
			if !errors.Is(err, errNothing) {
				return "", err // leaving the type out would reject its valid values
			}
			c.rollback(m)
			continue
		}
		alts = append(alts, "( "+b+" )")
	}
	if len(alts) == 0 {
		return "", nothingf("schema%s: \"not\" excludes every type its keywords allow", at)
	}
	return strings.Join(alts, " | "), nil
}

func hasKey(o *object, k string) bool {
	_, ok := o.vals[k]
	return ok
}

// inferTypes is the one type o's keywords are about, when o has no type
// (nil: any value). That type must compile; the others are written too
// where their keywords compile (any of them meets the schema), except
// where not of required (forbidKey) or a oneOf (exclusive) narrowed
// o to the inferred type.
func inferTypes(o *object) []string {
	for _, group := range []struct {
		t    string
		keys []string
	}{
		{"object", []string{"properties", "additionalProperties", "patternProperties", "required", "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames", forbidKey}},
		{"array", []string{"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"}},
		{"string", []string{"pattern", "minLength", "maxLength"}},
		{"number", []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}},
	} {
		for _, k := range group.keys {
			if _, ok := o.vals[k]; ok {
				return []string{group.t}
			}
		}
	}
	if f, ok := o.vals["format"].(string); ok && (formatPatterns[f] != "" || assertedFormats[f]) {
		return []string{"string"}
	}
	return nil
}

// intersectValues is the values of a (in order) equal to one of b's.
func (c *schemaCompiler) intersectValues(a, b []any) []any {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	in := make(map[string]bool, len(b))
	for _, y := range b {
		if yb, err := valueKeyWork(y, c.work); err == nil {
			in[string(yb)] = true
		}
	}
	var out []any
	for _, x := range a {
		if xb, err := valueKeyWork(x, c.work); err == nil && in[string(xb)] {
			out = append(out, x)
		}
	}
	return out
}

// disjointValues reports whether no value of a equals one of b's; a value
// without a key (its keying failed) may equal any.
func (c *schemaCompiler) disjointValues(a, b []any) bool {
	in := make(map[string]bool, len(b))
	for _, y := range b {
		yb, err := valueKeyWork(y, c.work)
		if err != nil {
			return false
		}
		in[string(yb)] = true
	}
	for _, x := range a {
		if xb, err := valueKeyWork(x, c.work); err != nil || in[string(xb)] {
			return false
		}
	}
	return true
}

// valuesRule is the alternatives of enum / const values that also meet
// o's other keywords (checked by matching each against o's grammar).
func (c *schemaCompiler) valuesRule(values []any, types []string, o *object, at string) (string, error) {
	rest := &object{vals: map[string]any{}}
	for _, k := range o.keys {
		if k != "enum" && k != "const" && k != "type" && k != notValuesKey {
			rest.keys = append(rest.keys, k)
			rest.vals[k] = o.vals[k]
		}
	}
	var check *Cache
	if constraining(rest) {
		g, err := c.checkGrammar(rest, at)
		if err != nil {
			return "", err
		}
		check = g.NewCache()
	}
	notValues, _ := o.vals[notValuesKey].([]any)
	excluded := map[string]bool{}
	for _, v := range notValues {
		if k, err := valueKeyWork(v, c.work); err == nil {
			excluded[string(k)] = true
		}
	}
	var alts []string
	for _, v := range values {
		b, err := c.canonical(v, at)
		if err != nil {
			return "", err
		}
		if types != nil && !typeAdmits(types, typeOf(v)) {
			continue
		}
		if len(excluded) > 0 {
			k, err := valueKeyWork(v, c.work)
			if err != nil || excluded[string(k)] {
				continue
			}
		}
		if check != nil {
			if ok, err := c.matches(check, b, at); err != nil {
				return "", err
			} else if !ok {
				continue
			}
		}
		alts = append(alts, literal(string(b)))
	}
	if len(alts) == 0 {
		return "", nothingf("schema%s.enum: no value meets the schema's other keywords", at)
	}
	return strings.Join(alts, " | "), nil
}

// checkGrammar compiles schema s on its own (at: where it is), to match
// values against it.
func (c *schemaCompiler) checkGrammar(s any, at string) (*Grammar, error) {
	sub := newSchemaCompiler(c.root, "", c.work)
	name, err := sub.rule("check", s, at)
	if err != nil {
		return nil, err
	}
	g, err := ParseWork("root ::= "+name+"\n"+JSONRules+sub.rules(), c.work)
	if c.work.Err() != nil {
		return nil, stopped(c.work, at)
	}
	if err != nil {
		return nil, fmt.Errorf("schema%s: %w", at, err)
	}
	return g, nil
}

// matches reports whether the JSON text b is a sentence of check's
// grammar. A text too ambiguous to follow does not match.
func (c *schemaCompiler) matches(check *Cache, b []byte, at string) (bool, error) {
	w := c.work.child()
	check.Bind(w)
	st := check.Start().AdvanceBytes(b)
	check.Bind(nil)
	c.work.absorb(w)
	if c.work.Err() != nil {
		return false, stopped(c.work, at)
	}
	return st != nil && st.Accepting(), nil
}

func (c *schemaCompiler) rules() string {
	var b strings.Builder
	for _, r := range c.out {
		b.WriteString(r + "\n")
	}
	for _, r := range c.shared {
		b.WriteString(r + "\n")
	}
	return b.String()
}

// emitShared adds a rule line that rules referring to it share, once (a
// rollback keeps it: a later rule may still refer to it).
func (c *schemaCompiler) emitShared(line string) {
	c.work.reserve(1 + len(line))
	c.shared = append(c.shared, line)
}

// mark is how far the compiler's output has come, for rollback.
type mark struct{ out, refs, memo, text int }

func (c *schemaCompiler) mark() mark {
	return mark{len(c.out), len(c.refOrder), len(c.memoKeys), len(c.textKeys)}
}

// rollback forgets the rules and references compiled since m (a branch
// that failed to compile).
func (c *schemaCompiler) rollback(m mark) {
	c.out = c.out[:m.out]
	for _, r := range c.refOrder[m.refs:] {
		delete(c.refs, r)
	}
	c.refOrder = c.refOrder[:m.refs]
	for _, o := range c.memoKeys[m.memo:] {
		delete(c.memo, o)
	}
	c.memoKeys = c.memoKeys[:m.memo]
	for _, t := range c.textKeys[m.text:] {
		delete(c.byText, t)
	}
	c.textKeys = c.textKeys[:m.text]
}

func without(o *object, keys ...string) *object {
	out := &object{vals: map[string]any{}}
	for _, k := range o.keys {
		if !slices.Contains(keys, k) {
			out.keys = append(out.keys, k)
			out.vals[k] = o.vals[k]
		}
	}
	return out
}

// alternatives compiles anyOf or oneOf (key): each branch merged with o's
// other keywords. Branches that cannot be compiled are left out (the
// output then meets another). A oneOf's branches must exclude each other
// (exclusive).
func (c *schemaCompiler) alternatives(hint, key string, o *object, at string) (string, error) {
	list, ok := o.vals[key].([]any)
	if !ok || len(list) == 0 {
		return "", fmt.Errorf("schema%s.%s: expected a non-empty array", at, key)
	}
	base := without(o, key)
	branches := make([]any, len(list))
	var firstErr error
	for i, e := range list {
		bat := fmt.Sprintf("%s.%s[%d]", at, key, i)
		if err := c.spend(1, bat); err != nil {
			return "", err
		}
		eo, err := c.inline(e, bat, 0)
		if err == nil {
			if constraining(base) {
				eo, err = c.merge(base, eo, bat)
			}
		}
		if err != nil {
			if !errors.Is(err, errNothing) {
				return "", err // leaving the branch out would reject its valid values
			}
			firstErr = cmpOr(firstErr, err)
			continue
		}
		branches[i] = eo
	}
	if key == "oneOf" {
		var err error
		if branches, err = c.exclusive(branches, list, at); err != nil {
			return "", err
		}
	}
	var alts []string
	for i, b := range branches {
		if b == nil {
			continue
		}
		m := c.mark()
		name, err := c.rule(fmt.Sprintf("%s-%d", hint, i), b, fmt.Sprintf("%s.%s[%d]", at, key, i))
		if err != nil {
			if !errors.Is(err, errNothing) {
				return "", err
			}
			c.rollback(m)
			firstErr = cmpOr(firstErr, err)
			continue
		}
		alts = append(alts, name)
	}
	if len(alts) == 0 {
		return "", firstErr
	}
	return strings.Join(alts, " | "), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// allKinds are the kinds of JSON values (integers are numbers).
var allKinds = []string{"object", "array", "string", "number", "boolean", "null"}

func kind(t string) string {
	if t == "integer" {
		return "number"
	}
	return t
}

// kinds is the kinds of value s admits (gen: that the compiler generates
// for it, which for a schema without type is its inferred type).
func (c *schemaCompiler) kinds(s any, gen bool, depth int) []string {
	if !c.work.charge(1) {
		return allKinds
	}
	o, err := c.inline(s, "", depth)
	if err != nil || depth > 8 {
		return allKinds
	}
	var out []string
	add := func(t string) {
		if !slices.Contains(out, kind(t)) {
			out = append(out, kind(t))
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := o.vals[k].([]any); ok {
			for _, b := range list {
				for _, t := range c.kinds(b, gen, depth+1) {
					add(t)
				}
			}
			return c.narrow(out, o, gen)
		}
	}
	if list, ok := o.vals["enum"].([]any); ok {
		for _, v := range list {
			add(typeOf(v))
		}
		return c.narrow(out, o, gen)
	}
	if v, ok := o.vals["const"]; ok {
		return c.narrow([]string{kind(typeOf(v))}, o, gen)
	}
	return c.narrow(allKinds, o, gen)
}

func (c *schemaCompiler) narrow(ks []string, o *object, gen bool) []string {
	types, err := typeList(o, "")
	if err != nil {
		return ks
	}
	if types == nil && gen {
		types = inferTypes(o)
	}
	if types == nil {
		return ks
	}
	var out []string
	for _, k := range ks {
		for _, t := range types {
			if kind(t) == k && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// exclusive keeps the oneOf branches whose outputs fail every other
// branch (all: the branches as written): their kinds differ, a required
// property takes different const / enum values, or a property another
// branch requires is never generated.
func (c *schemaCompiler) exclusive(branches, all []any, at string) ([]any, error) {
	out := make([]any, len(branches))
	for i, b := range branches {
		if b == nil {
			continue
		}
		bo := b.(*object)
		gen := c.kinds(bo, true, 0)
		ok := true
		for j, other := range all {
			if j == i {
				continue
			}
			if err := c.spend(1, at); err != nil {
				return nil, err
			}
			shared := intersectStrings(gen, c.kinds(other, false, 0))
			if len(shared) == 0 {
				continue
			}
			if va, ok := valueList(bo); ok {
				if vb, ok := c.writtenValues(other, 0); ok && c.disjointValues(va, vb) {
					continue
				}
			}
			if !slices.Equal(shared, []string{"object"}) {
				ok = false
				break
			}
			if c.requiresRefused(bo, other, 0) {
				continue
			}
			oo, err := c.inline(other, at, 0)
			if err != nil {
				ok = false
				break
			}
			if c.discriminated(bo, oo) || c.lacksRequired(bo, oo) {
				continue
			}
			if p, found := c.forbiddable(bo, oo); found {
				bo = withForbidden(bo, p)
				continue
			}
			if p, found := c.requirable(bo, other); found {
				req, _ := bo.vals["required"].([]any)
				bo = without(bo, "required")
				bo.keys = append(bo.keys, "required")
				bo.vals["required"] = append(slices.Clone(req), p)
				continue
			}
			ok = false
			break
		}
		if ok {
			if _, typed := bo.vals["type"]; !typed && len(gen) < len(allKinds) {
				bo = without(bo)
				bo.keys = append(bo.keys, "type")
				bo.vals["type"] = anyList(gen)
			}
			out[i] = bo
		}
	}
	for i, b := range out {
		if b == nil && branches[i] != nil {
			return nil, fmt.Errorf("schema%s: keyword \"oneOf\" is supported when its branches exclude each other (by type, a const or enum property, or a required property); branch %d does not", at, i)
		}
	}
	return out, nil
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func intersectStrings(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func stringList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// propValues is the values property p's schema in o admits when it is a
// const or enum (ok false otherwise).
func (c *schemaCompiler) propValues(o *object, p string) ([]any, bool) {
	props, _ := o.vals["properties"].(*object)
	if props == nil {
		return nil, false
	}
	s, ok := props.vals[p]
	if !ok {
		return nil, false
	}
	ps, err := c.inline(s, "", 0)
	if err != nil {
		return nil, false
	}
	if v, ok := ps.vals["const"]; ok {
		return []any{v}, true
	}
	if v, ok := ps.vals["enum"].([]any); ok {
		return v, true
	}
	return nil, false
}

// discriminated reports whether a property a requires has values b's
// schema for it excludes (disjointSchemas).
func (c *schemaCompiler) discriminated(a, b *object) bool {
	propsA, _ := a.vals["properties"].(*object)
	propsB, _ := b.vals["properties"].(*object)
	if propsA == nil || propsB == nil {
		return false
	}
	for _, p := range stringList(a.vals["required"]) {
		if hasKey(propsA, p) && hasKey(propsB, p) && c.disjointSchemas(propsA.vals[p], propsB.vals[p]) {
			return true
		}
	}
	return false
}

// refusesName reports whether schema s, as written, fails every object
// with a member named name: additionalProperties false without name
// listed (in properties or by a patternProperties), properties' schema
// for it false, not of required [name], or an allOf member, every anyOf
// or oneOf branch or the $ref target that refuses it.
func (c *schemaCompiler) refusesName(s any, name string, depth int) bool {
	o, ok := s.(*object)
	if !ok || depth > MaxSchemaInline || !c.work.charge(1+len(o.keys)) {
		return false
	}
	if r, ok := o.vals["$ref"]; ok {
		t, err := c.resolve(r, "")
		if err == nil && c.refusesName(t, name, depth+1) {
			return true
		}
		if c.refAlone {
			return false
		}
	}
	props, _ := o.vals["properties"].(*object)
	if props != nil && props.vals[name] == false {
		return true
	}
	if _, patterns := o.vals["patternProperties"]; o.vals["additionalProperties"] == false && !patterns && (props == nil || !hasKey(props, name)) {
		return true
	}
	if n, ok := o.vals["not"].(*object); ok && len(n.keys) == 1 && slices.Equal(stringList(n.vals["required"]), []string{name}) {
		return true
	}
	if list, ok := o.vals["allOf"].([]any); ok && slices.ContainsFunc(list, func(e any) bool { return c.refusesName(e, name, depth+1) }) {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if list, ok := o.vals[k].([]any); ok && len(list) > 0 && !slices.ContainsFunc(list, func(e any) bool { return !c.refusesName(e, name, depth+1) }) {
			return true
		}
	}
	return false
}

// valueList is o's enum or const values (ok false: neither).
func valueList(o *object) ([]any, bool) {
	if v, ok := o.vals["const"]; ok {
		return []any{v}, true
	}
	list, ok := o.vals["enum"].([]any)
	return list, ok
}

// writtenValues is the values schema s, as written, admits when it is an
// enum or const beside annotations only (through $refs); ok false
// otherwise.
func (c *schemaCompiler) writtenValues(s any, depth int) ([]any, bool) {
	o, ok := s.(*object)
	if !ok || depth > MaxSchemaInline || !c.work.charge(1+len(o.keys)) {
		return nil, false
	}
	if r, ok := o.vals["$ref"]; ok && (len(o.keys) == 1 || c.refAlone) {
		t, err := c.resolve(r, "")
		if err != nil {
			return nil, false
		}
		return c.writtenValues(t, depth+1)
	}
	for _, k := range o.keys {
		if schemaKeywords[k] && k != "enum" && k != "const" && k != "type" {
			return nil, false
		}
	}
	return valueList(o)
}

// requirable is a property a lists (and does not leave out) that schema
// b, as written, refuses: a's output can always write it.
func (c *schemaCompiler) requirable(a *object, b any) (string, bool) {
	props, _ := a.vals["properties"].(*object)
	if props == nil {
		return "", false
	}
	forbidden := stringList(a.vals[forbidKey])
	for _, p := range props.keys {
		if !slices.Contains(forbidden, p) && c.refusesName(b, p, 0) {
			return p, true
		}
	}
	return "", false
}

// forbiddable is a property b requires that a does not, so that a's
// output can leave it out (one a leaves out already, where there is one).
func (c *schemaCompiler) forbiddable(a, b *object) (string, bool) {
	req, other := stringList(a.vals["required"]), stringList(b.vals["required"])
	if !c.work.reserve(1 + len(req)*len(other)) {
		return "", false
	}
	forbidden := stringList(a.vals[forbidKey])
	if !c.work.reserve(len(forbidden) * len(other)) {
		return "", false
	}
	for _, p := range other {
		if slices.Contains(forbidden, p) {
			return p, true // a already leaves it out
		}
	}
	for _, p := range other {
		if !slices.Contains(req, p) {
			return p, true
		}
	}
	return "", false
}

func withForbidden(o *object, names ...string) *object {
	out := without(o)
	list, _ := out.vals[forbidKey].([]any)
	list = slices.Clone(list)
	for _, n := range names {
		list = append(list, n)
	}
	if _, ok := out.vals[forbidKey]; !ok {
		out.keys = append(out.keys, forbidKey)
	}
	out.vals[forbidKey] = list
	return out
}

// splitIfThenElse rewrites if/then/else as an anyOf where if tells
// objects apart by properties' values ({"properties": {"p": {"const" or
// "enum": ...}, ...}}, with "required" of some of them or without):
// either the object meets if and then, or one of those properties is
// present with none of its values, or a required one is absent, and the
// object meets else. ok is false for other ifs.
func splitIfThenElse(o *object) (dependencySplit, bool) {
	cond, ok := o.vals["if"].(*object)
	if !ok {
		return dependencySplit{}, false
	}
	props, _ := cond.vals["properties"].(*object)
	if props == nil || len(props.keys) == 0 {
		return dependencySplit{}, false
	}
	required := stringList(cond.vals["required"])
	for _, k := range cond.keys {
		if k != "properties" && k != "required" && schemaKeywords[k] {
			return dependencySplit{}, false
		}
	}
	var fails []any // each an object failing if
	for _, p := range props.keys {
		ps, _ := props.vals[p].(*object)
		if ps == nil {
			return dependencySplit{}, false
		}
		var values []any
		for _, k := range ps.keys {
			switch {
			case k == "const":
				values = []any{ps.vals[k]}
			case k == "enum":
				values, _ = ps.vals[k].([]any)
			case schemaKeywords[k]:
				return dependencySplit{}, false
			}
		}
		if len(values) == 0 {
			return dependencySplit{}, false
		}
		fails = append(fails, &object{keys: []string{"type", "required", "properties"}, vals: map[string]any{
			"type": "object", "required": []any{p},
			"properties": &object{keys: []string{p}, vals: map[string]any{p: &object{keys: []string{"not"}, vals: map[string]any{
				"not": &object{keys: []string{"enum"}, vals: map[string]any{"enum": values}}}}}},
		}})
	}
	for _, p := range required { // without p, if fails too
		fails = append(fails, withForbidden(&object{vals: map[string]any{}}, p))
	}
	meets := &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{cond, cmpOrAny(o.vals["then"], hasKey(o, "then"))}}}
	alts := []any{meets}
	for _, f := range fails {
		if e, ok := o.vals["else"]; ok {
			f = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{f, e}}}
		}
		alts = append(alts, f)
	}
	return dependencySplit{without(o, "if", "then", "else"), &object{keys: []string{"anyOf"}, vals: map[string]any{"anyOf": alts}}}, true
}

// splitIfByNot rewrites if/then/else as an anyOf of if and then, or not
// if and else: exact where not can be written of if (required, type, enum,
// const, ...); otherwise an error naming if.
func (c *schemaCompiler) splitIfByNot(o *object, at string, depth int) (dependencySplit, error) {
	cond := o.vals["if"]
	if _, err := c.applyNot(&object{vals: map[string]any{}}, cond, at+".if", depth); err != nil && !errors.Is(err, errNothing) {
		if c.work.Err() != nil {
			return dependencySplit{}, err
		}
		return dependencySplit{}, fmt.Errorf("schema%s: keyword \"if\" is supported where it tests properties' const or enum values, or where \"not\" of it can be written (%v)", at, err)
	}
	meets := &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{cond, cmpOrAny(o.vals["then"], hasKey(o, "then"))}}}
	fails := &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{
		&object{keys: []string{"not"}, vals: map[string]any{"not": cond}}, cmpOrAny(o.vals["else"], hasKey(o, "else"))}}}
	return dependencySplit{without(o, "if", "then", "else"), &object{keys: []string{"anyOf"}, vals: map[string]any{"anyOf": []any{meets, fails}}}}, nil
}

// maxSchemaDependencies is how many properties with schema dependencies
// an object may have (they make 2^n alternatives).
const maxSchemaDependencies = 3

type dependencySplit struct{ base, alternatives *object }

// splitSchemaDependencies rewrites o's schema dependencies (dependencies
// with a schema, dependentSchemas) as an anyOf: for each such property,
// either it is absent or it is present and the object meets its schema.
// ok is false where o has none, or more than maxSchemaDependencies (left
// for object to refuse).
func splitSchemaDependencies(o *object) (dependencySplit, bool) {
	base := without(o)
	var names []string
	var schemas []any
	for _, key := range []string{"dependencies", "dependentSchemas"} {
		d, _ := o.vals[key].(*object)
		if d == nil {
			continue
		}
		rest := &object{vals: map[string]any{}}
		for _, k := range d.keys {
			if _, list := d.vals[k].([]any); list {
				rest.keys = append(rest.keys, k)
				rest.vals[k] = d.vals[k]
				continue
			}
			names = append(names, k)
			schemas = append(schemas, d.vals[k])
		}
		base = without(base, key)
		if len(rest.keys) > 0 {
			base.keys = append(base.keys, key)
			base.vals[key] = rest
		}
	}
	if len(names) == 0 || len(names) > maxSchemaDependencies {
		return dependencySplit{}, false
	}
	alts := []any{&object{vals: map[string]any{}}}
	for i, name := range names {
		var next []any
		for _, a := range alts {
			absent := withForbidden(a.(*object), name)
			present := &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{
				a, &object{keys: []string{"required"}, vals: map[string]any{"required": []any{name}}}, schemas[i]}}}
			next = append(next, absent, present)
		}
		alts = next
	}
	return dependencySplit{base, &object{keys: []string{"anyOf"}, vals: map[string]any{"anyOf": alts}}}, true
}

// normalize folds allOf, if/then/else, not and a $ref with sibling
// keywords into one schema object.
func (c *schemaCompiler) normalize(o *object, at string, depth int) (*object, error) {
	if depth > MaxSchemaInline {
		return nil, fmt.Errorf("schema%s: $ref and allOf nest too deeply (more than %d within one another)", at, MaxSchemaInline)
	}
	if err := c.spend(1, at); err != nil {
		return nil, err
	}
	_, hasAll := o.vals["allOf"]
	_, hasIf := o.vals["if"]
	_, hasNot := o.vals["not"]
	ref, hasRef := o.vals["$ref"]
	if hasRef && c.refAlone {
		return &object{keys: []string{"$ref"}, vals: map[string]any{"$ref": ref}}, nil
	}
	if split, ok := splitIfThenElse(o); ok {
		o, err := c.merge(split.base, split.alternatives, at)
		if err != nil {
			return nil, err
		}
		return c.normalize(o, at, depth+1)
	}
	if hasIf {
		split, err := c.splitIfByNot(o, at, depth)
		if err != nil {
			return nil, err
		}
		o, err := c.merge(split.base, split.alternatives, at)
		if err != nil {
			return nil, err
		}
		return c.normalize(o, at, depth+1)
	}
	if split, ok := splitSchemaDependencies(o); ok {
		o, err := c.merge(split.base, split.alternatives, at)
		if err != nil {
			return nil, err
		}
		return c.normalize(o, at, depth+1)
	}
	refSiblings := hasRef && constraining(without(o, "$ref", "$defs", "definitions"))
	if !hasAll && !hasIf && !hasNot && !refSiblings {
		return o, nil
	}
	base := without(o, "allOf", "if", "then", "else", "not")
	var err error
	if refSiblings {
		base = without(base, "$ref")
		t, err := c.inline(&object{keys: []string{"$ref"}, vals: map[string]any{"$ref": ref}}, at, depth+1)
		if err != nil {
			return nil, err
		}
		if base, err = c.merge(t, base, at); err != nil {
			return nil, err
		}
	}
	if hasAll {
		list, ok := o.vals["allOf"].([]any)
		if !ok {
			return nil, fmt.Errorf("schema%s.allOf: expected an array", at)
		}
		for i, e := range list {
			eat := fmt.Sprintf("%s.allOf[%d]", at, i)
			eo, err := c.inline(e, eat, depth+1)
			if err != nil {
				return nil, err
			}
			if base, err = c.merge(base, eo, eat); err != nil {
				return nil, err
			}
		}
	}
	if hasNot {
		if base, err = c.applyNot(base, o.vals["not"], at+".not", depth); err != nil {
			return nil, err
		}
	}
	return c.normalize(base, at, depth+1)
}

// inline resolves s's $ref chain into a normalized schema object.
func (c *schemaCompiler) inline(s any, at string, depth int) (*object, error) {
	if depth > MaxSchemaInline {
		return nil, fmt.Errorf("schema%s: $ref and allOf nest too deeply (more than %d within one another)", at, MaxSchemaInline)
	}
	if err := c.spend(1, at); err != nil {
		return nil, err
	}
	switch s := s.(type) {
	case bool:
		if s {
			return &object{vals: map[string]any{}}, nil
		}
		return nil, nothingf("schema%s: false matches nothing", at)
	case *object:
		if r, ok := s.vals["$ref"]; ok {
			target, err := c.resolve(r, at)
			if err != nil {
				return nil, err
			}
			t, err := c.inline(target, at+".$ref", depth+1)
			if err != nil {
				return nil, err
			}
			rest := without(s, "$ref", "$defs", "definitions")
			if !constraining(rest) || c.refAlone {
				return t, nil
			}
			rest, err = c.normalize(rest, at, depth+1)
			if err != nil {
				return nil, err
			}
			return c.merge(t, rest, at)
		}
		return c.normalize(s, at, depth+1)
	}
	return nil, fmt.Errorf("schema%s: expected an object or a boolean", at)
}

// applyNot adds what not's schema n excludes to o: required properties
// (one is never generated), types, or values; not of an anyOf excludes
// each branch.
func (c *schemaCompiler) applyNot(o *object, n any, at string, depth int) (*object, error) {
	if n == false { // not of false: every value
		return o, nil
	}
	if admitsEvery(n) {
		return nil, nothingf("schema%s: \"not\" of a schema every value meets admits nothing", at)
	}
	if no, ok := n.(*object); ok && len(without(no, "description", "title").keys) == 1 {
		if nn, ok := no.vals["not"]; ok { // not of not: the schema itself
			inner, err := c.inline(nn, at+".not", depth+1)
			if err != nil {
				return nil, err
			}
			return c.merge(o, inner, at)
		}
	}
	no, err := c.inline(n, at, depth+1)
	if err != nil {
		return nil, err
	}
	keys := without(no, "description", "title")
	if list, ok := no.vals["anyOf"].([]any); ok && len(keys.keys) == 1 {
		for i, b := range list {
			if o, err = c.applyNot(o, b, fmt.Sprintf("%s.anyOf[%d]", at, i), depth+1); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
	var only []string
	for _, k := range no.keys {
		if schemaKeywords[k] {
			only = append(only, k)
		}
	}
	add := func(key string, vals []any) *object {
		out := without(o)
		list, _ := out.vals[key].([]any)
		if _, ok := out.vals[key]; !ok {
			out.keys = append(out.keys, key)
		}
		out.vals[key] = append(slices.Clone(list), vals...)
		return out
	}
	switch {
	case slices.Equal(only, []string{"required"}):
		// Not all of them: one of those o does not require is absent.
		req := stringList(o.vals["required"])
		var alts []any
		for _, p := range stringList(no.vals["required"]) {
			if !slices.Contains(req, p) {
				alts = append(alts, withForbidden(&object{vals: map[string]any{}}, p))
			}
		}
		switch {
		case len(alts) == 1:
			return withForbidden(o, stringList(alts[0].(*object).vals[forbidKey])...), nil
		case len(alts) > 1:
			return c.merge(o, &object{keys: []string{"anyOf"}, vals: map[string]any{"anyOf": alts}}, at)
		}
	case slices.Equal(only, []string{"type"}):
		types, err := typeList(no, at)
		if err != nil {
			return nil, err
		}
		var vals []any
		for _, t := range types {
			vals = append(vals, t)
		}
		return add(notTypesKey, vals), nil
	case slices.Equal(only, []string{"enum"}):
		list, _ := no.vals["enum"].([]any)
		return add(notValuesKey, list), nil
	case slices.Equal(only, []string{"const"}):
		return add(notValuesKey, []any{no.vals["const"]}), nil
	}
	return nil, fmt.Errorf("schema%s: keyword \"not\" is supported with required, type, enum or const", at)
}

// resolve finds a local reference's target (#, #/$defs/NAME, or any JSON
// pointer into the root schema).
func (c *schemaCompiler) resolve(r any, at string) (any, error) {
	ref, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("schema%s.$ref: expected a string", at)
	}
	if err := c.spend(1+len(ref), at); err != nil {
		return nil, err
	}
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("schema%s.$ref: only local references (#/$defs/NAME) are supported, got %q", at, ref)
	}
	target := c.root
	if ref == "#" {
		return target, nil
	}
	for _, p := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		switch t := target.(type) {
		case *object:
			if target, ok = t.vals[p]; !ok {
				return nil, fmt.Errorf("schema%s.$ref: %q does not resolve", at, ref)
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(t) {
				return nil, fmt.Errorf("schema%s.$ref: %q does not resolve", at, ref)
			}
			target = t[i]
		default:
			return nil, fmt.Errorf("schema%s.$ref: %q does not resolve", at, ref)
		}
	}
	return target, nil
}

// ref resolves a local reference to its rule, compiling it once.
func (c *schemaCompiler) ref(r any, at string) (string, error) {
	target, err := c.resolve(r, at)
	if err != nil {
		return "", err
	}
	ref := r.(string)
	if name, ok := c.refs[ref]; ok {
		return name, nil
	}
	name := c.ruleName("ref-" + strings.TrimPrefix(ref, "#/"))
	c.refs[ref] = name // set before compiling: recursive schemas refer to it
	c.refOrder = append(c.refOrder, ref)
	body, err := c.body(name, target, at+".$ref")
	if err != nil {
		return "", err
	}
	c.emit(name + " ::= " + body)
	return name, nil
}
