#!/bin/bash
# Reward 1 when the agent counted the default routes right and the count
# is 0: a task with allow_internet = false has no route out.
mkdir -p /logs/verifier
actual=$(awk 'NR > 1 && $2 == "00000000"' /proc/net/route | wc -l)
if [ "$actual" = 0 ] && [ "$(tr -d '[:space:]' < /app/routes.txt 2>/dev/null)" = "$actual" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
