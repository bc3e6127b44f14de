"""Plays one GridSim episode the way OpenEnv's GenericEnvClient does.

Written from the protocol notes (research/openenv-protocol.md, sections 3
and 6), not from OpenEnv's code: one JSON object per text frame made with
json.dumps, strict request/response, any "error" reply raised as
RuntimeError("Server error: <message> (code: <code>)"), the token as URL
userinfo (websockets sends it as Basic auth), permessage-deflate offered,
and close as {"type": "close"} followed by closing the socket.

usage: openenv_client.py BASE_URL   (e.g. http://openenv:TOKEN@127.0.0.1:8200)
Prints one JSON line per exchange for the Go test to check.
"""
import asyncio
import json
import sys

import websockets


def ws_url(base):
    base = base.rstrip("/")
    if base.startswith("http://"):
        base = "ws://" + base[len("http://"):]
    elif base.startswith("https://"):
        base = "wss://" + base[len("https://"):]
    return base + "/ws"


class Client:
    def __init__(self, ws):
        self.ws = ws

    async def send_and_receive(self, message):
        await self.ws.send(json.dumps(message))
        reply = json.loads(await asyncio.wait_for(self.ws.recv(), timeout=60))
        if reply.get("type") == "error":
            data = reply.get("data", {})
            raise RuntimeError(
                "Server error: %s (code: %s)" % (data.get("message"), data.get("code")))
        return reply

    async def reset(self, **kwargs):
        data = (await self.send_and_receive({"type": "reset", "data": kwargs}))["data"]
        return data.get("observation", {}), data.get("reward"), data.get("done", False)

    async def step(self, action):
        data = (await self.send_and_receive({"type": "step", "data": action}))["data"]
        return data.get("observation", {}), data.get("reward"), data.get("done", False)

    async def state(self):
        return (await self.send_and_receive({"type": "state"}))["data"]

    async def close(self):
        await self.ws.send(json.dumps({"type": "close"}))
        await self.ws.close()


def out(**kw):
    print(json.dumps(kw), flush=True)


async def main(base):
    schedule = [0] * 24
    reply = ('<tool_call>\n{"name": "submit_schedule", "arguments": {"schedule": %s}}\n</tool_call>'
             % json.dumps(schedule))
    async with websockets.connect(ws_url(base), open_timeout=10, max_size=100 * 1024 * 1024) as ws:
        c = Client(ws)
        try:
            await c.reset()
        except RuntimeError as e:
            out(step="reset-empty", error=str(e))
        obs, reward, done = await c.reset(split="eval", index=0, seed=1)
        out(step="reset", task_id=obs["task_id"], roles=[m["role"] for m in obs["messages"]],
            tools=[t["function"]["name"] for t in obs["tools"]], reward=reward, done=done)
        obs, reward, done = await c.step({"reply": reply})
        out(step="submit", roles=[m["role"] for m in obs["messages"]], reward=reward, done=done)
        st = await c.state()
        out(step="state", step_count=st["step_count"], episode_id=st["episode_id"])
        obs, reward, done = await c.step({"reply": "I am done.<|im_end|>"})
        out(step="final", reward=reward, done=done, metrics=obs.get("metrics"))
        await c.close()
        out(step="closed", code=ws.close_code)


asyncio.run(main(sys.argv[1]))
