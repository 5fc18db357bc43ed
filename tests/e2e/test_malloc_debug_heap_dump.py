"""End-to-end: heap dumps (SIGRTMAX-17, backtrace_dump_on_exit, backtrace_full) and
get_malloc_leak_info, with tests/e2e/programs/md_heap.c under libmalloc_debug.so.

Every dump is parsed completely (an unknown line fails the test) and checked against what
the program itself saw: its get_malloc_leak_info result taken just before the dump, and the
allocations it knows it made (make_known in md_heap.c)."""
import os
import re
import shutil
import signal
import tempfile
import unittest

from e2e import Case, run

HEAP = os.environ["HS_MD_HEAP"]
SIGNAL = signal.SIGRTMAX - 17

SIZE_A, SIZE_B, SIZE_C = 100003, 70001, 50021
HEADER = "Android Native Heap Dump v1.2"
RECORD_RE = re.compile(r"^z 0  sz +(?P<size>\d+)  num +(?P<num>\d+)  bt(?P<bt>(?: [0-9a-f]+)*)$")
INFO_ITEM_RE = re.compile(r' \{"(?P<path>[^"]*)" (?P<rel>[0-9a-f]+) "(?P<sym>[^"]*)" '
                          r'(?P<off>[0-9a-f]+)\}')
MAPS_RE = re.compile(r"^(?P<start>[0-9a-f]+)-(?P<end>[0-9a-f]+) (?P<perms>[rwxsp-]{4}) "
                     r"(?P<offset>[0-9a-f]+) [0-9a-f]+:[0-9a-f]+ \d+\s*(?P<path>.*)$")


class Record:
    def __init__(self, size, num, frames):
        self.size, self.num, self.frames = size, num, frames
        self.info = None  # list of (path, rel_pc, symbol, offset) with backtrace_full

    def key(self):
        """The dump's sort key: larger first, with a backtrace first, longer first, frames."""
        return (-self.size, 0 if self.frames else 1, -len(self.frames), self.frames)


class Dump:
    """A parsed heap dump; every line must be understood."""

    def __init__(self, testcase, path, backtrace_size, full=False):
        t = testcase
        with open(path) as f:
            text = f.read()
        t.assertTrue(text.endswith("END\n"), "dump %s does not end with END" % path)
        lines = text.split("\n")[:-1]
        t.assertEqual(lines[0], HEADER)
        t.assertEqual(lines[1], "")
        t.assertRegex(lines[2], r"^Build fingerprint: '[^'\n]+'$")
        t.assertTrue(lines[2][len("Build fingerprint: '"):].startswith(os.uname().sysname))
        t.assertEqual(lines[3], "")
        m = re.match(r"^Total memory: (\d+)$", lines[4])
        t.assertIsNotNone(m, lines[4])
        self.total = int(m.group(1))
        m = re.match(r"^Allocation records: (\d+)$", lines[5])
        t.assertIsNotNone(m, lines[5])
        self.count = int(m.group(1))
        t.assertEqual(lines[6], "Backtrace size: %d" % backtrace_size)
        t.assertEqual(lines[7], "")
        self.records = []
        i = 8
        while lines[i] != "MAPS":
            m = RECORD_RE.match(lines[i])
            t.assertIsNotNone(m, "not a record line: %r" % lines[i])
            frames = tuple(int(x, 16) for x in m.group("bt").split())
            r = Record(int(m.group("size")), int(m.group("num")), frames)
            # Exact spacing: size right-aligned in 8 columns, num in 4.
            t.assertEqual(lines[i], "z 0  sz %8d  num %4d  bt%s" % (
                r.size, r.num, "".join(" %x" % f for f in frames)))
            i += 1
            if full and frames:
                t.assertTrue(lines[i].startswith("  bt_info"), lines[i])
                rest = lines[i][len("  bt_info"):]
                items = INFO_ITEM_RE.findall(rest)
                t.assertEqual("".join(' {"%s" %s "%s" %s}' % it for it in items), rest,
                              "bt_info line not fully parsed: %r" % lines[i])
                r.info = [(p, int(rel, 16), s, int(off, 16)) for p, rel, s, off in items]
                t.assertEqual(len(r.info), len(frames))
                i += 1
            elif not full:
                t.assertFalse(lines[i].startswith("  bt_info"), "bt_info without backtrace_full")
            self.records.append(r)
        i += 1
        self.maps = []
        while lines[i] != "END":
            m = MAPS_RE.match(lines[i])
            t.assertIsNotNone(m, "not a maps line: %r" % lines[i])
            self.maps.append((int(m.group("start"), 16), int(m.group("end"), 16),
                              m.group("perms"), int(m.group("offset"), 16),
                              m.group("path")))
            i += 1
        t.assertEqual(i, len(lines) - 1, "END must be the last line")
        t.assertTrue(self.maps, "empty MAPS section")

        # Internal consistency.
        t.assertEqual(self.count, len(self.records))
        t.assertEqual(self.total, sum(r.size * r.num for r in self.records))
        for a, b in zip(self.records, self.records[1:]):
            t.assertLess(a.key(), b.key(), "records out of order or not merged:\n%s %s\n%s %s"
                         % (a.size, a.frames, b.size, b.frames))

    def mapping(self, pc):
        for start, end, perms, offset, path in self.maps:
            if start <= pc < end:
                return perms, path
        return None

    def load_base(self, path):
        """Where the file's offset-0 mapping starts (the load bias of a PIE or DSO)."""
        for start, end, perms, offset, p in self.maps:
            if p == path and offset == 0:
                return start
        return None

    def with_bt(self):
        return [r for r in self.records if r.frames]


def parse_leak_lines(stdout, prefix):
    out = []
    for line in stdout.splitlines():
        if line.startswith(prefix + " "):
            kv = dict(w.split("=", 1) for w in line.split()[1:])
            key = "bt" if "bt" in kv else "frames"
            frames = tuple(int(x, 16) for x in kv[key].split(",") if x)
            out.append((int(kv["size"]), int(kv["num"]), frames))
    return out


class HeapDumpBase(Case):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs_heap_dump_e2e.")
        self.prefix = os.path.join(self.dir, "heap")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def options(self, extra=""):
        return ("backtrace=16 backtrace_dump_prefix=%s %s" % (self.prefix, extra)).strip()

    def assert_known(self, dump):
        """The program's known allocations are there, merged, with frames in md_heap's code."""
        exe = os.path.realpath(HEAP)
        by = {}
        for r in dump.with_bt():
            perms_path = dump.mapping(r.frames[0])
            if perms_path and perms_path[1] == exe:
                by.setdefault(r.size, []).append(r)
        self.assertEqual([r.num for r in by.get(SIZE_A, [])], [3])
        self.assertEqual(sorted(r.num for r in by.get(SIZE_B, [])), [1, 2])
        self.assertEqual([r.num for r in by.get(SIZE_C, [])], [1])
        b1, b2 = by[SIZE_B]
        self.assertNotEqual(b1.frames[0], b2.frames[0], "two call sites, two first frames")
        self.assertEqual(by[SIZE_A][0].frames[0], next(r for r in by[SIZE_B] if r.num == 1)
                         .frames[0], "alloc_a's records share their first frame")
        self.assertGreaterEqual(dump.total, 3 * SIZE_A + 3 * SIZE_B + SIZE_C)
        return by

    def assert_pcs_in_exec_maps(self, dump):
        for r in dump.records:
            for pc in r.frames:
                where = dump.mapping(pc - 1)
                self.assertIsNotNone(where, "pc %x in no mapping of MAPS" % pc)
                self.assertIn("x", where[0], "pc %x in a non-executable mapping %s" % (pc, where))


class SignalDump(HeapDumpBase):
    def test_dump_on_signal_matches_leak_info(self):
        r = run([HEAP, "signal"], self.options())
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.values["pid"])
        path = "%s.%d.txt" % (self.prefix, pid)
        self.assertEqual(r.log, ["Dumping to file: %s" % path])
        self.assertFalse(os.path.exists("%s.%d.exit.txt" % (self.prefix, pid)))
        dump = Dump(self, path, 16)
        self.assert_known(dump)
        self.assert_pcs_in_exec_maps(dump)
        # Taken just before the dump, the leak info is the dump's records with a backtrace.
        self.assertEqual(r.values["got_info"], "1")
        leak = parse_leak_lines(r.stdout, "leak")
        self.assertEqual(leak, [(x.size, x.num, x.frames) for x in dump.with_bt()])
        self.assertEqual(int(r.values["total_memory"]),
                         sum(x.size * x.num for x in dump.with_bt()))
        self.assertEqual(int(r.values["entries"]), len(dump.with_bt()))
        # Our own process's maps: the executable's code is listed.
        exe = os.path.realpath(HEAP)
        self.assertTrue(any(p == exe and "x" in perms for _, _, perms, _, p in dump.maps))

    def test_no_backtrace_option_no_handler(self):
        # Without backtrace the signal is not handled by the shim: default action kills.
        r = run([HEAP, "signal"], "guard backtrace_dump_prefix=%s" % self.prefix)
        self.assertEqual(r.returncode, -SIGNAL)
        self.assertFalse(os.listdir(self.dir))

    def test_verbose_tells_how_to_dump(self):
        r = run([HEAP, "signal"], self.options("verbose"))
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.values["pid"])
        self.assertIn("md_heap: Run: 'kill -%d %d' to dump the backtrace." % (SIGNAL, pid), r.log)

    def test_unwritable_prefix_is_logged(self):
        prefix = os.path.join(self.dir, "missing", "heap")
        r = run([HEAP, "signal"], "backtrace backtrace_dump_prefix=%s" % prefix)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.values["pid"])
        self.assertEqual(r.log, ["Unable to create heap dump file %s.%d.txt: "
                                 "No such file or directory" % (prefix, pid)])


class ExitDump(HeapDumpBase):
    def test_dump_on_exit(self):
        r = run([HEAP, "exit"], self.options("backtrace_dump_on_exit"))
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.values["pid"])
        path = "%s.%d.exit.txt" % (self.prefix, pid)
        self.assertIn("Dumping to file: %s" % path, r.log)
        self.assertEqual(os.listdir(self.dir), [os.path.basename(path)])
        dump = Dump(self, path, 16)
        self.assert_known(dump)
        self.assert_pcs_in_exec_maps(dump)

    def test_no_exit_dump_without_the_option(self):
        r = run([HEAP, "exit"], self.options())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(self.dir), [])
        self.assertEqual(r.log, [])


class FullDump(HeapDumpBase):
    def test_bt_info_names_the_allocating_functions(self):
        r = run([HEAP, "signal"], self.options("backtrace_full"))
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.values["pid"])
        dump = Dump(self, "%s.%d.txt" % (self.prefix, pid), 16, full=True)
        by = self.assert_known(dump)
        exe = os.path.realpath(HEAP)
        base = dump.load_base(exe)
        self.assertIsNotNone(base)
        expect_first = {SIZE_A: "alloc_a", SIZE_C: "alloc_b"}
        for size, first in expect_first.items():
            rec = by[size][0]
            syms = [s for _, _, s, _ in rec.info]
            self.assertEqual(syms[0], first, rec.info)
            self.assertEqual(syms[1], "make_known", rec.info)
            self.assertIn("scenario_signal", syms)
            self.assertIn("main", syms)
        for rec in dump.with_bt():
            for pc, (path, rel, sym, off) in zip(rec.frames, rec.info):
                where = dump.mapping(pc - 1)
                self.assertIsNotNone(where)
                self.assertEqual(path, where[1])
                if path == exe:
                    self.assertEqual(rel, pc - base, "rel pc of %x" % pc)
                    self.assertTrue(sym, "frame %x in md_heap without a symbol" % pc)
                    self.assertGreater(off, 0)
                    self.assertLess(off, 0x1000)
                if not sym:
                    self.assertEqual(off, 0)


class LeakInfo(HeapDumpBase):
    def test_layout(self):
        r = run([HEAP, "leakinfo"], "backtrace=8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, [])
        self.assertEqual(r.values["loaded"], "1")
        self.assertEqual(r.values["got_info"], "1")
        entry, overall = int(r.values["info_size"]), int(r.values["overall_size"])
        self.assertEqual(int(r.values["backtrace_size"]), 8)
        self.assertEqual(entry, 2 * 8 + 8 * 8)
        entries = parse_leak_lines(r.stdout, "entry")
        self.assertEqual(overall, entry * len(entries))
        self.assertEqual(int(r.values["entries"]), len(entries))
        self.assertEqual(int(r.values["total_memory"]),
                         sum(size * num for size, num, _ in entries))
        for size, num, frames in entries:
            self.assertEqual(len(frames), 8)
            self.assertNotEqual(frames[0], 0)
            n = frames.index(0) if 0 in frames else 8
            self.assertEqual(frames[n:], (0,) * (8 - n), "zero padding")
        # Same order and merging as the dump: strictly increasing keys.
        keys = [(-size, -sum(1 for f in frames if f), frames) for size, _, frames in entries]
        self.assertEqual(keys, sorted(set(keys)))
        nums = {}
        for size, num, _ in entries:
            nums.setdefault(size, []).append(num)
        self.assertIn(3, nums[SIZE_A])
        self.assertIn(2, nums[SIZE_B])
        self.assertIn(1, nums[SIZE_C])

    def test_without_backtrace_option(self):
        r = run([HEAP, "errors"], "guard")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.values["loaded"], "1")
        self.assertEqual(r.log, [
            "get_malloc_leak_info: At least one invalid parameter.",
            "get_malloc_leak_info: Allocations not being tracked, to enable set the option "
            "'backtrace'.",
        ])
        self.assertEqual(r.values["got_info"], "0")
        self.assertEqual(r.values["info_null"], "1")
        self.assertEqual(r.values["sizes"], "0,0,0,0")

    def test_null_argument_leaves_outputs_cleared_by_the_wrapper(self):
        r = run([HEAP, "errors"], "backtrace")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.log, ["get_malloc_leak_info: At least one invalid parameter."])
        self.assertEqual(r.values["null_arg_got"], "0")
        self.assertEqual(r.values["got_info"], "1")

    def test_without_the_shim(self):
        r = run([HEAP, "errors"], None, preload=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.values["loaded"], "0")
        self.assertEqual(r.values["null_arg_got"], "0")
        self.assertEqual(r.values["got_info"], "0")
        self.assertEqual(r.values["info_null"], "1")
        self.assertEqual(r.values["sizes"], "0,0,0,0")
        self.assertEqual(r.values["iterate"], "-1")
        self.assertEqual(r.stderr, "")


class Consistency(HeapDumpBase):
    def test_dumps_while_four_threads_allocate(self):
        r = run([HEAP, "threads", self.prefix], self.options(), timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.values["threads_done"], "1")
        self.assertEqual(r.values["renamed_all"], "1")
        for n in range(3):
            path = r.values["dump%d" % n]
            dump = Dump(self, path, 16)
            self.assert_known(dump)
            self.assert_pcs_in_exec_maps(dump)
            # Each thread keeps at most 64 blocks of 1000..1999 bytes live.
            churn = [x for x in dump.records if 1000 <= x.size < 2000]
            self.assertLessEqual(sum(x.num for x in churn), 4 * 64)
            self.assertLess(dump.total, 3 * SIZE_A + 3 * SIZE_B + SIZE_C + 4 * 64 * 2000
                            + 1024 * 1024)
        self.assertEqual(r.log.count("Dumping to file: %s.%s.txt"
                                     % (self.prefix, r.values["pid"])), 3)


if __name__ == "__main__":
    unittest.main()
