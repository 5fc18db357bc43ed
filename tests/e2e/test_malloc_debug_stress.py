"""End-to-end: threads, fork and exit under the shim finish with no report and no hang."""
import unittest

from e2e import STRESS, Case, run, without_leak_report


class Stress(Case):
    def check(self, args, options, timeout=240, leaks_ok=False):
        r = run([STRESS] + args, options, timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        self.assertEqual(r.stdout.splitlines()[-1], "ok")
        log = r.log
        if leaks_ok:
            # leak_track reports what libc and exiting threads still hold; nothing else.
            log = without_leak_report(log, "md_stress")
        self.assertEqual(log, [], "\n".join(r.log[:40]))

    def test_threads_with_guards_and_fill(self):
        self.check(["threads", "16", "200000"], "guard fill")

    def test_threads_with_every_core_option(self):
        self.check(["threads", "8", "100000"], "front_guard=48 rear_guard=7 fill expand_alloc")

    def test_thousand_threads(self):
        self.check(["many_threads", "1000"], "guard fill")

    def test_exit_while_threads_allocate(self):
        for _ in range(5):
            self.check(["exit_busy", "32"], "guard fill")

    def test_fork_while_threads_allocate(self):
        self.check(["fork_busy", "4"], "guard fill")

    def test_threads_with_tracking(self):
        self.check(["threads", "8", "50000"], "backtrace free_track leak_track verify_pointers",
                   leaks_ok=True)

    def test_thousand_threads_with_tracking(self):
        self.check(["many_threads", "1000"], "backtrace free_track leak_track verify_pointers",
                   leaks_ok=True)

    def test_exit_while_threads_allocate_with_tracking(self):
        for _ in range(3):
            self.check(["exit_busy", "32"], "backtrace free_track leak_track verify_pointers",
                       leaks_ok=True)

    def test_fork_with_tracking(self):
        self.check(["fork_busy", "4"], "backtrace free_track leak_track verify_pointers guard",
                   leaks_ok=True)

    def test_every_option_with_signals_during_the_run(self):
        """All options at once while heap dumps, record writes, backtrace toggles and
        statistics are requested from outside: no report, no hang, consistent dumps."""
        import os
        import signal
        import subprocess
        import tempfile
        import time
        from e2e import SHIM
        with tempfile.TemporaryDirectory() as d:
            options = ("guard fill expand_alloc backtrace backtrace_enable_on_signal free_track "
                       "leak_track verify_pointers record_allocs record_allocs_file=%s/rec "
                       "backtrace_dump_prefix=%s/heap log_allocator_stats_on_signal" % (d, d))
            env = dict(os.environ, LD_PRELOAD=SHIM, LIBC_DEBUG_MALLOC_OPTIONS=options)
            proc = subprocess.Popen([STRESS, "threads", "4", "400000"], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            sigs = [signal.SIGRTMAX - 17, signal.SIGRTMAX - 18, signal.SIGRTMAX - 19,
                    signal.SIGRTMAX - 15]
            sent = 0
            time.sleep(0.2)
            while proc.poll() is None and sent < 40:
                try:
                    os.kill(proc.pid, sigs[sent % len(sigs)])
                except ProcessLookupError:
                    break
                sent += 1
                time.sleep(0.05)
            out, err = proc.communicate(timeout=240)
            self.assertEqual(proc.returncode, 0, err[-3000:])
            self.assertEqual(out.splitlines()[-1], "ok")
            self.assertGreater(sent, 4, "the run was long enough to get signals")
            bad = [l for l in err.splitlines() if "+++ ALLOCATION" in l or "*** ***" in l]
            self.assertEqual(bad, [])
            dumps = [f for f in os.listdir(d) if f.startswith("heap.")]
            self.assertTrue(dumps)
            for name in dumps:
                with open(os.path.join(d, name)) as f:
                    text = f.read()
                self.assertTrue(text.startswith("Android Native Heap Dump v1.2\n"))
                self.assertTrue(text.endswith("END\n"), name)

    def test_fork_passthrough(self):
        self.check(["fork_busy", "4"], None)


if __name__ == "__main__":
    unittest.main()
