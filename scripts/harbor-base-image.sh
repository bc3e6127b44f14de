#!/usr/bin/env bash
# Builds the base image the Harbor test datasets start FROM
# (testdata and examples/harbor: `FROM agentenv/harbor-base:bookworm`), since
# no image can be pulled here: Debian's debootstrap (minbase) with bash,
# coreutils, python3 and python3-pytest, imported with `docker import`.
# The rootfs tarball is cached by its package list under
# ~/.cache/agentenv-harbor-base, so a second machine run imports in seconds;
# the first takes a few minutes. Prints the image name.
set -euo pipefail
IMAGE=agentenv/harbor-base:bookworm
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=bash,coreutils,python3,python3-pytest,procps,ca-certificates
key=$(printf '%s\n' "$SUITE" "$PACKAGES" "v1" | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-harbor-base
tarball=$cache/$SUITE-$key.tar.gz

if [ "$(docker image inspect -f '{{index .Config.Labels "agentenv.base-key"}}' "$IMAGE" 2>/dev/null || true)" = "$key" ]; then
  echo "$IMAGE"
  exit 0
fi
if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || { echo "harbor-base-image: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root" "$tarball.tmp"' EXIT
  echo "harbor-base-image: debootstrap $SUITE ($PACKAGES), a few minutes..." >&2
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 || {
    tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
  rm -f "$root.log"
  # Trim what an image needs not carry: apt's lists and caches.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -czf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
docker import --change 'CMD ["/bin/bash"]' --change "LABEL agentenv.base-key=$key" "$tarball" "$IMAGE" >/dev/null
echo "$IMAGE"
