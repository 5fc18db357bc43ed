"""End-to-end: the shim's own tables running out of memory never make a false report.

HEAPSCOPE_ARENA_FAIL_AFTER=N (docs/testing.md) makes every mapping of the shim's arena after
the first N fail. A workload that checks its data and lives with malloc returning NULL
(programs/md_oom.c) runs under each tracking option, alone and combined, with N walked from
0 up to the mappings the run needs: each run must exit normally with its data intact, log no
error report (no UNKNOWN POINTER, no USED AFTER FREE, nothing framed by the divider), report
no leak that the run without injection does not have, and say once that memory ran short
when an allocation failed.
"""
import os
import re
import tempfile

from e2e import DIVIDER, Case, run, without_leak_report

OOM = os.environ["HS_MD_OOM"]
PROG = os.path.basename(OOM)
NOTE = ("%s: malloc debug ran out of memory for its own tables: allocations it cannot track "
        "fail with ENOMEM, backtraces it cannot store are left out" % PROG)
# The last resort: a block glibc's realloc moved where the table has no room goes untracked.
LOST = ("%s: malloc debug could not record a block glibc's realloc moved (out of memory for "
        "its own tables): pointers it does not know are no longer reported" % PROG)
# What a run short of memory may also say (each check that could not get its memory).
SHORT = {"%s: not enough memory for free_track" % PROG,
         "%s: not enough memory to report leaks" % PROG, LOST}
LEAKS_RE = re.compile(r"\+\+\+ %s leaked block of size \d+ at 0x[0-9a-f]+ \(leak \d+ of (\d+)\)"
                      % re.escape(PROG))
# Past the mappings a run needs (about 20 with every option) the walk stops by itself.
MAX_N = 200


def leak_count(log):
    counts = {int(m.group(1)) for m in map(LEAKS_RE.match, log) if m}
    return max(counts) if counts else 0


class OutOfMemory(Case):
    def walk(self, options, args=()):
        self.args = [OOM] + list(args)
        with tempfile.TemporaryDirectory() as d:
            options = options.replace("RECFILE", os.path.join(d, "rec"))
            base = run(self.args, options)
            self.assertEqual(base.returncode, 0, base.stdout + base.stderr[-3000:])
            self.assertEqual(base.values.get("nulls"), "0", base.stdout)
            base_leaks = leak_count(base.log)
            n = 0
            self.logs = []
            while True:
                short = False  # a failed run ends the walk (its failure is recorded)
                with self.subTest(options=options, N=n):
                    short = self.run_short(options, n, base_leaks)
                if not short or n >= MAX_N:
                    break
                n += 1
            self.assertLess(n, MAX_N, "the walk did not reach a run with memory enough")
            self.assertGreater(n, 0, "fault injection had no effect")
            return self.logs

    def run_short(self, options, n, base_leaks):
        """One run with the arena failing after n mappings; returns whether it ran short."""
        r = run(self.args, options, env_extra={"HEAPSCOPE_ARENA_FAIL_AFTER": str(n)})
        context = "%s\n%s" % (r.stdout, "\n".join(r.log[:60]))
        self.assertEqual(r.returncode, 0, context)
        self.assertTrue(r.stdout.startswith("ok nulls="), context)
        log = without_leak_report(r.log, PROG)
        for line in log:
            self.assertNotIn("UNKNOWN POINTER", line, context)
            self.assertNotIn("USED AFTER FREE", line, context)
            self.assertNotEqual(line, DIVIDER, context)
        self.assertLessEqual(log.count(NOTE), 1, context)
        self.assertEqual([l for l in log if l != NOTE and l not in SHORT], [], context)
        self.assertLessEqual(leak_count(r.log), base_leaks, context)
        if int(r.values["nulls"]) > 0:
            self.assertIn(NOTE, log, context)
        self.logs.append(log)
        return bool(set(log) & (SHORT | {NOTE}))

    def test_verify_pointers(self):
        self.walk("verify_pointers")

    def test_backtrace(self):
        self.walk("backtrace")

    def test_leak_track(self):
        self.walk("leak_track")

    def test_free_track(self):
        self.walk("free_track")

    def test_guard_with_tracking(self):
        self.walk("guard verify_pointers")

    def test_record_allocs_with_tracking(self):
        self.walk("record_allocs record_allocs_file=RECFILE backtrace verify_pointers")

    def test_page_guard(self):
        self.walk("page_guard", ["300"])  # a system call or two per block: fewer blocks

    def test_page_guard_with_tracking(self):
        # guard too: a block that cannot be tracked is a guarded block with a header to give back
        self.walk("page_guard guard backtrace leak_track", ["300"])

    def test_sample_guard_with_tracking(self):
        self.walk("sample_guard backtrace verify_pointers")

    def test_every_tracking_option(self):
        self.walk("backtrace leak_track free_track verify_pointers")

    def test_moves_where_the_table_has_no_room(self):
        """realloc whose block glibc moves (to a mapping of its own) once the table's shards
        are full: the block moves once more or goes untracked, and the shim stops reporting
        unknown pointers rather than report that one. Where the shards fill depends on
        address-space layout, so the walk runs until that path was taken (thrice at most;
        each walk takes it with a probability of about 0.999)."""
        for options in ("verify_pointers", "leak_track"):
            for _ in range(3):
                logs = self.walk(options, ["moves"])
                if any(LOST in log for log in logs):
                    break
            else:
                self.fail("%s: no walk reached the last resort" % options)

    def test_every_tracking_option_with_guards(self):
        self.walk("guard fill backtrace leak_track free_track verify_pointers")


if __name__ == "__main__":
    import unittest
    unittest.main()
