"""End-to-end: record_allocs, record_allocs_file, record_allocs_on_exit.

md_record makes a known sequence of allocation calls, sends itself SIGRTMAX-18 and makes one
more malloc, which writes the records. The file must hold one well-formed line per call, in
program order per thread, and replaying it (allocations add, frees and realloc's old pointer
remove) must give the live set the program reports.
"""
import os
import re
import tempfile
import unittest

from e2e import Case, run

RECORD = os.environ["HS_MD_RECORD"]
FULL_MSG = "Maximum number of records added, all new operations will be dropped."

NUM = r"(\d+)"
PTR = r"0x([0-9a-f]+)"
LINE_RES = {
    "malloc": re.compile(r"^%s: malloc %s %s %s %s$" % (NUM, PTR, NUM, NUM, NUM)),
    "free": re.compile(r"^%s: free %s %s %s$" % (NUM, PTR, NUM, NUM)),
    "calloc": re.compile(r"^%s: calloc %s %s %s %s %s$" % (NUM, PTR, NUM, NUM, NUM, NUM)),
    "realloc": re.compile(r"^%s: realloc %s %s %s %s %s$" % (NUM, PTR, PTR, NUM, NUM, NUM)),
    "memalign": re.compile(r"^%s: memalign %s %s %s %s %s$" % (NUM, PTR, NUM, NUM, NUM, NUM)),
    "thread_done": re.compile(r"^%s: thread_done 0x0 %s$" % (NUM, NUM)),
}


class Rec:
    """One parsed record line. `args` are the numbers between the pointer and the times."""

    def __init__(self, line):
        self.line = line
        parts = line.split()
        self.op = parts[1] if len(parts) > 1 else ""
        m = LINE_RES.get(self.op, re.compile("^$")).match(line)
        if not m:
            raise ValueError("malformed record line: %r" % line)
        g = m.groups()
        self.tid = int(g[0])
        if self.op == "thread_done":
            self.ptr, self.args, self.start, self.end = 0, (), None, int(g[1])
            return
        self.ptr = int(g[1], 16)
        if self.op == "realloc":
            self.old = int(g[2], 16)
            self.args = (int(g[3]),)
        else:
            self.args = tuple(int(x) for x in g[2:-2])
        self.start, self.end = int(g[-2]), int(g[-1])

    def key(self):
        """(op, pointers and numbers) without tid and times, for exact comparisons."""
        if self.op == "realloc":
            return ("realloc", self.ptr, self.old) + self.args
        return (self.op, self.ptr) + self.args


def ptr_value(text):
    return 0 if text in ("(nil)", "0x0") else int(text, 16)


class Record(Case):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.file = os.path.join(self.dir, "rec.txt")

    def tearDown(self):
        self.tmp.cleanup()

    def options(self, extra=""):
        return ("%s record_allocs_file=%s" % (extra, self.file)).strip()

    def read_records(self, path):
        with open(path) as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"), "file ends mid-line")
        recs = []
        for line in text.splitlines():
            try:
                recs.append(Rec(line))
            except ValueError as e:
                self.fail(str(e))
        return recs

    def check_times(self, recs):
        """start <= end on each line; per thread, a call starts after the previous one ended."""
        last_end = {}
        for r in recs:
            if r.start is not None:
                self.assertLessEqual(r.start, r.end, r.line)
                if r.tid in last_end:
                    self.assertGreaterEqual(r.start, last_end[r.tid], r.line)
            if r.tid in last_end:
                self.assertGreaterEqual(r.end, last_end[r.tid], r.line)
            last_end[r.tid] = r.end

    def replay(self, recs):
        """Replays the records; returns the live set. An address allocated while live in the
        replay, or a free of an address that the file allocated and already freed, fails."""
        live, seen = set(), set()

        def add(p, r):
            if p:
                self.assertNotIn(p, live, "allocated twice without free: " + r.line)
                live.add(p)
                seen.add(p)

        def remove(p, r):
            if p in live:
                live.remove(p)
            elif p:
                self.assertNotIn(p, seen, "freed while not live: " + r.line)

        for r in recs:
            if r.op in ("malloc", "calloc", "memalign"):
                add(r.ptr, r)
            elif r.op == "free":
                remove(r.ptr, r)
            elif r.op == "realloc":
                size = r.args[0]
                if r.ptr == r.old and r.ptr:
                    continue  # resized in place
                if r.old and (r.ptr or size == 0):  # a failed realloc keeps the old block
                    remove(r.old, r)
                add(r.ptr, r)
        return live

    def assert_subsequence(self, recs, tid, expected):
        """The records of thread `tid` contain `expected` (keys) in this order."""
        keys = [r.key() for r in recs if r.tid == tid]
        i = 0
        for k in keys:
            if i < len(expected) and k == expected[i]:
                i += 1
        self.assertEqual(i, len(expected), "missing %r in thread %d records:\n%s"
                         % (expected[i:i + 1], tid, "\n".join(map(str, keys))))

    def run_seq(self, extra="", args=("seq",)):
        r = run([RECORD] + list(args), self.options("record_allocs " + extra))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(self.file), "no record file; log: %r" % r.log)
        return r, self.read_records(self.file)

    def expected_main(self, v):
        p = {k: ptr_value(v[k]) for k in v if k not in ("pid", "tid", "tid2", "live")}
        return [
            ("malloc", p["malloc"], 100),
            ("calloc", p["calloc"], 10, 20),
            ("memalign", p["memalign"], 64, 200),
            ("memalign", p["posix_memalign"], 128, 300),
            ("memalign", p["aligned_alloc"], 256, 512),
            ("memalign", p["valloc"], 4096, 1000),
            ("memalign", p["pvalloc"], 4096, 8192),
            ("realloc", p["realloc_new"], 0, 50),
            ("realloc", p["realloc_grown"], p["realloc_new"], 5000),
            ("free", p["calloc"]),
            ("realloc", 0, p["memalign"], 0),
        ]

    def check_seq(self, r, recs):
        v = r.values
        pid = int(v["pid"])
        self.assertEqual(int(v["tid"]), pid)
        self.check_times(recs)
        self.assert_subsequence(recs, pid, self.expected_main(v))
        # free(NULL) is not recorded (as on Android).
        self.assertNotIn(("free", 0), [x.key() for x in recs])
        # The malloc that performed the write is recorded after it.
        trigger = ptr_value(v["trigger"])
        self.assertNotIn(trigger, [x.ptr for x in recs if x.op == "malloc"])
        # Replay: the program's live pointers are live, the ones it freed are not.
        live = self.replay(recs)
        program_live = {ptr_value(x) for x in v["live"].split(",")} - {trigger}
        self.assertTrue(program_live <= live, "live in program, not in replay: %s"
                        % sorted(hex(x) for x in program_live - live))
        known = {ptr_value(v[k]) for k in v if k not in ("pid", "tid", "tid2", "live")}
        self.assertEqual((known - program_live) & live, set(), "freed but live in replay")
        # Whatever else is live was allocated by libc itself (a handful of blocks).
        self.assertLess(len(live - program_live), 10, sorted(hex(x) for x in live))
        return live

    def test_sequence(self):
        r, recs = self.run_seq()
        self.check_seq(r, recs)
        self.assertEqual(r.log, [])
        self.assertNotIn("thread_done", [x.op for x in recs])

    def test_sequence_with_guards(self):
        # With a header the records still show the pointers the program got.
        r, recs = self.run_seq("guard")
        self.check_seq(r, recs)

    def test_second_thread(self):
        r, recs = self.run_seq(args=("seq", "threads"))
        live = self.check_seq(r, recs)
        v = r.values
        tid2 = int(v["tid2"])
        self.assertNotEqual(tid2, int(v["pid"]))
        a, b, c = (ptr_value(v[k]) for k in ("t2_malloc", "t2_calloc", "t2_realloc"))
        self.assert_subsequence(recs, tid2, [
            ("malloc", a, 33),
            ("calloc", b, 3, 11),
            ("free", a),
            ("realloc", c, b, 200),
            ("thread_done", 0),
        ])
        mine = [x for x in recs if x.tid == tid2]
        self.assertEqual(mine[-1].op, "thread_done", "thread_done is the thread's last record")
        self.assertEqual([x.op for x in recs].count("thread_done"), 1)
        self.assertIn(c, live)
        # thread_done comes after the thread's last call, and before main's next one.
        self.assertGreaterEqual(mine[-1].end, mine[-2].end)

    def test_limit(self):
        r = run([RECORD, "many", "20"], self.options("record_allocs=5"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, [FULL_MSG])
        recs = self.read_records(self.file)
        self.assertEqual(len(recs), 5)
        self.check_times(recs)

    def test_limit_one(self):
        # The first call fills the table; the write empties it, and the malloc that made the
        # write fills it again: the message comes once per filling.
        r = run([RECORD, "many", "3"], self.options("record_allocs=1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, [FULL_MSG, FULL_MSG])
        self.assertEqual(len(self.read_records(self.file)), 1)

    def test_on_exit(self):
        r = run([RECORD, "exit"], self.options("record_allocs record_allocs_on_exit"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, [])
        self.assertFalse(os.path.exists(self.file), "no signal: no plain record file")
        path = "%s.%s" % (self.file, r.values["pid"])
        recs = self.read_records(path)
        v = r.values
        pid = int(v["pid"])
        a, b = ptr_value(v["malloc"]), ptr_value(v["calloc"])
        self.assert_subsequence(recs, pid, [("malloc", a, 64), ("calloc", b, 4, 4), ("free", a)])
        live = self.replay(recs)
        self.assertIn(b, live)
        self.assertNotIn(a, live)
        self.check_times(recs)

    def test_on_exit_after_signal(self):
        # The signal's write empties the table: the exit file has only what came after.
        r, recs = self.run_seq("record_allocs_on_exit")
        self.check_seq(r, recs)
        after = self.read_records("%s.%s" % (self.file, r.values["pid"]))
        trigger = ptr_value(r.values["trigger"])
        self.assertEqual(after[0].key(), ("malloc", trigger, 23))
        self.assertEqual(set(x.line for x in after) & set(x.line for x in recs), set())

    def test_no_exit_file_without_option(self):
        r = run([RECORD, "exit"], self.options("record_allocs"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.dir), [])

    def test_symlink_refused(self):
        target = os.path.join(self.dir, "target")
        with open(target, "w") as f:
            f.write("keep\n")
        os.symlink(target, self.file)
        r = run([RECORD, "seq"], self.options("record_allocs"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, ["Cannot create record alloc file %s: Too many levels of "
                                 "symbolic links" % self.file])
        with open(target) as f:
            self.assertEqual(f.read(), "keep\n")

    def test_write_failure_names_the_file(self):
        # /dev/full: the file opens, every write fails with ENOSPC.
        r = run([RECORD, "seq"], "record_allocs record_allocs_file=/dev/full")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, ["Failed to write record alloc information to /dev/full: No "
                                 "space left on device"])

    def test_verbose(self):
        r = run([RECORD, "exit"], self.options("record_allocs verbose"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("md_record: Run: 'kill -46 %s' to dump the allocation records."
                      % r.values["pid"], r.log)


if __name__ == "__main__":
    unittest.main()
