package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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
	if err != nil {
		f, ferr := strconv.ParseFloat(n.String(), 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, false, fmt.Errorf("schema%s.%s: expected an integer", at, key)
		}
		i = int(f)
	}
	if i < 0 {
		return 0, false, fmt.Errorf("schema%s.%s: expected a non-negative integer", at, key)
	}
	if i > 1000 {
		if strings.HasPrefix(key, "max") {
			return 0, false, nil // no bound the output comes near
		}
		return 0, false, fmt.Errorf("schema%s: keyword %q above 1000 is not supported", at, key)
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
		if slices.Contains(excludedValues(o), nil) {
			return "", nothingf("schema%s: \"not\" excludes null", at)
		}
		return `"null"`, nil
	case "boolean":
		var alts []string
		for _, b := range []bool{true, false} {
			if !slices.Contains(excludedValues(o), any(b)) {
				alts = append(alts, literal(strconv.FormatBool(b)))
			}
		}
		if len(alts) == 0 {
			return "", nothingf("schema%s: \"not\" excludes both booleans", at)
		}
		return strings.Join(alts, " | "), nil
	case "integer":
		return c.integerRule(o, at)
	case "number":
		return c.numberRule(o, at)
	case "string":
		return c.stringRule(o, at)
	case "array":
		return c.array(hint, o, at)
	case "object":
		return c.object(hint, o, at)
	}
	return "", fmt.Errorf("schema%s.type: unknown type %q", at, t)
}

// excludedValues is the values a not of enum or const excludes from o.
func excludedValues(o *object) []any {
	list, _ := o.vals[notValuesKey].([]any)
	return list
}

// stringRule is GBNF for the strings o admits: minLength, maxLength,
// pattern and format.
func (c *schemaCompiler) stringRule(o *object, at string) (string, error) {
	lo, _, err := count(o, "minLength", at)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := count(o, "maxLength", at)
	if err != nil {
		return "", err
	}
	if hasHi && hi < lo {
		return "", nothingf("schema%s: maxLength is below minLength", at)
	}
	var excluded []string // strings not to write (not of enum or const)
	for _, v := range excludedValues(o) {
		if s, ok := v.(string); ok {
			excluded = append(excluded, s)
		}
	}
	pattern, hasPattern := o.vals["pattern"].(string)
	keyword := "pattern"
	var alsoFormat string // a format the pattern's strings must match too
	if f, ok := o.vals["format"].(string); ok {
		switch p, known := formatPatterns[f]; {
		case known && hasPattern:
			alsoFormat = f
		case known:
			pattern, hasPattern, keyword = p, true, "format"
		case assertedFormats[f]:
			return "", fmt.Errorf("schema%s: keyword \"format\": %q is not supported", at, f)
		}
	}
	if len(excluded) > 0 && !hasPattern && !hasHi && lo == 0 {
		return c.otherName("string", excluded), nil
	}
	if len(excluded) > 0 {
		return c.stringExcluding(pattern, hasPattern, alsoFormat, keyword, excluded, lo, hi, hasHi, at)
	}
	if !hasPattern {
		if !hasHi && lo == 0 {
			return "string", nil
		}
		return `"\"" ` + repeat("char", lo, hi, hasHi) + ` "\""`, nil
	}
	if len(pattern) > MaxSchemaPattern {
		return "", fmt.Errorf("schema%s.pattern: longer than %d characters", at, MaxSchemaPattern)
	}
	if err := c.spend(len(pattern), at); err != nil {
		return "", err
	}
	if alsoFormat != "" {
		return c.patternAndFormat(pattern, alsoFormat, lo, hi, hasHi, at)
	}
	re, err := parseRegex(pattern)
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword %q: %v", at, keyword, err)
	}
	if !hasHi {
		hi = -1
	}
	if re.hasLook() {
		return c.patternAndLength(re, keyword, lo, hi, hasHi, at)
	}
	if re, ok := re.withLength(lo, hi); ok {
		if g, ok := re.gbnf(); ok {
			if err := c.spend(len(g), at); err != nil {
				return "", err
			}
			return `"\"" ` + g + ` "\""`, nil
		}
		return "", fmt.Errorf("schema%s: keyword %q: no string a JSON text can hold matches %q", at, keyword, pattern)
	}
	return c.patternAndLength(re, keyword, lo, hi, hasHi, at)
}

// array is GBNF for the arrays o admits: items, prefixItems (or draft-04
// items lists with additionalItems), minItems, maxItems and uniqueItems
// (with maxItems 1 or less only).
func (c *schemaCompiler) array(hint string, o *object, at string) (string, error) {
	lo, _, err := count(o, "minItems", at)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := count(o, "maxItems", at)
	if err != nil {
		return "", err
	}
	if u, _ := o.vals["uniqueItems"].(bool); u && (!hasHi || hi > 1) {
		return "", fmt.Errorf("schema%s: keyword \"uniqueItems\" is supported only with maxItems 1 or less (the grammar cannot compare items)", at)
	}
	if hasHi && hi < lo {
		return "", nothingf("schema%s: maxItems is below minItems", at)
	}
	var prefix []any
	var rest any = true
	if p, ok := o.vals["prefixItems"].([]any); ok {
		prefix = p
		if it, ok := o.vals["items"]; ok {
			rest = it
		}
	} else if p, ok := o.vals["items"].([]any); ok {
		prefix = p
		if it, ok := o.vals["additionalItems"]; ok {
			rest = it
		}
	} else if it, ok := o.vals["items"]; ok {
		rest = it
	}
	if hasHi && len(prefix) > hi {
		prefix = prefix[:hi]
	}
	restRule := ""
	restHi, restHasHi := 0, true
	if hasHi {
		restHi = hi - len(prefix)
	} else {
		restHasHi = false
	}
	if f, ok := rest.(bool); ok && !f {
		restHi, restHasHi = 0, true
	} else if !restHasHi || restHi > 0 {
		m := c.mark()
		name, err := c.rule(hint+"-item", rest, at+".items")
		if err != nil {
			if !errors.Is(err, errNothing) || max(lo-len(prefix), 0) > 0 {
				return "", err
			}
			c.rollback(m)
			restHi, restHasHi = 0, true // no further item is valid
		} else {
			restRule = name
		}
	}
	restLo := max(lo-len(prefix), 0)
	if restHasHi && restHi < restLo {
		return "", nothingf("schema%s: minItems needs more items than the schema allows", at)
	}
	if len(prefix) == 0 {
		switch {
		case restHasHi && restHi == 0:
			return `"[" ws "]"`, nil
		case restLo == 0:
			more := `( "," ws ` + restRule + ` ws )*`
			if restHasHi {
				more = repeat(`( "," ws `+restRule+` ws )`, 0, restHi-1, true)
			}
			return `"[" ws ( ` + restRule + ` ws ` + more + ` )? "]"`, nil
		}
		more := repeat(`( "," ws `+restRule+` ws )`, restLo-1, restHi-1, restHasHi)
		return `"[" ws ` + restRule + ` ws ` + more + ` "]"`, nil
	}
	tail := `""`
	if restRule != "" && (!restHasHi || restHi > 0) {
		tail = repeat(`( "," ws `+restRule+` ws )`, restLo, restHi, restHasHi)
	}
	// Prefix items from the last: item i is optional from minItems on,
	// and what follows it comes only with it.
	seq := tail
	for i := len(prefix) - 1; i >= 0; i-- {
		if err := c.spend(1+len(seq), at); err != nil {
			return "", err
		}
		name, err := c.rule(fmt.Sprintf("%s-%d", hint, i), prefix[i], fmt.Sprintf("%s.prefixItems[%d]", at, i))
		if err != nil {
			return "", err
		}
		sep := `"," ws `
		if i == 0 {
			sep = ""
		}
		seq = sep + name + " ws " + seq
		if i >= lo {
			seq = "( " + seq + " )?"
		}
	}
	return `"[" ws ` + seq + ` "]"`, nil
}

// member is one property the object rule may write.
type member struct {
	name     string
	rule     string
	required bool
	needs    []int // the members (by index) it depends on
}

// object is GBNF for the objects o admits. Properties are written in any
// order, each once: required ones always, optional ones when the model
// chooses, unlisted ones as additionalProperties allows (when nothing
// else constrains them); minProperties and maxProperties count the
// listed ones. An
// object without properties has free-form members (values meeting
// additionalProperties) unless patternProperties, propertyNames or
// dependencies would constrain their names, when it is empty.
func (c *schemaCompiler) object(hint string, o *object, at string) (string, error) {
	props, _ := o.vals["properties"].(*object)
	if props == nil {
		props = &object{vals: map[string]any{}}
	}
	patterns, _ := o.vals["patternProperties"].(*object)
	ap, hasAP := o.vals["additionalProperties"]
	forbid := stringList(o.vals[forbidKey])
	minP, _, err := count(o, "minProperties", at)
	if err != nil {
		return "", err
	}
	maxP, hasMaxP, err := count(o, "maxProperties", at)
	if err != nil {
		return "", err
	}
	if err := c.spend(len(props.keys)*(1+len(forbid)), at); err != nil {
		return "", err
	}
	required := map[string]bool{}
	var names []string
	for _, k := range props.keys {
		if admitsNothing(props.vals[k]) && !slices.Contains(forbid, k) {
			forbid = append(slices.Clone(forbid), k) // never valid: never written
		}
		if !slices.Contains(forbid, k) {
			names = append(names, k)
		}
	}
	if r, ok := o.vals["required"]; ok {
		if _, ok := r.([]any); !ok {
			return "", fmt.Errorf("schema%s.required: expected an array of names", at)
		}
		for _, s := range stringList(r) {
			required[s] = true
		}
	}
	// dependencies: a property whose dependents are not all written is
	// left out; a required one makes its dependents required.
	deps := map[string][]string{}
	depSchemas := map[string]bool{}
	for _, key := range []string{"dependencies", "dependentRequired", "dependentSchemas"} {
		d, _ := o.vals[key].(*object)
		if d == nil {
			continue
		}
		for _, k := range d.keys {
			if list, ok := d.vals[k].([]any); ok {
				deps[k] = append(deps[k], stringList(list)...)
			} else {
				depSchemas[k] = true
			}
		}
	}
	depsSize := len(deps) // a pass's work
	for _, ds := range deps {
		depsSize += len(ds)
	}
	for changed := true; changed; {
		changed = false
		if err := c.spend(1+depsSize, at); err != nil {
			return "", err
		}
		for k, ds := range deps {
			if !required[k] {
				continue
			}
			for _, d := range ds {
				if !required[d] {
					required[d], changed = true, true
				}
			}
		}
	}
	for _, k := range names {
		if depSchemas[k] {
			return "", fmt.Errorf("schema%s: keyword \"dependencies\" with a schema (for property %q) is not supported", at, k)
		}
	}
	var members []member
	for _, k := range names {
		members = append(members, member{name: k, required: required[k]})
	}
	if err := c.spend(len(required)*(1+len(forbid)), at); err != nil {
		return "", err
	}
	for _, k := range slices.Sorted(mapKeys(required)) {
		if slices.Contains(forbid, k) {
			return "", nothingf("schema%s: property %q is required and excluded (not or additionalProperties)", at, k)
		}
		if _, listed := props.vals[k]; !listed {
			members = append(members, member{name: k, required: true})
		}
	}
	if len(members) == 0 && len(props.keys) == 0 {
		return c.freeObject(hint, o, patterns, ap, hasAP, minP, maxP, hasMaxP, at)
	}
	// Each member's value: its property schema, also meeting matching
	// patternProperties; an unlisted required one meets
	// additionalProperties.
	for i, m := range members {
		if err := c.spend(1+len(deps[m.name])+memberCount(patterns), at); err != nil {
			return "", err
		}
		var schemas []any
		if s, ok := props.vals[m.name]; ok {
			schemas = append(schemas, s)
		}
		if patterns != nil {
			for _, p := range patterns.keys {
				ok, err := c.patternMatches(p, m.name)
				if err != nil {
					if c.work.Err() != nil {
						return "", stopped(c.work, at)
					}
					return "", fmt.Errorf("schema%s: keyword \"patternProperties\": %q: %v", at, p, err)
				}
				if ok {
					schemas = append(schemas, patterns.vals[p])
				}
			}
		}
		if len(schemas) == 0 {
			if f, ok := ap.(bool); ok && !f {
				return "", nothingf("schema%s.required: %q is not among the properties and additionalProperties is false", at, m.name)
			}
			schemas = append(schemas, cmpOrAny(ap, hasAP))
		}
		var s any = schemas[0]
		if len(schemas) > 1 {
			s = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": schemas}}
		}
		if pn, ok := o.vals["propertyNames"]; ok {
			names := &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{pn, &object{keys: []string{"type"}, vals: map[string]any{"type": "string"}}}}}
			ok, err := c.admits(names, m.name, at+".propertyNames")
			if err != nil {
				return "", err
			}
			if !ok {
				if m.required {
					return "", nothingf("schema%s: required property %q fails propertyNames", at, m.name)
				}
				members[i].rule = ""
				continue
			}
		}
		name, err := c.rule(hint+"-"+m.name, s, at+".properties."+m.name)
		if err != nil {
			return "", err // leaving an optional property out would reject valid objects that have it
		}
		members[i].rule = literal(mustJSON(m.name)) + ` ws ":" ws ` + name + ` ws`
	}
	members = slices.DeleteFunc(members, func(m member) bool { return m.rule == "" })
	// A member needs the members its dependencies name; one that needs a
	// member left out is left out too.
	for changed := true; changed; {
		changed = false
		index := map[string]int{}
		for k, m := range members {
			index[m.name] = k
		}
		for k := range members {
			members[k].needs = members[k].needs[:0]
			for _, d := range deps[members[k].name] {
				j, ok := index[d]
				if !ok {
					if _, listed := props.vals[d]; members[k].required || !listed {
						return "", fmt.Errorf("schema%s: keyword \"dependencies\": property %q depends on %q, which the grammar does not write as a listed property", at, members[k].name, d)
					}
					members[k].rule, changed = "", true // d fails propertyNames: an object with k fails
					break
				}
				members[k].needs = append(members[k].needs, j)
			}
		}
		members = slices.DeleteFunc(members, func(m member) bool { return m.rule == "" })
	}
	extra, err := c.extraMember(hint, o, props, forbid, ap, hasAP, at)
	if err != nil {
		return "", err
	}
	return c.memberSet(hint, members, minP, maxP, hasMaxP, extra, at)
}

// admitsEvery reports whether schema s, as written, admits every value:
// true, or an object without a keyword that constrains values.
func admitsEvery(s any) bool {
	o, ok := s.(*object)
	return s == true || ok && !constraining(o)
}

// admitsNothing reports whether schema s, as written, admits no value:
// false, not of a schema every value meets, or enum / const values none
// of which has one of its types.
func admitsNothing(s any) bool {
	if s == false {
		return true
	}
	o, ok := s.(*object)
	if !ok {
		return false
	}
	if n, ok := o.vals["not"]; ok && admitsEvery(n) {
		return true
	}
	types, err := typeList(o, "")
	if err != nil || types == nil {
		return false
	}
	values, ok := valueList(o)
	return ok && !slices.ContainsFunc(values, func(v any) bool { return typeAdmits(types, typeOf(v)) })
}

// extraMember is GBNF for one member the schema does not list (its name
// is none of the listed, required or excluded ones; its value meets
// additionalProperties), or "" when unlisted members are not written:
// additionalProperties is false, or patternProperties, propertyNames,
// dependencies, maxProperties or unevaluatedProperties would constrain
// them. (minProperties does not: the %members set reaches it with listed
// members, and unlisted ones only add properties.)
func (c *schemaCompiler) extraMember(hint string, o, props *object, forbid []string, ap any, hasAP bool, at string) (string, error) {
	patterns, _ := o.vals["patternProperties"].(*object)
	if f, ok := ap.(bool); ok && !f && memberCount(patterns) == 0 {
		return "", nil
	}
	if u, ok := o.vals["unevaluatedProperties"]; ok && u != true {
		return "", nil
	}
	excluded := append(slices.Clone(props.keys), forbid...)
	excluded = append(excluded, stringList(o.vals["required"])...)
	for _, key := range []string{"dependencies", "dependentRequired"} {
		d, _ := o.vals[key].(*object)
		if d == nil {
			continue
		}
		for _, k := range d.keys {
			if !slices.Contains(excluded, k) {
				return "", fmt.Errorf("schema%s: keyword %q of a property that is not listed (%q) is not supported", at, key, k)
			}
		}
	}
	if pn, ok := o.vals["propertyNames"]; ok {
		names, err := c.nameRules(pn, at)
		if err != nil {
			if errors.Is(err, errNothing) {
				return "", nil // no name is valid
			}
			return "", err
		}
		return c.patternMembers(hint, patterns, excluded, names, ap, hasAP, at)
	}
	if memberCount(patterns) > 0 {
		return c.patternMembers(hint, patterns, excluded, nil, ap, hasAP, at)
	}
	value := "value"
	if hasAP {
		m := c.mark()
		name, err := c.rule(hint+"-extra", ap, at+".additionalProperties")
		if err != nil {
			if !errors.Is(err, errNothing) {
				return "", err // leaving unlisted members out would reject valid objects that have them
			}
			c.rollback(m)
			return "", nil
		}
		value = name
	}
	return c.otherName(hint, excluded) + ` ws ":" ws ` + value + ` ws`, nil
}

// otherName is GBNF for a JSON string that is none of names: a trie of
// the names where leaving it frees the rest. A character leaves the trie
// written raw, or escaped where the escape stands for one character
// (\" \\ \/ \b \f \n \r \t, or \uXXXX where no listed name goes on) that
// no name goes on with; after it, any characters: one rule (rest) for
// the whole trie, referred to in tail position, so that every way of
// leaving the trie reaches the same parser states.
func (c *schemaCompiler) otherName(hint string, names []string) string {
	type node struct {
		kids     map[rune]*node
		order    []rune
		terminal bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, n := range names {
		at := root
		for _, r := range n {
			next, ok := at.kids[r]
			if !ok {
				next = &node{kids: map[rune]*node{}}
				at.kids[r] = next
				at.order = append(at.order, r)
			}
			at = next
		}
		at.terminal = true
	}
	rest := c.ruleName(hint + "-name-rest")
	c.emit(rest + ` ::= char* "\""`)
	var build func(n *node) string
	build = func(n *node) string {
		name := c.ruleName(hint + "-name")
		var alts []string
		if !n.terminal {
			alts = append(alts, `"\""`)
		}
		var taken []rng
		for _, r := range n.order {
			taken = append(taken, rng{r, r})
			if len(intersect([]rng{{r, r}}, jsonSafe)) == 0 {
				continue // written escaped: a raw name never reaches it
			}
			alts = append(alts, literal(string(r))+" "+build(n.kids[r]))
		}
		if other, ok := gbnfClass(intersect(negate(taken), jsonSafe)); ok {
			alts = append(alts, other+" "+rest)
		}
		escapes := ""
		for _, e := range shortEscapes {
			if _, on := n.kids[e.r]; !on {
				escapes += e.letter
			}
		}
		if escapes != "" {
			class := "[" + escapes + "]"
			if len(n.kids) == 0 {
				class = "( " + class + ` | "u" [0-9a-fA-F]{4} )`
			}
			alts = append(alts, `"\\" `+class+" "+rest)
		}
		c.emit(name + " ::= " + strings.Join(alts, " | "))
		return name
	}
	return `"\"" ` + build(root)
}

// shortEscapes are JSON's one-letter string escapes (as a GBNF class
// writes the letter) and the characters they stand for.
var shortEscapes = []struct {
	letter string
	r      rune
}{{`"`, '"'}, {`\\`, '\\'}, {"/", '/'}, {"b", '\b'}, {"f", '\f'}, {"n", '\n'}, {"r", '\r'}, {"t", '\t'}}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func cmpOrAny(v any, ok bool) any {
	if ok {
		return v
	}
	return true
}

// maxExtraSlots is the most unlisted members an object under
// maxProperties writes (each a member of its set the matcher tells apart:
// k written make as many states as ways to choose k of them).
const maxExtraSlots = 8

// memberSet writes members in any order, each at most once, with commas
// between (a %members set): every required one, the others when the model
// chooses, their count within [minP, maxP]; extra (GBNF for an unlisted
// member, "" for none) may repeat among them.
func (c *schemaCompiler) memberSet(hint string, members []member, minP, maxP int, hasMaxP bool, extra, at string) (string, error) {
	n := len(members)
	if n > maxMembers {
		return "", fmt.Errorf("schema%s: keyword \"properties\": more than %d properties the object may write are not supported", at, maxMembers)
	}
	var required []string
	for k, m := range members {
		if m.required {
			required = append(required, strconv.Itoa(k))
		}
	}
	if extra != "" && hasMaxP {
		// Unlisted members count toward maxProperties: each is one of
		// as many interchangeable members as the maximum leaves beside
		// the required ones.
		slots := maxP - len(required)
		if minP > len(required) {
			// Two unlisted members may have one name: counted as members,
			// they would not make the minimum.
			return "", fmt.Errorf("schema%s: keywords \"minProperties\" and \"maxProperties\" together, where unlisted properties may be written, are not supported", at)
		}
		minP = 0 // the required members make it
		if slots > maxExtraSlots || n+slots > maxMembers {
			return "", fmt.Errorf("schema%s: keyword \"maxProperties\" above %d beside the required properties, where unlisted properties may be written, is not supported", at, len(required)+maxExtraSlots)
		}
		for range max(slots, 0) {
			members = append(members, member{rule: extra})
		}
		n, extra = len(members), ""
	}
	if hasMaxP && maxP >= n {
		hasMaxP = false
	}
	if n < minP {
		return "", fmt.Errorf("schema%s: keyword \"minProperties\" needs more properties than the schema lists", at)
	}
	if hasMaxP && len(required) > maxP {
		return "", nothingf("schema%s: keyword \"maxProperties\" is below the required properties", at)
	}
	if hasMaxP && maxP < minP {
		return "", nothingf("schema%s: minProperties and maxProperties admit no object", at)
	}
	if n == 0 && extra == "" {
		return `"{" ws "}"`, nil
	}
	first, rest := c.ruleName(hint+"-members"), c.ruleName(hint+"-more")
	directive := fmt.Sprintf("%%members %s %s n=%d", first, rest, n)
	if len(required) > 0 {
		directive += " required=" + strings.Join(required, ",")
	}
	if minP > 0 {
		directive += fmt.Sprintf(" min=%d", minP)
	}
	if hasMaxP {
		directive += fmt.Sprintf(" max=%d", maxP)
	}
	var needs []string
	for k, m := range members {
		if len(m.needs) > 0 {
			list := []string{strconv.Itoa(k)}
			for _, j := range m.needs {
				list = append(list, strconv.Itoa(j))
			}
			needs = append(needs, strings.Join(list, ":"))
		}
	}
	if len(needs) > 0 {
		directive += " needs=" + strings.Join(needs, ",")
	}
	firstAlts := make([]string, 0, n+2)
	restAlts := make([]string, 0, n+2)
	for _, m := range members {
		firstAlts = append(firstAlts, m.rule+" "+rest)
		restAlts = append(restAlts, `"," ws `+m.rule+" "+rest)
	}
	if extra != "" {
		firstAlts = append(firstAlts, extra+" "+rest)
		restAlts = append(restAlts, `"," ws `+extra+" "+rest)
	}
	firstAlts = append(firstAlts, `""`)
	restAlts = append(restAlts, `""`)
	c.emit(directive)
	c.emit(first + " ::= " + strings.Join(firstAlts, " | "))
	c.emit(rest + " ::= " + strings.Join(restAlts, " | "))
	return `"{" ws ` + first + ` "}"`, nil
}

// freeObject is an object without listed properties: members with any
// name whose values meet additionalProperties.
func (c *schemaCompiler) freeObject(hint string, o *object, patterns *object, ap any, hasAP bool, minP, maxP int, hasMaxP bool, at string) (string, error) {
	_, deps := o.vals["dependencies"]
	_, depReq := o.vals["dependentRequired"]
	_, depSch := o.vals["dependentSchemas"]
	closed := false
	if f, ok := ap.(bool); ok && !f {
		closed = true
	}
	if deps || depReq || depSch {
		return "", fmt.Errorf("schema%s: keyword \"dependencies\" on an object without listed properties is not supported", at)
	}
	var names []nameRule
	noName := false // propertyNames admits no name
	if pn, ok := o.vals["propertyNames"]; ok {
		var err error
		if names, err = c.nameRules(pn, at); err != nil && !errors.Is(err, errNothing) {
			return "", err
		}
		noName = err != nil
	}
	forbid := stringList(o.vals[forbidKey])
	member := "" // GBNF for one member; "" the free-form one
	if noName {
		closed = true
	} else if memberCount(patterns) > 0 || len(names) > 0 || len(forbid) > 0 {
		// Names by the patterns they match, values meeting their schemas
		// (or additionalProperties where they match none), names meeting
		// propertyNames, none of those not excludes.
		m, err := c.patternMembers(hint, patterns, append(forbid, stringList(o.vals["required"])...), names, ap, hasAP, at)
		if err != nil {
			return "", err
		}
		member, closed = m, m == ""
	}
	if closed || hasMaxP && maxP == 0 {
		if minP > 0 {
			return "", fmt.Errorf("schema%s: keyword \"minProperties\" with no properties to write is not supported", at)
		}
		return `"{" ws "}"`, nil
	}
	if minP > 1 {
		return "", fmt.Errorf("schema%s: keyword \"minProperties\" above 1 without listed properties is not supported (names could repeat)", at)
	}
	if member == "" {
		value := "value"
		if hasAP {
			name, err := c.rule(hint+"-extra", ap, at+".additionalProperties")
			if err != nil {
				return "", err
			}
			value = name
		}
		member = `string ws ":" ws ` + value + ` ws`
	}
	// Members past the first: any number, or up to maxProperties-1 (a
	// repeated name counts once, so fewer members than the maximum never
	// make too many properties, and one member makes the minimum of 1).
	more := `( "," ws ` + member + ` )*`
	if hasMaxP { // count caps it at 1000
		more = strings.TrimSuffix(more, "*") + fmt.Sprintf("{0,%d}", maxP-1)
	}
	members := member + ` ` + more
	if minP == 1 {
		return `"{" ws ` + members + ` "}"`, nil
	}
	return `"{" ws ( ` + members + ` )? "}"`, nil
}

// admits reports whether the string name meets schema s (compiled and
// matched).
func (c *schemaCompiler) admits(s any, name string, at string) (bool, error) {
	g, err := c.checkGrammar(s, at)
	if err != nil {
		return false, err
	}
	return c.matches(g.NewCache(), []byte(mustJSON(name)), at)
}

// mustJSON is s as a JSON string, written as the grammar writes strings
// (no HTML escapes: "<" stays "<").
func mustJSON(s string) string {
	b, _ := canonical(s)
	return string(b)
}
