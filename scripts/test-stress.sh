#!/usr/bin/env bash
# make test-stress: run the suite's timing-sensitive tests under a CPU hog
# that keeps every core busy, several times in a row; any failure fails.
# A test that waits on events passes however slow the machine is; one that
# sleeps for timing fails here first.
#
# Needs stress-ng (Debian: apt-get install stress-ng); this script installs
# nothing. The SkyRL pytest run needs /usr/bin/python3 with python3-pytest
# and python3-websockets, or it is skipped (loudly).
#
# Knobs (environment):
#   STRESS_RUNS   passes in a row required (3)
#   STRESS_CPUS   hog workers (the number of cores)
#   STRESS_PKGS   packages to run (the timing-sensitive ones below)
#   STRESS_RUN    go test -run filter for cmd/agentenv (TestSkyRLIntegrationPytest; empty: none)
#   STRESS_NICE   the hog's niceness (0: it competes with the tests as equals)
# On a machine shared with other work, STRESS_NICE=10 keeps the hog from
# taking the others' share; their work is load on the tests as well.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v stress-ng >/dev/null; then
  echo "test-stress needs stress-ng to load the CPUs: apt-get install stress-ng" >&2
  exit 2
fi
GO=${GO:-go}
RUNS=${STRESS_RUNS:-3}
CPUS=${STRESS_CPUS:-$(nproc)}
PKGS=${STRESS_PKGS:-./core/pluginhost/ ./core/runtime/ ./core/server/ ./core/episode/}
CLI_RUN=${STRESS_RUN-TestSkyRLIntegrationPytest}
HOG_NICE=${STRESS_NICE:-0}

# The hog: one busy worker per core, for as long as the runs take.
nice -n "$HOG_NICE" stress-ng --cpu "$CPUS" --cpu-method matrixprod --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true' EXIT
echo "test-stress: stress-ng --cpu $CPUS (nice $HOG_NICE, pid $hog) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs of: $PKGS, and ./cmd/agentenv/ -run '$CLI_RUN'"

for i in $(seq 1 "$RUNS"); do
  start=$(date +%s)
  # shellcheck disable=SC2086 # PKGS is a list
  if ! "$GO" test -race -count=1 -timeout 30m $PKGS; then
    echo "test-stress: run $i of $RUNS FAILED (packages)" >&2
    exit 1
  fi
  if [ -n "$CLI_RUN" ]; then
    out=$(mktemp)
    if ! "$GO" test -race -count=1 -timeout 30m ./cmd/agentenv/ -run "$CLI_RUN" -v >"$out" 2>&1; then
      cat "$out"
      rm -f "$out"
      echo "test-stress: run $i of $RUNS FAILED (cmd/agentenv -run $CLI_RUN)" >&2
      exit 1
    fi
    grep -E -- '^(--- |ok )|passed' "$out" || true
    rm -f "$out"
  fi
  echo "test-stress: run $i of $RUNS passed in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "test-stress: $RUNS runs in a row passed under the CPU hog"
