#!/bin/sh
# bench/leaks.sh BUILD_DIR: the unreachable-memory check on heaps of 10^5 and 10^6 blocks of
# 1000 bytes and 10^7 blocks of 100 bytes, and on 10^6 blocks with a busy thread beside the
# check, heapscope (libmemunreachable) side by side with LeakSanitizer's
# __lsan_do_recoverable_leak_check on the same program (bench/leaks_bench.c). Prints a
# markdown table (also appended to BUILD_DIR/bench/results.md) and writes its figures,
# tab-separated, to BUILD_DIR/bench/leaks.tsv for bench/summary.py. Timings are reported, never
# asserted; the exit status is non-zero only if a run failed or a detector missed the 10
# leaked blocks.
#
# Environment: BENCH_LEAKS_RUNS (3) runs per heap, the median is reported;
#              BENCH_LEAKS_SIZES ("100000:1000 1000000:1000 10000000:100 1000000:1000:busy"):
#              the heaps, BLOCKS:BYTES[:busy].
set -u
build=${1:-build}
runs=${BENCH_LEAKS_RUNS:-3}
sizes=${BENCH_LEAKS_SIZES:-100000:1000 1000000:1000 10000000:100 1000000:1000:busy}
hs=$build/bench/leaks_bench
lsan=$build/bench/leaks_bench_lsan
[ -x "$hs" ] || { echo "bench/leaks.sh: $hs not found; build first" >&2; exit 2; }
case $runs in '' | *[!0-9]* | 0) echo "bench/leaks.sh: BENCH_LEAKS_RUNS must be a positive number" >&2; exit 2 ;; esac
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
    echo "| blocks | bytes each | busy thread | heapscope pause ms | heapscope total ms | LeakSanitizer ms (all stopped) | heapscope / LeakSanitizer |"
    echo "|---:|---:|---|---:|---:|---:|---:|"
} >"$table"
printf 'blocks\tbytes\tbusy\tpause_ms\ttotal_ms\tlsan_ms\tratio\n' >"$table.tsv"
for spec in $sizes; do
    n=${spec%%:*}
    rest=${spec#*:}
    [ "$rest" = "$spec" ] && rest=1000
    bytes=${rest%%:*}
    busy=
    [ "${rest#*:}" = busy ] && busy=busy
    case $n$bytes in '' | *[!0-9]*) echo "bench/leaks.sh: bad heap '$spec' (BLOCKS:BYTES[:busy])" >&2; exit 2 ;; esac
    : >"$table.pause"
    : >"$table.total"
    : >"$table.lsan"
    : >"$table.ratio"
    r=1
    while [ "$r" -le "$runs" ]; do
        # Alternate which detector goes first, so machine noise hits both alike.
        for who in hs lsan; do
            [ $((r % 2)) = 0 ] && { [ "$who" = hs ] && who=lsan || who=hs; }
            if [ "$who" = hs ]; then
                out=$("$hs" "$n" "$bytes" $busy 2>&1)
                if [ "$(echo "$out" | field leaks)" != 10 ]; then
                    echo "bench/leaks.sh: FAILED: heapscope, $spec: $out" >&2
                    failures=$((failures + 1))
                else
                    echo "$out" | field pause_ms >>"$table.pause"
                    echo "$out" | field total_ms >>"$table.total"
                    hs_ms=$(echo "$out" | field total_ms)
                fi
            elif [ -x "$lsan" ]; then
                out=$(LSAN_OPTIONS=exitcode=0 "$lsan" "$n" "$bytes" $busy 2>/dev/null)
                if [ "$(echo "$out" | field leaks)" != yes ]; then
                    echo "bench/leaks.sh: FAILED: LeakSanitizer, $spec: $out" >&2
                    failures=$((failures + 1))
                else
                    echo "$out" | field total_ms >>"$table.lsan"
                    lsan_ms=$(echo "$out" | field total_ms)
                fi
            fi
        done
        # The ratio of the two runs of this round (paired: adjacent in time).
        if [ -n "${hs_ms:-}" ] && [ -n "${lsan_ms:-}" ]; then
            awk -v a="$hs_ms" -v b="$lsan_ms" 'BEGIN { if (b > 0) print a / b }' >>"$table.ratio"
        fi
        hs_ms= lsan_ms=
        r=$((r + 1))
    done
    lsan_ms=$(median <"$table.lsan")
    ratio=$(median <"$table.ratio")
    [ "$ratio" = - ] || ratio=$(printf '%.2f' "$ratio")
    [ -x "$lsan" ] || { lsan_ms="n/a (clang missing)"; ratio=-; }
    pause=$(median <"$table.pause")
    total=$(median <"$table.total")
    echo "| $n | $bytes | ${busy:+yes} | $pause | $total | $lsan_ms | $ratio |" >>"$table"
    yes_no=no
    [ -n "$busy" ] && yes_no=yes
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$bytes" "$yes_no" "$pause" "$total" \
        "$lsan_ms" "$ratio" >>"$table.tsv"
    hs_ms= lsan_ms=
done
cat "$table"
mkdir -p "$build/bench"
{
    echo
    echo "## Unreachable-memory check (bench/leaks.sh, $runs runs per heap, median; ratio: median of each round's heapscope total / LeakSanitizer total)"
    echo
    cat "$table"
} >>"$build/bench/results.md"
cp "$table.tsv" "$build/bench/leaks.tsv"
[ "$failures" -eq 0 ] || exit 1
