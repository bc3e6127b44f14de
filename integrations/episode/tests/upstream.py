"""The signatures of the trainer classes and functions an integration relies
on, read from the trainer's source with `ast` (nothing is imported), and the
lines of its source whose behaviour the integration relies on.

Each integration's tests/standin/upstream.json records them at a commit of
the trainer; its test_standin.py checks that the stand-ins have exactly the
recorded signatures, and, given a checkout of the trainer (AGENTENV_VERL_SRC,
AGENTENV_TRL_SRC), that the checkout still has them and the recorded lines.
Record anew from a checkout with:

    python3 integrations/episode/tests/upstream.py record SRC integrations/verl/tests/standin/upstream.json
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any, Dict, List


def signatures(root: Path, spec: Dict[str, List[str]]) -> Dict[str, Any]:
    """{"file:Name.sub": signature} for each name of each file of spec."""
    out: Dict[str, Any] = {}
    for rel, names in spec.items():
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for name in names:
            out[f"{rel}:{name}"] = _describe(_find(tree, name.split("."), f"{rel}:{name}"))
    return out


def missing_facts(root: Path, facts: Dict[str, List[str]]) -> List[str]:
    """The recorded source lines a checkout no longer has."""
    gone = []
    for rel, lines in facts.items():
        text = (root / rel).read_text(encoding="utf-8")
        gone += [f"{rel}: {line}" for line in lines if line not in text]
    return gone


def _find(node: ast.AST, path: List[str], what: str) -> ast.AST:
    for child in ast.iter_child_nodes(node):
        name = getattr(child, "name", None)
        if name is None and isinstance(child, ast.Assign) and len(child.targets) == 1:
            name = getattr(child.targets[0], "id", None)
        if name == path[0]:
            return child if len(path) == 1 else _find(child, path[1:], what)
    raise LookupError(f"{what} is not in the source")


def _describe(node: ast.AST) -> Any:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        params = []
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + a.defaults
        for arg, default in zip(positional, defaults):
            params.append([arg.arg, "positional", _src(default)])
        if a.vararg:
            params.append([a.vararg.arg, "*args", None])
        for arg, default in zip(a.kwonlyargs, a.kw_defaults):
            params.append([arg.arg, "keyword-only", _src(default)])
        if a.kwarg:
            params.append([a.kwarg.arg, "**kwargs", None])
        return {"async": isinstance(node, ast.AsyncFunctionDef), "params": params}
    if isinstance(node, ast.ClassDef):
        return {"fields": [[s.target.id, _src(s.value)] for s in node.body if isinstance(s, ast.AnnAssign)]}
    if isinstance(node, ast.Assign):
        return {"value": _src(node.value)}
    raise TypeError(f"cannot describe {type(node).__name__}")


def _src(node) -> Any:
    return None if node is None else ast.unparse(node)


def main(argv: List[str]) -> int:
    if len(argv) != 4 or argv[1] != "record":
        print(__doc__)
        return 2
    src, record = Path(argv[2]), Path(argv[3])
    data = json.loads(record.read_text())
    data["signatures"] = signatures(src, data["spec"])
    gone = missing_facts(src, data["facts"])
    if gone:
        print("these recorded lines are gone:\n  " + "\n  ".join(gone))
        return 1
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.rename(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
