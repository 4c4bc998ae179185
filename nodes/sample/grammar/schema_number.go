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
		return "", nothingf("schema%s: minimum and maximum admit no integer", at)
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
		c.emitShared(modRules(c.prefix, k))
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

// exponentForm is GBNF for the unsigned numbers written with an exponent.
const exponentForm = `( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? [eE] [-+]? [0-9]{1,3}`

// numberRule is GBNF for the numbers o admits. With limits, numbers are
// written without an exponent and compared exactly, digit by digit
// (decimalRange), but for those whose sign alone keeps them within
// (exponentForm); multipleOf 10^-p (p >= 0) limits the fraction to p
// digits.
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
	limit := new(big.Rat).SetInt64(intLimit + 1) // integer parts have at most maxIntDigits digits
	lo, hi := new(big.Rat).Neg(limit), limit
	loExcl, hiExcl := true, true
	if l.min != nil && l.min.Cmp(lo) > 0 {
		lo, loExcl = l.min, l.minExcl
	}
	if l.max != nil && l.max.Cmp(hi) < 0 {
		hi, hiExcl = l.max, l.maxExcl
	}
	var alts []string
	zero := new(big.Rat)
	if hi.Sign() > 0 || hi.Sign() == 0 && !hiExcl {
		from, fromExcl := lo, loExcl
		if lo.Sign() < 0 {
			from, fromExcl = zero, false
		}
		if r, ok, err := c.decimalRange(from, hi, fromExcl, hiExcl, fracDigits, at); err != nil {
			return "", err
		} else if ok {
			alts = append(alts, r)
		}
	}
	if lo.Sign() < 0 {
		// -y with y in [max(-hi, 0), -lo]; y > 0 (0 is written unsigned).
		to := new(big.Rat).Neg(lo)
		from, fromExcl := new(big.Rat).Neg(hi), hiExcl
		if hi.Sign() >= 0 {
			from, fromExcl = zero, true
		}
		if r, ok, err := c.decimalRange(from, to, fromExcl, loExcl, fracDigits, at); err != nil {
			return "", err
		} else if ok {
			alts = append(alts, `"-" `+r)
		}
	}
	if fracDigits == 16 {
		// An exponent keeps the sign: with a minimum at most 0 and no
		// maximum every non-negative number is within the limits, in any
		// notation; with a maximum at least 0 and no minimum, every
		// negative one.
		if l.max == nil && l.min != nil && (l.min.Sign() < 0 || l.min.Sign() == 0 && !l.minExcl) {
			alts = append(alts, exponentForm)
		}
		if l.min == nil && l.max != nil && (l.max.Sign() > 0 || l.max.Sign() == 0 && !l.maxExcl) {
			alts = append(alts, `"-" `+exponentForm)
		}
	}
	if len(alts) == 0 {
		return "", nothingf("schema%s: minimum and maximum admit no number", at)
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

// decimalRange is GBNF for the unsigned decimals (an integer part without
// leading zeros, then optionally "." and 1 to fracDigits digits) from lo
// to hi (0 <= lo <= hi < 10^16, each excluded when its flag is set); ok
// is false when there are none.
func (c *schemaCompiler) decimalRange(lo, hi *big.Rat, loExcl, hiExcl bool, fracDigits int, at string) (string, bool, error) {
	loInt, loFrac, ok1 := decimalDigits(lo)
	hiInt, hiFrac, ok2 := decimalDigits(hi)
	if !ok1 || !ok2 {
		return "", false, fmt.Errorf("schema%s: keyword \"minimum\" or \"maximum\" is not a decimal number", at)
	}
	if cmp := lo.Cmp(hi); cmp > 0 || cmp == 0 && (loExcl || hiExcl) {
		return "", false, nil
	}
	f := fractions{c: c, digits: fracDigits, rules: map[fracKey]string{}}
	var alts []string
	add := func(integer string, k fracKey) {
		if frac, ok := f.part(k); ok {
			alts = append(alts, integer+" "+frac)
		}
	}
	lit := func(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }
	if loInt == hiInt {
		add(lit(loInt), fracKey{lo: loFrac, hi: hiFrac, tightLo: true, tightHi: true, loExcl: loExcl, hiExcl: hiExcl})
	} else {
		add(lit(loInt), fracKey{lo: loFrac, tightLo: true, loExcl: loExcl})
		if loInt+1 <= hiInt-1 {
			add(digitRange(loInt+1, hiInt-1), fracKey{})
		}
		add(lit(hiInt), fracKey{hi: hiFrac, tightHi: true, hiExcl: hiExcl})
	}
	if len(alts) == 0 {
		return "", false, nil
	}
	return "( " + strings.Join(alts, " | ") + " )", true, nil
}

// decimalDigits splits r >= 0 into its integer part and the digits of its
// fraction (no trailing zeros); ok is false past 10^16 or when the
// fraction does not end within 64 digits.
func decimalDigits(r *big.Rat) (integer int64, frac string, ok bool) {
	q := floorRat(r)
	if q.Cmp(big.NewInt(intLimit)) > 0 {
		if r.Cmp(new(big.Rat).SetInt64(intLimit+1)) == 0 {
			return intLimit + 1, "", true
		}
		return 0, "", false
	}
	rest := new(big.Rat).Sub(r, new(big.Rat).SetInt(q))
	var b strings.Builder
	ten := big.NewRat(10, 1)
	for rest.Sign() != 0 {
		if b.Len() == 64 {
			return 0, "", false
		}
		rest.Mul(rest, ten)
		d := floorRat(rest)
		b.WriteByte(byte('0' + d.Int64()))
		rest.Sub(rest, new(big.Rat).SetInt(d))
	}
	return q.Int64(), b.String(), true
}

// fractions writes GBNF for the fraction parts of decimals whose integer
// part is fixed: digit strings compared with the limits' fraction digits.
type fractions struct {
	c      *schemaCompiler
	digits int // at most this many
	rules  map[fracKey]string
}

// fracKey is the fraction digits from position at on, given the digits
// so far equal lo's (tightLo) and hi's (tightHi).
type fracKey struct {
	lo, hi           string
	tightLo, tightHi bool
	loExcl, hiExcl   bool
	at               int
}

func fracDigit(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return '0'
}

// canEnd reports whether the digits so far (k.at of them) meet the limits.
func (k fracKey) canEnd() bool {
	if k.tightLo && (k.at < len(k.lo) || k.loExcl) {
		return false // below lo (its remaining digits are not all zero), or equal to an excluded lo
	}
	if k.tightHi && k.at >= len(k.hi) && k.hiExcl {
		return false // equal to an excluded hi
	}
	return true
}

// steps are the alternatives for the next digit: a class, then the rest
// (none that leads nowhere).
func (f *fractions) steps(k fracKey) []string {
	if k.at == f.digits {
		return nil
	}
	a, b := byte('0'), byte('9')
	if k.tightLo {
		a = fracDigit(k.lo, k.at)
	}
	if k.tightHi {
		b = fracDigit(k.hi, k.at)
	}
	var alts []string
	step := func(lo, hi byte, tightLo, tightHi bool) {
		if lo > hi {
			return
		}
		next := fracKey{lo: k.lo, hi: k.hi, tightLo: tightLo, tightHi: tightHi, loExcl: k.loExcl, hiExcl: k.hiExcl, at: k.at + 1}
		if !next.tightLo && !next.tightHi {
			next = fracKey{at: k.at + 1}
		}
		rest, ok := f.rest(next)
		if !ok {
			return
		}
		class := fmt.Sprintf("[%c-%c]", lo, hi)
		if lo == hi {
			class = `"` + string(lo) + `"`
		}
		alts = append(alts, class+" "+rest)
	}
	switch {
	case k.tightLo && k.tightHi && a == b:
		step(a, a, true, true)
	case k.tightLo && k.tightHi:
		step(a, a, true, false)
		step(a+1, b-1, false, false)
		step(b, b, false, true)
	case k.tightLo:
		step(a, a, true, false)
		step(a+1, '9', false, false)
	case k.tightHi:
		step('0', b-1, false, false)
		step(b, b, false, true)
	default:
		step('0', '9', false, false)
	}
	return alts
}

// rest is the rule for the digits from k on, ending where the limits
// allow; ok is false when no digits do.
func (f *fractions) rest(k fracKey) (string, bool) {
	if !k.tightLo && !k.tightHi {
		return fmt.Sprintf("[0-9]{0,%d}", f.digits-k.at), true
	}
	if r, ok := f.rules[k]; ok {
		return r, r != ""
	}
	alts := f.steps(k)
	if k.canEnd() {
		alts = append(alts, `""`)
	}
	if len(alts) == 0 {
		f.rules[k] = ""
		return "", false
	}
	name := f.c.ruleName("fraction")
	f.rules[k] = name
	f.c.emit(name + " ::= " + strings.Join(alts, " | "))
	return name, true
}

// part is the fraction part for k (at 0): none, or "." and its digits;
// ok is false when no fraction meets the limits.
func (f *fractions) part(k fracKey) (string, bool) {
	var alts []string
	if k.canEnd() {
		alts = append(alts, `""`)
	}
	if steps := f.steps(k); len(steps) > 0 {
		alts = append(alts, `"." ( `+strings.Join(steps, " | ")+` )`)
	}
	if len(alts) == 0 {
		return "", false
	}
	return "( " + strings.Join(alts, " | ") + " )", true
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
