#!/bin/sh
# Builds the libFuzzer targets and runs each one for SECONDS on a copy of its seed corpus.
# Usage: fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
#   (TARGET: options, pprof, heap_dump, ring_buffer, daemon_records; default: all)
# The working corpus and any crash-*/leak-*/timeout-* artifacts go to BUILD_DIR/fuzz/, never
# into the source tree. Exits non-zero when a fuzzer finds a problem.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [SECONDS] [TARGET...]" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
seconds=${2:-60}
[ $# -ge 2 ] && shift 2 || shift 1
targets=${*:-options pprof heap_dump ring_buffer daemon_records}
src=$(cd "$(dirname "$0")" && pwd)

cmake --build "$build" --target fuzzers

for t in $targets; do
    bin=$build/fuzz/fuzz_$t
    corpus=$build/fuzz/corpus/$t
    mkdir -p "$corpus" "$build/fuzz/artifacts"
    cp "$src/corpus/$t"/* "$corpus"/
    echo "fuzz_$t: ${seconds}s on $corpus"
    "$bin" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$build/fuzz/artifacts/" "$corpus"
done
