#!/bin/sh
# bench/report.sh BUILD_DIR: times `heapscope report` on a synthetic dump of 100,000 records
# with 32-frame stacks (target: under 5 s), text and HTML. Reports, never asserts, timings.
set -u
build=${1:-build}
records=${BENCH_REPORT_RECORDS:-100000}
frames=${BENCH_REPORT_FRAMES:-32}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bench/make_big_dump" "$records" "$frames" "$tmp/dump.txt" || exit 1
size=$(wc -c <"$tmp/dump.txt")
echo "| report of $records records x $frames frames ($size bytes) | seconds |"
echo "|---|---:|"
for fmt in text html folded pprof; do
    start=$(date +%s.%N)
    if ! "$build/bin/heapscope" report -q -f "$fmt" -o "$tmp/out.$fmt" "$tmp/dump.txt"; then
        echo "bench/report.sh: FAILED: $fmt" >&2
        exit 1
    fi
    end=$(date +%s.%N)
    echo "| $fmt | $(echo "$end - $start" | bc) |"
done
