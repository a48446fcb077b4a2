#!/usr/bin/env bash
# Builds libdynamo on a machine with no package registry, from the .deb
# files scripts/offline_deps.sh gathered elsewhere, against the Python that
# has torch there (the GPU machines': python3 on PATH).
#
#     scripts/offline_build.sh [DEPS_DIR]   # default DEPS_DIR: .deps
#
# Environment: DYNAMO_PYTHON (default: python3 on PATH), BUILD_DIR (default:
# build-offline), DYNAMO_BUILD_TESTS (default ON). The packages are unpacked
# into BUILD_DIR/deps (never into /) and found there before anything the
# machine has; the build records their library folder as its RPATH, so the
# tools, tests and extension run without LD_LIBRARY_PATH. Then
# `BUILD_DIR=... scripts/python ...` runs the built package as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=${1:-.deps}
build=${BUILD_DIR:-build-offline}
python=${DYNAMO_PYTHON:-$(command -v python3)}
ls "$deps"/*.deb >/dev/null 2>&1 || { echo "offline_build: no .deb files in $deps (run scripts/offline_deps.sh on a machine with Debian's registry)" >&2; exit 1; }
mkdir -p "$build/deps"
prefix=$(cd "$build/deps" && pwd)
for deb in "$deps"/*.deb; do
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix"
  else  # a .deb is an ar archive holding data.tar.*
    (tmp=$(mktemp -d) && cd "$tmp" && ar x "$OLDPWD/$deb" && tar -xf data.tar.* -C "$prefix" && rm -rf "$tmp")
  fi
done
libdir=$(ls -d "$prefix"/usr/lib/*-linux-gnu | head -1)
# DT_RPATH, not DT_RUNPATH: Abseil's libraries find each other (their own
# dependencies, which carry no search path) only through an RPATH.
rpath_flags="-Wl,--disable-new-dtags"
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # protoc, while building
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$libdir/cmake" -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON \
  -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc" -DProtobuf_INCLUDE_DIR="$prefix/usr/include" \
  -DProtobuf_LIBRARY="$libdir/libprotobuf.so" -DCMAKE_BUILD_RPATH="$libdir" -DCMAKE_INSTALL_RPATH="$libdir" \
  -DCMAKE_EXE_LINKER_FLAGS="$rpath_flags" -DCMAKE_SHARED_LINKER_FLAGS="$rpath_flags" \
  -DCMAKE_MODULE_LINKER_FLAGS="$rpath_flags" \
  -DDYNAMO_PYTHON="$python" -DDYNAMO_BUILD_TESTS="${DYNAMO_BUILD_TESTS:-ON}" >&2
cmake --build "$build" >&2
echo "offline_build: built $build against $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
