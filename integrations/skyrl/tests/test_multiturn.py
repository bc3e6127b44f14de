"""A multi-turn task through the env and generator: examples/inbox, served
with --reward mean, `end_turn` handing the model each next question."""

import pytest
from conftest import END, INBOX, Server, batch, call, generate, make_generator

ANSWERS = {"acme-invoice": ("acme invoice october", "m-36", "INV-1042", "1,284.50")}


def qwen3_coder_call(name, arguments):
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>{END}"


def inbox_policy(fmt, answer_first_in_reply=False):
    """The scripted policy on acme-invoice: search, read, end_turn with the
    answer, end_turn with the second; or answer the first in a plain reply."""
    write = call if fmt == "hermes" else qwen3_coder_call
    query, email, first, second = ANSWERS["acme-invoice"]

    def policy(messages, _tid):
        replies = sum(1 for role, _ in messages if role == "assistant")
        script = [
            lambda: write("search_emails", {"query": query}),
            lambda: write("read_email", {"id": email}),
            lambda: (f"The answer is {first}." + END) if answer_first_in_reply else write("end_turn", {"answer": first}),
            lambda: write("end_turn", {"answer": second}),
        ]
        return script[replies]()

    return policy


def acme_row(server, fmt):
    rows = server.rows("eval", 5, tool_format=fmt)
    return [r for r in rows if r["episode"]["task_id"] == "acme-invoice"]


def start_inbox(agentenv_bin, fmt):
    server = Server(agentenv_bin, INBOX, ["--reward", "mean", "--tool-format", fmt])
    return server.start()


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_two_turns_with_end_turn(agentenv_bin, fmt):
    server = start_inbox(agentenv_bin, fmt)
    try:
        rows = acme_row(server, fmt)
        assert rows and "end_turn" in rows[0]["episode"]["tools"]
        seen = []

        def policy(messages, tid):
            seen.append(messages[-1])
            return inbox_policy(fmt)(messages, tid)

        out = generate(make_generator(policy, max_turns=8), batch(rows))
        # end_turn's answer is the next question, returned as a tool message.
        assert seen[3][0] == "tool" and "How much does that invoice ask me to pay?" in seen[3][1]
        assert sum(out["rewards"][0]) == 1.0
        m = out["rollout_metrics"]
        assert m["environment/avg_score/answer-1"] == 1.0 and m["environment/avg_score/answer-2"] == 1.0
        assert m["environment/avg_tool_calls"] == 2.0 and m["environment/avg_unparsed_calls"] == 0.0

        # Answering the first question in a reply ends every turn: answer-2 scores 0.
        out = generate(make_generator(inbox_policy(fmt, answer_first_in_reply=True), max_turns=8), batch(rows))
        assert sum(out["rewards"][0]) == 0.5
        assert out["env_metrics"][0]["score/answer-1"] == 1.0 and out["env_metrics"][0]["score/answer-2"] == 0.0

        # generator.max_turns 3: the end_turn answering question 1 is the last reply.
        out = generate(make_generator(inbox_policy(fmt), max_turns=3), batch(rows))
        assert sum(out["rewards"][0]) == 0.5 and out["env_metrics"][0]["score/answer-2"] == 0.0
    finally:
        server.close()
