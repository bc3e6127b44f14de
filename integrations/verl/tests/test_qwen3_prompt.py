"""The first prompt's tokens, with Qwen3's real tokenizer and template, are
what `agentenv skyrl rows` rendered and counted for the row, and what the
template renders from the task's own prompt with tools=."""

import os
import re

import pytest
from agentenv_server import gridsim_policy
from conftest import run, verl_rows, worker
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


def test_prompt_tokens_are_what_skyrl_rows_rendered(gridsim, agentenv_bin, qwen3, tmp_path):
    folder, tok = qwen3
    rows, stdout = skyrl_rows(agentenv_bin, gridsim.url, tmp_path / "data", folder, KWARGS)
    longest = re.search(r"the longest prompt is (\d+) tokens with its tools \(task (\S+);", stdout)
    assert longest, stdout
    count, task_id = int(longest.group(1)), longest.group(2)
    picked = [r for r in rows["eval"] if r["episode"]["task_id"] in (task_id, "day/eval-001")]
    assert len(picked) == 2
    w, manager = worker(gridsim_policy("idle"), tokenizer=tok, hf_model_type="qwen3", chat_template_kwargs=KWARGS)
    out = run(w, verl_rows(picked))
    toolset = gridsim.get(f"/splits/eval/tasks?start=0&stop=1")["tasks"][0]["toolset"]
    tools = gridsim.get(f"/toolsets/{toolset}/tools")["tools"]
    for row, o in zip(picked, out["outputs"]):
        task = gridsim.get(f"/tasks/{row['episode']['task_id']}")
        native = tok.apply_chat_template(task["prompt"], tools=tools, add_generation_prompt=True, **KWARGS)
        # The row's prompt, rendered by verl's helper without tools=, is the task's rendered with tools=.
        assert o.prompt_ids == native
        if row["episode"]["task_id"] == task_id:
            assert len(o.prompt_ids) == count  # as skyrl rows counted it
        assert o.reward_score == 0.2
        # Qwen's builder put the newline after the reply's <|im_end|> (mask 0) before the tool turn.
        im_end = tok.convert_tokens_to_ids("<|im_end|>")
        i = o.response_ids.index(im_end)
        assert o.response_mask[i] == 1 and o.response_ids[i + 1] == tok.encode("\n")[0] and o.response_mask[i + 1] == 0
