#!/bin/sh
# bench/guard.sh BUILD_DIR: the cost of malloc debug's guarded memory, side by side in one run.
#
# 1. sample_guard (meant to be left on in production) against plain glibc on the benchmark
#    programs: malloc_bench with 1 and 2 threads (BENCH_OPS calls per thread; its own
#    seconds= figure), python3 running bench/profile_workloads/churn.py with
#    PYTHONMALLOC=malloc, and sqlite3 running bench/profile_workloads/sqlite.sql (wall time).
#    Rows: glibc, the shim with no options, sample_guard (default rate), and sample_guard=1000
#    for scale. BENCH_RUNS interleaved rounds (each round starts with a different
#    configuration); the ratio is the median over rounds of the ratio to the glibc run of the
#    same round. Target: sample_guard <= 1.05. Columns mb1_notrim and mb2_notrim run the same
#    with glibc's heap trimming off in every configuration (GLIBC_TUNABLES
#    glibc.malloc.trim_threshold=1 GiB): malloc_bench's arena sits where a few allocations
#    more or fewer in glibc (the sampled ones) change how often glibc trims and refaults it,
#    which these columns leave out, so they show what the sampling itself costs.
# 2. page_guard (every block on pages of its own) against the tools that catch the same bugs
#    at the access: Electric Fence and DUMA (Debian's libefence.so.0 and libduma.so.0,
#    preloaded), AddressSanitizer (malloc_bench_asan, built by clang) and Valgrind memcheck,
#    all on malloc_bench with BENCH_GUARD_OPS calls and 1 thread (BENCH_GUARD_RUNS rounds,
#    Valgrind once): seconds, ratio to glibc on the same calls, peak RSS. DUMA runs twice:
#    with its defaults (freed memory protected for ever) and with DUMA_PROTECT_FREE=0 (freed
#    memory reused, as Electric Fence's default).
#
# Writes the tables to stdout and BUILD_DIR/bench/guard.md. Timings are reported, never
# asserted; the exit status is non-zero only if a heapscope run failed (crashed, exited
# non-zero, or printed a malloc debug report). A peer that fails is shown as failed, with the
# reason, since that is a result too.
#
# Environment: BENCH_RUNS (5), BENCH_OPS (12000000), BENCH_GUARD_OPS (100000),
# BENCH_GUARD_RUNS (3), BENCH_VALGRIND=0 skips Valgrind, BENCH_PEERS=0 skips part 2,
# BENCH_PYTHON the python3 binary.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/profile_common.sh"
hs_setup "${1:-build}" bench/guard.sh
build=$hs_build
runs=${BENCH_RUNS:-5}
ops=${BENCH_OPS:-12000000}
gops=${BENCH_GUARD_OPS:-100000}
gruns=${BENCH_GUARD_RUNS:-3}
bench=$build/bench/malloc_bench
bench_asan=$build/bench/malloc_bench_asan
shim=$(cd "$build/lib" && pwd)/libmalloc_debug.so
efence=/usr/lib/libefence.so.0
duma=/usr/lib/libduma.so.0
wdir=$here/profile_workloads
python_bin=$(find_python)
sqlite_bin=$(command -v sqlite3 2>/dev/null || true)
valgrind_bin=
[ "${BENCH_VALGRIND:-1}" != 0 ] && valgrind_bin=$(command -v valgrind 2>/dev/null || true)
failures=0
notes=
for v in "$runs" "$ops" "$gops" "$gruns"; do
    case $v in '' | *[!0-9]* | 0)
        echo "bench/guard.sh: BENCH_RUNS, BENCH_OPS, BENCH_GUARD_OPS and BENCH_GUARD_RUNS must be positive numbers" >&2
        exit 2 ;;
    esac
done
[ -x "$bench" ] || { echo "bench/guard.sh: $bench not found; build first" >&2; exit 2; }

# ---- part 1: sample_guard on the benchmark programs ---------------------------------------

workloads="mb1 mb2 mb1_notrim mb2_notrim"
[ -n "$python_bin" ] && workloads="$workloads python" || notes="$notes
- python skipped: no python3 binary found."
[ -n "$sqlite_bin" ] && workloads="$workloads sqlite" || notes="$notes
- sqlite skipped: sqlite3 is not installed."
configs1="glibc shim sample sample1000"

label() {
    case $1 in
    glibc) echo "glibc" ;;
    shim) echo "malloc debug, no options" ;;
    sample) echo "sample_guard (default: one in $(sed -n 's/^#define HS_MD_DEFAULT_SAMPLE_GUARD_RATE //p' "$here/../src/malloc_debug/options.h"))" ;;
    sample1000) echo "sample_guard=1000" ;;
    pageguard) echo "page_guard (rear)" ;;
    pageguard_front) echo "page_guard=front" ;;
    efence) echo "Electric Fence 2.2 (LD_PRELOAD)" ;;
    duma) echo "DUMA 2.5 (LD_PRELOAD, defaults)" ;;
    duma_reuse) echo "DUMA 2.5, DUMA_PROTECT_FREE=0" ;;
    asan) echo "AddressSanitizer build (clang)" ;;
    valgrind) echo "Valgrind memcheck" ;;
    esac
}

# run_cfg CFG WORKLOAD OPS PREFIX: one run; sets rc, wall, rss, secs (the figure to compare)
run_cfg() {
    cfg=$1 w=$2 n=$3 base=$4
    set -- env -u LD_PRELOAD -u LIBC_DEBUG_MALLOC_OPTIONS -u LIBC_DEBUG_MALLOC_PROGRAM \
        -u HEAPSCOPE_LOG_FILE -u ASAN_OPTIONS -u EF_PROTECT_FREE -u DUMA_PROTECT_FREE \
        -u GLIBC_TUNABLES
    prog=$bench
    case $cfg in
    glibc | valgrind) ;;
    shim) set -- "$@" LD_PRELOAD="$shim" ;;
    sample) set -- "$@" LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS=sample_guard ;;
    sample1000) set -- "$@" LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS=sample_guard=1000 ;;
    pageguard) set -- "$@" LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS=page_guard ;;
    pageguard_front) set -- "$@" LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS=page_guard=front ;;
    efence) set -- "$@" LD_PRELOAD="$efence" ;;
    duma) set -- "$@" LD_PRELOAD="$duma" DUMA_DISABLE_BANNER=1 ;;
    duma_reuse) set -- "$@" LD_PRELOAD="$duma" DUMA_DISABLE_BANNER=1 DUMA_PROTECT_FREE=0 ;;
    asan) set -- "$@" ASAN_OPTIONS=detect_leaks=0; prog=$bench_asan ;;
    esac
    [ "$cfg" = valgrind ] && set -- "$@" "$valgrind_bin" --tool=memcheck -q --error-exitcode=99
    case $w in
    mb*_notrim) set -- "$@" GLIBC_TUNABLES=glibc.malloc.trim_threshold=1073741824 \
        "$prog" --threads "$(echo "$w" | tr -cd 0-9)" --ops "$n" ;;
    mb*) set -- "$@" "$prog" --threads "${w#mb}" --ops "$n" ;;
    python) set -- "$@" PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$python_bin" "$wdir/churn.py" ;;
    sqlite) set -- "$@" "$sqlite_bin" :memory: ".read $wdir/sqlite.sql" ;;
    esac
    cpu=-
    if [ -n "$time_bin" ]; then
        # Wall, user + system CPU seconds (less sensitive to other load on the machine) and
        # peak RSS.
        "$time_bin" -f '%e %U %S %M' -o "$base.time" "$@" </dev/null >"$base.out" 2>"$base.err"
        rc=$?
        set -- $(tail -n 1 "$base.time")
        wall=${1:--} cpu=$(awk -v u="${2:-}" -v s="${3:-}" 'BEGIN { if (u != "") print u + s; else print "-" }')
        rss=${4:--}
    else
        timed "$base" "$@"
    fi
    secs=$wall
    case $w in mb*) secs=$(sed -n 's/^result .* seconds=\([0-9.]*\) .*/\1/p' "$base.out") ;; esac
    [ -n "$secs" ] || secs=-
}

# check_run CFG WHAT: counts a failed heapscope run (or notes a failed peer) from $rc and
# $base.err; returns 0 when the run is good.
check_run() {
    why=
    if [ "$rc" -ne 0 ]; then
        why="exit status $rc"
    elif grep -q 'malloc_debug: \(\*\*\*\|+++\)' "$base.err"; then
        why="malloc debug reported a problem"
    fi
    [ -z "$why" ] && return 0
    case $1 in
    shim | sample* | pageguard*)
        failures=$((failures + 1))
        echo "bench/guard.sh: FAILED: $(label "$1"), $2: $why" >&2
        sed 's/^/  stderr: /' "$base.err" | head -n 20 >&2 ;;
    *)
        reason=$(grep -v '^ *$' "$base.err" | grep -iv copyright | head -n 2 | tr '\n' ' ' | cut -c1-160)
        notes="$notes
- $(label "$1"), $2: failed ($why): $reason" ;;
    esac
    return 1
}

start_time=$(date +%s)
echo "bench/guard.sh: part 1: $runs round(s) of [$configs1] on [$workloads]" >&2
"$bench" --ops 100000 >/dev/null 2>&1 # warm-up, untimed
r=1
while [ "$r" -le "$runs" ]; do
    for w in $workloads; do
        for cfg in $(rotate "$configs1" $((r - 1))); do
            base=$tmp/$cfg.$w.$r
            run_cfg "$cfg" "$w" "$ops" "$base"
            check_run "$cfg" "$w" && echo "$secs $r $rss $cpu" >>"$tmp/p1.$cfg.$w"
        done
    done
    echo "bench/guard.sh: round $r/$runs done ($(($(date +%s) - start_time)) s)" >&2
    r=$((r + 1))
done

table1=$tmp/table1.md
{
    printf '| configuration |'
    for w in $workloads; do printf ' %s |' "$w"; done
    echo
    printf '|---|'
    for w in $workloads; do printf -- '---:|'; done
    echo
    for cfg in $configs1; do
        printf '| %s |' "$(label "$cfg")"
        for w in $workloads; do
            f=$tmp/p1.$cfg.$w
            if [ ! -s "$f" ]; then
                printf ' failed |'
            elif [ "$cfg" = glibc ]; then
                printf ' %s s, %s MiB |' "$(median 1 "$f")" \
                    "$(median 3 "$f" | awk '$1 ~ /^[0-9.]+$/ { printf "%.1f", $1 / 1024; next } { print "-" }')"
            else
                ratio=$(paired_ratio "$f" "$tmp/p1.glibc.$w")
                rssr=$(paired_ratio "$f" "$tmp/p1.glibc.$w" 3)
                cpur=$(paired_ratio "$f" "$tmp/p1.glibc.$w" 4)
                printf ' %s (CPU %s, RSS %s) |' \
                    "$(echo "$ratio" | awk '$1 ~ /^[0-9.]+$/ { printf "%.3f", $1; next } { print "-" }')" \
                    "$(echo "$cpur" | awk '$1 ~ /^[0-9.]+$/ { printf "%.3f", $1; next } { print "-" }')" \
                    "$(echo "$rssr" | awk '$1 ~ /^[0-9.]+$/ { printf "%.2f", $1; next } { print "-" }')"
            fi
        done
        echo
    done
} >"$table1"

# ---- part 2: page_guard and its peers on malloc_bench -----------------------------------

table2=
if [ "${BENCH_PEERS:-1}" != 0 ]; then
    configs2="glibc pageguard pageguard_front"
    [ -f "$efence" ] && configs2="$configs2 efence" || notes="$notes
- Electric Fence skipped: $efence not found (apt-get install electric-fence)."
    [ -f "$duma" ] && configs2="$configs2 duma duma_reuse" || notes="$notes
- DUMA skipped: $duma not found (apt-get install duma)."
    [ -x "$bench_asan" ] && configs2="$configs2 asan" || notes="$notes
- AddressSanitizer skipped: $bench_asan is not built (it needs clang)."
    echo "bench/guard.sh: part 2: $gruns round(s) of [$configs2] on malloc_bench, $gops calls" >&2
    r=1
    while [ "$r" -le "$gruns" ]; do
        for cfg in $(rotate "$configs2" $((r - 1))); do
            # A peer that failed once (DUMA out of mappings) is not run again.
            [ -f "$tmp/p2.$cfg.failed" ] && continue
            base=$tmp/g.$cfg.$r
            run_cfg "$cfg" mb1 "$gops" "$base"
            if check_run "$cfg" "malloc_bench"; then
                echo "$secs $r $rss" >>"$tmp/p2.$cfg"
            else
                echo "$wall" >"$tmp/p2.$cfg.failed"
            fi
        done
        echo "bench/guard.sh: round $r/$gruns done ($(($(date +%s) - start_time)) s)" >&2
        r=$((r + 1))
    done
    if [ -n "$valgrind_bin" ]; then
        configs2="$configs2 valgrind"
        run_cfg valgrind mb1 "$gops" "$tmp/g.valgrind.1"
        base=$tmp/g.valgrind.1
        check_run valgrind malloc_bench && echo "$secs 1 $rss" >>"$tmp/p2.valgrind"
    else
        notes="$notes
- Valgrind skipped (BENCH_VALGRIND=0 or not installed)."
    fi

    table2=$tmp/table2.md
    {
        echo "| tool | seconds | ratio to glibc | peak RSS MiB | freed memory |"
        echo "|---|---:|---:|---:|---|"
        for cfg in $configs2; do
            case $cfg in
            glibc) freed="reused at once" ;;
            pageguard*) freed="PROT_NONE, quarantine of 256 MiB" ;;
            efence) freed="PROT_NONE until reused" ;;
            duma) freed="PROT_NONE, never reused" ;;
            duma_reuse) freed="reused at once" ;;
            asan) freed="poisoned, quarantine of 256 MiB" ;;
            valgrind) freed="marked, 20 MB queue" ;;
            esac
            f=$tmp/p2.$cfg
            if [ ! -s "$f" ]; then
                after=$(cat "$tmp/p2.$cfg.failed" 2>/dev/null || echo -)
                echo "| $(label "$cfg") | failed after $after s | - | - | $freed |"
                continue
            fi
            secs=$(median 1 "$f")
            ratio=$(paired_ratio "$f" "$tmp/p2.glibc")
            [ "$cfg" = valgrind ] && ratio=$(awk -v a="$secs" -v b="$(median 1 "$tmp/p2.glibc")" \
                'BEGIN { if (b > 0) print a / b; else print "-" }')
            rss=$(median 3 "$f")
            printf '| %s | %s | %s | %s | %s |\n' "$(label "$cfg")" "$secs" \
                "$(echo "$ratio" | awk '$1 ~ /^[0-9.]+$/ { printf "%.1f", $1; next } { print "-" }')" \
                "$(echo "$rss" | awk '$1 ~ /^[0-9.]+$/ { printf "%.1f", $1 / 1024; next } { print "-" }')" \
                "$freed"
        done
    } >"$table2"
fi

results=$build/bench/guard.md
{
    echo "# Guarded memory: bench/guard.sh"
    echo
    echo "$(date -u +%Y-%m-%d), $(machine_line)"
    echo
    echo "## sample_guard on the benchmark programs"
    echo
    echo "Ratio of the time to glibc's (median over $runs interleaved rounds of the same-round"
    echo "ratio; target for sample_guard: <= 1.05), then the same for the CPU time (user +"
    echo "system: less disturbed by other load on the machine) and the peak RSS. glibc's row:"
    echo "median seconds and peak RSS. mb1, mb2: malloc_bench with 1 and 2 threads, $ops calls"
    echo "per thread (its own timer); mb1_notrim, mb2_notrim: the same with glibc's heap trimming"
    echo "off in every configuration (GLIBC_TUNABLES=glibc.malloc.trim_threshold=1073741824);"
    echo "python: churn.py (PYTHONMALLOC=malloc); sqlite: sqlite.sql."
    echo
    cat "$table1"
    echo
    if [ -n "$table2" ]; then
        echo "## page_guard and its peers"
        echo
        echo "malloc_bench, 1 thread, $gops calls; median of $gruns rounds (Valgrind: 1 run)."
        echo
        cat "$table2"
    fi
    [ -n "$notes" ] && printf '%s\n' "$notes" | sed '/^$/d'
    echo
    echo "## Individual runs of part 1 (wall seconds, CPU seconds; round order)"
    echo
    for w in $workloads; do
        for cfg in $configs1; do
            [ -s "$tmp/p1.$cfg.$w" ] || continue
            printf -- '- %s, %s:' "$w" "$(label "$cfg")"
            awk '{ printf " %s/%s", $1, $4 }' "$tmp/p1.$cfg.$w"
            echo
        done
    done
} >"$results"
cat "$results"
echo "bench/guard.sh: results written to $results ($(($(date +%s) - start_time)) s)" >&2
[ "$failures" -eq 0 ]
