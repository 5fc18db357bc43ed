#!/bin/sh
# bench/profile_overload.sh BUILD_DIR: `heapscope profile` on a program that allocates tens of
# GB/s (bench/alloc_storm: 16 B-16 KiB blocks from two call sites, freed soon after), far more
# samples at -i 4096 than the daemon can unwind. Compares a plain run, the default (the client
# blocks when the shared buffer is full, and adaptive sampling doubles the interval while it
# is over half full) and --no-block (samples are dropped when the buffer is full; adaptive
# sampling still on). Reports the slowdown, the profile's alloc_space against the bytes the
# program really asked for, the largest interval in force and the samples dropped. Prints
# markdown, also written to BUILD_DIR/bench/profile_overload.md. Run by bench/profile.sh.
#
# Environment:
#   BENCH_RUNS         runs per configuration, interleaved; medians (3)
#   BENCH_STORM_MIB    MiB each thread allocates (16384: ~0.3-0.4 s per plain run here)
#   BENCH_THREADS      thread counts ("1 2")
#
# Timings are never asserted. The exit status is non-zero only if a run failed (exit
# status, no profile, a different checksum) or the default mode dropped a sample.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/profile_common.sh"

build=${1:-build}
runs=${BENCH_RUNS:-3}
mib=${BENCH_STORM_MIB:-16384}
threads_list=${BENCH_THREADS:-1 2}
for v in "BENCH_RUNS=$runs" "BENCH_STORM_MIB=$mib"; do
    case ${v#*=} in '' | *[!0-9]* | 0) echo "bench/profile_overload.sh: ${v%%=*} must be a positive number" >&2; exit 2 ;; esac
done
hs_setup "$build" bench/profile_overload.sh
storm=$build/bench/alloc_storm
if [ ! -x "$storm" ]; then
    echo "bench/profile_overload.sh: $storm not found; build first (make build)" >&2
    exit 2
fi
failures=0
start_time=$(date +%s)
configs="plain block noblock"

cfg_label() {
    case $1 in
    plain) echo "plain (glibc)" ;;
    block) echo "heapscope profile -i 4096 (default: block, adaptive)" ;;
    noblock) echo "heapscope profile -i 4096 --no-block" ;;
    esac
}

# field KEY FILE: KEY=VALUE from alloc_storm's result line
field() {
    sed -n 's/^result .*[ ]'"$1"'=\([^ ]*\).*$/\1/p' "$2" | head -n 1
}

# site_truth SITE FILE: the bytes alloc_storm asked for at SITE
site_truth() {
    sed -n 's/^site '"$1"' calls=[0-9]* bytes=\([0-9]*\)$/\1/p' "$2"
}

# run_one CFG THREADS ROUND: appends "seconds round wall gib_per_s total_err small_err
# big_err samples dropped largest waits unknown_frees" to $tmp/res.CFG.THREADS
run_one() {
    cfg=$1 t=$2 round=$3
    base=$tmp/$cfg.$t.$round
    out=$base.d
    set -- env -u LD_PRELOAD -u HEAPSCOPE_PROFILE_SOCKET -u HEAPSCOPE_PROFILE_PID
    case $cfg in
    block) set -- "$@" "$heapscope" profile -q -i 4096 -o "$out" -- ;;
    noblock) set -- "$@" "$heapscope" profile -q -i 4096 --no-block -o "$out" -- ;;
    esac
    set -- "$@" "$storm" --threads "$t" --mib "$mib"
    timed "$base" "$@"

    bad=
    sum=$(field checksum "$base.out")
    if [ "$rc" -ne 0 ]; then
        bad="exit status $rc"
    elif [ -z "$sum" ]; then
        bad="no result line"
    elif [ -f "$tmp/sum.$t" ] && [ "$(cat "$tmp/sum.$t")" != "$sum" ]; then
        bad="checksum $sum differs from the first run's $(cat "$tmp/sum.$t")"
    fi
    [ -f "$tmp/sum.$t" ] || echo "$sum" >"$tmp/sum.$t"
    errs="- - -" samples=- dropped=- largest=- waits=- unknown=-
    if [ -z "$bad" ] && [ "$cfg" != plain ]; then
        profile=$(ls "$out"/*.final.pb.gz 2>/dev/null | head -n 1)
        if [ -z "$profile" ]; then
            bad="no profile written"
        else
            folded_by_leaf "$profile" alloc_space >"$base.bytes"
            # Errors in percent: all the program's sites together, then each site.
            errs=$(awk -v ts="$(site_truth storm_small "$base.out")" \
                -v tb="$(site_truth storm_big "$base.out")" '
                { p[$1] = $2 }
                END {
                    s = p["storm_small"] + 0; b = p["storm_big"] + 0
                    printf "%.3f %.3f %.3f\n", 100 * (s + b - ts - tb) / (ts + tb),
                        100 * (s - ts) / ts, 100 * (b - tb) / tb
                }' "$base.bytes")
            samples=$(log_samples "$out")
            dropped=$(log_dropped "$out")
            largest=$(log_largest_interval "$out")
            waits=$(log_waits "$out")
            [ "$cfg" = noblock ] && waits=-
            unknown=$(log_unknown_frees "$out")
            if [ "$cfg" = block ] && [ "$dropped" != 0 ]; then
                bad="samples dropped ($dropped) although the client blocks"
            fi
        fi
    fi
    if [ -n "$bad" ]; then
        failures=$((failures + 1))
        {
            echo "bench/profile_overload.sh: FAILED: $(cfg_label "$cfg"), $t thread(s), run $round: $bad"
            echo "  command: $*"
            sed 's/^/  stdout: /' "$base.out" | head -n 10
            sed 's/^/  stderr: /' "$base.err" | head -n 20
            sed 's/^/  heapprofd.log: /' "$out/heapprofd.log" 2>/dev/null | head -n 20
        } >&2
    else
        echo "$(field seconds "$base.out") $round $wall $(field gib_per_s "$base.out") $errs" \
            "$samples $dropped $largest $waits $unknown" >>"$tmp/res.$cfg.$t"
    fi
    rm -rf "$out"
}

echo "bench/profile_overload.sh: $runs round(s) of [$configs] x threads [$threads_list], $mib MiB per thread" >&2
"$storm" --mib 64 >/dev/null 2>&1 # warm-up, untimed
r=1
while [ "$r" -le "$runs" ]; do
    for t in $threads_list; do
        for cfg in $(rotate "$configs" $((r - 1))); do
            run_one "$cfg" "$t" "$r"
        done
    done
    r=$((r + 1))
done

# range COL FILE: "median (min to max)" of column COL, as signed percentages
range() {
    awk -v c="$1" '$c ~ /^-?[0-9.]+$/ { print $c }' "$2" | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "-"; exit }
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            if (NR == 1) printf "%+.2f%%\n", m
            else printf "%+.2f%% (%+.2f to %+.2f)\n", m, v[1], v[NR]
        }'
}

md=$tmp/overload.md
{
    echo "## Overload: alloc_storm, $mib MiB per thread from two call sites"
    echo
    echo "| threads | configuration | GiB/s | slowdown | wall s | alloc_space error, total | 1/sqrt(samples) | storm_small (16 B-1 KiB) | storm_big (1-16 KiB) | samples | largest interval | dropped | writers waited | frees of unknown blocks |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$md"
for t in $threads_list; do
    for cfg in $configs; do
        res=$tmp/res.$cfg.$t
        if [ ! -s "$res" ]; then
            echo "| $t | $(cfg_label "$cfg") | failed | - | - | - | - | - | - | - | - | - | - | - |" >>"$md"
            continue
        fi
        if [ "$cfg" = plain ]; then
            slow=baseline
        else
            slow=$(paired_ratio "$res" "$tmp/res.plain.$t" 1 | awk '$1 ~ /^[0-9.]+$/ { printf "%.2f\n", $1; next } { print }')
        fi
        samples=$(median 8 "$res")
        awk -v t="$t" -v label="$(cfg_label "$cfg")" -v gibps="$(median 4 "$res")" -v slow="$slow" \
            -v wall="$(median 3 "$res")" -v e_total="$(range 5 "$res")" -v e_small="$(range 6 "$res")" \
            -v e_big="$(range 7 "$res")" -v samples="$samples" -v largest="$(median 10 "$res")" \
            -v dropped="$(awk '$9 ~ /^[0-9]+$/ { s += $9; n++ } END { print n ? s : "-" }' "$res")" \
            -v waits="$(median 11 "$res")" -v unknown="$(median 12 "$res")" '
            function num(v, fmt) { return (v ~ /[0-9]/ && v ~ /^[0-9.e+-]+$/) ? sprintf(fmt, v) : v }
            BEGIN {
                noise = (samples ~ /^[0-9.]+$/ && samples > 0) ? sprintf("%.2f%%", 100 / sqrt(samples)) : "-"
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, label,
                    num(gibps, "%.1f"), slow, num(wall, "%.3f"), e_total, noise, e_small, e_big,
                    num(samples, "%.0f"), num(largest, "%.0f"), dropped, num(waits, "%.0f"),
                    num(unknown, "%.0f")
            }' >>"$md"
    done
done
cat >>"$md" <<EOF

- GiB/s: the bytes alloc_storm asked for per second of its own timing (median); slowdown: median over the rounds of (its seconds / the plain run's in the same round); wall s: the whole command, median
- alloc_space error: the profile's alloc_space summed over the stacks ending in each site, against the bytes the program counted (median over the runs, then the lowest and highest). An unbiased and complete profile errs by about 1/sqrt(samples) or less (sampling noise; less where blocks are not much smaller than the interval); a dropped sample loses the bytes it stood for (up to the interval in force each), so drops bias the total down
- samples, largest interval in force (adaptive sampling doubles the interval, up to 1 MiB by default, while the shared buffer is over half full; each sample carries the interval it was drawn with), writers waited (blocking mode: how often a writer found the buffer full and waited): median; dropped: summed over the runs
- frees of unknown blocks: free records the daemon could not match with a sample (heapprofd.log's tracker line), median
EOF

cat "$md"
mkdir -p "$build/bench"
cp "$md" "$build/bench/profile_overload.md"
echo "bench/profile_overload.sh: written to $build/bench/profile_overload.md ($(($(date +%s) - start_time)) s)" >&2
[ "$failures" -eq 0 ]
