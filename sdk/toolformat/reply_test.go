package toolformat

import "testing"

func TestTrimReply(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "The answer is 42.", "The answer is 42."},
		{"empty", "", ""},
		{"im_end", "hi<|im_end|>", "hi"},
		{"endoftext", "hi<|endoftext|>", "hi"},
		{"both and newline", "hi<|im_end|><|endoftext|>\n", "hi"},
		{"end token not trailing", "a<|im_end|>b", "a<|im_end|>b"},
		{"trailing space kept without token", "hi \n", "hi \n"},
		{"think block", "<think>\nhmm\n</think>\n\nanswer", "\n\nanswer"},
		{"close only (opened in prompt)", "hmm\n</think>\n\nanswer", "\n\nanswer"},
		{"text before think dropped", "x<think>a</think>b", "b"},
		{"text before an unfinished think kept", "x<think>a", "x<think>a"},
		{"only first close counts", "<think>a</think>b</think>c", "b</think>c"},
		{"unclosed think is all reasoning", "<think>\nstill thinking <tool_call>\n{\"name\": \"f\"}", ""},
		{"unclosed think, qwen3.5 call", "<think>\nplan\n<tool_call>\n<function=f>\n</function>\n</tool_call>", "<tool_call>\n<function=f>\n</function>\n</tool_call>"},
		{"unclosed think, call with space", "<think>x<tool_call> <function name=\"f\">", "<tool_call> <function name=\"f\">"},
		{"unclosed think, not a function", "<think>x<tool_call><functional>", ""},
		{"think and end token", "<think>a</think>b<|im_end|>", "b"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"think tags inside content kept without reasoning", "say </think", "say </think"},
		{"a <think> later in the reply is content", "Use <think> tags.", "Use <think> tags."},
		{"leading whitespace before <think>", "\n <think>cut off", ""},
		{"idempotent on content that mentions <think>", TrimReply("<think>r</think>Use <think> tags."), "Use <think> tags."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrimReply(tc.in); got != tc.want {
				t.Errorf("TrimReply(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
