package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// list is n comma-separated items item(i).
func list(n int, item func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return strings.Join(parts, ",")
}

// costlySchemas are schemas whose compilation grows faster than their
// text: exponential $ref and allOf expansion, quadratic property and
// value comparisons, output far larger than the input. Each took from
// 15 s to forever before the compiler had a Work.
var costlySchemas = []struct{ name, schema string }{
	{"oneOf over nested anyOf of refs (kinds explored 20^8 ways)",
		`{"oneOf":[{"$ref":"#/$defs/d0"},{"type":"string"}],"$defs":{` +
			list(10, func(i int) string {
				return fmt.Sprintf(`"d%d":{"anyOf":[%s]}`, i, list(20, func(int) string { return fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1) }))
			}) + `,"d10":{"type":"integer"}}}`},
	{"allOf of refs fanning out 40 ways, 5 deep",
		`{"$ref":"#/$defs/d0","$defs":{` +
			list(5, func(i int) string {
				return fmt.Sprintf(`"d%d":{"allOf":[%s]}`, i, list(40, func(int) string { return fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1) }))
			}) + `,"d5":{"type":"object","properties":{"a":{"type":"string"}}}}}`},
	{"3,000 properties against 3,000 patternProperties",
		`{"type":"object","properties":{` + list(3000, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) +
			`},"patternProperties":{` + list(3000, func(i int) string { return fmt.Sprintf(`"^q%d$":{}`, i) }) + `}}`},
	{"20,000 optional prefixItems (each nests the rest)",
		`{"type":"array","prefixItems":[` + list(20000, func(int) string { return `{"type":"integer","minimum":-12345678,"maximum":98765432}` }) + `]}`},
	{"many objects each with a name automaton of 512 states (subset construction)",
		`{"type":"object","properties":{` + list(1500, func(i int) string {
			return fmt.Sprintf(`"o%d":{"type":"object","patternProperties":{"^[a-z]*a[a-z]{8}$":{"type":"integer"}}}`, i)
		}) + `}}`},
	{"many objects each naming many properties (a name trie each)",
		`{"type":"object","properties":{` + list(1500, func(i int) string {
			return fmt.Sprintf(`"o%d":{"type":"object","properties":{%s}}`, i, list(60, func(j int) string { return fmt.Sprintf(`"property-name-%d":{}`, j) }))
		}) + `}}`},
}

// The core guarantee: compiling a schema never spends more than its
// Work's limit (up to one check's granularity), and a schema that needs
// more fails with ErrSchemaTooComplex. The counts are deterministic.
func TestSchemaWorkIsBounded(t *testing.T) {
	const limit = 1 << 22
	for _, tc := range costlySchemas {
		t.Run(tc.name, func(t *testing.T) {
			w := &Work{Limit: limit}
			_, err := FromSchemaWork(json.RawMessage(tc.schema), w)
			if w.Used() > limit+workSlack {
				t.Errorf("spent %d units, limit %d", w.Used(), limit)
			}
			if !errors.Is(err, ErrSchemaTooComplex) {
				t.Errorf("err %v, want ErrSchemaTooComplex", err)
			}
		})
	}
}

// An Interrupt error stops a compilation within a poll or two, and is
// what it fails with.
func TestSchemaWorkInterrupt(t *testing.T) {
	stop := errors.New("aborted")
	for _, tc := range costlySchemas {
		t.Run(tc.name, func(t *testing.T) {
			polls := 0
			w := &Work{Interrupt: func() error {
				if polls++; polls == 3 {
					return stop
				}
				return nil
			}}
			_, err := FromSchemaWork(json.RawMessage(tc.schema), w)
			if !errors.Is(err, stop) {
				t.Errorf("err %v, want %v", err, stop)
			}
			// The first charge (the schema's bytes) may be large; each
			// later poll comes within interruptEvery units of the last.
			if first := int64(len(tc.schema)); w.Used() > first+3*interruptEvery+workSlack {
				t.Errorf("stopped after %d units, want within %d", w.Used(), first+3*interruptEvery+workSlack)
			}
		})
	}
}

// Size limits are errors naming where in the schema they were reached.
func TestSchemaSizeLimits(t *testing.T) {
	nested := func(n int) string {
		return strings.Repeat(`{"type":"array","minItems":1,"items":`, n) + `{}` + strings.Repeat(`}`, n)
	}
	refChain := `{"$ref":"#/$defs/d0","$defs":{` + list(20, func(i int) string {
		return fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"}],"minLength":%d}`, i, i+1, i)
	}) + `,"d20":{"type":"string"}}}`
	for _, tc := range []struct{ name, schema, want string }{
		{"an enum of more than MaxSchemaEnum values",
			`{"required":["a"],"properties":{"a":{"enum":[` + list(MaxSchemaEnum+1, func(i int) string { return fmt.Sprint(i) }) + `]}}}`,
			fmt.Sprintf("schema.properties.a.enum: more than %d values", MaxSchemaEnum)},
		{"a pattern longer than MaxSchemaPattern",
			`{"required":["p"],"properties":{"p":{"type":"string","pattern":"` + strings.Repeat("a", MaxSchemaPattern+1) + `"}}}`,
			fmt.Sprintf("schema.properties.p.pattern: longer than %d characters", MaxSchemaPattern)},
		{"subschemas nested more than MaxSchemaDepth deep", nested(MaxSchemaDepth + 5), "the schema nests too deeply (more than 200 subschemas"},
		{"a chain of refs and allOf deeper than MaxSchemaInline", refChain, "$ref and allOf nest too deeply (more than 16 within one another)"},
		{"a minLength above 1000", `{"type":"string","minLength":1000000}`, `schema: keyword "minLength" above 1000 is not supported`},
		{"a repetition count above 1000", `{"type":"string","pattern":"^a{1000000}$"}`, `repetition counts above 1000 are not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Work{Limit: MaxSchemaWork}
			_, err := FromSchemaWork(json.RawMessage(tc.schema), w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Nested repetitions stay small: the grammar refers to the repeated
// part, it does not copy it (a{1000}{1000} is a literal "{1000}" after
// a{1000}, as in ECMAScript's Annex B).
func TestSchemaNestedRepetitionIsCheap(t *testing.T) {
	for _, pattern := range []string{`^((a{1000}){1000}){1000}$`, `a{1000}{1000}`} {
		w := &Work{Limit: MaxSchemaWork}
		src, err := FromSchemaWork(json.RawMessage(`{"type":"string","pattern":`+mustJSON(pattern)+`}`), w)
		if err != nil || len(src) > 4096 || w.Used() > 1<<16 {
			t.Errorf("%s: %d bytes of GBNF in %d units (err %v), want a few in under %d", pattern, len(src), w.Used(), err, 1<<16)
		}
	}
}
