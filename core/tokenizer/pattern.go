package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The Split pattern of the Qwen2/Qwen3 (digits: 1) and Llama-3 (digits: 3)
// tokenizers. Nearly every byte-level model of today uses one of the two, so
// they get a hand-written matcher: several times faster than a regex engine,
// and it folds case as Oniguruma (HF's engine) does, which regexp2 does not
// ("'ſ" matches "'s" there). pattern_test.go checks it against regexp2.
func llamaPattern(digits int) string {
	n := `\p{N}`
	if digits > 1 {
		n = fmt.Sprintf(`\p{N}{1,%d}`, digits)
	}
	return `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|` + n +
		`| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
}

// fastFinderFor returns the hand-written matcher for pattern, or nil.
func fastFinderFor(pattern string) finder {
	for _, d := range []int{1, 3} {
		if pattern == llamaPattern(d) {
			return llamaFinder{digits: d}
		}
	}
	return nil
}

// llamaFinder matches llamaPattern(digits). Every position of a text starts
// a match of that pattern, so the matches tile the text.
type llamaFinder struct{ digits int }

// Character classes of the pattern, precomputed for ASCII.
const (
	clsLetter = 1 << iota
	clsNumber
	clsSpace
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = runeClass(r)
	}
}

func runeClass(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r): // Unicode White_Space, Oniguruma's \s
		return clsSpace
	}
	return 0
}

// next decodes the rune at i with its class.
func next(s string, i int) (r rune, cls uint8, size int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, runeClass(r), size
}

func (f llamaFinder) matches(s string, yield func(start, end int)) error {
	for i := 0; i < len(s); {
		end := f.matchAt(s, i)
		yield(i, end)
		i = end
	}
	return nil
}

// matchAt returns the end of the match starting at i, trying the pattern's
// alternatives in order as a backtracking engine would.
func (f llamaFinder) matchAt(s string, i int) int {
	r, cls, n := next(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if m := contraction(s[i+1:]); m > 0 {
			return i + 1 + m
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls == clsLetter {
		return letters(s, i+n)
	}
	if cls != clsNumber && r != '\r' && r != '\n' && i+n < len(s) {
		if _, c2, n2 := next(s, i+n); c2 == clsLetter {
			return letters(s, i+n+n2)
		}
	}
	// \p{N}{1,digits}
	if cls == clsNumber {
		j := i + n
		for k := 1; k < f.digits && j < len(s); k++ {
			_, c2, n2 := next(s, j)
			if c2 != clsNumber {
				break
			}
			j += n2
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if cls == 0 {
		return punctuation(s, i+n)
	}
	if r == ' ' && i+1 < len(s) {
		if _, c2, n2 := next(s, i+1); c2 == 0 {
			return punctuation(s, i+1+n2)
		}
	}
	// Whitespace from here on. j: end of the run; nl: its last \r or \n.
	j, nl := i, -1
	for j < len(s) {
		r2, c2, n2 := next(s, j)
		if c2 != clsSpace {
			break
		}
		if r2 == '\r' || r2 == '\n' {
			nl = j
		}
		j += n2
	}
	// \s*[\r\n]+ : \s* gives back until a line break follows
	if nl >= 0 {
		return nl + 1
	}
	// \s+(?!\S) : the whole run at the end of the text, else all but its last rune
	if j == len(s) {
		return j
	}
	if _, last := utf8.DecodeLastRuneInString(s[i:j]); j-last > i {
		return j - last
	}
	// \s+
	return j
}

// letters returns the end of the run of letters starting at i.
func letters(s string, i int) int {
	for i < len(s) {
		_, c, n := next(s, i)
		if c != clsLetter {
			break
		}
		i += n
	}
	return i
}

// punctuation returns the end of [^\s\p{L}\p{N}]*[\r\n]* from i.
func punctuation(s string, i int) int {
	for i < len(s) {
		_, c, n := next(s, i)
		if c != 0 {
			break
		}
		i += n
	}
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contraction returns the length of the contraction suffix s starts with
// (the part after the apostrophe), or 0. Case is folded as Oniguruma folds
// it: simple Unicode case folding, so 'ſ' (U+017F) counts as 's'.
func contraction(s string) int {
	for _, c := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		if m := foldPrefix(s, c); m > 0 {
			return m
		}
	}
	return 0
}

// foldPrefix returns how many bytes of s match the ASCII word lower under
// simple case folding, or 0.
func foldPrefix(s, lower string) int {
	i := 0
	for k := 0; k < len(lower); k++ {
		if i >= len(s) {
			return 0
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !foldEq(r, rune(lower[k])) {
			return 0
		}
		i += n
	}
	return i
}

func foldEq(r, lower rune) bool {
	if r == lower {
		return true
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == lower {
			return true
		}
	}
	return false
}
