package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
)

// merge is one schema object that admits what both a and b admit (allOf),
// or an error naming the keyword the two constrain in ways one schema
// cannot express.
func (c *schemaCompiler) merge(a, b *object, at string) (*object, error) {
	if err := c.spend(1+len(a.keys)+len(b.keys), at); err != nil {
		return nil, err
	}
	a, b = c.crossAdditional(a, b), c.crossAdditional(b, a)
	out := &object{keys: slices.Clone(a.keys), vals: maps.Clone(a.vals)}
	set := func(k string, v any) {
		if _, ok := out.vals[k]; !ok {
			out.keys = append(out.keys, k)
		}
		out.vals[k] = v
	}
	allOf := func(x, y any) any {
		return &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{x, y}}}
	}
	for _, k := range b.keys {
		bv := b.vals[k]
		av, ok := a.vals[k]
		if !ok {
			set(k, bv)
			continue
		}
		if c.same(av, bv) {
			continue
		}
		if err := c.spend(memberCount(av)+memberCount(bv), at); err != nil {
			return nil, err
		}
		switch k {
		case "type":
			ta, err := typeList(a, at)
			if err != nil {
				return nil, err
			}
			tb, err := typeList(b, at)
			if err != nil {
				return nil, err
			}
			var both []any
			for _, t := range ta {
				switch {
				case typeAdmits(tb, t):
					both = append(both, t)
				case t == "number" && slices.Contains(tb, "integer"):
					both = append(both, "integer")
				}
			}
			if len(both) == 0 {
				return nil, nothingf("schema%s: allOf: the types %v and %v exclude each other", at, ta, tb)
			}
			set(k, both)
		case "properties", "patternProperties", "dependentSchemas":
			m, err := mergeMembers(av, bv, func(name string, x, y any) (any, error) { return allOf(x, y), nil })
			if err != nil {
				return nil, fmt.Errorf("schema%s.%s: %w", at, k, err)
			}
			set(k, m)
		case "required", forbidKey, notTypesKey, notValuesKey:
			la, _ := av.([]any)
			lb, _ := bv.([]any)
			u := slices.Clone(la)
			in := map[string]bool{}
			for _, e := range u {
				if b, err := valueKeyWork(e, c.work); err == nil {
					in[string(b)] = true
				}
			}
			for _, e := range lb {
				b, err := valueKeyWork(e, c.work)
				if err != nil || !in[string(b)] {
					u = append(u, e)
					in[string(b)] = true
				}
			}
			set(k, u)
		case "additionalProperties", "propertyNames", "items", "additionalItems":
			if _, isList := av.([]any); isList {
				return nil, fmt.Errorf("schema%s: allOf: two different %q lists are not supported", at, k)
			}
			if _, isList := bv.([]any); isList {
				return nil, fmt.Errorf("schema%s: allOf: two different %q lists are not supported", at, k)
			}
			if f, ok := av.(bool); ok && !f {
				continue
			}
			if f, ok := bv.(bool); ok && !f {
				set(k, false)
				continue
			}
			set(k, allOf(av, bv))
		case "minimum", "minLength", "minItems", "minProperties", "maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMinimum", "exclusiveMaximum":
			na, okA := av.(json.Number)
			nb, okB := bv.(json.Number)
			if !okA || !okB {
				return nil, fmt.Errorf("schema%s: allOf: keyword %q differs", at, k)
			}
			ra, _ := new(big.Rat).SetString(string(na))
			rb, _ := new(big.Rat).SetString(string(nb))
			if ra == nil || rb == nil {
				return nil, fmt.Errorf("schema%s.%s: expected a number", at, k)
			}
			lower := k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties" || k == "exclusiveMinimum"
			if (ra.Cmp(rb) < 0) == lower {
				set(k, bv)
			}
		case "uniqueItems":
			set(k, true)
		case "multipleOf":
			na, _ := av.(json.Number)
			nb, _ := bv.(json.Number)
			ra, okA := new(big.Rat).SetString(string(na))
			rb, okB := new(big.Rat).SetString(string(nb))
			if !okA || !okB || ra.Sign() <= 0 || rb.Sign() <= 0 {
				return nil, fmt.Errorf("schema%s.multipleOf: expected a positive number", at)
			}
			switch {
			case new(big.Rat).Quo(ra, rb).IsInt():
			case new(big.Rat).Quo(rb, ra).IsInt():
				set(k, bv)
			default:
				return nil, fmt.Errorf("schema%s: allOf: keyword \"multipleOf\" with two divisors is not supported", at)
			}
		case "enum":
			la, _ := av.([]any)
			lb, _ := bv.([]any)
			both := c.intersectValues(la, lb)
			if len(both) == 0 {
				return nil, nothingf("schema%s: allOf: the enums share no value", at)
			}
			set(k, both)
		case "anyOf":
			la, _ := av.([]any)
			lb, _ := bv.([]any)
			if len(la)*len(lb) > 64 {
				return nil, fmt.Errorf("schema%s: allOf: two anyOf lists with more than 64 combinations are not supported", at)
			}
			var cross []any
			for _, x := range la {
				for _, y := range lb {
					cross = append(cross, allOf(x, y))
				}
			}
			set(k, cross)
		case "dependencies", "dependentRequired":
			m, err := mergeMembers(av, bv, func(name string, x, y any) (any, error) {
				if !c.same(x, y) {
					return nil, fmt.Errorf("allOf: two different dependencies of %q are not supported", name)
				}
				return x, nil
			})
			if err != nil {
				return nil, fmt.Errorf("schema%s.%s: %w", at, k, err)
			}
			set(k, m)
		case "$defs", "definitions":
		default:
			if schemaKeywords[k] {
				return nil, fmt.Errorf("schema%s: allOf: keyword %q differs between the schemas (not supported)", at, k)
			}
		}
	}
	return out, nil
}

// mergeMembers is the union of two objects' members; a name in both gets
// both(name, a's, b's).
func mergeMembers(a, b any, both func(name string, x, y any) (any, error)) (*object, error) {
	pa, okA := a.(*object)
	pb, okB := b.(*object)
	if !okA || !okB {
		return nil, fmt.Errorf("expected an object")
	}
	m := &object{keys: slices.Clone(pa.keys), vals: maps.Clone(pa.vals)}
	for _, name := range pb.keys {
		x, ok := m.vals[name]
		if !ok {
			m.keys = append(m.keys, name)
			m.vals[name] = pb.vals[name]
			continue
		}
		v, err := both(name, x, pb.vals[name])
		if err != nil {
			return nil, err
		}
		m.vals[name] = v
	}
	return m, nil
}

// crossAdditional applies other's additionalProperties to the properties
// o adds: they must meet it (or, when it is false, are never generated).
func (c *schemaCompiler) crossAdditional(o, other *object) *object {
	ap, ok := other.vals["additionalProperties"]
	if !ok {
		return o
	}
	props, _ := o.vals["properties"].(*object)
	if props == nil {
		return o
	}
	otherProps, _ := other.vals["properties"].(*object)
	otherPatterns, _ := other.vals["patternProperties"].(*object)
	if !c.work.reserve(len(props.keys) * (1 + memberCount(otherPatterns))) {
		return o // the compilation has stopped
	}
	out := without(o)
	newProps := &object{keys: slices.Clone(props.keys), vals: maps.Clone(props.vals)}
	var forbid []string
	for _, name := range props.keys {
		if otherProps != nil {
			if _, ok := otherProps.vals[name]; ok {
				continue
			}
		}
		if c.matchesAny(otherPatterns, name) {
			continue
		}
		if f, ok := ap.(bool); ok {
			if !f {
				forbid = append(forbid, name)
			}
			continue
		}
		newProps.vals[name] = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{props.vals[name], ap}}}
	}
	out.vals["properties"] = newProps
	if len(forbid) > 0 {
		out = withForbidden(out, forbid...)
	}
	return out
}

// matchesAny reports whether name matches one of patterns' keys (an
// uncompilable pattern counts as matching).
func (c *schemaCompiler) matchesAny(patterns *object, name string) bool {
	if patterns == nil {
		return false
	}
	for _, p := range patterns.keys {
		if ok, err := c.patternMatches(p, name); err != nil || ok {
			return true
		}
	}
	return false
}

// same reports whether two decoded JSON values are equal.
func (c *schemaCompiler) same(a, b any) bool {
	ab, err1 := valueKeyWork(a, c.work)
	bb, err2 := valueKeyWork(b, c.work)
	return err1 == nil && err2 == nil && bytes.Equal(ab, bb)
}

// memberCount is the number of members of v when it is an object (properties,
// patternProperties), else of elements when it is an array.
func memberCount(v any) int {
	switch v := v.(type) {
	case *object:
		if v != nil {
			return len(v.keys)
		}
	case []any:
		return len(v)
	}
	return 0
}
