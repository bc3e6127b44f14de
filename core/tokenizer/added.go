package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	id         int
	content    string
	special    bool
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
}

// addedMatcher finds added tokens in text as HF's AddedVocabulary does: an
// Aho-Corasick search with leftmost-longest matches (here a byte trie tried
// at each position, which finds the same matches), then the single_word,
// lstrip and rstrip rules applied to each match.
type addedMatcher struct {
	nodes []trieNode
	first [256]bool // bytes that can start a token
	toks  []addedToken
	// splitSpecial is tokenizer_config.json's split_special_tokens: special
	// tokens are then read as plain text.
	splitSpecial bool
}

type trieNode struct {
	next map[byte]int32
	tok  int32 // index into toks, -1 when no token ends here
}

func newAddedMatcher(toks []addedToken, pattern func(addedToken) string) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{nodes: []trieNode{{tok: -1}}, toks: toks}
	for i, t := range toks {
		p := pattern(t)
		if p == "" {
			continue
		}
		m.first[p[0]] = true
		n := int32(0)
		for j := 0; j < len(p); j++ {
			nx, ok := m.nodes[n].next[p[j]]
			if !ok {
				if m.nodes[n].next == nil {
					m.nodes[n].next = make(map[byte]int32)
				}
				nx = int32(len(m.nodes))
				m.nodes = append(m.nodes, trieNode{tok: -1})
				m.nodes[n].next[p[j]] = nx
			}
			n = nx
		}
		m.nodes[n].tok = int32(i) // a later token with the same text wins, as in HF's map by id
	}
	return m
}

// longestAt returns the longest token starting at byte i, or -1.
func (m *addedMatcher) longestAt(s string, i int) (tok int32, end int) {
	tok, n := -1, int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := m.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if m.nodes[n].tok >= 0 {
			tok, end = m.nodes[n].tok, j+1
		}
	}
	return tok, end
}

// split calls text for each stretch of s that holds no added token and
// token for each token found, in order, covering s.
func (m *addedMatcher) split(s string, text func(string), token func(id int)) {
	if m == nil {
		text(s)
		return
	}
	done := 0 // s[:done] has been handed on
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		ti, end := m.longestAt(s, i)
		if ti < 0 {
			i++
			continue
		}
		start, stop := i, end
		i = end // the search goes on after the match even if the rules below drop it
		t := &m.toks[ti]
		if m.splitSpecial && t.special {
			continue
		}
		if t.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(trailingSpaceStart(s[:start]), done)
		}
		if t.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if done < start {
			text(s[done:start])
		}
		token(t.id)
		done = stop
	}
	if done < len(s) {
		text(s[done:])
	}
}

// isWordRune is the Unicode \w of Rust's regex crate, which HF uses for
// single_word: alphabetic, marks, decimal digits, connector punctuation
// and the joiners.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

// trailingSpaceStart is where the run of whitespace ending s begins.
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// leadingSpaceLen is the length of the run of whitespace starting s.
func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
