#!/bin/sh
# bench/record_fork.sh BUILD_DIR: how long a fork takes under record_allocs, whose prepare
# handler waits until every record handed out is filled in, against plain glibc, on
# bench/fork_bench after 10^6 and 10^7 malloc/free calls (record_allocs' default table holds
# 8,000,000 records: 10^7 calls fill it). BENCH_SHIM_BASELINE=LIB adds the rows of another
# libmalloc_debug.so (an older build) for before/after figures in one run. Each figure is the
# median fork of BENCH_RECORD_FORKS (20) forks, median over BENCH_RUNS (3) runs. Timings are
# reported, never asserted; the exit status is non-zero only if a run failed.
set -u
build=${1:-build}
runs=${BENCH_RUNS:-3}
forks=${BENCH_RECORD_FORKS:-20}
prog=$build/bench/fork_bench
shim=$build/lib/libmalloc_debug.so
baseline=${BENCH_SHIM_BASELINE:-}
[ -x "$prog" ] && [ -f "$shim" ] || { echo "bench/record_fork.sh: build first" >&2; exit 2; }
[ -z "$baseline" ] || [ -f "$baseline" ] || { echo "bench/record_fork.sh: $baseline not found" >&2; exit 2; }
failed=0

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'
}

# fork_ms LIB CALLS: the median over the runs of fork_bench's median fork, in ms ("-" for LIB:
# no preload). The differences measured are several times over, so the runs are not
# interleaved.
fork_ms() {
    tmp=$(mktemp)
    r=1
    while [ "$r" -le "$runs" ]; do
        if [ "$1" = "-" ]; then
            out=$("$prog" "$2" "$forks" 2>/dev/null)
        else
            out=$(LD_PRELOAD=$1 LIBC_DEBUG_MALLOC_OPTIONS="record_allocs record_allocs_file=$tmp.rec" \
                  "$prog" "$2" "$forks" 2>/dev/null)
        fi
        v=$(echo "$out" | sed -n 's/.*fork_ms_median=\([0-9.]*\).*/\1/p')
        if [ -z "$v" ]; then
            echo "bench/record_fork.sh: run failed ($1, $2 calls)" >&2
            failed=1
        else
            echo "$v" >>"$tmp"
        fi
        r=$((r + 1))
    done
    median <"$tmp"
    rm -f "$tmp" "$tmp.rec"*
}

table=$(mktemp)
{
    echo "| calls before the forks | glibc ms | record_allocs ms |$([ -n "$baseline" ] && echo " record_allocs, baseline ms |")"
    echo "|---:|---:|---:|$([ -n "$baseline" ] && echo "---:|")"
    for calls in 1000000 10000000; do
        plain=$(fork_ms - "$calls")
        rec=$(fork_ms "$shim" "$calls")
        row="| $calls | $plain | $rec |"
        [ -n "$baseline" ] && row="$row $(fork_ms "$baseline" "$calls") |"
        echo "$row"
    done
} >"$table"
cat "$table"
mkdir -p "$build/bench"
{
    echo
    echo "## fork under record_allocs (bench/record_fork.sh, median fork of $forks, $runs runs)"
    echo
    cat "$table"
} >>"$build/bench/results.md"
rm -f "$table"
exit $failed
