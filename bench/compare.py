#!/usr/bin/env python3
"""bench/compare.py BUILD_DIR [DOCS_FILE]: `make bench-compare`, a quick check for slowdowns.

Runs a quick subset of `make bench` (a minute or two on 2 CPUs) and prints each ratio beside
the one in the last committed summary (the section of docs/benchmarks.md between
<!-- summary:begin --> and <!-- summary:end --> that bench/summary.py writes, read from git's
HEAD when the file is in a git work tree, else from the file), flagging every ratio that grew
by more than 15%:

  - bench/run.sh: malloc_bench under glibc, the shim with no options and with each option set
    (guard, fill, guard fill, backtrace, leak_track, verify_pointers, free_track), at 1 and 2
    threads, BENCH_COMPARE_RUNS runs of BENCH_COMPARE_OPS calls per thread (no Valgrind,
    heaptrack or sanitizer rows): its time ratio to glibc per configuration;
  - bench/leaks.sh: the unreachable-memory check on 10^6 blocks of 1000 bytes beside
    LeakSanitizer (when clang built leaks_bench_lsan): heapscope's total / LeakSanitizer's;
  - `heapscope profile -i 524288` on malloc_bench (1 thread, 30000000 calls, as
    bench/profile.sh runs it): wall time ratio to the plain program.

The quick runs use fewer runs and calls than `make bench`, so a ratio moves by a few percent
between runs by itself; 15% is the threshold for "look at this". Timings are never asserted:
the exit status is 0 whatever the ratios, non-zero only when a benchmark run failed (as the
scripts it runs report) or the committed summary cannot be read. Not for CI. Results of the
quick runs are written under BUILD_DIR/bench/compare/ (a full `make bench`'s files are left
alone). Standard library only.

Environment: BENCH_COMPARE_RUNS (3), BENCH_COMPARE_OPS (6000000), BENCH_COMPARE_PROFILE=0
skips the profiler, BENCH_COMPARE_LEAKS=0 skips the leak check.
"""

import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summary  # noqa: E402  (the summary's row and column names, and its markers)

THRESHOLD = 1.15
LEAK_HEAP = "1000000 x 1000 B"
PROFILE_OPS = 30000000


def positive_env(name, default):
    value = os.environ.get(name, str(default))
    if not value.isdigit() or int(value) <= 0:
        sys.exit("bench/compare.py: %s must be a positive number" % name)
    return int(value)


def committed_text(doc):
    """The committed docs/benchmarks.md (git HEAD), else the file as it is; (text, source)."""
    directory, name = os.path.split(os.path.abspath(doc))
    try:
        top = subprocess.run(["git", "-C", directory, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        rel = os.path.relpath(os.path.abspath(doc), top)
        text = subprocess.run(["git", "-C", top, "show", "HEAD:" + rel], capture_output=True,
                              text=True, check=True).stdout
        return text, "git HEAD:" + rel
    except (OSError, subprocess.CalledProcessError):
        with open(doc) as f:
            return f.read(), doc


def parse_tables(section):
    """The markdown tables of SECTION: a list of (header cells, [row cells])."""
    tables, current = [], None
    for line in section.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current is None:
            current = (cells, [])
            tables.append(current)
        elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
            current[1].append(cells)
    return tables


def number(text):
    m = re.match(r"^\s*([0-9.]+)", text or "")
    return float(m.group(1)) if m else None


def committed_ratios(text):
    """{(row label, column label): ratio} from the summary section of TEXT, and its date."""
    b, e = text.find(summary.BEGIN), text.find(summary.END)
    if b < 0 or e < b:
        raise ValueError("no %s ... %s section" % (summary.BEGIN, summary.END))
    section = text[b + len(summary.BEGIN):e]
    m = re.search(r"Measured (.*?) by make bench", section)
    when = m.group(1) if m else "at an unknown date"
    ratios = {}
    seen_time_table = False
    for header, rows in parse_tables(section):
        if header and header[0] == "tool / configuration" and not seen_time_table:
            seen_time_table = True  # the first such table has the time ratios (then RSS)
            for cells in rows:
                for col, value in zip(header[1:], cells[1:]):
                    if "†" not in value and number(value) is not None:
                        ratios[(cells[0], col)] = number(value)
        elif header and header[0] == "heap" and header[-1] == "heapscope / LeakSanitizer":
            for cells in rows:
                if number(cells[-1]) is not None:
                    ratios[(cells[0], header[-1])] = number(cells[-1])
    return ratios, when


def shadow_build(build, tmp):
    """A directory that looks like BUILD to the bench scripts but takes their output files."""
    os.makedirs(os.path.join(tmp, "bench"))
    for name in ("malloc_bench", "leaks_bench", "leaks_bench_lsan"):
        src = os.path.join(os.path.abspath(build), "bench", name)
        if os.path.exists(src):
            os.symlink(src, os.path.join(tmp, "bench", name))
    for name in ("lib", "bin"):
        src = os.path.join(os.path.abspath(build), name)
        if os.path.exists(src):
            os.symlink(src, os.path.join(tmp, name))


def run_script(args, env):
    """Runs a bench script, its stderr shown as it goes; returns its exit status."""
    print("bench/compare.py: running %s" % " ".join(args), file=sys.stderr, flush=True)
    return subprocess.run(args, env=env, stdout=subprocess.DEVNULL).returncode


def label_of(key):
    return dict((k, label) for k, label, _ in summary.ROWS)[key]


def workload_label(workload):
    return dict(summary.WORKLOADS).get(workload, workload)


def malloc_bench_ratios(shadow, runs, ops, measured):
    env = dict(os.environ, BENCH_RUNS=str(runs), BENCH_OPS=str(ops), BENCH_THREADS="1 2",
               BENCH_VALGRIND="0", BENCH_HEAPTRACK="0", BENCH_SANITIZERS="0")
    rc = run_script(["sh", os.path.join(HERE, "run.sh"), shadow], env)
    path = os.path.join(shadow, "bench", "results.tsv")
    if os.path.exists(path):
        by_config = dict((sources.get("run"), key) for key, _, sources in summary.ROWS
                         if sources.get("run"))
        with open(path, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                key = by_config.get(row["config"])
                value = number(row["time_ratio"])
                if key and key != "glibc" and value is not None:
                    measured[(label_of(key), workload_label(row["workload"]))] = value
    return rc


def leak_ratio(shadow, runs, measured):
    env = dict(os.environ, BENCH_LEAKS_RUNS=str(runs), BENCH_LEAKS_SIZES="1000000:1000")
    rc = run_script(["sh", os.path.join(HERE, "leaks.sh"), shadow], env)
    path = os.path.join(shadow, "bench", "leaks.tsv")
    if os.path.exists(path):
        with open(path, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                value = number(row.get("ratio"))
                if value is not None:
                    measured[(summary.leak_heap_label(row), "heapscope / LeakSanitizer")] = value
    return rc


def profile_ratio(build, runs, measured):
    """heapscope profile -i 524288 against the plain malloc_bench, interleaved, paired."""
    heapscope = os.path.join(build, "bin", "heapscope")
    bench = os.path.join(build, "bench", "malloc_bench")
    if not os.access(heapscope, os.X_OK) or not os.access(bench, os.X_OK):
        print("bench/compare.py: %s or %s missing: profiler skipped" % (heapscope, bench),
              file=sys.stderr)
        return 0
    print("bench/compare.py: heapscope profile -i 524288 on malloc_bench, %d rounds" % runs,
          file=sys.stderr, flush=True)
    env = dict(os.environ)
    for name in ("LD_PRELOAD", "MALLOC_CONF", "HEAPPROFILE", "HEAPSCOPE_PROFILE_SOCKET",
                 "HEAPSCOPE_PROFILE_PID", "HEAPSCOPE_PROFILE_FOLLOW", "HEAPSCOPE_LOG_FILE",
                 "LIBC_DEBUG_MALLOC_OPTIONS", "LIBC_DEBUG_MALLOC_PROGRAM"):
        env.pop(name, None)
    program = [bench, "--threads", "1", "--ops", str(PROFILE_OPS)]
    ratios, failed = [], 0
    for r in range(runs):
        out = tempfile.mkdtemp(prefix="heapscope-compare-profile.")
        try:
            walls = {}
            order = ("plain", "profile") if r % 2 == 0 else ("profile", "plain")
            for which in order:
                args = program if which == "plain" else \
                    [heapscope, "profile", "-q", "-i", "524288", "-o", out, "--"] + program
                start = time.monotonic()
                done = subprocess.run(args, env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                walls[which] = time.monotonic() - start
                if done.returncode != 0:
                    failed += 1
                    print("bench/compare.py: FAILED: %s exited with %d: %s" % (
                        " ".join(args), done.returncode, done.stderr.strip()[-400:]),
                          file=sys.stderr)
            if len(walls) == 2 and walls["plain"] > 0:
                ratios.append(walls["profile"] / walls["plain"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
    if ratios and not failed:
        measured[(label_of("hs512k"), workload_label("mb1"))] = statistics.median(ratios)
    return 1 if failed else 0


def report(measured, committed, header):
    """The comparison as markdown lines, with how many ratios grew by more than 15% and how
    many had a committed figure to compare with. MEASURED and COMMITTED map (row, column) to
    a ratio."""
    lines = [header, "", "| measurement | workload | committed | now | change | |",
             "|---|---|---:|---:|---:|---|"]
    grew = compared = 0
    for (row, col), now in measured.items():
        before = committed.get((row, col))
        if before is None or before <= 0:
            lines.append("| %s | %s | - | %.2f | - | not in the summary |" % (row, col, now))
            continue
        compared += 1
        flag = ""
        if now > before * THRESHOLD:
            grew += 1
            flag = "**grew by more than 15%**"
        lines.append("| %s | %s | %.2f | %.2f | %+.1f%% | %s |" % (
            row, col, before, now, (now / before - 1) * 100, flag))
    lines += ["", "%d of %d ratios grew by more than 15%% (for information: timings are never "
              "asserted; rerun with more runs, e.g. BENCH_COMPARE_RUNS=7, before believing one)."
              % (grew, compared)]
    return lines, grew, compared


def main(argv):
    if len(argv) < 2:
        print("usage: bench/compare.py BUILD_DIR [DOCS_FILE]", file=sys.stderr)
        return 2
    build = argv[1]
    doc = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(HERE), "docs",
                                                      "benchmarks.md")
    runs = positive_env("BENCH_COMPARE_RUNS", 3)
    ops = positive_env("BENCH_COMPARE_OPS", 6000000)
    try:
        text, source = committed_text(doc)
        committed, when = committed_ratios(text)
    except (OSError, ValueError) as err:
        print("bench/compare.py: cannot read the committed summary in %s: %s" % (doc, err),
              file=sys.stderr)
        return 2
    if not os.access(os.path.join(build, "bench", "malloc_bench"), os.X_OK):
        print("bench/compare.py: %s/bench/malloc_bench not found; build first (make build)" % build,
              file=sys.stderr)
        return 2

    start = time.monotonic()
    shadow = os.path.join(build, "bench", "compare")
    shutil.rmtree(shadow, ignore_errors=True)
    shadow_build(build, shadow)
    measured, failures = {}, 0
    failures += malloc_bench_ratios(shadow, runs, ops, measured) != 0
    if os.environ.get("BENCH_COMPARE_LEAKS", "1") != "0":
        if os.access(os.path.join(build, "bench", "leaks_bench"), os.X_OK):
            failures += leak_ratio(shadow, runs, measured) != 0
    if os.environ.get("BENCH_COMPARE_PROFILE", "1") != "0":
        failures += profile_ratio(build, runs, measured) != 0

    header = ("make bench-compare: the quick subset (bench/run.sh: %d runs of %d calls per "
              "thread; the leak check: %d runs; the profiler: %d runs), %.0f s, against the "
              "summary in %s (measured %s)." % (runs, ops, runs, runs, time.monotonic() - start,
                                                source, when))
    lines, _, _ = report(measured, committed, header)
    if failures:
        lines.append("%d benchmark script(s) reported a failed run (see above)." % failures)
    print("\n".join(lines))
    with open(os.path.join(shadow, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
