#!/usr/bin/env python3
"""Writes pyvalues.json: what CPython's int(), float() (as vLLM's
qwen3_coder number conversion uses it) and ast.literal_eval + json.dumps
make of many strings. pyvalues_test.go checks the Go emulation against it.

Run from this folder: python3 gen_pyvalues.py > pyvalues.json
(recorded with the CPython version in the output's "python" field).
"""
import ast
import json
import random
import sys

HAND = [
    "0", "7", "-7", "+7", " 42 ", "\t42\n", "1_000", "1__000", "_1", "1_", "0123", "00", "0_0",
    "١٢", "１２", "𝟙𝟚", "1 2", "+ 1", "--1", "0x10", "1e3", "1.5", "5.0", "-0", "-0.0", ".5", "5.",
    "1.e5", "1e", "e5", "inf", "-inf", "+Infinity", "INF", "nan", "-NaN", "in f", "1e400", "-1e400",
    "1e-400", "1e16", "1e15", "123456789012345678901234567890", "0.1", "1e-05", "0.0001", "1.5e-07",
    "2.5e+20", "1_0.5", "1._5", "1.5_", "\u00a01\u00a0", "\u20031", "\x1c1\x1f", "1\x0b", "twelve",
    "", " ", "True", "true", "None", "null", "1.0", "3.14159", "-2.5", "9007199254740993",
    "1e308", "1.7976931348623157e308", "2e-323", "5e-324",
    # literals
    "\n1", "\n  1", " \n1", "1\n", "1 # c", "# c\n1", "\\\n1", "(1,\n2)", "[1,\n 2]", "1,2", "1,",
    "(1)", "-(1)", "--1", "-True", "1+2j", "-1-2j", "2j+1", "1+-2j", "...", "'a' 'b'", "'a' b'b'",
    "b'a'", "u'a'", "r'\\n'", "f'a'", "'''a\nb'''", "'a\\\nb'", "{1:2}", "{}", "set()", "set ( )",
    "{1,2}", "()", "[,]", "[1,]", "{'a':1,}", "0x1F", "0o17", "0b11", "0x_1f", "0b2", "0o8", "1e1_0",
    "\x0c1", "1\x0c", "\r\n1", "1\r\n", "\r1", "'\\N{DEGREE SIGN}'", "'\\x41'", "'\\101'", "'\\q'",
    "'\\u00e9'", "'\\U0001F600'", "'\\U00110000'", "'\\x4'", "'\\777'", "\"\"\"a\"\"\"", "'''a'''  'b'",
    "Rb'x'", "fr'x'", "ur'x'", "'a\\'b'", "r'a\\'b'", "'unterminated", "'a\nb'", "'''a\r\nb'''",
    "[1, [2, (3,)]]", "{(1,2): 3}", "{1: 'a', 1.0: 'b', True: 'c'}", "{1: 'a', '1': 'b'}",
    "{None: 1, False: 2, 1.5: 3, 1e16: 4, 2.0: 5}", "{float('nan'): 1}", "{'a': [1, 2], 'b': {'c': None}}",
    "[1e400]", "[-1e400]", "1e400", "[0.1, 1e-05, 1e16, 1e15, -0.0, 2.5]", "{'k': b'x'}", "[1j]",
    "{[1]: 2}", "{1, [2]}", "x", "[x]", "1 if 1 else 2", "10**2", "'a' + 'b'", "[1 2]", "{'a' 1}",
    "{'a': 1, **b}", "[*a]", "(", "[", "{", ")", "]", "}", "'a'\n'b'", "('a'\n'b')", "[1\n]", "1;",
    "\u00a01", "-  1", "+-1", "(-1)", "-(-1)", "[-1]", "{-1: -2.5}", "0123j", "0123.5", "1.__class__",
    "1..2", "[True, False, None]", "{'x': True}", "['a', \"b\", '''c''']", "[1, 2, 3,]", "(1, 2, 3)",
    "[\n  1,\n  2\n]", "{\n  'a': 1,  # comment\n  'b': 2\n}", "\"\\\"quoted\\\"\"", "'\\t\\n\\r\\a\\b\\f\\v\\0'",
    "[" * 199 + "]" * 199, "[" * 200 + "]" * 200, "[" * 201 + "]" * 201, "(" * 200 + "1" + ")" * 200,
    "(" * 201 + "1" + ")" * 201, "\\\n  1", "\\\n\n1", "1\n  ", "1\n  \n", "1\n\t", "1\n  #c", "1\n\n  ",
    "[1]\n ", "1\n\x0c", "\n \n1", "1\n \n ", "  ", "\n", "#c", "1\n\x0c ",
    "'é'", "'日本'", "'\\ud800'", "1 #", "[1, # c\n 2]", "1\n\n", "1\n2", "\n\n[1]\n\n", " \t[1]",
    "1" * 4300, "1" * 4301, "0" * 4301 + "1", "-" + "1" * 4300, "1_" * 4300 + "1", "0x" + "f" * 4000,
    "[" + "9" * 4301 + "]", "1" * 4300 + ".5", "1" * 400 + "e-100", "0b" + "1" * 14000, "1_" * 2200 + "1", "0" * 4300, "0" * 4301, "0_" * 2200 + "0",
    "\t\n1", "\n\t1", "\n\x0c1", "Ellipsis", "set([1])", "frozenset()", "{'a': {'b': {'c': [1, {'d': None}]}}}",
]

ALPHABET = [
    "0", "1", "9", "_", ".", "e", "E", "+", "-", "j", "x", "0x", "0b", "0o", "'", '"', "'''", "(", ")",
    "[", "]", "{", "}", ",", ":", " ", "\n", "\t", "#", "\\", "True", "None", "False", "inf", "nan",
    "١", "\u00a0", "a", "b'", "r'", "u'", "set()", "...", "\\n", "\\x4", "1e400", "é",
]


def py_int(s):
    try:
        return str(int(s))
    except (ValueError, TypeError):
        return None


def py_number(s):
    """vLLM's num/float branch: an integral float becomes an int."""
    try:
        f = float(s)
    except (ValueError, TypeError):
        return None
    if f != f or f in (float("inf"), float("-inf")):
        return "nonfinite"
    return str(int(f)) if f - int(f) == 0 else repr(f)


def _reject_constant(name):
    raise ValueError(name)


def py_literal(s):
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"ok": False, "why": "literal"}
    try:
        out = json.dumps(v, ensure_ascii=False)
        json.loads(out, parse_constant=_reject_constant)
    except (TypeError, ValueError):
        return {"ok": False, "why": "json"}
    return {"ok": True, "json": out}


def main():
    rng = random.Random(20261129)
    inputs = list(HAND)
    for _ in range(2500):
        inputs.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8))))
    seen, rows = set(), []
    for s in inputs:
        if s in seen:
            continue
        seen.add(s)
        rows.append({"in": s, "int": py_int(s), "number": py_number(s), "literal": py_literal(s)})
    json.dump({"python": sys.version.split()[0], "rows": rows}, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
