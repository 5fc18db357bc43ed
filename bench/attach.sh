#!/bin/sh
# bench/attach.sh BUILD_DIR: attaching the profiler to a running process started with nothing
# preloaded (`heapscope profile -p PID`: the client is loaded with ptrace, then redirects the
# program's malloc calls through its GOT until the session ends).
#
# Measures, on bench/attach_bench (1 and 2 threads; phases of 1M malloc/free pairs a thread):
#   - the attach time: from starting `heapscope profile -p` to the session connected (the
#     program's next allocation is then sampled), and the pause of the one thread that ran
#     dlopen (as the command reports it); also on bench/alloc_storm, whose threads are all
#     busy inside malloc (the injector steps one out of libc first);
#   - the program's speed before the first attach, during a session and after it ended
#     (median phase time; the after/before ratio is the overhead left behind: the goal is 1).
# Prints markdown, also written to BUILD_DIR/bench/attach.md. Timings are never asserted; the
# exit status is non-zero only when an attach fails or a checksum changes.
#
# Environment: BENCH_RUNS phases per state (7), BENCH_THREADS ("1 2").
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/profile_common.sh"

build=${1:-build}
runs=${BENCH_RUNS:-7}
threads_list=${BENCH_THREADS:-1 2}
hs_setup "$build" bench/attach.sh
prog=$build/bench/attach_bench
storm=$build/bench/alloc_storm
for f in "$prog" "$storm"; do
    if [ ! -x "$f" ]; then
        echo "bench/attach.sh: $f not found; build first (make build)" >&2
        exit 2
    fi
done
failures=0

# The command's "thread T paused X ms" figure, from its stderr in $1.
pause_of() {
    sed -n 's/.*paused \([0-9.]*\) ms.*/\1/p' "$1" | head -n 1
}

# attach PID OUTDIR SECONDS: starts `heapscope profile -p` in the background, waits until it
# says the session is connected; sets $attach_ms, $pause_ms and $profiler (its pid).
attach() {
    t0=$(now_ns)
    "$heapscope" profile -o "$2" -p "$1" --duration "$3" 2>"$2.err" &
    profiler=$!
    attach_ms=-
    for _ in $(seq 1 1000); do
        if grep -q "profiling 1 process" "$2.err" 2>/dev/null; then
            attach_ms=$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
            break
        fi
        kill -0 "$profiler" 2>/dev/null || break
        sleep 0.01
    done
    pause_ms=$(pause_of "$2.err")
    [ -n "$pause_ms" ] || pause_ms=-
    if [ "$attach_ms" = - ]; then
        echo "bench/attach.sh: attaching to $1 failed:" >&2
        cat "$2.err" >&2
        failures=$((failures + 1))
    fi
}

# phases N FILE: N phases of the running attach_bench, "MS checksum" lines appended to FILE.
phases() {
    for _ in $(seq 1 "$1"); do
        echo run >&3
        read -r _ ms sum <&4
        echo "$ms $sum" >>"$2"
    done
}

out=$build/bench/attach.md
mkdir -p "$build/bench"
{
    echo "## Attaching to a running process (bench/attach.sh)"
    echo
    echo "$(machine_line); $runs phases per state, medians. attach: from starting"
    echo "\`heapscope profile -p\` to the session connected; pause: the stop of the thread that"
    echo "ran dlopen (the other threads run on). Phase: 1M malloc/free pairs per thread."
    echo
    echo "| program | threads | attach ms | thread paused ms | phase before ms | during | after | after / before |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$out.tmp"

for threads in $threads_list; do
    dir=$tmp/t$threads
    mkdir -p "$dir"
    mkfifo "$dir/in" "$dir/out"
    "$prog" "$threads" <"$dir/in" >"$dir/out" &
    pid=$!
    exec 3>"$dir/in" 4<"$dir/out"
    read -r _ <&4 # ready pid=P
    phases 2 "$dir/warm"
    phases "$runs" "$dir/before"
    attach "$pid" "$dir/prof" 4
    phases "$runs" "$dir/during"
    wait "$profiler" || failures=$((failures + 1))
    phases 1 "$dir/warm" # its first sampled allocation finds the session over: GOT restored
    phases "$runs" "$dir/after"
    echo quit >&3
    exec 3>&- 4<&-
    wait "$pid"
    if [ "$(awk '{ print $2 }' "$dir/before" "$dir/during" "$dir/after" | sort -u | wc -l)" != 1 ]; then
        echo "bench/attach.sh: the checksum changed while attached ($threads threads)" >&2
        failures=$((failures + 1))
    fi
    before=$(median 1 "$dir/before")
    during=$(median 1 "$dir/during")
    after=$(median 1 "$dir/after")
    ratio=$(awk -v a="$after" -v b="$before" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }')
    echo "| attach_bench (idle between phases) | $threads | $attach_ms | $pause_ms | $before | $during | $after | $ratio |" >>"$out.tmp"
done

# Every thread busy inside malloc: a fresh alloc_storm per attach (the client is loaded once
# per process).
for threads in $threads_list; do
    : >"$tmp/storm_attach"
    : >"$tmp/storm_pause"
    for r in $(seq 1 3); do
        "$storm" --threads "$threads" --mib 100000000 >/dev/null &
        spid=$!
        sleep 0.3
        attach "$spid" "$tmp/storm$threads.$r" 1
        wait "$profiler" || failures=$((failures + 1))
        echo "$attach_ms" >>"$tmp/storm_attach"
        echo "$pause_ms" >>"$tmp/storm_pause"
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
    done
    echo "| alloc_storm (every thread in malloc), 3 attaches | $threads | $(median 1 "$tmp/storm_attach") | $(median 1 "$tmp/storm_pause") (max $(sort -g "$tmp/storm_pause" | tail -n 1)) | - | - | - | - |" >>"$out.tmp"
done

mv "$out.tmp" "$out"
cat "$out"
[ "$failures" = 0 ]
