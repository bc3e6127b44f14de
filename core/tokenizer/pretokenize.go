package tokenizer

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// preStep is one pre-tokenizer: it cuts a piece of text into smaller pieces
// and hands each non-empty one to emit, in order. It fails only when a
// pattern ran out of its match time (see matchTimeout).
type preStep interface {
	split(s string, emit func(string)) error
}

// finder lists the matches of a pattern in s, left to right, as byte offsets.
type finder interface {
	matches(s string, yield func(start, end int)) error
}

// behavior is a Split pre-tokenizer's "behavior": what becomes of each match.
type behavior int

const (
	isolated behavior = iota
	removed
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{
	"Isolated":           isolated,
	"Removed":            removed,
	"MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext":     mergedWithNext,
	"Contiguous":         contiguous,
}

// splitStep is HF's Split pre-tokenizer: the text is cut into matches and
// the stretches between them, which are then kept, dropped or joined as the
// behavior says (NormalizedString::split in HF).
type splitStep struct {
	find     finder
	behavior behavior
	invert   bool
}

type segment struct {
	start, end int
	match      bool
}

func (p *splitStep) split(s string, emit func(string)) error {
	if s == "" {
		return nil
	}
	if f, ok := p.find.(llamaFinder); ok && p.behavior == isolated && !p.invert {
		// The usual case, without the closures below: its matches tile s.
		for i := 0; i < len(s); {
			end := f.matchAt(s, i)
			emit(s[i:end])
			i = end
		}
		return nil
	}
	out := func(start, end int) {
		if start < end {
			emit(s[start:end])
		}
	}
	var pending segment
	have := false
	take := func(g segment) {
		if p.invert {
			g.match = !g.match
		}
		switch p.behavior {
		case isolated:
			out(g.start, g.end)
		case removed:
			if !g.match {
				out(g.start, g.end)
			}
		case mergedWithPrevious: // a match joins the stretch before it, unless that was a match too
			if have && g.match && !pending.match {
				pending.end, pending.match = g.end, true
				return
			}
			if have {
				out(pending.start, pending.end)
			}
			pending, have = g, true
		case mergedWithNext: // a match joins the stretch after it, unless that is a match too
			if have && pending.match && !g.match {
				out(pending.start, g.end)
				have = false
				return
			}
			if have {
				out(pending.start, pending.end)
			}
			if g.match {
				pending, have = g, true
			} else {
				out(g.start, g.end)
				have = false
			}
		case contiguous: // runs of matches become one piece
			if have && g.match == pending.match {
				pending.end = g.end
				return
			}
			if have {
				out(pending.start, pending.end)
			}
			pending, have = g, true
		}
	}
	prev := 0
	if err := p.find.matches(s, func(start, end int) {
		if prev < start {
			take(segment{prev, start, false})
		}
		take(segment{start, end, true})
		prev = end
	}); err != nil {
		return err
	}
	if prev < len(s) {
		take(segment{prev, len(s), false})
	}
	if have {
		out(pending.start, pending.end)
	}
	return nil
}

// byteLevelStep is the ByteLevel pre-tokenizer. The mapping of bytes to its
// alphabet is implicit (the model works on raw bytes); what is left is the
// optional leading space and the optional GPT-2 split.
type byteLevelStep struct {
	addPrefixSpace bool
	gpt2           *splitStep // nil unless use_regex
}

// gpt2Pattern is the split HF's ByteLevel applies when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func (b *byteLevelStep) split(s string, emit func(string)) error {
	if s == "" {
		return nil
	}
	if b.addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if b.gpt2 == nil {
		emit(s)
		return nil
	}
	return b.gpt2.split(s, emit)
}

// chain runs steps in order: each piece of one step goes through the rest.
func chain(steps []preStep, s string, emit func(string)) error {
	switch len(steps) {
	case 0:
		emit(s)
		return nil
	case 1: // the usual case (a Split, the ByteLevel step being a no-op): no closure per piece
		return steps[0].split(s, emit)
	}
	var err error
	if serr := steps[0].split(s, func(piece string) {
		if err == nil {
			err = chain(steps[1:], piece, emit)
		}
	}); err == nil {
		err = serr
	}
	return err
}

// regexFinder runs a pattern through regexp2, a backtracking engine with the
// lookaheads HF's Oniguruma patterns use. regexp2 works on runes; matches
// are turned back into byte offsets.
type regexFinder struct {
	re *regexp2.Regexp
}

// matchTimeout bounds the work of one match of a Split pattern. A pattern
// that backtracks catastrophically (`(a|aa)+$` on a long run of a's) would
// spin for hours; HF's engine, Oniguruma, stops such a match at a retry
// limit, and regexp2 offers a time limit instead. A real pre-tokenizer
// pattern matches in microseconds, so a second is far from any of them.
var matchTimeout = time.Second

// PatternError is a Split pattern that ran out of its match time.
type PatternError struct {
	Pattern string
	Timeout time.Duration
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("the pre-tokenizer's Split regex %q took over %v to find one match, as a pattern that backtracks catastrophically does "+
		"(HF's tokenizers stop such a match at a retry limit and fail too); fix the pattern in tokenizer.json or take the model's own file", e.Pattern, e.Timeout)
}

func (f regexFinder) matches(s string, yield func(start, end int)) error {
	runes := []rune(s)
	m, err := f.re.FindRunesMatch(runes)
	if err != nil {
		return f.failed()
	}
	if m == nil {
		return nil
	}
	// byte offset of rune k, filled as far as needed
	off, k := 0, 0
	at := func(r int) int {
		for k < r {
			_, n := utf8.DecodeRuneInString(s[off:])
			off += n
			k++
		}
		return off
	}
	for m != nil {
		start := at(m.Index)
		end := at(m.Index + m.Length)
		yield(start, end) // an empty match still splits, as in HF
		if m, err = f.re.FindNextMatch(m); err != nil {
			return f.failed()
		}
	}
	return nil
}

// failed is the error of a match that timed out, the only error regexp2
// returns; its own holds the whole input, which may be a long prompt.
func (f regexFinder) failed() error {
	return &PatternError{Pattern: f.re.String(), Timeout: f.re.MatchTimeout}
}

// literalFinder matches a plain string (a Split with a String pattern).
type literalFinder struct{ lit string }

func (f literalFinder) matches(s string, yield func(start, end int)) error {
	if f.lit == "" {
		return nil
	}
	for i := 0; ; {
		j := strings.Index(s[i:], f.lit)
		if j < 0 {
			return nil
		}
		yield(i+j, i+j+len(f.lit))
		i += j + len(f.lit)
	}
}
