"""End-to-end: the unreachable-memory detector in real programs, and `heapscope leaks`."""
import ctypes.util
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from e2e import CLI, Case

LEAKS = os.environ["HS_MU_LEAKS"]
LIB = os.environ["HS_MU_LIB"]


def run_leaks(*args, env_extra=None, timeout=180):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "LIBC_DEBUG_MALLOC_OPTIONS", "HEAPSCOPE_LOG_FILE"):
        env.pop(k, None)
    env.update(env_extra or {})
    proc = subprocess.run([LEAKS] + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout)
    values = {}
    for line in proc.stdout.splitlines():
        for word in line.split():
            if "=" in word:
                k, v = word.split("=", 1)
                values[k] = v
    return proc, values


class Detector(Case):
    """A program linked with -lmemunreachable and nothing else (no preload, no options)."""

    def expect(self, values, tag, leaks, leak_bytes=None):
        self.assertEqual(values[tag + "_ok"], "1", tag)
        self.assertEqual(int(values[tag + "_leaks"]), leaks, tag)
        if leak_bytes is not None:
            self.assertEqual(int(values[tag + "_bytes"]), leak_bytes, tag)

    def test_stack_global_interior_references(self):
        proc, v = run_leaks("basic")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.expect(v, "clean", 0)
        self.assertEqual(v["noleaks"], "1")
        self.expect(v, "stack_held", 0)
        self.expect(v, "stack_cleared", 1, 100)
        # The 100-byte block of the stack scenario stays leaked from here on.
        self.expect(v, "global_held", 1, 100)
        self.expect(v, "global_cleared", 2, 300)
        self.expect(v, "global_freed", 1, 100)
        self.expect(v, "interior", 1, 100)
        self.expect(v, "one_past_end", 2, 356)
        self.expect(v, "twice_a", 1, 100)
        self.expect(v, "twice_b", 1, 100)

    def test_thread_local_storage_of_another_thread(self):
        _, v = run_leaks("tls")
        self.expect(v, "tls", 0)
        self.expect(v, "tls_cleared", 2, 700)

    def test_reference_only_in_a_register(self):
        _, v = run_leaks("register")
        self.expect(v, "register", 0)
        self.expect(v, "register_cleared", 1, 500)

    def test_global_of_a_dlopened_library(self):
        _, v = run_leaks("dlopen", LIB)
        self.expect(v, "dlopen_held", 0)
        self.expect(v, "dlopen_cleared", 1, 600)

    def test_no_walk_to_probe_tracking(self):
        # The check lists the blocks in the sweeper only; it once called malloc_iterate first,
        # over an empty range, only to learn that they are tracked: a read of every block.
        _, v = run_leaks("iterate_calls")
        self.expect(v, "probe", 1024)
        self.assertEqual(v["iterate_calls"], "0")

    def test_thousand_block_cycle(self):
        _, v = run_leaks("cycle")
        self.expect(v, "cycle", 1000, 16000)
        self.assertEqual(v["cycle_reported"], "1000")
        self.assertEqual((v["cycle_min_ref"], v["cycle_max_ref"]), ("999", "999"))

    def test_cycle_with_an_entry_block(self):
        _, v = run_leaks("cycle_entry")
        self.expect(v, "cycle", 1001)
        self.assertEqual(v["cycle_reported"], "1")
        self.assertEqual(v["cycle_max_ref"], "1000")

    def test_two_blocks_pointing_at_each_other(self):
        _, v = run_leaks("pair")
        self.expect(v, "cycle", 2, 32)
        self.assertEqual(v["cycle_reported"], "2")
        self.assertEqual(v["cycle_max_ref"], "1")

    def test_limit(self):
        _, v = run_leaks("many")
        self.expect(v, "many", 1024, 1024 * 32)
        self.assertEqual(v["many_reported"], "100")

    def test_referenced_prot_none_block(self):
        proc, v = run_leaks("protnone")
        self.expect(v, "protnone", 0)
        self.assertIn("skipped unreadable page", proc.stderr)

    def test_report_text(self):
        proc, v = run_leaks("report")
        addr = v["leak"]
        text = proc.stdout.split("leak=%s\n" % addr, 1)[1]
        self.assertEqual(text.splitlines(), [
            "  40 bytes in 1 unreachable allocation",
            "  ABI: 'x86_64'",
            "",
            "  40 bytes unreachable at %s" % addr,
            "   first 32 bytes of contents:",
            "   %s: 68 65 61 70 73 63 6f 70 65 20 6c 65 61 6b 20 72 heapscope leak r" % addr,
            "   %x: 65 70 6f 72 74 20 30 31 32 33 34 35 36 37 38 39 eport 0123456789"
            % (int(addr, 16) + 16),
            "",  # a blank line closes each leak, as on Android
        ])

    def test_threads_signals_and_allocation_during_capture(self):
        for n in ("10", "1024"):
            with self.subTest(threads=n):
                proc, v = run_leaks("load", n)
                self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
                self.assertEqual(v["threads"], n)
                self.expect(v, "load1", 1, 777)
                self.expect(v, "load2", 1, 777)  # twice: the same answer
                self.assertEqual(v["signals_after"], "1", "signals still delivered")


class UnderAnotherAllocator(Case):
    @unittest.skipUnless(ctypes.util.find_library("jemalloc"), "jemalloc is not installed")
    def test_check_refused_not_empty(self):
        # jemalloc preloaded: the program's malloc is neither glibc's nor heapscope's, and the
        # library's own copy of the tracking stays off. The check must fail and say why, never
        # walk glibc's (unused) heap and call it clean.
        proc, values = run_leaks("basic", env_extra={
            "LD_PRELOAD": ctypes.util.find_library("jemalloc")})
        self.assertNotEqual(values.get("clean_ok"), "1", proc.stdout)
        self.assertIn("memunreachable: cannot check for unreachable memory: the program's malloc "
                      "is another allocator's, neither glibc's nor heapscope's", proc.stderr)


class Command(Case):
    def test_leaks_at_exit(self):
        proc = subprocess.run([CLI, "leaks", "--", LEAKS, "exit_leak"], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [l.split("memunreachable: ", 1)[1] for l in proc.stderr.splitlines()
                 if "] memunreachable: " in l]
        self.assertRegex(lines[0], r"^4321 bytes in 1 allocation unreachable out of \d+ bytes "
                                   r"in \d+ allocations$")
        self.assertRegex(lines[1], r"^  4321 bytes unreachable at [0-9a-f]+$")
        frames = "\n".join(lines[2:])
        self.assertIn("(make_leak+", frames, "the allocation's backtrace")

    def test_leaks_of_a_running_process(self):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        server = subprocess.Popen([CLI, "leaks", "--", LEAKS, "serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env)
        try:
            self.assertEqual(server.stdout.readline().strip(), "ready")
            start = time.monotonic()
            # server.pid is the heapscope leaks command's: -p takes it for its program's.
            proc = subprocess.run([CLI, "leaks", "-p", str(server.pid), "--timeout", "60"],
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 23, "leaks found: " + proc.stderr)
            self.assertEqual(proc.stdout.splitlines()[0],
                             "  3003 bytes in 3 unreachable allocations")
            self.assertIn("(make_leak+", proc.stdout)
            self.assertLess(time.monotonic() - start, 60)
            # Twice in a row, same answer.
            again = subprocess.run([CLI, "leaks", "-p", str(server.pid)], capture_output=True,
                                   text=True, timeout=120)
            self.assertEqual(again.stdout.splitlines()[0], proc.stdout.splitlines()[0])
        finally:
            server.stdin.close()
            server.wait(timeout=60)
        self.assertEqual(server.returncode, 0)

    def test_leaks_p_refusals(self):
        r = subprocess.run([CLI, "leaks", "-p", "999999999"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no process 999999999", r.stderr)
        # --no-inject: as root, the command would load the detector into pid 1.
        r = subprocess.run([CLI, "leaks", "--no-inject", "-p", "1"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "belongs to another user|not allowed to inspect process 1|"
                                   "has no heapscope library loaded")
        plain = subprocess.Popen(["sleep", "30"])
        try:
            r = subprocess.run([CLI, "leaks", "--no-inject", "-p", str(plain.pid)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no heapscope library loaded", r.stderr)
        finally:
            plain.kill()
            plain.wait()
        r = subprocess.run([CLI, "leaks", "-o", "guard", "--", LEAKS, "basic"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("must track allocations", r.stderr)


if __name__ == "__main__":
    unittest.main()
