"""Stand-in for verl.utils.tokenizer.continuous_token: the text builders'
behaviour the agent loop relies on, written from verl's source (not copied):

- build_initial_tokens renders the messages with the tokenizer's
  apply_chat_template (tokenize, add_generation_prompt, tools=, the data
  config's chat template kwargs);
- merge_assistant_tokens appends the generated tokens;
- merge_non_assistant_tokens renders appended tool messages as the suffix of
  a rendering after a synthetic system, user and assistant-with-tool-calls
  prefix, then the generation prompt's suffix; Qwen's builder first inserts
  the newline the template puts after <|im_end|>, as a boundary token;
- align_response_metadata gives boundary and non-assistant tokens mask 0
  and logprob 0, assistant tokens mask 1 and their logprobs.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

_SYSTEM = {"role": "system", "content": "continuous token synthetic system"}
_USER = {"role": "user", "content": "continuous token synthetic user"}


@dataclass(frozen=True)
class MergeResult:
    token_ids: List[int]
    appended_token_count: int
    kind: str = "non_assistant"
    inserted_token_ids: List[int] = field(default_factory=list)
    removed_prefix_token_count: int = 0


class ContinuousTokenBuilder:
    def __init__(self, tokenizer: Any, *, chat_template_kwargs: Optional[Dict[str, Any]] = None, allowed_append_roles=None):
        self.tokenizer = tokenizer
        self.chat_template_kwargs = chat_template_kwargs or {}

    def build_initial_tokens(self, messages, *, tools=None, images=None, videos=None, audios=None) -> List[int]:
        return self._render(messages, add_generation_prompt=True, tools=tools)

    def merge_non_assistant_tokens(self, previous_messages, updated_messages, runtime_token_ids, *, tools=None) -> MergeResult:
        if updated_messages[: len(previous_messages)] != previous_messages:
            raise ValueError("Continuous Token messages must be append-only; prefix messages changed")
        appended = updated_messages[len(previous_messages):]
        ids: List[int] = []
        if appended:
            if any(m.get("role") != "tool" for m in appended):
                raise ValueError("this stand-in appends tool messages only")
            assistant = {"role": "assistant", "content": "", "reasoning_content": "reasoning", "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": "continuous_token_tool", "arguments": {}}}
                for i in range(len(appended))]}
            ids += self._delta([_SYSTEM, _USER, assistant], appended, tools=tools)
            ids += self._delta(updated_messages, [], add_generation_prompt=True, tools=tools)
        return self._merge(runtime_token_ids, ids)

    def merge_assistant_tokens(self, runtime_token_ids, assistant_token_ids) -> MergeResult:
        return MergeResult(token_ids=list(runtime_token_ids) + list(assistant_token_ids),
                           appended_token_count=len(assistant_token_ids), kind="assistant")

    def align_response_metadata(self, merge_result, response_mask, response_logprobs=None, *, assistant_logprobs=None):
        mask = list(response_mask)
        logprobs = list(response_logprobs) if response_logprobs is not None else None
        if logprobs is None and assistant_logprobs is not None:
            raise ValueError("response_logprobs is required when assistant_logprobs is provided")
        if merge_result.removed_prefix_token_count:
            mask = mask[: -merge_result.removed_prefix_token_count]
            if logprobs is not None:
                logprobs = logprobs[: -merge_result.removed_prefix_token_count]
        mask += [0] * len(merge_result.inserted_token_ids)
        if logprobs is not None:
            logprobs += [0.0] * len(merge_result.inserted_token_ids)
        n = merge_result.appended_token_count
        if merge_result.kind == "assistant":
            mask += [1] * n
            if logprobs is not None:
                assistant_logprobs = assistant_logprobs if assistant_logprobs is not None else ([] if n == 0 else None)
                if assistant_logprobs is None or len(assistant_logprobs) != n:
                    raise ValueError("assistant_logprobs length must match appended assistant token count")
                logprobs += list(assistant_logprobs)
        else:
            mask += [0] * n
            if logprobs is not None:
                logprobs += [0.0] * n
        return mask, logprobs

    @classmethod
    def supports_multimodal(cls) -> bool:
        return False

    # -- helpers ----------------------------------------------------------

    def _merge(self, runtime_token_ids, appended_ids) -> MergeResult:
        return MergeResult(token_ids=list(runtime_token_ids) + list(appended_ids), appended_token_count=len(appended_ids))

    def _render(self, messages, *, add_generation_prompt: bool, tools=None) -> List[int]:
        return list(self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt,
                                                       tools=tools, **self.chat_template_kwargs))

    def _delta(self, prefix, appended, *, add_generation_prompt=False, tools=None) -> List[int]:
        before = self._render(prefix, add_generation_prompt=False, tools=tools)
        after = self._render(prefix + appended, add_generation_prompt=add_generation_prompt, tools=tools)
        if after[: len(before)] != before:
            raise ValueError("Continuous Token token-id suffix diff failed")
        return after[len(before):]


class QwenContinuousTokenBuilder(ContinuousTokenBuilder):
    """Qwen's templates put a newline after <|im_end|>, which generation
    stops before: inserted at the boundary, with mask 0."""

    def __init__(self, tokenizer: Any, **kwargs: Any):
        super().__init__(tokenizer, **kwargs)
        (self._newline_id,) = tokenizer.encode("\n", add_special_tokens=False)
        self._im_end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _merge(self, runtime_token_ids, appended_ids) -> MergeResult:
        prefix, inserted = list(runtime_token_ids), []
        if prefix and prefix[-1] == self._im_end_id:
            prefix.append(self._newline_id)
            inserted.append(self._newline_id)
        return MergeResult(token_ids=prefix + list(appended_ids), appended_token_count=len(appended_ids), inserted_token_ids=inserted)

