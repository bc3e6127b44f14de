#!/bin/bash
# Runs the pytest suite; reward 1 when every test passes.
mkdir -p /logs/verifier
if python3 -m pytest -q /tests/test_fizz.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
