"""The stand-ins of verl's classes (tests/standin) against the record taken
from verl's source (tests/standin/upstream.json): exactly its signatures; and
with AGENTENV_VERL_SRC naming a checkout of verl, the checkout against the
record, so a change upstream fails here (docs/training-verl.md)."""

import json
import os
from pathlib import Path

from upstream import missing_facts, signatures

STANDIN = Path(__file__).resolve().parent / "standin"
RECORD = json.loads((STANDIN / "upstream.json").read_text())


def test_the_standins_have_the_recorded_signatures():
    skip = set(RECORD.get("not_in_standin", []))
    spec = {rel: [n for n in names if f"{rel}:{n}" not in skip] for rel, names in RECORD["spec"].items()}
    want = {k: v for k, v in RECORD["signatures"].items() if k not in skip}
    assert signatures(STANDIN, {rel: names for rel, names in spec.items() if names}) == want


if os.environ.get("AGENTENV_VERL_SRC"):  # collected only with a checkout to check

    def test_the_checkout_still_has_the_recorded_signatures_and_lines():
        src = Path(os.environ["AGENTENV_VERL_SRC"])
        assert signatures(src, RECORD["spec"]) == RECORD["signatures"]
        assert missing_facts(src, RECORD["facts"]) == []
