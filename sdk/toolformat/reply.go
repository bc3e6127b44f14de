package toolformat

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// End-of-turn tokens a reply may still carry when it arrives with special
// tokens kept (SkyRL decodes them; vLLM drops them before its parsers).
var endTokens = []string{"<|im_end|>", "<|endoftext|>"}

const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	functionOpen  = "<function"
	invalidRune   = "\uFFFD"
	maxEndStrips  = 16 // a reply ends with a handful of end tokens at most
	thinkCloseLen = len(thinkClose)
)

// TrimReply returns the part of a model reply that a tool-call parser
// reads, as vLLM's qwen3 reasoning parser hands it to its tool parsers:
//
//   - trailing <|im_end|> / <|endoftext|> tokens (and whitespace after
//     them) are removed;
//   - invalid UTF-8 becomes U+FFFD (vLLM decodes tokens the same way);
//   - reasoning is removed: with a </think>, everything up to and
//     including the first </think> (the <think> may be in the prompt, not
//     the reply); with a reply that starts with <think> and has no
//     </think>, the reply was cut while thinking, so none of it is
//     content, except that a <tool_call> followed by <function (Qwen3.5
//     may open a call without closing its reasoning) starts the content;
//   - anything else is returned unchanged.
//
// Unlike vLLM, a <think> opens reasoning only at the start of the reply
// (after whitespace), so TrimReply can run twice (the host trims, then a
// plugin does) without eating content that merely mentions <think>.
func TrimReply(text string) string {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, invalidRune)
	}
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
	if i := strings.Index(text, thinkClose); i >= 0 {
		return text[i+thinkCloseLen:]
	}
	afterOpen, opened := strings.CutPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), thinkOpen)
	if !opened {
		return text
	}
	text = afterOpen
	// Cut while thinking: only a genuine tool call ends the reasoning.
	if i := strings.Index(text, toolCallOpen); i >= 0 {
		after := strings.TrimLeftFunc(text[i+len(toolCallOpen):], unicode.IsSpace)
		if rest, ok := strings.CutPrefix(after, functionOpen); ok {
			if r, _ := utf8.DecodeRuneInString(rest); r == '=' || unicode.IsSpace(r) {
				return text[i:]
			}
		}
	}
	return ""
}
