package toolformat

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// End-of-turn tokens a reply may still carry when it arrives with special
// tokens kept (SkyRL decodes them; vLLM's detokenizer leaves the stop
// token out of the text its parsers see).
var endTokens = []string{"<|im_end|>", "<|endoftext|>"}

const (
	thinkOpen    = "<think>"
	thinkClose   = "</think>"
	toolCallOpen = "<tool_call>"
	invalidRune  = "\uFFFD"
	maxEndStrips = 16 // a reply ends with a handful of end tokens at most
)

// BeforeThinkReason is the reason a tool-format plugin gives for a call
// written before the reply's <think>: vLLM's reasoning parser drops that
// text, so vLLM never reads the call.
const BeforeThinkReason = "this call is written before <think>, and everything before <think> is dropped " +
	"(it is neither reasoning nor content), so the call is never read: write tool calls after your reasoning"

// Reply is a model reply split the way vLLM's Qwen3 reasoning parser
// (vllm/reasoning/qwen3_reasoning_parser.py) splits it before the tool
// parser reads it.
type Reply struct {
	// Before is the text before the first <think>, which vLLM drops: it is
	// neither reasoning nor content. A tool-format plugin reports each call
	// in it as unparsed (BeforeThinkReason) rather than lose it silently.
	Before string
	// Reasoning is the model's thinking; calls in it are not calls.
	Reasoning string
	// Content is the text a tool-call format reads.
	Content string
}

// SplitReply splits a model reply into the part before <think>, the
// reasoning and the content, as vLLM's Qwen3 reasoning parser does with
// thinking on (its default) when the reply holds <think> or </think>:
//
//   - trailing <|im_end|> / <|endoftext|> tokens (and whitespace after
//     them) are removed first, and invalid UTF-8 becomes U+FFFD (vLLM
//     decodes tokens the same way);
//   - everything before the first <think> is dropped (Before);
//   - with a </think> after that, everything up to the first </think> is
//     reasoning and the rest is content;
//   - with a <think> but no </think>, reasoning ends at the first
//     <tool_call> (Qwen3.5 may open a call without closing its reasoning)
//     and the content starts there; with no <tool_call> either, the reply
//     was cut off while thinking and has no content.
//
// A reply with neither <think> nor </think> is all content: it is what a
// model without reasoning writes (Qwen2.5, Qwen3-Instruct-2507,
// Qwen3-Coder) and what a thinking model writes with enable_thinking off,
// where vLLM also reads it all as content.
func SplitReply(text string) Reply {
	text = trimEndTokens(ValidUTF8(text))
	var r Reply
	before, after, opened := strings.Cut(text, thinkOpen)
	if opened {
		r.Before, text = before, after
	}
	if reasoning, content, closed := strings.Cut(text, thinkClose); closed {
		r.Reasoning, r.Content = reasoning, content
		return r
	}
	if !opened {
		r.Content = text
		return r
	}
	if i := strings.Index(text, toolCallOpen); i >= 0 {
		r.Reasoning, r.Content = text[:i], text[i:]
		return r
	}
	r.Reasoning = text
	return r
}

// TrimReply returns the content of a reply (SplitReply(text).Content).
// Tool-format plugins split the reply themselves, once: a host must hand
// them the reply as the model wrote it, not trimmed.
func TrimReply(text string) string { return SplitReply(text).Content }

func trimEndTokens(text string) string {
	for range maxEndStrips {
		trimmed := strings.TrimRightFunc(text, unicode.IsSpace)
		found := false
		for _, tok := range endTokens {
			if strings.HasSuffix(trimmed, tok) {
				text, found = trimmed[:len(trimmed)-len(tok)], true
				break
			}
		}
		if !found {
			break
		}
	}
	return text
}

// ValidUTF8 returns s with each invalid byte sequence as U+FFFD (vLLM
// decodes tokens the same way), and s itself when it is valid: the one
// repair every reply and parser answer goes through (protobuf strings must
// be UTF-8), so a reply repaired once is only scanned after.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, invalidRune)
}
