"""End-to-end: page_guard and sample_guard catch heap bugs at the faulting access.

md_guard (programs/md_guard.c) makes one bug per scenario; each report must name the right
kind, access (read or write), byte (allocation[N]) and distance, the access stack (first
frame in the buggy function), the allocation stack (alloc_block) and, for a freed block, the
free stack (free_block). Clean programs must run as without the shim, and a program's own
SIGSEGV handler must keep getting its own faults. Runs are made two at a time.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

from e2e import CLI, DIVIDER, FRAME_RE, STRESS, Case, run

GUARD = os.environ["HS_MD_GUARD"]
PRE = os.environ["HS_MD_GUARD_PRE"]
SHIM = os.environ["HS_MALLOC_DEBUG"]
BLOCK = 128

# scenario: (head, access, index, where, function with the bad access, block freed)
FAULTS = {
    "read_past_end_1": ("HAS A BUFFER OVERFLOW", "read", BLOCK, "1 byte past the end",
                        "read_past_end", False),
    "write_past_end_1": ("HAS A BUFFER OVERFLOW", "write", BLOCK, "1 byte past the end",
                         "write_past_end", False),
    "read_past_end_100": ("HAS A BUFFER OVERFLOW", "read", BLOCK + 99, "100 bytes past the end",
                          "read_past_end", False),
    "write_past_end_100": ("HAS A BUFFER OVERFLOW", "write", BLOCK + 99,
                           "100 bytes past the end", "write_past_end", False),
    "read_before_start_1": ("HAS A BUFFER UNDERFLOW", "read", -1, "1 byte before the start",
                            "read_before_start", False),
    "write_before_start_1": ("HAS A BUFFER UNDERFLOW", "write", -1, "1 byte before the start",
                             "write_before_start", False),
    "read_before_start_100": ("HAS A BUFFER UNDERFLOW", "read", -100,
                              "100 bytes before the start", "read_before_start", False),
    "write_before_start_100": ("HAS A BUFFER UNDERFLOW", "write", -100,
                               "100 bytes before the start", "write_before_start", False),
    "read_after_free": ("USED AFTER FREE", "read", 8, "inside the freed block",
                        "read_after_free", True),
    "write_after_free": ("USED AFTER FREE", "write", 8, "inside the freed block",
                         "write_after_free", True),
    "read_after_free_later": ("USED AFTER FREE", "read", 8, "inside the freed block",
                              "read_after_free", True),
    "write_after_free_later": ("USED AFTER FREE", "write", 8, "inside the freed block",
                               "write_after_free", True),
}
# scenario: (head suffix, detail line or None, function of the bad call, block freed)
POINTERS = {
    "double_free": ("DOUBLE FREE (free)", None, "free_again", True),
    "free_interior": ("INVALID FREE (free)", "  free of allocation[16] at {p16}: inside the block",
                      "free_interior", False),
}

# The options that catch each scenario: underflows need the guard page in front.
PAGE_REAR, PAGE_FRONT = "page_guard", "page_guard=front"
SAMPLE_REAR = "sample_guard=1 sample_guard_side=rear"
SAMPLE_FRONT = "sample_guard=1 sample_guard_side=front"


def options_for(scenario, tool):
    front = "before_start" in scenario
    if tool == "page":
        return PAGE_FRONT if front else PAGE_REAR
    return SAMPLE_FRONT if front else SAMPLE_REAR


def parse_reports(log):
    """The reports of a log: [{"head": [lines], "stacks": {title: [frame lines]},
    "after": [lines after the stacks]}]."""
    reports, cur, section = [], None, None
    for line in log:
        if line == DIVIDER:
            if cur is None:
                cur, section = {"head": [], "stacks": {}, "after": []}, None
            else:
                reports.append(cur)
                cur = None
            continue
        if cur is None:
            continue
        if line.startswith("Backtrace ") and line.endswith(":"):
            section = line[len("Backtrace "):-1]
            cur["stacks"][section] = []
        elif section and FRAME_RE.match(line):
            cur["stacks"][section].append(line)
        elif section:
            cur["after"].append(line)
        else:
            cur["head"].append(line)
    return reports


def frame_sym(frames, i=0):
    m = FRAME_RE.match(frames[i])
    return m.group("sym") if m else None


def syms(frames):
    return [frame_sym(frames, i) for i in range(len(frames))]


def in_parallel(calls):
    """Runs each (args, options[, env]) as run() does, two at a time; returns the Runs."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run, c[0], c[1], c[2] if len(c) > 2 else None) for c in calls]
        return [f.result() for f in futures]


class GuardCase(Case):
    def assert_stacks(self, rep, function, freed, where="main"):
        stacks = rep["stacks"]
        fail = stacks.get("at time of failure")
        self.assertTrue(fail, rep)
        self.assertEqual(frame_sym(fail), function, "\n".join(fail))
        self.assertIn("thread_main" if where == "thread" else "main", syms(fail))
        self.assertEqual(frame_sym(stacks["at time of allocation"]), "alloc_block", rep)
        if freed:
            self.assertEqual(frame_sym(stacks["at time of free"]), "free_block", rep)
        else:
            self.assertNotIn("at time of free", stacks)

    def check_fault(self, r, scenario, where="main"):
        head, access, index, where_text, function, freed = FAULTS[scenario]
        ctx = "%s: %s\n%s" % (scenario, r.stdout, "\n".join(r.log))
        self.assertEqual(r.returncode, -signal.SIGABRT, ctx)
        self.assertNotIn("survived", r.stdout, ctx)
        reports = parse_reports(r.log)
        self.assertEqual(len(reports), 1, ctx)
        rep = reports[0]
        ptr = int(r.values["ptr"], 16)
        self.assertEqual(rep["head"], [
            "+++ ALLOCATION 0x%x SIZE %d %s" % (ptr, BLOCK, head),
            "  %s of allocation[%d] at 0x%x: %s" % (access, index, ptr + index, where_text),
        ], ctx)
        self.assert_stacks(rep, function, freed, where)

    def check_pointer(self, r, scenario, where="main"):
        head, detail, function, freed = POINTERS[scenario]
        ctx = "%s: %s\n%s" % (scenario, r.stdout, "\n".join(r.log))
        self.assertEqual(r.returncode, 0, ctx)
        self.assertIn("survived", r.stdout, ctx)
        reports = parse_reports(r.log)
        self.assertEqual(len(reports), 1, ctx)
        ptr = int(r.values["ptr"], 16)
        want = ["+++ ALLOCATION 0x%x SIZE %d %s" % (ptr, BLOCK, head)]
        if detail:
            want.append(detail.format(p16="0x%x" % (ptr + 16)))
        self.assertEqual(reports[0]["head"], want, ctx)
        self.assert_stacks(reports[0], function, freed, where)

    def check(self, r, scenario, where="main"):
        if scenario in FAULTS:
            self.check_fault(r, scenario, where)
        else:
            self.check_pointer(r, scenario, where)

    def run_matrix(self, tool):
        """Every scenario with malloc in the main thread; calloc, realloc and memalign blocks
        and a second thread for a few."""
        cases = [(s, "malloc", "main") for s in list(FAULTS) + list(POINTERS)]
        for kind in ("calloc", "realloc", "memalign"):
            cases += [(s, kind, "main") for s in
                      ("read_past_end_1", "write_before_start_100", "write_after_free",
                       "double_free")]
        cases += [(s, "malloc", "thread") for s in
                  ("write_past_end_100", "read_before_start_1", "read_after_free_later",
                   "write_after_free", "double_free", "free_interior")]
        runs = in_parallel([([GUARD, s, kind, where], options_for(s, tool))
                            for s, kind, where in cases])
        for (s, kind, where), r in zip(cases, runs):
            with self.subTest(tool=tool, scenario=s, kind=kind, where=where):
                self.check(r, s, where)


    def run_after_realloc(self, options):
        """The old pointer of a realloc that moved the block, read: a use after free whose
        free stack is the realloc's caller."""
        runs = in_parallel([([GUARD, "read_after_realloc", "malloc", w], options)
                            for w in ("main", "thread")])
        for w, r in zip(("main", "thread"), runs):
            with self.subTest(where=w):
                ctx = "%s\n%s" % (r.stdout, "\n".join(r.log))
                self.assertEqual(r.returncode, -signal.SIGABRT, ctx)
                reports = parse_reports(r.log)
                self.assertEqual(len(reports), 1, ctx)
                ptr = int(r.values["ptr"], 16)
                self.assertNotEqual(int(r.values["moved"], 16), ptr, ctx)
                self.assertEqual(reports[0]["head"], [
                    "+++ ALLOCATION 0x%x SIZE %d USED AFTER FREE" % (ptr, BLOCK),
                    "  read of allocation[8] at 0x%x: inside the freed block" % (ptr + 8),
                ], ctx)
                stacks = reports[0]["stacks"]
                self.assertEqual(frame_sym(stacks["at time of failure"]), "read_after_free", ctx)
                self.assertIn("thread_main" if w == "thread" else "main",
                              syms(stacks["at time of failure"]), ctx)
                self.assertEqual(frame_sym(stacks["at time of allocation"]), "alloc_block", ctx)
                self.assertEqual(frame_sym(stacks["at time of free"]), "grow_block", ctx)


class PageGuard(GuardCase):
    def test_every_bug_is_caught_at_the_access(self):
        self.run_matrix("page")

    def test_use_after_realloc(self):
        self.run_after_realloc(PAGE_REAR)

    def test_rear_page_guard_does_not_see_underflows(self):
        # The documented limit of one side: the front of a rear block is not guarded.
        r = run([GUARD, "read_before_start_1"], PAGE_REAR)
        self.assertEqual(r.returncode, 0, r.log)
        self.assertEqual(r.log, [])

    def test_slack_is_checked_at_free(self):
        # A 100-byte block ends 12 bytes before its guard page (16-byte alignment): a one-byte
        # overflow into them is reported when the block is freed, as the rear guard does.
        for o in (PAGE_REAR, SAMPLE_REAR):
            with self.subTest(options=o):
                r = run([GUARD, "slack_overflow"], o)
                self.assertEqual(r.returncode, 0, r.log)
                reports = parse_reports(r.log)
                self.assertEqual(len(reports), 1, r.log)
                self.assertEqual(reports[0]["head"], [
                    "+++ ALLOCATION %s SIZE 100 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
                    "  allocation[100] = 0x00 (expected 0xbb)",
                ])
                self.assertEqual(frame_sym(reports[0]["stacks"]["at time of failure"]),
                                 "free_block")

    def test_double_free_with_verify_pointers_names_both_stacks(self):
        r = run([GUARD, "double_free"], "page_guard verify_pointers")
        self.check_pointer(r, "double_free")

    def test_double_free_with_free_track_is_free_tracks_report(self):
        # The block waits in free_track's queue first: free_track's own report.
        r = run([GUARD, "double_free"], "page_guard free_track")
        self.assertEqual(r.returncode, 0, r.log)
        self.assertEqual(r.log[1], "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"])
        self.assertIn("Backtrace of original free:", r.log)

    def test_with_the_other_options(self):
        # Guards, fills, tracking, leaks and a heap dump on top of page_guard: no error, the
        # leaked block is listed and dumped with its stack.
        with tempfile.TemporaryDirectory() as tmp:
            prefix = os.path.join(tmp, "dump")
            for opts in ("page_guard guard fill backtrace leak_track verify_pointers free_track "
                         "backtrace_dump_on_exit backtrace_dump_prefix=" + prefix,
                         "page_guard=front rear_guard=5 expand_alloc=3 leak_track"):
                with self.subTest(options=opts):
                    r = run([GUARD, "clean"], opts)
                    self.assertEqual(r.returncode, 0, r.stdout + "\n".join(r.log))
                    self.assertEqual(r.values.get("clean"), "yes", r.stdout)
                    self.assertNotIn(DIVIDER, r.log)
                    leak = [i for i, l in enumerate(r.log)
                            if re.match(r"\+\+\+ md_guard leaked block of size 333 at ", l)]
                    self.assertEqual(len(leak), 1, r.log)
                    if "backtrace" in opts:
                        self.assertEqual(r.log[leak[0] + 1], "Backtrace at time of allocation:")
                        self.assertIn("(leak_one+", r.log[leak[0] + 2])
                        with open("%s.%s.exit.txt" % (prefix, r.values["pid"])) as f:
                            self.assertRegex(f.read(), r"\nz 0  sz      333  num    1  bt ")

    def test_fork_child_reports_its_own_bug(self):
        env = dict(os.environ, LD_PRELOAD=SHIM, LIBC_DEBUG_MALLOC_OPTIONS="page_guard")
        proc = subprocess.run([GUARD, "fork_use_after_free"], env=env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("child_signal=%d" % signal.SIGABRT, proc.stdout)
        self.assertIn("survived", proc.stdout)
        pid = re.search(r"pid=(\d+)", proc.stdout).group(1)
        ptr = re.search(r"ptr=(\S+)", proc.stdout).group(1)
        lines = proc.stderr.splitlines()
        head = [l for l in lines if "+++ " in l]
        self.assertEqual(len(head), 1, proc.stderr)
        self.assertTrue(head[0].endswith("+++ ALLOCATION %s SIZE 128 USED AFTER FREE" % ptr))
        self.assertNotIn("[%s]" % pid, head[0], "the child reports, not the parent")


class SampleGuard(GuardCase):
    def test_every_bug_is_caught_with_n_1(self):
        self.run_matrix("sample")

    def test_use_after_realloc(self):
        self.run_after_realloc(SAMPLE_REAR)

    def test_default_rate_catches_a_repeated_bug(self):
        # 4000000 uses after free at one in 5000: even with the budget backing off 32-fold
        # (a sampled block costing ~40 us), about 25 are drawn; the chance to miss them all
        # is e^-25. The first one drawn aborts the loop.
        r = run([GUARD, "use_after_free_loop", "4000000"], "sample_guard", timeout=120)
        ctx = r.stdout + "\n".join(r.log)
        self.assertEqual(r.returncode, -signal.SIGABRT, ctx)
        self.assertNotIn("iterations=", r.stdout)
        reports = parse_reports(r.log)
        self.assertEqual(len(reports), 1, ctx)
        self.assertRegex(reports[0]["head"][0], r"^\+\+\+ ALLOCATION 0x[0-9a-f]+ SIZE 64 USED "
                                                r"AFTER FREE$")
        self.assertTrue(reports[0]["head"][1].startswith("  read of allocation[8] at 0x"),
                        reports[0]["head"])
        self.assertTrue(reports[0]["head"][1].endswith(": inside the freed block"),
                        reports[0]["head"])
        self.assertEqual(frame_sym(reports[0]["stacks"]["at time of failure"]), "read_after_free")
        self.assertEqual(frame_sym(reports[0]["stacks"]["at time of allocation"]),
                         "use_after_free_loop")

    def test_recover_reports_once_and_goes_on(self):
        r = run([GUARD, "read_after_free_twice"], "sample_guard=1 sample_guard_recover")
        ctx = r.stdout + "\n".join(r.log)
        self.assertEqual(r.returncode, 0, ctx)
        self.assertIn("survived", r.stdout)
        reports = parse_reports(r.log)
        self.assertEqual(len(reports), 1, ctx)
        self.assertEqual(reports[0]["after"], [
            "  sample_guard_recover: the page is made accessible, its slot is retired, the "
            "program goes on"])
        r = run([GUARD, "write_past_end_100"], SAMPLE_REAR + " sample_guard_recover")
        self.assertEqual(r.returncode, 0, r.log)
        self.assertEqual(len(parse_reports(r.log)), 1, r.log)

    def test_glibc_heap_is_left_as_without_it(self):
        # The sampled calls are made to glibc too (their shadow blocks): its heap ends up
        # exactly as with glibc alone, whatever the rate.
        alone = run([GUARD, "heap_shape"], preload=False)
        self.assertEqual(alone.returncode, 0, alone.stdout)
        self.assertRegex(alone.values.get("arena", ""), r"^[1-9]\d*$", alone.stdout)
        opts = ("sample_guard=1", "sample_guard=3", "sample_guard=100", "sample_guard")
        for o, r in zip(opts, in_parallel([([GUARD, "heap_shape"], o) for o in opts])):
            with self.subTest(options=o):
                self.assertEqual(r.returncode, 0, r.stdout + "\n".join(r.log))
                self.assertEqual(r.log, [])
                for k in ("arena", "ordblks", "uordblks", "fordblks", "keepcost", "hblkhd"):
                    self.assertEqual(r.values.get(k), alone.values[k], k)

    def test_unsampled_bugs_are_not_reported(self):
        # A rate so low that nothing is drawn: glibc's blocks, no report, no abort.
        r = run([GUARD, "read_after_free"], "sample_guard=1000000000")
        self.assertEqual(r.returncode, 0, r.log)
        self.assertEqual(r.log, [])


class CleanPrograms(GuardCase):
    OPTIONS = (PAGE_REAR, PAGE_FRONT, "sample_guard=1", "sample_guard")

    def test_clean_program(self):
        runs = in_parallel([([GUARD, "clean"], o) for o in self.OPTIONS])
        for o, r in zip(self.OPTIONS, runs):
            with self.subTest(options=o):
                self.assertEqual(r.returncode, 0, r.stdout + "\n".join(r.log))
                self.assertEqual(r.values.get("clean"), "yes", r.stdout)
                self.assertEqual(r.log, [])

    def test_threads_and_fork(self):
        calls = [([STRESS, "threads", "4", "3000"], o) for o in self.OPTIONS]
        calls += [([STRESS, "fork_busy", "4"], o) for o in (PAGE_REAR, "sample_guard=1")]
        for (args, o), r in zip(calls, in_parallel(calls)):
            with self.subTest(args=args, options=o):
                self.assertEqual(r.returncode, 0, r.stdout + "\n".join(r.log))
                self.assertIn("ok", r.stdout)
                self.assertEqual(r.log, [])

    def test_python(self):
        # The interpreter running this test (the real binary, not a wrapper script), with
        # every object allocated by malloc.
        code = ("import json, threading\n"
                "d = [{'k': i, 'v': str(i) * 3} for i in range(2000)]\n"
                "s = json.dumps(d)\n"
                "t = [threading.Thread(target=json.loads, args=(s,)) for _ in range(3)]\n"
                "[x.start() for x in t]; [x.join() for x in t]\n"
                "print('items=%d' % len(json.loads(s)))\n")
        calls = [([sys.executable, "-c", code], o, {"PYTHONMALLOC": "malloc"})
                 for o in self.OPTIONS]
        for (_, o, _), r in zip(calls, in_parallel(calls)):
            with self.subTest(options=o):
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.values.get("items"), "2000")
                # page_guard may note once that vm.max_map_count limits the guarded blocks.
                other = [l for l in r.log if "page_guard: " not in l or "+++" in l]
                self.assertEqual(other, [], r.log)
                self.assertNotIn(DIVIDER, r.log)


class Leaks(GuardCase):
    """libmemunreachable on guarded memory: md_guard's two leaks are found in guarded blocks,
    a block reachable only through another guarded block is not, and the scan reads neither
    freed blocks nor guard pages (PROT_NONE). Under `heapscope leaks -- PROGRAM` (the copy of
    malloc debug inside libmemunreachable.so) at a check while the program runs (-p) and at
    exit; under the preloaded shim with check_unreachable_on_signal (its fault handler in
    front of the detector's), with a page the program protected itself in a reachable
    block."""
    OPTIONS = ("page_guard", "page_guard=front guard", "sample_guard=1")

    def check_now(self, args, env):
        prog = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        try:
            lines = []
            for line in prog.stdout:
                lines.append(line.strip())
                if line.strip() == "ready":
                    break
            self.assertIn("ready", lines, lines)
            values = dict(l.split("=", 1) for l in lines if "=" in l)
            cli_env = dict(env)
            cli_env.pop("LD_PRELOAD", None)
            cli_env.pop("LIBC_DEBUG_MALLOC_OPTIONS", None)
            now = subprocess.run([CLI, "leaks", "-p", values["pid"], "--timeout", "60"],
                                 capture_output=True, text=True, timeout=120, env=cli_env)
        finally:
            _, err = prog.communicate("go\n", timeout=120)
        ctx = "%s\n%s\n%s" % (now.stdout, now.stderr, err)
        self.assertEqual(prog.returncode, 0, ctx)
        self.assertEqual(now.returncode, 23, ctx)  # leaks -p: 23 when it finds leaks
        self.assertEqual(now.stdout.splitlines()[0],
                         "  4398 bytes in 2 unreachable allocations", ctx)
        firsts = sorted(re.search(r"\((\w+)\+", l).group(1)
                        for l in now.stdout.splitlines() if l.strip().startswith("#00"))
        self.assertEqual(firsts, ["leak_big", "leak_small"], ctx)
        # malloc debug saw no bug (with the shim's handler in front, a read of a freed block
        # or a guard page would be one) and the check went through.
        self.assertNotIn("+++", err, ctx)
        self.assertNotIn("sweeper", err + now.stdout, ctx)
        return err + now.stdout, values, ctx

    def clean_env(self):
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "LIBC_DEBUG_MALLOC_OPTIONS", "HEAPSCOPE_LOG_FILE"):
            env.pop(k, None)
        return env

    def test_heapscope_leaks(self):
        for opts in self.OPTIONS:
            with self.subTest(options=opts):
                args = [CLI, "leaks", "-o", "backtrace check_unreachable_on_signal " + opts,
                        "--", GUARD, "leaks"]
                out, _, ctx = self.check_now(args, self.clean_env())
                # The detector notes every page it could not read: none was PROT_NONE.
                self.assertNotIn("unreadable", out, ctx)
                at_exit = [l.split("memunreachable: ", 1)[1] for l in out.splitlines()
                           if "] memunreachable: " in l and "unreachable out of" in l]
                self.assertTrue(at_exit, ctx)  # the -p check's, if logged, then the exit's
                self.assertRegex(at_exit[-1], r"^4398 bytes in 2 allocations unreachable out of",
                                 ctx)

    def test_preloaded_shim_and_a_page_the_program_protected(self):
        for opts in self.OPTIONS:
            with self.subTest(options=opts):
                env = self.clean_env()
                env["LD_PRELOAD"] = SHIM
                env["LIBC_DEBUG_MALLOC_OPTIONS"] = "backtrace check_unreachable_on_signal " + opts
                out, values, ctx = self.check_now([GUARD, "leaks", "protect"], env)
                # The detector's handler got the fault on the program's own PROT_NONE page.
                self.assertIn("skipped unreadable page at %s " % values["own_page"], out, ctx)


class OwnHandlers(GuardCase):
    OPTIONS = (PAGE_REAR, SAMPLE_REAR)

    def test_program_handler_gets_its_own_faults(self):
        calls = [([GUARD, "own_handler", how, "then_bug"], o)
                 for o in self.OPTIONS for how in ("sigaction", "signal", "direct")]
        for (args, o), r in zip(calls, in_parallel(calls)):
            with self.subTest(how=args[2], options=o):
                ctx = r.stdout + "\n".join(r.log)
                self.assertIn("query=own", r.stdout, ctx)
                # The kernel keeps the shim's handler in front (put back after "direct").
                self.assertIn("kernel=other", r.stdout, ctx)
                self.assertIn("own_caught=2", r.stdout, ctx)
                # ... and a fault in guarded memory is still explained.
                self.assertEqual(r.returncode, -signal.SIGABRT, ctx)
                reports = parse_reports(r.log)
                self.assertEqual(len(reports), 1, ctx)
                self.assertTrue(reports[0]["head"][0].endswith("HAS A BUFFER OVERFLOW"), ctx)

    def test_without_guarded_memory_the_handler_is_the_programs(self):
        # The interposed sigaction is glibc's when neither option is on.
        for opts in (None, "guard"):
            with self.subTest(options=opts):
                r = run([GUARD, "own_handler", "sigaction"], opts)
                self.assertIn("query=own", r.stdout)
                self.assertIn("kernel=own", r.stdout)
                self.assertIn("own_caught=2", r.stdout)
                self.assertEqual(r.returncode, 0, r.stdout)

    def test_handler_installed_before_the_shim(self):
        env = {"LD_PRELOAD": SHIM + " " + PRE}
        for o in self.OPTIONS:
            with self.subTest(options=o):
                r = run([GUARD, "null_deref"], o, env)
                self.assertEqual(r.returncode, 42, r.stdout + "\n".join(r.log))
                self.assertIn("pre_handler", r.stdout)
                self.assertEqual(r.log, [])
                r = run([GUARD, "read_past_end_1"], o, env)
                self.check_fault(r, "read_past_end_1")

    def test_no_handler_dies_by_sigsegv(self):
        for o in self.OPTIONS:
            with self.subTest(options=o):
                r = run([GUARD, "null_deref"], o)
                self.assertEqual(r.returncode, -signal.SIGSEGV)
                self.assertEqual(r.log, [])


if __name__ == "__main__":
    unittest.main()
