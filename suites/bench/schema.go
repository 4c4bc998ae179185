package bench

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// SchemaJSON is the JSON Schema (draft 2020-12) of the report, schema.json.
//
//go:embed schema.json
var SchemaJSON []byte

// Validate checks a report's JSON text against SchemaJSON and returns every
// violation, each naming its JSON path.
func Validate(doc []byte) error {
	var s, d any
	if err := json.Unmarshal(SchemaJSON, &s); err != nil {
		return fmt.Errorf("schema.json: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return ValidateValue(s, d)
}

// ValidateValue validates a decoded JSON value (numbers as json.Number or
// float64) against a decoded schema. It supports the keywords schema.json
// uses: type, properties, required, additionalProperties (boolean), items,
// anyOf, enum, const, minimum, minItems, $ref to "#/$defs/NAME", and the
// annotations $schema, $id, title, description, $defs. Any other keyword
// is an error, so a schema cannot silently rely on an unchecked keyword.
func ValidateValue(schema, doc any) error {
	root, ok := schema.(map[string]any)
	if !ok {
		return errors.New("schema: root is not an object")
	}
	v := &validator{root: root}
	v.check("$", root, doc)
	sort.Strings(v.errs)
	if len(v.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(v.errs, "\n"))
}

type validator struct {
	root map[string]any
	errs []string
}

func (v *validator) fail(path, f string, args ...any) {
	v.errs = append(v.errs, path+": "+fmt.Sprintf(f, args...))
}

func (v *validator) check(path string, s map[string]any, d any) {
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := v.root["$defs"].(map[string]any)
		target, _ := defs[name].(map[string]any)
		if !found || target == nil {
			v.fail(path, "schema: unresolved $ref %q", ref)
			return
		}
		s = target
	}
	for k := range s {
		switch k {
		case "$ref", "$schema", "$id", "title", "description", "$defs", "type", "properties", "required",
			"additionalProperties", "items", "enum", "const", "minimum", "minItems", "anyOf":
		default:
			v.fail(path, "schema: unsupported keyword %q", k)
		}
	}
	if alts, ok := s["anyOf"].([]any); ok {
		matched := false
		for _, alt := range alts {
			sub := &validator{root: v.root}
			if as, ok := alt.(map[string]any); ok {
				sub.check(path, as, d)
				matched = matched || len(sub.errs) == 0
			}
		}
		if !matched {
			v.fail(path, "matches no anyOf alternative")
		}
	}
	if t, ok := s["type"]; ok && !v.typeOK(t, d) {
		v.fail(path, "type %s, want %v", jsonType(d), t)
		return
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return equal(x, d) }) {
		v.fail(path, "%v is not one of %v", d, e)
	}
	if c, ok := s["const"]; ok && !equal(c, d) {
		v.fail(path, "%v, want %v", d, c)
	}
	if min, ok := s["minimum"]; ok {
		if x, isNum := number(d); isNum {
			if m, _ := number(min); x < m {
				v.fail(path, "%v < minimum %v", x, m)
			}
		}
	}
	switch d := d.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := d[r.(string)]; !ok {
					v.fail(path, "missing required %q", r)
				}
			}
		}
		for k, x := range d {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if ap, set := s["additionalProperties"].(bool); set && !ap {
					v.fail(path, "unexpected property %q", k)
				}
				continue
			}
			v.check(path+"."+k, ps, x)
		}
	case []any:
		if mi, ok := s["minItems"]; ok {
			if m, _ := number(mi); float64(len(d)) < m {
				v.fail(path, "%d items, want at least %v", len(d), m)
			}
		}
		if is, ok := s["items"].(map[string]any); ok {
			for i, x := range d {
				v.check(fmt.Sprintf("%s[%d]", path, i), is, x)
			}
		}
	}
}

func (v *validator) typeOK(t, d any) bool {
	switch t := t.(type) {
	case string:
		return typeIs(t, d)
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && typeIs(s, d) {
				return true
			}
		}
	}
	return false
}

func typeIs(t string, d any) bool {
	switch t {
	case "integer":
		x, ok := number(d)
		return ok && x == math.Trunc(x) && !math.IsInf(x, 0)
	case "number":
		_, ok := number(d)
		return ok
	default:
		return jsonType(d) == t
	}
}

func jsonType(d any) string {
	switch d.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", d)
}

func number(d any) (float64, bool) {
	switch d := d.(type) {
	case json.Number:
		f, err := d.Float64()
		return f, err == nil
	case float64:
		return d, true
	}
	return 0, false
}

func equal(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return fmt.Sprint(a) == fmt.Sprint(b) && jsonType(a) == jsonType(b)
}
