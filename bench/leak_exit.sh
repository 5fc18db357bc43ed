#!/bin/sh
# bench/leak_exit.sh BUILD_DIR: the time malloc debug's leak report at exit adds, with and
# without backtraces, on bench/leak_exit_bench (10^5 leaked blocks from ~64 call paths,
# 8-23 frames deep). Each configuration is the whole program's wall time (median of
# BENCH_LEAK_EXIT_RUNS, default 3), side by side in one run:
#   plain                    no malloc debug
#   backtrace                capture only (no report): what the report time is measured from
#   leak_track               the report without backtraces (the first 1000 blocks listed)
#   leak_track backtrace     the summary by stack, then the first 1000 blocks with stacks
#   ... =N                   every block listed one by one, as Android does (N = all)
# The report's own cost is the difference to the run without leak_track. Timings are
# reported, never asserted; exit status non-zero only if a run failed.
set -u
build=${1:-build}
runs=${BENCH_LEAK_EXIT_RUNS:-3}
n=${BENCH_LEAK_EXIT_BLOCKS:-100000}
prog=$build/bench/leak_exit_bench
shim=$build/lib/libmalloc_debug.so
[ -x "$prog" ] && [ -f "$shim" ] || { echo "bench/leak_exit.sh: build first" >&2; exit 2; }

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'
}

# ms OPTIONS: the median wall time in ms of the program under OPTIONS ("-" for no preload).
ms() {
    tmp=$(mktemp)
    r=1
    while [ "$r" -le "$runs" ]; do
        start=$(date +%s%N)
        if [ "$1" = "-" ]; then
            "$prog" "$n" >/dev/null 2>"$tmp.err" || echo "bench/leak_exit.sh: run failed" >&2
        else
            LD_PRELOAD=$shim LIBC_DEBUG_MALLOC_OPTIONS="$1" "$prog" "$n" >/dev/null 2>"$tmp.err" ||
                echo "bench/leak_exit.sh: run failed: $1" >&2
        fi
        end=$(date +%s%N)
        echo $(((end - start) / 1000000)) >>"$tmp"
        r=$((r + 1))
    done
    median <"$tmp"
    rm -f "$tmp" "$tmp.err"
}

plain=$(ms -)
bt=$(ms "backtrace")
lt=$(ms "leak_track")
ltbt=$(ms "leak_track backtrace")
all=$(ms "leak_track=$n")
allbt=$(ms "leak_track=$n backtrace")
table=$(mktemp)
{
    echo "| $n leaked blocks | program ms | report ms (over the run without it) |"
    echo "|---|---:|---:|"
    echo "| no malloc debug | $plain | |"
    echo "| backtrace (no report) | $bt | |"
    echo "| leak_track | $lt | $((lt - plain)) |"
    echo "| leak_track backtrace (summary + 1000 blocks) | $ltbt | $((ltbt - bt)) |"
    echo "| leak_track=$n (every block) | $all | $((all - plain)) |"
    echo "| leak_track=$n backtrace (every block) | $allbt | $((allbt - bt)) |"
} >"$table"
cat "$table"
mkdir -p "$build/bench"
{
    echo
    echo "## Leak report at exit (bench/leak_exit.sh, $runs runs, median)"
    echo
    cat "$table"
} >>"$build/bench/results.md"
rm -f "$table"
