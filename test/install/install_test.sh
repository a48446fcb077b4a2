#!/usr/bin/env bash
# The installed package works for a C++ host: install the build tree to a
# scratch prefix, build examples/host against it with find_package(dynamo),
# run it on the bundled example.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
scratch=$(mktemp -d /tmp/dynamo_install_XXXXXX)
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"
test -f "$scratch/prefix/lib/cmake/dynamo/dynamoConfig.cmake"
test -f "$scratch/prefix/include/dynamo/lib/bytecode/opcode_table.inc"
test -f "$scratch/prefix/include/dynamo/proto/dynamo_ir.pb.h"
test -x "$scratch/prefix/bin/dynamo-export"
cmake -S "$source/examples/host" -B "$scratch/host" -G Ninja \
      -DCMAKE_PREFIX_PATH="$scratch/prefix" > "$scratch/configure.log"
cmake --build "$scratch/host" > "$scratch/build.log"
out=$("$scratch/host/dynamo-host" "$source/examples/mlp.py" forward "f32[4,16]" "f32[4,16]")
grep -q "^forward: " <<< "$out"
grep -q "CALL_FUNCTION torch.sin" <<< "$out"
grep -q "guard TENSOR_MATCH L\['x'\]" <<< "$out"
echo "host built against the installed package and ran: $(head -1 <<< "$out")"
