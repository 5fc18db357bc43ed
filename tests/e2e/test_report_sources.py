"""Source lines, suppressions, exit codes and JSON of the live reports (issue 15).

The heapscope command runs the program as its child and reads its report lines: each frame
line keeps Android's text and gets " FILE:LINE" appended (inlined functions as "(inlined)"
lines before it); --suppressions leaves findings out, --error-exitcode fails the run, --json
writes one object per finding. Lines are checked against the source of the test program,
whose interesting lines carry "LINE:name" comments.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e import CLI, SHIM, DIVIDER, FRAME_RE, clean_env  # noqa: E402

PROG = os.environ["HS_RS_PROG"]
SOURCE = os.environ["HS_RS_SOURCE"]
STRIPPED = os.environ["HS_RS_STRIPPED"]
DEMO = os.environ["HS_DEMO_OVERFLOW"]
DEMO_SOURCE = os.environ["HS_DEMO_SOURCE"]

PREFIX_RE = re.compile(r"^(?P<prog>[^\[\s]+)\[(?P<pid>\d+)\] (?P<tag>[a-z_]+): (?P<body>.*)$")
SOURCE_RE = re.compile(r"^(?P<frame>.*\S) (?P<file>[^ /()]+):(?P<line>\d+)$")
INLINED_RE = re.compile(r"^          #(?P<num>\d\d)  \(inlined\)           (?P<fn>\S+) "
                        r"(?P<file>[^ ]+):(?P<line>\d+)$")


def marked_lines(path):
    """{name: line number} of the "LINE:name" comments of a source file."""
    lines = {}
    with open(path) as f:
        for number, text in enumerate(f, 1):
            m = re.search(r"LINE:(\w+)", text)
            if m:
                lines[m.group(1)] = number
    return lines


LINES = marked_lines(SOURCE)


def cli(args, timeout=120, **kw):
    return subprocess.run([CLI] + args, capture_output=True, text=True, env=clean_env(),
                          timeout=timeout, **kw)


def bodies(text):
    return [PREFIX_RE.match(l).group("body") for l in text.splitlines() if PREFIX_RE.match(l)]


def frame_of(body, function):
    """The (file, line) appended to the frame line of `function`, after checking that the
    rest is Android's frame line, untouched."""
    m = SOURCE_RE.match(body)
    if not m:
        return None
    f = FRAME_RE.match(m.group("frame"))
    if not f or f.group("sym") != function:
        return None
    return m.group("file"), int(m.group("line"))


def sources_of(text, function):
    return [s for s in (frame_of(b, function) for b in bodies(text)) if s]


class Sources(unittest.TestCase):
    def test_demo_overflow_names_its_line(self):
        r = cli(["debug", "-o", "guard", "--", DEMO])
        self.assertEqual(r.returncode, 0, r.stderr)
        log = bodies(r.stderr)
        self.assertIn("HAS A CORRUPTED REAR GUARD", "\n".join(log))
        with open(DEMO_SOURCE) as f:
            free_line = [n for n, t in enumerate(f, 1) if "free(name);" in t][0]
        self.assertEqual(sources_of(r.stderr, "main"), [("overflow.c", free_line)], r.stderr)

    def test_demo_overflow_with_backtrace_names_the_allocating_line(self):
        # make demo's step 2: with the backtrace option the corrupted-guard report adds the
        # block's allocation stack after the failure's: the line of the too-small malloc
        # and the call in main. (Before, the report had the free's stack only.)
        r = cli(["debug", "-o", "guard backtrace", "--", DEMO])
        self.assertEqual(r.returncode, 0, r.stderr)
        log = bodies(r.stderr)
        with open(DEMO_SOURCE) as f:
            text = f.read().splitlines()
        malloc_line = [n for n, t in enumerate(text, 1) if "malloc(strlen(name))" in t][0]
        call_line = [n for n, t in enumerate(text, 1) if "copy_name(\"" in t][0]
        free_line = [n for n, t in enumerate(text, 1) if "free(name);" in t][0]
        at = log.index("Backtrace at time of allocation:")
        self.assertLess(log.index("Backtrace at time of failure:"), at, r.stderr)
        def sources(part, function):
            return [s for s in (frame_of(b, function) for b in part) if s]
        self.assertEqual(sources(log[:at], "main"), [("overflow.c", free_line)], r.stderr)
        self.assertEqual(sources(log[at:], "copy_name"), [("overflow.c", malloc_line)], r.stderr)
        self.assertEqual(sources(log[at:], "main"), [("overflow.c", call_line)], r.stderr)

    def test_demo_leak_names_its_line(self):
        # make demo's step 4: the list's five nodes, from build_list's calloc line.
        leak = os.path.join(os.path.dirname(DEMO), "leak")
        with open(os.path.join(os.path.dirname(DEMO_SOURCE), "leak.c")) as f:
            calloc_line = [n for n, t in enumerate(f, 1) if "calloc(" in t][0]
        r = cli(["leaks", "--", leak])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("160 bytes in 5 allocations unreachable", r.stderr)
        self.assertEqual(sources_of(r.stderr, "build_list"), [("leak.c", calloc_line)],
                         r.stderr)

    def test_error_report_lines(self):
        r = cli(["debug", "-o", "guard", "--", PROG, "overflow"])
        self.assertEqual(sources_of(r.stderr, "main"),
                         [("report_sources.c", LINES["overflow_free"])], r.stderr)
        # A frame line without a function keeps it that way, with its source after it.
        for body in bodies(r.stderr):
            if body.startswith("          #"):
                plain = SOURCE_RE.match(body)
                self.assertIsNotNone(FRAME_RE.match(plain.group("frame") if plain else body),
                                     body)

    def test_leak_track_at_exit(self):
        r = cli(["debug", "-o", "backtrace leak_track", "--", PROG, "leaks"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sources_of(r.stderr, "first_leak"),
                         [("report_sources.c", LINES["first_leak"])], r.stderr)
        self.assertEqual(sources_of(r.stderr, "second_leak"),
                         [("report_sources.c", LINES["second_leak"])], r.stderr)

    def test_memunreachable_at_exit(self):
        r = cli(["leaks", "--", PROG, "leaks"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("300 bytes in 2 allocations unreachable", r.stderr)
        self.assertEqual(sources_of(r.stderr, "first_leak"),
                         [("report_sources.c", LINES["first_leak"])], r.stderr)
        self.assertEqual(sources_of(r.stderr, "second_leak"),
                         [("report_sources.c", LINES["second_leak"])], r.stderr)

    def test_inlined_frame(self):
        r = cli(["leaks", "--", PROG, "inlined"])
        log = bodies(r.stderr)
        i = [n for n, b in enumerate(log) if INLINED_RE.match(b)]
        self.assertEqual(len(i), 1, r.stderr)
        m = INLINED_RE.match(log[i[0]])
        self.assertEqual((m.group("fn"), m.group("file"), int(m.group("line"))),
                         ("inlined_leak", "report_sources.c", LINES["inlined_leak"]))
        # Then the frame it was inlined into, same number, with the line of the call.
        self.assertEqual(frame_of(log[i[0] + 1], "main"),
                         ("report_sources.c", LINES["inlined_call"]))
        self.assertEqual(FRAME_RE.match(SOURCE_RE.match(log[i[0] + 1]).group("frame"))
                         .group("num"), m.group("num"))

    def test_stripped_binary_keeps_the_raw_line(self):
        r = cli(["debug", "-o", "backtrace leak_track", "--", STRIPPED, "leaks"])
        own = [b for b in bodies(r.stderr) if STRIPPED in b]
        self.assertTrue(own, r.stderr)
        for body in own:
            self.assertRegex(body, r"^          #\d\d  pc [0-9a-f]{16}  %s$" % re.escape(STRIPPED))
        # libc's frames still get theirs when its debug information is there.

    def test_no_symbolize(self):
        r = cli(["debug", "--no-symbolize", "-o", "backtrace leak_track", "--", PROG, "leaks"])
        frames = [b for b in bodies(r.stderr) if b.startswith("          #")]
        self.assertTrue(frames)
        for body in frames:
            self.assertIsNotNone(FRAME_RE.match(body), body)

    def test_leaks_of_a_running_process(self):
        server = subprocess.Popen([CLI, "leaks", "--", PROG, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=clean_env())
        try:
            self.assertEqual(server.stdout.readline().strip(), "ready")
            r = cli(["leaks", "-p", str(server.pid)])
            self.assertEqual(r.returncode, 23, r.stderr)
            self.assertEqual(sources_of(r.stdout, "first_leak"), [], "no prefix here")
            found = [SOURCE_RE.match(l) for l in r.stdout.splitlines()]
            mains = [(m.group("file"), int(m.group("line"))) for m in found
                     if m and "(first_leak+" in m.group("frame")]
            self.assertEqual(mains, [("report_sources.c", LINES["first_leak"])], r.stdout)
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "p.json")
                r = cli(["leaks", "-p", str(server.pid), "--error-exitcode", "7", "--json", out])
                self.assertEqual(r.returncode, 7, r.stderr)
                with open(out) as f:
                    found = [json.loads(line) for line in f]
            self.assertEqual(sorted(x["size"] for x in found), [100, 200])
            # The program's pid: the command's child, not the command.
            (pid,) = {x["pid"] for x in found}
            with open("/proc/%d/status" % pid) as f:
                self.assertIn("\nPPid:\t%d\n" % server.pid, f.read())
            supp = self.supp_file("leak:first_leak\nleak:second_leak\n")
            r = cli(["leaks", "-p", str(server.pid), "--suppressions", supp])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("heapscope leaks: suppressed 1 leak (100 bytes) with leak:first_leak",
                          r.stdout)
        finally:
            server.stdin.close()
            server.wait(timeout=60)
        self.assertEqual(server.returncode, 0)

    def test_leaks_of_a_clean_running_process(self):
        server = subprocess.Popen([CLI, "leaks", "--", PROG, "serve_clean"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            self.assertEqual(server.stdout.readline().strip(), "ready")
            r = cli(["leaks", "-p", str(server.pid), "--error-exitcode", "7"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertTrue(r.stdout.startswith("  0 bytes in 0 unreachable allocations"),
                            r.stdout)
        finally:
            server.stdin.close()
            server.wait(timeout=60)

    def test_symbolize_a_saved_log(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "md.log")
            env = clean_env()
            env.update({"LD_PRELOAD": SHIM, "LIBC_DEBUG_MALLOC_OPTIONS": "backtrace leak_track",
                        "HEAPSCOPE_LOG_FILE": log})
            subprocess.run([PROG, "leaks"], env=env, check=True, timeout=60)
            with open(log) as f:
                raw = f.read()
            self.assertEqual(sources_of(raw, "first_leak"), [], "the log has no sources")
            for args, stdin in (([log], None), ([], raw)):
                r = cli(["symbolize"] + args, input=stdin)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(sources_of(r.stdout, "first_leak"),
                                 [("report_sources.c", LINES["first_leak"])], r.stdout)
                # Nothing else changes: drop the sources and the log comes back.
                stripped = [SOURCE_RE.sub(r"\g<frame>", l) for l in r.stdout.splitlines()]
                self.assertEqual([l for l in stripped if "(inlined)" not in l],
                                 raw.splitlines())
        r = cli(["symbolize", "/nonexistent/md.log"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read /nonexistent/md.log", r.stderr)

    def test_log_file_per_process(self):
        # --log with %p: each process's reports in the file of its pid (its prefix says which),
        # symbolized; a process with nothing to report gets no file.
        with tempfile.TemporaryDirectory() as d:
            pattern = os.path.join(d, "md.%p.log")
            r = cli(["debug", "--log", pattern, "--", "sh", "-c",
                     '"$0" overflow; "$0" overflow', PROG])
            self.assertEqual(r.returncode, 0, r.stderr)
            files = sorted(os.listdir(d))
            self.assertEqual(len(files), 2, files)
            for name in files:
                with open(os.path.join(d, name)) as f:
                    text = f.read()
                pids = {PREFIX_RE.match(l).group("pid") for l in text.splitlines()}
                self.assertEqual(pids, {name.split(".")[1]}, text)
                self.assertEqual(sources_of(text, "main"),
                                 [("report_sources.c", LINES["overflow_free"])], text)

    def test_command_gone(self):
        # A process of the program that outlives it (here started in the background by sh,
        # which exits at once) reports after the command is gone: its socket meets EPIPE,
        # never SIGPIPE; one line says so, the report follows on its own stderr, and it lives
        # to write all of it.
        script = 'exec 3<&0; "$0" serve <&3 & exit 0'
        cmd = subprocess.Popen([CLI, "debug", "-o", "backtrace leak_track", "--", "sh", "-c",
                                script, PROG], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=clean_env())
        self.assertEqual(cmd.stdout.readline().strip(), "ready")
        cmd.wait(timeout=60)  # sh exited: the command is gone
        self.assertEqual(cmd.returncode, 0)
        cmd.stdin.close()  # the background program's stdin: it ends and reports its leaks
        err = cmd.stderr.read()  # EOF once that program is gone too
        self.assertRegex(err, r"malloc_debug: the heapscope command's report stream "
                              r"\(descriptor \d+\) cannot be written \(the command is gone\); "
                              r"messages go to stderr from now on\n")
        self.assertIn("leaked block of size 200", err)
        self.assertIn("leaked block of size 100", err)

    def test_command_killed(self):
        # kill -9 on the command (what a caller knows of the program) ends the program too.
        server = subprocess.Popen([CLI, "debug", "--", PROG, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=clean_env())
        self.addCleanup(server.stdin.close)
        self.assertEqual(server.stdout.readline().strip(), "ready")
        with open("/proc/%d/task/%d/children" % (server.pid, server.pid)) as f:
            (program,) = [int(p) for p in f.read().split()]
        server.kill()
        server.wait(timeout=60)
        for _ in range(3000):
            if not os.path.exists("/proc/%d" % program):
                break
            with open("/proc/%d/stat" % program) as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break
            time.sleep(0.01)
        else:
            self.fail("process %d outlived its command" % program)

    def test_program_that_closes_its_descriptors(self):
        # The report socket is gone: the shim says so once and writes to stderr itself.
        r = cli(["debug", "-o", "backtrace leak_track", "--", PROG, "closefds"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"malloc_debug: the heapscope command's report stream "
                                   r"\(descriptor \d+\) was closed by the program; messages "
                                   r"go to stderr from now on")
        self.assertIn("leaked block of size 200", r.stderr)

    def supp_file(self, text):
        return write_supp(self, text)


def write_supp(testcase, text):
    """A suppressions file holding text, removed after the test."""
    d = tempfile.mkdtemp(prefix="hs-supp-")
    path = os.path.join(d, "known.supp")
    with open(path, "w") as f:
        f.write(text)
    testcase.addCleanup(lambda: (os.unlink(path), os.rmdir(d)))
    return path


class Suppressions(unittest.TestCase):
    def supp_file(self, text):
        return write_supp(self, text)

    def test_one_of_two_leaks(self):
        supp = self.supp_file("# known leaks\n\nleak:second_leak\n")
        for command in (["leaks"], ["debug", "-o", "backtrace leak_track"]):
            r = cli(command + ["--suppressions", supp, "--", PROG, "leaks"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(sources_of(r.stderr, "first_leak")), 1, r.stderr)
            self.assertEqual(sources_of(r.stderr, "second_leak"), [], r.stderr)
            self.assertIn("heapscope %s: suppressed 1 leak (200 bytes) with leak:second_leak "
                          "(%s:3)\n" % (command[0], supp), r.stderr)

    def test_patterns_match_files_and_libraries(self):
        # A source file with a wildcard, and a library path: the same leak either way.
        for rule in ("leak:report_sources.c", "leak:second_*", "leak:^second_leak$"):
            supp = self.supp_file(rule + "\n")
            r = cli(["leaks", "--suppressions", supp, "--", PROG, "leaks"])
            self.assertIn("suppressed", r.stderr, rule)
        supp = self.supp_file("leak:libc.so*\n")  # every stack runs through libc
        r = cli(["leaks", "--suppressions", supp, "--", PROG, "leaks"])
        self.assertIn("suppressed 2 leaks (300 bytes) with leak:libc.so*", r.stderr)
        supp = self.supp_file("error:first_leak\n")  # an error rule does not touch leaks
        r = cli(["leaks", "--suppressions", supp, "--", PROG, "leaks"])
        self.assertIn("no finding matched the suppressions of %s" % supp, r.stderr)
        self.assertEqual(len(sources_of(r.stderr, "first_leak")), 1)

    def test_documented_example(self):
        # docs/malloc_debug.md: glibc's buffer of a piped stdout, a real library's block live
        # at exit, silenced; the demo's own five nodes stay (summary and blocks).
        leak = os.path.join(os.path.dirname(DEMO), "leak")
        supp = self.supp_file("# glibc's stdio buffer of stdout lives until exit: not ours\n"
                              "leak:_IO_file_doallocate\n")
        r = cli(["debug", "-o", "backtrace leak_track", "--suppressions", supp, "--", leak])
        self.assertIn("heapscope debug: suppressed 1 leak (4096 bytes) with "
                      "leak:_IO_file_doallocate (%s:2)" % supp, r.stderr)
        self.assertNotIn("_IO_file_doallocate+", r.stderr)
        self.assertEqual(len(re.findall(r"leaked block of size 32 ", r.stderr)), 5)

    def test_error_rule(self):
        supp = self.supp_file("error:main\n")
        r = cli(["debug", "--error-exitcode", "9", "--suppressions", supp, "--", PROG,
                 "overflow"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("CORRUPTED", r.stderr)
        self.assertIn("suppressed 1 error (10 bytes) with error:main", r.stderr)

    def test_bad_file(self):
        supp = self.supp_file("leak:a\n# fine\nleek:b\n")
        for command in (["leaks"], ["debug"]):
            r = cli(command + ["--suppressions", supp, "--", PROG, "clean"])
            self.assertEqual(r.returncode, 2)
            self.assertEqual(r.stdout, "", "the program did not run")
            self.assertEqual(r.stderr, "heapscope %s: %s:3: not a rule: 'leek:b' (expected "
                             "leak:PATTERN or error:PATTERN, or a # comment)\n"
                             % (command[0], supp))
        r = cli(["leaks", "--suppressions", "/nonexistent/x.supp", "--", PROG, "clean"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read the suppressions file /nonexistent/x.supp", r.stderr)


class ShimSuppressions(unittest.TestCase):
    """The malloc debug option suppressions=FILE, with the shim preloaded by hand: function
    and library names only (the shim has no line tables)."""

    def preload(self, options, mode):
        env = clean_env()
        env.update({"LD_PRELOAD": SHIM, "LIBC_DEBUG_MALLOC_OPTIONS": options})
        return subprocess.run([PROG, mode], env=env, capture_output=True, text=True,
                              timeout=60)

    def test_one_of_two_leaks(self):
        supp = write_supp(self, "leak:second_leak\n")
        r = self.preload("backtrace leak_track suppressions=" + supp, "leaks")
        log = bodies(r.stderr)
        self.assertIn("+++ report_sources leaked block of size 100 at", "\n".join(log))
        self.assertNotIn("size 200", "\n".join(log))
        self.assertIn("(leak 1 of 1)", "\n".join(log), "the counts are those left")
        self.assertEqual(log[-1], "report_sources: suppressed 1 leak (200 bytes) with "
                                  "leak:second_leak (%s:1)" % supp)
        supp = write_supp(self, "leak:libc.so*\n")
        r = self.preload("backtrace leak_track suppressions=" + supp, "leaks")
        self.assertEqual(bodies(r.stderr), ["report_sources: suppressed 2 leaks (300 bytes) "
                                            "with leak:libc.so* (%s:1)" % supp])

    def test_error_is_neither_logged_nor_fatal(self):
        supp = write_supp(self, "error:main\n")
        r = self.preload("guard abort_on_error suppressions=" + supp, "overflow")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(bodies(r.stderr), ["report_sources: suppressed 1 error with error:main "
                                            "(%s:1)" % supp])
        # A rule that matches nothing leaves the report and the abort as they were.
        supp = write_supp(self, "error:no_such_function\n")
        r = self.preload("guard abort_on_error suppressions=" + supp, "overflow")
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assertIn("HAS A CORRUPTED REAR GUARD", r.stderr)

    def test_memunreachable(self):
        # libmemunreachable carries malloc debug's option parser: the same option applies to
        # its report at exit and to the one `leaks -p` reads.
        supp = write_supp(self, "leak:second_leak\n")
        env = clean_env()
        env.update({"LD_PRELOAD": os.environ["HS_MEMUNREACHABLE"],
                    "LIBC_DEBUG_MALLOC_OPTIONS": "backtrace suppressions=" + supp,
                    "HEAPSCOPE_UNREACHABLE_AT_EXIT": "1"})
        r = subprocess.run([PROG, "leaks"], env=env, capture_output=True, text=True,
                           timeout=60)
        log = bodies(r.stderr)
        self.assertEqual(log[0], "100 bytes in 1 allocation unreachable out of 300 bytes in 2 "
                                 "allocations", r.stderr)
        self.assertEqual(log[-1], "suppressed 1 leak (200 bytes) with leak:second_leak (%s:1)"
                         % supp)
        server = subprocess.Popen([CLI, "leaks", "-o", "backtrace check_unreachable_on_signal "
                                   "suppressions=" + supp, "--", PROG, "serve"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            self.assertEqual(server.stdout.readline().strip(), "ready")
            r = cli(["leaks", "-p", str(server.pid)])
            self.assertEqual(r.returncode, 23, r.stderr)
            self.assertTrue(r.stdout.startswith("  100 bytes in 1 unreachable allocation\n"),
                            r.stdout)
            self.assertIn("\n  suppressed 1 leak (200 bytes) with leak:second_leak (%s:1)\n"
                          % supp, r.stdout)
        finally:
            server.stdin.close()
            server.wait(timeout=60)

    def test_guard_page_fault_is_never_suppressed(self):
        # The program dies of the fault anyway: the report stays, with the command and
        # without it.
        supp = write_supp(self, "error:main\n")
        r = self.preload("page_guard suppressions=" + supp, "fault")
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assertIn("SIZE 32 HAS A BUFFER OVERFLOW", r.stderr)
        r = cli(["debug", "-o", "page_guard", "--suppressions", supp, "--", PROG, "fault"])
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assertIn("SIZE 32 HAS A BUFFER OVERFLOW", r.stderr)
        # The bad write's line, and the allocation's.
        self.assertEqual(sources_of(r.stderr, "main"),
                         [("report_sources.c", LINES["fault_write"]),
                          ("report_sources.c", LINES["fault_write"] - 1)], r.stderr)
        self.assertIn("no finding matched the suppressions", r.stderr)

    def test_bad_file(self):
        supp = write_supp(self, "leak:a\nlaek:b\n")
        r = self.preload("guard suppressions=" + supp, "clean")
        self.assertEqual(bodies(r.stderr), ["report_sources: suppressions file %s:2: not a rule: "
                                            "'laek:b' (expected leak:PATTERN or error:PATTERN, "
                                            "or a # comment); no suppressions used" % supp])
        # The command checks the file before the program runs.
        r = cli(["debug", "-o", "guard suppressions=" + supp, "--", PROG, "clean"])
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertEqual(r.stderr, "heapscope debug: %s:2: not a rule: 'laek:b' (expected "
                         "leak:PATTERN or error:PATTERN, or a # comment)\n" % supp)


class ExitCodes(unittest.TestCase):
    def test_errors(self):
        r = cli(["debug", "--error-exitcode", "42", "--", PROG, "overflow"])
        self.assertEqual(r.returncode, 42, r.stderr)
        r = cli(["debug", "--", PROG, "overflow"])
        self.assertEqual(r.returncode, 0, "without the option: the program's own status")

    def test_leaks(self):
        for command in (["leaks"], ["debug", "-o", "backtrace leak_track"]):
            r = cli(command + ["--error-exitcode", "42", "--", PROG, "leaks"])
            self.assertEqual(r.returncode, 42, r.stderr)

    def test_suppressed_only(self):
        supp = write_supp(self, "leak:first_leak\nleak:second_leak\n")
        r = cli(["leaks", "--error-exitcode", "42", "--suppressions", supp, "--", PROG, "leaks"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("suppressed 1 leak (100 bytes) with leak:first_leak", r.stderr)

    def test_clean(self):
        for command in (["leaks"], ["debug"]):
            r = cli(command + ["--error-exitcode", "42", "--", PROG, "clean"])
            self.assertEqual(r.returncode, 0, r.stderr)
        r = cli(["debug", "--", PROG, "nosuchmode"])
        self.assertEqual(r.returncode, 2, "the program's own status")

    def test_signals(self):
        # A program killed by a signal: the command dies of the same signal.
        r = cli(["debug", "-o", "guard abort_on_error", "--", PROG, "overflow"])
        self.assertEqual(r.returncode, -signal.SIGABRT, r.stderr)
        r = cli(["debug", "--error-exitcode", "42", "-o", "guard abort_on_error", "--", PROG,
                 "overflow"])
        self.assertEqual(r.returncode, 42, "a finding wins over the signal")
        r = cli(["debug", "--", "sh", "-c", "kill -TERM $$"])
        self.assertEqual(r.returncode, -signal.SIGTERM)

    def test_bad_values(self):
        for value in ("0", "256", "x", ""):
            r = cli(["debug", "--error-exitcode", value, "--", PROG, "clean"])
            self.assertEqual(r.returncode, 2)
            self.assertIn("bad exit code '%s' (1 to 255)" % value, r.stderr)


class Json(unittest.TestCase):
    def test_findings(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "findings.json")
            r = cli(["leaks", "--json", out, "--", PROG, "leaks"])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                found = [json.loads(line) for line in f]
            self.assertEqual(sorted(x["size"] for x in found), [100, 200])
            text = r.stderr.splitlines()
            for x in found:
                self.assertEqual(x["kind"], "unreachable")
                self.assertEqual(x["program"], "report_sources")
                self.assertRegex(x["address"], r"^0x[0-9a-f]+$")
                # The text lines are the report's, as printed, in order.
                start = text.index(x["text"][0])
                self.assertEqual(text[start:start + len(x["text"])], x["text"])
                top = x["frames"][0]
                name = "first_leak" if x["size"] == 100 else "second_leak"
                self.assertEqual((top["function"], top["symbol"], os.path.basename(top["file"]),
                                  top["line"], top["module"]),
                                 (name, name, "report_sources.c", LINES[name], PROG))
                self.assertEqual(top["index"], 0)
                self.assertRegex(top["pc"], r"^0x[0-9a-f]+$")
                self.assertIn("#00  pc %016x  " % int(top["pc"], 16), x["text"][1])

    def test_error_and_leak_track(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "findings.json")
            cli(["debug", "--json", out, "-o", "guard", "--", PROG, "overflow"])
            with open(out) as f:
                (err,) = [json.loads(line) for line in f]
            self.assertEqual(err["kind"], "error")
            self.assertRegex(err["message"], r"^ALLOCATION 0x[0-9a-f]+ SIZE 10 HAS A CORRUPTED "
                                             r"REAR GUARD$")
            self.assertEqual(err["size"], 10)
            self.assertEqual(err["address"], err["message"].split()[1])
            self.assertEqual(PREFIX_RE.match(err["text"][0]).group("body"), DIVIDER)
            mains = [f for f in err["frames"] if f["function"] == "main"]
            self.assertEqual([(f["stack"], f["line"]) for f in mains],
                             [("Backtrace at time of failure", LINES["overflow_free"])])
            cli(["debug", "--json", out, "-o", "backtrace leak_track", "--", PROG, "inlined"])
            with open(out) as f:
                (leak,) = [json.loads(line) for line in f]
            self.assertEqual((leak["kind"], leak["size"]), ("leak", 300))
            (main,) = [f for f in leak["frames"] if f["function"] == "main"]
            self.assertEqual(main["line"], LINES["inlined_call"])
            self.assertEqual([(i["function"], i["line"]) for i in main["inlined"]],
                             [("inlined_leak", LINES["inlined_leak"])])


if __name__ == "__main__":
    unittest.main()
