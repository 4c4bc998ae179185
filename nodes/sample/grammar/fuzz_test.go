package grammar

import (
	"encoding/json"
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
	f.Add(`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`)
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
