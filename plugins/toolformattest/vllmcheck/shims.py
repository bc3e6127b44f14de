"""Loads vLLM's own tool and reasoning parser files, unmodified, from a vLLM
checkout, under the smallest import shims that let them run without the
rest of vLLM (and without torch, openai, xgrammar, partial_json_parser).

The files loaded as they are in the checkout:

    vllm/tool_parsers/utils.py
    vllm/tool_parsers/abstract_tool_parser.py
    vllm/tool_parsers/hermes_tool_parser.py
    vllm/tool_parsers/qwen3coder_tool_parser.py
    vllm/reasoning/abs_reasoning_parsers.py
    vllm/reasoning/basic_parsers.py
    vllm/reasoning/qwen3_reasoning_parser.py

Everything else they import is a stub defined here: the logger (it records
the exceptions the parsers log), the protocol classes (pydantic models with
the field types of vllm/entrypoints/openai/*/protocol.py, so a name that is
not a string fails validation as it does in vLLM), the tokenizer (a vocab
of the four special tokens), envs, and names used only in type hints or in
code paths the check never takes (streaming, structured outputs).
"""
import importlib.util
import sys
import types
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

LOADED = [
    "vllm/tool_parsers/utils.py",
    "vllm/tool_parsers/abstract_tool_parser.py",
    "vllm/tool_parsers/hermes_tool_parser.py",
    "vllm/tool_parsers/qwen3coder_tool_parser.py",
    "vllm/reasoning/abs_reasoning_parsers.py",
    "vllm/reasoning/basic_parsers.py",
    "vllm/reasoning/qwen3_reasoning_parser.py",
]


class Placeholder:
    """A name the parsers import but the check never uses for behaviour."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def placeholder(name):
    return type(name, (Placeholder,), {})


# ---- protocol classes (field types as in vLLM's protocol modules) ----
class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")


def make_tool_call_id(id_type="random", func_name=None, idx=None):
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


class FunctionCall(OpenAIBaseModel):
    id: str | None = Field(default=None, exclude=True)
    name: str
    arguments: str


class ToolCall(OpenAIBaseModel):
    id: str = Field(default_factory=make_tool_call_id)
    type: Literal["function"] = "function"
    function: FunctionCall


class DeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(OpenAIBaseModel):
    id: str | None = None
    type: Literal["function"] | None = None
    index: int
    function: DeltaFunctionCall | None = None


class DeltaMessage(OpenAIBaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] = Field(default_factory=list)


class ExtractedToolCallInformation(BaseModel):
    tools_called: bool
    tool_calls: list[ToolCall]
    content: str | None = None


class FunctionDefinition(OpenAIBaseModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ChatCompletionToolsParam(OpenAIBaseModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class ChatCompletionRequest(OpenAIBaseModel):
    tools: list[ChatCompletionToolsParam] | None = None
    tool_choice: Any = "auto"
    skip_special_tokens: bool = True


# ---- logger: records what the parsers log ----
class RecordingLogger:
    """vllm.logger's logger; exceptions holds each logger.exception() call
    (the parsers log one when they give up on a whole reply)."""

    def __init__(self):
        self.exceptions = []

    def exception(self, msg, *args, **kwargs):
        self.exceptions.append((msg % args if args else msg, sys.exc_info()[1]))

    def debug(self, *args, **kwargs):
        pass

    info = warning = error = debug


LOGGER = RecordingLogger()


class Tokenizer:
    """The special tokens the parsers look up; nothing is ever tokenized."""

    VOCAB = {"<tool_call>": 151657, "</tool_call>": 151658, "<think>": 151667, "</think>": 151668}

    def get_vocab(self):
        return dict(self.VOCAB)


STUBS = {
    "vllm.logger": {"init_logger": lambda name: LOGGER},
    "vllm.envs": {"VLLM_ENFORCE_STRICT_TOOL_CALLING": False},
    "vllm.tokenizers": {"TokenizerLike": Tokenizer},
    "vllm.utils.mistral": {"is_mistral_tokenizer": lambda tokenizer: False},
    "vllm.utils.collection_utils": {"is_list_of": lambda value, typ: isinstance(value, list) and all(isinstance(v, typ) for v in value)},
    "vllm.utils.import_utils": {"import_from_path": placeholder("import_from_path")},
    "vllm.entrypoints.chat_utils": {"make_tool_call_id": make_tool_call_id},
    "vllm.entrypoints.openai.chat_completion.protocol": {
        "ChatCompletionRequest": ChatCompletionRequest,
        "ChatCompletionToolsParam": ChatCompletionToolsParam,
        "ChatCompletionNamedToolChoiceParam": placeholder("ChatCompletionNamedToolChoiceParam"),
    },
    "vllm.entrypoints.openai.engine.protocol": {
        "DeltaFunctionCall": DeltaFunctionCall,
        "DeltaMessage": DeltaMessage,
        "DeltaToolCall": DeltaToolCall,
        "ExtractedToolCallInformation": ExtractedToolCallInformation,
        "FunctionCall": FunctionCall,
        "ToolCall": ToolCall,
    },
    "vllm.entrypoints.openai.responses.protocol": {"ResponsesRequest": placeholder("ResponsesRequest")},
    "vllm.entrypoints.mcp.tool_server": {"ToolServer": placeholder("ToolServer")},
    "vllm.sampling_params": {"StructuredOutputsParams": placeholder("StructuredOutputsParams")},
    "vllm.tool_parsers.structural_tag_registry": {
        "get_enable_structured_outputs_in_reasoning": lambda *a, **k: False,
        "get_model_structural_tag": lambda *a, **k: None,
    },
    "openai.types.responses": {
        "FunctionTool": placeholder("FunctionTool"),
        "ToolChoiceFunction": placeholder("ToolChoiceFunction"),
        "ResponseFormatTextJSONSchemaConfig": placeholder("ResponseFormatTextJSONSchemaConfig"),
        "ResponseTextConfig": placeholder("ResponseTextConfig"),
    },
    "openai.types.responses.tool": {"Tool": placeholder("ResponsesTool")},
    "openai.types.responses.function_tool": {"FunctionTool": None},  # set below: the same class
    "partial_json_parser": {"loads": placeholder("loads")},
    "partial_json_parser.core.options": {"Allow": placeholder("Allow")},
}
STUBS["openai.types.responses.function_tool"]["FunctionTool"] = STUBS["openai.types.responses"]["FunctionTool"]


def _package(name):
    """An empty package module, so `vllm.x.y` resolves to what we put there."""
    if name not in sys.modules:
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(_package(parent), child, mod)
    return sys.modules[name]


def load(checkout):
    """Installs the stubs, loads vLLM's files from checkout and returns the
    modules by their dotted names."""
    for name, attrs in STUBS.items():
        parent, _, child = name.rpartition(".")
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod
        if parent:
            setattr(_package(parent), child, mod)
    loaded = {}
    for path in LOADED:
        name = path[: -len(".py")].replace("/", ".")
        parent, _, child = name.rpartition(".")
        spec = importlib.util.spec_from_file_location(name, f"{checkout}/{path}")
        if spec is None:
            raise SystemExit(f"vllmcheck: cannot load {path} from {checkout}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        setattr(_package(parent), child, mod)
        spec.loader.exec_module(mod)
        loaded[name] = mod
    return loaded
