"""End-to-end: `heapscope report` out of memory says so and exits 1, never crashes.

The rule of the tools (docs/report.md): a library function that runs out of memory returns an
error (errno ENOMEM), and the command prints "heapscope report: out of memory" and exits 1.
programs/fail_malloc.c, preloaded, makes malloc fail from its N-th call on; N is walked over
every call the command makes, for each output format, a pprof input and a diff. Each run
either writes the same report as without it (a failure the command could live with, such as
stdio's buffer) or prints that one line and exits 1. The inputs' mappings name files that do
not exist here, so libdw never runs: out of memory inside libdw ends the command as libdw
decides (docs/report.md).
"""
import os
import subprocess
import tempfile
import unittest

from e2e import CLI, clean_env

FAIL_MALLOC = os.environ["HS_FAIL_MALLOC"]
DUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dumps", "android_v1.2.txt")
BASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dumps", "android_v1.1.txt")
MESSAGE = "heapscope report: out of memory"


class ReportOutOfMemory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pprof = os.path.join(cls.tmp.name, "in.pb.gz")
        subprocess.run([CLI, "report", "-q", "-o", cls.pprof, DUMP], check=True,
                       env=clean_env(), capture_output=True, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def report(self, args, out, extra_env):
        env = clean_env()
        env["LD_PRELOAD"] = FAIL_MALLOC
        env.update(extra_env)
        if os.path.exists(out):
            os.unlink(out)
        return subprocess.run([CLI, "report", "-q", "-o", out] + args, env=env,
                              capture_output=True, text=True, timeout=60)

    def walk(self, args):
        out = os.path.join(self.tmp.name, "out")
        counted = self.report(args, out, {"HS_FAIL_MALLOC_COUNT": "1"})
        self.assertEqual(counted.returncode, 0, counted.stderr)
        with open(out, "rb") as f:
            whole = f.read()
        calls = int(counted.stderr.strip().splitlines()[-1].split("calls=")[1])
        self.assertGreater(calls, 10)
        failed = 0
        for n in range(calls + 1):
            with self.subTest(args=args, N=n):
                r = self.report(args, out, {"HS_FAIL_MALLOC_AFTER": str(n)})
                self.assertIn(r.returncode, (0, 1), "N=%d: %s" % (n, r.stderr[-2000:]))
                if r.returncode == 1:
                    failed += 1
                    self.assertEqual(r.stderr.splitlines(), [MESSAGE], "N=%d" % n)
                else:
                    self.assertEqual(r.stderr, "")
                    with open(out, "rb") as f:
                        self.assertEqual(f.read(), whole, "N=%d: a partial report" % n)
        self.assertGreater(failed, calls // 2, "the walk hardly ever ran out of memory")

    def test_text(self):
        self.walk(["-f", "text", DUMP])

    def test_folded(self):
        self.walk(["-f", "folded", DUMP])

    def test_html(self):
        self.walk(["-f", "html", DUMP])

    def test_pprof_output(self):
        self.walk(["-f", "pprof", DUMP])

    def test_pprof_input(self):
        self.walk(["-f", "text", self.pprof])

    def test_diff(self):
        self.walk(["-f", "folded", "--diff", BASE, DUMP])

    def test_diff_of_pprof_profiles(self):
        self.walk(["-f", "html", "--diff", self.pprof, self.pprof])


if __name__ == "__main__":
    unittest.main()
