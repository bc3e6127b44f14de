"""The documented differences from vLLM: one row of the table in
docs/tool-formats.md each, found by the reason our plugins give for the
call they return unparsed. A difference no row explains fails the check."""
import re

# (row id, formats, pattern searched in an unparsed reason)
ROWS = [
    ("before-think", ("hermes", "qwen3_coder"), r"written before <think>"),
    ("hermes-json", ("hermes",), r"^(invalid JSON|missing </tool_call>|empty <tool_call>)"),
    ("hermes-shape", ("hermes",), r'^(the tool call must be a JSON object|the tool call has no "name"|"name" must be a string|call to .* has no "arguments")'),
    ("hermes-long-int", ("hermes",), r"^the call holds an integer of \d+ digits"),
    ("hermes-empty-name", ("hermes",), r'^"name" is empty'),
    ("hermes-args-string", ("hermes",), r'"arguments" is a string'),
    ("hermes-args-not-object", ("hermes",), r'"arguments" must be a JSON object'),
    ("hermes-non-finite", ("hermes",), r'"arguments" holds (NaN|.* too large for a double)'),
    ("qwen-not-its-type", ("qwen3_coder",), r"is not an integer|is not a number:|has \d+ digits, more than"),
    ("qwen-boolean", ("qwen3_coder",), r"is not a boolean"),
    ("qwen-infinite-number", ("qwen3_coder",), r"is not a finite number"),
    ("qwen-bad-container", ("qwen3_coder",), r"is not valid JSON|holds an integer of \d+ digits, more than"),
    ("qwen-non-finite", ("qwen3_coder",), r"holds NaN or Infinity|holds a NaN or infinite number"),
    ("qwen-python-only", ("qwen3_coder",), r"holds a Python|holds a dict key|holds an integer of more than"),
    ("qwen-function-gt", ("qwen3_coder",), r"missing '>' after the function name"),
    ("qwen-parameter-gt", ("qwen3_coder",), r"missing '>' after <parameter=|<parameter=\.\.\.> is missing '>'"),
    ("qwen-empty-name", ("qwen3_coder",), r"the function name is empty"),
    ("qwen-split", ("qwen3_coder",), r"^missing </function>"),
    ("qwen-no-function", ("qwen3_coder",), r"holds no <function=NAME>"),
    ("qwen-stray", ("qwen3_coder",), r"is outside <tool_call></tool_call>"),
]


def rows_for(fmt, reason):
    """The ids of the rows that explain an unparsed reason ([] if none)."""
    return [rid for rid, fmts, pat in ROWS if fmt in fmts and re.search(pat, reason)]
