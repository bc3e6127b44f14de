"""Stand-in for verl.utils.tokenizer.continuous_token_wiring."""

from .continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder


def create_continuous_token_builder(tokenizer, *, hf_model_type=None, chat_template_kwargs=None, mm_processor_kwargs=None, processor=None):
    """verl picks the builder by the model's config model_type (qwen2, qwen3, ... -> Qwen's)."""
    cls = QwenContinuousTokenBuilder if (hf_model_type or "").startswith("qwen") else ContinuousTokenBuilder
    return cls(tokenizer, chat_template_kwargs=chat_template_kwargs)
