#!/usr/bin/env bash
# Prepares, on a Debian 12 machine that has a package registry, what
# scripts/offline_build.sh needs to build libdynamo on a machine without one
# (a GPU box: Ubuntu 24.04 with g++, cmake, ninja and a Python that has
# torch, but no Abseil or CLI11, and Catch2 v3 where the tests use v2).
#
#     scripts/offline_deps.sh [DIR]      # default DIR: .deps (git-ignored)
#
# DIR receives Debian 12's .deb files for Abseil, CLI11, Catch2 2, protobuf
# 3.21 (library and protoc) and Google Benchmark: about 6 MB. Copy DIR with
# the checkout; offline_build.sh unpacks them into its build folder (never
# into /) and builds against them first, whatever the machine has. Debian
# 12's glibc (2.36) and libstdc++ are older than Ubuntu 24.04's, so its
# binaries run there.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps}
packages=(
  libabsl-dev libabsl20220623 libcli11-dev catch2
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler
  libbenchmark-dev libbenchmark1debian
)
mkdir -p "$dir"
rm -f "$dir"/*.deb
(cd "$dir" && apt-get download "${packages[@]}" >&2)
ls "$dir"/*.deb | wc -l | xargs -I{} echo "offline_deps: {} packages in $dir ($(du -sh "$dir" | cut -f1))"
