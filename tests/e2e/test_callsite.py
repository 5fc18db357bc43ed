"""End-to-end: every stored frame that is a return address is stored as its call site (the
return address minus 1, inside the call instruction), so that the tools people already use
name the line of the call, as heapscope's own report does.

tests/e2e/programs/callsite.c (built -O0 -g) makes three calls on consecutive lines (marked
CALL_A, CALL_B, CALL_C) to functions that each allocate a block of a known size, from a call
in main (CALL_MAIN); after each call the next line starts, so a return address names the line
after the call. The frames of malloc debug's heap dump (bt pcs and bt_info) and leak report,
of libmemunreachable's report (`heapscope leaks`) are resolved with binutils' addr2line, and
the profiler's pprof output and `heapscope report -o x.pb.gz` of a heap dump are read by Go's
pprof (`go tool pprof -symbolize=force`, Debian's golang-go, which `make deps` installs); each
caller frame must land on its call line. heapscope's own report must name the same lines for
a dump of call sites and for the same dump with return addresses (what earlier versions
wrote)."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from e2e import FRAME_RE, clean_env, run

PROG = os.environ["HS_CALLSITE"]
CLI = os.environ["HS_CLI"]
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs", "callsite.c")
GO = "/usr/bin/go"

HELPERS = {"keep_a": "CALL_A", "keep_b": "CALL_B", "keep_c": "CALL_C"}  # called on that line
HELPER_OF_SIZE = {1111: "keep_a", 2222: "keep_b", 3333: "keep_c"}  # allocates that size
SIZES = {size: HELPERS[helper] for size, helper in HELPER_OF_SIZE.items()}
RECORD_RE = re.compile(r"^z 0  sz +(?P<size>\d+)  num +\d+  bt(?P<bt>(?: [0-9a-f]+)*)$")
INFO_ITEM_RE = re.compile(r' \{"(?P<path>[^"]*)" (?P<rel>[0-9a-f]+) "(?P<sym>[^"]*)" '
                          r'(?P<off>[0-9a-f]+)\}')
MAPS_RE = re.compile(r"^(?P<start>[0-9a-f]+)-(?P<end>[0-9a-f]+) \S{4} (?P<offset>[0-9a-f]+) "
                     r"\S+ \d+\s*(?P<path>.*)$")


def marked_lines():
    """{"CALL_A": line, ...} from the program's source."""
    lines = {}
    with open(SOURCE) as f:
        for number, text in enumerate(f, 1):
            m = re.search(r"/\* (CALL_\w+) \*/", text)
            if m:
                lines[m.group(1)] = number
    return lines


LINES = marked_lines()


def addr2line(rel_pcs):
    """[(function, line)] of addresses in the program's file, as binutils' addr2line says."""
    proc = subprocess.run(["addr2line", "-f", "-e", PROG] + ["%#x" % pc for pc in rel_pcs],
                          capture_output=True, text=True, check=True)
    out = proc.stdout.splitlines()
    result = []
    for i in range(0, len(out), 2):
        line = out[i + 1].rsplit(":", 1)[1].split()[0]
        result.append((out[i], int(line) if line.isdigit() else 0))
    return result


def symbol_addresses():
    """{function: address} of the program's own functions (nm)."""
    proc = subprocess.run(["nm", PROG], capture_output=True, text=True, check=True)
    table = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            table[parts[2]] = int(parts[0], 16)
    return table


def go_pprof(profile, *flags):
    """What `go tool pprof FLAGS PROFILE` prints."""
    if not os.path.exists(GO):
        raise AssertionError("%s is missing: this test needs Debian's golang-go package "
                             "(make deps installs it; or apt-get install golang-go)" % GO)
    home = tempfile.mkdtemp(prefix="hs-pprof-")
    try:
        env = clean_env()
        env.update({"HOME": home, "PPROF_TMPDIR": home, "GOTOOLCHAIN": "local",
                    "GOFLAGS": "", "GOPATH": os.path.join(home, "go")})
        proc = subprocess.run([GO, "tool", "pprof"] + list(flags) + [profile],
                              capture_output=True, text=True, env=env, cwd=home, timeout=120)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if proc.returncode != 0:
        raise AssertionError("go tool pprof failed: %s" % proc.stderr)
    return proc.stdout


def pprof_traces(profile, *flags):
    """The stacks `go tool pprof -traces` prints: [[(function, line), ...] innermost first]."""
    traces = []
    for block in go_pprof(profile, *flags, "-traces").split("-----------+")[1:]:
        frames = []
        for text in block.splitlines()[1:]:
            words = text.split()
            if not words or words[0].startswith("-"):
                continue
            if len(frames) == 0 and len(words) >= 2 and re.match(r"^[\d.]+\w*B$", words[0]):
                words = words[1:]  # the value column of the first frame
            line = 0
            if len(words) >= 2 and ":" in words[-1]:
                tail = words[-1].rsplit(":", 1)[1]
                line = int(tail) if tail.isdigit() else 0
            frames.append((words[0], line))
        if frames:
            traces.append(frames)
    return traces


class CallSiteTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs-callsite-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check_callers(self, helper_line, caller_frames, what):
        """caller_frames: [(function, line)] of three_calls's and main's frames."""
        self.assertEqual(caller_frames[0], ("three_calls", LINES[helper_line]), what)
        self.assertEqual(caller_frames[1], ("main", LINES["CALL_MAIN"]), what)

    def test_the_program_tells_call_lines_from_return_lines(self):
        # Without this the other tests could not fail: each call's return address (its call
        # site + 1) is on the next line.
        self.assertEqual(sorted(LINES), ["CALL_A", "CALL_B", "CALL_C", "CALL_MAIN"])
        self.assertEqual(LINES["CALL_B"], LINES["CALL_A"] + 1)
        self.assertEqual(LINES["CALL_C"], LINES["CALL_B"] + 1)

    # ---- malloc debug ------------------------------------------------------------------

    def heap_dump(self, *args):
        r = run([PROG] + list(args), "backtrace backtrace_full backtrace_dump_on_exit "
                                     "backtrace_dump_prefix=%s/heap" % self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = os.listdir(self.dir)
        self.assertEqual(len(names), 1, names)
        with open(os.path.join(self.dir, names[0])) as f:
            return f.read()

    def test_heap_dump_frames_are_call_sites(self):
        text = self.heap_dump()
        lines = text.splitlines()
        maps = [MAPS_RE.match(l) for l in lines[lines.index("MAPS") + 1:]]
        prog = os.path.realpath(PROG)
        seen = set()
        for i, line in enumerate(lines):
            m = RECORD_RE.match(line)
            if not m or int(m.group("size")) not in SIZES:
                continue
            size = int(m.group("size"))
            pcs = [int(x, 16) for x in m.group("bt").split()]
            # The pcs as a tool reads them: relative to the program's mapping.
            rel = []
            for pc in pcs[:3]:
                mp = [x for x in maps if x and int(x["start"], 16) <= pc < int(x["end"], 16)]
                self.assertEqual(len(mp), 1, "pc %x" % pc)
                self.assertEqual(os.path.realpath(mp[0]["path"]), prog)
                rel.append(pc - int(mp[0]["start"], 16) + int(mp[0]["offset"], 16))
            frames = addr2line(rel)
            self.assertEqual(frames[0][0], HELPER_OF_SIZE[size])
            self.check_callers(SIZES[size], frames[1:], "bt of the %d-byte record" % size)
            # A return address would name the next lines.
            after = addr2line([pc + 1 for pc in rel[1:]])
            self.assertEqual([l for _, l in after],
                             [LINES[SIZES[size]] + 1, LINES["CALL_MAIN"] + 1])
            # bt_info: the same relative pcs, the function holding each, the offset from it.
            info = INFO_ITEM_RE.findall(lines[i + 1])
            symbols = symbol_addresses()
            for k in range(3):
                path, rel_pc, sym, off = info[k]
                self.assertEqual(int(rel_pc, 16), rel[k])
                self.assertEqual(sym, frames[k][0])
                self.assertEqual(symbols[sym] + int(off, 16), rel[k])
            seen.add(size)
        self.assertEqual(seen, set(SIZES))

    def check_frame_lines(self, lines, header_re, what):
        """Frame lines after each "<size> ..." header: #01 and #02 resolve to the call lines,
        and the printed offset is the frame's from its function (as Android prints them)."""
        symbols = symbol_addresses()
        seen = set()
        size = None
        frames = []

        def finish():
            if size in SIZES:
                self.assertGreaterEqual(len(frames), 3, "%s: %d bytes" % (what, size))
                resolved = addr2line([pc for pc, _, _ in frames[:3]])
                self.assertEqual(resolved[0][0], HELPER_OF_SIZE[size])
                self.assertEqual([sym for _, sym, _ in frames[:3]],
                                 [HELPER_OF_SIZE[size], "three_calls", "main"])
                self.check_callers(SIZES[size], resolved[1:], "%s: %d bytes" % (what, size))
                for pc, sym, off in frames[:3]:
                    self.assertEqual(symbols[sym] + off, pc, "%s: %s+%d" % (what, sym, off))
                seen.add(size)

        for line in lines:
            h = header_re.search(line)
            if h:
                finish()
                size, frames = int(h.group(1)), []
                continue
            m = FRAME_RE.match(line)
            if m and size is not None and os.path.basename(m.group("path")) == \
                    os.path.basename(PROG):
                frames.append((int(m.group("pc"), 16), m.group("sym"), int(m.group("off"))))
        finish()
        self.assertEqual(seen, set(SIZES), what)

    def test_leak_report_frames_are_call_sites(self):
        r = run([PROG], "backtrace leak_track")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_frame_lines(r.log, re.compile(r"leaked block of size (\d+) at"), "leak report")

    # ---- libmemunreachable ---------------------------------------------------------------

    def test_unreachable_report_frames_are_call_sites(self):
        # The frame lines as the library prints them (the command would add source lines).
        proc = subprocess.run([CLI, "leaks", "--no-symbolize", "--", PROG, "drop"],
                              capture_output=True, text=True, env=clean_env(), timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        bodies = [l.split("memunreachable: ", 1)[1] for l in proc.stderr.splitlines()
                  if "memunreachable: " in l]
        self.check_frame_lines(bodies, re.compile(r"^  (\d+) bytes unreachable at"),
                               "unreachable report")

    # ---- Go's pprof ----------------------------------------------------------------------

    def check_traces(self, traces, what):
        seen = set()
        for t in traces:
            if t[0][0] in HELPERS:
                self.check_callers(HELPERS[t[0][0]], t[1:], "%s: %s" % (what, t))
                seen.add(t[0][0])
        self.assertEqual(seen, set(HELPERS), "%s: %s" % (what, traces))

    def test_profiler_profile_read_by_go_pprof(self):
        out = os.path.join(self.dir, "profiles")
        proc = subprocess.run([CLI, "profile", "-i", "1", "-o", out, "--", PROG],
                              capture_output=True, text=True, env=clean_env(), timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        final = [n for n in os.listdir(out) if n.endswith(".final.pb.gz")]
        self.assertEqual(len(final), 1, os.listdir(out))
        profile = os.path.join(out, final[0])
        # pprof symbolizing the addresses itself, and reading the profile's own lines.
        self.check_traces(pprof_traces(profile, "-symbolize=force", "-lines"), "forced")
        self.check_traces(pprof_traces(profile, "-lines"), "as written")
        # profile.proto: "mapping[0] will be the main binary"; pprof names it in its header.
        self.assertIn("File: %s\n" % os.path.basename(PROG), go_pprof(profile, "-top"))

    def test_profile_names_the_program_first_when_glibc_allocates(self):
        # Every stack's innermost frame is glibc's strdup: the program is still the first
        # mapping, of the profiler's profile and of heapscope report's pprof of a heap dump
        # (it was the first mapping a stack met: go tool pprof said "File: libc.so.6").
        self.heap_dump("strdup")
        dump = os.path.join(self.dir, os.listdir(self.dir)[0])
        converted = os.path.join(self.dir, "dump.pb.gz")
        subprocess.run([CLI, "report", "-q", "-o", converted, dump], check=True, env=clean_env())
        out = os.path.join(self.dir, "profiles")
        proc = subprocess.run([CLI, "profile", "-i", "1", "-o", out, "--", PROG, "strdup"],
                              capture_output=True, text=True, env=clean_env(), timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        final = [n for n in os.listdir(out) if n.endswith(".final.pb.gz")]
        self.assertEqual(len(final), 1, os.listdir(out))
        for profile in (os.path.join(out, final[0]), converted):
            top = go_pprof(profile, "-top")
            self.assertIn("File: %s\n" % os.path.basename(PROG), top)
            self.assertIn("strdup", top)

    def test_report_pprof_of_a_heap_dump_read_by_go_pprof(self):
        self.heap_dump()
        dump = os.path.join(self.dir, os.listdir(self.dir)[0])
        out = os.path.join(self.dir, "dump.pb.gz")
        subprocess.run([CLI, "report", "-q", "-o", out, dump], check=True, env=clean_env())
        self.check_traces(pprof_traces(out, "-symbolize=force", "-lines"), "forced")
        self.check_traces(pprof_traces(out, "-lines"), "as written")

    # ---- heapscope's own report ----------------------------------------------------------

    def test_report_names_call_lines_for_call_sites_and_return_addresses(self):
        text = self.heap_dump()
        new = os.path.join(self.dir, "new.txt")
        old = os.path.join(self.dir, "old.txt")
        with open(new, "w") as f:
            f.write(text)
        # What earlier versions wrote: every frame a return address (call site + 1).
        with open(old, "w") as f:
            for line in text.splitlines(True):
                m = RECORD_RE.match(line.rstrip("\n"))
                if m:
                    line = line[:m.start("bt")] + "".join(
                        " %x" % (int(x, 16) + 1) for x in m.group("bt").split()) + "\n"
                elif line.startswith("  bt_info"):
                    continue
                f.write(line)
        reports = []
        for path in (new, old):
            proc = subprocess.run([CLI, "report", "-q", "-f", "folded", path], check=True,
                                  capture_output=True, text=True, env=clean_env())
            reports.append(proc.stdout)
            stacks = [l for l in proc.stdout.splitlines() if "three_calls" in l]
            self.assertEqual(len(stacks), 3, proc.stdout)
            for helper, mark in HELPERS.items():
                want = "main (callsite.c:%d);three_calls (callsite.c:%d);%s (" % (
                    LINES["CALL_MAIN"], LINES[mark], helper)
                self.assertEqual(len([s for s in stacks if want in s]), 1,
                                 "%s: %s" % (path, proc.stdout))
        self.assertEqual(reports[0], reports[1])


if __name__ == "__main__":
    unittest.main()
