"""An OpenEnv environment for BenchmarkOpenEnvStep (bench/openenv_test.go).

It does in OpenEnv what a GridSim step does in ``agentenv serve`` for
BenchmarkServerStep: the action is the model's reply (``{"reply": ...}``,
the same frame agentenv's client sends), holding one hermes
``<tool_call>`` that submits a schedule; the step reads the call, checks
the schedule (24 values in {-1, 0, 1}, the battery's charge kept between
empty and full), prices it, and answers with one tool message worded as
GridSim's ``submit_schedule`` answer. A reply without a tool call ends the
episode, as GridSim's final reply does: done, with the last valid
schedule's profit (in dollars, 0 without one) as the reward (for
BenchmarkOpenEnvEpisodes). The observation has agentenv's shape
(episode_id, task_id, messages, turn), so agentenv's Go client reads both
servers alike.

The app is OpenEnv's own: ``create_app`` (HTTPEnvServer's /ws, /health,
...) served by uvicorn, as the envs under OpenEnv's envs/*/server/app.py
do. One route is added beside OpenEnv's: /bench/echo, a bare WebSocket
echo on the same FastAPI/Starlette/uvicorn/websockets stack, the floor
any Python server on that stack pays.

Run by bench/openenv/setup.sh's PYTHONPATH:
    python3 bench/openenv/echo_env.py --port 8000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import uuid
from typing import Any, Dict, List, Optional

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import Field

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

# A GridSim-like day: 24 hourly prices in cents per MWh, a 10 MW battery of
# 4 hours, 85 % round trip, starting half full.
PRICES_CENTS = [
    4210, 3980, 3820, 3750, 3790, 4120, 5230, 6870, 7410, 6620, 5810, 5240,
    4930, 4710, 4880, 5360, 6290, 8150, 9620, 9130, 7740, 6210, 5170, 4560,
]
POWER_MW = 10
CAPACITY_HOURS = 4
EFFICIENCY_PCT = 85
START_HOURS = 2

SYSTEM = (
    "You run a grid battery for one day. Call submit_schedule with 24 values, "
    "one per hour: 1 charges, -1 sells, 0 idles."
)
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ReplyAction(Action):
    """The model's reply, as agentenv's step frame carries it."""

    reply: str = Field(..., description="The model's reply, with its tool calls")


class ChatObservation(Observation):
    """An observation shaped like agentenv's."""

    episode_id: str = ""
    task_id: str = ""
    messages: List[Dict[str, str]] = Field(default_factory=list)
    turn: int = 0


def money(cents: float) -> str:
    return f"${cents / 100:,.2f}"


class GridStepEnvironment(Environment):
    """One GridSim-like day, with submit_schedule as its tool."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own instance

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._task_id = ""
        self._submitted = 0
        self._profit_cents = 0.0

    def reset(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        task_id: str = "",
        **kwargs: Any,
    ) -> ChatObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._task_id = task_id
        self._submitted = 0
        self._profit_cents = 0.0
        return ChatObservation(
            episode_id=self._state.episode_id,
            task_id=task_id,
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Prices: " + json.dumps(PRICES_CENTS)},
            ],
        )

    def step(self, action: ReplyAction, timeout_s: Optional[float] = None, **kwargs: Any) -> ChatObservation:
        self._state.step_count += 1
        if TOOL_CALL.search(action.reply) is None:
            # The final reply: the episode is over, scored as GridSim grades it.
            return ChatObservation(
                episode_id=self._state.episode_id,
                task_id=self._task_id,
                turn=self._state.step_count,
                done=True,
                reward=self._profit_cents / 100,
            )
        messages = [{"role": "tool", "content": self._submit(action.reply)}]
        return ChatObservation(
            episode_id=self._state.episode_id,
            task_id=self._task_id,
            messages=messages,
            turn=self._state.step_count,
        )

    def _submit(self, reply: str) -> str:
        m = TOOL_CALL.search(reply)
        if m is None:
            return "No tool call found in the reply."
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError as e:
            return f"The tool call is not JSON: {e}"
        if call.get("name") != "submit_schedule":
            return f"Unknown tool {call.get('name')!r}."
        args = call.get("arguments")
        if isinstance(args, str):
            args = json.loads(args)
        schedule = args.get("schedule") if isinstance(args, dict) else None
        if not isinstance(schedule, list) or len(schedule) != len(PRICES_CENTS):
            return f"schedule must be a list of {len(PRICES_CENTS)} integers."
        bad = [h for h, a in enumerate(schedule) if a not in (-1, 0, 1) or isinstance(a, bool)]
        if bad:
            return f"schedule rejected: hours {bad} are not -1, 0 or 1."
        charge = START_HOURS * 100  # hundredths of an hour of full power
        bought = sold = 0
        cost = revenue = 0.0
        for h, a in enumerate(schedule):
            if a == 1:
                charge += 100
                bought += 1
                cost += PRICES_CENTS[h] * POWER_MW
            elif a == -1:
                charge -= 100
                sold += 1
                revenue += PRICES_CENTS[h] * POWER_MW * EFFICIENCY_PCT / 100
            if not 0 <= charge <= CAPACITY_HOURS * 100:
                return f"schedule rejected: the battery leaves its range at hour {h}."
        self._submitted += 1
        self._profit_cents = revenue - cost
        return (
            f"Schedule accepted (valid submission {self._submitted}). It buys {bought * POWER_MW} MWh "
            f"for {money(cost)} and sells {sold * POWER_MW * EFFICIENCY_PCT / 100:g} MWh for "
            f"{money(revenue)}: profit {money(revenue - cost)}. The last valid schedule you submit is "
            "the one graded; submit again to replace it."
        )

    @property
    def state(self) -> State:
        return self._state


# As envs/echo_env/server/app.py makes its app: sessions up to MAX_CONCURRENT_ENVS.
app = create_app(
    GridStepEnvironment,
    ReplyAction,
    ChatObservation,
    env_name="agentenv_bench_gridstep",
    max_concurrent_envs=int(os.getenv("MAX_CONCURRENT_ENVS", "8")),
)


@app.websocket("/bench/echo")
async def echo(ws: WebSocket) -> None:
    """The Python stack's floor: upgrade, then echo every text frame."""
    await ws.accept()
    try:
        while True:
            await ws.send_text(await ws.receive_text())
    except WebSocketDisconnect:
        pass


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="warning")
    a = p.parse_args()
    # ws="websockets": uvicorn's default ("auto") picks it when installed;
    # naming it makes a missing websockets an error, not a fall-back to wsproto.
    uvicorn.run(app, host=a.host, port=a.port, ws="websockets", log_level=a.log_level)


if __name__ == "__main__":
    main()
