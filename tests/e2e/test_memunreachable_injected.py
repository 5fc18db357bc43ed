"""End-to-end: `heapscope leaks -p` on a process started without heapscope (nothing preloaded,
glibc's malloc): libmemunreachable.so is loaded into it with ptrace by `heapscope leaks -p`
itself, or (to test the library's injected init alone) by tests/e2e/programs/mu_injected.c."""
import os
import re
import subprocess
import tempfile
import unittest

from e2e import CLI, SHIM, Case, clean_env, start_tracer, stop_tracer

PROGRAM = os.environ["HS_MU_INJECTED"]
LIB = os.environ["HS_MEMUNREACHABLE"]
NOTE = ("  Not started under heapscope: no allocation backtraces; leaks of the same size are "
        "grouped.")
SHIM_NOTE = ("  Allocations not tracked: no allocation backtraces (add the malloc debug option "
             "backtrace for them); leaks of the same size are grouped.")


def start(*args, env=None):
    return subprocess.Popen([PROGRAM] + list(args), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or clean_env())


def read_facts(proc):
    """key=value words up to READY."""
    facts = {}
    for line in proc.stdout:
        line = line.strip()
        if line == "READY":
            return facts
        for word in line.split():
            k, v = word.split("=", 1)
            facts[k] = v
    raise AssertionError("no READY; stderr: %s" % proc.stderr.read())


def addresses(value):
    return set(int(a, 16) for a in value.split(",") if a)


def check(pid, *extra):
    return subprocess.run([CLI, "leaks", "-p", str(pid), "--timeout", "60"] + list(extra),
                          capture_output=True, text=True, timeout=120)


class Injected(Case):
    def test_leaks_of_a_process_started_without_heapscope(self):
        self.scenario("-")

    def test_library_loaded_by_the_program(self):
        self.scenario(LIB)

    def scenario(self, lib):
        proc = start(lib)
        try:
            facts = read_facts(proc)
            if lib != "-":
                self.assertEqual(facts["init"], "0")
                self.assertEqual(facts["init_again"], "0", "a second init is harmless")
            else:
                r = check(proc.pid, "--no-inject")
                self.assertEqual(r.returncode, 1)
                self.assertIn("process %d has no heapscope library loaded (and --no-inject "
                              "was given)" % proc.pid, r.stderr)
            small, big = int(facts["usable_small"]), int(facts["usable_big"])
            leak_small = addresses(facts["leak_small"])
            leak_big = addresses(facts["leak_big"])
            freed, kept = addresses(facts["freed"]), addresses(facts["kept"])
            self.assertEqual((len(leak_small), len(leak_big)), (3, 1))
            self.assertGreater(len(freed), 40)

            r = check(proc.pid)
            self.assertEqual(r.returncode, 23, "leaks found: " + r.stdout + r.stderr)
            self.assertEqual("loaded the detector into process %d" % proc.pid in r.stderr,
                             lib == "-", r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[:4], [
                "  %d bytes in 4 unreachable allocations" % (3 * small + big),
                "  ABI: 'x86_64'",
                NOTE,
                "",
            ], r.stdout)
            # Grouped by size, largest first: the big block, then the three small ones as one
            # leak (the lowest address) with two similar ones.
            reported = [(int(m.group(1)), int(m.group(2), 16)) for m in
                        re.finditer(r"^  (\d+) bytes unreachable at ([0-9a-f]+)$", r.stdout,
                                    re.M)]
            self.assertEqual(reported, [(big, min(leak_big)), (small, min(leak_small))],
                             r.stdout)
            self.assertIn("   and %d similar unreachable bytes in 2 allocations" % (2 * small),
                          lines)
            self.assertNotIn("#00", r.stdout, "no backtraces")
            for addr in freed | kept:
                self.assertNotIn("%x" % addr, r.stdout, "freed or reachable block reported")

            # Twice in a row: the same answer; the program keeps working in between.
            again = check(proc.pid)
            self.assertEqual(again.stdout, r.stdout)
            self.assertNotIn("loaded the detector", again.stderr)  # loaded once
            proc.stdin.write("more\n")
            proc.stdin.flush()
            self.assertEqual(proc.stdout.readline().strip(), "more_ok")
            third = check(proc.pid)
            self.assertEqual(third.stdout.splitlines()[0], lines[0])
            # What the check notes on the way (here the sweeper, a process of its own, cut a
            # heap walk short) comes with the report, not in the program's stderr.
            proc.stdin.write("corrupt\n")
            proc.stdin.flush()
            self.assertEqual(proc.stdout.readline().strip(), "corrupt_ok 1")
            fourth = check(proc.pid)
            self.assertEqual(fourth.returncode, 23, fourth.stdout + fourth.stderr)
            noted = fourth.stdout.split("  Noted during the check:\n")
            self.assertEqual(len(noted), 2, fourth.stdout)
            self.assertRegex(noted[1], r"^    glibc heap: ", fourth.stdout)
        finally:
            proc.stdin.close()
            out = proc.stdout.read()
            err = proc.stderr.read()
            proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out.strip(), "done")
        # Checked from outside: the reports went to the command, none into the program's
        # own stderr.
        self.assertEqual(err, "")

    def test_check_unreachable_on_signal_alone(self):
        # malloc debug with check_unreachable_on_signal and no tracking option (issue 15, item
        # 5): the check walks glibc's heap, as above, finds the four leaks, and says in one
        # line that there are no backtraces and which option adds them. (Before, the check
        # failed: "allocations are not tracked; add verify_pointers or backtrace".)
        env = clean_env()
        env["LD_PRELOAD"] = SHIM
        env["LIBC_DEBUG_MALLOC_OPTIONS"] = "check_unreachable_on_signal"
        proc = start("-", env=env)
        try:
            facts = read_facts(proc)
            small, big = int(facts["usable_small"]), int(facts["usable_big"])
            leak_small = addresses(facts["leak_small"])
            leak_big = addresses(facts["leak_big"])
            r = check(proc.pid)
            self.assertEqual(r.returncode, 23, "leaks found: " + r.stdout + r.stderr)
            self.assertNotIn("loaded the detector", r.stderr)  # the shim loads it itself
            self.assertEqual(r.stdout.splitlines()[:4], [
                "  %d bytes in 4 unreachable allocations" % (3 * small + big),
                "  ABI: 'x86_64'",
                SHIM_NOTE,
                "",
            ], r.stdout)
            reported = [(int(m.group(1)), int(m.group(2), 16)) for m in
                        re.finditer(r"^  (\d+) bytes unreachable at ([0-9a-f]+)$", r.stdout,
                                    re.M)]
            self.assertEqual(reported, [(big, min(leak_big)), (small, min(leak_small))],
                             r.stdout)
            self.assertNotIn("#00", r.stdout, "no backtraces")
            for addr in addresses(facts["freed"]) | addresses(facts["kept"]):
                self.assertNotIn("%x" % addr, r.stdout, "freed or reachable block reported")
        finally:
            proc.stdin.close()
            proc.stdout.read()
            err = proc.stderr.read()
            proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        # The program's own log has the report too (malloc debug's check logs it), with the
        # note.
        self.assertRegex(err, r"mu_injected\[%d\] memunreachable: %d bytes in 4 allocations "
                         r"unreachable out of \d+ bytes" % (proc.pid, 3 * small + big))
        self.assertIn("memunreachable: " + SHIM_NOTE.strip() + "\n", err)

    def test_check_unreachable_on_signal_with_page_guard_says_why_not(self):
        # page_guard puts every block on pages of its own, which a walk of glibc's heap does
        # not see: without tracking, the check fails and says why, rather than report nothing.
        env = clean_env()
        env["LD_PRELOAD"] = SHIM
        env["LIBC_DEBUG_MALLOC_OPTIONS"] = "page_guard check_unreachable_on_signal"
        proc = start("-", env=env)
        try:
            read_facts(proc)
            r = check(proc.pid)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        finally:
            proc.stdin.close()
            proc.stdout.read()
            err = proc.stderr.read()
            proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("memunreachable: cannot check for unreachable memory: allocations are not "
                      "tracked and page_guard keeps them off glibc's heap; add verify_pointers "
                      "or backtrace to LIBC_DEBUG_MALLOC_OPTIONS", err)

    def test_failed_check_says_why_to_the_command(self):
        # A thread traced by another process (a small tracer that passes every signal on)
        # cannot be stopped: the check fails, and the reason reaches the command, not the
        # program's stderr.
        proc = start(LIB)
        tracer = None
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        try:
            read_facts(proc)
            tracer = start_tracer(proc.pid, tmp.name)
            r = check(proc.pid)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stdout.splitlines()[:2], [
                "error: the unreachable-memory check failed",
                "  thread capture: ptrace(PTRACE_SEIZE) of thread %d refused (Operation not "
                "permitted): it is already traced by process %d (python3)"
                % (proc.pid, tracer.pid)], r.stdout)
        finally:
            if tracer:
                stop_tracer(tracer)
            proc.stdin.close()
            proc.stdout.read()
            err = proc.stderr.read()
            proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 0, err)  # unharmed
        self.assertEqual(err, "")

    def test_injection_refused_by_a_program_that_handles_the_signal(self):
        proc = start("-", "handler")
        try:
            read_facts(proc)
            r = check(proc.pid)
            self.assertEqual(r.returncode, 1)
            self.assertIn("heapscope leaks: cannot check process %d: the program handles the "
                          "check signal (SIGRTMAX-16) itself" % proc.pid, r.stderr)
        finally:
            proc.stdin.close()
            proc.stdout.read()
            proc.stderr.read()
            proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 0)  # unharmed

    def test_refusals(self):
        # The program handles the check signal itself.
        proc = subprocess.run([PROGRAM, LIB, "handler"], capture_output=True, text=True,
                              env=clean_env(), timeout=60)
        self.assertEqual(proc.stdout.strip(), "init=4", proc.stderr)
        # Another allocator than glibc's: heapscope's own shim, preloaded.
        env = clean_env()
        env["LD_PRELOAD"] = SHIM
        proc = subprocess.run([PROGRAM, LIB, "refuse"], capture_output=True, text=True, env=env,
                              timeout=60)
        self.assertEqual(proc.stdout.strip(), "init=2", proc.stderr)


if __name__ == "__main__":
    unittest.main()
