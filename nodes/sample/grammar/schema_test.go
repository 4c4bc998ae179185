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

func TestSchemaOutputsValidate(t *testing.T) {
	pieces, v := testVocab()
	for i, src := range append([]string{`{"type":"object"}`}, testSchemas...) {
		t.Run(fmt.Sprint("schema ", i), func(t *testing.T) {
			gbnf, err := FromSchema(json.RawMessage(src))
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(gbnf)
			if err != nil {
				t.Fatalf("%v\n%s", err, gbnf)
			}
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("schema.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("schema.json")
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for run := range 60 {
				budget := 40 + run
				text, complete := generate(g, pieces, v, budget, rng)
				if !complete {
					t.Fatalf("run %d: no complete sentence within %d tokens: %q", run, budget, text)
				}
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Fatalf("run %d: %q does not parse: %v", run, text, err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("run %d: %q does not validate: %v", run, text, err)
				}
			}
		})
	}
}

func TestSchemaErrorsNameTheKeyword(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"string","pattern":"a+"}`, `"pattern"`},
		{`{"type":"integer","minimum":3}`, `"minimum"`},
		{`{"$ref":"https://example.com/s.json"}`, "local references"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, `"b"`},
		{`{"type":"frog"}`, `"frog"`},
		{`false`, "matches nothing"},
	} {
		if _, err := FromSchema(json.RawMessage(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSchema(%s) = %v, want an error with %s", tc.schema, err, tc.want)
		}
	}
}
