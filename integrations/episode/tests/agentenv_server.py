"""What every trainer integration's test suite shares: a real `agentenv serve`
on a loopback port (stopped with SIGTERM and started again as a restart
would), the rows it serves, a character-level tokenizer with a ChatML-like
template, and GridSim's policies (hermes tool calls).

Each suite's conftest.py puts this folder on sys.path and imports from here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
GRIDSIM = REPO / "examples" / "gridsim"
INBOX = REPO / "examples" / "inbox"
TOKEN_VAR = "AGENTENV_TEST_TOKEN"
TOKEN = "skyrl-test-token-5b1e0c9d"
END = "<|im_end|>"


def build_agentenv(out: Path) -> str:
    """AGENTENV_BIN, or an agentenv built into out."""
    given = os.environ.get("AGENTENV_BIN")
    if given:
        return given
    subprocess.run(["go", "build", "-o", str(out), "./cmd/agentenv"], cwd=REPO, check=True)
    return str(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`agentenv serve BUNDLE` on a loopback port; stop() is SIGTERM (the
    server drains: SHUTTING_DOWN to every session), start() again serves the
    same bundle on the same address, as a restart would."""

    def __init__(self, binary: str, bundle: Path, args=(), env=None):
        self.binary, self.bundle, self.args = binary, bundle, list(args)
        self.env = dict(os.environ, **(env or {}))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state = tempfile.mkdtemp(prefix="agentenv-skyrl-test-")
        self.log_path = Path(self.state) / "serve.log"
        self.proc = None

    def launch(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            # Envs as processes even where a Docker engine answers: these tests are
            # about SkyRL, not Docker (docs/sandboxes.md has Docker's), and a test
            # uses the env binary the process sandbox builds in the bundle.
            [self.binary, "serve", str(self.bundle), "--addr", f"127.0.0.1:{self.port}",
             "--sandbox-config", f"state_dir={self.state}", "--sandbox-config", "mode=process", *self.args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
        )
        log.close()

    def start(self, timeout=120.0):
        self.launch()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                log = self.log()
                self.close()
                raise RuntimeError(f"agentenv serve exited with {self.proc.returncode}:\n{log}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)  # a poll interval
        log = self.log()
        self.close()
        raise RuntimeError(f"agentenv serve not healthy after {timeout} s:\n{log}")

    def stop(self, timeout=60.0):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        """Stops the server and removes its state folder (its log with it)."""
        self.stop()
        shutil.rmtree(self.state, ignore_errors=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str):
        req = urllib.request.Request(self.url + path)
        token = self.env.get(TOKEN_VAR) if "--token-var" in self.args else None
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r)

    def rows(self, split: str, count: int, tool_format="hermes", attempts=3, reset_timeout=120, token_var=None):
        """Rows as `agentenv skyrl rows` writes them (docs/training-skyrl.md):
        the prompt, env_class, and `episode`/`server` from the catalogue."""
        page = self.get(f"/splits/{split}/tasks?start=0&stop={count}")
        tools = {}
        rows = []
        for entry in page["tasks"]:
            if entry["toolset"] not in tools:
                listed = self.get(f"/toolsets/{entry['toolset']}/tools")["tools"]
                tools[entry["toolset"]] = [t["function"]["name"] for t in listed]
            task = self.get(f"/tasks/{entry['task_id']}")
            rows.append({
                "prompt": [{"role": m["role"], "content": m["content"]} for m in task["prompt"]],
                "env_class": "agentenv",
                "episode": {"split": split, "index": entry["index"], "task_id": entry["task_id"], "tools": tools[entry["toolset"]]},
                "server": {"url": self.url, "token_var": token_var, "attempts": attempts,
                           "reset_timeout": reset_timeout, "tool_format": tool_format},
                "data_source": self.bundle.name,
            })
        return rows


class CharTokenizer:
    """Character-level, with a ChatML-like template."""

    eos_token_id = 0

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True, **kwargs):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}{END}\n" for m in messages)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return [ord(c) for c in text]

    @staticmethod
    def decode(ids):
        return "".join(map(chr, ids))


def messages_of(text: str):
    """The (role, content) messages of a decoded context."""
    out = []
    for part in text.split("<|im_start|>")[1:]:
        role, _, content = part.partition("\n")
        out.append((role, content.split(END)[0]))
    return out


# -- GridSim replies (hermes) ----------------------------------------------


def call(name, arguments):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>{END}'


def optimal_schedule(day) -> list:
    """The day's most profitable schedule, by docs/gridsim.md's dynamic
    program over the charge, in ten-thousandths of a dollar."""
    power, eff = day["power_mw"], day["efficiency_pct"]
    k, start = day["capacity_mwh"] // power, day["start_mwh"] // power
    cents = [round(p * 100) for p in day["prices"]]
    money = {1: lambda c: -power * c * 100, -1: lambda c: power * c * eff, 0: lambda c: 0}
    hours = len(cents)
    best = [[0] * (k + 1) for _ in range(hours + 1)]
    pick = [[0] * (k + 1) for _ in range(hours)]
    for h in range(hours - 1, -1, -1):
        for c in range(k + 1):
            options = [(money[a](cents[h]) + best[h + 1][c + a], a) for a in (0, 1, -1) if 0 <= c + a <= k]
            best[h][c], pick[h][c] = max(options)
    schedule, c = [], start
    for h in range(hours):
        schedule.append(pick[h][c])
        c += pick[h][c]
    return schedule


def gridsim_policy(kind):
    """`optimal`: get_prices, the optimal schedule, then a reply that ends
    the turn; `idle`: all zeros, then the reply."""

    def policy(messages, _tid):
        replies = sum(1 for role, _ in messages if role == "assistant")
        if kind == "idle":
            return call("submit_schedule", {"schedule": [0] * 24}) if replies == 0 else "Done." + END
        if replies == 0:
            return call("get_prices", {})
        if replies == 1:
            day = json.loads(messages[-1][1])
            return call("submit_schedule", {"schedule": optimal_schedule(day)})
        return "Submitted." + END

    return policy

