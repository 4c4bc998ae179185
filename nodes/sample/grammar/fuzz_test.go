package grammar

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and a grammar it accepts matches bytes
// without panicking, with Remaining never negative, cached or not.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`root ::= "a" | [b-d]+ x?` + "\nx ::= \"\\u00e9\"{1,3}", "root ::= object\n" + JSONRules, `root ::= (.)*`, `root ::= [^\x00-\x7f]`} {
		f.Add(s, []byte(`{"a": [1, "é"]}`))
	}
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		g, err := Parse(src)
		if err != nil {
			return
		}
		for _, st := range []*State{g.Start(), g.NewCache().Start()} {
			for _, b := range input {
				if st.Remaining() < 0 {
					t.Fatalf("negative Remaining")
				}
				if st = st.Advance(b); st == nil {
					break
				}
			}
		}
	})
}

// FuzzSchema: FromSchema never panics, and what it returns parses.
func FuzzSchema(f *testing.F) {
	for _, s := range testSchemas {
		f.Add(s)
	}
	for _, s := range []string{
		`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`,
		`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991,"multipleOf":3}`,
		`{"type":"number","exclusiveMinimum":0,"maximum":10,"multipleOf":0.5}`,
		`{"type":"string","pattern":"^(?:[a-z]{2,}|\\d+)-x?$","maxLength":9}`,
		`{"type":"string","format":"date-time"}`,
		`{"allOf":[{"$ref":"#/$defs/a"},{"required":["x"]}],"$defs":{"a":{"properties":{"x":{"const":1}}}}}`,
		`{"oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{},"b":{}},"not":{"type":"array"}}`,
		`{"if":{"properties":{"k":{"const":1}}},"then":{"required":["k"]},"minProperties":1,"maxProperties":2,"properties":{"k":{},"j":{}}}`,
		`{"type":"array","prefixItems":[{"type":"null"}],"items":false,"uniqueItems":true}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		if !json.Valid([]byte(schema)) {
			return
		}
		src, err := FromSchema(json.RawMessage(schema))
		if err != nil {
			return
		}
		if _, err := Parse(src); err != nil {
			t.Fatalf("FromSchema(%s) gave GBNF that does not parse: %v\n%s", schema, err, src)
		}
	})
}

// FuzzRegex: a pattern parseRegex accepts compiles to GBNF that parses.
func FuzzRegex(f *testing.F) {
	for _, s := range []string{`^[a-z]+$`, `(a|b)*c{2,3}`, `\d+\.\d*`, `[^"\\]`, `^(?:x|)$`, `a{,}`, `[\w-]{1,5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		re, err := parseRegex(pattern)
		if err != nil {
			return
		}
		re.lengths()
		if short, ok := re.withLength(1, 8); ok {
			re = short
		}
		g, ok := re.gbnf()
		if !ok {
			return
		}
		src := `root ::= "\"" ` + g + ` "\""` + "\n" + JSONRules
		if _, err := Parse(src); err != nil && !strings.Contains(err.Error(), "too large") {
			t.Fatalf("pattern %q gave GBNF that does not parse: %v\n%s", pattern, err, src)
		}
	})
}
