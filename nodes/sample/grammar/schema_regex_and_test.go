package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// zod 4's patterns, written with "format" by z.toJSONSchema for
// .uuid(), .email() and .datetime().
const (
	zodUUID     = `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`
	zodEmail    = `^(?:[A-Za-z0-9_'+\-]+\.)*[A-Za-z0-9_'+\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$`
	zodDateTime = `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z))$`
)

func formatAndPattern(format, pattern string) string {
	return `{"type":"string","format":"` + format + `","pattern":` + mustJSON(pattern) + `}`
}

// TestSchemaFormatAndPattern: a string must match both its format and its
// pattern, so the grammar admits the strings both admit.
func TestSchemaFormatAndPattern(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{formatAndPattern("uuid", zodUUID),
			[]string{"123e4567-e89b-42d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"},
			[]string{"123e4567-e89b-02d3-a456-426614174000", "123e4567-e89b-42d3-7456-426614174000", "123e4567e89b42d3a456426614174000"}},
		{formatAndPattern("email", zodEmail),
			[]string{"a.b@example.com", "x+y@mail.example.org"},
			[]string{"a@b", "a@b-.com", "a@example.c0m", ".a@example.com", "a..b@example.com"}},
		{formatAndPattern("date-time", zodDateTime),
			[]string{"2024-03-15T12:30:45Z", "1999-12-31T23:59:59.123Z"},
			[]string{"2024-03-15T12:30:45+01:00", "2024-03-15T12:30Z", "2024-13-01T00:00:00Z", "2024-03-15 12:30:45Z"}},
		{`{"type":"string","format":"uuid","pattern":"^0"}`,
			[]string{"0ebdb3a4-72b6-4c1f-9d6e-1a2b3c4d5e6f"}, []string{"1ebdb3a4-72b6-4c1f-9d6e-1a2b3c4d5e6f", "0"}},
		{`{"type":"string","format":"date","pattern":"-01-","maxLength":10}`,
			[]string{"2024-01-31"}, []string{"2024-02-01"}},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			quote := func(list []string) (out []string) {
				for _, s := range list {
					out = append(out, mustJSON(s))
				}
				return out
			}
			checkAccepts(t, tc.schema, quote(tc.yes), quote(tc.no))
		})
	}
}

func TestSchemaFormatAndPatternOutputsValidate(t *testing.T) {
	pieces, v := testVocab()
	src := `{"type":"object","properties":{"id":` + formatAndPattern("uuid", zodUUID) + `,"email":` + formatAndPattern("email", zodEmail) +
		`,"at":` + formatAndPattern("date-time", zodDateTime) + `},"required":["id","email","at"],"additionalProperties":false}`
	g, sch := compileBoth(t, src)
	rng := rand.New(rand.NewPCG(4, 2))
	validateOutputs(t, sch, 30, func(int) (string, bool) { return generateCached(g, pieces, v, 600, rng) })
}

func TestSchemaFormatAndPatternErrors(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"string","format":"uuid","pattern":"^x"}`, `no string`},
		{`{"type":"string","format":"uuid","pattern":"(?=a)"}`, `"pattern"`},
		{`{"type":"string","format":"email","pattern":"^(a{1000}){1000}$"}`, `states`},
		{`{"type":"string","format":"email","pattern":"^` + strings.Repeat(".*", 22) + `$","maxLength":1000}`, `joint automaton`},
	} {
		if _, err := FromSchema(json.RawMessage(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSchema(%s) = %v, want an error with %s", tc.schema, err, tc.want)
		}
	}
}

func BenchmarkSchemaFormatAndPattern(b *testing.B) {
	for _, tc := range []struct{ name, format, pattern string }{{"uuid", "uuid", zodUUID}, {"email", "email", zodEmail}, {"date-time", "date-time", zodDateTime}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := FromSchema(json.RawMessage(formatAndPattern(tc.format, tc.pattern))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
