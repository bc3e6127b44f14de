#!/usr/bin/env python3
"""Compares agentenv's tool-format plugins with vLLM's own parsers.

    python3 vllmcheck.py VLLM_CHECKOUT [--per-format N] [--seed S] [--show K]

VLLM_CHECKOUT is a folder holding a vLLM source tree (at least its vllm/
folder); nothing of it is copied. Its parser files run unmodified under
the import shims of shims.py. Every reply (each golden vector of
plugins/testdata/toolformat/golden.json, and N generated replies per
format from corpus.py) goes through:

  - vLLM: the detokenizer's view of the reply (a trailing <|im_end|> or
    <|endoftext|> is not in the text), the Qwen3 reasoning parser (thinking
    on when the reply holds <think> or </think>, off otherwise), then the
    format's tool parser on the content, and the serving layer's rule that
    a reply with no call read keeps its whole content;
  - agentenv: the built plugin binaries, started as the host starts them
    (the `parse` Go command beside this file);
  - the CPython model of vLLM that CI runs (vllm_oracle.py).

It reports every reply where agentenv and vLLM differ, with the rows of
docs/tool-formats.md that explain it (rows.py), and fails when a
difference has no row, when a golden vector's "vllm" entry is not what
vLLM returns, or when the CI model disagrees with vLLM anywhere. It needs
python3 with pydantic and regex, and go.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_PLUGINS = os.path.normpath(os.path.join(HERE, "..", ".."))
GOLDEN = os.path.join(REPO_PLUGINS, "testdata", "toolformat", "golden.json")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(GOLDEN))

import corpus  # noqa: E402
import rows  # noqa: E402
import shims  # noqa: E402

END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def strip_end_tokens(text):
    while True:
        stripped = text.rstrip()
        for tok in END_TOKENS:
            if stripped.endswith(tok):
                text = stripped[: -len(tok)]
                break
        else:
            return text


class VLLM:
    def __init__(self, checkout):
        mods = shims.load(checkout)
        self.tool_parsers = {
            "hermes": mods["vllm.tool_parsers.hermes_tool_parser"].Hermes2ProToolParser,
            "qwen3_coder": mods["vllm.tool_parsers.qwen3coder_tool_parser"].Qwen3CoderToolParser,
        }
        self.reasoning = mods["vllm.reasoning.qwen3_reasoning_parser"].Qwen3ReasoningParser
        self.tokenizer = shims.Tokenizer()

    def run(self, fmt, reply, tools):
        """What vLLM returns: content ("" for none), calls as (name,
        arguments string), and whether a parser logged an exception."""
        params = [shims.ChatCompletionToolsParam(function=shims.FunctionDefinition(**t)) for t in tools]
        request = shims.ChatCompletionRequest(tools=params or None)
        text = strip_end_tokens(reply)
        thinking = "<think>" in text or "</think>" in text
        rp = self.reasoning(self.tokenizer, chat_template_kwargs={"enable_thinking": thinking})
        _, content = rp.extract_reasoning(text, request)
        content = content or ""
        shims.LOGGER.exceptions.clear()
        info = self.tool_parsers[fmt](self.tokenizer, params).extract_tool_calls(content, request=request)
        raised = bool(shims.LOGGER.exceptions)
        if not info.tools_called:
            return {"content": content, "calls": [], "raised": raised}
        calls = [(tc.function.name, tc.function.arguments) for tc in info.tool_calls]
        return {"content": info.content or "", "calls": calls, "raised": raised}


def reject_constant(name):
    raise ValueError(name)


def canon(v):
    """A value with its JSON type kept (Python has 1 == 1.0 == True)."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", v)
    if isinstance(v, str):
        return ("str", v)
    if v is None:
        return ("null",)
    if isinstance(v, list):
        return ("list", tuple(canon(x) for x in v))
    return ("dict", tuple(sorted((k, canon(x)) for k, x in v.items())))


def arguments_value(text):
    """An arguments string as a JSON value; text that is not JSON (NaN,
    Infinity) stays text."""
    try:
        return canon(json.loads(text, parse_constant=reject_constant))
    except ValueError:
        return ("not JSON", text)


def norm_calls(calls):
    return [(name, arguments_value(args if isinstance(args, str) else json.dumps(args))) for name, args in calls]


def is_subsequence(xs, ys):
    it = iter(ys)
    return all(any(x == y for y in it) for x in xs)


MERGING_ROWS = {"qwen-split"}  # rows where vLLM reads two calls as one


def explain(fmt, v, ours):
    """The rows that explain how ours differs from vLLM's v, and the
    problems no row explains."""
    found, problems = [], []
    for u in ours["unparsed"]:
        ids = rows.rows_for(fmt, u["reason"])
        if not ids:
            problems.append(f"no row explains the unparsed reason {u['reason']!r}")
        found += ids
    if not ours["unparsed"]:
        problems.append("differs from vLLM with no unparsed call to say why")
    vc, oc = norm_calls(v["calls"]), norm_calls([(c["name"], c["arguments"]) for c in ours["calls"]])
    if vc and not MERGING_ROWS & set(found):
        if not is_subsequence(oc, vc):
            problems.append("a call we read is not one vLLM reads")
        elif len(vc) - len(oc) > len(ours["unparsed"]):
            problems.append("vLLM reads more calls than we return unparsed")
        if v["content"] != ours["content"]:
            problems.append("the content differs though vLLM read calls")
    return found, problems


def same(v, ours):
    return (not ours["unparsed"] and v["content"] == ours["content"]
            and norm_calls(v["calls"]) == norm_calls([(c["name"], c["arguments"]) for c in ours["calls"]]))


def run_plugins(requests):
    """Parses every request with the built plugin binaries."""
    with tempfile.TemporaryDirectory(prefix="vllmcheck-") as tmp:
        bins = {}
        for fmt, mod, cmd in (("hermes", "toolformat-hermes", "agentenv-toolformat-hermes"),
                              ("qwen3_coder", "toolformat-qwen3coder", "agentenv-toolformat-qwen3coder")):
            bins[fmt] = os.path.join(tmp, cmd)
            subprocess.run(["go", "build", "-o", bins[fmt], "./cmd/" + cmd], cwd=os.path.join(REPO_PLUGINS, mod), check=True)
        parse = os.path.join(tmp, "parse")
        subprocess.run(["go", "build", "-o", parse, "./vllmcheck/parse"], cwd=os.path.join(REPO_PLUGINS, "toolformattest"), check=True)
        lines = "".join(json.dumps({k: r[k] for k in ("id", "format", "reply", "tools")}, ensure_ascii=False) + "\n" for r in requests)
        out = subprocess.run([parse] + [f"-plugin={f}={b}" for f, b in bins.items()], input=lines.encode(),
                             capture_output=True, check=True).stdout.decode()
    results = [json.loads(line) for line in out.splitlines()]
    return {r["id"]: r for r in results}


def requests_from_golden(golden):
    out = []
    for case in golden["cases"]:
        tools = golden["toolsets"][case.get("tools", "default")]
        for fmt in case["formats"]:
            out.append({"id": f"golden/{fmt}/{case['name']}", "format": fmt, "kind": "golden", "tools": tools,
                        "reply": case["reply"], "case": case})
    return out


def golden_problem(case, v):
    """Whether vLLM returns what the golden case says it does."""
    want = case.get("vllm") or {"content": case.get("content", ""), "calls": case.get("calls", [])}
    want_calls = [(c["name"], canon(c["arguments"]) if "arguments" in c else ("not JSON", c["arguments_text"]))
                  for c in want.get("calls", [])]
    if (want.get("content") or "") != v["content"] or want_calls != norm_calls(v["calls"]):
        label = "its vllm entry" if "vllm" in case else "its expectation (no vllm entry)"
        return f"vLLM returns {json.dumps({'content': v['content'], 'calls': v['calls']}, ensure_ascii=False)}, not {label}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", help="a vLLM source tree (holding vllm/tool_parsers and vllm/reasoning)")
    ap.add_argument("--per-format", type=int, default=500, help="generated replies per format (default 500)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=3, help="example replies to print per row")
    args = ap.parse_args()

    import vllm_oracle
    vllm = VLLM(args.checkout)
    golden = json.load(open(GOLDEN, encoding="utf-8"))
    requests = requests_from_golden(golden) + corpus.generate(args.per_format, args.seed)
    ours = run_plugins(requests)

    failures, per_row, examples = [], Counter(), {}
    tally = Counter()
    oracle_agrees = 0
    for req in requests:
        fmt, group = req["format"], req["kind"]
        v = vllm.run(fmt, req["reply"], req["tools"])
        o = ours[req["id"]]
        m = vllm_oracle.PARSERS[fmt](vllm_oracle.split_reply(req["reply"]), req["tools"])
        if m[0] == v["content"] and norm_calls(m[1]) == norm_calls(v["calls"]):
            oracle_agrees += 1
        else:
            failures.append((req, f"the CI model (vllm_oracle.py) gives {m!r}, vLLM {v!r}"))
        if "case" in req and (p := golden_problem(req["case"], v)):
            failures.append((req, p))
        tally[group, fmt, "replies"] += 1
        if same(v, o):
            tally[group, fmt, "same"] += 1
            continue
        tally[group, fmt, "differ"] += 1
        found, problems = explain(fmt, v, o)
        for p in problems:
            failures.append((req, f"{p}\n    vLLM: {v}\n    ours: {o}"))
        for rid in set(found):
            per_row[rid] += 1
            examples.setdefault(rid, []).append(req["reply"])

    print(f"vLLM checkout: {args.checkout}")
    for fmt in ("hermes", "qwen3_coder"):
        for group in ("golden", "realistic", "typed", "adversarial"):
            n, s, d = (tally[group, fmt, k] for k in ("replies", "same", "differ"))
            print(f"{fmt:12} {group:12} {n:4} replies: {s:4} the same as vLLM, {d:4} differ")
    print(f"CI model (vllm_oracle.py) agrees with vLLM on {oracle_agrees} of {len(requests)} replies")
    print("replies that differ, by documented row:")
    for rid, _, _ in rows.ROWS:
        print(f"  {rid:24} {per_row[rid]:4}")
        for ex in examples.get(rid, [])[: args.show]:
            print(f"      e.g. {ex[:160]!r}")
    for req, p in failures:
        print(f"FAIL {req['id']}: {p}\n    reply: {req['reply'][:400]!r}")
    print(f"{len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
