"""The prompt ids, with Qwen3's real tokenizer and template, are what
`agentenv skyrl rows` rendered and counted for the row, and what the
template renders from the task's own prompt with tools=; the tool turns
are appended as the template renders them after a reply."""

import os
import re

import pytest
from agentenv_server import gridsim_policy
from conftest import inputs, trainer
from qwen3 import Qwen3Tokenizer, oracle, skyrl_rows

KWARGS = {"enable_thinking": False}


@pytest.fixture(scope="module")
def qwen3():
    folder, why = oracle()
    if folder is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no Qwen3 tokenizer oracle under CI: {why}")
        pytest.skip(f"no Qwen3 tokenizer oracle: {why}")
    tok = Qwen3Tokenizer(folder)
    yield folder, tok
    tok.close()


def test_prompt_ids_are_what_skyrl_rows_rendered(gridsim, agentenv_bin, qwen3, tmp_path):
    folder, tok = qwen3
    rows, stdout = skyrl_rows(agentenv_bin, gridsim.url, tmp_path / "data", folder, KWARGS)
    longest = re.search(r"the longest prompt is (\d+) tokens with its tools \(task (\S+);", stdout)
    assert longest, stdout
    count, task_id = int(longest.group(1)), longest.group(2)
    picked = [r for r in rows["eval"] if r["episode"]["task_id"] in (task_id, "day/eval-001")]
    t, _ = trainer(rows["eval"], gridsim_policy("idle"), tokenizer=tok, chat_template_kwargs=KWARGS)
    out = t._generate_and_score_completions(inputs(picked))
    toolset = gridsim.get("/splits/eval/tasks?start=0&stop=1")["tasks"][0]["toolset"]
    tools = gridsim.get(f"/toolsets/{toolset}/tools")["tools"]
    assert out["rewards"] == [0.2, 0.2]
    for row, prompt_ids, ids, mask in zip(picked, out["prompt_ids"], out["completion_ids"], out["loss_mask"]):
        task = gridsim.get(f"/tasks/{row['episode']['task_id']}")
        assert prompt_ids == tok.apply_chat_template(task["prompt"], tools=tools, add_generation_prompt=True, **KWARGS)
        if row["episode"]["task_id"] == task_id:
            assert len(prompt_ids) == count  # as skyrl rows counted it
        # The whole rollout is the template's rendering of the conversation: prompt, reply, tool turn, reply.
        text = tok.decode(prompt_ids + ids)
        assert text.count("<tool_response>") == 1 and tok.decode([i for i, m in zip(ids, mask) if not m]).startswith("\n<|im_start|>user\n<tool_response>")
