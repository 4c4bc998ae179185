package tok

import (
	"sort"
	"unicode"
)

// pre is a byte-level BPE pre-tokenizer: the rule that splits text into
// words before merges run.
type pre uint8

const (
	// preQwen2 is Qwen2's regex
	//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
	//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	preQwen2 pre = iota + 1
	// preLlama3 is the same regex with \p{N}{1,3} in place of \p{N}.
	preLlama3
	// preGPT2 is GPT-2's regex
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	preGPT2
)

// preInfo is what a tokenizer.ggml.pre name selects, with llama.cpp's flags.
type preInfo struct {
	pre          pre
	ignoreMerges bool // a word that is itself a token skips the merges
	addBOS       bool // default of tokenizer.ggml.add_bos_token
}

// preByName maps tokenizer.ggml.pre values to pre-tokenizers, as llama.cpp
// groups them.
var preByName = map[string]preInfo{
	"qwen2":            {pre: preQwen2},
	"deepseek-r1-qwen": {pre: preQwen2},
	"kormo":            {pre: preQwen2},
	"f2llmv2":          {pre: preQwen2},
	"megrez":           {pre: preQwen2},
	"stablelm2":        {pre: preQwen2},
	"hunyuan":          {pre: preQwen2},
	"solar-open":       {pre: preQwen2},
	"llama3":           {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"llama-v3":         {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"llama-bpe":        {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"falcon3":          {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"falcon-h1":        {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"pixtral":          {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"midm-2.0":         {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"lfm2":             {pre: preLlama3, ignoreMerges: true, addBOS: true},
	"dbrx":             {pre: preLlama3},
	"smaug-bpe":        {pre: preLlama3},
	"gpt-2":            {pre: preGPT2},
	"phi-2":            {pre: preGPT2},
	"gigachat":         {pre: preGPT2},
	"a.x-4.0":          {pre: preGPT2},
	"mellum":           {pre: preGPT2},
	"exaone4":          {pre: preGPT2},
	"mpt":              {pre: preGPT2},
	"olmo":             {pre: preGPT2},
	"jais":             {pre: preGPT2},
	"trillion":         {pre: preGPT2},
	"granite-docling":  {pre: preGPT2},
}

// preNames lists the supported tokenizer.ggml.pre values, sorted.
func preNames() []string {
	names := make([]string, 0, len(preByName))
	for k := range preByName {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// class is the character class the pre-tokenizer regexes distinguish.
type class uint8

const (
	clsOther  class = iota // none of the below (punctuation, symbols, marks, controls)
	clsSpace               // \s
	clsLetter              // \p{L}
	clsNumber              // \p{N}
)

// classOf classifies a code point as llama.cpp does: ASCII by the C locale
// (\s is tab, newline, vertical tab, form feed, carriage return and space),
// everything else by the Unicode White_Space property and general category.
func classOf(c rune) class {
	if c < 0x80 {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			return clsLetter
		case c >= '0' && c <= '9':
			return clsNumber
		case c == ' ', c >= '\t' && c <= '\r':
			return clsSpace
		}
		return clsOther
	}
	switch {
	case unicode.Is(unicode.White_Space, c):
		return clsSpace
	case unicode.IsLetter(c):
		return clsLetter
	case unicode.IsNumber(c):
		return clsNumber
	}
	return clsOther
}

// split calls word(start, end) for each word of cps, in order, with start
// and end indexes into cps. cls[i] is classOf(cps[i]). The words cover cps
// exactly.
func (p pre) split(cps []rune, cls []class, word func(start, end int)) {
	for i := 0; i < len(cps); {
		var j int
		switch p {
		case preGPT2:
			j = matchGPT2(cps, cls, i)
		case preLlama3:
			j = matchQwen2(cps, cls, i, 3)
		default:
			j = matchQwen2(cps, cls, i, 1)
		}
		word(i, j)
		i = j
	}
}

// contraction returns how many code points after an apostrophe at i-1 form
// one of 's 't 're 've 'm 'll 'd (ASCII case-insensitive when fold), or 0.
func contraction(cps []rune, i int, fold bool) int {
	lower := func(r rune) rune {
		if fold && r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	a := lower(cps[i])
	switch a {
	case 's', 't', 'm', 'd':
		return 1
	}
	if i+1 < len(cps) {
		b := lower(cps[i+1])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 2
		}
	}
	return 0
}

// run returns the end of the run of class c starting at i.
func run(cls []class, i int, c class) int {
	for i < len(cls) && cls[i] == c {
		i++
	}
	return i
}

// matchQwen2 returns the end of the leftmost-first match of the Qwen2 regex
// (digit runs limited to maxDigits) at i, as a backtracking regex engine
// finds it. Every position matches at least one code point.
func matchQwen2(cps []rune, cls []class, i, maxDigits int) int {
	n := len(cps)
	c := cps[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c == '\'' && i+1 < n {
		if k := contraction(cps, i+1, true); k > 0 {
			return i + 1 + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls[i] == clsLetter {
		return run(cls, i+1, clsLetter)
	}
	if c != '\r' && c != '\n' && cls[i] != clsNumber && i+1 < n && cls[i+1] == clsLetter {
		return run(cls, i+2, clsLetter)
	}
	// \p{N} or \p{N}{1,3}
	if cls[i] == clsNumber {
		j := i + 1
		for j < n && j-i < maxDigits && cls[j] == clsNumber {
			j++
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	k := i
	if c == ' ' && i+1 < n && cls[i+1] == clsOther {
		k = i + 1
	}
	if cls[k] == clsOther {
		j := run(cls, k+1, clsOther)
		for j < n && (cps[j] == '\r' || cps[j] == '\n') {
			j++
		}
		return j
	}
	// cps[i] is whitespace here.
	j, lastNL := i, -1
	for j < n && cls[j] == clsSpace {
		if cps[j] == '\r' || cps[j] == '\n' {
			lastNL = j
		}
		j++
	}
	switch {
	case lastNL >= 0: // \s*[\r\n]+
		return lastNL + 1
	case j == n: // \s+(?!\S) at the end
		return j
	case j-i >= 2: // \s+(?!\S) before a non-space: leave one space for the next word
		return j - 1
	}
	return j // \s+
}

// matchGPT2 returns the end of the GPT-2 regex match at i, following
// llama.cpp's hand-written splitter for it.
func matchGPT2(cps []rune, cls []class, i int) int {
	n := len(cps)
	c := cps[i]
	// 's|'t|'re|'ve|'m|'ll|'d
	if c == '\'' && i+1 < n {
		if k := contraction(cps, i+1, false); k > 0 {
			return i + 1 + k
		}
	}
	//  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
	start := i
	if c == ' ' {
		start = i + 1
	}
	if start < n && cls[start] != clsSpace {
		return run(cls, start+1, cls[start])
	}
	// \s+(?!\S) | \s+
	j := run(cls, i, clsSpace)
	if j-i > 1 && j < n {
		return j - 1
	}
	return j
}
