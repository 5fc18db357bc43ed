#!/bin/sh
# bench/profile.sh BUILD_DIR: the cost of heapscope's tools on real programs: `heapscope
# profile` (the sampling heap profiler) on them and on bench/malloc_bench, next to heaptrack,
# jemalloc's and tcmalloc's heap profilers; the malloc debug shim with its main option sets
# and Valgrind memcheck and massif on the real programs; then the profiler's accuracy
# (bench/profile_accuracy.sh) and its behaviour when a program allocates faster than the
# daemon can follow (bench/profile_overload.sh). Prints markdown tables, also written to
# BUILD_DIR/bench/profile_results.md (and the ratios, tab-separated, to
# BUILD_DIR/bench/profile_results.tsv for bench/summary.py).
#
# Workloads (each skipped, with a note, when its interpreter is missing):
#   python        bench/profile_workloads/churn.py under python3, PYTHONMALLOC=malloc
#   sqlite        sqlite3 :memory: ".read bench/profile_workloads/sqlite.sql"
#   lua           lua5.4 bench/profile_workloads/churn.lua
#   malloc_bench  bench/malloc_bench --threads T --ops BENCH_PROFILE_OPS, for each T
# Configurations, each against its baseline (the same program without the profiler):
#   glibc (plain run)                       the baseline of the heapscope and heaptrack rows
#   heapscope profile -i 4096 / 65536 / 524288
#   heaptrack -o FILE                       records every call; on malloc_bench at 1/DIV size
#   jemalloc (LD_PRELOAD)                   the baseline of:
#   jemalloc prof:true,lg_prof_sample:12    sampling every 4 KiB on average, like -i 4096
#   tcmalloc (LD_PRELOAD) at 1/DIV size     the baseline of:
#   tcmalloc HEAPPROFILE at 1/DIV size      records every call (20-100x slower: run smaller)
# and on the real programs only (python, sqlite, lua):
#   malloc debug guard fill / backtrace / leak_track / free_track
#                                           LD_PRELOAD=BUILD/lib/libmalloc_debug.so with
#                                           LIBC_DEBUG_MALLOC_OPTIONS; baseline: glibc
#   valgrind memcheck / massif at 1/DIV size   baseline: glibc at 1/DIV size
# The shim's reports on stderr (other than its leak reports and exit statistics) are listed
# in the notes, not counted as failures: only a changed program result is.
# "1/DIV size" runs the workload with BENCH_PROFILE_SLOW_DIV times fewer rounds, rows or
# calls, and its baseline at that same size (so a ratio always compares equal work).
#
# Environment:
#   BENCH_RUNS              runs per configuration; the median is reported (3)
#   BENCH_PROFILE_OPS       malloc_bench calls per thread (30000000: ~0.8 s per glibc run here)
#   BENCH_THREADS           malloc_bench thread counts ("1 2")
#   BENCH_PROFILE_SCALE     size of the script workloads in percent of their default (100)
#   BENCH_PROFILE_SLOW_DIV  size divisor for the slowest peers (20)
#   BENCH_PROFILE_PEERS=0   skip heaptrack, jemalloc and tcmalloc
#   BENCH_PROFILE_DEBUG=0   skip the malloc debug shim and Valgrind on the real programs
#   BENCH_PROFILE_ACCURACY=0, BENCH_PROFILE_OVERLOAD=0   skip those parts
#   BENCH_PYTHON            the python3 binary to use (default: the real one behind python3)
#
# Runs are interleaved (round r of every configuration, then round r+1; each round starts
# with a different configuration). Timings are never asserted. The exit status is non-zero
# only if a run failed: it exited non-zero, printed a different result than the plain run
# (the profiler changed what the program computed), wrote no profile, or (heapscope, which
# blocks rather than drops by default) dropped a sample.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/profile_common.sh"

build=${1:-build}
runs=${BENCH_RUNS:-3}
ops=${BENCH_PROFILE_OPS:-30000000}
threads_list=${BENCH_THREADS:-1 2}
scale=${BENCH_PROFILE_SCALE:-100}
slow_div=${BENCH_PROFILE_SLOW_DIV:-20}
want_peers=${BENCH_PROFILE_PEERS:-1}
want_debug=${BENCH_PROFILE_DEBUG:-1}
for v in "BENCH_RUNS=$runs" "BENCH_PROFILE_OPS=$ops" "BENCH_PROFILE_SCALE=$scale" \
    "BENCH_PROFILE_SLOW_DIV=$slow_div"; do
    case ${v#*=} in '' | *[!0-9]* | 0) echo "bench/profile.sh: ${v%%=*} must be a positive number" >&2; exit 2 ;; esac
done

hs_setup "$build" bench/profile.sh
bench=$build/bench/malloc_bench
if [ ! -x "$bench" ]; then
    echo "bench/profile.sh: $bench not found; build first (make build)" >&2
    exit 2
fi
wdir=$here/profile_workloads
failures=0
notes=

# ---- what is installed --------------------------------------------------------------------
python_bin=$(find_python)
sqlite_bin=$(command -v sqlite3 2>/dev/null || true)
lua_bin=
for l in lua5.4 lua; do
    c=$(command -v "$l" 2>/dev/null || true)
    if [ -n "$c" ] && "$c" -e 'assert(math.type)' >/dev/null 2>&1; then # 5.3 or later: `//`
        lua_bin=$c
        break
    fi
done
find_lib() { # find_lib NAME: its path, from ldconfig's cache
    ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'
}
heaptrack_bin='' jemalloc_lib='' tcmalloc_lib=''
if [ "$want_peers" != 0 ]; then
    heaptrack_bin=$(command -v heaptrack 2>/dev/null || true)
    jemalloc_lib=${BENCH_JEMALLOC:-$(find_lib libjemalloc.so.2)}
    tcmalloc_lib=${BENCH_TCMALLOC:-$(find_lib libtcmalloc.so.4)} # not _minimal: no profiler
    [ -n "$heaptrack_bin" ] || notes="$notes
- heaptrack skipped: not installed (make deps-bench installs it)."
    [ -n "$jemalloc_lib" ] || notes="$notes
- jemalloc skipped: libjemalloc.so.2 not found (package libjemalloc2)."
    [ -n "$tcmalloc_lib" ] || notes="$notes
- tcmalloc skipped: libtcmalloc.so.4 not found (package libgoogle-perftools4)."
else
    notes="$notes
- heaptrack, jemalloc and tcmalloc skipped (BENCH_PROFILE_PEERS=0)."
fi

# The malloc debug shim and Valgrind, on the real programs only.
shim_lib='' valgrind_bin=''
if [ "$want_debug" != 0 ]; then
    if [ -f "$build/lib/libmalloc_debug.so" ]; then
        shim_lib=$(cd "$build/lib" && pwd)/libmalloc_debug.so
    else
        notes="$notes
- malloc debug rows skipped: $build/lib/libmalloc_debug.so is not built."
    fi
    valgrind_bin=$(command -v valgrind 2>/dev/null || true)
    [ -n "$valgrind_bin" ] || notes="$notes
- valgrind memcheck and massif skipped: not installed (make deps-bench installs it)."
else
    notes="$notes
- malloc debug and Valgrind rows skipped (BENCH_PROFILE_DEBUG=0)."
fi
debug_configs=
[ -n "$shim_lib" ] && debug_configs="mdguardfill mdbacktrace mdleaktrack mdfreetrack"
[ -n "$valgrind_bin" ] && debug_configs="$debug_configs vgmemcheck vgmassif glibc_small"

workloads=
if [ -n "$python_bin" ]; then workloads="$workloads python"; else notes="$notes
- python workload skipped: no python3 binary found."; fi
if [ -n "$sqlite_bin" ]; then workloads="$workloads sqlite"; else notes="$notes
- sqlite workload skipped: sqlite3 is not installed."; fi
if [ -n "$lua_bin" ]; then workloads="$workloads lua"; else notes="$notes
- lua workload skipped: lua5.4 is not installed."; fi
for t in $threads_list; do
    workloads="$workloads mb$t"
done

py_rounds=$((100 * scale / 100))
lua_rounds=$((60 * scale / 100))
sql_rows=$((200000 * scale / 100))

# ---- configurations -----------------------------------------------------------------------
configs="glibc hs4k hs64k hs512k"
[ -n "$heaptrack_bin" ] && configs="$configs heaptrack"
[ -n "$jemalloc_lib" ] && configs="$configs jemalloc jeprof"
[ -n "$tcmalloc_lib" ] && configs="$configs tcmalloc tcheap"

# The configurations of workload $1 (malloc_bench's heaptrack runs and the Valgrind runs
# need a small glibc run; the shim and Valgrind run on the real programs only).
workload_configs() {
    case $1 in
    mb*) [ -n "$heaptrack_bin" ] && { echo "$configs glibc_small"; return; } ;;
    *) echo "$configs $debug_configs"; return ;;
    esac
    echo "$configs"
}

md_options() {
    case $1 in
    mdguardfill) echo "guard fill" ;;
    mdbacktrace) echo "backtrace" ;;
    mdleaktrack) echo "leak_track" ;;
    mdfreetrack) echo "free_track" ;;
    esac
}

cfg_label() {
    case $1 in
    glibc | glibc_small) echo "glibc" ;;
    hs4k) echo "heapscope profile -i 4096" ;;
    hs64k) echo "heapscope profile -i 65536" ;;
    hs512k) echo "heapscope profile -i 524288" ;;
    heaptrack) echo "heaptrack" ;;
    jemalloc) echo "jemalloc" ;;
    jeprof) echo "jemalloc prof, lg_prof_sample:12" ;;
    tcmalloc) echo "tcmalloc" ;;
    tcheap) echo "tcmalloc HEAPPROFILE" ;;
    md*) echo "malloc debug, $(md_options "$1")" ;;
    vgmemcheck) echo "valgrind memcheck" ;;
    vgmassif) echo "valgrind massif" ;;
    esac
}

# cfg_base WORKLOAD CFG: the configuration CFG is compared with (empty for a baseline)
cfg_base() {
    case $2 in
    hs* | md*) echo glibc ;;
    vg*) echo glibc_small ;;
    heaptrack) case $1 in mb*) echo glibc_small ;; *) echo glibc ;; esac ;;
    jeprof) echo jemalloc ;;
    tcheap) echo tcmalloc ;;
    esac
}

# cfg_div WORKLOAD CFG: the size divisor of the run
cfg_div() {
    case $2 in
    tcmalloc | tcheap | glibc_small | vg*) echo "$slow_div" ;;
    heaptrack) case $1 in mb*) echo "$slow_div" ;; *) echo 1 ;; esac ;;
    *) echo 1 ;;
    esac
}

workload_label() {
    case $1 in
    python) echo "python: churn.py ($py_rounds rounds), PYTHONMALLOC=malloc, $python_bin" ;;
    sqlite) echo "sqlite: sqlite3 :memory: \".read sqlite.sql\" ($sql_rows rows)" ;;
    lua) echo "lua: $(basename "$lua_bin") churn.lua ($lua_rounds rounds)" ;;
    mb*) echo "malloc_bench --threads ${1#mb} --ops $ops" ;;
    esac
}

# The program's result lines, which must not depend on the allocator or the profiler.
result_of() { # result_of WORKLOAD FILE
    case $1 in
    python) grep '^churn\.py ' "$2" ;;
    lua) grep '^churn\.lua ' "$2" ;;
    sqlite) grep '|' "$2" ;;
    mb*) sed -n 's/^result .* checksum=\([^ ]*\).*/\1/p' "$2" ;;
    esac
}

# Size of the profiler's output in DIR, in KiB (its log excluded).
output_kib() {
    find "$1" -type f ! -name heapprofd.log -exec cat {} + 2>/dev/null | wc -c |
        awk '{ printf "%.0f\n", $1 / 1024 }'
}

# ---- one run ------------------------------------------------------------------------------

# shquote ARGS...: each argument single-quoted, for eval
shquote() {
    for a in "$@"; do
        printf "'%s' " "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"
    done
}

# workload_words WORKLOAD DIV: the workload's command line at 1/DIV size, quoted for eval
workload_words() {
    case $1 in
    python) shquote "$python_bin" "$wdir/churn.py" $((py_rounds / $2 > 0 ? py_rounds / $2 : 1)) ;;
    lua) shquote "$lua_bin" "$wdir/churn.lua" $((lua_rounds / $2 > 0 ? lua_rounds / $2 : 1)) ;;
    sqlite) shquote "$sqlite_bin" :memory: \
        ".parameter set @rows $((sql_rows / $2 > 0 ? sql_rows / $2 : 1))" ".read $wdir/sqlite.sql" ;;
    mb*) shquote "$bench" --threads "${1#mb}" --ops $((ops / $2 > 0 ? ops / $2 : 1)) ;;
    esac
}

# The program's environment: a clean one, plus what the workload needs.
clean_env_words() {
    shquote env -u LD_PRELOAD -u MALLOC_CONF -u HEAPPROFILE -u HEAPSCOPE_PROFILE_SOCKET \
        -u HEAPSCOPE_PROFILE_PID -u HEAPSCOPE_PROFILE_FOLLOW -u HEAPSCOPE_LOG_FILE \
        -u LIBC_DEBUG_MALLOC_OPTIONS -u LIBC_DEBUG_MALLOC_PROGRAM
    [ "$1" = python ] && shquote PYTHONMALLOC=malloc PYTHONHASHSEED=0
}

hs_interval() {
    case $1 in
    hs4k) echo 4096 ;;
    hs64k) echo 65536 ;;
    hs512k) echo 524288 ;;
    esac
}

# run_one WORKLOAD CFG ROUND: appends "wall round rss samples dropped daemon_kib largest
# unwound_pct output_kib" to $tmp/res.WORKLOAD.CFG
run_one() {
    w=$1 cfg=$2 round=$3
    div=$(cfg_div "$w" "$cfg")
    base=$tmp/$w.$cfg.$round
    out=$base.d
    mkdir -p "$out"
    # A clean environment for the program (not for the timer).
    eval "set -- $(clean_env_words "$w")"
    case $cfg in
    hs*) set -- "$@" "$heapscope" profile -q -i "$(hs_interval "$cfg")" -o "$out" -- ;;
    heaptrack) set -- "$@" "$heaptrack_bin" -o "$out/heaptrack" ;;
    jemalloc) set -- "$@" LD_PRELOAD="$jemalloc_lib" ;;
    jeprof) set -- "$@" LD_PRELOAD="$jemalloc_lib" \
        MALLOC_CONF="prof:true,lg_prof_sample:12,prof_final:true,prof_prefix:$out/jeprof" ;;
    tcmalloc) set -- "$@" LD_PRELOAD="$tcmalloc_lib" ;;
    tcheap) set -- "$@" LD_PRELOAD="$tcmalloc_lib" HEAPPROFILE="$out/tc" ;;
    md*) set -- "$@" LD_PRELOAD="$shim_lib" LIBC_DEBUG_MALLOC_OPTIONS="$(md_options "$cfg")" ;;
    vgmemcheck) set -- "$@" "$valgrind_bin" --tool=memcheck -q ;;
    vgmassif) set -- "$@" "$valgrind_bin" --tool=massif -q --massif-out-file="$out/massif.out" ;;
    esac
    eval "set -- \"\$@\" $(workload_words "$w" "$div")"
    timed "$base" "$@"

    label="$(cfg_label "$cfg"), $w, run $round"
    bad=
    result=$(result_of "$w" "$base.out")
    if [ "$rc" -ne 0 ]; then
        bad="exit status $rc"
    elif [ -z "$result" ]; then
        bad="no result printed"
    fi
    samples=- dropped=- dkib=- largest=- unwound=- okib=- wms=-
    case $cfg in
    hs*)
        samples=$(log_samples "$out")
        dropped=$(log_dropped "$out")
        dkib=$(log_daemon_kib "$out")
        largest=$(log_largest_interval "$out")
        unwound=$(log_unwound_pct "$out")
        wms=$(log_write_ms "$out")
        if [ -z "$bad" ] && ! ls "$out"/*.final.pb.gz >/dev/null 2>&1; then
            bad="no profile written"
        elif [ -z "$bad" ] && [ "$dropped" != 0 ]; then
            bad="samples dropped ($dropped) although the client blocks"
        fi
        ;;
    heaptrack | jeprof | tcheap | vgmassif)
        if [ -z "$bad" ] && [ -z "$(find "$out" -type f -size +0 2>/dev/null)" ]; then
            bad="no profile written"
        fi
        ;;
    esac
    case $cfg in hs* | heaptrack | jeprof | tcheap | vgmassif) okib=$(output_kib "$out") ;; esac
    # The shim's reports other than the expected ones (leaks at exit, exit statistics), and
    # memcheck's error reports: listed in the notes (once per workload and configuration).
    case $cfg in
    md* | vgmemcheck)
        if [ "$cfg" = vgmemcheck ]; then
            grep '^==[0-9]*== ' "$base.err" >"$base.reports"
        else
            grep 'malloc_debug:' "$base.err" | grep -v -e 'leaked block of size' \
                -e 'Backtrace at time of allocation:' -e 'malloc_debug:           #' \
                -e 'malloc_debug: [^ ]*: glibc heap:' -e 'malloc_debug: [^ ]*: malloc debug:' \
                >"$base.reports"
        fi
        leaks=$(grep -c 'leaked block of size' "$base.err")
        if [ "$leaks" -gt 0 ] && [ ! -f "$tmp/leaknote.$w.$cfg" ]; then
            : >"$tmp/leaknote.$w.$cfg"
            notes="$notes
- $(cfg_label "$cfg"), $w: the shim reported $leaks block(s) still allocated at exit (expected: the program does not free everything before exiting)."
        fi
        if [ -s "$base.reports" ] && [ ! -f "$tmp/reportnote.$w.$cfg" ]; then
            : >"$tmp/reportnote.$w.$cfg"
            echo "bench/profile.sh: note: $(cfg_label "$cfg"), $w, run $round reported:" >&2
            sed 's/^/  /' "$base.reports" | head -n 10 >&2
            notes="$notes
- $(cfg_label "$cfg"), $w: reported $(wc -l <"$base.reports") line(s) on stderr (not a failure: the program's result was checked), first: \`$(head -n 1 "$base.reports" | cut -c 1-160)\`"
        fi
        ;;
    esac
    if [ -z "$bad" ]; then
        # Same work, same result, whatever the allocator or the profiler.
        ref=$tmp/result.$w.$div
        if [ ! -f "$ref" ]; then
            printf '%s\n' "$result" >"$ref"
        elif [ "$(cat "$ref")" != "$result" ]; then
            bad="its result differs from the first run's: $(echo "$result" | head -n 1)"
        fi
    fi
    if [ -n "$bad" ]; then
        failures=$((failures + 1))
        {
            echo "bench/profile.sh: FAILED: $label: $bad"
            echo "  command: $*"
            sed 's/^/  stdout: /' "$base.out" | head -n 10
            sed 's/^/  stderr: /' "$base.err" | head -n 20
            [ -f "$out/heapprofd.log" ] && sed 's/^/  heapprofd.log: /' "$out/heapprofd.log" | head -n 20
        } >&2
    else
        echo "$wall $round $rss $samples $dropped $dkib $largest $unwound $okib $wms" >>"$tmp/res.$w.$cfg"
    fi
    rm -rf "$out"
}

# ---- the runs -----------------------------------------------------------------------------
start_time=$(date +%s)
echo "bench/profile.sh: $runs round(s) of [$configs] x [$workloads]${debug_configs:+, and [$debug_configs] on the real programs}" >&2

# Warm the caches (binaries, the workload files) once, untimed.
"$bench" --ops 100000 >/dev/null 2>&1
"$heapscope" profile -q -o "$tmp/warm" -- "$bench" --ops 100000 >/dev/null 2>&1
rm -rf "$tmp/warm"

# The fixed cost of a profiled run (starting the daemon, writing an empty profile).
r=1
while [ "$r" -le 3 ]; do
    timed "$tmp/fixed.$r" "$heapscope" profile -q -o "$tmp/fixed.d" -- true
    echo "$wall" >>"$tmp/fixed"
    r=$((r + 1))
done
fixed_ms=$(median 1 "$tmp/fixed" | awk '$1 ~ /^[0-9.]+$/ { printf "%.0f", $1 * 1000; next } { print "?" }')
rm -rf "$tmp/fixed.d"

r=1
while [ "$r" -le "$runs" ]; do
    for w in $workloads; do
        for cfg in $(rotate "$(workload_configs "$w")" $((r - 1))); do
            run_one "$w" "$cfg" "$r"
        done
    done
    echo "bench/profile.sh: round $r/$runs done ($(($(date +%s) - start_time)) s)" >&2
    r=$((r + 1))
done

# ---- memory runs --------------------------------------------------------------------------
# The timed runs' peak RSS is that of the largest process, the program or heapprofd. One more
# run per workload and heapscope interval, untimed, tells them apart: heapscope runs from a
# private copy whose heapprofd is a Python wrapper that reports the real daemon's peak RSS
# (getrusage of its child), and --follow-children lets /usr/bin/time (or the Python rusage
# wrapper) stand between heapscope and the program, to report the program's.
mem_python=$(find_python)
membin=
if [ -n "$mem_python" ]; then
    membin=$tmp/membin
    mkdir -p "$membin"
    cp "$heapscope" "$membin/heapscope"
    cat >"$membin/heapprofd" <<EOF
#!$mem_python
# heapprofd, wrapped by bench/profile.sh: runs the real daemon (\$HS_BENCH_REAL_DAEMON) with
# the same arguments and its --ready-fd, passes the stop signals on, and appends its peak RSS
# in KiB to \$HS_BENCH_DAEMON_RSS.
import os, signal, subprocess, sys
args = sys.argv[1:]
ready = int(args[args.index("--ready-fd") + 1]) if "--ready-fd" in args else -1
child = subprocess.Popen([os.environ["HS_BENCH_REAL_DAEMON"]] + args,
                         pass_fds=(ready,) if ready >= 0 else ())
if ready >= 0:
    os.close(ready)  # the daemon's end of the pipe is the daemon's alone
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda sig, frame: child.send_signal(sig))
_, status, usage = os.wait4(child.pid, 0)
with open(os.environ["HS_BENCH_DAEMON_RSS"], "a") as f:
    f.write("%d\n" % usage.ru_maxrss)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
EOF
    chmod +x "$membin/heapprofd"
    real_daemon=$(cd "$build/bin" && pwd)/heapprofd
    libdir=$(cd "$build/lib" && pwd)
else
    notes="$notes
- program / daemon RSS not measured: no python3 binary for the daemon's wrapper."
fi

# mem_run WORKLOAD CFG: writes "program_kib daemon_kib" to $tmp/mem.WORKLOAD.CFG
mem_run() {
    w=$1 cfg=$2
    base=$tmp/memrun.$w.$cfg
    out=$base.d
    eval "set -- $(clean_env_words "$w")"
    set -- "$@" HEAPSCOPE_LIBDIR="$libdir" HS_BENCH_REAL_DAEMON="$real_daemon" \
        HS_BENCH_DAEMON_RSS="$base.daemon" \
        "$membin/heapscope" profile -q -i "$(hs_interval "$cfg")" --follow-children -o "$out" --
    if [ -n "$time_bin" ]; then
        set -- "$@" "$time_bin" -f %M -o "$base.program"
    else
        set -- "$@" "$mem_python" -c "$RUSAGE_WRAPPER" "$base.program"
    fi
    eval "set -- \"\$@\" $(workload_words "$w" 1)"
    "$@" </dev/null >"$base.out" 2>"$base.err"
    rc=$?
    prss=$(tail -n 1 "$base.program" 2>/dev/null)
    drss=$(awk '$1 > m { m = $1 } END { print m }' "$base.daemon" 2>/dev/null)
    case "$rc.$prss.$drss" in
    0.[0-9]*.[0-9]*)
        echo "$prss $drss" >"$tmp/mem.$w.$cfg"
        ;;
    *)
        failures=$((failures + 1))
        {
            echo "bench/profile.sh: FAILED: memory run of $(cfg_label "$cfg"), $w: exit status $rc," \
                "program RSS '$prss', daemon RSS '$drss'"
            echo "  command: $*"
            sed 's/^/  stdout: /' "$base.out" | head -n 10
            sed 's/^/  stderr: /' "$base.err" | head -n 20
        } >&2
        ;;
    esac
    rm -rf "$out"
}

if [ -n "$membin" ]; then
    for w in $workloads; do
        for cfg in hs4k hs64k hs512k; do
            mem_run "$w" "$cfg"
        done
    done
    echo "bench/profile.sh: memory runs done ($(($(date +%s) - start_time)) s)" >&2
fi

# ---- the tables ---------------------------------------------------------------------------
table=$tmp/table.md
: >"$table"
tsv=$tmp/table.tsv
printf 'workload\tconfig\tlabel\ttime_ratio\trss_ratio\toutput_kib\tsize\n' >"$tsv"
for w in $workloads; do
    {
        echo
        echo "### $(workload_label "$w")"
        echo
        echo "| configuration | size | runs | wall s | time ratio | peak RSS MiB | RSS ratio | program / daemon RSS MiB | output KiB | samples | dropped | largest interval | unwound % | daemon KiB (log) | profile written, ms |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    } >>"$table"
    for cfg in $(workload_configs "$w"); do
        res=$tmp/res.$w.$cfg
        div=$(cfg_div "$w" "$cfg")
        size=full
        [ "$div" -gt 1 ] && size="1/$div"
        bcfg=$(cfg_base "$w" "$cfg")
        label=$(cfg_label "$cfg")
        if [ ! -s "$res" ]; then
            echo "| $label | $size | 0 | failed | - | - | - | - | - | - | - | - | - | - | - |" >>"$table"
            continue
        fi
        n=$(wc -l <"$res")
        if [ -n "$bcfg" ]; then
            tr=$(paired_ratio "$res" "$tmp/res.$w.$bcfg" 1)
            rr=$(paired_ratio "$res" "$tmp/res.$w.$bcfg" 3)
            vs=" vs $(cfg_label "$bcfg")"
        else
            tr=baseline rr=- vs=
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$cfg" "$label" "$tr" "$rr" "$(median 9 "$res")" \
            "$size" >>"$tsv"
        rsssplit=-
        [ -s "$tmp/mem.$w.$cfg" ] && rsssplit=$(awk '{ printf "%.1f / %.1f", $1 / 1024, $2 / 1024 }' "$tmp/mem.$w.$cfg")
        awk -v label="$label" -v size="$size" -v n="$n" -v wall="$(median 1 "$res")" -v rsssplit="$rsssplit" \
            -v tr="$tr" -v vs="$vs" -v rss="$(median 3 "$res")" -v rr="$rr" \
            -v okib="$(median 9 "$res")" -v samples="$(median 4 "$res")" \
            -v dropped="$(awk '$5 ~ /^[0-9]+$/ { s += $5; n++ } END { print n ? s : "-" }' "$res")" \
            -v largest="$(median 7 "$res")" -v unwound="$(median 8 "$res")" \
            -v dkib="$(median 6 "$res")" -v wms="$(median 10 "$res")" 'function num(v, fmt) { return (v ~ /[0-9]/ && v ~ /^[0-9.e+-]+$/) ? sprintf(fmt, v) : v }
            BEGIN {
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    label, size, n, num(wall, "%.3f"), (tr == "baseline") ? "baseline" : num(tr, "%.2f") vs,
                    (rss ~ /^[0-9.]+$/) ? sprintf("%.1f", rss / 1024) : "n/a", num(rr, "%.2f"), rsssplit,
                    num(okib, "%.0f"), num(samples, "%.0f"), dropped, num(largest, "%.0f"),
                    num(unwound, "%.1f"), num(dkib, "%.0f"), num(wms, "%.0f")
            }' >>"$table"
    done
done

# Every run, for judging the noise.
runs_list=$tmp/runs.md
: >"$runs_list"
for w in $workloads; do
    for cfg in $(workload_configs "$w"); do
        [ -s "$tmp/res.$w.$cfg" ] || continue
        div=$(cfg_div "$w" "$cfg")
        size=
        [ "$div" -gt 1 ] && size=" (1/$div size)"
        awk -v label="$w, $(cfg_label "$cfg")$size" '
            { v = v (NR > 1 ? " " : "") $1 }
            END { printf "- %s: %s\n", label, v }' "$tmp/res.$w.$cfg" >>"$runs_list"
    done
done

legend="- time ratio: median over the rounds of (this run's wall time / its baseline's in the same round); the baseline is plain glibc for heapscope and heaptrack, jemalloc alone for jemalloc prof, tcmalloc alone for HEAPPROFILE, at the same size
- wall s: the whole command, median (for heapscope: starting its daemon, the run, writing the profile; a profiled run of /bin/true takes $fixed_ms ms here)
- size 1/$slow_div: the workload with $slow_div times fewer rounds, rows or calls (these peers record every call and are 10-100x slower), and its baseline at the same size
- peak RSS: $(rss_method): the largest single process of the run (the program, heapprofd, or heaptrack's interpreter), not their sum; RSS ratio paired like the time ratio
- program / daemon RSS: one more (untimed) run per heapscope row that measures the two apart: the profiled program's peak RSS (it includes the client's 8 MiB shared buffer and its sampled-address table, up to 8 MiB once touched) and heapprofd's own peak RSS (getrusage of the daemon: everything it mapped and touched, its symbolizer and unwinder included)
- output: the profile files written (heapscope: .pb.gz; heaptrack: .zst; jemalloc: prof_final's .heap; tcmalloc: its .heap dumps)
- heapscope columns from heapprofd.log (median over runs; dropped: summed): samples = sampled allocations; dropped = samples lost to a full buffer (the client blocks by default, so always 0); largest interval = the largest sampling interval in force (adaptive sampling doubles it while the shared buffer is over half full); unwound % = stacks unwound to their end; daemon KiB (log) = the log's \"daemon memory: N KiB of bookkeeping for this process\" (its tables and caches for the process, as it counts them; the daemon's whole RSS is in the prog / daemon RSS column); profile written = how long the daemon took to symbolize and write the final profile after the program exited, part of the wall time (a fixed cost, not a slowdown of the program)
- malloc debug: LD_PRELOAD=libmalloc_debug.so with LIBC_DEBUG_MALLOC_OPTIONS as shown (real programs only); valgrind memcheck (-q) and massif at 1/$slow_div size against glibc at the same size; massif's output is its massif.out file
- jemalloc prof samples every 2^12 = 4096 bytes on average, like -i 4096; heaptrack and tcmalloc HEAPPROFILE record every call"

cat "$table"
echo
printf '%s\n' "$legend"
[ -n "$notes" ] && printf '%s\n' "$notes" | sed '/^$/d'

# ---- accuracy and overload ----------------------------------------------------------------
mkdir -p "$build/bench"
extra_md=
if [ "${BENCH_PROFILE_ACCURACY:-1}" != 0 ]; then
    echo >&2
    sh "$here/profile_accuracy.sh" "$build" || failures=$((failures + 1))
    extra_md="$extra_md $build/bench/profile_accuracy.md"
fi
if [ "${BENCH_PROFILE_OVERLOAD:-1}" != 0 ]; then
    echo >&2
    sh "$here/profile_overload.sh" "$build" || failures=$((failures + 1))
    extra_md="$extra_md $build/bench/profile_overload.md"
fi

results=$build/bench/profile_results.md
{
    echo "# heapscope profile: cost, accuracy, overload"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(machine_line)"
    echo "- $runs runs per row, interleaved, median"
    echo
    echo "## Cost on real programs and malloc_bench"
    cat "$table"
    echo
    printf '%s\n' "$legend"
    [ -n "$notes" ] && printf '%s\n' "$notes" | sed '/^$/d'
    for f in $extra_md; do
        [ -f "$f" ] || continue
        echo
        cat "$f"
    done
    echo
    echo "## Individual runs (wall seconds, in run order)"
    echo
    cat "$runs_list"
} >"$results"
cp "$tsv" "$build/bench/profile_results.tsv"
echo "bench/profile.sh: results written to $results ($(($(date +%s) - start_time)) s)" >&2

if [ "$failures" -gt 0 ]; then
    echo "bench/profile.sh: $failures run(s) or part(s) FAILED (see above)" >&2
    exit 1
fi
exit 0
