"""make bench-compare (bench/compare.py): reading the committed summary and flagging ratios.

No benchmark is run here (timings are never asserted): the parser is fed a summary section
like the one bench/summary.py writes, and the real docs/benchmarks.md, and the report's
flags are checked on given figures.
"""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare  # noqa: E402
import summary  # noqa: E402

SECTION = """intro
%s
Measured 2026-11-21 16:39 UTC by make bench on 2 CPU(s) (nproc), x86_64.

Wall time ratio to the baseline:

| tool / configuration | malloc_bench, 1 thread | malloc_bench, 2 threads | python |
|---|---:|---:|---:|
| glibc (the baseline) | 1.00 | 1.00 | 1.00 |
| malloc debug, guard | 1.37 | 1.36 | - |
| heaptrack | 13.90 \u2020 | 19.87 \u2020 | 3.87 |

Peak RSS ratio to the same baseline:

| tool / configuration | malloc_bench, 1 thread | malloc_bench, 2 threads | python |
|---|---:|---:|---:|
| malloc debug, guard | 9.99 | 9.99 | - |

%s
| 1000000 x 1000 B | 25.1 | 180.0 | 400.0 | 0.45 |
| 1000000 x 1000 B, busy thread | 31.0 | 260.0 | 420.0 | 0.62 |
%s
after
""" % (summary.BEGIN, summary.LEAKS_HEADER + "\n|---|---:|---:|---:|---:|", summary.END)


class Parse(unittest.TestCase):
    def test_time_table_leak_table_and_date(self):
        ratios, when = compare.committed_ratios(SECTION)
        self.assertEqual(when, "2026-11-21 16:39 UTC")
        self.assertEqual(ratios[("malloc debug, guard", "malloc_bench, 1 thread")], 1.37)
        self.assertEqual(ratios[("malloc debug, guard", "malloc_bench, 2 threads")], 1.36)
        self.assertEqual(ratios[("heaptrack", "python")], 3.87)
        # Scaled figures (dagger) and empty cells are not compared; the RSS table is not read.
        self.assertNotIn(("heaptrack", "malloc_bench, 1 thread"), ratios)
        self.assertNotIn(("malloc debug, guard", "python"), ratios)
        self.assertEqual(ratios[("1000000 x 1000 B", "heapscope / LeakSanitizer")], 0.45)
        self.assertEqual(ratios[("1000000 x 1000 B, busy thread", "heapscope / LeakSanitizer")],
                         0.62)

    def test_no_section(self):
        with self.assertRaises(ValueError):
            compare.committed_ratios("no markers here")

    def test_real_docs(self):
        with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
            ratios, _ = compare.committed_ratios(f.read())
        for key, label, sources in summary.ROWS:
            if sources.get("run") in ("guard", "verifyptr", "freetrack"):
                self.assertIn((label, "malloc_bench, 1 thread"), ratios)
                self.assertIn((label, "malloc_bench, 2 threads"), ratios)


class Report(unittest.TestCase):
    def test_flags(self):
        committed = {("a", "w"): 2.0, ("b", "w"): 2.0, ("c", "w"): 2.0}
        measured = {("a", "w"): 2.29, ("b", "w"): 2.31, ("c", "w"): 1.0, ("d", "w"): 5.0}
        lines, grew, compared = compare.report(measured, committed, "head")
        self.assertEqual((grew, compared), (1, 3))
        text = "\n".join(lines)
        self.assertIn("| a | w | 2.00 | 2.29 | +14.5% |  |", text)
        self.assertIn("| b | w | 2.00 | 2.31 | +15.5% | **grew by more than 15%** |", text)
        self.assertIn("| c | w | 2.00 | 1.00 | -50.0% |  |", text)
        self.assertIn("| d | w | - | 5.00 | - | not in the summary |", text)
        self.assertIn("1 of 3 ratios grew by more than 15%", text)

    def test_leak_rows_use_the_summary_labels(self):
        row = {"blocks": "1000000", "bytes": "1000", "busy": "no"}
        self.assertEqual(summary.leak_heap_label(row), compare.LEAK_HEAP)
        row["busy"] = "yes"
        self.assertEqual(summary.leak_heap_label(row), compare.LEAK_HEAP + ", busy thread")


if __name__ == "__main__":
    unittest.main()
