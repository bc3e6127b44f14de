#!/usr/bin/env python3
"""Checks golden.json against a model of vLLM's own tool parsers.

The model follows vLLM's main branch @ 239b5ff3 (2026-05-18):
vllm/reasoning/qwen3_reasoning_parser.py, then
vllm/tool_parsers/hermes_tool_parser.py or qwen3coder_tool_parser.py (with
find_tool_properties from vllm/tool_parsers/utils.py), run with CPython's
real re, json, ast, int and float, so the regex and conversion corner
cases are CPython's own. plugins/toolformattest/vllmcheck/vllmcheck.py
runs vLLM's own files on every golden vector and a generated corpus and
checks that this model returns what they return on every one.

For each golden case and format it computes what vLLM returns (content and
calls) and checks it against the case: equal to the case's own expectation
when the case has no "vllm" entry (so our plugins agree with vLLM there),
or equal to the "vllm" entry when it has one (a documented difference).

Usage: python3 vllm_oracle.py [golden.json]   (exit status 1 on mismatch)
"""
import ast
import json
import re
import sys

END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def split_reply(text):
    """The content vLLM's tool parser reads: the reply without its end
    token (the detokenizer leaves it out), split by the Qwen3 reasoning
    parser with thinking on when the reply holds <think> or </think>."""
    while True:
        stripped = text.rstrip()
        for tok in END_TOKENS:
            if stripped.endswith(tok):
                text = stripped[: -len(tok)]
                break
        else:
            break
    thinking = "<think>" in text or "</think>" in text
    before, sep, after = text.partition("<think>")
    text = after if sep else before
    if "</think>" in text:
        return text.partition("</think>")[2]
    if not thinking:
        return text
    i = text.find("<tool_call>")
    return text[i:] if i != -1 else ""


# ---- hermes ----
HERMES_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def hermes(text, tools):
    if "<tool_call>" not in text:
        return text, []
    try:
        calls = []
        for m in HERMES_RE.findall(text):
            fc = json.loads(m[0] if m[0] else m[1])
            name = fc["name"]
            if not isinstance(name, str):  # pydantic rejects a non-str name
                raise TypeError("name")
            calls.append((name, json.dumps(fc["arguments"], ensure_ascii=False)))
        return text[: text.find("<tool_call>")], calls
    except Exception:
        return text, []


# ---- qwen3_coder ----
BLOCK_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
FUNC_RE = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
PARAM_RE = re.compile(r"<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)", re.DOTALL)


def arguments_config(name, tools):
    """find_tool_properties: the first tool of that name's properties."""
    for t in tools:
        if t["name"] == name:
            return (t.get("parameters") or {}).get("properties", {})
    return {}


def convert(value, pname, config):
    if value.lower() == "null":
        return None
    if pname not in config:
        return value
    schema = config[pname]
    if isinstance(schema, dict) and "type" in schema:
        ptype = str(schema["type"]).strip().lower()
    elif isinstance(schema, dict) and "anyOf" in schema:
        ptype = "object"
    else:
        ptype = "string"
    if ptype in ("string", "str", "text", "varchar", "char", "enum"):
        return value
    if ptype.startswith(("int", "uint", "long", "short", "unsigned")):
        try:
            return int(value)
        except (ValueError, TypeError):
            return value
    if ptype.startswith(("num", "float")):
        try:
            f = float(value)
            return f if f - int(f) != 0 else int(f)  # int(inf) raises OverflowError: not caught
        except (ValueError, TypeError):
            return value
    if ptype in ("boolean", "bool", "binary"):
        return value.lower() == "true"
    if ptype in ("object", "array", "arr") or ptype.startswith(("dict", "list")):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, TypeError, ValueError):
            pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError):
        return value


def qwen3_coder(text, tools):
    if "<function=" not in text:
        return text, []
    try:
        blocks = [m[0] if m[0] else m[1] for m in BLOCK_RE.findall(text)]
        if not blocks:
            blocks = [text]
        funcs = []
        for b in blocks:
            funcs.extend(m[0] if m[0] else m[1] for m in FUNC_RE.findall(b))
        if not funcs:
            return text, []
        calls = []
        for f in funcs:
            gt = f.find(">")
            if gt == -1:  # not a function call: dropped
                continue
            name = f[:gt]
            config = arguments_config(name, tools)
            args = {}
            for m in PARAM_RE.findall(f[gt + 1:]):
                k = m.index(">")
                value = m[k + 1:]
                if value.startswith("\n"):
                    value = value[1:]
                if value.endswith("\n"):
                    value = value[:-1]
                args[m[:k]] = convert(value, m[:k], config)
            calls.append((name, json.dumps(args, ensure_ascii=False)))
        if not calls:
            return text, []
        i = text.find("<tool_call>")
        return text[: i if i >= 0 else text.find("<function=")], calls
    except Exception:
        return text, []


PARSERS = {"hermes": hermes, "qwen3_coder": qwen3_coder}


def as_call(name, arguments):
    """A call as golden.json writes vLLM's: "arguments" as a JSON value, or
    "arguments_text" for arguments that are not JSON (NaN, Infinity)."""
    try:
        return {"name": name, "arguments": json.loads(arguments, parse_constant=reject_constant)}
    except ValueError:
        return {"name": name, "arguments_text": arguments}


def reject_constant(name):
    raise ValueError(name)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "golden.json"
    golden = json.load(open(path, encoding="utf-8"))
    failures = checked = 0
    for case in golden["cases"]:
        tools = golden["toolsets"][case.get("tools", "default")]
        for fmt in case["formats"]:
            content, calls = PARSERS[fmt](split_reply(case["reply"]), tools)
            got = {"content": content or "", "calls": [as_call(n, a) for n, a in calls]}
            if "vllm" in case:
                want = {"content": case["vllm"].get("content") or "",
                        "calls": case["vllm"].get("calls", [])}
                label = "vllm entry"
            else:
                if case.get("unparsed"):
                    print(f"FAIL {case['name']} [{fmt}]: has unparsed calls but no vllm entry")
                    failures += 1
                    continue
                want = {"content": case.get("content", ""), "calls": case.get("calls", [])}
                label = "our expectation"
            checked += 1
            if got != want:
                failures += 1
                print(f"FAIL {case['name']} [{fmt}]: vLLM model gives\n  {json.dumps(got, ensure_ascii=False)}\n"
                      f"but the {label} is\n  {json.dumps(want, ensure_ascii=False)}")
    print(f"{checked} case/format pairs checked against the vLLM model, {failures} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
