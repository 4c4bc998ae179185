package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// FromSchema compiles a JSON Schema to GBNF whose sentences are JSON texts
// that validate against it. It supports type (one or a list), properties
// (generated in the schema's order; required ones always, optional ones
// when the model chooses, no others), additionalProperties for objects
// without properties, items, minItems, maxItems, minLength, maxLength,
// enum, const, anyOf, oneOf (as anyOf: the alternatives must not overlap),
// allOf of one schema, and local $ref (#/$defs/..., #/definitions/...).
// Annotations (title, description, default, examples, format, $schema,
// $id, strict) are ignored. Keywords that would need checks the grammar
// does not make (pattern, minimum, maximum, multipleOf, not, uniqueItems
// ...) are an error naming them, rather than output that may not validate.
func FromSchema(schema json.RawMessage) (string, error) {
	name, rules, err := SchemaRules(schema, "")
	if err != nil {
		return "", err
	}
	src := "root ::= " + name + "\n" + JSONRules + rules
	if _, err := Parse(src); err != nil { // a schema that refers to itself before any output
		return "", fmt.Errorf("schema: %w", err)
	}
	return src, nil
}

// SchemaRules compiles a JSON Schema (as FromSchema) to GBNF rules whose
// names start with prefix (letters, digits and '-'), to be combined with
// JSONRules and a root of the caller's; name is the schema's rule.
func SchemaRules(schema json.RawMessage, prefix string) (name, rules string, err error) {
	c := &schemaCompiler{names: map[string]bool{}, refs: map[string]string{}, prefix: prefix}
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", "", fmt.Errorf("schema: %w", err)
	}
	c.root = root
	if name, err = c.rule("value", root, ""); err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, r := range c.out {
		b.WriteString(r + "\n")
	}
	return name, b.String(), nil
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
	root  any
	out   []string
	names map[string]bool
	refs  map[string]string // $ref -> rule name
	// prefix starts every rule name.
	prefix string
}

// ruleName is a fresh rule name from hint.
func (c *schemaCompiler) ruleName(hint string) string {
	var b strings.Builder
	for _, r := range hint {
		if r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := c.prefix + "s-" + b.String()
	name := base
	for i := 2; c.names[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	c.names[name] = true
	return name
}

var ignoredKeywords = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"format": true, "$schema": true, "$id": true, "$comment": true, "strict": true, "$defs": true, "definitions": true,
	"readOnly": true, "writeOnly": true, "deprecated": true}

// rule adds the rule of schema s and returns its name; at is where s is,
// for errors.
func (c *schemaCompiler) rule(hint string, s any, at string) (string, error) {
	body, err := c.body(hint, s, at)
	if err != nil {
		return "", err
	}
	name := c.ruleName(hint)
	c.out = append(c.out, name+" ::= "+body)
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

func canonical(v any) ([]byte, error) {
	switch v := v.(type) {
	case *object:
		var b bytes.Buffer
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			vb, err := canonical(v.vals[k])
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
			eb, err := canonical(e)
			if err != nil {
				return nil, err
			}
			b.Write(eb)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func (c *schemaCompiler) body(hint string, s any, at string) (string, error) {
	if b, ok := s.(bool); ok {
		if !b {
			return "", fmt.Errorf("schema%s: false matches nothing", at)
		}
		return "value", nil
	}
	o, ok := s.(*object)
	if !ok {
		return "", fmt.Errorf("schema%s: expected an object or a boolean", at)
	}
	for _, k := range o.keys {
		switch k {
		case "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
			"minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref":
		default:
			if !ignoredKeywords[k] {
				return "", fmt.Errorf("schema%s: keyword %q is not supported", at, k)
			}
		}
	}
	if r, ok := o.vals["$ref"]; ok {
		return c.ref(r, at)
	}
	if v, ok := o.vals["const"]; ok {
		return jsonLiteral(v)
	}
	if v, ok := o.vals["enum"]; ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return "", fmt.Errorf("schema%s.enum: expected a non-empty array", at)
		}
		alts := make([]string, len(list))
		for i, e := range list {
			l, err := jsonLiteral(e)
			if err != nil {
				return "", err
			}
			alts[i] = l
		}
		return strings.Join(alts, " | "), nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := o.vals[k]; ok {
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return "", fmt.Errorf("schema%s.%s: expected a non-empty array", at, k)
			}
			alts := make([]string, len(list))
			for i, e := range list {
				name, err := c.rule(fmt.Sprintf("%s-%d", hint, i), e, fmt.Sprintf("%s.%s[%d]", at, k, i))
				if err != nil {
					return "", err
				}
				alts[i] = name
			}
			return strings.Join(alts, " | "), nil
		}
	}
	if v, ok := o.vals["allOf"]; ok {
		list, ok := v.([]any)
		if !ok || len(list) != 1 {
			return "", fmt.Errorf("schema%s.allOf: only one schema is supported", at)
		}
		return c.body(hint, list[0], at+".allOf[0]")
	}
	var types []string
	switch t := o.vals["type"].(type) {
	case nil:
		switch {
		case o.vals["properties"] != nil || o.vals["additionalProperties"] != nil:
			types = []string{"object"}
		case o.vals["items"] != nil:
			types = []string{"array"}
		default:
			return "value", nil
		}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("schema%s.type: expected strings", at)
			}
			types = append(types, s)
		}
		if len(types) == 0 {
			return "", fmt.Errorf("schema%s.type: an empty list allows no value; list at least one type", at)
		}
	default:
		return "", fmt.Errorf("schema%s.type: expected a string or an array of strings", at)
	}
	var alts []string
	for _, t := range types {
		b, err := c.typed(hint, t, o, at)
		if err != nil {
			return "", err
		}
		alts = append(alts, "( "+b+" )")
	}
	return strings.Join(alts, " | "), nil
}

func count(o *object, key, at string) (int, bool, error) {
	v, ok := o.vals[key]
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false, fmt.Errorf("schema%s.%s: expected an integer", at, key)
	}
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 0 || i > 1000 {
		return 0, false, fmt.Errorf("schema%s.%s: expected an integer in [0, 1000]", at, key)
	}
	return i, true, nil
}

func repeat(item string, lo, hi int, hasHi bool) string {
	if hasHi {
		return fmt.Sprintf("%s{%d,%d}", item, lo, hi)
	}
	return fmt.Sprintf("%s{%d,}", item, lo)
}

func (c *schemaCompiler) typed(hint, t string, o *object, at string) (string, error) {
	switch t {
	case "null":
		return `"null"`, nil
	case "boolean":
		return `"true" | "false"`, nil
	case "integer":
		return "integer", nil
	case "number":
		return "number", nil
	case "string":
		lo, _, err := count(o, "minLength", at)
		if err != nil {
			return "", err
		}
		hi, hasHi, err := count(o, "maxLength", at)
		if err != nil {
			return "", err
		}
		if !hasHi && lo == 0 {
			return "string", nil
		}
		return `"\"" ` + repeat("char", lo, hi, hasHi) + ` "\""`, nil
	case "array":
		item := "value"
		if it, ok := o.vals["items"]; ok {
			name, err := c.rule(hint+"-item", it, at+".items")
			if err != nil {
				return "", err
			}
			item = name
		}
		lo, _, err := count(o, "minItems", at)
		if err != nil {
			return "", err
		}
		hi, hasHi, err := count(o, "maxItems", at)
		if err != nil {
			return "", err
		}
		if hasHi && hi < lo {
			return "", fmt.Errorf("schema%s: maxItems is below minItems", at)
		}
		switch {
		case hasHi && hi == 0:
			return `"[" ws "]"`, nil
		case lo == 0:
			more := `( "," ws ` + item + ` ws )*`
			if hasHi {
				more = repeat(`( "," ws `+item+` ws )`, 0, hi-1, true)
			}
			return `"[" ws ( ` + item + ` ws ` + more + ` )? "]"`, nil
		}
		more := repeat(`( "," ws `+item+` ws )`, lo-1, hi-1, hasHi)
		return `"[" ws ` + item + ` ws ` + more + ` "]"`, nil
	case "object":
		return c.object(hint, o, at)
	}
	return "", fmt.Errorf("schema%s.type: unknown type %q", at, t)
}

func (c *schemaCompiler) object(hint string, o *object, at string) (string, error) {
	props, _ := o.vals["properties"].(*object)
	if props == nil || len(props.keys) == 0 {
		value := "value"
		if ap, ok := o.vals["additionalProperties"]; ok {
			if b, isBool := ap.(bool); isBool && !b {
				return `"{" ws "}"`, nil
			}
			name, err := c.rule(hint+"-extra", ap, at+".additionalProperties")
			if err != nil {
				return "", err
			}
			value = name
		}
		member := `string ws ":" ws ` + value + ` ws`
		return `"{" ws ( ` + member + ` ( "," ws ` + member + ` )* )? "}"`, nil
	}
	required := map[string]bool{}
	if r, ok := o.vals["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return "", fmt.Errorf("schema%s.required: expected an array of names", at)
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("schema%s.required: expected an array of names", at)
			}
			if _, known := props.vals[s]; !known {
				return "", fmt.Errorf("schema%s.required: %q is not among the properties (other properties are not generated)", at, s)
			}
			required[s] = true
		}
	}
	keys := props.keys
	kv := make([]string, len(keys))
	for i, k := range keys {
		name, err := c.rule(hint+"-"+k, props.vals[k], at+".properties."+k)
		if err != nil {
			return "", err
		}
		kv[i] = literal(mustJSON(k)) + ` ws ":" ws ` + name + ` ws`
	}
	// after[i]: properties i.. once one has been written (each after a
	// comma); first[i]: properties i.. before any (no comma first).
	n := len(keys)
	after := make([]string, n+1)
	first := make([]string, n+1)
	after[n], first[n] = "", ""
	for i := n - 1; i >= 0; i-- {
		a := c.ruleName(hint + "-after")
		if required[keys[i]] {
			c.out = append(c.out, a+` ::= "," ws `+kv[i]+" "+after[i+1])
		} else {
			c.out = append(c.out, a+` ::= ( "," ws `+kv[i]+" )? "+after[i+1])
		}
		after[i] = a
		f := c.ruleName(hint + "-first")
		if required[keys[i]] {
			c.out = append(c.out, f+" ::= "+kv[i]+" "+after[i+1])
		} else {
			rest := first[i+1]
			if rest == "" {
				rest = `""`
			}
			c.out = append(c.out, f+" ::= "+kv[i]+" "+after[i+1]+" | "+rest)
		}
		first[i] = f
	}
	return `"{" ws ` + first[0] + ` "}"`, nil
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ref resolves a local reference to its rule, compiling it once.
func (c *schemaCompiler) ref(r any, at string) (string, error) {
	ref, ok := r.(string)
	if !ok {
		return "", fmt.Errorf("schema%s.$ref: expected a string", at)
	}
	if name, ok := c.refs[ref]; ok {
		return name, nil
	}
	var path []string
	switch {
	case strings.HasPrefix(ref, "#/$defs/"), strings.HasPrefix(ref, "#/definitions/"):
		path = strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	case ref == "#":
	default:
		return "", fmt.Errorf("schema%s.$ref: only local references (#/$defs/NAME) are supported, got %q", at, ref)
	}
	target := c.root
	for _, p := range path {
		o, ok := target.(*object)
		if !ok {
			return "", fmt.Errorf("schema%s.$ref: %q does not resolve", at, ref)
		}
		if target, ok = o.vals[p]; !ok {
			return "", fmt.Errorf("schema%s.$ref: %q does not resolve", at, ref)
		}
	}
	name := c.ruleName("ref-" + strings.Join(path, "-"))
	c.refs[ref] = name // set before compiling: recursive schemas refer to it
	body, err := c.body(name, target, at+".$ref")
	if err != nil {
		return "", err
	}
	c.out = append(c.out, name+" ::= "+body)
	return name, nil
}
