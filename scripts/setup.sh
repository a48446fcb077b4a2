#!/usr/bin/env bash
# Installs everything the project builds and tests with:
#  - C++ dependencies and build tools from Debian's packages;
#  - the project's virtual environment: a CPython 3.11 shared-library build
#    (pyenv's, or Debian's python3.11) with requirements.txt pinned inside.
#
# The venv lives outside the checkout (default ~/.cache/libdynamo/venv-3.11,
# or $DYNAMO_VENV) so a fresh clone on a machine that already has it reuses
# it: torch alone is ~5.5 GB. A stamp inside records the hash of the
# requirements it was made from; when it matches, nothing is installed.
# Prints the venv's path on the last line of standard output.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libabsl-dev libprotobuf-dev protobuf-compiler
  catch2 libcli11-dev libbenchmark-dev
  graphviz
  clang libclang-rt-14-dev  # the sanitizer build and the fuzz harnesses (test/fuzz)
)
# The interpreter the venv is made from: a shared-library CPython 3.11.
base_python=""
for candidate in "${DYNAMO_BASE_PYTHON:-}" "$HOME/.pyenv/versions/3.11"*/bin/python3.11 /usr/bin/python3.11; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  if "$candidate" -c 'import sysconfig, sys; sys.exit(0 if sysconfig.get_config_var("Py_ENABLE_SHARED") else 1)' 2>/dev/null; then
    base_python=$candidate; break
  fi
done
[ -n "$base_python" ] || packages+=(python3.11 python3.11-venv libpython3.11-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q >&2
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
[ -n "$base_python" ] || base_python=/usr/bin/python3.11

venv=${DYNAMO_VENV:-$HOME/.cache/libdynamo/venv-3.11}
stamp=$venv/.libdynamo-requirements
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "$venv"
  exit 0
fi
echo "setup: installing requirements.txt into $venv (from $base_python)" >&2
mkdir -p "$(dirname "$venv")"
[ -x "$venv/bin/python" ] || "$base_python" -m venv "$venv" >&2
# Pinned torch only: an unpinned one would download a different multi-GB build.
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt >&2
echo "$want" > "$stamp"
echo "$venv"
