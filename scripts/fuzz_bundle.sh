#!/usr/bin/env bash
# Packs the fuzz harnesses of build-fuzz (scripts/fuzz.sh --build-only) with
# what they need to run on another x86-64 Linux machine that has none of
# the build's dependencies -- libpython, Abseil, protobuf and the standard
# library of the build's CPython -- into one archive (scripts/fuzz.sh long
# campaigns on a bigger machine). On that machine:
#
#   tar xJf fuzz-bundle.tar.xz && fuzz-bundle/run.sh SECONDS JOBS_PER_HARNESS OUT_DIR [names...]
#
#   scripts/fuzz_bundle.sh [BUILD_DIR] [ARCHIVE]   # default build-fuzz, fuzz-out/fuzz-bundle.tar.xz
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
archive=${2:-fuzz-out/fuzz-bundle.tar.xz}
python=$(sed -n 's/^DYNAMO_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
base=$("$python" -c 'import sys; print(sys.base_prefix)')
ver=$("$python" -c 'import sys; print(f"{sys.version_info.major}.{sys.version_info.minor}")')
stage=$(mktemp -d)/fuzz-bundle
mkdir -p "$stage/bin" "$stage/lib/python$ver" "$stage/test"
names=(input_spec capture bytecode guards)
for n in "${names[@]}"; do strip --strip-debug -o "$stage/bin/${n}_fuzz" "$build/test/fuzz/${n}_fuzz"; done
# Every shared library the harnesses load but the C library's own.
for lib in $(ldd "$build"/test/fuzz/*_fuzz | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$lib")" in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) continue ;; esac
  strip --strip-debug -o "$stage/lib/$(basename "$lib")" "$lib"
done
# The standard library (no tests, no site-packages) and its C modules.
(cd "$base/lib/python$ver" && tar cf - --exclude=./test --exclude=./site-packages --exclude='*/__pycache__' \
   --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo --exclude=./ensurepip --exclude=./lib2to3 .) |
  (cd "$stage/lib/python$ver" && tar xf -)
cp "$base/bin/python$ver" "$stage/bin/python$ver"
cp -r test/fuzz/input_spec test/fuzz/capture test/fuzz/bytecode test/fuzz/guards test/fuzz/*.dict "$stage/test/"
cat > "$stage/run.sh" <<RUN
#!/usr/bin/env bash
# run.sh SECONDS JOBS OUT [names...]: every harness named (default all)
# fuzzed at once for SECONDS with JOBS workers each; corpora, crashes and
# logs under OUT.
set -uo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
seconds=\$1 jobs=\$2 out=\$(mkdir -p "\$3" && cd "\$3" && pwd); shift 3
names=("\$@"); [ \${#names[@]} -gt 0 ] || names=(${names[*]})
export LD_LIBRARY_PATH=\$here/lib PYTHONHOME=\$here DYNAMO_PYTHON=\$here/bin/python$ver
export ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc DYNAMO_FUZZ_NO_TORCH=1
for n in "\${names[@]}"; do
  mkdir -p "\$out/corpus/\$n" "\$out/logs/\$n" "\$out/crashes"
  inputs=("\$here/test/\$n/seeds"); [ -d "\$here/test/\$n/regressions" ] && inputs+=("\$here/test/\$n/regressions")
  (cd "\$out/logs/\$n" && "\$here/bin/\${n}_fuzz" -max_total_time=\$seconds -timeout=20 -rss_limit_mb=4096 \\
     -jobs=\$jobs -workers=\$jobs -dict="\$here/test/\$n.dict" -print_final_stats=1 \\
     -artifact_prefix="\$out/crashes/\$n-" "\$out/corpus/\$n" "\${inputs[@]}" > "\$out/logs/\$n.log" 2>&1) &
done
wait
RUN
chmod +x "$stage/run.sh"
mkdir -p "$(dirname "$archive")"
tar cJf "$archive" -C "$(dirname "$stage")" fuzz-bundle
rm -rf "$(dirname "$stage")"
ls -la "$archive"
