"""One OpenEnv WebSocket session on an `agentenv serve` server (docs/protocol.md).

Trainers call from anywhere: SkyRL from its env threads (or inline on its
event loop when `max_env_workers` is 0), verl from coroutines on its agent
loop worker's event loop, TRL from its training thread. So the sessions run
on none of them: every socket lives on one private event loop in a daemon
thread. Each call is a coroutine on that loop, which a thread waits on
(`start`, `step`, `close`) or another event loop awaits (`astart`, `astep`,
`aclose`) without blocking. The websockets library answers the server's
pings there between steps, however long the model takes to reply.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import random
import threading
import time
from typing import Any, Dict, Optional

from .rows import AgentEnvError, ws_url

try:  # websockets >= 13: the new asyncio client
    from websockets.asyncio.client import connect as _connect

    _HEADERS = "additional_headers"
except ImportError:  # websockets 10.4 to 12: the legacy client, same behaviour
    from websockets.client import connect as _connect  # type: ignore[no-redef]

    _HEADERS = "extra_headers"
from websockets.exceptions import ConnectionClosed, InvalidHandshake

# The largest frame the server sends: an observation holds at most 48 MiB of
# tool results (--max-reply-result-bytes, default 16 MiB) plus the prompt
# and errors, so it stays under this (Go: episode.ClientFrameLimit; a test
# keeps the two equal). A frame past it would end the session with close
# code 1006 on every replay alike.
_MAX_FRAME = 64 << 20
# Pause between tries to reach a server that is down or draining.
_BACKOFF_FIRST, _BACKOFF_MAX = 0.25, 2.0



class _NoAuthorization(logging.Filter):
    """Drops any record that would show the Authorization header."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return "authorization" not in record.getMessage().lower()
        except Exception:
            return False


# websockets logs every header of the upgrade at DEBUG, the token's included:
# its sessions log through this logger, which never goes below INFO and drops
# a line naming the header whatever the level.
_WS_LOG = logging.getLogger("agentenv_episode.websockets")
_WS_LOG.setLevel(logging.INFO)
_WS_LOG.addFilter(_NoAuthorization())


class EpisodeFailed(Exception):
    """The env failed this attempt (a deploy, a call past its deadline, a
    server that went away): reported as `failed`, so the generator replays."""


class ServerError(Exception):
    """An `error` reply: code and message as the server sent them."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# Codes after which the same reset may be sent again once the server has
# room or is back: nothing has been played yet.
_RETRY_RESET = {"CAPACITY_REACHED", "SHUTTING_DOWN"}
# Codes that say the rows do not match the server: no replay changes them.
_ROW_MISMATCH = {"NOT_FOUND", "VALIDATION_ERROR"}


class _Loop:
    """The process's private event loop for sessions, started on first use
    (never in an env's __init__) and again after a fork."""

    _lock = threading.Lock()
    _loop: Optional[asyncio.AbstractEventLoop] = None
    _thread: Optional[threading.Thread] = None
    _pid = 0

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._pid != os.getpid() or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="agentenv-sessions", daemon=True)
                thread.start()
                cls._loop, cls._thread, cls._pid = loop, thread, os.getpid()
            return cls._loop

    @classmethod
    def run(cls, coro, timeout: float, what: str):
        future = asyncio.run_coroutine_threadsafe(coro, cls.get())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise EpisodeFailed(f"{what} got no answer within {timeout:.0f} s") from None

    @classmethod
    async def wait(cls, coro, timeout: float, what: str):
        """Awaits coro, run on the sessions' loop, from another event loop."""
        future = asyncio.run_coroutine_threadsafe(coro, cls.get())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except asyncio.TimeoutError:
            future.cancel()
            raise EpisodeFailed(f"{what} got no answer within {timeout:.0f} s") from None


async def _pause(seconds: float) -> None:
    """The wait between tries to start an episode (a test watches it)."""
    await asyncio.sleep(seconds)


class Session:
    """A session's socket. Not thread-safe: one caller at a time, as every
    trainer plays a rollout's turns one after another."""

    # Slack past a call's own deadlines for the thread or loop waiting on it.
    _SLACK = 45.0

    def __init__(self, url: str, token: Optional[str], call_timeout: float):
        self.url = url
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.call_timeout = call_timeout
        self._ws = None

    # -- blocking API, for threads ----------------------------------------

    def start(self, reset: Dict[str, Any], deadline: float) -> Dict[str, Any]:
        """Opens the session and resets, waiting out a server at capacity,
        restarting or unreachable until `deadline` (time.monotonic()).
        Returns the reset's observation `data`."""
        return _Loop.run(self._start(reset, deadline), self._start_bound(deadline), "reset")

    def step(self, reply: str) -> Dict[str, Any]:
        return _Loop.run(self._step(reply), self.call_timeout + self._SLACK, "step")

    def close(self) -> None:
        """Ends the session (the server tears down a live episode); quiet and bounded."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        if threading.current_thread() is _Loop._thread:
            # A garbage-collected env's finalizer can run on the loop's own
            # thread: schedule the close rather than wait on ourselves.
            _Loop._loop.create_task(_close(ws))
            return
        try:
            _Loop.run(_close(ws), 10.0, "closing the session")
        except Exception:  # closing is best effort: the server reaps on disconnect
            pass

    # -- the same, awaited from another event loop ------------------------

    async def astart(self, reset: Dict[str, Any], deadline: float) -> Dict[str, Any]:
        return await _Loop.wait(self._start(reset, deadline), self._start_bound(deadline), "reset")

    async def astep(self, reply: str) -> Dict[str, Any]:
        return await _Loop.wait(self._step(reply), self.call_timeout + self._SLACK, "step")

    async def aclose(self) -> None:
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            await _Loop.wait(_close(ws), 10.0, "closing the session")
        except Exception:  # best effort, as close()
            pass

    # -- on the sessions' loop --------------------------------------------

    def _start_bound(self, deadline: float) -> float:
        return max(0.0, deadline - time.monotonic()) + self.call_timeout + self._SLACK

    async def _start(self, reset: Dict[str, Any], deadline: float) -> Dict[str, Any]:
        delay = _BACKOFF_FIRST
        last = "the server was not reached"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EpisodeFailed(f"no episode started before the rollout's reset_timeout: {last}")
            try:
                if self._ws is None:
                    try:
                        await asyncio.wait_for(self._open(min(left, 30.0)), min(left, 30.0) + 5.0)
                    except asyncio.TimeoutError:
                        raise _Unreachable("opening the session got no answer") from None
                data = dict(reset, wait_s=max(0.0, round(left, 3)))
                return await self._call({"type": "reset", "data": data}, left + self.call_timeout, "reset")
            except ServerError as e:
                if e.code in _ROW_MISMATCH:
                    raise AgentEnvError(f"the server refused the reset ({e}): the rows do not match it; write them again") from None
                if e.code not in _RETRY_RESET:
                    raise EpisodeFailed(str(e)) from None
                last = str(e)
                if e.code == "SHUTTING_DOWN":
                    await self._drop()
            except _Unreachable as e:
                last = str(e)
                await self._drop()
            await _pause(min(delay, max(0.0, deadline - time.monotonic())) * random.uniform(0.8, 1.0))
            delay = min(delay * 2, _BACKOFF_MAX)

    async def _step(self, reply: str) -> Dict[str, Any]:
        try:
            return await self._call({"type": "step", "data": {"reply": reply}}, self.call_timeout, "step")
        except _Unreachable as e:
            raise EpisodeFailed(str(e)) from None

    async def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await asyncio.wait_for(_close(ws), 10.0)
            except Exception:  # best effort: the server reaps on disconnect
                pass

    async def _call(self, message: Dict[str, Any], timeout: float, what: str) -> Dict[str, Any]:
        if self._ws is None:
            raise _Unreachable("the session is closed")
        try:
            reply = await asyncio.wait_for(self._exchange(json.dumps(message)), timeout)
        except asyncio.TimeoutError:
            raise EpisodeFailed(f"{what} got no answer within {timeout:.0f} s") from None
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            raise ServerError(str(data.get("code", "")), str(data.get("message", "")))
        if reply.get("type") != "observation" or not isinstance(reply.get("data"), dict):
            raise EpisodeFailed(f"{what}: the server answered {str(reply)[:200]!r}, not an observation")
        return reply["data"]

    async def _open(self, timeout: float) -> None:
        try:
            self._ws = await _connect(
                ws_url(self.url),
                open_timeout=timeout,
                close_timeout=5,
                max_size=_MAX_FRAME,
                ping_interval=20,
                ping_timeout=60,
                logger=_WS_LOG,
                **{_HEADERS: self._headers},
            )
        except InvalidHandshake as e:
            status = _status(e)
            if status == 401:
                raise AgentEnvError(
                    f"{self.url} refused the token (HTTP 401): "
                    + ("the variable the rows name holds another token than the server's" if self._headers else "the server wants a token; write the rows with --token-var")
                ) from None
            if status is not None and 400 <= status < 500 and status not in (408, 429):
                raise AgentEnvError(f"{self.url} refused the session with HTTP {status}: is it an agentenv server?") from None
            if status is None:
                raise _Unreachable(f"opening the session: {e}") from None
            detail = _detail(e)  # a 503 PREPARING says what the server still builds
            raise _Unreachable(f"opening the session: {type(e).__name__}: HTTP {status}" + (f": {detail}" if detail else "")) from None
        except (OSError, asyncio.TimeoutError) as e:
            raise _Unreachable(f"opening the session: {type(e).__name__}: {e}") from None

    async def _exchange(self, text: str) -> Dict[str, Any]:
        try:
            await self._ws.send(text)
            raw = await self._ws.recv()
        except ConnectionClosed as e:
            raise _Unreachable(f"the server closed the session ({_closed(e)})") from None
        except OSError as e:
            raise _Unreachable(f"the connection failed: {e}") from None
        try:
            reply = json.loads(raw)
        except (TypeError, ValueError):
            raise EpisodeFailed(f"the server sent a frame that is not JSON: {str(raw)[:200]!r}") from None
        if not isinstance(reply, dict):
            raise EpisodeFailed(f"the server sent {str(raw)[:200]!r}, not a JSON object")
        return reply


class _Unreachable(Exception):
    """The server cannot be reached or went away."""


async def _close(ws) -> None:
    try:
        await ws.send('{"type": "close"}')
    except Exception:
        pass
    await ws.close()


def _status(e: Exception) -> Optional[int]:
    # websockets' legacy client has e.status_code, the new one e.response.
    status = getattr(e, "status_code", None)
    if status is None:
        status = getattr(getattr(e, "response", None), "status_code", None)
    return status


def _detail(e: Exception) -> str:
    """The `detail` of an agentenv error body on a refused upgrade (the new
    websockets client keeps the body; the legacy one does not)."""
    body = getattr(getattr(e, "response", None), "body", None)
    if not body:
        return ""
    try:
        detail = json.loads(body).get("detail", "")
    except (TypeError, ValueError, AttributeError):
        return ""
    return str(detail)[:300]


def _closed(e: ConnectionClosed) -> str:
    rcvd = getattr(e, "rcvd", None)
    if rcvd is not None:
        return f"code {rcvd.code}" + (f", {rcvd.reason}" if rcvd.reason else "")
    code = getattr(e, "code", None)  # websockets < 10's attribute, kept for safety
    return f"code {code}" if code else "no close frame"
