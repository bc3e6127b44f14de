"""One training run served by two `agentenv serve` instances of one bundle
behind a real haproxy (deploy/haproxy/agentenv.cfg, the file
docs/serving.md shows): the rows name the balancer's URL, the rollouts
spread over both servers, neither runs more episodes than its
--max-concurrent-envs, and when one server is SIGTERMed mid-step its
rollouts are replayed on the other by AgentEnvGenerator (`attempts`), none
lost."""

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import END, GRIDSIM, REPO, Server, batch, call, free_port, make_generator

CAPACITY = 3  # --max-concurrent-envs of each server
GROUPS, SAMPLES = 3, 4  # 12 rollouts: twice the two servers' slots


def haproxy_binary():
    found = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy")
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("no haproxy: .ci/run installs it (apt-get install haproxy)")
        pytest.skip("no haproxy (apt-get install haproxy); CI runs this")
    return found


class Balancer:
    """haproxy on deploy/haproxy/agentenv.cfg in front of servers."""

    def __init__(self, servers):
        self.binary = haproxy_binary()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.bundle = servers[0].bundle
        self.args, self.env = [], {}
        env = dict(os.environ, AGENTENV_LB_BIND=f"127.0.0.1:{self.port}")
        for i, s in enumerate(servers, 1):
            env[f"AGENTENV_SERVER_{i}"] = f"127.0.0.1:{s.port}"
        self.log_dir = tempfile.mkdtemp(prefix="agentenv-haproxy-")
        log = open(Path(self.log_dir) / "haproxy.log", "wb")
        self.proc = subprocess.Popen(
            [self.binary, "-db", "-f", str(REPO / "deploy" / "haproxy" / "agentenv.cfg")],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()

    def wait_healthy(self, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"haproxy never answered /health:\n{self.log()}")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return json.load(r)

    def log(self):
        p = Path(self.log_dir) / "haproxy.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.log_dir, ignore_errors=True)


def metric(server, series):
    """One sample of a server's /metrics, or None."""
    try:
        with urllib.request.urlopen(server.url + "/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(series + " "):
                    return float(line.split()[-1])
    except OSError:
        return None
    return None


def test_two_servers_behind_haproxy_one_sigtermed_mid_step(agentenv_bin):
    haproxy_binary()  # skip (or fail under CI) before starting anything
    args = ["--max-concurrent-envs", str(CAPACITY), "--sandbox-config", "mode=process"]
    a, b = Server(agentenv_bin, GRIDSIM, args), Server(agentenv_bin, GRIDSIM, args)
    lb = None
    most = {"a": 0, "b": 0}
    watching = threading.Event()
    try:
        a.start()
        b.start()
        lb = Balancer([a, b])
        lb.wait_healthy()
        # Rows written against the balancer's URL, from the catalogue it serves.
        rows = Server.rows(lb, "train", GROUPS, attempts=3, reset_timeout=300)
        assert all(r["server"]["url"] == lb.url for r in rows)

        def watch():
            # Each server's live episodes, sampled while the step runs.
            while not watching.is_set():
                for name, s in (("a", a), ("b", b)):
                    v = metric(s, "agentenv_episodes_live")
                    if v is not None:
                        most[name] = max(most[name], v)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()

        async def scenario():
            gate, full = asyncio.Event(), asyncio.Event()
            waiting = 0

            async def policy(messages, tid):
                nonlocal waiting
                replies = sum(1 for role, _ in messages if role == "assistant")
                if replies == 0:
                    return call("get_prices", {})
                if replies == 1:
                    if not gate.is_set():
                        # Both servers' slots are taken by episodes in play.
                        waiting += 1
                        if waiting == 2 * CAPACITY:
                            full.set()
                        await gate.wait()
                    return call("submit_schedule", {"schedule": [0] * 24})
                return "Done." + END

            async def stop_a():
                await full.wait()
                spread = (metric(a, "agentenv_episodes_live"), metric(b, "agentenv_episodes_live"))
                await asyncio.get_running_loop().run_in_executor(None, a.stop)  # SIGTERM mid-step
                gate.set()
                return spread

            generator = make_generator(policy, workers=GROUPS * SAMPLES)
            out, spread = await asyncio.gather(generator.generate(batch(rows, n_samples=SAMPLES)), stop_a())
            return out, spread

        out, spread = asyncio.run(scenario())
        watching.set()
        watcher.join()
        done_b = metric(b, 'agentenv_episodes_total{outcome="done"}')
    finally:
        watching.set()
        if lb is not None:
            lb.close()
        a.close()
        b.close()

    rollouts = GROUPS * SAMPLES
    # The rollouts spread over both servers: each held its full share when A was stopped.
    assert spread == (float(CAPACITY), float(CAPACITY)), spread
    # Neither ran more episodes than its --max-concurrent-envs.
    assert most["a"] <= CAPACITY and most["b"] <= CAPACITY, most
    # None lost: every rollout scored (the idle schedule's 0.2), none failed.
    m = out["rollout_metrics"]
    assert [sum(r) for r in out["rewards"]] == [0.2] * rollouts
    assert m["environment/avg_failed"] == 0.0
    # A's rollouts (in play or queued there) were played again, on B.
    attempts = [e["attempts"] for e in out["env_metrics"]]
    assert sum(1 for n in attempts if n > 1) >= CAPACITY, attempts
    # A was gone before any of its episodes could finish: every episode was done on B.
    assert done_b == rollouts, done_b
    assert "generate/num_masked_instances" not in m
    print(f"spread at SIGTERM {spread}, most live {most}, attempts {attempts}, B done {done_b}")
