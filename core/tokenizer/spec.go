package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// What a tokenizer.json holds, as far as encoding needs it. The post
// processor and decoder are not read: Encode adds no BOS/EOS (see Encode).
type fileSpec struct {
	Version      string           `json:"version"`
	AddedTokens  []addedTokenSpec `json:"added_tokens"`
	Normalizer   json.RawMessage  `json:"normalizer"`
	PreTokenizer json.RawMessage  `json:"pre_tokenizer"`
	Model        *modelSpec       `json:"model"`
}

type addedTokenSpec struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelSpec struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int   `json:"vocab"`
	Merges                  *json.RawMessage `json:"merges"`
}

type componentSpec struct {
	Type string `json:"type"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	// Split
	Pattern  *struct{ Regex, String *string } `json:"pattern"`
	Behavior string                           `json:"behavior"`
	Invert   bool                             `json:"invert"`
	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
}

// unsupported is the error for a component this package does not run.
func unsupported(what, typ, supported string) error {
	return fmt.Errorf("%s %q is not supported (supported: %s); this tokenizer reads byte-level BPE "+
		"tokenizer.json files such as Qwen2/Qwen3's and Llama-3's", what, typ, supported)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// build turns a parsed tokenizer.json into a Tokenizer.
func build(spec *fileSpec) (*Tokenizer, error) {
	if spec.Version != "" && spec.Version != "1.0" {
		return nil, fmt.Errorf("tokenizer.json version %q is not supported (want 1.0)", spec.Version)
	}
	if spec.Model == nil {
		return nil, fmt.Errorf("tokenizer.json has no model")
	}
	model, err := buildModel(spec.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	normalize, err := buildNormalizer(spec.Normalizer)
	if err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	steps, byteLevel, err := buildPreTokenizer(spec.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if !byteLevel {
		return nil, fmt.Errorf("pre_tokenizer has no ByteLevel step: only byte-level BPE tokenizers " +
			"(Qwen2/Qwen3, Llama-3, GPT-2 style) are supported")
	}
	for i, a := range spec.AddedTokens {
		// HF's tokenizers reads an id as a u32 and refuses the file
		// otherwise; such an id is a broken file, not one to guess at.
		if a.ID < 0 || a.ID > math.MaxUint32 {
			return nil, fmt.Errorf("added_tokens[%d] (%q) has id %d, which is not a token id (0 to %d); the file is broken: take the model's own tokenizer.json", i, a.Content, a.ID, uint32(math.MaxUint32))
		}
	}
	t := &Tokenizer{model: model, normalize: normalize, steps: steps, addedContent: map[int]string{}}
	toks := addedIDs(spec.AddedTokens, spec.Model.Vocab)
	var plain, normalized []addedToken
	for _, at := range toks {
		if at.normalized {
			normalized = append(normalized, at)
		} else {
			plain = append(plain, at)
		}
		t.addedContent[at.id] = at.content
		t.size = max(t.size, at.id+1)
	}
	t.added = newAddedMatcher(plain, func(a addedToken) string { return a.content })
	t.addedNormalized = newAddedMatcher(normalized, func(a addedToken) string {
		if normalize == nil {
			return a.content
		}
		return normalize(a.content)
	})
	if len(model.vocabText) > t.size {
		t.size = len(model.vocabText)
	}
	return t, nil
}

// modelType reads only the model's type, to name an unsupported model whose
// vocab does not even decode as BPE's.
func modelType(data []byte) string {
	var v struct {
		Model struct {
			Type string `json:"type"`
		} `json:"model"`
	}
	_ = json.Unmarshal(data, &v)
	return v.Model.Type
}

// addedIDs gives each added token the id HF's tokenizers gives it, which is
// not always the id the file writes: a token already in the vocabulary takes
// the vocabulary's id, and any other the next id after the vocabulary (the
// number of its entries) and the added tokens so far. The same text listed
// twice is one token with the later flags.
func addedIDs(specs []addedTokenSpec, vocab map[string]int) []addedToken {
	ids := map[string]int{}
	var order []string
	flags := map[string]addedTokenSpec{}
	maxID := -1
	for _, a := range specs {
		if a.Content == "" {
			continue
		}
		id, seen := ids[a.Content]
		if !seen {
			if v, ok := vocab[a.Content]; ok {
				id = v
			} else if maxID < 0 || (maxID < len(vocab) && len(vocab) > 0) {
				id = len(vocab)
			} else {
				id = maxID + 1
			}
			ids[a.Content] = id
			order = append(order, a.Content)
		}
		maxID = max(maxID, id)
		flags[a.Content] = a
	}
	toks := make([]addedToken, 0, len(order))
	for _, c := range order {
		a := flags[c]
		toks = append(toks, addedToken{id: ids[c], content: c, special: a.Special, singleWord: a.SingleWord,
			lstrip: a.Lstrip, rstrip: a.Rstrip, normalized: a.Normalized})
	}
	return toks
}

func buildModel(ms *modelSpec) (*bpe, error) {
	if ms.Type != "BPE" {
		return nil, unsupported("model type", ms.Type, "BPE")
	}
	if ms.Dropout != nil && *ms.Dropout != 0 {
		return nil, fmt.Errorf("BPE dropout %g makes encoding random; set it to null to count tokens", *ms.Dropout)
	}
	if ms.ContinuingSubwordPrefix != nil && *ms.ContinuingSubwordPrefix != "" {
		return nil, unsupported("BPE continuing_subword_prefix", *ms.ContinuingSubwordPrefix, "none")
	}
	if ms.EndOfWordSuffix != nil && *ms.EndOfWordSuffix != "" {
		return nil, unsupported("BPE end_of_word_suffix", *ms.EndOfWordSuffix, "none")
	}
	if ms.ByteFallback {
		return nil, unsupported("BPE byte_fallback", "true", "false (byte-level models need no fallback)")
	}
	if len(ms.Vocab) == 0 {
		return nil, fmt.Errorf("the BPE vocab is empty")
	}
	if ms.Merges == nil {
		return nil, fmt.Errorf("the BPE model has no merges")
	}
	m := &bpe{vocab: make(map[string]int32, len(ms.Vocab)), ignoreMerges: ms.IgnoreMerges, unk: -1,
		fuseUnk: ms.FuseUnk, cache: newWordCache()}
	// The merges are read while the vocabulary is turned into bytes: the
	// two halves of loading a 150k-token file take about as long each.
	var mergeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.merges, mergeErr = buildMerges(*ms.Merges, ms.Vocab)
	}()
	err := m.readVocab(ms)
	<-done
	if err != nil {
		return nil, err
	}
	if mergeErr != nil {
		return nil, mergeErr
	}
	return m, nil
}

func (m *bpe) readVocab(ms *modelSpec) error {
	maxID := 0
	for tok, id := range ms.Vocab {
		if id < 0 || id > 1<<30 {
			return fmt.Errorf("vocab entry %q has id %d, out of range", tok, id)
		}
		maxID = max(maxID, id)
	}
	m.vocabText = make([]string, maxID+1)
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	for tok, id := range ms.Vocab {
		m.vocabText[id] = tok
		raw, ok := fromByteLevel(tok)
		if !ok {
			continue // not in the byte-level alphabet: text can never produce it
		}
		m.vocab[raw] = int32(id)
		if len(raw) == 1 {
			m.byteIDs[raw[0]] = int32(id)
		}
	}
	if ms.UnkToken != nil {
		id, ok := ms.Vocab[*ms.UnkToken]
		if !ok {
			return fmt.Errorf("unk_token %q is not in the vocab", *ms.UnkToken)
		}
		m.unk = int32(id)
	}
	return nil
}

// buildMerges maps each pair of ids to its rank and the id of the merged token.
func buildMerges(raw json.RawMessage, vocab map[string]int) (map[uint64]uint64, error) {
	pairs, err := readMerges(raw)
	if err != nil {
		return nil, err
	}
	merges := make(map[uint64]uint64, len(pairs))
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		c, okC := vocab[p[0]+p[1]]
		switch {
		case !okA:
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocab", rank+1, p[0], p[1], p[0])
		case !okB:
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocab", rank+1, p[0], p[1], p[1])
		case !okC:
			return nil, fmt.Errorf("merge %d (%q %q): the merged token %q is not in the vocab", rank+1, p[0], p[1], p[0]+p[1])
		}
		merges[pairKey(int32(a), int32(b))] = mergeVal(rank, int32(c)) // a repeated pair: the later rank wins, as in HF
	}
	return merges, nil
}

// readMerges reads both forms HF writes: [["a","b"],...] and ["a b",...].
func readMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("merges are neither [[\"a\",\"b\"],...] nor [\"a b\",...]: %w", err)
	}
	pairs = make([][2]string, 0, len(lines))
	for _, l := range lines {
		if strings.HasPrefix(l, "#version") {
			continue
		}
		parts := strings.Split(l, " ")
		if len(parts) != 2 {
			return nil, fmt.Errorf("merge %d %q is not two tokens separated by one space", len(pairs)+1, l)
		}
		pairs = append(pairs, [2]string{parts[0], parts[1]})
	}
	return pairs, nil
}

var normalForms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

// buildNormalizer returns nil for no normalizer.
func buildNormalizer(raw json.RawMessage) (func(string) string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c componentSpec
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}
	if f, ok := normalForms[c.Type]; ok {
		return f.String, nil
	}
	if c.Type != "Sequence" {
		return nil, unsupported("normalizer", c.Type, "NFC, NFD, NFKC, NFKD and a Sequence of them")
	}
	var fs []func(string) string
	for i, r := range c.Normalizers {
		f, err := buildNormalizer(r)
		if err != nil {
			return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
		}
		if f != nil {
			fs = append(fs, f)
		}
	}
	switch len(fs) {
	case 0:
		return nil, nil
	case 1:
		return fs[0], nil
	}
	return func(s string) string {
		for _, f := range fs {
			s = f(s)
		}
		return s
	}, nil
}

// buildPreTokenizer returns the steps and whether one of them is ByteLevel.
func buildPreTokenizer(raw json.RawMessage) ([]preStep, bool, error) {
	if isNull(raw) {
		return nil, false, nil
	}
	var c componentSpec
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, fmt.Errorf("reading it: %w", err)
	}
	switch c.Type {
	case "Sequence":
		var steps []preStep
		byteLevel := false
		for i, r := range c.PreTokenizers {
			s, bl, err := buildPreTokenizer(r)
			if err != nil {
				return nil, false, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			steps = append(steps, s...)
			byteLevel = byteLevel || bl
		}
		return steps, byteLevel, nil
	case "Split":
		s, err := buildSplit(&c)
		if err != nil {
			return nil, false, fmt.Errorf("Split: %w", err)
		}
		return []preStep{s}, false, nil
	case "ByteLevel":
		b := &byteLevelStep{addPrefixSpace: c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex { // HF's default is true
			f, err := compilePattern(gpt2Pattern)
			if err != nil {
				return nil, false, err
			}
			b.gpt2 = &splitStep{find: f, behavior: isolated}
		}
		if !b.addPrefixSpace && b.gpt2 == nil {
			return nil, true, nil // only maps bytes, which the model does implicitly
		}
		return []preStep{b}, true, nil
	}
	return nil, false, unsupported("pre-tokenizer", c.Type, "ByteLevel, Split and a Sequence of them")
}

func buildSplit(c *componentSpec) (*splitStep, error) {
	b, ok := behaviors[c.Behavior]
	if !ok {
		names := make([]string, 0, len(behaviors))
		for n := range behaviors {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("behavior %q is not one of %s", c.Behavior, strings.Join(names, ", "))
	}
	s := &splitStep{behavior: b, invert: c.Invert}
	switch {
	case c.Pattern != nil && c.Pattern.Regex != nil:
		f, err := compilePattern(*c.Pattern.Regex)
		if err != nil {
			return nil, err
		}
		s.find = f
	case c.Pattern != nil && c.Pattern.String != nil:
		s.find = literalFinder{lit: *c.Pattern.String}
	default:
		return nil, fmt.Errorf("pattern has neither Regex nor String")
	}
	return s, nil
}

func compilePattern(p string) (finder, error) {
	if f := fastFinderFor(p); f != nil {
		return f, nil
	}
	re, err := regexp2.Compile(p, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", p, err)
	}
	re.MatchTimeout = matchTimeout
	return regexFinder{re: re}, nil
}
