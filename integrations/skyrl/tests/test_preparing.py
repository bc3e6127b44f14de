"""A rollout that starts while the server still builds its env: the server
refuses the session (503 PREPARING) and the env waits it out within the
row's reset_timeout, then plays as usual."""

import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import GRIDSIM, Server, batch, generate, gridsim_policy, make_generator

from agentenv_episode import session


def slow_build_bundle(tmp_path: Path, binary: Path):
    """GridSim with an env whose build waits on a FIFO the test writes to."""
    bundle = tmp_path / "slowbuild"
    shutil.copytree(GRIDSIM, bundle, ignore=shutil.ignore_patterns("bin"))
    release = tmp_path / "release"
    os.mkfifo(release)
    (bundle / "envs" / "gridsim" / "env.toml").write_text(
        f'build = ["sh", "-c", "cat {release} >/dev/null"]\ncommand = ["{binary}"]\nport = 18765\n'
    )
    return bundle, release


def health(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def test_a_rollout_waits_out_a_server_that_builds_its_env(agentenv_bin, tmp_path, monkeypatch):
    ready = Server(agentenv_bin, GRIDSIM).start()  # builds GridSim's env binary, and gives the rows
    try:
        rows = ready.rows("eval", 1)
    finally:
        ready.close()
    binary = Path(GRIDSIM, "envs", "gridsim", "bin", "gridsim-env")
    bundle, release = slow_build_bundle(tmp_path, binary)
    slow = Server(agentenv_bin, bundle)
    slow.launch()
    try:
        for r in rows:
            r["server"]["url"] = slow.url
        deadline = time.monotonic() + 60
        # Listening, and preparing: the env first waits its turn to build
        # (an instant a busy machine can show), then builds.
        status, body = health(slow.url)
        while status != 503 or "env gridsim is building" not in body:
            assert time.monotonic() < deadline and slow.proc.poll() is None, (status, body, slow.log())
            time.sleep(0.05)
            status, body = health(slow.url)
        assert '"status":"preparing"' in body, body

        # The session's first refusal (it then pauses before trying again)
        # is the event that lets the build finish.
        refused = threading.Event()
        real_pause = session._pause

        async def pause(seconds):
            refused.set()
            await real_pause(seconds)

        monkeypatch.setattr(session, "_pause", pause)
        result = {}
        player = threading.Thread(target=lambda: result.update(out=generate(make_generator(gridsim_policy("idle")), batch(rows))))
        player.start()
        assert refused.wait(60), "the rollout was never refused"
        assert health(slow.url)[0] == 503  # still building: the refusal was PREPARING
        with open(release, "w"):
            pass  # the build goes on
        player.join(120)
        assert not player.is_alive()
        out = result["out"]
        assert [sum(r) for r in out["rewards"]] == [0.2]
        assert out["env_metrics"][0]["failed"] == 0 and out["env_metrics"][0]["attempts"] == 1
    finally:
        slow.close()
