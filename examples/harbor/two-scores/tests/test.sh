#!/bin/bash
# Two named scores in reward.json: "numbers" and "sum".
mkdir -p /logs/verifier
numbers=0; sum=0
[ "$(cat /app/numbers.txt 2>/dev/null)" = "$(seq 1 10)" ] && numbers=1
[ "$(tr -d '[:space:]' < /app/sum.txt 2>/dev/null)" = "55" ] && sum=1
printf '{"numbers": %s, "sum": %s}\n' "$numbers" "$sum" > /logs/verifier/reward.json
