#!/bin/sh
# bench/profile_accuracy.sh BUILD_DIR: how close `heapscope profile` gets to the truth.
# Runs bench/malloc_bench --ground-truth (1 and 2 threads) under `heapscope profile -i 4096`
# and `-i 1`, sums the profile's alloc_space (and alloc_objects) per call site (every stack
# whose leaf frame, the function that called the allocator, is the site's function) and
# compares them with what the program counted itself. Verdicts: at -i 4096 every site holding
# at least 1% of the bytes within 10% (a statistical check: ~4 standard errors at the
# smallest site, so a miss is reported but is not a failure); at -i 1 every site exact, bytes
# and calls (a miss there is a failure). Prints markdown, also written to
# BUILD_DIR/bench/profile_accuracy.md. Run by bench/profile.sh.
#
# Environment:
#   BENCH_ACCURACY_OPS        malloc_bench calls per thread at -i 4096 (12000000)
#   BENCH_ACCURACY_EXACT_OPS  the same at -i 1, where every call is a record (1500000)
#   BENCH_THREADS             thread counts ("1 2")
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/profile_common.sh"

build=${1:-build}
ops=${BENCH_ACCURACY_OPS:-12000000}
exact_ops=${BENCH_ACCURACY_EXACT_OPS:-1500000}
threads_list=${BENCH_THREADS:-1 2}
for v in "BENCH_ACCURACY_OPS=$ops" "BENCH_ACCURACY_EXACT_OPS=$exact_ops"; do
    case ${v#*=} in '' | *[!0-9]* | 0) echo "bench/profile_accuracy.sh: ${v%%=*} must be a positive number" >&2; exit 2 ;; esac
done
hs_setup "$build" bench/profile_accuracy.sh
bench=$build/bench/malloc_bench
if [ ! -x "$bench" ]; then
    echo "bench/profile_accuracy.sh: $bench not found; build first (make build)" >&2
    exit 2
fi

# malloc_bench's call sites (its site_names[]): each is a function that calls the allocator.
sites="alloc_small_16_64 alloc_small_64_256 calloc_site alloc_medium_256_4k realloc_grow alloc_large_64k"
failures=0
start_time=$(date +%s)
md=$tmp/accuracy.md
{
    echo "## Accuracy: malloc_bench's call sites, profiled vs --ground-truth"
    echo
} >"$md"

# check THREADS INTERVAL OPS
check() {
    t=$1 interval=$2 n=$3
    dir=$tmp/acc.$t.$interval
    timed "$dir.run" "$heapscope" profile -q -i "$interval" -o "$dir" -- \
        "$bench" --threads "$t" --ops "$n" --ground-truth
    profile=$(ls "$dir"/*.final.pb.gz 2>/dev/null | head -n 1)
    if [ "$rc" -ne 0 ] || [ -z "$profile" ] || ! grep -q '^total_allocating ' "$dir.run.out"; then
        failures=$((failures + 1))
        {
            echo "bench/profile_accuracy.sh: FAILED: -i $interval, $t thread(s): exit status $rc," \
                "profile '${profile:-none}'"
            sed 's/^/  stdout: /' "$dir.run.out" | head -n 20
            sed 's/^/  stderr: /' "$dir.run.err" | head -n 20
            sed 's/^/  heapprofd.log: /' "$dir/heapprofd.log" 2>/dev/null | head -n 20
        } >&2
        echo "### -i $interval, $t thread(s): the run FAILED (see the log)" >>"$md"
        echo >>"$md"
        return
    fi
    # "site calls bytes" from the ground truth; "site bytes" and "site objects" from the profile.
    awk -v list="$sites" 'BEGIN { split(list, s, " "); for (i in s) want[s[i]] = 1 }
        ($1 in want) { print $1, $2, $3 }' "$dir.run.out" >"$dir.truth"
    folded_by_leaf "$profile" alloc_space >"$dir.bytes"
    folded_by_leaf "$profile" alloc_objects >"$dir.objects"

    samples=$(log_samples "$dir")
    largest=$(log_largest_interval "$dir")
    dropped=$(log_dropped "$dir")
    {
        echo "### -i $interval, $t thread(s): malloc_bench --threads $t --ops $n"
        echo
        echo "$samples samples, largest interval in force $largest, dropped $dropped," \
            "$(awk -v s="$wall" 'BEGIN { printf "%.1f", s }') s wall."
        echo
        echo "| site | true calls | true bytes | % of bytes | profiled objects | profiled bytes | bytes error % |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
    } >>"$md"
    # The table and the verdict: awk reads the truth, the profile's bytes, then its objects.
    awk -v interval="$interval" -v t="$t" -v truth_file="$dir.truth" -v objects_file="$dir.objects" '
        BEGIN {
            while ((getline line < truth_file) > 0) {
                split(line, f, " ")
                order[++nsites] = f[1]; calls[f[1]] = f[2]; bytes[f[1]] = f[3]; total += f[3]
            }
            while ((getline line < objects_file) > 0) { split(line, f, " "); objects[f[1]] = f[2] }
        }
        { prof[$1] = $2 }
        END {
            ok = 1; worst = 0
            for (i = 1; i <= nsites; i++) {
                s = order[i]
                p = prof[s] + 0; o = objects[s] + 0
                err = bytes[s] > 0 ? 100 * (p - bytes[s]) / bytes[s] : 0
                share = total > 0 ? 100 * bytes[s] / total : 0
                if (interval == 1) {
                    if (p != bytes[s] || o != calls[s]) ok = 0
                } else if (share >= 1) {
                    if (err > 10 || err < -10) ok = 0
                    if (err > worst || -err > worst) worst = err < 0 ? -err : err
                }
                printf "| %s | %.0f | %.0f | %.1f | %.0f | %.0f | %+.2f |\n", s, calls[s], bytes[s], share, o, p, err
                ptotal += p
            }
            other = 0; other_n = 0
            for (fn in prof) {
                known = 0
                for (i = 1; i <= nsites; i++) if (order[i] == fn) known = 1
                if (!known) { other += prof[fn]; other_n++ }
            }
            printf "| (all sites) | | %.0f | 100.0 | | %.0f | %+.2f |\n", total, ptotal, total ? 100 * (ptotal - total) / total : 0
            printf "| (other stacks: libc'"'"'s own, %d leaf functions) | | | | | %.0f | |\n", other_n, other
            print ""
            if (interval == 1)
                printf "Verdict (-i 1, %s thread(s)): %s\n", t, ok ? "EXACT: every site'"'"'s bytes and calls equal the ground truth" : "NOT EXACT: some site differs from the ground truth"
            else
                printf "Verdict (-i %s, %s thread(s)): %s (largest error of a site with >= 1%% of the bytes: %.2f%%)\n", interval, t, ok ? "PASS: every site with >= 1% of the bytes is within 10%" : "MISS: a site with >= 1% of the bytes is off by more than 10%", worst
            print ""
            exit ok ? 0 : 1
        }' "$dir.bytes" >>"$md"
    verdict_rc=$?
    if [ "$verdict_rc" -ne 0 ] && [ "$interval" = 1 ]; then
        failures=$((failures + 1))
        echo "bench/profile_accuracy.sh: FAILED: -i 1, $t thread(s): the profile is not exact" >&2
    elif [ "$verdict_rc" -ne 0 ]; then
        echo "bench/profile_accuracy.sh: note: -i $interval, $t thread(s): a site is off by more than 10%" >&2
    fi
    rm -rf "$dir"
}

for t in $threads_list; do
    check "$t" 4096 "$ops"
    check "$t" 1 "$exact_ops"
    echo "bench/profile_accuracy.sh: $t thread(s) done ($(($(date +%s) - start_time)) s)" >&2
done

cat >>"$md" <<'EOF'
Notes on the accuracy tables:

- true calls and bytes: malloc_bench --ground-truth, summed over threads; profiled: the
  profile's alloc_objects and alloc_space summed over every stack whose leaf frame is the
  site's function (`heapscope report -q --value alloc_space -f folded`). At -i 4096 both are
  estimates (each sample stands for the interval it was drawn with; allocations of at least
  the interval are reported exactly), so only bytes are judged; at -i 1 both must be exact.
- realloc: malloc_bench counts each realloc() call of realloc_grow as one call of the new
  size (realloc(NULL) included) and does not count the old block; the profiler reports each
  realloc as a free of the old block (when it was sampled) and an allocation of the new size,
  so the site's alloc_space and alloc_objects are directly comparable (in-use figures would
  not be, and are not compared).
- other stacks: libc's own allocations (thread stacks' TLS, stdio's buffer), which are no
  call site of malloc_bench.
EOF

cat "$md"
mkdir -p "$build/bench"
cp "$md" "$build/bench/profile_accuracy.md"
echo "bench/profile_accuracy.sh: written to $build/bench/profile_accuracy.md ($(($(date +%s) - start_time)) s)" >&2
[ "$failures" -eq 0 ]
