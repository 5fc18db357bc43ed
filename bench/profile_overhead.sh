#!/bin/sh
# bench/profile_overhead.sh BUILD_DIR: what a profiler costs a malloc-heavy program when it
# samples rarely: bench/malloc_bench (455-byte mean) at 1, 2, 4 and 8 threads under
#   glibc                            plain, the baseline of the heapscope rows
#   heapscope dormant                LD_PRELOAD of the client, no session
#   heapscope profile -i 524288      a session sampling every 512 KiB on average
#   jemalloc                         LD_PRELOAD libjemalloc.so.2, the baseline of:
#   jemalloc prof, lg_prof_sample:19 MALLOC_CONF=prof:true,lg_prof_sample:19 (512 KiB)
#   tcmalloc                         LD_PRELOAD libtcmalloc.so.4, the baseline of:
#   tcmalloc sampling 524288         TCMALLOC_SAMPLE_PARAMETER=524288 (its sampling heap
#                                    profile, stacks taken in the program)
# (the peers are skipped, with a note, when their library is missing: make deps-bench).
# The machine has 2 CPUs here: 4 and 8 threads measure contention, not parallel speed-up.
#
# Rounds are interleaved (each round runs every configuration once, starting with a different
# one); a ratio is the median over the rounds of each round's run / its baseline's run. Two
# figures per run: wall time (malloc_bench's seconds) and the workers' CPU time (cpu_seconds,
# which leaves out the time a worker waited for a CPU: steadier on a loaded machine). Prints
# a markdown table, also appended to BUILD_DIR/bench/results.md; timings are never asserted.
# The exit status is non-zero only if a run failed or printed another checksum than glibc's.
#
# Environment: BENCH_RUNS (5) rounds; BENCH_OVERHEAD_OPS (12000000, as bench/run.sh: a
#              glibc run of 3000000 lasted ~0.15 s, and its rounds moved by +-30%) calls per thread;
#              BENCH_THREADS ("1 2 4 8"); BENCH_OVERHEAD_BEFORE=DIR adds the row "heapscope
#              profile -i 524288, DIR": the heapscope command and client of another build
#              (an older commit), on the same malloc_bench, for before/after figures.
set -u
build=${1:-build}
runs=${BENCH_RUNS:-5}
ops=${BENCH_OVERHEAD_OPS:-12000000}
threads_list=${BENCH_THREADS:-1 2 4 8}
bench=$build/bench/malloc_bench
heapscope=$build/bin/heapscope
client=$build/lib/libheapprofd.so
for x in "$bench" "$heapscope"; do
    [ -x "$x" ] || { echo "bench/profile_overhead.sh: $x not found; build first" >&2; exit 2; }
done
for v in "BENCH_RUNS=$runs" "BENCH_OVERHEAD_OPS=$ops"; do
    case ${v#*=} in '' | *[!0-9]* | 0) echo "bench/profile_overhead.sh: ${v%%=*} must be a positive number" >&2; exit 2 ;; esac
done
find_lib() { ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'; }
jemalloc=${BENCH_JEMALLOC:-$(find_lib libjemalloc.so.2)}
tcmalloc=${BENCH_TCMALLOC:-$(find_lib libtcmalloc.so.4)}
before=${BENCH_OVERHEAD_BEFORE:-}
configs="glibc hsdormant hs512k"
if [ -n "$before" ]; then
    [ -x "$before/bin/heapscope" ] || { echo "bench/profile_overhead.sh: $before/bin/heapscope not found" >&2; exit 2; }
    configs="$configs hsbefore"
fi
notes=
if [ -n "$jemalloc" ]; then configs="$configs jemalloc jeprof19"; else notes="$notes
- jemalloc skipped: libjemalloc.so.2 not found (package libjemalloc2)."; fi
if [ -n "$tcmalloc" ]; then configs="$configs tcmalloc tcsample"; else notes="$notes
- tcmalloc skipped: libtcmalloc.so.4 not found (package libgoogle-perftools4)."; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

label() {
    case $1 in
    glibc) echo "glibc" ;;
    hsdormant) echo "heapscope client, dormant" ;;
    hs512k) echo "heapscope profile -i 524288" ;;
    hsbefore) echo "heapscope profile -i 524288, $before" ;;
    jemalloc) echo "jemalloc" ;;
    jeprof19) echo "jemalloc prof, lg_prof_sample:19" ;;
    tcmalloc) echo "tcmalloc" ;;
    tcsample) echo "tcmalloc, TCMALLOC_SAMPLE_PARAMETER=524288" ;;
    esac
}

base_of() {
    case $1 in
    hsdormant | hs512k | hsbefore) echo glibc ;;
    jeprof19) echo jemalloc ;;
    tcsample) echo tcmalloc ;;
    esac
}

# run CFG THREADS: prints "seconds cpu_seconds checksum"
run() {
    cfg=$1 t=$2
    set -- env -u LD_PRELOAD -u MALLOC_CONF -u HEAPPROFILE -u TCMALLOC_SAMPLE_PARAMETER \
        -u HEAPSCOPE_PROFILE_SOCKET -u HEAPSCOPE_PROFILE_PID
    case $cfg in
    hsdormant) set -- "$@" LD_PRELOAD="$client" ;;
    hs512k) set -- "$@" "$heapscope" profile -q -i 524288 -o "$tmp/out" -- ;;
    hsbefore) set -- "$@" "$before/bin/heapscope" profile -q -i 524288 -o "$tmp/out" -- ;;
    jemalloc) set -- "$@" LD_PRELOAD="$jemalloc" ;;
    jeprof19) set -- "$@" LD_PRELOAD="$jemalloc" MALLOC_CONF=prof:true,lg_prof_sample:19 ;;
    tcmalloc) set -- "$@" LD_PRELOAD="$tcmalloc" ;;
    tcsample) set -- "$@" LD_PRELOAD="$tcmalloc" TCMALLOC_SAMPLE_PARAMETER=524288 ;;
    esac
    "$@" "$bench" --threads "$t" --ops "$ops" 2>"$tmp/err" |
        sed -n 's/^result .* seconds=\([^ ]*\) .*checksum=\([^ ]*\) .*cpu_seconds=\([^ ]*\).*/\1 \3 \2/p'
    rm -rf "$tmp/out"
}

rotate() { # rotate "LIST" N: LIST starting at its (N mod length)th word
    echo "$1" | awk -v k="$2" '{ n = NF; for (i = 0; i < n; i++) printf "%s%s", $((i + k) % n + 1), (i < n - 1 ? " " : "\n") }'
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'
}

echo "bench/profile_overhead.sh: $runs round(s) of [$configs] x threads [$threads_list], $ops calls per thread" >&2
"$bench" --ops 100000 >/dev/null 2>&1 # warm the caches
for t in $threads_list; do
    r=1
    while [ "$r" -le "$runs" ]; do
        for cfg in $(rotate "$configs" $((r - 1))); do
            out=$(run "$cfg" "$t")
            if [ -z "$out" ]; then
                echo "bench/profile_overhead.sh: FAILED: $(label "$cfg"), $t thread(s): $(head -c 300 "$tmp/err")" >&2
                failures=$((failures + 1))
                continue
            fi
            echo "$out" >"$tmp/run.$t.$cfg.$r"
            set -- $out
            echo "$3" >>"$tmp/sums.$t"
        done
        r=$((r + 1))
    done
    if [ "$(sort -u "$tmp/sums.$t" | wc -l)" -gt 1 ]; then
        echo "bench/profile_overhead.sh: FAILED: checksums differ at $t thread(s)" >&2
        failures=$((failures + 1))
    fi
done

table=$tmp/table
{
    echo "| threads | configuration | wall s | wall ratio | CPU s | CPU ratio |"
    echo "|---:|---|---:|---:|---:|---:|"
} >"$table"
for t in $threads_list; do
    for cfg in $configs; do
        base=$(base_of "$cfg")
        : >"$tmp/w" && : >"$tmp/c" && : >"$tmp/rw" && : >"$tmp/rc"
        r=1
        while [ "$r" -le "$runs" ]; do
            f=$tmp/run.$t.$cfg.$r
            if [ -f "$f" ]; then
                read -r w c _ <"$f"
                echo "$w" >>"$tmp/w"
                echo "$c" >>"$tmp/c"
                if [ -n "$base" ] && [ -f "$tmp/run.$t.$base.$r" ]; then
                    read -r bw bc _ <"$tmp/run.$t.$base.$r"
                    awk -v a="$w" -v b="$bw" 'BEGIN { if (b > 0) print a / b }' >>"$tmp/rw"
                    awk -v a="$c" -v b="$bc" 'BEGIN { if (b > 0) print a / b }' >>"$tmp/rc"
                fi
            fi
            r=$((r + 1))
        done
        rw=- rc=-
        if [ -n "$base" ]; then
            rw=$(median <"$tmp/rw")
            rc=$(median <"$tmp/rc")
            [ "$rw" = - ] || rw=$(printf '%.2f' "$rw")
            [ "$rc" = - ] || rc=$(printf '%.2f' "$rc")
        fi
        echo "| $t | $(label "$cfg") | $(median <"$tmp/w") | $rw | $(median <"$tmp/c") | $rc |" >>"$table"
    done
done
cat "$table"
[ -n "$notes" ] && printf '%s\n' "$notes"
mkdir -p "$build/bench"
{
    echo
    echo "## Profilers sampling every 512 KiB (bench/profile_overhead.sh, $runs rounds, medians; ratio to the row's baseline: glibc, jemalloc or tcmalloc)"
    echo
    cat "$table"
    [ -n "$notes" ] && printf '%s\n' "$notes"
} >>"$build/bench/results.md"
[ "$failures" -eq 0 ] || exit 1
