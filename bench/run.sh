#!/bin/sh
# bench/run.sh BUILD_DIR: times bench/malloc_bench under plain glibc, under the malloc debug
# shim (no options, guard, fill, guard fill, and the tracking options backtrace, leak_track,
# verify_pointers, free_track), as clang AddressSanitizer and LeakSanitizer builds
# (BUILD_DIR/bench/malloc_bench_asan, _lsan: their own allocators, compared with plain glibc),
# under Valgrind memcheck and massif and under heaptrack, and prints a markdown table (also
# written to BUILD_DIR/bench/results.md, and as tab-separated figures to
# BUILD_DIR/bench/results.tsv for bench/summary.py). See docs/benchmarks.md.
#
# Environment:
#   BENCH_RUNS          runs per configuration and thread count; the median is reported (5)
#   BENCH_OPS           malloc/free calls per thread (12000000: ~0.35-0.45 s per glibc run here);
#                       above 2 threads each thread makes 2 * BENCH_OPS / threads calls, so a run
#                       does the work of a 2-thread run
#   BENCH_THREADS       thread counts to measure ("1 2 4 8"; with 2 CPUs, 4 and 8 threads
#                       measure contention: more threads than cores, preempted lock holders)
#   BENCH_PEER_THREADS  thread counts for Valgrind, heaptrack and the sanitizer builds ("1 2")
#   BENCH_SHIM_BASELINE another libmalloc_debug.so (e.g. a build of an older commit): every shim
#                       configuration also runs with it, interleaved, as rows "... (baseline)"
#                       (before/after figures from one session)
#   BENCH_QUICK=1       a quick run: 3 runs of 4000000 calls, no Valgrind, heaptrack or
#                       sanitizers (explicit BENCH_RUNS / BENCH_OPS still win)
#   BENCH_VALGRIND_DIV  Valgrind runs BENCH_OPS / this many calls, time scaled back up (20)
#   BENCH_VALGRIND=0    skip Valgrind (memcheck and massif)
#   BENCH_SANITIZERS=0  skip the AddressSanitizer and LeakSanitizer builds
#   BENCH_HEAPTRACK_DIV heaptrack runs BENCH_OPS / this many calls, time scaled back up (20)
#   BENCH_HEAPTRACK=0   skip heaptrack
#
# Runs are interleaved (round r of every configuration, then round r+1; each round starts
# with a different configuration) so machine noise hits all configurations alike. Timings
# are never asserted: the verdict column is for information. The exit status is non-zero
# only if a run failed: it crashed or exited non-zero, printed a "malloc_debug:" report,
# Valgrind found an error, or its checksum differed from glibc's (the allocator changed
# what the program computed).
set -u

build=${1:-build}
if [ "${BENCH_QUICK:-0}" != 0 ]; then
    runs=${BENCH_RUNS:-3}
    ops=${BENCH_OPS:-4000000}
    want_valgrind=${BENCH_VALGRIND:-0}
    want_heaptrack=${BENCH_HEAPTRACK:-0}
    want_sanitizers=${BENCH_SANITIZERS:-0}
else
    runs=${BENCH_RUNS:-5}
    ops=${BENCH_OPS:-12000000}
    want_valgrind=${BENCH_VALGRIND:-1}
    want_heaptrack=${BENCH_HEAPTRACK:-1}
    want_sanitizers=${BENCH_SANITIZERS:-1}
fi
threads_list=${BENCH_THREADS:-1 2 4 8}
peer_threads=${BENCH_PEER_THREADS:-1 2}
vg_div=${BENCH_VALGRIND_DIV:-20}
ht_div=${BENCH_HEAPTRACK_DIV:-20}
cpus=$(nproc 2>/dev/null || echo 1)

bench=$build/bench/malloc_bench
bench_asan=$build/bench/malloc_bench_asan
bench_lsan=$build/bench/malloc_bench_lsan
if [ ! -x "$bench" ]; then
    echo "bench/run.sh: $bench not found; build first (make build)" >&2
    exit 2
fi
case $runs in '' | *[!0-9]* | 0) echo "bench/run.sh: BENCH_RUNS must be a positive number" >&2; exit 2 ;; esac
case $ops in '' | *[!0-9]* | 0) echo "bench/run.sh: BENCH_OPS must be a positive number" >&2; exit 2 ;; esac
case $vg_div in '' | *[!0-9]* | 0) echo "bench/run.sh: BENCH_VALGRIND_DIV must be a positive number" >&2; exit 2 ;; esac
case $ht_div in '' | *[!0-9]* | 0) echo "bench/run.sh: BENCH_HEAPTRACK_DIV must be a positive number" >&2; exit 2 ;; esac

shim=
if [ -f "$build/lib/libmalloc_debug.so" ]; then
    shim=$(cd "$build/lib" && pwd)/libmalloc_debug.so
fi
time_bin=
if [ -x /usr/bin/time ]; then
    time_bin=/usr/bin/time
fi
valgrind_bin=
if [ "$want_valgrind" != 0 ]; then
    valgrind_bin=$(command -v valgrind 2>/dev/null || true)
fi
heaptrack_bin=
if [ "$want_heaptrack" != 0 ]; then
    heaptrack_bin=$(command -v heaptrack 2>/dev/null || true)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapscope-bench.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
failures=0
notes=

# ---- configurations ---------------------------------------------------------------------
configs=glibc
if [ -n "$shim" ]; then
    configs="$configs shim guard fill guardfill backtrace leaktrack verifyptr freetrack"
    base_shim=${BENCH_SHIM_BASELINE:-}
    if [ -n "$base_shim" ]; then
        if [ ! -f "$base_shim" ]; then
            echo "bench/run.sh: BENCH_SHIM_BASELINE: $base_shim not found" >&2
            exit 2
        fi
        configs="$configs base_shim base_guard base_fill base_guardfill base_backtrace"
        configs="$configs base_leaktrack base_verifyptr base_freetrack"
    fi
else
    notes="$notes
- shim configurations skipped: $build/lib/libmalloc_debug.so is not built."
fi
if [ "$want_sanitizers" = 0 ]; then
    notes="$notes
- AddressSanitizer and LeakSanitizer builds skipped (BENCH_SANITIZERS=0)."
else
    for san in asan lsan; do
        if [ -x "$build/bench/malloc_bench_$san" ]; then
            configs="$configs $san"
        else
            notes="$notes
- $san skipped: $build/bench/malloc_bench_$san is not built (it needs clang)."
        fi
    done
fi

cfg_label() {
    case $1 in
    base_*) echo "$(cfg_label "${1#base_}") (baseline)" ;;
    glibc) echo "glibc" ;;
    shim) echo "shim, no options" ;;
    guard) echo "shim, guard" ;;
    fill) echo "shim, fill" ;;
    guardfill) echo "shim, guard fill" ;;
    backtrace) echo "shim, backtrace" ;;
    leaktrack) echo "shim, leak_track" ;;
    verifyptr) echo "shim, verify_pointers" ;;
    freetrack) echo "shim, free_track" ;;
    asan) echo "AddressSanitizer build (clang)" ;;
    lsan) echo "LeakSanitizer build (clang)" ;;
    valgrind) echo "valgrind memcheck" ;;
    massif) echo "valgrind massif" ;;
    heaptrack) echo "heaptrack" ;;
    esac
}
cfg_options() {
    case $1 in
    base_*) cfg_options "${1#base_}" ;;
    guard) echo "guard" ;;
    fill) echo "fill" ;;
    guardfill) echo "guard fill" ;;
    # The tracking options also log the shim's own memory at exit (own B/alloc column).
    backtrace) echo "backtrace log_allocator_stats_on_exit" ;;
    leaktrack) echo "leak_track log_allocator_stats_on_exit" ;;
    verifyptr) echo "verify_pointers log_allocator_stats_on_exit" ;;
    freetrack) echo "free_track log_allocator_stats_on_exit" ;;
    *) echo "" ;;
    esac
}
# cfg_target CFG THREADS: issue 17's targets (1 thread / 2 threads / 4 and 8 threads).
cfg_target() {
    case $1 in
    base_*) cfg_target "${1#base_}" "$2" ;;
    shim) pick "$2" 1.02 1.02 1.05 ;;
    guard | fill) pick "$2" 1.5 1.5 2.0 ;;
    backtrace | freetrack) pick "$2" 2.5 3.0 3.5 ;;
    leaktrack | verifyptr) pick "$2" 1.3 1.4 1.6 ;;
    *) echo "-" ;;
    esac
}

# pick THREADS ONE TWO MORE: "<= ONE" for 1 thread, "<= TWO" for 2, "<= MORE" above.
pick() {
    case $1 in
    1) echo "<= $2" ;;
    2) echo "<= $3" ;;
    *) echo "<= $4" ;;
    esac
}

# ops_for THREADS: calls per thread at that thread count (above 2 threads the 2-thread total is
# shared out, so that 4 and 8 threads measure contention, not more work).
ops_for() {
    if [ "$1" -gt 2 ]; then echo $((ops * 2 / $1)); else echo "$ops"; fi
}

# skip_peer CFG THREADS: true when CFG (a tool other than glibc and the shim) is not measured
# at that thread count.
skip_peer() {
    case $1 in
    asan | lsan | valgrind | massif | heaptrack) ;;
    *) return 1 ;;
    esac
    case " $peer_threads " in *" $2 "*) return 1 ;; esac
    return 0
}

# key=value field of the malloc_bench result line in file $2
field() {
    sed -n 's/^result .*[ ]'"$1"'=\([^ ]*\).*$/\1/p' "$2" | head -n 1
}

# run_one CFG THREADS OPS ROUND: one run; appends "seconds rss_kib ops round own output_kib"
# to $tmp/res.CFG.THREADS
run_one() {
    cfg=$1 t=$2 n=$3 tag=$4
    base=$tmp/$cfg.$t.$tag
    # A clean environment for the benchmark only (not for time/valgrind themselves).
    set -- env -u LD_PRELOAD -u LIBC_DEBUG_MALLOC_OPTIONS -u LIBC_DEBUG_MALLOC_PROGRAM \
        -u HEAPSCOPE_LOG_FILE -u ASAN_OPTIONS -u LSAN_OPTIONS
    prog=$bench
    case $cfg in
    glibc | valgrind | massif | heaptrack) ;;
    # ASan's leak check has its own row (LSan); malloc_bench frees everything anyway.
    asan) set -- "$@" ASAN_OPTIONS=detect_leaks=0; prog=$bench_asan ;;
    lsan) set -- "$@" LSAN_OPTIONS=detect_leaks=1; prog=$bench_lsan ;;
    shim) set -- "$@" LD_PRELOAD="$shim" ;;
    base_shim) set -- "$@" LD_PRELOAD="$base_shim" ;;
    base_*) set -- "$@" LD_PRELOAD="$base_shim" LIBC_DEBUG_MALLOC_OPTIONS="$(cfg_options "$cfg")" ;;
    *) set -- "$@" LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS="$(cfg_options "$cfg")" ;;
    esac
    if [ "$cfg" = valgrind ]; then
        set -- "$@" "$valgrind_bin" --tool=memcheck -q --error-exitcode=99
    elif [ "$cfg" = massif ]; then
        set -- "$@" "$valgrind_bin" --tool=massif -q --massif-out-file="$base.massif"
    elif [ "$cfg" = heaptrack ]; then
        set -- "$@" "$heaptrack_bin" -o "$base.heaptrack"
    fi
    set -- "$@" "$prog" --threads "$t" --ops "$n"
    if [ -n "$time_bin" ]; then
        set -- "$time_bin" -f %M -o "$base.time" "$@"
    fi
    "$@" >"$base.out" 2>"$base.err"
    rc=$?

    label=$(cfg_label "$cfg")
    bad=
    if [ "$rc" -ne 0 ]; then
        bad="exit status $rc"
    elif grep 'malloc_debug:' "$base.err" | grep -v -e 'leaked block of size' \
        -e 'Backtrace at time of allocation:' -e 'malloc_debug:           #' \
        -e 'malloc_debug: [^ ]*: glibc heap:' -e 'malloc_debug: [^ ]*: malloc debug:' | grep -q .; then
        bad="malloc debug reported a problem"
    elif [ -z "$(field seconds "$base.out")" ]; then
        bad="no result line"
    fi
    if [ -n "$bad" ]; then
        failures=$((failures + 1))
        {
            echo "bench/run.sh: FAILED: $label, $t thread(s), run $tag: $bad"
            echo "  command: $*"
            sed 's/^/  stdout: /' "$base.out"
            sed 's/^/  stderr: /' "$base.err" | head -n 40
        } >&2
        return
    fi
    # Own memory per live allocation, from the log_allocator_stats_on_exit line.
    own=$(sed -n 's/.*malloc debug: [0-9]* live allocations tracked (peak \([0-9]*\)), [0-9]* distinct backtraces, \([0-9]*\) bytes of own memory.*/\1 \2/p' "$base.err" |
        awk '$1 > 0 { printf "%.0f", $2 / $1 }')
    [ -n "$own" ] || own=-
    # Size of the profiler's output (massif's file, heaptrack's compressed one), KiB.
    okib=-
    case $cfg in
    massif | heaptrack)
        okib=$(cat "$base.$cfg"* 2>/dev/null | wc -c | awk '{ printf "%.0f", $1 / 1024 }') ;;
    esac
    if [ -s "$base.err" ] && [ "$own" = - ] && [ "$cfg" != heaptrack ]; then
        echo "bench/run.sh: note: $label, $t thread(s) wrote to stderr:" >&2
        sed 's/^/  /' "$base.err" | head -n 5 >&2
    fi

    secs=$(field seconds "$base.out")
    total=$(field ops "$base.out")
    sum=$(field checksum "$base.out")
    rss=
    if [ -n "$time_bin" ]; then
        rss=$(tail -n 1 "$base.time")
    fi
    case $rss in '' | *[!0-9]*) rss=$(field maxrss_kib "$base.out") ;; esac
    case $rss in '' | *[!0-9]*) rss=- ;; esac
    echo "$secs $rss $total $tag $own $okib" >>"$tmp/res.$cfg.$t"
    rm -f "$base.massif" "$base.heaptrack"*

    # Same workload, same result: the allocator must not change what the program computes.
    if [ "$cfg" != valgrind ] && [ "$cfg" != massif ] && [ "$cfg" != heaptrack ]; then
        if [ ! -f "$tmp/sum.$t" ]; then
            echo "$sum" >"$tmp/sum.$t"
        elif [ "$(cat "$tmp/sum.$t")" != "$sum" ]; then
            failures=$((failures + 1))
            echo "bench/run.sh: FAILED: $label, $t thread(s), run $tag: checksum $sum" \
                "differs from the first run's $(cat "$tmp/sum.$t")" >&2
        fi
    fi
}

# median of column $1 of file $2 ("-" if there is nothing numeric)
median() {
    awk -v c="$1" '$c ~ /^[0-9.]+$/ { print $c }' "$2" 2>/dev/null | sort -n | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "-"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

# paired_ratio FILE BASEFILE: median over rounds of seconds(FILE) / seconds(BASEFILE) in the
# same round ("-" if no round has both). Pairing runs that were adjacent in time cancels
# the slow drifts in machine speed that a ratio of medians would keep.
paired_ratio() {
    awk 'NR == FNR { base[$4] = $1; next }
         ($4 in base) && base[$4] > 0 { print $1 / base[$4] }' "$2" "$1" 2>/dev/null | sort -n | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "-"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

# ---- the runs ---------------------------------------------------------------------------
start_time=$(date +%s)
echo "bench/run.sh: $runs round(s) of [$configs] x threads [$threads_list], $ops ops per thread" \
    "(above 2 threads: 2 x $ops shared out); $cpus CPU(s): more threads than CPUs measure contention" >&2

# One short untimed run first, so the first measured run does not pay for cold caches.
"$bench" --ops 100000 >/dev/null 2>&1

# rotate LIST N: LIST (space-separated) rotated left by N
rotate() {
    echo "$1" | awk -v n="$2" '{ for (i = 0; i < NF; i++) printf "%s%s", (i ? " " : ""), $((i + n) % NF + 1); print "" }'
}

r=1
while [ "$r" -le "$runs" ]; do
    for t in $threads_list; do
        # Each round starts with a different configuration, so none is always first.
        for cfg in $(rotate "$configs" $((r - 1))); do
            skip_peer "$cfg" "$t" || run_one "$cfg" "$t" "$(ops_for "$t")" "$r"
        done
    done
    echo "bench/run.sh: round $r/$runs done ($(($(date +%s) - start_time)) s)" >&2
    r=$((r + 1))
done

vg_ops=$((ops / vg_div))
[ "$vg_ops" -ge 1 ] || vg_ops=1
if [ -n "$valgrind_bin" ]; then
    for t in $threads_list; do
        skip_peer valgrind "$t" && continue
        run_one valgrind "$t" "$vg_ops" 1
        run_one massif "$t" "$vg_ops" 1
    done
    echo "bench/run.sh: valgrind done ($(($(date +%s) - start_time)) s)" >&2
elif [ "$want_valgrind" = 0 ]; then
    notes="$notes
- valgrind skipped (BENCH_VALGRIND=0)."
else
    notes="$notes
- valgrind skipped: valgrind is not installed (make deps-bench installs it)."
fi

ht_ops=$((ops / ht_div))
[ "$ht_ops" -ge 1 ] || ht_ops=1
if [ -n "$heaptrack_bin" ]; then
    for t in $threads_list; do
        skip_peer heaptrack "$t" && continue
        run_one heaptrack "$t" "$ht_ops" 1
    done
    echo "bench/run.sh: heaptrack done ($(($(date +%s) - start_time)) s)" >&2
elif [ "$want_heaptrack" = 0 ]; then
    notes="$notes
- heaptrack skipped (BENCH_HEAPTRACK=0)."
else
    notes="$notes
- heaptrack skipped: heaptrack is not installed (make deps-bench installs it)."
fi

# ---- the table --------------------------------------------------------------------------
table=$tmp/table.md
tsv=$tmp/table.tsv
printf 'workload\tconfig\tlabel\ttime_ratio\trss_ratio\toutput_kib\n' >"$tsv"
{
    echo "| config | threads | median seconds | Mops/s | ratio to glibc | peak RSS MiB | RSS ratio | own B/alloc | output KiB | target | verdict |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
} >"$table"

row_configs=$configs
[ -n "$valgrind_bin" ] && row_configs="$row_configs valgrind massif"
[ -n "$heaptrack_bin" ] && row_configs="$row_configs heaptrack"
for t in $threads_list; do
    base_secs=$(median 1 "$tmp/res.glibc.$t")
    base_rss=$(median 2 "$tmp/res.glibc.$t")
    for cfg in $row_configs; do
        skip_peer "$cfg" "$t" && continue
        res=$tmp/res.$cfg.$t
        label=$(cfg_label "$cfg")
        target=$(cfg_target "$cfg" "$t")
        peer_ops=
        case $cfg in
        valgrind | massif) peer_ops=$vg_ops ;;
        heaptrack) peer_ops=$ht_ops ;;
        esac
        [ -n "$peer_ops" ] && label="$label (scaled from $peer_ops ops)"
        if [ ! -s "$res" ]; then
            echo "| $label | $t | failed | - | - | - | - | - | - | $target | - |" >>"$table"
            continue
        fi
        secs=$(median 1 "$res")
        rss=$(median 2 "$res")
        total=$(median 3 "$res")
        own=$(median 5 "$res")
        okib=$(median 6 "$res")
        scale=1
        if [ -n "$peer_ops" ]; then
            # One run: its scaled time against glibc's median.
            scale=$(awk -v a="$ops" -v b="$peer_ops" 'BEGIN { print a / b }')
            ratio=$(awk -v s="$secs" -v k="$scale" -v b="$base_secs" \
                'BEGIN { if (b ~ /^[0-9.]+$/ && b > 0) print s * k / b; else print "-" }')
        else
            ratio=$(paired_ratio "$res" "$tmp/res.glibc.$t")
        fi
        awk -v label="$label" -v t="$t" -v secs="$secs" -v scale="$scale" -v total="$total" \
            -v r="$ratio" -v rss="$rss" -v own="$own" -v target="$target" -v brss="$base_rss" \
            -v okib="$okib" -v cfg="$cfg" -v tsv="$tsv" 'BEGIN {
            s = secs * scale
            mops = total / secs / 1e6
            ratio = (r ~ /^[0-9.e+-]+$/) ? sprintf("%.2f", r) : "-"
            rss_mib = (rss ~ /^[0-9.]+$/) ? sprintf("%.1f", rss / 1024) : "n/a"
            verdict = "-"
            if (target != "-" && ratio != "-") {
                limit = target; sub(/^<= */, "", limit)
                verdict = (r + 0 <= limit + 0) ? "within" : "over"
            }
            own_b = (own ~ /^[0-9.]+$/) ? sprintf("%.0f", own) : "-"
            rr = (rss ~ /^[0-9.]+$/ && brss ~ /^[0-9.]+$/ && brss > 0) ? sprintf("%.2f", rss / brss) : "-"
            out_k = (okib ~ /^[0-9.]+$/) ? sprintf("%.0f", okib) : "-"
            printf "| %s | %s | %.3f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n", label, t, s, mops, ratio, rss_mib, rr, own_b, out_k, target, verdict
            printf "mb%s\t%s\t%s\t%s\t%s\t%s\n", t, cfg, label, ratio, rr, out_k >>tsv
        }' >>"$table"
    done
done

# Every run, for judging the noise.
runs_list=$tmp/runs.md
for t in $threads_list; do
    for cfg in $row_configs; do
        [ -s "$tmp/res.$cfg.$t" ] || continue
        awk -v label="$(cfg_label "$cfg")" -v t="$t" '
            { v = v (NR > 1 ? " " : "") $1; if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
            END { printf "- %s, %s thread(s): min %s, max %s; in run order: %s\n", label, t, lo, hi, v }' \
            "$tmp/res.$cfg.$t" >>"$runs_list"
    done
done

cat "$table"
[ -n "$notes" ] && printf '%s\n' "$notes" | sed '/^$/d'

mkdir -p "$build/bench"
results=$build/bench/results.md
{
    echo "# malloc_bench results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc 2>/dev/null || echo '?') CPU(s), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)," \
        "$(getconf GNU_LIBC_VERSION 2>/dev/null), Linux $(uname -r)"
    echo "- workload: malloc_bench --ops $ops (calls per thread), $runs runs per row, median, runs interleaved"
    echo "- threads: $threads_list (Valgrind, heaptrack and the sanitizer builds: $peer_threads); above 2 threads each thread makes 2 x $ops / threads calls (the work of a 2-thread run). This machine has $cpus CPU(s): thread counts above that measure contention (threads preempted while holding a lock, cache lines moving between cores), not parallel speed"
    echo "- targets: issue 17's, for 1 thread / 2 threads / 4 and 8 threads"
    echo "- valgrind (memcheck, massif): one run each of --ops $vg_ops per thread count, its time multiplied by $ops/$vg_ops"
    echo "- AddressSanitizer / LeakSanitizer: malloc_bench built by clang with -fsanitize=address / leak (their own allocators), ASAN_OPTIONS=detect_leaks=0 / LSAN_OPTIONS=detect_leaks=1, against plain glibc malloc_bench (built by the project's compiler)"
    echo "- RSS ratio: median peak RSS / glibc's median peak RSS at the same thread count; output KiB: massif's output file, heaptrack's compressed data file"
    echo "- heaptrack: one run of --ops $ht_ops per thread count, its time multiplied by $ops/$ht_ops"
    echo "- own B/alloc: the shim's own memory (tables, backtraces, queue; mmap'd bytes at exit) divided by the most live allocations it tracked"
    echo "- peak RSS: $([ -n "$time_bin" ] && echo "/usr/bin/time -f %M" || echo "getrusage in malloc_bench") (median over runs; valgrind's includes Valgrind itself)"
    echo "- ratio to glibc: median over the rounds of (this run's seconds / the same round's glibc run at the same thread count); valgrind: scaled seconds / glibc's median. Verdicts are informative only"
    echo
    cat "$table"
    [ -n "$notes" ] && printf '%s\n' "$notes" | sed '/^$/d'
    echo
    echo "## Individual runs (seconds)"
    echo
    cat "$runs_list"
} >"$results"
cp "$tsv" "$build/bench/results.tsv"
echo "bench/run.sh: results written to $results ($(($(date +%s) - start_time)) s)" >&2

if [ "$failures" -gt 0 ]; then
    echo "bench/run.sh: $failures run(s) FAILED (see above)" >&2
    exit 1
fi
exit 0
