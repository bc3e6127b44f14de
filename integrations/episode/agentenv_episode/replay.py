"""The replay rule every trainer's integration follows.

A rollout the env failed (its attempt reports `failed`: a deploy, a call past
its deadline, a server that went away) is played again from the start on a
new episode, a fresh sample of the same policy: up to the row's
`server.attempts`, none starting once the row's `server.reset_timeout` has
passed since the rollout began. What a rollout failed on every attempt
becomes is each trainer's business (SkyRL leaves its group out, verl and TRL
mask it); docs/training-*.md say which.
"""

from __future__ import annotations

import logging
import time

from .rows import Row

log = logging.getLogger("agentenv_episode")


class Replays:
    """The attempts of one rollout:

        replays = Replays(row)
        while True:
            attempt = replays.next()
            ...play it, on an episode with deadline=replays.deadline...
            if not replays.again(failed):
                break
    """

    def __init__(self, row: Row):
        self.row = row
        self.began = time.monotonic()
        # Opening a session waits out a busy or restarting server until here.
        self.deadline = self.began + row.reset_timeout
        self.attempt = 0

    def next(self) -> int:
        """Starts the next attempt; returns its number, from 1."""
        self.attempt += 1
        return self.attempt

    def again(self, failed: bool) -> bool:
        """After an attempt: whether the rollout is played again."""
        if not failed or self.attempt >= self.row.attempts or time.monotonic() >= self.deadline:
            return False
        log.info("agentenv: playing %s again (attempt %d of %d)", self.row.where(), self.attempt + 1, self.row.attempts)
        return True

    def elapsed(self) -> float:
        """Seconds since the rollout began, every attempt's included."""
        return time.monotonic() - self.began
