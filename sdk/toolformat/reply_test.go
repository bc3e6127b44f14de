package toolformat

import "testing"

func TestSplitReply(t *testing.T) {
	tests := []struct {
		name, in string
		want     Reply
	}{
		{"plain", "The answer is 42.", Reply{Content: "The answer is 42."}},
		{"empty", "", Reply{}},
		{"im_end", "hi<|im_end|>", Reply{Content: "hi"}},
		{"endoftext", "hi<|endoftext|>", Reply{Content: "hi"}},
		{"both and newline", "hi<|im_end|><|endoftext|>\n", Reply{Content: "hi"}},
		{"end token not trailing", "a<|im_end|>b", Reply{Content: "a<|im_end|>b"}},
		{"trailing space kept without token", "hi \n", Reply{Content: "hi \n"}},
		{"think block", "<think>\nhmm\n</think>\n\nanswer", Reply{Reasoning: "\nhmm\n", Content: "\n\nanswer"}},
		{"close only (opened in the prompt)", "hmm\n</think>\n\nanswer", Reply{Reasoning: "hmm\n", Content: "\n\nanswer"}},
		{"text before <think> is dropped", "x<think>a</think>b", Reply{Before: "x", Reasoning: "a", Content: "b"}},
		{"only the first close counts", "<think>a</think>b</think>c", Reply{Reasoning: "a", Content: "b</think>c"}},
		{"a later <think> is content", "<think>r</think>Use <think> tags.", Reply{Reasoning: "r", Content: "Use <think> tags."}},
		{"a <think> after </think> drops both", "a</think>b<think>c", Reply{Before: "a</think>b", Reasoning: "c"}},
		{"unclosed think is all reasoning", "<think>\nstill thinking", Reply{Reasoning: "\nstill thinking"}},
		{"unclosed think ends at <tool_call>", "<think>\nplan\n<tool_call>\n{\"name\": \"f\"}", Reply{Reasoning: "\nplan\n", Content: "<tool_call>\n{\"name\": \"f\"}"}},
		{"unclosed think, qwen3.5 call", "<think>plan<tool_call>\n<function=f>\n</function>\n</tool_call>", Reply{Reasoning: "plan", Content: "<tool_call>\n<function=f>\n</function>\n</tool_call>"}},
		{"a <think> after text opens reasoning", "Use <think> tags.", Reply{Before: "Use ", Reasoning: " tags."}},
		{"think and end token", "<think>a</think>b<|im_end|>", Reply{Reasoning: "a", Content: "b"}},
		{"invalid utf-8", "a\xffb", Reply{Content: "a\uFFFDb"}},
		{"partial tags are content", "say </think", Reply{Content: "say </think"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SplitReply(tc.in); got != tc.want {
				t.Errorf("SplitReply(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if got := TrimReply(tc.in); got != tc.want.Content {
				t.Errorf("TrimReply(%q) = %q, want %q", tc.in, got, tc.want.Content)
			}
		})
	}
}
