package graphdef

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// yamlKind is the kind of a yamlNode.
type yamlKind uint8

const (
	scalarNode yamlKind = iota + 1
	mappingNode
	sequenceNode
	aliasNode
)

// yamlNode is one node of a parsed YAML document, as the decoder reads it:
// a mapping's Content is its keys and values in turn, a sequence's its
// items; a scalar has its text and resolved tag. Line and Column are
// 1-based and point at the node's first character.
type yamlNode struct {
	Kind         yamlKind
	Tag          string // scalars: "!!str", "!!int", "!!float", "!!bool", "!!null", or an explicit tag as written
	Value        string
	Line, Column int
	Content      []*yamlNode
}

// ShortTag is the node's tag ("!!str", "!!int", ...).
func (n *yamlNode) ShortTag() string { return n.Tag }

// yamlSyntaxError is a YAML syntax error at its line and column.
type yamlSyntaxError struct {
	Line, Column int
	Message      string
}

func (e *yamlSyntaxError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
}

// parseYAML parses src into its documents' root nodes (nil for an empty
// document). Duplicate keys are left to the decoder, which reports them
// with both positions. Syntax errors are *yamlSyntaxError.
//
// A leading UTF-8 byte order mark is skipped. Collections nested deeper
// than MaxDepth and mappings with more than MaxKeys keys are a syntax
// error found before parsing, in one pass over the tokens (checkShape).
func parseYAML(src []byte) ([]*yamlNode, error) {
	tokens := lexer.Tokenize(string(bytes.TrimPrefix(src, utf8BOM)))
	if err := checkShape(tokens); err != nil {
		return nil, err
	}
	f, err := parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		var ye interface {
			GetToken() *token.Token
			GetMessage() string
		}
		if errors.As(err, &ye) && ye.GetToken() != nil {
			tk := ye.GetToken()
			if nx := tk.Next; nx != nil && nx.Type == token.MappingValueType && nx.Position.Line > tk.Position.Line {
				// A plain scalar folded over the lines up to a ':' that
				// may not follow it: the ':' is what is misplaced (a key
				// indented under a scalar value).
				tk = nx
			}
			return nil, &yamlSyntaxError{Line: tk.Position.Line, Column: max(tk.Position.Column, 1), Message: ye.GetMessage()}
		}
		return nil, err
	}
	var docs []*yamlNode
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			docs = append(docs, nil)
			continue
		}
		docs = append(docs, convert(doc.Body))
	}
	return docs, nil
}

var utf8BOM = []byte("\ufeff")

// checkShape returns a *yamlSyntaxError at the first token nested deeper
// than MaxDepth collections, or at the first key past MaxKeys of one
// mapping: the YAML parser's work grows with the square of the depth and
// of a block mapping's keys. A flow collection's brackets count one level
// each; block collections count by indentation: a sequence entry or a key
// opens a level unless a level at its column or further right is open,
// whose levels it then closes. A key at the column of an open mapping is
// that mapping's next key, and a sequence entry there is the value of the
// mapping's last key (a level within it).
func checkShape(tokens token.Tokens) error {
	type level struct {
		col  int  // block levels: the column of their keys or entries
		keys int  // mappings: the keys seen so far
		seq  bool // a sequence, else a mapping
	}
	var block, flow []level // the open levels, outermost first
	for _, tk := range tokens {
		isKey := tk.Type == token.MappingKeyType || tk.NextType() == token.MappingValueType
		var keys int // the keys of the mapping tk is a key of, tk included
		switch tk.Type {
		case token.DocumentHeaderType, token.DocumentEndType:
			block, flow = block[:0], flow[:0]
			continue
		case token.SequenceStartType, token.MappingStartType:
			flow = append(flow, level{seq: tk.Type == token.SequenceStartType})
		case token.SequenceEndType, token.MappingEndType:
			flow = flow[:max(len(flow)-1, 0)]
			continue
		default:
			if len(flow) > 0 {
				if top := &flow[len(flow)-1]; isKey && !top.seq {
					top.keys++
					keys = top.keys
				}
				break
			}
			if tk.Type != token.SequenceEntryType && !isKey {
				continue
			}
			col := tk.Position.Column
			for len(block) > 0 && block[len(block)-1].col > col {
				block = block[:len(block)-1]
			}
			if n := len(block); n > 0 && block[n-1].col == col {
				top := &block[n-1]
				switch {
				case isKey && top.seq && n > 1 && !block[n-2].seq && block[n-2].col == col:
					block = block[:n-1] // a key after its sibling's sequence value
					block[n-2].keys++
					keys = block[n-2].keys
				case isKey && !top.seq:
					top.keys++
					keys = top.keys
				case !isKey && !top.seq:
					block = append(block, level{col: col, seq: true})
				case isKey:
					*top = level{col: col, keys: 1}
				}
				break
			}
			block = append(block, level{col: col, seq: !isKey, keys: btoi(isKey)})
		}
		if len(block)+len(flow) > MaxDepth {
			return &yamlSyntaxError{Line: tk.Position.Line, Column: max(tk.Position.Column, 1),
				Message: fmt.Sprintf("collections nested more than %d deep", MaxDepth)}
		}
		if keys > MaxKeys {
			return &yamlSyntaxError{Line: tk.Position.Line, Column: max(tk.Position.Column, 1),
				Message: fmt.Sprintf("a mapping with more than %d keys", MaxKeys)}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// convert turns a goccy/go-yaml AST node into a yamlNode. Anchors are
// transparent (their value is the node); tags are kept on the scalar they
// mark.
func convert(n ast.Node) *yamlNode {
	at := func(tk *token.Token, y *yamlNode) *yamlNode {
		if tk != nil {
			y.Line, y.Column = tk.Position.Line, max(tk.Position.Column, 1)
		}
		return y
	}
	switch v := n.(type) {
	case *ast.MappingNode:
		y := at(v.GetToken(), &yamlNode{Kind: mappingNode})
		for _, kv := range v.Values {
			y.Content = append(y.Content, convert(kv.Key), convertValue(kv.Value, kv))
		}
		if len(v.Values) > 0 && !v.IsFlowStyle {
			// A block mapping starts at its first key.
			y.Line, y.Column = y.Content[0].Line, y.Content[0].Column
		}
		return y
	case *ast.MappingValueNode:
		k := convert(v.Key)
		return &yamlNode{Kind: mappingNode, Line: k.Line, Column: k.Column, Content: []*yamlNode{k, convertValue(v.Value, v)}}
	case *ast.MappingKeyNode:
		return convert(v.Value)
	case *ast.SequenceNode:
		y := at(v.GetToken(), &yamlNode{Kind: sequenceNode})
		for _, item := range v.Values {
			y.Content = append(y.Content, convertValue(item, v))
		}
		return y
	case *ast.AnchorNode:
		return convertValue(v.Value, v)
	case *ast.AliasNode:
		return at(v.GetToken(), &yamlNode{Kind: aliasNode})
	case *ast.TagNode:
		y := convertValue(v.Value, v)
		if y.Kind == scalarNode {
			y.Tag = v.Start.Value
		}
		return at(v.GetToken(), y)
	case *ast.LiteralNode:
		return at(v.Start, &yamlNode{Kind: scalarNode, Tag: "!!str", Value: v.Value.Value})
	case *ast.StringNode:
		tk := v.GetToken()
		if tk.Type == token.SingleQuoteType || tk.Type == token.DoubleQuoteType {
			return at(tk, &yamlNode{Kind: scalarNode, Tag: "!!str", Value: v.Value})
		}
		return at(tk, &yamlNode{Kind: scalarNode, Tag: resolve(v.Value), Value: v.Value})
	case *ast.NullNode:
		// goccy gives an absent value a null node at the key's colon.
		return at(v.GetToken(), &yamlNode{Kind: scalarNode, Tag: "!!null", Value: tokenText(v.GetToken())})
	case ast.ScalarNode:
		text := tokenText(v.GetToken())
		return at(v.GetToken(), &yamlNode{Kind: scalarNode, Tag: resolve(text), Value: text})
	}
	tk := n.GetToken()
	return at(tk, &yamlNode{Kind: scalarNode, Tag: "!!" + n.Type().String(), Value: tokenText(tk)})
}

// convertValue is convert for a value that may be missing (a key with no
// value reads as null at its parent's position).
func convertValue(n ast.Node, parent ast.Node) *yamlNode {
	if n == nil {
		tk := parent.GetToken()
		return &yamlNode{Kind: scalarNode, Tag: "!!null", Line: tk.Position.Line, Column: max(tk.Position.Column, 1)}
	}
	return convert(n)
}

func tokenText(tk *token.Token) string {
	if tk == nil {
		return ""
	}
	return tk.Value
}

// YAML 1.2 core schema resolution of plain scalars.
var (
	yamlNull  = regexp.MustCompile(`^(~|null|Null|NULL|)$`)
	yamlBool  = regexp.MustCompile(`^(true|True|TRUE|false|False|FALSE)$`)
	yamlInt   = regexp.MustCompile(`^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$`)
	yamlFloat = regexp.MustCompile(`^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$`)
)

// resolve is the tag of a plain scalar with text s under the YAML 1.2 core
// schema: null, bool, int, float, else str.
func resolve(s string) string {
	switch {
	case yamlNull.MatchString(s):
		return "!!null"
	case yamlBool.MatchString(s):
		return "!!bool"
	case yamlInt.MatchString(s):
		return "!!int"
	case yamlFloat.MatchString(s):
		return "!!float"
	}
	return "!!str"
}
