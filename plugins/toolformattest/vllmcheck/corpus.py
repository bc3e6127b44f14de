"""A seeded corpus of model replies for the vLLM check: realistic turns as
the Qwen chat templates render them, typed values over every schema branch
of qwen3_coder's conversion, and adversarial replies (cut off anywhere,
tags missing or doubled, reasoning left open, calls before <think>, the
other format's calls, odd names and numbers)."""
import json
import random

LONG = "7" * 4301  # one digit past CPython's int/str limit

TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "parameters": {
        "type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
            "lat": {"type": "number"}}, "required": ["city"]}},
    {"name": "search", "description": "Search the web.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "filters": {"type": "object"},
                                         "tags": {"type": "array"}, "limit": {"type": ["integer", "null"]}}}},
    {"name": "update", "description": "Nullable fields, as Pydantic writes Optional.", "parameters": {
        "type": "object", "properties": {
            "id": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "flags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "any": {}, "x": {"type": "any"}}}},
    {"name": "ping", "description": "No properties.", "parameters": {"type": "object"}},
    {"name": "nullable", "description": "Schema with a null type and no type.", "parameters": {
        "type": "object", "properties": {"n": {"type": "null"}, "d": {"description": "untyped"}}}},
]

WORDS = ["Paris", "Oslo", "café", "日本語", "a < b && c > d", "line1\nline2", "  padded  ", "\"quoted\"",
         "back\\slash", "{not json}", "null", "None", "True", "42", "-7", "😀", "tab\there", ""]

VALUES = {  # the text a model may write for each schema branch (qwen3_coder)
    "string": WORDS,
    "integer": ["42", " 7 ", "-0012", "1_000", "١٢", "+3", "None", "null", "twelve", "1.5", "0x10", LONG,
                LONG[:4300], "-" + LONG, "9" * 30, ""],
    "number": ["2.5", "1e3", "5.0", "-0.0", "inf", "-Infinity", "nan", "1e400", "1" * 400, "1e-400", "None",
               ".5", "1_0.5", "abc", "3", "6.02e+23", "NULL"],
    "boolean": ["true", "false", "True", "FALSE", "yes", "None", "1", " true", "null"],
    "object": ['{"a": 1, "b": [true, null]}', "{'a': True, 'b': None}", '{"a": NaN}', "{1, 2}", '{"a": 1e400}',
               '{"a": ' + LONG + "}", "b'x'", "(1, 2)", '{"a": [1, 2.50]}', "None", "not json", "[1, 2",
               "{1: 'x', 2.0: 'y', None: 0}", "{(1, 2): 3}", "{'a': 1j}", "{'a': float('nan')}", '{"k": "v"}\n'],
    "array": ["[1, 2, 3]", "['a', 'b']", "(1, 'x')", "[NaN]", "{1, 2}", "[]", "None", "[1e400]", "[" + LONG + "]",
              "[0x" + "f" * 3600 + "]", "[1, [2, [3]]]"],
    "anyof": ["5", "None", "hello", "[1, 2]", "{1, 2}", "true", "True", "null", '{"a": NaN}', "1e400", LONG,
              "'quoted'", "3.25", "{'a': None}"],
    "other": ["123", "'x'", "[1, 'a']", "None", "hello", "{1, 2}", "1e400", "nan", LONG, "(1,)", "{'a': b'x'}"],
}

SCHEMA_BRANCH = {  # (tool, parameter) -> VALUES key
    ("get_weather", "city"): "string", ("get_weather", "days"): "integer", ("get_weather", "metric"): "boolean",
    ("get_weather", "lat"): "number", ("search", "query"): "string", ("search", "filters"): "object",
    ("search", "tags"): "array", ("search", "limit"): "other", ("update", "id"): "anyof",
    ("update", "note"): "anyof", ("update", "score"): "anyof", ("update", "flags"): "anyof",
    ("update", "any"): "string", ("update", "x"): "other", ("ping", "p"): "string",
    ("nullable", "n"): "other", ("nullable", "d"): "string",
}
PARAMS = {t["name"]: [p for (tn, p) in SCHEMA_BRANCH if tn == t["name"]] for t in TOOLS}

# JSON argument values for hermes, as a model writes them (raw JSON text).
HERMES_VALUES = ['"Paris"', "3", "-0.0", "1E5", "1.10", "true", "null", '"é<>&"', "[1, 2]", '{"a": {"b": []}}',
                 "12345678901234567890123", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", LONG[:4300], LONG,
                 '"\\ud83d\\ude00"', '"\\u0000"', "1e-400", "0.1000000000000000055511151231257827"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, xs):
        return xs[self.r.randrange(len(xs))]

    # ---- realistic pieces ----
    def think(self):
        return self.pick(["Let me think about which tool to use.", "The user wants the weather.\nI should call get_weather.",
                          "", "Plan: search first, then answer."])

    def content(self):
        return self.pick(["", "Let me check.", "I'll look that up for you.\n", "Sure!", "Checking the forecast now."])

    def hermes_call(self, typed):
        tool = self.pick(TOOLS[:3])
        params = PARAMS[tool["name"]]
        members = []
        for p in self.r.sample(params, self.r.randint(0, len(params))):
            value = self.pick(HERMES_VALUES) if typed else json.dumps(self.pick(WORDS), ensure_ascii=False)
            members.append(f'"{p}": {value}')
        args = "{" + ", ".join(members) + "}"
        return '{"name": "%s", "arguments": %s}' % (tool["name"], args)

    def qwen_call(self, typed):
        tool = self.pick(TOOLS)
        params = PARAMS[tool["name"]]
        lines = [f"<function={tool['name']}>"]
        for p in self.r.sample(params, self.r.randint(0, len(params))):
            branch = SCHEMA_BRANCH[(tool["name"], p)]
            value = self.pick(VALUES[branch]) if typed else self.realistic_value(branch)
            lines += [f"<parameter={p}>", value, "</parameter>"]
        lines.append("</function>")
        return "\n".join(lines)

    def realistic_value(self, branch):
        return {"string": self.pick(["Paris", "weather in Oslo", "café", "multi\nline"]),
                "integer": str(self.r.randint(-5, 400)), "number": self.pick(["2.5", "10", "-3.75"]),
                "boolean": self.pick(["True", "False", "true"]), "object": '{"lang": "en", "safe": true}',
                "array": '["a", "b"]', "anyof": self.pick(["5", "None", "note text", '["x"]']),
                "other": self.pick(["10", "None"])}[branch]

    def block(self, fmt, typed):
        body = self.hermes_call(typed) if fmt == "hermes" else self.qwen_call(typed)
        return f"<tool_call>\n{body}\n</tool_call>"

    def turn(self, fmt, typed, think=None):
        parts = []
        if think is None:
            think = self.r.random() < 0.5
        if think:
            parts.append(self.pick(["<think>\n", ""]) + self.think() + "\n</think>\n\n")
        c = self.content()
        if c:
            parts.append(c + "\n\n")
        parts.append("\n".join(self.block(fmt, typed) for _ in range(self.r.randint(1, 3))))
        if self.r.random() < 0.3:
            parts.append(self.pick(["<|im_end|>", "<|im_end|>\n", "<|endoftext|>"]))
        return "".join(parts)

    # ---- adversarial ----
    def adversarial(self, fmt):
        kind = self.r.randrange(12)
        other = "qwen3_coder" if fmt == "hermes" else "hermes"
        base = self.turn(fmt, self.r.random() < 0.5)
        if kind == 0:  # cut off anywhere
            return base[: self.r.randrange(len(base) + 1)]
        if kind == 1:  # a tag removed
            tag = self.pick(["</tool_call>", "<tool_call>", "</function>", "</parameter>", ">", "</think>", "\n"])
            i = base.find(tag)
            return base if i < 0 else base[:i] + base[i + len(tag):]
        if kind == 2:  # a tag doubled
            tag = self.pick(["<tool_call>", "</tool_call>", "<function=search>", "<parameter=query>", "<think>"])
            i = self.r.randrange(len(base) + 1)
            return base[:i] + tag + base[i:]
        if kind == 3:  # reasoning left open, then a call (Qwen3.5)
            return "<think>\n" + self.think() + "\n" + self.block(fmt, False)
        if kind == 4:  # a call before <think>
            return self.block(fmt, False) + "\n<think>\n" + self.think() + "\n</think>\n\n" + self.block(fmt, False)
        if kind == 5:  # the other format's call
            return self.content() + self.block(other, False)
        if kind == 6:  # a call inside the reasoning
            return "<think>\n" + self.block(fmt, False) + "\n</think>\n\n" + self.block(fmt, False)
        if kind == 7:  # odd names
            name = self.pick(["", " get_weather", "get weather", "get_weather\n", "a<b", '"search"', "search\n<parameter=query"])
            if fmt == "hermes":
                return '<tool_call>\n{"name": %s, "arguments": {}}\n</tool_call>' % self.pick([json.dumps(name), "5", "null", "NaN"])
            return f"<tool_call>\n<function={name}>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>"
        if kind == 8:  # odd argument shapes
            if fmt == "hermes":
                args = self.pick(['"{\\"city\\": \\"Oslo\\"}"', '"not json"', "[1]", "null", "5", '{"a": 1, "a": 2}',
                                  "{}", '{"a": NaN}', '"{\\"a\\": NaN}"'])
                extra = self.pick(["", ', "id": NaN', ', "n": ' + LONG, ', "parameters": {}'])
                return '<tool_call>\n{"name": "search", "arguments": %s%s}\n</tool_call>' % (args, extra)
            return "<tool_call>\n<function=search>\n<parameter=query\nx\n</parameter>\n</function>\n</tool_call>"
        if kind == 9:  # stray or bare functions (qwen3_coder) / text around calls (hermes)
            if fmt == "hermes":
                return "before " + self.block(fmt, True) + " between " + self.block(fmt, True) + " after"
            return self.pick(["", self.block(fmt, False) + "\n"]) + self.qwen_call(self.r.random() < 0.5)
        if kind == 10:  # only </think>, or think markers in odd places
            return self.pick(["hmm\n</think>\n\n", "Text <think> more", "a</think>b<think>c", "<think>a</think>b</think>c"]) + base
        return self.turn(fmt, True, think=False) + self.pick(["", "\n<think>", "<|im_end|>"])


def generate(n_per_format, seed):
    """n_per_format replies for each format: a third realistic, a third
    typed, a third adversarial."""
    g = Gen(seed)
    cases = []
    for fmt in ("hermes", "qwen3_coder"):
        for i in range(n_per_format):
            kind = ("realistic", "typed", "adversarial")[i % 3]
            if kind == "adversarial":
                reply = g.adversarial(fmt)
            else:
                reply = g.turn(fmt, typed=kind == "typed")
            cases.append({"id": f"corpus/{fmt}/{i}", "format": fmt, "kind": kind, "tools": TOOLS, "reply": reply})
    return cases
