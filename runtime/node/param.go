package node

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
)

// ParamKind is the type of a param's value.
type ParamKind uint8

const (
	// Int params hold an int64.
	Int ParamKind = iota + 1
	// Float params hold a float64; integer literals are accepted and widened.
	Float
	// String params hold a string.
	String
	// Bool params hold a bool.
	Bool
	// Enum params hold a string that is one of Param.Enum.
	Enum
)

// String returns the kind's name as written in YAML ("int", "float",
// "string", "bool", "enum"), and "kind(N)" outside the enumeration.
func (k ParamKind) String() string {
	switch k {
	case Int:
		return "int"
	case Float:
		return "float"
	case String:
		return "string"
	case Bool:
		return "bool"
	case Enum:
		return "enum"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Param declares one parameter of a node (or, via the compiler, of a graph).
type Param struct {
	// Name matches ^[a-z][a-z0-9_]*$.
	Name string
	// Kind is the type of the value.
	Kind ParamKind
	// Default is the value used when a graph does not set the param; nil
	// makes the param required. It must be a value Convert accepts (an
	// int64, float64, string or bool matching Kind, within Min, Max and
	// Enum); Validate normalizes it to the resolved form, so an int becomes
	// an int64, and an integer default of a Float param a float64.
	Default any
	// Min and Max bound Int and Float values inclusively; nil is unbounded.
	// They must be nil for other kinds.
	Min, Max *float64
	// Enum lists the allowed values of an Enum param, which must have at
	// least one; it must be empty for other kinds.
	Enum []string
	// Doc is a one-line description for the generated reference.
	Doc string
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ValidName reports whether s is a valid port or param name:
// ^[a-z][a-z0-9_]*$.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// Validate reports whether p is a well-formed declaration: a valid name and
// kind, bounds only on numeric kinds with Min <= Max, a non-empty list of
// distinct values exactly for Enum, and a Default (if any) that Convert
// accepts. On success it replaces Default with its resolved form.
func (p *Param) Validate() error {
	if !namePattern.MatchString(p.Name) {
		return fmt.Errorf("invalid param name %q: want ^[a-z][a-z0-9_]*$", p.Name)
	}
	if p.Kind < Int || p.Kind > Enum {
		return fmt.Errorf("param %s: invalid kind %s", p.Name, p.Kind)
	}
	if p.Min != nil || p.Max != nil {
		if p.Kind != Int && p.Kind != Float {
			return fmt.Errorf("param %s: min and max apply only to int and float, not %s", p.Name, p.Kind)
		}
		for _, b := range []*float64{p.Min, p.Max} {
			if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
				return fmt.Errorf("param %s: bounds must be finite", p.Name)
			}
		}
		if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
			return fmt.Errorf("param %s: min %s is greater than max %s", p.Name, formatFloat(*p.Min), formatFloat(*p.Max))
		}
	}
	if p.Kind == Enum {
		if len(p.Enum) == 0 {
			return fmt.Errorf("param %s: an enum needs at least one value", p.Name)
		}
		for i, v := range p.Enum {
			if slices.Contains(p.Enum[:i], v) {
				return fmt.Errorf("param %s: duplicate enum value %q", p.Name, v)
			}
		}
	} else if len(p.Enum) > 0 {
		return fmt.Errorf("param %s: enum values apply only to kind enum, not %s", p.Name, p.Kind)
	}
	if p.Default != nil {
		v, err := p.Convert(p.Default)
		if err != nil {
			return fmt.Errorf("param %s: default: %v", p.Name, err)
		}
		p.Default = v
	}
	return nil
}

// Convert checks a value against p and returns it in its resolved form:
// int64 for Int, float64 for Float, string for String and Enum, bool for
// Bool. Int accepts int and int64; Float accepts float64 and widens int and
// int64. Out-of-range values, values outside Enum, non-finite floats and any
// other type are errors. The error text does not name the param; callers
// prefix it.
func (p *Param) Convert(v any) (any, error) {
	switch p.Kind {
	case Int:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case int:
			n = int64(x)
		default:
			return nil, wrongKind(p.Kind, v)
		}
		if err := p.checkRange(float64(n), strconv.FormatInt(n, 10)); err != nil {
			return nil, err
		}
		return n, nil
	case Float:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case int:
			f = float64(x)
		default:
			return nil, wrongKind(p.Kind, v)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want a finite float, got %s", formatFloat(f))
		}
		if err := p.checkRange(f, formatFloat(f)); err != nil {
			return nil, err
		}
		return f, nil
	case String:
		s, ok := v.(string)
		if !ok {
			return nil, wrongKind(p.Kind, v)
		}
		return s, nil
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, wrongKind(p.Kind, v)
		}
		return b, nil
	case Enum:
		s, ok := v.(string)
		if !ok {
			return nil, wrongKind(p.Kind, v)
		}
		if !slices.Contains(p.Enum, s) {
			msg := fmt.Sprintf("%q is not one of %s", s, strings.Join(p.Enum, ", "))
			if c := hint.Closest(s, p.Enum); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
			return nil, fmt.Errorf("%s", msg)
		}
		return s, nil
	}
	return nil, fmt.Errorf("invalid kind %s", p.Kind)
}

// Parse reads a value for p from text, as given on a command line
// ("--set k=v"): decimal integers for Int, Go float syntax for Float,
// "true"/"false" for Bool, and the text itself for String and Enum. The
// result is then checked by Convert.
func (p *Param) Parse(s string) (any, error) {
	switch p.Kind {
	case Int:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want int, got %q", s)
		}
		return p.Convert(n)
	case Float:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("want float, got %q", s)
		}
		return p.Convert(f)
	case Bool:
		switch strings.TrimSpace(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("want bool (true or false), got %q", s)
	}
	return p.Convert(s)
}

// Range describes the allowed range of an Int or Float param as text, such
// as "[1, 65536]", ">= 0" or "<= 2"; it is "" when the param is unbounded.
func (p *Param) Range() string {
	switch {
	case p.Min != nil && p.Max != nil:
		return fmt.Sprintf("[%s, %s]", formatFloat(*p.Min), formatFloat(*p.Max))
	case p.Min != nil:
		return ">= " + formatFloat(*p.Min)
	case p.Max != nil:
		return "<= " + formatFloat(*p.Max)
	}
	return ""
}

func (p *Param) checkRange(f float64, text string) error {
	if (p.Min != nil && f < *p.Min) || (p.Max != nil && f > *p.Max) {
		return fmt.Errorf("%s is out of range %s", text, p.Range())
	}
	return nil
}

func wrongKind(k ParamKind, v any) error {
	return fmt.Errorf("want %s, got %s %s", k, KindOf(v), FormatValue(v))
}

// KindOf names the kind of a value as a user would write it: "int" for int
// and int64, "float", "string", "bool", "null" for nil, or the Go type for
// anything else.
func KindOf(v any) string {
	switch v.(type) {
	case int, int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// FormatValue renders a param value the same way everywhere (plans, docs,
// errors): integers in decimal, floats in shortest form with a decimal point
// or exponent so they never read as integers, strings Go-quoted, bools as
// true/false, nil as null.
func FormatValue(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		s := formatFloat(x)
		if !strings.ContainsAny(s, ".eEIN") {
			s += ".0"
		}
		return s
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Params holds a node's resolved param values by name: int64 for Int,
// float64 for Float, string for String and Enum, bool for Bool. The compiler
// fills in every declared param (defaults included) before calling a spec's constructor,
// so the accessors below panic only on programmer error: asking for a name
// the spec does not declare, or with the wrong accessor.
type Params map[string]any

// Int returns the Int param name as an int. It panics if the param is missing
// or not an int64.
func (p Params) Int(name string) int { return int(get[int64](p, name)) }

// Float returns the Float param name. It panics if the param is missing or not
// a float64.
func (p Params) Float(name string) float64 { return get[float64](p, name) }

// String returns the String or Enum param name. It panics if the param is
// missing or not a string.
func (p Params) String(name string) string { return get[string](p, name) }

// Bool returns the Bool param name. It panics if the param is missing or not
// a bool.
func (p Params) Bool(name string) bool { return get[bool](p, name) }

func get[T any](p Params, name string) T {
	v, ok := p[name]
	if !ok {
		panic(fmt.Sprintf("node: param %q is not set", name))
	}
	t, ok := v.(T)
	if !ok {
		var zero T
		panic(fmt.Sprintf("node: param %q is %T, not %T", name, v, zero))
	}
	return t
}
