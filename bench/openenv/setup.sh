#!/usr/bin/env bash
# Sets up OpenEnv's own Python server for BenchmarkOpenEnvStep
# (bench/openenv_test.go), in a cache folder outside the repository:
#
#   <cache>/deb/<package>/...   Debian trixie's pure-Python server stack
#                                (FastAPI, Starlette, uvicorn, websockets, ...),
#                                each .deb fetched once and extracted with dpkg-deb
#   <cache>/src/openenv          OpenEnv's Python package (src/openenv of a checkout)
#   <cache>/shim                 our import shim for fastmcp and mcp.types (below)
#   <cache>/env                  PYTHON=, PYTHONPATH=, versions: what the benchmark reads
#
# Idempotent: what is there already is kept (a .deb whose checksum matches,
# the OpenEnv source of the same commit). Nothing is installed system-wide
# and nothing third-party lands in the repository.
#
# Knobs (environment):
#   PYTHON                  the interpreter to serve with (python3); it needs pydantic 2
#   AGENTENV_OPENENV_CACHE  the cache folder (${XDG_CACHE_HOME:-~/.cache}/agentenv-bench/openenv)
#   OPENENV_SRC             an OpenEnv checkout (the folder holding src/openenv)
#   OPENENV_MIRROR          a git repository of OpenEnv to export from when
#                           OPENENV_SRC is unset (/work/.mirror/meta-pytorch+OpenEnv/repo)
#   OPENENV_COMMIT          the commit to export from OPENENV_MIRROR (685de411)
#   DEBIAN_MIRROR           http://deb.debian.org/debian
#
# The one deviation from OpenEnv as released: openenv-core's http_server.py
# imports mcp_environment.py, which imports fastmcp and mcp.types at module
# top. Neither is in Debian, and a plain (non-MCP) Environment never uses
# them, so bench/openenv/shim provides the imported names as stubs that
# raise if anything calls them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
CACHE=${AGENTENV_OPENENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-bench/openenv}
MIRROR=${OPENENV_MIRROR:-/work/.mirror/meta-pytorch+OpenEnv/repo}
COMMIT=${OPENENV_COMMIT:-685de411}
DEBIAN=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() {
  echo "setup.sh: $*" >&2
  exit 1
}

# The interpreter: OpenEnv needs Python >= 3.10 and pydantic 2, which has a
# compiled core (pydantic-core) and so is not taken from Debian here.
"$PYTHON" - <<'EOF' || die "$PYTHON must be Python >= 3.10 with pydantic 2 installed (e.g. pip install 'pydantic>=2')"
import sys
import pydantic
assert sys.version_info >= (3, 10), sys.version
assert pydantic.VERSION.startswith("2."), pydantic.VERSION
EOF

mkdir -p "$CACHE/deb"

# Debian trixie packages: name, pool path, SHA-256, the module it provides,
# and whether the interpreter's own copy may stand in for it ("own") or
# Debian's is always used ("always": the server stack itself, so every
# machine serves with the same versions).
packages=(
  "python3-fastapi pool/main/f/fastapi/python3-fastapi_0.115.11-4_all.deb 5baa64f21bb865533ca418527d0c872d120654f3e9678000eee19dca1627168a fastapi always"
  "python3-starlette pool/main/s/starlette/python3-starlette_0.46.1-3+deb13u3_all.deb e27e915c942c868a6ca2f4fcf35f0eed7fab9a1d55bb81a17de6fef49b7c1bca starlette always"
  "python3-uvicorn pool/main/p/python-uvicorn/python3-uvicorn_0.32.0-3_all.deb d4f3a70601025ecad247553b3589bbb4037432bf6d6bf6275792f6032f6936c0 uvicorn always"
  "python3-websockets pool/main/p/python-websockets/python3-websockets_15.0.1-1_amd64.deb 35e843d741d5c8c275be351dd691c5f60da53e1718674a95a701a92570a40060 websockets always"
  "python3-h11 pool/main/p/python-h11/python3-h11_0.14.0-1.1_all.deb 2cb795e8d45be100ef4f70360244cc9c9b1527f53edcbefbbcd94e95536b5045 h11 always"
  "python3-anyio pool/main/p/python-anyio/python3-anyio_4.8.0-3_all.deb e39d7ee240c203b09a37a85de363080362bc97708010f3e806329ba8374650a6 anyio always"
  "python3-sniffio pool/main/p/python-sniffio/python3-sniffio_1.3.1-1_all.deb d12e5e58fcc8120a3a1aa384d79467b39a175e43a87b44775c634aa865b194ad sniffio own"
  "python3-idna pool/main/p/python-idna/python3-idna_3.10-1+deb13u1_all.deb 5cf05020b0e5c523ace373a4feac7e074de3e95df30b5a2d584842accba6e60b idna own"
  "python3-click pool/main/p/python-click/python3-click_8.2.0+0.really.8.1.8-1_all.deb a464c9b11930f293c8808cc5ea049830d8645a0d314bfa7e294803cb983ee15e click own"
  "python3-typing-extensions pool/main/p/python-typing-extensions/python3-typing-extensions_4.13.2-1_all.deb b67662f211c35c17c74a0725bc7c8ffc3b126c650e2a2525593adee06f2bbf69 typing_extensions own"
  "python3-annotated-types pool/main/p/python-annotated-types/python3-annotated-types_0.7.0-1_all.deb 0b467c30ee4340033d0fa48561675299c285960ecf99754238714dcf41e0379d annotated_types own"
)

pypath=()
for line in "${packages[@]}"; do
  read -r name pool sum module policy <<<"$line"
  if [[ $policy == own ]] && env -u PYTHONPATH "$PYTHON" -c "import $module" 2>/dev/null; then
    # pydantic depends on typing_extensions and annotated_types: the
    # interpreter's own copies are the ones it was installed against.
    echo "  $module: the interpreter's own"
    continue
  fi
  deb=$CACHE/deb/$(basename "$pool")
  root=$CACHE/deb/$name
  if [[ ! -f $deb ]] || ! echo "$sum  $deb" | sha256sum -c --status; then
    echo "  fetching $name"
    curl -fsS --retry 3 -o "$deb.part" "$DEBIAN/$pool" ||
      die "could not fetch $DEBIAN/$pool; if Debian has moved on, take the package's new Filename and SHA256 from $DEBIAN/dists/trixie/main/binary-all/Packages.xz (binary-amd64 for websockets) into this script"
    echo "$sum  $deb.part" | sha256sum -c --status || die "$deb: SHA-256 is not $sum"
    mv "$deb.part" "$deb"
    rm -rf "$root"
  fi
  if [[ ! -d $root/usr/lib/python3/dist-packages ]]; then
    rm -rf "$root"
    dpkg-deb -x "$deb" "$root"
  fi
  pypath+=("$root/usr/lib/python3/dist-packages")
  echo "  $module: Debian $(basename "$pool" .deb)"
done

# OpenEnv's source.
mkdir -p "$CACHE/src"
if [[ -n ${OPENENV_SRC:-} ]]; then
  [[ -f $OPENENV_SRC/src/openenv/core/env_server/http_server.py ]] ||
    die "OPENENV_SRC=$OPENENV_SRC holds no src/openenv/core/env_server/http_server.py"
  rev=$(git -C "$OPENENV_SRC" rev-parse HEAD 2>/dev/null || echo "unknown (not a git checkout)")
  rm -rf "$CACHE/src/openenv"
  cp -R "$OPENENV_SRC/src/openenv" "$CACHE/src/openenv"
  echo "$rev" >"$CACHE/src/COMMIT"
elif [[ -d $MIRROR ]]; then
  rev=$(git --git-dir="$MIRROR" rev-parse "$COMMIT^{commit}") || die "$MIRROR has no commit $COMMIT"
  if [[ $(cat "$CACHE/src/COMMIT" 2>/dev/null) != "$rev" || ! -d $CACHE/src/openenv ]]; then
    rm -rf "$CACHE/src/openenv"
    git --git-dir="$MIRROR" archive "$rev" src/openenv | tar -x -C "$CACHE/src" --strip-components=1
    echo "$rev" >"$CACHE/src/COMMIT"
  fi
else
  cat >&2 <<EOF
setup.sh: no OpenEnv source. Either
  git clone https://github.com/meta-pytorch/OpenEnv /some/where/OpenEnv
  git -C /some/where/OpenEnv checkout $COMMIT
  OPENENV_SRC=/some/where/OpenEnv $0
or point OPENENV_MIRROR at a git repository of OpenEnv that has commit $COMMIT.
EOF
  exit 1
fi

# The shim (our code, from the repository), refreshed each time.
rm -rf "$CACHE/shim"
cp -R "$here/shim" "$CACHE/shim"

pypath+=("$CACHE/src" "$CACHE/shim")
PYTHONPATH=$(
  IFS=:
  echo "${pypath[*]}"
)
export PYTHONPATH

# Check that OpenEnv's server imports, and say what it runs on.
versions=$("$PYTHON" - <<'EOF'
import sys, importlib.metadata as md
import fastapi, starlette, uvicorn, websockets, pydantic
import openenv.core.env_server.http_server  # noqa: F401  (the server path imports)
try:
    import websockets.speedups  # noqa: F401
    speedups = "C speedups"
except ImportError:
    speedups = "pure Python (no C speedups for this interpreter)"
print(f"python {sys.version.split()[0]}; fastapi {fastapi.__version__}; starlette {starlette.__version__}; "
      f"uvicorn {uvicorn.__version__}; websockets {websockets.__version__} ({speedups}); pydantic {pydantic.VERSION}")
EOF
) || die "OpenEnv's server does not import with PYTHONPATH=$PYTHONPATH"

{
  echo "PYTHON=$(command -v "$PYTHON")"
  echo "PYTHONPATH=$PYTHONPATH"
  echo "OPENENV_COMMIT=$(cat "$CACHE/src/COMMIT")"
  echo "VERSIONS=$versions"
} >"$CACHE/env.part"
mv "$CACHE/env.part" "$CACHE/env"

echo "OpenEnv $(cat "$CACHE/src/COMMIT") ready: $versions"
echo "written $CACHE/env; to run the server by hand:"
echo "  PYTHONPATH=$PYTHONPATH $PYTHON $here/echo_env.py --port 8000"
