#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages.
# Idempotent: skips apt entirely when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libpython3.11-dev python3.11
  libabsl-dev libprotobuf-dev protobuf-compiler
  catch2 libcli11-dev libbenchmark-dev
  python3-torch python3-torchvision python3-numpy python3-scipy python3-protobuf
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
