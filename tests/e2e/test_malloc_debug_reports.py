"""End-to-end: programs with real heap bugs under libmalloc_debug.so, exact reports."""
import os
import shutil
import signal
import tempfile
import unittest

from e2e import BUGS, Case, DIVIDER, run


class GuardReports(Case):
    def test_rear_overflow_by_one_byte(self):
        r = run([BUGS, "rear_overflow_1"], "guard")
        self.assertEqual(r.returncode, 0)
        end = self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 100 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
            "  allocation[100] = 0x00 (expected 0xbb)",
        ], "free_it")
        self.assertEqual(end, len(r.log), "nothing after the report")

    def test_rear_overflow_by_many_bytes(self):
        r = run([BUGS, "rear_overflow_many"], "rear_guard")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 100 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
        ] + ["  allocation[%d] = 0x41 (expected 0xbb)" % i for i in range(100, 110)], "free_it")

    def test_rear_overflow_beyond_a_small_guard(self):
        # rear_guard=4: only the 4 guard bytes are checked and listed.
        r = run([BUGS, "rear_overflow_many"], "rear_guard=4")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 100 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
        ] + ["  allocation[%d] = 0x41 (expected 0xbb)" % i for i in range(100, 104)], "free_it")

    def test_front_underflow_by_one_byte(self):
        r = run([BUGS, "front_underflow_1"], "front_guard")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 40 HAS A CORRUPTED FRONT GUARD" % r.values["ptr"],
            "  allocation[-1] = 0x00 (expected 0xaa)",
        ], "free_it")

    def test_front_underflow_by_many_bytes(self):
        r = run([BUGS, "front_underflow_many"], "guard=16")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 40 HAS A CORRUPTED FRONT GUARD" % r.values["ptr"],
        ] + ["  allocation[%d] = 0x55 (expected 0xaa)" % i for i in range(-16, 0)], "free_it")

    def test_both_guards_give_two_reports(self):
        r = run([BUGS, "both_guards"], "guard")
        end = self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 8 HAS A CORRUPTED FRONT GUARD" % r.values["ptr"],
            "  allocation[-2] = 0x01 (expected 0xaa)",
        ], "free_it")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 8 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
            "  allocation[9] = 0x02 (expected 0xbb)",
        ], "free_it", start=end)

    def test_overflow_without_the_matching_guard_is_not_reported(self):
        r = run([BUGS, "rear_overflow_1"], "front_guard")
        self.assertEqual(r.log, [])
        self.assertEqual(r.returncode, 0)

    def test_abort_on_error_exits_by_sigabrt_after_the_report(self):
        r = run([BUGS, "rear_overflow_1"], "guard abort_on_error")
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assert_report(r.log, [
            "+++ ALLOCATION %s SIZE 100 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
            "  allocation[100] = 0x00 (expected 0xbb)",
        ], "free_it")


class PointerReports(Case):
    def test_double_free_reports_used_after_free(self):
        r = run([BUGS, "double_free"], "guard")
        self.assertEqual(r.returncode, 0)
        end = self.assert_report(r.log, [
            "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"],
        ], "free_it")
        self.assertEqual(end, len(r.log))

    def test_double_free_with_rear_guard_only(self):
        r = run([BUGS, "double_free"], "rear_guard=1")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"]], "free_it")

    def test_realloc_after_free_returns_null(self):
        r = run([BUGS, "realloc_after_free"], "guard")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s USED AFTER FREE (realloc)" % r.values["ptr"]],
            "realloc_after_free")
        self.assertEqual(r.values["realloc"], "(nil)")

    def test_free_of_interior_pointer_reports_invalid_tag(self):
        r = run([BUGS, "free_interior"], "guard")
        self.assertEqual(r.returncode, 0)
        end = self.assert_report(r.log, [
            "+++ ALLOCATION %s HAS INVALID TAG 0 (free)" % r.values["ptr"]], "free_it")
        self.assertEqual(end, len(r.log), "the real free afterwards is clean")

    def test_underflow_damaging_the_tracking_record(self):
        # A tracking option without a guard keeps the block's record (size, backtrace) in
        # the 16 bytes in front of it: an underflow over them is reported when the block is
        # freed (as Android reports a bad header tag), and the block is left alone, so the
        # leak check at exit still lists it (its size was in the record).
        r = run([BUGS, "front_underflow_many"], "leak_track")
        self.assertEqual(r.returncode, 0)
        end = self.assert_report(r.log, [
            "+++ ALLOCATION %s HAS INVALID TAG 55555555 (free)" % r.values["ptr"]], "free_it")
        leaks = [l for l in r.log[end:] if "leaked block" in l]
        self.assertTrue(any("leaked block of size 0 at %s " % r.values["ptr"] in l for l in leaks),
                        leaks)

    def test_usable_size_of_interior_pointer(self):
        r = run([BUGS, "usable_size_interior"], "front_guard")
        self.assert_report(r.log, [
            "+++ ALLOCATION %s HAS INVALID TAG 5a5a5a5a (malloc_usable_size)" % r.values["ptr"]],
            "usable_size_interior")
        self.assertEqual(r.values["usable"], "0")

    def test_double_free_abort_on_error(self):
        r = run([BUGS, "double_free"], "guard abort_on_error")
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assertEqual(r.log[1], "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"])


class Fills(Case):
    def test_fill_is_seen_by_the_program(self):
        # fill alone and with options that do nothing per block take the short path
        # (hs_md.lean_fill); the others take the general one.
        for options in ("fill", "fill guard", "fill_on_alloc fill_on_free", "fill rear_guard",
                        "fill abort_on_error", "fill verify_pointers"):
            with self.subTest(options=options):
                r = run([BUGS, "fills"], options)
                self.assertEqual(r.returncode, 0)
                self.assertEqual(r.log, [])
                self.assertEqual(r.values["alloc_fill_64"], "1")
                self.assertEqual(r.values["usable_fill"], "1")
                self.assertEqual(r.values["free_fill"], "1")
                self.assertEqual(r.values["calloc_zero"], "1", "calloc is never filled")
                self.assertEqual(r.values["realloc_keeps"], "1")
                self.assertEqual(r.values["realloc_fill"], "1", "realloc growth is filled")

    def test_fill_on_alloc_only(self):
        r = run([BUGS, "fills"], "fill_on_alloc")
        self.assertEqual(r.values["alloc_fill_64"], "1")
        self.assertEqual(r.values["free_fill"], "0")

    def test_fill_on_free_only(self):
        r = run([BUGS, "fills"], "fill_on_free")
        self.assertEqual(r.values["alloc_fill_64"], "0")
        self.assertEqual(r.values["free_fill"], "1")

    def test_no_fill_without_options(self):
        r = run([BUGS, "fills"])
        self.assertEqual(r.values["alloc_fill_64"], "0")
        self.assertEqual(r.values["free_fill"], "0")

    def test_partial_fill_on_alloc(self):
        r = run([BUGS, "partial_fill"], "fill_on_alloc=32")
        self.assertEqual(r.values["same_block"], "1")
        self.assertEqual(r.values["head_fill"], "1")
        self.assertEqual(r.values["tail_kept"], "1")


class Sizes(Case):
    def test_expand_alloc_usable_size(self):
        plain = int(run([BUGS, "usable_size"]).values["usable"])
        self.assertGreaterEqual(plain, 100)
        r = run([BUGS, "usable_size"], "expand_alloc")
        self.assertGreaterEqual(int(r.values["usable"]), 116)
        r = run([BUGS, "usable_size"], "expand_alloc=1000")
        self.assertGreaterEqual(int(r.values["usable"]), 1100)

    def test_rear_guard_usable_size_is_exact(self):
        for options in ("rear_guard", "guard", "guard=1", "rear_guard expand_alloc=64"):
            with self.subTest(options=options):
                r = run([BUGS, "usable_size"], options)
                self.assertEqual(r.values["usable"], "100")

    def test_front_guard_usable_size_covers_request(self):
        r = run([BUGS, "usable_size"], "front_guard=64")
        self.assertGreaterEqual(int(r.values["usable"]), 100)


class Semantics(Case):
    """Android's allocation contract under every layout, and glibc's with no options."""

    def test_allocation_semantics(self):
        for options in ("guard", "front_guard", "rear_guard", "guard=1", "guard=16384",
                        "fill", "expand_alloc", "fill expand_alloc=7", "guard fill expand_alloc",
                        "verbose"):
            with self.subTest(options=options):
                r = run([BUGS, "semantics", "debug"], options)
                self.assertEqual(r.stdout.splitlines()[-1], "ok", r.stdout)
                self.assertEqual(r.returncode, 0)
                self.assertEqual([l for l in r.log if "enabled" not in l], [])

    def test_passthrough_semantics(self):
        for options in (None, "", "   "):
            with self.subTest(options=options):
                r = run([BUGS, "semantics"], options)
                self.assertEqual(r.stdout.splitlines()[-1], "ok", r.stdout)
                self.assertEqual(r.log, [])

    def test_clean_program_has_no_report(self):
        for options in ("guard fill", "guard=64 fill expand_alloc abort_on_error"):
            with self.subTest(options=options):
                r = run([BUGS, "clean"], options)
                self.assertEqual(r.returncode, 0)
                self.assertEqual(r.log, [])
                self.assertEqual(r.other, [])


class AfterCorruption(Case):
    """A program that smashed glibc's top chunk must survive the shim's exit work: nothing
    of the shim allocates from glibc once it has reported an error (issue: the leak report's
    dlopen of the elfutils plug-in aborted in "malloc(): corrupted top size")."""

    def test_exit_reports_survive_a_smashed_top_chunk(self):
        tmp = tempfile.mkdtemp(prefix="hs_top_overflow.")
        self.addCleanup(shutil.rmtree, tmp)
        for options in ("guard leak_track backtrace",
                        "guard leak_track backtrace backtrace_dump_on_exit "
                        "backtrace_dump_prefix=%s/heap log_allocator_stats_on_exit" % tmp,
                        "guard free_track leak_track backtrace verify_pointers"):
            with self.subTest(options=options):
                r = run([BUGS, "top_overflow"], options)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertIn("done", r.stdout.splitlines(), "buffered stdout lost")
                self.assertNotIn("corrupted", "\n".join(r.other))
                end = self.assert_report(r.log, [
                    "+++ ALLOCATION %s SIZE 40 HAS A CORRUPTED REAR GUARD" % r.values["ptr"],
                ] + ["  allocation[%d] = 0x41 (expected 0xbb)" % i for i in range(40, 72)],
                    "free_it", alloc_function="top_overflow")
                leak = [i for i, l in enumerate(r.log) if l.startswith(
                    "+++ md_bugs leaked block of size 24 at %s " % r.values["leaked"])]
                self.assertEqual(len(leak), 1, r.log[end:])
                self.assertEqual(r.log[leak[0] + 1], "Backtrace at time of allocation:")
                self.assertIn("(top_overflow+", r.log[leak[0] + 2])
                if "backtrace_dump_on_exit" in options:
                    dump = os.path.join(tmp, "heap.%s.exit.txt" % r.values["pid"])
                    with open(dump) as f:
                        self.assertEqual(f.readline(), "Android Native Heap Dump v1.2\n")


if __name__ == "__main__":
    unittest.main()
