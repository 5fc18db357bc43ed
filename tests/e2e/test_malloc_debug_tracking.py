"""End-to-end: backtrace, free_track, leak_track, verify_pointers and the introspection API."""
import os
import unittest

from e2e import DIVIDER, FRAME_RE, Case, run

TRACK = os.environ["HS_MD_TRACK"]


def frames_of(lines, start):
    """Frame lines from log[start] on, as (symbol, path) pairs, and the index after them."""
    out = []
    i = start
    while i < len(lines) and FRAME_RE.match(lines[i]):
        m = FRAME_RE.match(lines[i])
        out.append((m.group("sym"), m.group("path")))
        i += 1
    return out, i


class Tracking(Case):
    def assert_frames(self, log, i, first, second=None):
        frames, end = frames_of(log, i)
        self.assertTrue(frames, log[i:i + 3])
        self.assertEqual(frames[0], (first, os.path.realpath(TRACK)), log[i])
        if second:
            self.assertEqual(frames[1][0], second)
        return end

    def test_use_after_free_write_caught_at_exit(self):
        # Up to 16 free frames are kept in the free queue's rings, deeper ones as records of
        # the backtrace table (free_queue.h): both give the same report.
        for options in ("backtrace free_track",
                        "backtrace free_track free_track_backtrace_num_frames=32"):
            with self.subTest(options=options):
                r = run([TRACK, "uaf_write"], options)
                self.assertEqual(r.returncode, 0)
                log = r.log
                self.assertEqual(log[:3], [
                    DIVIDER,
                    "+++ ALLOCATION %s USED AFTER FREE" % r.values["ptr"],
                    "  allocation[10] = 0x01 (expected 0xef)",
                ])
                self.assertEqual(log[3], "Backtrace at time of free:")
                end = self.assert_frames(log, 4, "drop", "uaf_write")
                self.assertEqual(log[end:], [DIVIDER])

    def test_use_after_free_caught_when_evicted(self):
        r = run([TRACK, "uaf_evicted"], "free_track=2")
        out = r.stdout.splitlines()
        self.assertEqual(out[-2:], ["before_evict", "after_evict"])
        self.assertEqual(log_without_frames(r.log), [
            DIVIDER,
            "+++ ALLOCATION %s USED AFTER FREE" % r.values["ptr"],
            "  allocation[0] = 0x78 (expected 0xef)",
            "  allocation[47] = 0x79 (expected 0xef)",
            "Backtrace at time of free:",
            DIVIDER,
        ])

    def test_free_track_without_free_backtrace(self):
        r = run([TRACK, "uaf_write"], "free_track free_track_backtrace_num_frames=0")
        self.assertEqual(r.log, [
            DIVIDER,
            "+++ ALLOCATION %s USED AFTER FREE" % r.values["ptr"],
            "  allocation[10] = 0x01 (expected 0xef)",
            DIVIDER,
        ])

    def test_double_free_has_both_backtraces(self):
        for options in ("free_track", "free_track guard", "backtrace free_track verify_pointers",
                        "free_track free_track_backtrace_num_frames=32"):
            with self.subTest(options=options):
                r = run([TRACK, "double_free"], options)
                log = r.log
                self.assertEqual(log[:3], [
                    DIVIDER,
                    "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"],
                    "Backtrace of original free:",
                ])
                i = self.assert_frames(log, 3, "drop", "double_free")
                self.assertEqual(log[i], "Backtrace at time of failure:")
                i = self.assert_frames(log, i + 1, "drop", "double_free")
                self.assertEqual(log[i:], [DIVIDER])

    def test_realloc_after_free(self):
        r = run([TRACK, "realloc_after_free"], "free_track")
        self.assertEqual(r.log[1], "+++ ALLOCATION %s USED AFTER FREE (realloc)" % r.values["ptr"])
        self.assertEqual(r.log[2], "Backtrace of original free:")
        self.assertEqual(r.values["realloc"], "(nil)")

    def test_leaks_at_exit_largest_first(self):
        # With free_track (an option of the free path only) malloc takes the same short path.
        for options in ("backtrace leak_track", "backtrace leak_track free_track"):
            with self.subTest(options=options):
                r = run([TRACK, "leaks"], options)
                self.assertEqual(r.returncode, 0)
                log = r.log
                self.assertEqual(log[0], "+++ md_track leaked block of size 333 at %s "
                                 "(leak 1 of 2)" % r.values["big"])
                self.assertEqual(log[1], "Backtrace at time of allocation:")
                i = self.assert_frames(log, 2, "make", "leaks")
                self.assertEqual(log[i], "+++ md_track leaked block of size 20 at %s "
                                 "(leak 2 of 2)" % r.values["small"])
                self.assertEqual(log[i + 1], "Backtrace at time of allocation:")
                i = self.assert_frames(log, i + 2, "make", "leaks")
                self.assertEqual(i, len(log))

    def test_leaks_grouped_by_stack_then_listed_up_to_the_bound(self):
        r = run([TRACK, "many_leaks"], "backtrace leak_track=2")
        self.assertEqual(r.returncode, 0)
        log = r.log
        addr = [l.split(" at ")[1].split(" ")[0] for l in log if "leaked block of size 49" in l]
        self.assertEqual(len(addr), 1, log)
        self.assertEqual(log_without_frames(log), [
            "+++ md_track leaked 401 blocks (15050 bytes) from 3 allocation stacks, "
            "most bytes first:",
            "+++ 300 blocks of size 32 (9600 bytes), stack 1 of 3:",
            "Backtrace at time of allocation:",
            "+++ 100 blocks of sizes 40 to 49 (4450 bytes), stack 2 of 3:",
            "Backtrace at time of allocation:",
            "+++ 1 more stack (1 block, 1000 bytes) not listed",
            "+++ md_track: the first 2 of the 401 leaked blocks one by one, largest first "
            "(leak_track=N lists N):",
            "+++ md_track leaked block of size 1000 at %s (leak 1 of 401)" % r.values["big"],
            "Backtrace at time of allocation:",
            "+++ md_track leaked block of size 49 at %s (leak 2 of 401)" % addr[0],
            "Backtrace at time of allocation:",
            "+++ md_track: 399 more leaked blocks not listed",
        ])
        self.assertEqual(frames_of(log, 3)[0][0][0], "make_small")
        self.assertEqual(frames_of(log, 3)[0][1][0], "many_leaks")
        i = log.index("+++ 100 blocks of sizes 40 to 49 (4450 bytes), stack 2 of 3:")
        self.assertEqual(frames_of(log, i + 2)[0][0][0], "make_mixed")
        blocks = [l for l in log if "leaked block of size" in l]
        self.assertEqual([l.split(" at ")[0] for l in blocks],
                         ["+++ md_track leaked block of size %d" % n for n in (1000, 49)])
        i = log.index(blocks[1])
        self.assertEqual(frames_of(log, i + 2)[0][0][0], "make_mixed")

    def test_leaks_summary_lists_every_stack_without_a_bound(self):
        r = run([TRACK, "many_leaks"], "backtrace leak_track")
        heads = [l for l in log_without_frames(r.log) if l != "Backtrace at time of allocation:"]
        self.assertEqual(heads[:5], [
            "+++ md_track leaked 401 blocks (15050 bytes) from 3 allocation stacks, "
            "most bytes first:",
            "+++ 300 blocks of size 32 (9600 bytes), stack 1 of 3:",
            "+++ 100 blocks of sizes 40 to 49 (4450 bytes), stack 2 of 3:",
            "+++ 1 block of size 1000 (1000 bytes), stack 3 of 3:",
            "+++ md_track: the 401 leaked blocks one by one, largest first:",
        ])
        self.assertEqual(len(heads), 5 + 401)
        self.assertEqual(heads[-1], "+++ md_track leaked block of size 32 at %s (leak 401 of 401)"
                         % heads[-1].split(" at ")[1].split(" ")[0])

    def test_leaks_without_backtraces_have_no_summary(self):
        r = run([TRACK, "many_leaks"], "leak_track=2")
        self.assertEqual([l.split(" at ")[0] for l in r.log], [
            "+++ md_track leaked block of size 1000",
            "+++ md_track leaked block of size 49",
            "+++ md_track: 399 more leaked blocks not listed",
        ])

    def test_leaks_of_a_stripped_program_named_from_its_debug_file(self):
        stripped = os.environ["HS_MD_TRACK_STRIPPED"]
        r = run([stripped, "leaks"], "backtrace leak_track")
        log = r.log
        self.assertEqual(log[0], "+++ md_track_stripped leaked block of size 333 at %s "
                         "(leak 1 of 2)" % r.values["big"])
        frames, _ = frames_of(log, 2)
        self.assertEqual(frames[0], ("make", os.path.realpath(stripped)), log[2])
        self.assertEqual(frames[1][0], "leaks")

    def test_leaks_without_backtraces(self):
        r = run([TRACK, "leaks"], "leak_track")
        self.assertEqual(r.log, [
            "+++ md_track leaked block of size 333 at %s (leak 1 of 2)" % r.values["big"],
            "+++ md_track leaked block of size 20 at %s (leak 2 of 2)" % r.values["small"],
        ])

    def test_calloc_on_the_short_paths(self):
        # calloc goes straight to the short path of these options (hs_md_lean_calloc).
        for options in ("leak_track", "backtrace leak_track", "leak_track free_track"):
            with self.subTest(options=options):
                r = run([TRACK, "calloc_leaks"], options)
                self.assertEqual(r.returncode, 0)
                self.assertEqual(r.values["calloc_zero"], "1")
                self.assertEqual(r.values["overflow_null"], "1")
                self.assertEqual(r.log[0], "+++ md_track leaked block of size 77 at %s "
                                 "(leak 1 of 1)" % r.values["zeroed"])
                if "backtrace" in options:
                    self.assertEqual(r.log[1], "Backtrace at time of allocation:")
                    i = self.assert_frames(r.log, 2, "make_zeroed", "calloc_leaks")
                    self.assertEqual(i, len(r.log))
                else:
                    self.assertEqual(len(r.log), 1, r.log)
        r = run([TRACK, "calloc_leaks"], "verify_pointers")
        self.assertEqual((r.returncode, r.log, r.values["calloc_zero"]), (0, [], "1"))

    def test_failed_dlopen_then_leak_report(self):
        # The program's failed dlopen leaves its message (allocated through the debug paths) to
        # glibc, which frees it in the shim's own dlopen of the symbols plug-in at exit: that
        # free takes the debug path, not glibc's (which aborted the program).
        for options in ("backtrace leak_track", "backtrace leak_track verify_pointers",
                        "backtrace free_track leak_track", "backtrace guard leak_track"):
            with self.subTest(options=options):
                r = run([TRACK, "failed_dlopen"], options)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(r.values["dlopen_failed"], "1")
                self.assertNotIn(DIVIDER, r.log)
                # Beside it, glibc's dlerror state (its message and record) is live at exit.
                leaked = [line for line in r.log if "leaked block of size 55 " in line]
                self.assertEqual(len(leaked), 1, r.log)
                self.assertRegex(leaked[0], r"^\+\+\+ md_track leaked block of size 55 at %s "
                                 r"\(leak [1-3] of 3\)$" % r.values["leaked"])

    def test_backtrace_size_filters(self):
        r = run([TRACK, "leaks"], "backtrace leak_track backtrace_min_size=100")
        self.assertEqual(log_without_frames(r.log), [
            "+++ md_track leaked block of size 333 at %s (leak 1 of 2)" % r.values["big"],
            "Backtrace at time of allocation:",
            "+++ md_track leaked block of size 20 at %s (leak 2 of 2)" % r.values["small"],
        ])
        r = run([TRACK, "leaks"], "bt leak_track bt_sz=20")
        self.assertEqual(log_without_frames(r.log), [
            "+++ md_track leaked block of size 333 at %s (leak 1 of 2)" % r.values["big"],
            "+++ md_track leaked block of size 20 at %s (leak 2 of 2)" % r.values["small"],
            "Backtrace at time of allocation:",
        ])

    def test_verify_pointers_on_stray_pointers(self):
        r = run([TRACK, "stray"], "verify_pointers")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(log_without_frames(r.log), [
            DIVIDER,
            "+++ ALLOCATION %s UNKNOWN POINTER (free)" % r.values["stack"],
            "Backtrace at time of failure:",
            DIVIDER,
            DIVIDER,
            "+++ ALLOCATION %s UNKNOWN POINTER (malloc_usable_size)" % r.values["interior"],
            "Backtrace at time of failure:",
            DIVIDER,
        ])
        self.assertEqual(r.values["usable"], "0")

    def test_wild_pointer_with_guards_is_reported_not_read(self):
        r = run([TRACK, "wild"], "guard verify_pointers")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout.splitlines()[-1], "survived")
        self.assertEqual(r.log[1], "+++ ALLOCATION %s UNKNOWN POINTER (free)" % r.values["ptr"])

    def test_double_free_with_guards_and_table_without_free_track(self):
        r = run([TRACK, "double_free"], "guard verify_pointers")
        self.assertEqual(r.log[1], "+++ ALLOCATION %s USED AFTER FREE (free)" % r.values["ptr"])

    def test_header_tag_corrupted_after_free(self):
        r = run([TRACK, "tag_after_free"], "guard free_track")
        self.assertEqual(r.log, [
            DIVIDER,
            "+++ ALLOCATION %s HAS CORRUPTED HEADER TAG 0x11111111 AFTER FREE" % r.values["ptr"],
            DIVIDER,
        ])

    def test_backtrace_toggled_by_signal(self):
        r = run([TRACK, "toggle"], "backtrace_enable_on_signal leak_track verbose")
        log = log_without_frames(r.log)
        self.assertIn("md_track: Run: 'kill -45 %s' to enable backtracing." % r.values["pid"], log)
        leaks = [l for l in log if "leaked block" in l or l.startswith("Backtrace")]
        self.assertEqual(leaks, [
            "+++ md_track leaked block of size 333 at %s (leak 1 of 3)" % r.values["after"],
            "+++ md_track leaked block of size 222 at %s (leak 2 of 3)" % r.values["during"],
            "Backtrace at time of allocation:",
            "+++ md_track leaked block of size 111 at %s (leak 3 of 3)" % r.values["before"],
        ])
        r = run([TRACK, "toggle"], "backtrace backtrace_enable_on_signal leak_track")
        leaks = [l for l in log_without_frames(r.log)
                 if "leaked block" in l or l.startswith("Backtrace")]
        self.assertEqual(leaks[1], "Backtrace at time of allocation:")
        self.assertEqual(leaks[2], "+++ md_track leaked block of size 222 at %s (leak 2 of 3)"
                         % r.values["during"])
        self.assertEqual(leaks[4], "Backtrace at time of allocation:")

    def test_api(self):
        r = run([TRACK, "api"], "backtrace")
        self.assertEqual(r.returncode, 0, r.stdout)
        v = r.values
        self.assertGreater(int(v["frames"]), 1)
        self.assertEqual(v["first_in_program"], "1")
        self.assertEqual(v["unknown_frames"], "0")
        self.assertEqual(v["iterate_rc"], "0")
        self.assertEqual(v["has_block"], "1")
        self.assertEqual((v["range_count"], v["range_bytes"]), ("1", "4000"))
        # heapscope_malloc_debug_list, the unreachable-memory check's bulk listing, agrees.
        self.assertEqual((v["list_count_matches"], v["list_bytes_match"], v["list_has_block"],
                          v["list_cap"]), ("1", "1", "1", "1"))
        self.assertEqual(v["disable_loop"], "ok")
        self.assertEqual(r.log, [])

    def test_api_with_guards_reports_usable_size(self):
        r = run([TRACK, "api"], "backtrace guard")
        self.assertEqual((r.values["range_count"], r.values["range_bytes"]), ("1", "4000"))
        self.assertEqual((r.values["list_bytes_match"], r.values["list_has_block"]), ("1", "1"))

    def test_allocator_stats_on_exit(self):
        r = run([TRACK, "leaks"], "leak_track log_allocator_stats_on_exit")
        stats = [l for l in r.log if l.startswith("md_track: ")]
        self.assertEqual(len(stats), 2, r.log)
        self.assertRegex(stats[0], r"^md_track: glibc heap: \d+ bytes in use, \d+ bytes free")
        self.assertRegex(stats[1], r"^md_track: malloc debug: 2 live allocations tracked \(peak "
                                   r"[3-9]\), 0 distinct backtraces, \d+ bytes of own memory$")


def log_without_frames(log):
    return [l for l in log if not FRAME_RE.match(l)]


if __name__ == "__main__":
    unittest.main()
