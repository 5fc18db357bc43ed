#!/bin/sh
# bench/symbolize.sh BUILD_DIR: how long source lines take, and that the program does not pay.
#
# 1. symbolize_workload (heap made through libc, libstdc++ and libpython) runs with the shim
#    preloaded by hand, leak_track listing its live blocks at exit with 32-frame stacks; the
#    first 10,000 lines of that log are the input.
# 2. `heapscope symbolize` on those lines, beside `heapscope report` on a heap dump made of
#    the same stacks (each module mapped at an address of its own, each frame one past its
#    call site, since the report looks dump frames up at pc - 1): the same (file, pc) pairs.
# 3. The program's own time for its work (work_ms, which it prints) with the shim preloaded by
#    hand and under `heapscope debug`, which reads and symbolizes its reports in another
#    process.
# Runs alternate (the machine is shared); medians of RUNS. Reports, never asserts, timings.
set -u
build=${1:-build}
runs=${BENCH_SYMBOLIZE_RUNS:-5}
hs="$build/bin/heapscope"
wl="$build/bench/symbolize_workload"
shim="$build/lib/libmalloc_debug.so"
if [ ! -x "$wl" ]; then
    echo "bench/symbolize.sh: skipped: $wl was not built (needs libpython3.11-dev and a C++" \
         "compiler)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
opts="backtrace=32 leak_track=100000"
LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS="$opts" HEAPSCOPE_LOG_FILE="$tmp/full.log" \
    "$wl" 2000 >/dev/null || exit 1
head -n 10000 "$tmp/full.log" >"$tmp/log"

python3 - "$tmp/log" "$tmp/dump.txt" <<'PY' >"$tmp/pairs" || exit 1
# The log's stacks as an Android heap dump with the same (file, pc) pairs.
import re, sys
frame = re.compile(r"#\d\d  pc ([0-9a-f]{16})  (/\S+)")
bases, stacks, pairs, libs = {}, [], set(), set()
for line in open(sys.argv[1]):
    if "Backtrace at time of allocation:" in line:
        stacks.append([])
        continue
    m = frame.search(line)
    if m and stacks:
        rel, path = int(m.group(1), 16), m.group(2)
        base = bases.setdefault(path, (len(bases) + 1) << 40)
        stacks[-1].append(base + rel + 1)
        pairs.add((path, rel))
with open(sys.argv[2], "w") as out:
    out.write("Android Native Heap Dump v1.2\n\nBuild fingerprint: ''\n\n")
    out.write("Total memory: %d\nAllocation records: %d\nBacktrace size: 32\n\n"
              % (16 * len(stacks), len(stacks)))
    for s in stacks:
        out.write("z 0  sz       16  num    1  bt %s\n" % " ".join("%x" % a for a in s))
    out.write("MAPS\n")
    for path, base in bases.items():
        out.write("%x-%x r-xp 00000000 00:00 0 %s\n" % (base, base + (1 << 36), path))
    out.write("END\n")
print(len(pairs), sum(len(s) for s in stacks), len(stacks))
PY
read -r pairs frames stacks <"$tmp/pairs"

median() {
    sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
seconds() {
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}
: >"$tmp/sym"
: >"$tmp/rep"
i=0
while [ $i -lt "$runs" ]; do
    seconds "$hs" symbolize "$tmp/log" >>"$tmp/sym"
    seconds "$hs" report -q -f text -o "$tmp/report.txt" "$tmp/dump.txt" >>"$tmp/rep"
    i=$((i + 1))
done
sym_lines=$("$hs" symbolize "$tmp/log" | grep -c ' [^ /]*:[0-9]*$')
echo "| symbolizing $(wc -l <"$tmp/log") log lines ($frames frame lines, $pairs distinct (file, pc), libc + libstdc++ + libpython) | seconds (median of $runs) |"
echo "|---|---:|"
echo "| heapscope symbolize ($sym_lines lines given a source line) | $(median <"$tmp/sym") |"
echo "| heapscope report on a dump of the same $stacks stacks | $(median <"$tmp/rep") |"

: >"$tmp/plain"
: >"$tmp/cmd"
i=0
while [ $i -lt "$runs" ]; do
    LD_PRELOAD="$shim" LIBC_DEBUG_MALLOC_OPTIONS="$opts" HEAPSCOPE_LOG_FILE="$tmp/p.log" \
        "$wl" 2000 2>/dev/null | sed -n 's/^work_ms=//p' >>"$tmp/plain"
    "$hs" debug -o "$opts" --log "$tmp/c.log" -- "$wl" 2000 2>/dev/null |
        sed -n 's/^work_ms=//p' >>"$tmp/cmd"
    i=$((i + 1))
done
echo
echo "| the program's own work (work_ms), shim preloaded | ms (median of $runs) |"
echo "|---|---:|"
echo "| by hand (LD_PRELOAD, log to a file) | $(median <"$tmp/plain") |"
echo "| under heapscope debug (reports symbolized by the command) | $(median <"$tmp/cmd") |"
