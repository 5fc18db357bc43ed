# bench/profile_common.sh: helpers shared by bench/profile.sh, bench/profile_accuracy.sh and
# bench/profile_overload.sh (sourced, not run). Defines:
#   hs_setup BUILD_DIR NAME   sets $heapscope, $time_bin / $rusage_python (peak RSS), and
#                             $tmp (a temporary directory removed at exit); NAME is for messages
#   timed PREFIX CMD...       runs CMD (stdin /dev/null, stdout PREFIX.out, stderr PREFIX.err);
#                             sets $rc, $wall (seconds) and $rss (peak KiB, or -)
#   median COL FILE, paired_ratio FILE BASEFILE, rotate LIST N
#   log_* DIR                 figures from a heapscope profile run's DIR/heapprofd.log
#   folded_by_leaf FILE VALUE prints "function total" per leaf function of the profile FILE
#   find_python               the real python3 binary (not a launcher script), or nothing
#   machine_line              a one-line description of this machine, for the results

# ---- set-up -------------------------------------------------------------------------------

hs_setup() {
    hs_build=$1
    hs_name=$2
    heapscope=$hs_build/bin/heapscope
    if [ ! -x "$heapscope" ] || [ ! -x "$hs_build/bin/heapprofd" ] ||
        [ ! -f "$hs_build/lib/libheapprofd.so" ]; then
        echo "$hs_name: $hs_build/bin/heapscope, bin/heapprofd or lib/libheapprofd.so not found;" \
            "build first (make build)" >&2
        exit 2
    fi
    # Peak RSS: /usr/bin/time, else getrusage(RUSAGE_CHILDREN) from a Python wrapper.
    time_bin=
    rusage_python=
    if [ -x /usr/bin/time ]; then
        time_bin=/usr/bin/time
    else
        rusage_python=$(find_python)
    fi
    # Wall time in nanoseconds: GNU date's %N.
    case $(date +%N 2>/dev/null) in
    '' | *[!0-9]*) ns_clock=0 ;;
    *) ns_clock=1 ;;
    esac
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapscope-profile-bench.XXXXXX") || exit 2
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 130' INT TERM
}

rss_method() {
    if [ -n "$time_bin" ]; then
        echo "/usr/bin/time -f %M"
    elif [ -n "$rusage_python" ]; then
        echo "getrusage(RUSAGE_CHILDREN) from a Python wrapper"
    else
        echo "not measured (neither /usr/bin/time nor python3 is installed)"
    fi
}

now_ns() {
    if [ "$ns_clock" = 1 ]; then
        date +%s%N
    else
        echo "$(date +%s)000000000"
    fi
}

# The Python wrapper: runs argv[2:], writes the children's peak RSS (KiB) to argv[1].
RUSAGE_WRAPPER='import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc if rc >= 0 else 128 - rc)'

# timed PREFIX CMD...: see the top. The peak RSS is that of the largest single process the
# command ran (the program, a profiler daemon or heaptrack's interpreter), not their sum.
timed() {
    t_prefix=$1
    shift
    t_start=$(now_ns)
    if [ -n "$time_bin" ]; then
        "$time_bin" -f %M -o "$t_prefix.time" "$@" </dev/null >"$t_prefix.out" 2>"$t_prefix.err"
        rc=$?
    elif [ -n "$rusage_python" ]; then
        "$rusage_python" -c "$RUSAGE_WRAPPER" "$t_prefix.time" "$@" </dev/null \
            >"$t_prefix.out" 2>"$t_prefix.err"
        rc=$?
    else
        "$@" </dev/null >"$t_prefix.out" 2>"$t_prefix.err"
        rc=$?
    fi
    t_end=$(now_ns)
    wall=$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
    rss=-
    [ -f "$t_prefix.time" ] && rss=$(tail -n 1 "$t_prefix.time")
    case $rss in '' | *[!0-9]*) rss=- ;; esac
}

# ---- statistics ---------------------------------------------------------------------------

# median of column $1 of file $2 ("-" if there is nothing numeric)
median() {
    awk -v c="$1" '$c ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ { print $c }' "$2" 2>/dev/null | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "-"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

# paired_ratio FILE BASEFILE [COL]: median over rounds of column COL (default 1) of FILE /
# the same column of BASEFILE in the same round (column 2 holds the round); "-" if no round
# has both. Pairing runs made seconds apart cancels slow drifts of the machine's speed.
paired_ratio() {
    awk -v c="${3:-1}" 'NR == FNR { base[$2] = $c; next }
         ($2 in base) && base[$2] + 0 > 0 && $c ~ /^[0-9.]+$/ { print $c / base[$2] }' \
        "$2" "$1" 2>/dev/null | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "-"; exit }
            if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

# rotate LIST N: LIST (space-separated) rotated left by N
rotate() {
    echo "$1" | awk -v n="$2" '{ for (i = 0; i < NF; i++) printf "%s%s", (i ? " " : ""), $((i + n) % NF + 1); print "" }'
}

# ---- heapscope profile's log ----------------------------------------------------------------
# Each figure is summed (or maxed) over the processes of the log; "-" when absent.

log_sum() { # log_sum DIR SED_EXPR
    sed -n "$2" "$1/heapprofd.log" 2>/dev/null | awk '{ s += $1; n++ } END { print n ? s : "-" }'
}

log_samples() { log_sum "$1" 's/.*records: [0-9]* (samples \([0-9]*\),.*/\1/p'; }
# Milliseconds the daemon took to write the final malloc profile (symbolization included).
log_write_ms() { log_sum "$1" 's/.*\.final\.pb\.gz in \([0-9]*\) ms$/\1/p'; }
log_daemon_kib() { log_sum "$1" 's/.*daemon memory: \([0-9]*\) KiB of bookkeeping.*/\1/p'; }
log_waits() { log_sum "$1" 's/.*writers waited for room \([0-9]*\) times.*/\1/p'; }
log_unknown_frees() { log_sum "$1" 's/.*frees of unknown blocks \([0-9]*\),.*/\1/p'; }

# Samples dropped: "buffer overran: no (blocking: ...)" is 0, "...: yes (N samples dropped)" N.
log_dropped() {
    sed -n 's/.*buffer overran: \(.*\)/\1/p' "$1/heapprofd.log" 2>/dev/null | awk '
        /samples dropped/ { s = $0; sub(/^[^(]*\(/, "", s); sub(/ .*/, "", s); d += s; n++; next }
        /^no/ { n++ }
        END { print n ? d + 0 : "-" }'
}

# The largest sampling interval in force (adaptive sampling raises it under load).
log_largest_interval() {
    sed -n 's/.*largest in force: \([0-9]*\);.*/\1/p' "$1/heapprofd.log" 2>/dev/null |
        awk '$1 > m { m = $1 } END { print NR ? m : "-" }'
}

# Percentage of the sampled stacks that were unwound to their end.
log_unwound_pct() {
    sed -n 's/.*unwinding: \([0-9]*\) stacks: \([0-9]*\) complete,.*/\1 \2/p' "$1/heapprofd.log" \
        2>/dev/null | awk '{ n += $1; c += $2 } END { if (n) printf "%.1f\n", 100 * c / n; else print "-" }'
}

# folded_by_leaf FILE VALUE: "function total" for each leaf frame (the function that called
# the allocator) of the profile FILE, summing every stack that ends in it.
folded_by_leaf() {
    "$heapscope" report -q --value "$2" -f folded "$1" | awk '
        {
            value = $NF
            stack = $0
            sub(/ [0-9]+$/, "", stack)
            n = split(stack, frames, ";")
            leaf = frames[n]
            sub(/ \(.*$/, "", leaf)
            total[leaf] += value
        }
        END { for (f in total) printf "%s %.0f\n", f, total[f] }'
}

# ---- the machine ----------------------------------------------------------------------------

find_python() {
    # The real binary: on a pyenv machine `python3` is a shell script, and a preloaded
    # profiler would then profile the shell. sys.executable names the interpreter itself.
    fp=${BENCH_PYTHON:-}
    if [ -z "$fp" ] && command -v python3 >/dev/null 2>&1; then
        fp=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
    fi
    if [ -n "$fp" ] && [ -x "$fp" ] && [ "$(head -c 4 "$fp" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; then
        echo "$fp"
    fi
}

machine_line() {
    echo "$(nproc 2>/dev/null || echo '?') CPU(s), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)," \
        "$(getconf GNU_LIBC_VERSION 2>/dev/null), Linux $(uname -r)"
}
