"""End-to-end: threads, fork and exit under the shim finish with no report and no hang."""
import unittest

from e2e import STRESS, Case, run


class Stress(Case):
    def check(self, args, options, timeout=240, leaks_ok=False):
        r = run([STRESS] + args, options, timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        self.assertEqual(r.stdout.splitlines()[-1], "ok")
        log = r.log
        if leaks_ok:
            # leak_track reports what libc and exiting threads still hold; nothing else.
            log = [l for l in log if "leaked block of size" not in l
                   and l != "Backtrace at time of allocation:" and not l.startswith("  ")]
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

    def test_fork_passthrough(self):
        self.check(["fork_busy", "4"], None)


if __name__ == "__main__":
    unittest.main()
