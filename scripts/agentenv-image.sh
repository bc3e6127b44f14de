#!/usr/bin/env bash
# agentenv's own image for Kubernetes (deploy/kubernetes), built from this
# checkout with nothing to pull: FROM scratch, holding
#   /agentenv            static (CGO_ENABLED=0), every first-party plugin in
#   /agentenv-terminal   static, for terminal_image (Harbor tasks)
#   /bundle              the bundle (default examples/gridsim), each env's
#                        build step already run (GridSim's bin/gridsim-env),
#                        so the pod never runs `go build`
# and, as a second image, each env's own (GridSim's: its static binary).
#
# Usage: scripts/agentenv-image.sh [--bundle DIR] [--tag TAG] [--out DIR] [--docker] [--k8s]
#   --out DIR   leave the image's root folder in DIR (default: a temporary one, removed)
#   --docker    docker build it as agentenv:TAG and agentenv-gridsim-env:TAG
#   --k8s       push both to the test cluster's registry (k8scluster push) as
#               registry.agentenv.test/agentenv:TAG and registry.agentenv.test/gridsim-env:TAG
# docs/kubernetes.md, "Running agentenv itself in the cluster".
set -euo pipefail

bundle=examples/gridsim tag=dev out= docker=0 k8s=0
while [ $# -gt 0 ]; do
	case $1 in
	--bundle) bundle=$2; shift 2 ;;
	--tag) tag=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--docker) docker=1; shift ;;
	--k8s) k8s=1; shift ;;
	*) echo "agentenv-image: unknown argument $1 (see the comment at the top of $0)" >&2; exit 2 ;;
	esac
done
[ -z "$out" ] || out=$(realpath -m "$out")
cd "$(dirname "$0")/.."
[ -f "$bundle/bundle.toml" ] || [ -d "$bundle/envs" ] || { echo "agentenv-image: $bundle is not a bundle (no envs/)" >&2; exit 2; }
[ "$bundle" = examples/gridsim ] || echo "agentenv-image: only GridSim's env image is built here; push $bundle's env images yourself" >&2

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=${out:-$tmp/root}
rm -rf "$root.new" && mkdir -p "$root.new"
go build -trimpath -ldflags='-s -w' -o "$root.new/agentenv" ./cmd/agentenv
go build -trimpath -ldflags='-s -w' -o "$root.new/agentenv-terminal" ./cmd/agentenv-terminal
cp -r "$bundle" "$root.new/bundle"
rm -rf "$root.new/bundle/envs"/*/bin
# Each env's Go build step (env.toml's `build`: bin/<env>-env, as GridSim's),
# run now, in the checkout (the env is a package of its module), rather than
# in the pod.
for envdir in "$bundle/envs"/*/; do
	name=$(basename "$envdir")
	if grep -q '^build *=.*go", *"build' "$envdir/env.toml" 2>/dev/null; then
		(cd "$envdir" && go build -trimpath -ldflags='-s -w' -o "$root.new/bundle/envs/$name/bin/$name-env" .)
	fi
done
rm -rf "$root" && mv "$root.new" "$root"
env_bin="$root/bundle/envs/gridsim/bin/gridsim-env"

if [ $docker = 1 ]; then
	printf 'FROM scratch\nCOPY . /\nUSER 65534:65534\nENTRYPOINT ["/agentenv"]\n' >"$tmp/Dockerfile"
	docker build -q -f "$tmp/Dockerfile" -t "agentenv:$tag" "$root"
	if [ -x "$env_bin" ]; then
		mkdir -p "$tmp/env/bin" && cp "$env_bin" "$tmp/env/bin/gridsim-env"
		docker build -q -f examples/gridsim/envs/gridsim/Dockerfile -t "agentenv-gridsim-env:$tag" "$tmp/env"
	fi
fi
if [ $k8s = 1 ]; then
	k8scluster=${K8SCLUSTER:-go run ./internal/k8scluster/cmd/k8scluster}
	$k8scluster push --ref "registry.agentenv.test/agentenv:$tag" --entrypoint /agentenv "$root"
	[ -x "$env_bin" ] && $k8scluster push --ref "registry.agentenv.test/gridsim-env:$tag" --entrypoint /gridsim-env "$env_bin" --host 0.0.0.0
fi
[ -n "$out" ] && echo "agentenv-image: the image's root ($(du -sh "$root" | cut -f1)) is in $root"
