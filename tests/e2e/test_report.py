"""End-to-end: `heapscope report` on dumps from our shim and on Android dumps written by hand."""
import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from e2e import CLI, SHIM, Case, build_sizes, checked_radios, chromium_dom, sizes_dump

TRACK = os.environ["HS_MD_TRACK"]
DUMPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dumps")


def report(*args, expect=0):
    proc = subprocess.run([CLI, "report", "-q"] + list(args), capture_output=True, text=True,
                          timeout=300)
    if expect is not None and proc.returncode != expect:
        raise AssertionError("exit %d: %s" % (proc.returncode, proc.stderr))
    return proc


def make_dump(directory, scenario="leaks", options="backtrace backtrace_dump_on_exit"):
    """Runs md_track under the shim with a dump at exit; returns the dump's path."""
    prefix = os.path.join(directory, "heap")
    env = dict(os.environ, LD_PRELOAD=SHIM,
               LIBC_DEBUG_MALLOC_OPTIONS=options + " backtrace_dump_prefix=" + prefix)
    subprocess.run([TRACK, scenario], env=env, capture_output=True, timeout=60, check=True)
    dumps = [f for f in os.listdir(directory) if f.startswith("heap.") and f.endswith(".exit.txt")]
    assert len(dumps) == 1, dumps
    return os.path.join(directory, dumps[0])


class ReportOurDumps(Case):
    def test_text_names_functions_files_and_totals(self):
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            out = report(dump).stdout
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("heapscope report: "))
        self.assertIn("Android Native Heap Dump v1.2, build 'Linux", lines[1])
        # md_track leaks: 333 + 20 bytes from make() <- leaks() <- main(), called from two
        # lines of leaks(): two stacks (stdout unbuffered).
        self.assertEqual(lines[2], "  In use: 353 bytes in 2 allocations, 2 call stacks")
        self.assertIn("  #1  333 bytes (94.3%) in 1 allocations", out)
        self.assertIn("  #2  20 bytes (5.7%) in 1 allocations", out)
        self.assertRegex(out, r"\n        make \(md_track\.c:\d+\)  \[md_track\]\n"
                              r"        leaks \(md_track\.c:\d+\)  \[md_track\]\n"
                              r"        main \(md_track\.c:\d+\)  \[md_track\]\n")
        leaks_lines = re.findall(r"leaks \(md_track\.c:(\d+)\)  \[md_track\]", out)
        self.assertEqual(len(leaks_lines), 2)
        self.assertEqual(int(leaks_lines[1]), int(leaks_lines[0]) + 1)
        self.assertRegex(out, r"Top 1 functions by self in-use bytes .*\n.*\n"
                              r" +353 +100\.0% +2  make \(md_track\.c:\d+\)\n")

    def test_folded(self):
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            out = report("-f", "folded", dump).stdout.splitlines()
        self.assertEqual(len(out), 2)
        self.assertRegex(out[0], r"main \(md_track\.c:\d+\);leaks \(md_track\.c:\d+\);"
                                 r"make \(md_track\.c:\d+\) 333$")
        self.assertRegex(out[1], r"main \(md_track\.c:\d+\);leaks \(md_track\.c:\d+\);"
                                 r"make \(md_track\.c:\d+\) 20$")
        out2 = report("-f", "folded", "--value", "inuse_objects",
                      os.path.join(DUMPS, "android_v1.1.txt")).stdout
        # Frames are innermost first in a dump; folded stacks are root first.
        self.assertEqual(sorted(out2.splitlines()), ["0xb500;0xa230 1", "0xc600;0xa230 1"])

    def test_pprof_output_is_gzipped_profile(self):
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            out = os.path.join(d, "heap.pb.gz")
            report("-o", out, dump)
            with open(out, "rb") as f:
                data = gzip.decompress(f.read())
        for name in (b"inuse_space", b"inuse_objects", b"bytes", b"count", b"make",
                     b"md_track.c"):
            self.assertIn(name, data)

    def test_pprof_round_trip(self):
        """A pprof profile heapscope wrote reads back with the same stacks and totals."""
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            prof = os.path.join(d, "heap.pb.gz")
            report("-o", prof, dump)
            from_dump = report(dump).stdout.splitlines()
            from_prof = report(prof).stdout.splitlines()
        self.assertEqual(from_prof[1], "  pprof profile: heapscope report")
        self.assertEqual(from_prof[2:], from_dump[2:])

    def test_pprof_input_damaged(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.pb.gz")
            with open(path, "wb") as f:
                f.write(gzip.compress(b"\x0a\xff\xff\xff"))
            proc = report(path, expect=1)
            self.assertIn("not an Android native heap dump, nor a pprof profile", proc.stderr)
            r = report("--value", "alloc_space", os.path.join(DUMPS, "android_v1.1.txt"),
                       expect=2)
            self.assertIn("no allocated values", r.stderr)

    def test_html_output(self):
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            out = os.path.join(d, "heap.html")
            report("-o", out, dump)
            with open(out) as f:
                html = f.read()
        self.assertTrue(html.lstrip().lower().startswith("<!doctype html"))
        self.assertIn("make (md_track.c:", html)
        self.assertNotIn("http://", html.replace("http://www.w3.org", ""))


def html_page_data(html):
    """The JSON data embedded in a flame graph page."""
    m = re.search(r'<script type="application/json" id="hs-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


class ReportHtmlValue(Case):
    """--value chooses what the HTML flame graph opens on, as it does for the other formats."""

    def test_html_opens_on_the_value_asked(self):
        with tempfile.TemporaryDirectory() as d:
            dump = make_dump(d)
            pages = {}
            for value in (None, "inuse_space", "inuse_objects"):
                out = os.path.join(d, "%s.html" % value)
                report("-o", out, dump, *(["--value", value] if value else []))
                with open(out) as f:
                    pages[value] = f.read()
            doms = {v: chromium_dom(os.path.join(d, "%s.html" % v))
                    for v in ("inuse_space", "inuse_objects")}
        self.assertEqual(pages[None], pages["inuse_space"])
        self.assertTrue(pages["inuse_objects"] != pages["inuse_space"], "the same page")
        self.assertEqual(html_page_data(pages["inuse_space"])["value"], "inuse_bytes")
        self.assertEqual(html_page_data(pages["inuse_objects"])["value"], "inuse_count")
        # Opened (no URL fragment): the counts are shown and their radio button is checked.
        self.assertEqual(checked_radios(doms["inuse_objects"]), {"hs-unit": "count"})
        self.assertEqual(checked_radios(doms["inuse_space"]), {"hs-unit": "bytes"})
        self.assertIn('<div id="hs-total">Total: 2 in-use objects; 353 B in-use bytes</div>',
                      doms["inuse_objects"])
        self.assertIn('<div id="hs-total">Total: 353 B in-use bytes; 2 in-use objects</div>',
                      doms["inuse_space"])


class ReportAndroidDumps(Case):
    def test_version_1_0(self):
        out = report(os.path.join(DUMPS, "android_v1.0.txt")).stdout
        self.assertIn("Android Native Heap Dump v1.0\n", out)
        self.assertIn("  In use: 1,200 bytes in 4 allocations, 3 call stacks", out)
        self.assertIn("  #1  1,000 bytes (83.3%) in 2 allocations", out)

    def test_version_1_1_fingerprint(self):
        out = report(os.path.join(DUMPS, "android_v1.1.txt")).stdout
        self.assertIn("Android Native Heap Dump v1.1, build "
                      "'google/walleye/walleye:8.1.0/OPM1/4470522:userdebug/dev-keys'", out)
        self.assertIn("  In use: 700 bytes in 2 allocations, 2 call stacks", out)
        # 0xa230 called the allocator in both stacks: all of it is its own.
        self.assertRegex(out, r"Top 1 functions by self .*\n.*\n +700 +100\.0% +2  0xa230\n")
        self.assertRegex(out, r"Top 3 functions by total .*\n.*\n +700 +100\.0% +2  0xa230\n"
                              r" +400 +57\.1% +1  0xb500\n +300 +42\.9% +1  0xc600\n")

    def test_version_1_2_with_bt_info(self):
        out = report(os.path.join(DUMPS, "android_v1.2.txt")).stdout
        self.assertIn("  In use: 1,000 bytes in 3 allocations, 2 call stacks", out)

    def test_merge_two_dumps(self):
        out = report(os.path.join(DUMPS, "android_v1.1.txt"),
                     os.path.join(DUMPS, "android_v1.1.txt")).stdout
        self.assertIn("  In use: 1,400 bytes in 4 allocations, 2 call stacks", out)

    def test_diff(self):
        with tempfile.TemporaryDirectory() as d:
            base = os.path.join(d, "base.txt")
            with open(os.path.join(DUMPS, "android_v1.1.txt")) as f:
                text = f.read()
            with open(base, "w") as f:
                f.write(text.replace("sz      400", "sz      100"))
            out = report("--diff", base, os.path.join(DUMPS, "android_v1.1.txt")).stdout
            self.assertIn("Change against the base: +300 bytes, +0 allocations", out)
            self.assertIn("  #1  +300 bytes", out)
            folded = report("-f", "folded", "--diff", base,
                            os.path.join(DUMPS, "android_v1.1.txt")).stdout
            # Two columns, before and after; the unchanged stack too (it has width).
            self.assertEqual(sorted(folded.splitlines()),
                             ["0xb500;0xa230 100 400", "0xc600;0xa230 300 300"])


# flamegraph.pl's reading of a folded line (Debian has no package of it, so its rules are
# restated here): the last number after white space is the value; when what is left before it
# ends with another number, that one is the first column of a differential line (before,
# after). A line neither matches is dropped ("Ignored N lines with invalid format").
FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def flamegraph_pl_read(text):
    """(stacks as {stack: (before or None, after)}, lines ignored), as flamegraph.pl reads."""
    stacks, ignored = {}, 0
    for line in text.splitlines():
        m = FLAMEGRAPH_LINE.match(line)
        if not m:
            ignored += 1
            continue
        stack, after = m.group(1), int(m.group(2))
        before = None
        m2 = FLAMEGRAPH_LINE.match(stack)
        if m2:
            stack, before = m2.group(1), int(m2.group(2))
        stacks[stack] = (before, after)
    return stacks, ignored


class ReportDiffs(Case):
    """--diff of two runs of tests/e2e/programs/report_sizes.c (compiled here): grow() grew,
    shrink() shrank, gone() vanished."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hs-report-diff-")
        cls.binary = build_sizes(os.path.join(cls.tmp, "one"))
        cls.before = sizes_dump(cls.binary, 1000, 5000, 700, os.path.join(cls.tmp, "before"))
        cls.after = sizes_dump(cls.binary, 3000, 2000, 0, os.path.join(cls.tmp, "after"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def by_function(self, stacks):
        """{caller of hold(): (before, after)}."""
        out = {}
        for stack, values in stacks.items():
            frames = stack.split(";")
            self.assertRegex(frames[-1], r"^hold \(report_sizes\.c:\d+\)$", stack)
            out[frames[-2].split(" ")[0]] = values
        return out

    def test_folded_diff_survives_flamegraph_pl(self):
        folded = report("-f", "folded", "--diff", self.before, self.after).stdout
        stacks, ignored = flamegraph_pl_read(folded)
        self.assertEqual(ignored, 0, folded)
        self.assertEqual(self.by_function(stacks), {"grow": (1000, 3000),
                                                    "shrink": (5000, 2000),
                                                    "gone": (700, 0)})
        for line in folded.splitlines():
            self.assertRegex(line, r"^\S.* \d+ \d+$")
        counts = report("-f", "folded", "--value", "inuse_objects", "--diff", self.before,
                        self.after).stdout
        stacks, ignored = flamegraph_pl_read(counts)
        self.assertEqual(ignored, 0, counts)
        self.assertEqual(self.by_function(stacks), {"grow": (1, 1), "shrink": (1, 1),
                                                    "gone": (1, 0)})

    def test_rebuilt_elsewhere_matches_every_frame(self):
        """The same source built in another directory: other source paths in the debug info,
        another build id, other addresses; every frame matches the first build's."""
        other = build_sizes(os.path.join(self.tmp, "elsewhere"))
        after = sizes_dump(other, 3000, 2000, 0, os.path.join(self.tmp, "elsewhere", "heap"))
        folded = report("-f", "folded", "--diff", self.before, after).stdout
        stacks, ignored = flamegraph_pl_read(folded)
        self.assertEqual(ignored, 0, folded)
        self.assertEqual(self.by_function(stacks), {"grow": (1000, 3000),
                                                    "shrink": (5000, 2000),
                                                    "gone": (700, 0)}, folded)
        text = report("--diff", self.before, after).stdout
        self.assertIn("  In use: 5,000 bytes in 2 allocations, 3 call stacks", text)
        self.assertIn("Change against the base: -1,700 bytes, -1 allocations", text)
        self.assertRegex(text, r"#\d  \+2,000 bytes .*\n +hold \(report_sizes\.c:\d+\)  "
                               r"\[report_sizes\]\n +grow \(")


class DamagedInput(Case):
    def check_error(self, text, message):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.txt")
            with open(path, "wb") as f:
                f.write(text)
            proc = report(path, expect=1)
            self.assertIn(message, proc.stderr)
            self.assertTrue(proc.stderr.startswith("heapscope report: " + path + ": "),
                            proc.stderr)

    def test_errors_name_the_line(self):
        good = open(os.path.join(DUMPS, "android_v1.1.txt"), "rb").read()
        self.check_error(b"hello\n", "line 1: not an Android native heap dump")
        self.check_error(b"Android Native Heap Dump v1.7\n", "line 1: not an Android")
        self.check_error(good.replace(b"bt a230 b500", b"bt a230 xyz"),
                         "line 9: expected a hexadecimal frame address")
        self.check_error(good.replace(b"num    1  bt a230 c600", b"num  bt"),
                         "line 10: expected 'num <count>'")
        self.check_error(good.replace(b"\nEND\n", b"\n"), "has no 'END' line")
        self.check_error(good.split(b"MAPS")[0], "no MAPS section")
        self.check_error(good.replace(b"Total memory: 700", b"Total memory: lots"),
                         "line 5: expected a number after 'Total memory: '")
        self.check_error(good.replace(b"z 0  sz      400", b"garbage line here"),
                         "line 9: unexpected line 'garbage line here  num")

    def test_missing_file_and_binary_junk(self):
        proc = report("/nonexistent/dump.txt", expect=1)
        self.assertIn("/nonexistent/dump.txt: No such file or directory", proc.stderr)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "junk")
            with open(path, "wb") as f:
                f.write(os.urandom(4096))
            self.assertIn("not an Android native heap dump", report(path, expect=1).stderr)

    def test_directory_is_named_as_such(self):
        with tempfile.TemporaryDirectory() as d:
            proc = report(d, expect=1)
            self.assertEqual(proc.stderr,
                             "heapscope report: %s: is a directory, not a heap dump\n" % d)
            good = os.path.join(DUMPS, "android_v1.1.txt")
            proc = report("--diff", d, good, expect=1)
            self.assertIn("%s: is a directory" % d, proc.stderr)

    def test_every_truncation_is_an_error_or_a_report(self):
        good = open(os.path.join(DUMPS, "android_v1.2.txt"), "rb").read()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cut.txt")
            for n in range(0, len(good), 7):
                with open(path, "wb") as f:
                    f.write(good[:n])
                proc = report(path, expect=None)
                self.assertIn(proc.returncode, (0, 1), "crash at %d: %s" % (n, proc.stderr))


if __name__ == "__main__":
    unittest.main()
