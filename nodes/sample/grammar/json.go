package grammar

// JSONRules are GBNF rules for JSON values: value, object, array, string,
// number and ws (at most 8 blanks between tokens, so that a sentence
// always ends within a bounded number of bytes once its structure is
// closed). Grammars built on them add a root.
const JSONRules = `value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
ws ::= [ \t\n]{0,8}
`

// JSONObject is the grammar of one JSON object (response_format
// json_object).
func JSONObject() *Grammar {
	g, err := Parse("root ::= object\n" + JSONRules)
	if err != nil {
		panic("grammar: JSONRules: " + err.Error()) // a programmer error
	}
	return g
}
