"""End-to-end: threads, fork and exit under the shim finish with no report and no hang."""
import unittest

from e2e import STRESS, Case, run


class Stress(Case):
    def check(self, args, options, timeout=240):
        r = run([STRESS] + args, options, timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr[-2000:])
        self.assertEqual(r.stdout.splitlines()[-1], "ok")
        self.assertEqual(r.log, [])

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

    def test_fork_passthrough(self):
        self.check(["fork_busy", "4"], None)


if __name__ == "__main__":
    unittest.main()
