"""End-to-end: how the shim reads its environment (options, program filter, log file)."""
import glob
import os
import tempfile
import unittest

from e2e import BUGS, Case, DIVIDER, run

USAGE_1 = "For malloc debug option descriptions go to:"


class BadOptions(Case):
    def assert_passthrough_with_error(self, options, error):
        # The overflow must go unreported: a bad string never half-enables the shim.
        r = run([BUGS, "rear_overflow_1"], options)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(len(r.log), 3, r.log)
        self.assertEqual(r.log[0], "md_bugs: " + error)
        self.assertEqual(r.log[1], USAGE_1)
        self.assertTrue(r.log[2].startswith("  ") and r.log[2].endswith("malloc_debug.md"),
                        r.log[2])

    def test_unknown_option(self):
        self.assert_passthrough_with_error("guard bogus", "unknown option bogus")

    def test_bad_value_after_valid_options(self):
        self.assert_passthrough_with_error(
            "guard fill rear_guard=10x",
            "bad value for option 'rear_guard', non space found after option: x")

    def test_range(self):
        self.assert_passthrough_with_error(
            "guard=16385", "bad value for option 'guard', value must be <= 16384: 16385")
        self.assert_passthrough_with_error(
            "front_guard=0", "bad value for option 'front_guard', value must be >= 1: 0")
        self.assert_passthrough_with_error(
            "expand_alloc=-3", "bad value for option 'expand_alloc', value cannot be negative: -3")

    def test_flag_with_value(self):
        self.assert_passthrough_with_error(
            "guard abort_on_error=1",
            "value set for option 'abort_on_error' which does not take a value")

    def test_hostile_strings_do_not_crash(self):
        for options in ("=" * 5000, "guard=" + "9" * 5000, "\t\n guard \t", "\x01\x02",
                        "guard=" + " " * 100 + "8"):
            with self.subTest(options=options[:20]):
                r = run([BUGS, "clean"], options)
                self.assertEqual(r.returncode, 0)


class Environment(Case):
    def test_verbose_says_enabled(self):
        r = run([BUGS, "clean"], "guard verbose")
        self.assertEqual(r.log, ["md_bugs: malloc debug enabled"])

    def test_program_filter_matches(self):
        r = run([BUGS, "rear_overflow_1"], "guard",
                {"LIBC_DEBUG_MALLOC_PROGRAM": "md_bugs"})
        self.assertEqual(r.log[0], DIVIDER)

    def test_program_filter_other_program(self):
        r = run([BUGS, "rear_overflow_1"], "guard verbose",
                {"LIBC_DEBUG_MALLOC_PROGRAM": "something_else"})
        self.assertEqual(r.log, [])

    def test_no_options_is_passthrough(self):
        r = run([BUGS, "rear_overflow_1"])
        self.assertEqual(r.log, [])

    def test_log_file_with_pid(self):
        with tempfile.TemporaryDirectory() as d:
            pattern = os.path.join(d, "md.%p.log")
            r = run([BUGS, "rear_overflow_1"], "guard", {"HEAPSCOPE_LOG_FILE": pattern})
            self.assertEqual(r.log, [], "nothing on stderr")
            files = glob.glob(os.path.join(d, "md.*.log"))
            self.assertEqual(files, [os.path.join(d, "md.%s.log" % r.values["pid"])])
            with open(files[0]) as f:
                lines = f.read().splitlines()
            self.assertTrue(lines[0].endswith("malloc_debug: " + DIVIDER), lines[0])
            self.assertIn("HAS A CORRUPTED REAR GUARD", lines[1])

    def test_log_file_unwritable_falls_back_to_stderr(self):
        r = run([BUGS, "rear_overflow_1"], "guard",
                {"HEAPSCOPE_LOG_FILE": "/nonexistent/dir/x.log"})
        # Said once, with the path and the reason, then the report follows on stderr.
        self.assertEqual(r.log[0], "cannot write the log file /nonexistent/dir/x.log: No such "
                                   "file or directory; messages go to stderr from now on")
        self.assertEqual(r.log[1], DIVIDER)
        self.assertEqual(sum(l.startswith("cannot write the log file") for l in r.log), 1)


if __name__ == "__main__":
    unittest.main()
