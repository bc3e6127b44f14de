#!/usr/bin/env bash
# Sets up OpenEnv's own Python server for BenchmarkOpenEnvStep and
# BenchmarkOpenEnvEpisodes (bench/openenv_test.go,
# bench/openenv_episodes_test.go), in cache folders outside the repository:
#
#   <cache>/deb/<package>/...   Debian trixie's pure-Python server stack
#                                (FastAPI, Starlette, uvicorn, websockets, ...),
#                                each .deb fetched once and extracted with dpkg-deb
#   <cache>/src/openenv          OpenEnv's Python package (src/openenv of a checkout)
#   <cache>/src/envs/echo_env    OpenEnv's own echo_env (an MCPEnvironment), same commit
#   <pydeps>/<name>@<commit>     fastmcp, mcp and the pure-Python packages they
#                                import that neither the interpreter nor Debian
#                                provides, each exported from its git repository
#                                at a pinned commit (the list below)
#   <cache>/env                  PYTHON=, PYTHONPATH=, ECHO_ENV_DIR=, versions:
#                                what the benchmarks read
#
# Idempotent: what is there already is kept (a .deb whose checksum matches,
# the OpenEnv source of the same commit, a package folder of the same
# commit). Nothing is installed system-wide and nothing third-party lands
# in the repository. Nothing of OpenEnv or its dependencies is stubbed or
# changed: OpenEnv's server imports fastmcp and mcp as released.
#
# Knobs (environment):
#   PYTHON                  the interpreter to serve with (python3); it needs
#                           pydantic 2 and the compiled or pure packages the
#                           check below names (pydantic-settings, jsonschema,
#                           cryptography, pyyaml, python-dotenv, attrs, ...)
#   AGENTENV_OPENENV_CACHE  the cache folder (${XDG_CACHE_HOME:-~/.cache}/agentenv-bench/openenv)
#   AGENTENV_PYDEPS_CACHE   the package folders (${XDG_CACHE_HOME:-~/.cache}/agentenv-pydeps)
#   OPENENV_SRC             an OpenEnv checkout (the folder holding src/openenv)
#   OPENENV_MIRROR          a git repository of OpenEnv to export from when
#                           OPENENV_SRC is unset (/work/.mirror/meta-pytorch+OpenEnv/repo)
#   OPENENV_COMMIT          the commit to export from OPENENV_MIRROR (685de411)
#   PYDEPS_MIRRORS          a folder holding a git repository of each package
#                           below as <owner>+<name>/repo (/work/.mirror); make
#                           one with git clone --mirror https://github.com/<owner>/<name>
#   DEBIAN_MIRROR           http://deb.debian.org/debian
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
CACHE=${AGENTENV_OPENENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-bench/openenv}
MIRROR=${OPENENV_MIRROR:-/work/.mirror/meta-pytorch+OpenEnv/repo}
COMMIT=${OPENENV_COMMIT:-685de411}
DEBIAN=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYDEPS=${AGENTENV_PYDEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-pydeps}
PYDEPS_MIRRORS=${PYDEPS_MIRRORS:-/work/.mirror}

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

# What fastmcp and mcp import that the list below does not bring: compiled
# packages (no pure-Python source to export) and pure ones a Python with
# pydantic 2 commonly has. pyenv's 3.11 here has them all.
"$PYTHON" - <<'EOF' || die "$PYTHON lacks a package fastmcp or mcp needs (above); install it for $PYTHON (pip, or Debian's python3-<name> for /usr/bin/python3)"
import importlib, sys
need = {
    "pydantic_core": "pydantic-core", "pydantic_settings": "pydantic-settings", "typing_inspection": "typing-inspection",
    "jsonschema": "jsonschema", "jsonschema_path": "jsonschema-path", "referencing": "referencing", "rpds": "rpds-py",
    "cryptography": "cryptography", "yaml": "pyyaml", "dotenv": "python-dotenv", "attrs": "attrs",
    "pygments": "pygments", "docutils": "docutils", "certifi": "certifi", "idna": "idna",
}
missing = []
for module, dist in need.items():
    try:
        importlib.import_module(module)
    except ImportError:
        missing.append(dist)
if missing:
    print("missing: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
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

# OpenEnv's envs/echo_env (its server folder: app.py and the MCPEnvironment),
# from the same commit as src/openenv, for BenchmarkOpenEnvEpisodes.
if [[ -n ${OPENENV_SRC:-} ]]; then
  [[ -f $OPENENV_SRC/envs/echo_env/server/app.py ]] || die "OPENENV_SRC=$OPENENV_SRC holds no envs/echo_env/server/app.py"
  rm -rf "$CACHE/src/envs"
  mkdir -p "$CACHE/src/envs"
  cp -R "$OPENENV_SRC/envs/echo_env" "$CACHE/src/envs/echo_env"
elif [[ ! -f $CACHE/src/envs/echo_env/server/app.py || $(cat "$CACHE/src/COMMIT.envs" 2>/dev/null) != "$rev" ]]; then
  rm -rf "$CACHE/src/envs"
  git --git-dir="$MIRROR" archive "$rev" envs/echo_env | tar -x -C "$CACHE/src"
fi
echo "$rev" >"$CACHE/src/COMMIT.envs"

# The Python packages OpenEnv's MCP environments import (fastmcp, mcp and
# what they import that neither the interpreter nor the Debian packages
# above provide), pure Python, each exported from its public git
# repository at a pinned commit into $PYDEPS/<name>@<commit>, with a
# <name>-<version>.dist-info/METADATA of two fields so that
# importlib.metadata finds its version (fastmcp and mcp ask for their
# own). Versions are those of envs/echo_env/uv.lock at OpenEnv's commit,
# except where that lock's version needs a newer server stack than the
# Debian one above (sse-starlette 3.3.3 needs starlette >= 0.49.1, so
# 3.0.2; httpcore 1.0.9 needs h11 >= 0.16, so 1.0.8). fastmcp 3.1.1 asks
# for uvicorn >= 0.35 and gets Debian's 0.32: OpenEnv's MCPEnvironment runs
# its FastMCP server in process (no fastmcp HTTP transport), and uvicorn
# serves OpenEnv's app as it does for the plain env. Compiled
# dependencies (pydantic-core, cryptography, cffi, rpds-py, pyyaml) and
# the pure ones the interpreter already has (jsonschema, pydantic-settings,
# python-dotenv, attrs, ...) are the interpreter's own: the check below
# fails if one is missing.
#
# Fields: name, owner/repository, tag, commit, version, paths in the
# repository (comma-separated) that go to the folder's top.
pydeps=(
  "fastmcp PrefectHQ/fastmcp v3.1.1 53dab031e4fed759d4f271bd5266d041a106c8ce 3.1.1 src/fastmcp"
  "mcp modelcontextprotocol/python-sdk v1.26.0 3d9d34552a9ab8988acf8d06e4a705bd799fc32b 1.26.0 src/mcp"
  "httpx encode/httpx 0.28.1 26d48e0634e6ee9cdc0533996db289ce4b430177 0.28.1 httpx"
  "httpcore encode/httpcore 1.0.8 ae46dfbd4330eefaa9cd6ab1560dec18a1d0bcb8 1.0.8 httpcore"
  "httpx-sse florimondmanca/httpx-sse 0.4.3 e8fcd9e159066185963ffb9fa29efb8ba2ca84bf 0.4.3 src/httpx_sse"
  "sse-starlette sysid/sse-starlette v3.0.2 e3c205f8b786c4ef0bf1debb013bc96e2d64eeae 3.0.2 sse_starlette"
  "python-multipart Kludex/python-multipart 0.0.22 bea7bbb2904da8ce39123a845088dc72464eaddf 0.0.22 python_multipart,multipart"
  "pyjwt jpadilla/pyjwt 2.12.1 a4e1a3d1218b01c5806420b8f16d9308ac4adc30 2.12.1 jwt"
  "authlib authlib/authlib v1.6.11 0dc0e5b4dc84f155319518a3732113af6fa47525 1.6.11 authlib"
  "cyclopts BrianPugh/cyclopts v4.10.0 b6dd9d8b2ef48e7954afbb661372a2ec7863851d 4.10.0 cyclopts"
  "rich Textualize/rich v14.3.3 ce0118819d172d134507bcf5982d3faf82bbc43e 14.3.3 rich"
  "markdown-it-py executablebooks/markdown-it-py v4.0.0 c62983f1554124391b47170180e6c62df4d476ca 4.0.0 markdown_it"
  "mdurl executablebooks/mdurl 0.1.2 596bf1c8752de45fa576a52c315d6d8cc5bb1a4e 0.1.2 src/mdurl"
  "openapi-pydantic mike-oakley/openapi-pydantic v0.5.1 82fd769f2820f6ff2acf650f551a97a7b8fbe189 0.5.1 openapi_pydantic"
  "opentelemetry-api open-telemetry/opentelemetry-python v1.40.0 dd2202172982d1b3cc896ddecc2bef27d7956acb 1.40.0 opentelemetry-api/src/opentelemetry"
  "packaging pypa/packaging 26.0 3b77a26f5a27473ad3b08194d773f325d018a2d0 26.0 src/packaging"
  "platformdirs tox-dev/platformdirs 4.9.4 3fdb23e77c02dc11d0ddc82c3086c3240b236157 4.9.4 src/platformdirs"
  "py-key-value-aio strawgate/py-key-value 0.4.4 ec9dfd6c18205aa1880f46842677f27d7275cbc7 0.4.4 src/key_value"
  "jsonref gazpachoking/jsonref v1.1.0 82c038b56d2c7cd3cff7a054ff165fd7c1922343 1.1.0 jsonref.py,proxytypes.py"
  "uncalled-for chrisguidry/uncalled-for 0.2.0 b39a1115e11db09533461df5341e1c78a583a80d 0.2.0 src/uncalled_for"
  "beartype beartype/beartype v0.22.9 9430c6515af3b158acacdc47fe7b1adb646f6624 0.22.9 beartype"
  "docstring-parser rr-/docstring_parser 0.17.0 5a6c8dc108e7922487c2988b0fc306602794d21e 0.17.0 docstring_parser"
  "rich-rst wasi-master/rich-rst v1.3.2 ed2412d1528b0118adeb05225f6ec718c18dcc41 1.3.2 rich_rst"
  "cachetools tkem/cachetools v7.0.5 5dce86fc5c9c565c6e9c912e2be5d6abb9586a1d 7.0.5 src/cachetools"
  "importlib-metadata python/importlib_metadata v8.7.1 84e9028d39062af975d0659c0e987c28bcc808a5 8.7.1 importlib_metadata"
  "zipp jaraco/zipp v3.23.0 ccb41118d730036782d809b71773b719c48a680d 3.23.0 zipp"
  "exceptiongroup agronholm/exceptiongroup 1.3.1 ddddb6fdf8582c4ae5187dc1bd258115974229fe 1.3.1 src/exceptiongroup"
  "pyperclip asweigart/pyperclip - f5326bfd7c5448b40051dd261a7304657977b838 1.11.0 src/pyperclip"
)
# Every repository still needed and missing, named at once.
missing=()
for line in "${pydeps[@]}"; do
  read -r name repo tag commit version paths <<<"$line"
  if [[ ! -f $PYDEPS/$name@$commit/.complete && ! -d $PYDEPS_MIRRORS/${repo/\//+}/repo ]]; then
    missing+=("  git clone --mirror https://github.com/$repo $PYDEPS_MIRRORS/${repo/\//+}/repo")
  fi
done
if ((${#missing[@]})); then
  printf 'setup.sh: no git repository of these packages under PYDEPS_MIRRORS=%s; make them with\n' "$PYDEPS_MIRRORS" >&2
  printf '%s\n' "${missing[@]}" >&2
  exit 1
fi
for line in "${pydeps[@]}"; do
  read -r name repo tag commit version paths <<<"$line"
  dir=$PYDEPS/$name@$commit
  if [[ ! -f $dir/.complete ]]; then
    git_dir=$PYDEPS_MIRRORS/${repo/\//+}/repo
    [[ -d $git_dir ]] || die "no git repository of $name at $git_dir: git clone --mirror https://github.com/$repo $git_dir (or set PYDEPS_MIRRORS to a folder holding <owner>+<name>/repo for each)"
    git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null ||
      die "$git_dir has no commit $commit ($name $tag): fetch it (git --git-dir=$git_dir fetch --tags)"
    rm -rf "$dir" "$dir.part"
    mkdir -p "$dir.part/x"
    IFS=, read -r -a list <<<"$paths"
    git --git-dir="$git_dir" archive "$commit" "${list[@]}" | tar -x -C "$dir.part/x"
    for p in "${list[@]}"; do mv "$dir.part/x/$p" "$dir.part/"; done
    rm -rf "$dir.part/x"
    mkdir -p "$dir.part/${name//-/_}-$version.dist-info"
    printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$name" "$version" >"$dir.part/${name//-/_}-$version.dist-info/METADATA"
    # Its entry points too (opentelemetry finds its context this way).
    root=${list[0]%%src/*}
    [[ $root == "${list[0]}" ]] && root=$(dirname "${list[0]}")/
    root=${root#./}
    git --git-dir="$git_dir" show "$commit:${root}pyproject.toml" 2>/dev/null | "$PYTHON" -c '
import sys, tomllib
eps = tomllib.loads(sys.stdin.read()).get("project", {}).get("entry-points", {})
for group, names in eps.items():
    print(f"[{group}]")
    for k, v in names.items():
        print(f"{k} = {v}")
' >"$dir.part/${name//-/_}-$version.dist-info/entry_points.txt"
    # The version module setuptools-scm or hatch-vcs writes at build time.
    case $name in
    platformdirs) vfile=platformdirs/version.py ;;
    exceptiongroup) vfile=exceptiongroup/_version.py ;;
    *) vfile= ;;
    esac
    if [[ -n $vfile ]]; then
      printf '__version__ = version = "%s"\n__version_tuple__ = version_tuple = (%s)\n' "$version" "${version//./, }" >"$dir.part/$vfile"
    fi
    echo "$repo $tag $commit" >"$dir.part/.complete"
    mv "$dir.part" "$dir"
  fi
  pypath+=("$dir")
  echo "  $name $version: $repo@${commit:0:12}"
done

pypath+=("$CACHE/src")
PYTHONPATH=$(
  IFS=:
  echo "${pypath[*]}"
)
export PYTHONPATH

# Check that OpenEnv's server imports, and say what it runs on.
versions=$(cd "$CACHE/src/envs/echo_env" && "$PYTHON" - <<'EOF'
import sys, importlib.metadata as md
import fastapi, starlette, uvicorn, websockets, pydantic
import fastmcp, mcp  # noqa: F401
import openenv.core.env_server.http_server  # noqa: F401  (the server path imports)
sys.path.insert(0, ".")
import server.app  # noqa: F401  (OpenEnv's echo_env app, as uvicorn server.app:app loads it)
from server.echo_environment import EchoEnvironment
from openenv.core.env_server.mcp_types import CallToolAction
env = EchoEnvironment()
env.reset()
obs = env.step(CallToolAction(tool_name="echo_message", arguments={"message": "hi"}))
assert obs.error is None and obs.result.data == "hi", obs
try:
    import websockets.speedups  # noqa: F401
    speedups = "C speedups"
except ImportError:
    speedups = "pure Python (no C speedups for this interpreter)"
print(f"python {sys.version.split()[0]}; fastapi {fastapi.__version__}; starlette {starlette.__version__}; "
      f"uvicorn {uvicorn.__version__}; websockets {websockets.__version__} ({speedups}); pydantic {pydantic.VERSION}; "
      f"fastmcp {md.version('fastmcp')}; mcp {md.version('mcp')}")
EOF
) || die "OpenEnv's server does not import with PYTHONPATH=$PYTHONPATH"

{
  echo "PYTHON=$(command -v "$PYTHON")"
  echo "PYTHONPATH=$PYTHONPATH"
  echo "OPENENV_COMMIT=$(cat "$CACHE/src/COMMIT")"
  echo "ECHO_ENV_DIR=$CACHE/src/envs/echo_env"
  echo "VERSIONS=$versions"
} >"$CACHE/env.part"
mv "$CACHE/env.part" "$CACHE/env"

echo "OpenEnv $(cat "$CACHE/src/COMMIT") ready: $versions"
echo "written $CACHE/env; to run the server by hand:"
echo "  PYTHONPATH=$PYTHONPATH $PYTHON $here/echo_env.py --port 8000"
echo "and OpenEnv's echo_env:"
echo "  cd $CACHE/src/envs/echo_env && PYTHONPATH=$PYTHONPATH $PYTHON -m uvicorn server.app:app --port 8000 --ws websockets"
