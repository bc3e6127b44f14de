"""A dataset row as `agentenv skyrl rows` writes it: `episode` {split, index,
task_id, tools} says what to play, `server` {url, token_var, attempts,
reset_timeout, tool_format} where and how. SkyRL hands these columns to its
env as `extras`, verl to its agent loop as keyword arguments, and TRL's
rollout function finds a prompt's row in the dataset it was given.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

ENV_ID = "agentenv"

_REWRITE = "write the rows again with `agentenv skyrl rows`"


class AgentEnvError(Exception):
    """Raised into the trainer: something no replay changes (a row that does
    not match its server, an episode that ends unscored). It stops the step."""


@dataclass(frozen=True)
class Row:
    split: str
    index: int
    task_id: str
    tools: Tuple[str, ...]
    url: str
    token_var: Optional[str]
    attempts: int
    reset_timeout: float
    tool_format: str

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any]) -> "Row":
        episode = _table(extras, "episode")
        server = _table(extras, "server")
        token_var = server.get("token_var")
        if token_var is not None and (not isinstance(token_var, str) or not token_var):
            raise AgentEnvError(f"the row's server.token_var is {token_var!r}, not a variable name; {_REWRITE}")
        row = cls(
            split=_text(episode, "episode", "split"),
            index=_int(episode, "episode", "index", 0),
            task_id=_text(episode, "episode", "task_id"),
            tools=_names(episode),
            url=_text(server, "server", "url"),
            token_var=token_var,
            attempts=_int(server, "server", "attempts", 1),
            reset_timeout=float(_int(server, "server", "reset_timeout", 1)),
            tool_format=_text(server, "server", "tool_format"),
        )
        ws_url(row.url)  # refuse a URL the env cannot open, before anything runs
        return row

    def token(self) -> Optional[str]:
        """The server's token, from the variable the row names (never the row)."""
        if self.token_var is None:
            return None
        value = os.environ.get(self.token_var, "")
        if not value:
            raise AgentEnvError(
                f"the rows name ${self.token_var} for the token of {self.url}, but it is not set where the env runs; "
                f"export it where the trainer plays its rollouts (`python -m agentenv_skyrl.train` hands it to SkyRL's Ray task itself)"
            )
        return value

    def where(self) -> str:
        return f"task {self.task_id} ({self.split}[{self.index}])"


def ws_url(url: str) -> str:
    """The session WebSocket of a server URL: http → ws, https → wss, + /ws."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None or not parts.hostname:
        raise AgentEnvError(f"the row's server.url {url!r} is not an http:// or https:// URL; {_REWRITE}")
    if parts.username or parts.password:
        raise AgentEnvError(f"the row's server.url carries credentials; the token belongs in the variable server.token_var names; {_REWRITE}")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/ws", "", ""))


def _table(extras: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = extras.get(name)
    if not isinstance(value, Mapping):
        raise AgentEnvError(
            f"the row has no {name!r} column (extras hold {sorted(extras)}): "
            f"agentenv plays rows written by `agentenv skyrl rows`; check the trainer's dataset files"
        )
    return value


def _text(table: Mapping[str, Any], name: str, key: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise AgentEnvError(f"the row's {name}.{key} is {value!r}, not a non-empty string; {_REWRITE}")
    return value


def _int(table: Mapping[str, Any], name: str, key: str, least: int) -> int:
    value = table.get(key)
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # ints from pyarrow, numpy or JSON
    except TypeError:
        raise AgentEnvError(f"the row's {name}.{key} is {value!r}, not an integer; {_REWRITE}") from None
    if number < least:
        raise AgentEnvError(f"the row's {name}.{key} is {number}, below {least}; {_REWRITE}")
    return number


def _names(episode: Mapping[str, Any]) -> Tuple[str, ...]:
    value = episode.get("tools")
    if value is None or isinstance(value, (str, bytes, Mapping)):
        raise AgentEnvError(f"the row's episode.tools is {value!r}, not a list of tool names; {_REWRITE}")
    names = tuple(value)
    if not all(isinstance(n, str) for n in names):
        raise AgentEnvError(f"the row's episode.tools holds {names!r}, not only names; {_REWRITE}")
    return names
