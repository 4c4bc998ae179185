package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Numbers the schema compiler generates have at most maxIntDigits digits
// before the point (as the integer rule of JSONRules), so bounds beyond
// ±intLimit constrain nothing.
const maxIntDigits = 16

var intLimit = int64(9_999_999_999_999_999) // 10^16 - 1

// bounds is a closed integer interval [lo, hi] within ±intLimit.
type bounds struct{ lo, hi int64 }

// digitRange is GBNF for the decimal integers in [lo, hi] (0 <= lo <= hi),
// written without leading zeros.
func digitRange(lo, hi int64) string {
	var alts []string
	a, b := strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
	for n := len(a); n <= len(b); n++ {
		l, h := a, b
		if n > len(a) {
			l = "1" + strings.Repeat("0", n-1)
			if n == 1 {
				l = "0"
			}
		}
		if n < len(b) {
			h = strings.Repeat("9", n)
		}
		alts = append(alts, sameLength(l, h))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// sameLength is GBNF for the digit strings of lo's length between lo and
// hi, compared as numbers.
func sameLength(lo, hi string) string {
	if lo == "" {
		return `""`
	}
	if lo[0] == hi[0] {
		if len(lo) == 1 {
			return `"` + lo + `"`
		}
		return `"` + lo[:1] + `" ` + sameLength(lo[1:], hi[1:])
	}
	rest := len(lo) - 1
	anyRest := ""
	if rest > 0 {
		anyRest = fmt.Sprintf(" [0-9]{%d}", rest)
	}
	if strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "" {
		return fmt.Sprintf("[%c-%c]%s", lo[0], hi[0], anyRest)
	}
	var alts []string
	if rest > 0 {
		alts = append(alts, `"`+lo[:1]+`" `+sameLength(lo[1:], strings.Repeat("9", rest)))
	}
	if hi[0]-lo[0] > 1 {
		alts = append(alts, fmt.Sprintf("[%c-%c]%s", lo[0]+1, hi[0]-1, anyRest))
	}
	if rest > 0 {
		alts = append(alts, `"`+hi[:1]+`" `+sameLength(strings.Repeat("0", rest), hi[1:]))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// intRange is GBNF for the JSON integers in [b.lo, b.hi].
func intRange(b bounds) string {
	var alts []string
	if b.hi >= 0 {
		alts = append(alts, digitRange(max(b.lo, 0), b.hi))
	}
	if b.lo < 0 {
		alts = append(alts, `"-" `+digitRange(max(-b.hi, 1), -b.lo))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// numberLimits reads minimum, maximum, exclusiveMinimum and
// exclusiveMaximum (numbers, or draft-04's booleans) as big rationals; a
// nil limit is absent.
type numberLimits struct {
	min, max           *big.Rat
	minExcl, maxExcl   bool
	hasLimit, fraction bool // any limit; some limit is not an integer
}

func readLimits(o *object, at string) (numberLimits, error) {
	var l numberLimits
	num := func(k string) (*big.Rat, error) {
		v, ok := o.vals[k]
		if !ok {
			return nil, nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, nil
		}
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return nil, fmt.Errorf("schema%s.%s: %q is not a number", at, k, n)
		}
		return r, nil
	}
	var err error
	if l.min, err = num("minimum"); err != nil {
		return l, err
	}
	if l.max, err = num("maximum"); err != nil {
		return l, err
	}
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		switch v := o.vals[k].(type) {
		case bool: // draft-04: a flag on minimum / maximum
			if k == "exclusiveMinimum" {
				l.minExcl = v && l.min != nil
			} else {
				l.maxExcl = v && l.max != nil
			}
		case json.Number:
			r, err := num(k)
			if err != nil {
				return l, err
			}
			if k == "exclusiveMinimum" && (l.min == nil || r.Cmp(l.min) >= 0) {
				l.min, l.minExcl = r, true
			}
			if k == "exclusiveMaximum" && (l.max == nil || r.Cmp(l.max) <= 0) {
				l.max, l.maxExcl = r, true
			}
		}
	}
	l.hasLimit = l.min != nil || l.max != nil
	for _, r := range []*big.Rat{l.min, l.max} {
		if r != nil && !r.IsInt() {
			l.fraction = true
		}
	}
	return l, nil
}

// intBounds is the integers the limits admit, within ±intLimit; ok is
// false when there are none.
func (l numberLimits) intBounds() (b bounds, ok bool) {
	b = bounds{-intLimit, intLimit}
	if l.min != nil {
		v := ceilRat(l.min)
		if l.minExcl && l.min.IsInt() {
			v.Add(v, big.NewInt(1))
		}
		if v.Cmp(big.NewInt(b.lo)) > 0 {
			if v.Cmp(big.NewInt(intLimit)) > 0 {
				return b, false
			}
			b.lo = v.Int64()
		}
	}
	if l.max != nil {
		v := floorRat(l.max)
		if l.maxExcl && l.max.IsInt() {
			v.Sub(v, big.NewInt(1))
		}
		if v.Cmp(big.NewInt(b.hi)) < 0 {
			if v.Cmp(big.NewInt(-intLimit)) < 0 {
				return b, false
			}
			b.hi = v.Int64()
		}
	}
	return b, b.lo <= b.hi
}

func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m
	return q // Euclidean division by a positive denominator floors
}

func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// integerRule is GBNF for the integers o admits (minimum, maximum,
// exclusive*, multipleOf).
func (c *schemaCompiler) integerRule(o *object, at string) (string, error) {
	l, err := readLimits(o, at)
	if err != nil {
		return "", err
	}
	b, ok := l.intBounds()
	if !ok {
		return "", fmt.Errorf("schema%s: minimum and maximum admit no integer", at)
	}
	if m, ok := o.vals["multipleOf"]; ok {
		return c.multipleRule(m, b, at)
	}
	if !l.hasLimit {
		return "integer", nil
	}
	return intRange(b), nil
}

// multipleRule is GBNF for the integers in b that are multiples of m: a
// digit automaton tracks the remainder, so m is at most 1000 and b may
// only fix the sign.
func (c *schemaCompiler) multipleRule(m any, b bounds, at string) (string, error) {
	n, _ := m.(json.Number)
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || r.Sign() <= 0 {
		return "", fmt.Errorf("schema%s.multipleOf: expected a positive number", at)
	}
	if !r.IsInt() || r.Num().Cmp(big.NewInt(1000)) > 0 {
		return "", fmt.Errorf("schema%s: keyword \"multipleOf\" is supported for integer divisors up to 1000", at)
	}
	k := r.Num().Int64()
	var pos, zero, neg bool
	switch {
	case b.lo == -intLimit && b.hi == intLimit:
		pos, zero, neg = true, true, true
	case (b.lo == 0 || b.lo == 1) && b.hi == intLimit:
		pos, zero = true, b.lo == 0
	case (b.hi == 0 || b.hi == -1) && b.lo == -intLimit:
		neg, zero = true, b.hi == 0
	default:
		return "", fmt.Errorf("schema%s: keyword \"multipleOf\" with minimum or maximum other than 0 is not supported", at)
	}
	if k == 1 {
		return intRange(b), nil
	}
	if !c.modRules[k] {
		c.modRules[k] = true
		c.emit(modRules(c.prefix, k))
	}
	// The first digit, then the automaton over remainders.
	var digits []string
	for d := 1; d <= 9; d++ {
		digits = append(digits, fmt.Sprintf(`"%d" %smod-%d-%d`, d, c.prefix, k, d%int(k)))
	}
	body := "( " + strings.Join(digits, " | ") + " )"
	var alts []string
	if pos {
		alts = append(alts, body)
	}
	if neg {
		alts = append(alts, `"-" `+body)
	}
	if zero {
		alts = append(alts, `"0"`)
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

// modRules are the automaton rules multipleRule's output refers to:
// mod-k-r is the rest of a number after digits whose remainder is r.
func modRules(prefix string, k int64) string {
	var b strings.Builder
	for r := range k {
		fmt.Fprintf(&b, "%smod-%d-%d ::= ", prefix, k, r)
		var alts []string
		for d := range int64(10) {
			alts = append(alts, fmt.Sprintf(`"%d" %smod-%d-%d`, d, prefix, k, (r*10+d)%k))
		}
		if r == 0 {
			alts = append(alts, `""`)
		}
		b.WriteString(strings.Join(alts, " | ") + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// numberRule is GBNF for the numbers o admits. With limits, integers are
// written exactly (intRange) and fractions have a nonzero last digit, so
// that i.f lies strictly between i and i+1; no exponent is written.
// multipleOf 10^-p (p >= 0) limits the fraction to p digits.
func (c *schemaCompiler) numberRule(o *object, at string) (string, error) {
	l, err := readLimits(o, at)
	if err != nil {
		return "", err
	}
	fracDigits := 16
	if m, ok := o.vals["multipleOf"]; ok {
		n, _ := m.(json.Number)
		r, ok := new(big.Rat).SetString(string(n))
		if !ok || r.Sign() <= 0 {
			return "", fmt.Errorf("schema%s.multipleOf: expected a positive number", at)
		}
		p, ok := decimalPlaces(r)
		if !ok {
			if r.IsInt() {
				return c.integerRule(o, at)
			}
			return "", fmt.Errorf("schema%s: keyword \"multipleOf\" is supported for integers and powers of ten", at)
		}
		if p == 0 {
			return c.integerRule(o, at)
		}
		fracDigits = p
	}
	if !l.hasLimit && fracDigits == 16 {
		return "number", nil
	}
	b, ok := l.intBounds()
	if !ok {
		return "", fmt.Errorf("schema%s: minimum and maximum admit no integer", at)
	}
	alts := []string{intRange(b)}
	if l.fraction {
		// Non-integer limits: only the integers inside them.
		return alts[0], nil
	}
	frac := fmt.Sprintf(`"." [0-9]{0,%d} [1-9]`, fracDigits-1)
	// i.f with 0 < f < 1: positive in (i, i+1) needs lo <= i <= hi-1 (for
	// inclusive or exclusive integer limits alike); negative -(i.f) lies
	// in (-(i+1), -i), so -hi <= i <= -lo-1.
	lo, hi := int64(-intLimit), int64(intLimit)
	if l.min != nil {
		lo = clampInt(l.min)
	}
	if l.max != nil {
		hi = clampInt(l.max)
	}
	if p := (bounds{max(lo, 0), hi - 1}); p.lo <= p.hi {
		alts = append(alts, digitRange(p.lo, p.hi)+" "+frac)
	}
	if n := (bounds{max(-hi, 0), -lo - 1}); n.lo <= n.hi {
		alts = append(alts, `"-" `+digitRange(n.lo, n.hi)+" "+frac)
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

func clampInt(r *big.Rat) int64 {
	v := r.Num() // r is an integer here
	switch {
	case v.Cmp(big.NewInt(intLimit)) > 0:
		return intLimit
	case v.Cmp(big.NewInt(-intLimit)) < 0:
		return -intLimit
	}
	return v.Int64()
}

// decimalPlaces is p when r = 10^-p (p >= 0).
func decimalPlaces(r *big.Rat) (int, bool) {
	if r.Num().Cmp(big.NewInt(1)) != 0 {
		return 0, false
	}
	d := new(big.Int).Set(r.Denom())
	p := 0
	ten := big.NewInt(10)
	for d.Cmp(big.NewInt(1)) > 0 {
		q, m := new(big.Int).DivMod(d, ten, new(big.Int))
		if m.Sign() != 0 || p > 15 {
			return 0, false
		}
		d, p = q, p+1
	}
	return p, true
}
