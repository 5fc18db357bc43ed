#!/usr/bin/env python3
"""bench/summary.py BUILD_DIR [DOCS_DIR]: one summary of `make bench`.

Reads the figures bench/run.sh and bench/profile.sh wrote next to their markdown results
(BUILD_DIR/bench/results.tsv and BUILD_DIR/bench/profile_results.tsv: workload, config,
label, time_ratio, rss_ratio, output_kib[, size]) and writes

  BUILD_DIR/bench/summary.md   two tables, rows = tools and configurations, columns =
                               workloads (malloc_bench 1, 2, 4 and 8 threads, python, sqlite,
                               lua),
                               cells = time ratio, then peak RSS ratio, to the baseline; and
                               the leak check against LeakSanitizer (BUILD_DIR/bench/leaks.tsv,
                               from bench/leaks.sh), one row per heap
  DOCS_DIR/benchmarks.svg      a bar chart of the time ratios (log scale, by workload)
  DOCS_DIR/benchmarks.md       the part between <!-- summary:begin --> and
                               <!-- summary:end --> replaced by the tables (left alone if the
                               markers are missing)

DOCS_DIR defaults to the docs/ directory next to this script's. A missing input file is
skipped with a note. Standard library only. Exits non-zero only when it cannot write.
"""

import csv
import datetime
import math
import os
import platform
import re
import sys

WORKLOADS = [
    ("mb1", "malloc_bench, 1 thread"),
    ("mb2", "malloc_bench, 2 threads"),
    ("mb4", "malloc_bench, 4 threads"),
    ("mb8", "malloc_bench, 8 threads"),
    ("python", "python"),
    ("sqlite", "sqlite"),
    ("lua", "lua"),
]

# (row key, row label, {source: config}) in table order. A cell comes from bench/run.sh
# ("run") when it has it, else from bench/profile.sh ("profile").
ROWS = [
    ("glibc", "glibc (the baseline)", {"run": "glibc", "profile": "glibc"}),
    ("shim", "malloc debug, no options", {"run": "shim"}),
    ("guard", "malloc debug, guard", {"run": "guard"}),
    ("fill", "malloc debug, fill", {"run": "fill"}),
    ("guardfill", "malloc debug, guard fill", {"run": "guardfill", "profile": "mdguardfill"}),
    ("backtrace", "malloc debug, backtrace", {"run": "backtrace", "profile": "mdbacktrace"}),
    ("leaktrack", "malloc debug, leak_track", {"run": "leaktrack", "profile": "mdleaktrack"}),
    ("verifyptr", "malloc debug, verify_pointers", {"run": "verifyptr"}),
    ("freetrack", "malloc debug, free_track", {"run": "freetrack", "profile": "mdfreetrack"}),
    ("hs4k", "heapscope profile -i 4096", {"profile": "hs4k"}),
    ("hs64k", "heapscope profile -i 65536", {"profile": "hs64k"}),
    ("hs512k", "heapscope profile -i 524288", {"profile": "hs512k"}),
    ("heaptrack", "heaptrack", {"run": "heaptrack", "profile": "heaptrack"}),
    ("jeprof", "jemalloc prof (vs jemalloc)", {"profile": "jeprof"}),
    ("tcheap", "tcmalloc HEAPPROFILE (vs tcmalloc)", {"profile": "tcheap"}),
    ("valgrind", "Valgrind memcheck", {"run": "valgrind", "profile": "vgmemcheck"}),
    ("massif", "Valgrind massif", {"run": "massif", "profile": "vgmassif"}),
    ("asan", "AddressSanitizer build (clang)", {"run": "asan"}),
    ("lsan", "LeakSanitizer build (clang)", {"run": "lsan"}),
]

# Bar colours of the chart, one per row (hand-picked, distinguishable on white).
COLOURS = [
    "#444444", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b", "#3f007d",
    "#6a51a3", "#31a354", "#74c476", "#c7e9c0", "#e6550d", "#fd8d3c", "#fdae6b", "#bcbddc",
    "#d9d9d9", "#de2d26", "#fb6a4a", "#ce1256", "#df65b0",
]

BEGIN = "<!-- summary:begin -->"
END = "<!-- summary:end -->"


def number(text):
    """The float in TEXT (a ratio or a size), or None."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_tsv(path, notes):
    """{(workload, config): row dict} from PATH, {} (and a note) if it is missing."""
    if not os.path.exists(path):
        notes.append("%s not found: its figures are left out (run the script that writes it)."
                     % path)
        return {}
    with open(path, newline="") as f:
        return {(r["workload"], r["config"]): r for r in csv.DictReader(f, delimiter="\t")}


def cell(figures, key, workload, column):
    """(value, scaled) for ROWS entry KEY at WORKLOAD: COLUMN is time_ratio or rss_ratio."""
    sources = dict((k, c) for k, _, c in ROWS)[key]
    for source in ("run", "profile"):
        config = sources.get(source)
        row = figures[source].get((workload, config)) if config else None
        if row is None:
            continue
        if key == "glibc":
            return 1.0, False
        value = number(row.get(column))
        if value is None:
            continue
        scaled = "scaled" in row.get("label", "") or row.get("size", "full") not in ("", "full")
        return value, scaled
    return None, False


LEAKS_HEADER = ("| heap | heapscope pause ms | heapscope total ms | LeakSanitizer ms (all "
                "stopped) | heapscope / LeakSanitizer |")


def leak_heap_label(row):
    """The heap of a bench/leaks.sh row, as the leak table names it ("1000000 x 1000 B")."""
    label = "%s x %s B" % (row.get("blocks", "?"), row.get("bytes", "?"))
    return label + (", busy thread" if row.get("busy") == "yes" else "")


def leaks_table(path, notes):
    """The leak check's table from bench/leaks.sh's TSV at PATH ([] and a note if missing)."""
    if not os.path.exists(path):
        notes.append("%s not found: no leak check figures (run bench/leaks.sh)." % path)
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    lines = [LEAKS_HEADER, "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (leak_heap_label(r), r.get("pause_ms", "-"),
                                                    r.get("total_ms", "-"), r.get("lsan_ms", "-"),
                                                    r.get("ratio", "-")))
    return lines if rows else []


def header_value(path, prefix):
    """The rest of the first line of PATH starting with PREFIX, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
    except OSError:
        pass
    return None


def table(figures, column, present):
    lines = [
        "| tool / configuration | " + " | ".join(label for _, label in WORKLOADS) + " |",
        "|---|" + "---:|" * len(WORKLOADS),
    ]
    for key, label, _ in ROWS:
        if key not in present:
            continue
        cells = []
        for w, _ in WORKLOADS:
            value, scaled = cell(figures, key, w, column)
            if value is None:
                cells.append("-")
            else:
                cells.append("%.2f%s" % (value, " †" if scaled else ""))
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    return lines


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_chart(figures, present, measured):
    """A grouped bar chart of the time ratios, log scale, as SVG text."""
    rows = [(k, label, COLOURS[i % len(COLOURS)]) for i, (k, label, _) in enumerate(ROWS)
            if k in present and k != "glibc"]
    values = [cell(figures, k, w, "time_ratio")[0] for k, _, _ in rows for w, _ in WORKLOADS]
    values = [v for v in values if v is not None and v > 0]
    lo = 0.5
    hi = max([2.0] + values) * 1.8  # room for the value labels above the tallest bar
    bar_w, gap = 11, 26
    left, top, plot_h = 70, 50, 380
    groups = []
    for w, wlabel in WORKLOADS:
        bars = [(k, label, colour, cell(figures, k, w, "time_ratio")[0]) for k, label, colour in rows]
        bars = [b for b in bars if b[3] is not None and b[3] > 0]
        if bars:
            groups.append((wlabel, bars))
    plot_w = sum(len(b) * bar_w + gap for _, b in groups) + gap
    width = max(left + plot_w + 20, 760)
    legend_cols = 3
    legend_rows = (len(rows) + legend_cols - 1) // legend_cols
    height = top + plot_h + 60 + legend_rows * 18 + 30

    def y(v):
        v = min(max(v, lo), hi)
        return top + plot_h - (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) * plot_h

    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">' % (width, height, width, height),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="%d" y="22" font-size="16" font-weight="bold">make bench: wall time ratio to the '
        'baseline (log scale; lower is better)</text>' % left,
        '<text x="%d" y="40" fill="#555">%s</text>' % (left, esc(measured)),
    ]
    # Grid lines and the axis.
    for t in [0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]:
        if lo <= t <= hi:
            ty = y(t)
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" %s/>' % (
                left, ty, left + plot_w, ty, "#000" if t == 1 else "#ddd",
                'stroke-dasharray="4 3"' if t == 1 else ""))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%gx</text>' % (left - 6, ty + 4, t))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>' % (left, top, left, top + plot_h))
    out.append('<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">time / baseline'
               '</text>' % (top + plot_h // 2))
    # The bars, with their values above them.
    x = left + gap
    for wlabel, bars in groups:
        gx = x
        for k, label, colour, v in bars:
            by = y(v)
            out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s, %s: '
                       '%.2f</title></rect>' % (x, by, bar_w - 1, top + plot_h - by, colour,
                                                esc(label), esc(wlabel), v))
            out.append('<text transform="translate(%.1f %.1f) rotate(-90)" font-size="9">%s</text>' % (
                x + bar_w / 2 + 3, by - 3, ("%.1f" % v) if v < 100 else ("%.0f" % v)))
            x += bar_w
        out.append('<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>' % (
            (gx + x) / 2, top + plot_h + 18, esc(wlabel)))
        x += gap
    # The legend, in columns under the plot.
    col_w = (width - left) // legend_cols
    ly0 = top + plot_h + 44
    for i, (k, label, colour) in enumerate(rows):
        lx = left + (i // legend_rows) * col_w
        ly = ly0 + (i % legend_rows) * 18
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (lx, ly, colour))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 18, ly + 10, esc(label)))
    out.append('<text x="%d" y="%d" fill="#555">Rows measured at a smaller size (Valgrind, '
               'tcmalloc HEAPPROFILE, heaptrack on malloc_bench) and the baselines: see '
               'docs/benchmarks.md.</text>' % (left, ly0 + legend_rows * 18 + 14))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2:
        print("usage: bench/summary.py BUILD_DIR [DOCS_DIR]", file=sys.stderr)
        return 2
    build = argv[1]
    docs = argv[2] if len(argv) > 2 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    bdir = os.path.join(build, "bench")
    notes = []
    figures = {
        "run": read_tsv(os.path.join(bdir, "results.tsv"), notes),
        "profile": read_tsv(os.path.join(bdir, "profile_results.tsv"), notes),
    }
    present = [k for k, _, _ in ROWS
               if any(cell(figures, k, w, "time_ratio")[0] is not None for w, _ in WORKLOADS)]
    if not present:
        print("bench/summary.py: no figures found in %s; nothing written" % bdir, file=sys.stderr)
        for n in notes:
            print("  " + n, file=sys.stderr)
        return 0

    # When: bench/run.sh's date (the start of the measurements), else now.
    when = (header_value(os.path.join(bdir, "results.md"), "- date: ")
            or header_value(os.path.join(bdir, "profile_results.md"), "- date: ")
            or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    runs = []
    value = header_value(os.path.join(bdir, "results.md"), "- workload: ")
    m = re.search(r"--ops (\d+).*?(\d+) runs per row", value or "")
    if m:
        runs.append("bench/run.sh: runs per row %s, malloc_bench --ops %s" % (m.group(2), m.group(1)))
    try:
        with open(os.path.join(bdir, "profile_results.md")) as f:
            m = re.search(r"^- (\d+) runs per row", f.read(), re.M)
        if m:
            runs.append("bench/profile.sh: runs per row %s" % m.group(1))
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))  # what nproc prints
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 0
    measured = "Measured %s by make bench on %d CPU(s) (nproc), %s, %s%s" % (
        when, cpus, platform.machine(), platform.platform(terse=True),
        "; " + "; ".join(runs) if runs else "")

    md = [
        measured + ".",
        "",
        "Wall time ratio to the baseline (median of the paired runs; the baseline is plain glibc "
        "running the same program, except for the jemalloc and tcmalloc profilers, compared with "
        "the same allocator without profiling):",
        "",
    ]
    md += table(figures, "time_ratio", present)
    md += ["", "Peak RSS ratio to the same baseline:", ""]
    md += table(figures, "rss_ratio", present)
    md += [
        "",
        "- †: measured at a smaller size (1/20 of the calls, rounds or rows by default): on the "
        "real programs against glibc at the same size; on malloc_bench its time is scaled up and "
        "compared with glibc's at full size (its RSS ratio is to glibc's at full size too).",
        "- malloc_bench columns: the shim, sanitizer, Valgrind and heaptrack rows from "
        "`bench/run.sh` (BUILD/bench/results.md), the profiler rows from `bench/profile.sh` "
        "(BUILD/bench/profile_results.md, with its own --ops); python, sqlite and lua from "
        "`bench/profile.sh`. The AddressSanitizer and LeakSanitizer builds (clang) replace "
        "malloc: their ratio is to glibc malloc_bench. Peak RSS of Valgrind and heaptrack "
        "includes the tool itself. With %d CPU(s), malloc_bench at 4 and 8 threads (each thread "
        "making 2/threads of the calls of a 2-thread run) measures contention; Valgrind, "
        "heaptrack and the sanitizer builds run at 1 and 2 threads only." % (os.cpu_count() or 1),
        "- The chart: [benchmarks.svg](benchmarks.svg).",
    ]
    leaks = leaks_table(os.path.join(bdir, "leaks.tsv"), notes)
    if leaks:
        md += ["", "Unreachable-memory check (`bench/leaks.sh`): heapscope's whole check and its "
               "pause against LeakSanitizer's recoverable check on the same heap (median; the ratio "
               "is the median of each round's pair):", ""]
        md += leaks
    accuracy = os.path.join(bdir, "profile_accuracy.md")
    verdicts = []
    try:
        with open(accuracy) as f:
            verdicts = [line.strip()[len("Verdict "):] for line in f if line.startswith("Verdict (")]
    except OSError:
        notes.append("%s not found: no accuracy figures (BENCH_PROFILE_ACCURACY=0?)." % accuracy)
    if verdicts:
        md += ["", "Per-call-site accuracy of `heapscope profile` against malloc_bench's ground truth "
               "(bytes per call site; details in BUILD/bench/profile_accuracy.md):", ""]
        md += ["- " + v for v in verdicts]
    if notes:
        md.append("")
    for n in notes:
        md.append("- " + n)

    os.makedirs(bdir, exist_ok=True)
    with open(os.path.join(bdir, "summary.md"), "w") as f:
        f.write("# make bench: summary\n\n" + "\n".join(md) + "\n")
    print("\n".join(md))

    if os.path.isdir(docs):
        with open(os.path.join(docs, "benchmarks.svg"), "w") as f:
            f.write(svg_chart(figures, present, "Measured %s by make bench, %d CPU(s), %s" % (
                when, cpus, platform.machine())))
        doc = os.path.join(docs, "benchmarks.md")
        if os.path.exists(doc):
            with open(doc) as f:
                text = f.read()
            b, e = text.find(BEGIN), text.find(END)
            if b < 0 or e < b:
                print("bench/summary.py: %s has no %s ... %s markers; left alone" % (doc, BEGIN, END),
                      file=sys.stderr)
            else:
                text = text[:b + len(BEGIN)] + "\n" + "\n".join(md) + "\n" + text[e:]
                with open(doc, "w") as f:
                    f.write(text)
        print("bench/summary.py: wrote %s, %s/benchmarks.svg and the summary in %s/benchmarks.md"
              % (os.path.join(bdir, "summary.md"), docs, docs), file=sys.stderr)
    else:
        print("bench/summary.py: wrote %s (no %s directory: no chart)" % (
            os.path.join(bdir, "summary.md"), docs), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
