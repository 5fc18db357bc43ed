#!/bin/sh
# bench/leaks.sh BUILD_DIR: the unreachable-memory check on heaps of 10^4, 10^5 and 10^6
# blocks of 1000 bytes, heapscope (libmemunreachable) side by side with LeakSanitizer's
# __lsan_do_recoverable_leak_check on the same program. Prints a markdown table (also
# appended to BUILD_DIR/bench/results.md). Timings are reported, never asserted; the exit
# status is non-zero only if a run failed or a detector missed the 10 leaked blocks.
#
# Environment: BENCH_LEAKS_RUNS (3) runs per size, the median is reported;
#              BENCH_LEAKS_SIZES ("10000 100000 1000000").
set -u
build=${1:-build}
runs=${BENCH_LEAKS_RUNS:-3}
sizes=${BENCH_LEAKS_SIZES:-10000 100000 1000000}
hs=$build/bench/leaks_bench
lsan=$build/bench/leaks_bench_lsan
[ -x "$hs" ] || { echo "bench/leaks.sh: $hs not found; build first" >&2; exit 2; }
failures=0

# median of the numbers on stdin
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'
}

field() {
    sed -n 's/^result .*[ ]'"$1"'=\([^ ]*\).*$/\1/p'
}

table=$(mktemp)
trap 'rm -f "$table" "$table".*' EXIT
{
    echo "| blocks (1000 B each) | heapscope pause ms | heapscope total ms | LeakSanitizer ms (all stopped) |"
    echo "|---:|---:|---:|---:|"
} >"$table"
for n in $sizes; do
    : >"$table.pause"
    : >"$table.total"
    : >"$table.lsan"
    r=1
    while [ "$r" -le "$runs" ]; do
        out=$("$hs" "$n" 2>&1)
        if [ "$(echo "$out" | field leaks)" != 10 ]; then
            echo "bench/leaks.sh: FAILED: heapscope, $n blocks: $out" >&2
            failures=$((failures + 1))
        else
            echo "$out" | field pause_ms >>"$table.pause"
            echo "$out" | field total_ms >>"$table.total"
        fi
        if [ -x "$lsan" ]; then
            out=$(LSAN_OPTIONS=exitcode=0 "$lsan" "$n" 2>/dev/null)
            if [ "$(echo "$out" | field leaks)" != yes ]; then
                echo "bench/leaks.sh: FAILED: LeakSanitizer, $n blocks: $out" >&2
                failures=$((failures + 1))
            else
                echo "$out" | field total_ms >>"$table.lsan"
            fi
        fi
        r=$((r + 1))
    done
    lsan_ms=$(median <"$table.lsan")
    [ -x "$lsan" ] || lsan_ms="n/a (clang missing)"
    echo "| $n | $(median <"$table.pause") | $(median <"$table.total") | $lsan_ms |" >>"$table"
done
cat "$table"
mkdir -p "$build/bench"
{
    echo
    echo "## Unreachable-memory check (bench/leaks.sh, $runs runs per size, median)"
    echo
    cat "$table"
} >>"$build/bench/results.md"
[ "$failures" -eq 0 ] || exit 1
