package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testSchemas cover nested arrays, enums, anyOf, required and optional
// fields, $ref and bounds.
var testSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"maxItems":4}},"required":["name","age"]}`,
	`{"type":"object","properties":{"grid":{"type":"array","items":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3},"minItems":2,"maxItems":3}},"required":["grid"],"additionalProperties":false}`,
	`{"type":"object","properties":{"kind":{"enum":["circle","square",3,null]},"size":{"anyOf":[{"type":"number"},{"type":"string","maxLength":5},{"type":"null"}]},"note":{"type":["string","null"],"maxLength":8}},"required":["kind"]}`,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"},"c":{"const":"x"}}}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"required":["root"]}`,
}

// testVocab is every byte as a token plus multi-byte tokens, as a
// byte-level BPE vocabulary has them.
func testVocab() ([][]byte, *Vocab) {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`{"`, `":`, `"`, `",`, `, "`, `": "`, `true`, `false`, `null`, `[[`, `]]`, `},`, `123`, `0.5`, `é`, `"}`, `name`, `kids`, "  ", "\n", `circle`, `x"`} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // an end-of-generation token, last
	return pieces, NewVocab(len(pieces), func(id int32) []byte { return pieces[id] })
}

// generate picks, at each step, the allowed token with the highest random
// logit, as greedy decoding of a random-weight model does, until the
// end-of-generation token or the budget.
func generate(g *Grammar, pieces [][]byte, v *Vocab, budget int, rng *rand.Rand) (string, bool) {
	eog := int32(len(pieces) - 1)
	st := g.Start()
	var out []byte
	for n := 0; n < budget; n++ {
		allowed := map[int32]bool{}
		v.Allow(st, budget-n, func(id int32) { allowed[id] = true })
		if st.Accepting() {
			allowed[eog] = true
		}
		if len(allowed) == 0 {
			return string(out), false
		}
		best, bestLogit := int32(-1), -1.0
		for id := range allowed {
			if l := rng.Float64(); l > bestLogit || (l == bestLogit && id < best) {
				best, bestLogit = id, l
			}
		}
		if best == eog {
			return string(out), true
		}
		out = append(out, pieces[best]...)
		st = st.AdvanceBytes(pieces[best])
	}
	return string(out), st.Accepting()
}

// compileBoth compiles src to a grammar and, with the reference validator,
// to a schema.
func compileBoth(t *testing.T, src string) (*Grammar, *jsonschema.Schema) {
	t.Helper()
	gbnf, err := FromSchema(json.RawMessage(src))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(gbnf)
	if err != nil {
		t.Fatalf("%v\n%s", err, gbnf)
	}
	sch := validator(json.RawMessage(src))
	if sch == nil {
		t.Fatal("the reference validator cannot compile the schema")
	}
	return g, sch
}

func TestSchemaOutputsValidate(t *testing.T) {
	pieces, v := testVocab()
	for i, src := range append([]string{`{"type":"object"}`}, testSchemas...) {
		t.Run(fmt.Sprint("schema ", i), func(t *testing.T) {
			g, sch := compileBoth(t, src)
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			validateOutputs(t, sch, 60, func(run int) (string, bool) { return generate(g, pieces, v, 40+run, rng) })
		})
	}
}

// validateOutputs generates runs outputs with next: each must be complete,
// parse and validate against sch.
func validateOutputs(t *testing.T, sch *jsonschema.Schema, runs int, next func(run int) (string, bool)) {
	t.Helper()
	for run := range runs {
		text, complete := next(run)
		if !complete {
			t.Fatalf("run %d: no complete output: %q", run, text)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Fatalf("run %d: %q does not parse: %v", run, text, err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Fatalf("run %d: %q does not validate: %v", run, text, err)
		}
	}
}

func TestSchemaErrorsNameTheKeyword(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"string","pattern":"(?=a)b"}`, `"pattern"`},
		{`{"type":"string","pattern":"(a)\\1"}`, `"pattern"`},
		{`{"type":"string","pattern":"a^b"}`, `"pattern"`},
		{`{"type":"number","multipleOf":0.3}`, `"multipleOf"`},
		{`{"type":"integer","multipleOf":7,"minimum":3}`, `"multipleOf"`},
		{`{"type":"array","uniqueItems":true,"minItems":2}`, `"uniqueItems"`},
		{`{"type":"array","items":{"type":"string"},"uniqueItems":true}`, `"uniqueItems"`},
		{`{"type":"object","properties":{"a":{"type":"string","format":"idn-email"}}}`, `"format"`},
		{`{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{}},"dependencies":{"a":{"required":["x"]},"b":{"required":["x"]},"c":{"required":["x"]},"d":{"required":["x"]}}}`, `"dependencies"`},
		{`{"type":"object","properties":{"a":{"type":"string"}},"dependentRequired":{"a":["unlisted"]}}`, `"dependencies"`},
		{`{"type":"array","contains":{"type":"string"}}`, `"contains"`},
		{`{"type":"string","format":"idn-email"}`, `"format"`},
		{`{"type":"string","not":{"pattern":"a"}}`, `"not"`},
		{`{"type":[]}`, "empty list"},
		{`{"$ref":"https://example.com/s.json"}`, "local references"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"],"additionalProperties":false}`, `"b"`},
		{`{"type":"frog"}`, `"frog"`},
		{`{"type":"integer","minimum":5,"maximum":4}`, "no integer"},
		{`false`, "matches nothing"},
		{`{"oneOf":[{"enum":[1,2]},{"enum":[1.0]}]}`, `"oneOf"`},
		{`{"oneOf":[{"enum":[100,3]},{"enum":[1e2]}]}`, `"oneOf"`},
		{`{"oneOf":[{"enum":[0,3]},{"enum":[-0]}]}`, `"oneOf"`},
		{`{"oneOf":[{"const":{"a":1,"b":2}},{"const":{"b":2,"a":1}}]}`, `"oneOf"`},
		{`{"oneOf":[{"const":[1]},{"const":[1.0]}]}`, `"oneOf"`},
		{`{"type":"object","not":{"enum":[{}]}}`, `"not"`},
		{`{"type":"array","not":{"const":[]}}`, `"not"`},
		{`{"type":"integer","not":{"enum":[3]}}`, `"not"`},
		{`{"anyOf":[{"type":"string","format":"idn-email"},{"type":"integer"}]}`, `"format"`},
		{`{"type":"array","items":{"type":"string","pattern":"a\\1"}}`, `"pattern"`},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"array","contains":{}}}`, `"contains"`},
		{`{"type":"string","pattern":"^a(?!b)c$"}`, `"pattern"`},
		{`{"type":"object","properties":{"a":{}},"minProperties":2,"maxProperties":3}`, `"minProperties"`},
		{`{"type":"object","properties":{"a":{}},"maxProperties":10}`, `"maxProperties"`},
		{`{"type":"object","properties":{"a":{}},"dependencies":{"b":["a"]}}`, `"dependencies"`},
		{`{"type":"object","propertyNames":{"minimum":3}}`, `"propertyNames"`},
		{`{"type":"string","if":{"pattern":"^a"},"then":{"maxLength":3}}`, `"if"`},
		{`{"type":"string","pattern":"^(?!a)b|c$"}`, `"pattern"`},
		{`{"type":"object","properties":{"a":{"type":"number"}},"oneOf":[{"properties":{"a":{"const":1}},"required":["a"]},{"properties":{"a":{"const":1.0}},"required":["a"]}]}`, `"oneOf"`},
	} {
		if _, err := FromSchema(json.RawMessage(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSchema(%s) = %v, want an error with %s", tc.schema, err, tc.want)
		}
	}
}

// schemaAccepts compiles schema and reports whether the grammar accepts
// text as a whole output.
func schemaAccepts(t *testing.T, schema, text string) bool {
	t.Helper()
	src, err := FromSchema(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("FromSchema(%s): %v", schema, err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	ok, _ := accepts(g, text)
	return ok
}

// checkAccepts checks that schema's grammar accepts each of yes as a
// whole output and none of no.
func checkAccepts(t *testing.T, schema string, yes, no []string) {
	t.Helper()
	for _, s := range yes {
		if !schemaAccepts(t, schema, s) {
			t.Errorf("%s rejected", s)
		}
	}
	for _, s := range no {
		if schemaAccepts(t, schema, s) {
			t.Errorf("%s accepted", s)
		}
	}
}

func TestSchemaIntegerRanges(t *testing.T) {
	for _, tc := range []struct {
		schema string
		lo, hi int64
	}{
		{`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`, -9007199254740991, 9007199254740991},
		{`{"type":"integer","minimum":0,"maximum":100}`, 0, 100},
		{`{"type":"integer","exclusiveMinimum":0}`, 1, intLimit},
		{`{"type":"integer","minimum":-37,"exclusiveMaximum":1234}`, -37, 1233},
		{`{"type":"integer","minimum":5,"maximum":5}`, 5, 5},
		{`{"type":"integer","minimum":-1000,"maximum":-999}`, -1000, -999},
		{`{"type":"integer","minimum":10,"exclusiveMinimum":true,"maximum":99.5}`, 11, 99},
		{`{"type":"integer","minimum":1.5}`, 2, intLimit},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			src, err := FromSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			probe := []int64{tc.lo - 1, tc.lo, tc.lo + 1, tc.hi - 1, tc.hi, tc.hi + 1, 0, -1, 1, 9007199254740991, -9007199254740991}
			for v := int64(-1100); v <= 1300; v += 7 {
				probe = append(probe, v)
			}
			for _, v := range probe {
				want := v >= tc.lo && v <= tc.hi && v >= -intLimit && v <= intLimit
				if ok, _ := accepts(g, fmt.Sprint(v)); ok != want {
					t.Errorf("%d: accepted %v, want %v", v, ok, want)
				}
			}
		})
	}
}

func TestSchemaNumberLimits(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"number","minimum":0,"exclusiveMaximum":1}`, []string{"0", "0.5", "0.999", "0.05", "0.50", "0.0"}, []string{"1", "1.0", "-0.1", "1.5", "1e0", "-0", "1.00"}},
		{`{"type":"number","exclusiveMinimum":-2,"maximum":3}`, []string{"-1.5", "3", "-1", "2.25", "3.000", "-1.999"}, []string{"-2", "3.1", "-2.5", "-2.0", "3.0001"}},
		{`{"type":"number","minimum":0.25,"maximum":4.294967295}`, []string{"0.25", "0.250", "0.3", "1", "4.294967295", "4.2949672949", "4.0"}, []string{"0.2", "0.249", "0", "4.2949672951", "4.3", "5"}},
		{`{"type":"number","exclusiveMinimum":0.5,"exclusiveMaximum":0.75}`, []string{"0.51", "0.7", "0.7499"}, []string{"0.5", "0.50", "0.75", "0.750", "0", "1"}},
		{`{"type":"number","minimum":-10.5,"maximum":-0.125}`, []string{"-10.5", "-10", "-0.125", "-0.2", "-3.14"}, []string{"-10.51", "-0.12", "0", "-11", "1"}},
		{`{"type":"number","minimum":0,"multipleOf":0.01}`, []string{"0.25", "2048.0", "3"}, []string{"0.255", "-1"}},
		{`{"type":"number","multipleOf":0.01}`, []string{"1.25", "-3", "0.1"}, []string{"1.255", "1e2"}},
		{`{"type":"integer","multipleOf":3}`, []string{"0", "3", "-12", "999"}, []string{"1", "10", "-4"}},
		{`{"type":"integer","multipleOf":5,"minimum":1}`, []string{"5", "100"}, []string{"0", "-5", "7"}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkAccepts(t, tc.schema, tc.yes, tc.no) })
	}
}

func TestSchemaPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{`^[a-z]+$`, []string{"abc"}, []string{"", "aB", "a1"}},
		{`^(([0-9]|[a-f]){2}){0,32}$`, []string{"", "0a1b"}, []string{"0a1", "0g"}},
		{`ab`, []string{"ab", "xaby"}, []string{"a", "ba"}},
		{`^\d{3}-\d{4}$`, []string{"555-1234"}, []string{"5551234", "555-123"}},
		{`^[^"\\]*$`, []string{"plain"}, []string{`a\"b`}},
		{`^a.c$`, []string{"abc", "a\"c"}, []string{"a\nc", "ac"}},
		{`^(?:foo|ba[rz])?$`, []string{"", "foo", "baz"}, []string{"fo", "bax"}},
		{`^\S+@\S+\.\S+$`, []string{"a@b.c"}, []string{"a b@c.d", "a@b"}},
		{`^x{2,}?y$`, []string{"xxy", "xxxxy"}, []string{"xy"}},
		{`^[\w.-]+$`, []string{"a_b.c-d"}, []string{"a b"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			quote := func(list []string) (out []string) {
				for _, s := range list {
					out = append(out, mustJSON(s))
				}
				return out
			}
			checkAccepts(t, `{"type":"string","pattern":`+mustJSON(tc.pattern)+`}`, quote(tc.yes), quote(tc.no))
		})
	}
}

// A pattern with a minimum length keeps every repetition of the pattern:
// two unbounded ones apart are both written.
func TestSchemaPatternWithALength(t *testing.T) {
	checkAccepts(t, `{"type":"string","minLength":6,"pattern":"^.*@.*\\..*$"}`,
		[]string{`"user@example.com"`, `"ab@c.d"`}, []string{`"a@b.c"`, `"user@example"`, `"user.example@com"`})
	checkAccepts(t, `{"type":"string","minLength":3,"pattern":"^a*b*$"}`,
		[]string{`"aab"`, `"abb"`, `"bbb"`}, []string{`"ab"`, `"aba"`})
}

// TestSchemaFeatureOutputsValidate generates from schemas that use each
// supported keyword and validates the outputs (formats asserted).
func TestSchemaFeatureOutputsValidate(t *testing.T) {
	pieces, v := testVocab()
	for i, src := range []string{
		`{"type":"object","properties":{"id":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"n":{"type":"number","exclusiveMinimum":0},"at":{"type":"string","format":"date-time"},"mail":{"type":"string","format":"email"},"u":{"type":"string","format":"uuid"}},"required":["id","n","at","mail","u"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`,
		`{"type":"object","properties":{"d":{"format":"date","type":"string"},"t":{"format":"time","type":"string"},"h":{"format":"hostname","type":"string"},"v4":{"format":"ipv4","type":"string"},"v6":{"format":"ipv6","type":"string"},"uri":{"format":"uri","type":"string"}},"required":["d","t","h","v4","v6","uri"]}`,
		`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{2,4}$"},"name":{"type":"string","pattern":"^[a-z]+$","maxLength":5,"minLength":2}},"required":["code","name"],"x-kubernetes-list-type":"map","id":"x","$comment":"c"}`,
		`{"type":"object","minProperties":2,"maxProperties":3,"properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"},"d":{"type":"null"}},"additionalProperties":false}`,
		`{"type":"object","maxProperties":3,"properties":{"a":{"type":"null"},"b":{"type":"null"}},"required":["a"],"additionalProperties":{"type":"integer"}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"minItems":1,"maxItems":4}`,
		`{"type":"array","items":[{"const":1},{"const":2}],"additionalItems":false}`,
		`{"type":"array","items":{"type":"integer"},"uniqueItems":true,"maxItems":1}`,
		`{"allOf":[{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"required":["a"]},{"properties":{"a":{"maximum":10},"b":{"type":"string"}},"required":["b"]}]}`,
		`{"type":"object","properties":{"kind":{"enum":["a","b"]},"x":{"type":"integer"}},"required":["kind"],"if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["x"]}}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"not":{"required":["a","b"]}}`,
		`{"oneOf":[{"type":"object","properties":{"t":{"const":"x"},"v":{"type":"integer"}},"required":["t"]},{"type":"object","properties":{"t":{"const":"y"},"v":{"type":"string"}},"required":["t"]}]}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a"],"dependencies":{"a":["b"]}}`,
		`{"$defs":{"list":{"type":"object","properties":{"v":{"type":"integer","multipleOf":4},"next":{"$ref":"#/$defs/list"}},"required":["v"]}},"$ref":"#/$defs/list"}`,
		`{"type":"object","required":["extra"],"additionalProperties":{"type":"integer","exclusiveMaximum":0}}`,
		`{"type":"object","minProperties":1,"maxProperties":3,"additionalProperties":{"type":"integer"}}`,
		`{"type":"string","enum":["a","bb",3],"maxLength":1}`,
	} {
		t.Run(fmt.Sprint("schema ", i), func(t *testing.T) {
			g, sch := compileBoth(t, src)
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			validateOutputs(t, sch, 30, func(int) (string, bool) { return generateCached(g, pieces, v, 400, rng) })
		})
	}
}

// A uri is any scheme's absolute URI with a host and an optional port,
// and nothing relative.
func TestSchemaFormatURI(t *testing.T) {
	checkAccepts(t, `{"type":"string","format":"uri"}`,
		[]string{`"irc://example.com/support"`, `"http://mesos-master-1.example.com:5050"`, `"https://example.com/a/b?x=1"`, `"svn+ssh://example.com"`},
		[]string{`"/relative/path"`, `"example.com"`, `"1http://example.com"`, `"http://example.com:port"`, `"://example.com"`})
}

// A limit that only the sign must meet admits numbers with exponents of
// that sign.
func TestSchemaNumberExponentsUnderASignLimit(t *testing.T) {
	checkAccepts(t, `{"type":"number","minimum":0}`, []string{`1e-06`, `2.5E+3`, `0e0`, `12.5`}, []string{`-1e-06`, `-0.5`})
	checkAccepts(t, `{"type":"number","maximum":0}`, []string{`-1e5`, `-0.5`, `0`}, []string{`1e5`, `0.5`})
	checkAccepts(t, `{"type":"number","exclusiveMinimum":-2}`, []string{`3e2`, `-1.5`}, []string{`-2`, `-3e0`})
}

// Objects without listed properties take any number of members within
// minProperties 1 and maxProperties.
func TestSchemaPropertyCountsWithoutListedProperties(t *testing.T) {
	checkAccepts(t, `{"type":"object","minProperties":1,"additionalProperties":{"type":"string"}}`,
		[]string{`{"en":"a"}`, `{"en":"a","de":"b","fr":"c"}`}, []string{`{}`, `{"en":1}`})
	checkAccepts(t, `{"type":"object","minProperties":2,"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
		[]string{`{"a":1,"b":2}`, `{"a":1,"b":2,"c":"x","d":"y"}`}, []string{`{}`, `{"a":1}`, `{"a":1,"b":2,"c":3}`})
	checkAccepts(t, `{"type":"object","maxProperties":2,"patternProperties":{"^x":{"type":"integer"}}}`,
		[]string{`{}`, `{"x":1}`, `{"x":1,"xy":2}`, `{"y":"s"}`}, []string{`{"x":1,"xy":2,"xz":3}`, `{"x":"s"}`})
}

func TestSchemaUnlistedMembers(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"null"}},"required":["a"]}`,
			[]string{`{"a":1}`, `{"a":1,"b":"x"}`, `{"a":1,"abc":[],"":0}`, `{"a":1,"ab":null,"A":true}`},
			[]string{`{"a":1,"a":"x"}`, `{"a":1,"ab":2}`, `{"a":1,"\u0061":2}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			[]string{`{"a":1,"b":"x"}`}, []string{`{"a":1,"b":2}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{"a":1}`}, []string{`{"a":1,"b":"x"}`}},
		{`{"type":"object","properties":{"a<b&c":{"type":"integer"}},"required":["a<b&c"]}`,
			[]string{`{"a<b&c":1}`}, []string{`{}`, `{"a<b&c":"s"}`}},
		{`{"type":"object","patternProperties":{"^x-[a-z]+$":{"type":"integer"}}}`,
			[]string{`{}`, `{"x-a":1,"x-bc":2}`, `{"y":"s"}`, `{"x-":"s"}`}, []string{`{"x-a":"s"}`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkAccepts(t, tc.schema, tc.yes, tc.no) })
	}
}

// checkValidates is checkAccepts where the reference validator first
// agrees: every yes instance validates and every no instance fails.
func checkValidates(t *testing.T, schema string, yes, no []string) {
	t.Helper()
	sch := validator(json.RawMessage(schema))
	if sch == nil {
		t.Fatal("the reference validator cannot compile the schema")
	}
	for _, list := range [][]string{yes, no} {
		for _, s := range list {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			if valid := sch.Validate(inst) == nil; valid != (&list[0] == &yes[0]) {
				t.Fatalf("%s: the reference validator says valid=%v", s, valid)
			}
		}
	}
	checkAccepts(t, schema, yes, no)
}

// Valid documents MaskBench found rejected: a schema without type admits
// every type (each with its own keywords), unlisted names with escapes,
// $ref siblings ignored before draft 2019-09, oneOf branches told apart by
// additionalProperties false or not required, schema dependencies, not of
// not or of false, not of several required (one left out), properties whose
// schema admits nothing (never written).
func TestSchemaValidDocumentsAccepted(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"properties":{"a":{"type":"integer"}},"required":["a"]}`,
			[]string{`{"a":1}`, `"s"`, `3`, `[{}]`, `null`, `true`}, []string{`{}`, `{"a":"x"}`}},
		{`{"minimum":3,"items":{"type":"string"}}`,
			[]string{`5`, `"x"`, `["x"]`, `{"b":1}`}, []string{`2`, `[1]`}},
		{`{"properties":{"a":{"type":"integer"}},"not":{"type":"string"}}`,
			[]string{`{"a":1}`, `3`, `null`, `[]`}, []string{`"x"`, `{"a":"x"}`}},
		{`{"minimum":5,"not":{"type":"string"}}`, []string{`5`, `{}`, `true`}, []string{`"x"`, `4`}},
		{`{"items":{"type":"integer"},"not":{"type":"boolean"}}`, []string{`[1]`, `"x"`, `null`}, []string{`true`, `["x"]`}},
		{`{"minLength":2,"not":{"type":["number","object"]}}`, []string{`"ab"`, `[]`, `null`}, []string{`{}`, `1`, `1.5`, `"a"`}},
		{`{"properties":{"a":{"type":"integer"}},"not":{"type":"object"}}`, []string{`1`, `"x"`}, []string{`{}`, `{"a":1}`}},
		{`{"oneOf":[{"enum":[1,2]},{"enum":[3,"1"]}]}`, []string{`1`, `2`, `3`, `"1"`}, []string{`4`}},
		{`{"type":"object","properties":{"a":{"type":"number"}},"oneOf":[{"properties":{"a":{"const":1}},"required":["a"]},{"properties":{"a":{"const":1.5}},"required":["a"]}]}`,
			[]string{`{"a":1}`, `{"a":1.5}`}, []string{`{"a":2}`, `{}`}},
		{`{"allOf":[{"enum":[1,"x"]},{"enum":[1.0]}]}`, []string{`1`}, []string{`"x"`}},
		{`{"enum":[1,"x"],"not":{"const":1.0}}`, []string{`"x"`}, []string{`1`}},
		{`{"enum":[{"a":1,"b":2},"x"],"not":{"const":{"b":2,"a":1e0}}}`, []string{`"x"`}, []string{`{"a":1,"b":2}`}},
		{`{"properties":{"b":{"type":"integer"}},"not":{"required":["a"]}}`, []string{`{}`, `{"b":1}`}, []string{`"s"`, `{"a":1}`}},
		{`{"oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			[]string{`{"a":1}`, `{"b":1}`}, []string{`"s"`, `{"a":1,"b":2}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"null"}},"required":["a"]}`,
			[]string{`{"a":1,"a\"b":"x"}`, `{"a":1,"\n":0}`, `{"a":1,"ab\u0041":0}`, `{"a":1,"\\":0,"c\/":1}`},
			[]string{`{"a":1,"\u0061b":1}`, `{"a":1,"\u0061":"x"}`}},
		{`{"type":"object","oneOf":[{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"],"additionalProperties":false},{"properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}]}`,
			[]string{`{"a":"x","b":"y"}`, `{"a":"x"}`}, []string{`{"b":"y"}`, `{"a":"x","c":1}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"o":{"type":"object","required":["a"]}},"type":"object","properties":{"s":{"type":"string","$ref":"#/definitions/o"}},"required":["s"]}`,
			[]string{`{"s":{"a":1}}`}, []string{`{"s":"x"}`, `{"s":{}}`}},
		{`{"type":"object","properties":{"k":{"enum":["x","y"]},"a":{"type":"integer"}},"dependencies":{"a":{"properties":{"k":{"const":"x"}},"required":["k"]}},"additionalProperties":false}`,
			[]string{`{}`, `{"k":"y"}`, `{"a":1,"k":"x"}`, `{"k":"x","a":1}`}, []string{`{"a":1}`, `{"k":"y","a":1}`}},
		{`{"type":"object","properties":{"a":{}},"dependencies":{"a":{"required":["b"]}}}`,
			[]string{`{}`, `{"a":1,"b":2}`, `{"b":2}`}, []string{`{"a":1}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"oneOf":[{"required":["a","b"]},{"allOf":[{"not":{"required":["b"]}},{"required":["c"]}]}]}`,
			[]string{`{"a":1,"b":2}`, `{"c":3}`, `{"a":1,"c":3}`}, []string{`{"b":2,"c":3}`, `{"a":1}`}},
		{`{"type":"object","properties":{"k":{"enum":["x","y","z"]},"a":{"type":"integer"},"b":{"type":"string"}},"required":["k"],"if":{"properties":{"k":{"const":"x"}}},"then":{"required":["a"]},"else":{"required":["b"]}}`,
			[]string{`{"k":"x","a":1}`, `{"k":"y","b":"s"}`, `{"k":"z","b":"s","a":2}`}, []string{`{"k":"x","b":"s"}`, `{"k":"y","a":1}`}},
		{`{"type":"object","properties":{"k":{"type":"string"},"a":{"type":"integer"}},"if":{"properties":{"k":{"enum":["x"]}},"required":["k"]},"then":{"required":["a"]}}`,
			[]string{`{"k":"x","a":1}`, `{}`, `{"a":1}`}, []string{`{"k":"x"}`}},
		{`{"type":"array","items":{"oneOf":[{"type":"object","properties":{"ps":{"type":"string"}},"additionalProperties":false},{"type":"object","properties":{"cmd":{"type":"string"}},"additionalProperties":false}]}}`,
			[]string{`[{"ps":"a"},{"cmd":"b"}]`}, []string{`[{}]`, `[{"ps":"a","cmd":"b"}]`}},
		{`{"oneOf":[{"enum":["a","b"]},{"$ref":"#/$defs/c"}],"$defs":{"c":{"type":"string","const":"c"}}}`,
			[]string{`"a"`, `"c"`}, []string{`"d"`}},
		{`{"allOf":[{"enum":[{"foo":1},"x"]},{"not":{"not":{"type":["array","object"]}}}]}`,
			[]string{`{"foo":1}`}, []string{`"x"`, `{"foo":2}`}},
		{`{"allOf":[{"type":"integer"},{"not":false}]}`, []string{`1`}, []string{`"x"`}},
		{`{"type":"string","format":"regex"}`, []string{`"^value1|value2$"`, `"a.b"`, `""`, `"x|"`}, []string{`"(a"`, `"a)"`, `"["`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"not":{"allOf":[{"required":["a"]},{"required":["b"]}]}}`,
			[]string{`{"a":1}`, `{"b":1}`, `{}`}, []string{`{"a":1,"b":2}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":false,"c":{"type":"object","enum":["x"]}}}`,
			[]string{`{"a":1}`, `{}`}, []string{`{"b":1}`, `{"c":"x"}`, `{"c":{}}`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkValidates(t, tc.schema, tc.yes, tc.no) })
	}
}

func TestNumberKeyComparesByValue(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"1", "1.0"}, {"100", "1e2"}, {"0", "-0"}, {"0.0", "-0e5"}, {"1.5", "15e-1"}, {"-0.012", "-1.2E-2"}, {"10", "1e+1"},
	} {
		ka, errA := numberKey(tc.a)
		kb, errB := numberKey(tc.b)
		if errA != nil || errB != nil || ka != kb {
			t.Errorf("numberKey(%s) = %q, %v; numberKey(%s) = %q, %v; want equal", tc.a, ka, errA, tc.b, kb, errB)
		}
	}
	for _, tc := range []struct{ a, b string }{{"1", "-1"}, {"1", "10"}, {"0.1", "1"}, {"12", "21"}} {
		ka, _ := numberKey(tc.a)
		kb, _ := numberKey(tc.b)
		if ka == kb {
			t.Errorf("numberKey(%s) == numberKey(%s) = %q", tc.a, tc.b, ka)
		}
	}
	if k, err := numberKey("1e99999999999"); err == nil {
		t.Errorf("numberKey(1e99999999999) = %q, want an error", k)
	}
}

// Where the grammar cannot write a part of a schema it refuses the schema
// rather than leave the part out; parts that admit nothing are left out:
// an anyOf branch or a type of a list with contradictory limits, an item
// schema that is false, an additionalProperties whose enum meets none of
// its types.
func TestSchemaPartsAdmittingNothingLeftOut(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"anyOf":[{"type":"integer","minimum":3,"maximum":2},{"type":"string"}]}`, []string{`"x"`}, []string{`3`}},
		{`{"type":["integer","string"],"minimum":3,"maximum":2}`, []string{`"x"`}, []string{`3`}},
		{`{"type":"array","items":false}`, []string{`[]`}, []string{`[1]`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string","enum":[1]}}`,
			[]string{`{"a":1}`}, []string{`{"b":1}`, `{"b":"x"}`}},
		{`{"type":"object","properties":{"a":{"not":{}},"b":{"type":"integer"}}}`, []string{`{"b":1}`, `{}`}, []string{`{"a":1}`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkValidates(t, tc.schema, tc.yes, tc.no) })
	}
}

// patternProperties: unlisted names by the patterns they match (each
// pattern's schema), names matching none by additionalProperties, listed
// names never as unlisted ones; lookaheads after ^ in names and strings;
// not of string values.
func TestSchemaPatternNames(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"}},"patternProperties":{"^x":{"type":"string"},"y$":{"type":"string","maxLength":1}},"additionalProperties":false,"required":["a"]}`,
			[]string{`{"a":1,"xa":"s","by":"t","xy":"u"}`, `{"xq":"","a":2}`},
			[]string{`{"a":1,"b":"s"}`, `{"a":1,"xy":"uv"}`, `{"a":1,"xa":1}`, `{"a":"s"}`}},
		{`{"type":"object","properties":{"x1":{"type":"integer"}},"patternProperties":{"^x\\d$":{"type":"integer","minimum":5}},"additionalProperties":{"type":"boolean"}}`,
			[]string{`{"x1":5,"x2":6,"q":true}`, `{"x12":false}`}, []string{`{"x1":1}`, `{"x2":1}`, `{"q":1}`, `{"x1":"s"}`}},
		{`{"type":"object","patternProperties":{"^(/[^/]+)+$":{"type":"integer"}}}`,
			[]string{`{"/a/b":1,"x":"s","/":"t"}`}, []string{`{"/a":"s"}`}},
		{`{"type":"object","minProperties":1,"patternProperties":{"^[a-z]+$":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{"ab":1}`}, []string{`{}`, `{"A":1}`, `{"ab":"s"}`}},
		{`{"anyOf":[{"type":"object","patternProperties":{"^(?!(False|if|and)$)[a-zA-Z_][\\w]*$":{}},"additionalProperties":false},{"type":"null"}]}`,
			[]string{`{"a":1,"iff":[2]}`, `{}`, `null`, `{"False_":1}`}, []string{`{"if":1}`, `{"1a":1}`, `{"and":true}`}},
		{`{"type":"string","pattern":"^(?!(if|and)$)[a-z_]\\w*$"}`, []string{`"iff"`, `"x"`, `"an"`, `"_if"`}, []string{`"if"`, `"and"`, `"1a"`, `""`}},
		{`{"type":"string","pattern":"^(?=.*\\d)(?!.*x)[a-z0-9]{2,4}$"}`, []string{`"a1"`, `"1234"`}, []string{`"ab"`, `"a1x"`, `"12345"`}},
		{`{"type":"string","minLength":2,"not":{"enum":["ab","bc"]}}`, []string{`"abc"`, `"ac"`, `"b\"c"`}, []string{`"ab"`, `"bc"`, `"a"`}},
		{`{"type":"string","not":{"enum":["a","bc"]}}`, []string{`"b"`, `"abc"`, `""`, `"bcd"`}, []string{`"a"`, `"bc"`}},
		{`{"type":["string","boolean","null"],"not":{"enum":["a",true,null]}}`, []string{`"b"`, `false`}, []string{`"a"`, `true`, `null`}},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			if strings.Contains(tc.schema, "(?") { // the reference validator has no lookaheads
				checkAccepts(t, tc.schema, tc.yes, tc.no)
				return
			}
			checkValidates(t, tc.schema, tc.yes, tc.no)
		})
	}
}

// propertyNames constrains unlisted names as listed ones: patterns,
// lengths, enum values and not of enum values.
func TestSchemaPropertyNames(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"object","propertyNames":{"pattern":"^\\d+$"},"additionalProperties":{"type":"string"}}`,
			[]string{`{}`, `{"1":"a","22":"b"}`}, []string{`{"a":"x"}`, `{"1":1}`}},
		{`{"type":"object","properties":{"ab":{"type":"integer"}},"propertyNames":{"maxLength":2}}`,
			[]string{`{"ab":1}`, `{"x":true,"ab":2}`, `{"yz":null}`}, []string{`{"xyz":1}`, `{"ab":"s"}`}},
		{`{"type":"object","propertyNames":{"enum":["a","b"]}}`, []string{`{"a":1,"b":[]}`, `{}`}, []string{`{"c":1}`}},
		{`{"type":"object","properties":{"k":{"type":"integer"}},"propertyNames":{"not":{"enum":["x","y"]}}}`,
			[]string{`{"k":1,"z":2}`, `{"xx":1}`}, []string{`{"x":1}`, `{"k":1,"y":2}`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkValidates(t, tc.schema, tc.yes, tc.no) })
	}
}

// if/then/else: objects that fail if meet else (or anything, without
// else) rather than being left out: if testing several properties'
// values, required properties or types.
func TestSchemaIfElseExact(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"x":{"type":"integer"},"y":{"type":"integer"}},"if":{"properties":{"a":{"const":"p"},"b":{"const":"q"}}},"then":{"required":["x"]},"else":{"required":["y"]}}`,
			[]string{`{"a":"p","b":"q","x":1}`, `{"x":1}`, `{"a":"z","y":2}`, `{"a":"p","b":"r","y":2}`}, []string{`{"a":"p","b":"q","y":1}`, `{"a":"z","x":1}`}},
		{`{"type":"object","properties":{"a":{},"b":{"type":"integer"}},"if":{"required":["a"]},"then":{"required":["b"]}}`,
			[]string{`{}`, `{"b":1}`, `{"a":1,"b":2}`}, []string{`{"a":1}`}},
		{`{"properties":{"a":{"type":"integer"}},"not":{"enum":["x",true]}}`,
			[]string{`"y"`, `{"a":1}`, `3`, `false`, `null`}, []string{`"x"`, `true`, `{"a":"s"}`}},
		{`{"if":{"type":"string"},"then":{"maxLength":2},"else":{"type":"integer","minimum":5}}`,
			[]string{`"ab"`, `5`}, []string{`"abc"`, `4`, `null`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkValidates(t, tc.schema, tc.yes, tc.no) })
	}
}

// Unlisted members count toward maxProperties.
func TestSchemaMaxPropertiesCountsUnlistedMembers(t *testing.T) {
	checkValidates(t, `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"maxProperties":3,"additionalProperties":{"type":"integer"}}`,
		[]string{`{"name":"a"}`, `{"name":"a","b":1}`, `{"b":1,"name":"a","c":2}`},
		[]string{`{"name":"a","b":1,"c":2,"d":3}`, `{"b":1}`, `{"name":"a","b":"x"}`})
	checkValidates(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"maxProperties":2,"patternProperties":{"^x":{"type":"string"}}}`,
		[]string{`{"a":1,"b":2}`, `{"x1":"s","y":null}`, `{"b":2,"q":[]}`}, []string{`{"a":1,"b":2,"x":"s"}`, `{"x":1}`, `{"q":1,"r":2,"s":3}`})
}

// oneOf branches that exclude each other without narrowing either: a
// property the other requires that this one refuses (additionalProperties
// false) or admits no common value for (disjoint patterns), and a
// property each anyOf branch requires that the other refuses.
func TestSchemaOneOfExclusiveAsWritten(t *testing.T) {
	for _, tc := range []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"object","oneOf":[{"properties":{"name":{"type":"string"},"ext":{"type":"boolean"}},"additionalProperties":false},{"properties":{"name":{"type":"string"},"exe":{"type":"string"}},"required":["name","exe"]}]}`,
			[]string{`{"name":"a","ext":true}`, `{"name":"a"}`, `{"name":"a","exe":"x"}`, `{"name":"a","exe":"x","other":1}`},
			[]string{`{"exe":"x"}`, `{"name":"a","ext":1}`}},
		{`{"type":"object","oneOf":[{"properties":{"t":{"type":"string","pattern":"^ecu$"},"n":{"type":"string"}}},{"properties":{"t":{"type":"string","pattern":"^table$"},"s":{"type":"object"}},"required":["t","s"],"additionalProperties":false}]}`,
			[]string{`{"t":"ecu","n":"x"}`, `{"n":"x"}`, `{"t":"table","s":{}}`, `{}`}, []string{`{"t":"table","n":"x"}`, `{"t":"x"}`}},
		{`{"type":"object","oneOf":[{"properties":{"p":{"type":"string"},"q":{"type":"string"}},"anyOf":[{"required":["p"]},{"required":["q"]}],"additionalProperties":false},{"properties":{"r":{"type":"string"}},"required":["r"],"additionalProperties":false}]}`,
			[]string{`{"p":"a"}`, `{"q":"b","p":"a"}`, `{"r":"c"}`}, []string{`{}`, `{"p":"a","r":"c"}`}},
	} {
		t.Run(tc.schema, func(t *testing.T) { checkValidates(t, tc.schema, tc.yes, tc.no) })
	}
}
