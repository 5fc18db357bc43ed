"""End-to-end: fork() at any moment while other threads allocate never leaves the child with a
lock held (issue 19, item 10: the child hung in libunwind, on a lock a thread of the parent
held at the moment of fork).

md_fork runs 4 threads that keep starting short-lived threads, each allocating through
stacks of ~260 distinct return addresses (libunwind's per-thread frame cache is cold and its
global rule cache too small, so captures keep taking its lock), and forks 3 times; each
child allocates and _exits. Before the fix about one fork in ten hung under backtrace. Each
tracking option is run RUNS times; a child still running after md_fork's deadline is killed
and reported by md_fork itself, and a parent that does not finish is killed with its whole
process group, so a hang fails the test instead of hanging it; before the kill, the failure
message gets where each of its threads waited (and their stacks when gdb is installed: make
deps installs it). test_forks_from_several_threads_at_once has three threads fork at the same
time (md_fork's FORKERS).
"""
import os
import shutil
import signal
import subprocess
import unittest
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from e2e import SHIM, Case, Run, without_leak_report

FORK = os.environ["HS_MD_FORK"]
RUNS = 200
FORKS = 3
THREADS = 4
CHILD_DEADLINE_MS = 10000   # md_fork's wait for one child (a child needs milliseconds)
RUN_TIMEOUT = 120           # the whole run, should md_fork itself not finish
PARALLEL = 2


def hung_stacks(pgid):
    """Where every thread of the hung run's processes waits, for the failure message: each
    thread's kernel wait channel and system call, and with gdb installed its stack (a rare hang
    must say where it hung the first time it is seen)."""
    out = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.getpgid(pid) != pgid:
                continue
            tasks = sorted(os.listdir("/proc/%d/task" % pid), key=int)
        except OSError:
            continue
        out.append("process %d:" % pid)
        for tid in tasks:
            try:
                with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                    wchan = f.read().strip()
                with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                    call = f.read().split()[:3]
            except OSError:
                continue
            out.append("  thread %s: wchan %s, syscall %s" % (tid, wchan, " ".join(call)))
        if shutil.which("gdb"):
            try:
                bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                                    capture_output=True, text=True, timeout=60).stdout
                out += ["  " + l for l in bt.splitlines() if l.startswith(("#", "Thread"))]
            except subprocess.TimeoutExpired:
                out.append("  (gdb timed out)")
    return "\n".join(out)


def run_once(options, forks=FORKS, forkers=1):
    """One md_fork run; returns (failure text or None, Run or None)."""
    env = dict(os.environ, LD_PRELOAD=SHIM, LIBC_DEBUG_MALLOC_OPTIONS=options)
    env.pop("LIBC_DEBUG_MALLOC_PROGRAM", None)
    env.pop("HEAPSCOPE_LOG_FILE", None)
    proc = subprocess.Popen([FORK, str(forks), str(THREADS), str(CHILD_DEADLINE_MS), str(forkers)],
                            env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        stacks = hung_stacks(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return "md_fork did not finish in %d s (killed); where it waited:\n%s" % (
            RUN_TIMEOUT, stacks), None
    r = Run(SimpleNamespace(returncode=proc.returncode, stdout=out, stderr=err), "md_fork")
    if proc.returncode != 0 or out.splitlines()[-1:] != ["ok"]:
        return "exit status %d, stdout %r, stderr %r" % (proc.returncode, out, err[-2000:]), r
    return None, r


class Fork(Case):
    def check(self, options, runs=RUNS, forks=FORKS, forkers=1):
        with ThreadPoolExecutor(PARALLEL) as pool:
            pending = [pool.submit(run_once, options, forks, forkers) for _ in range(runs)]
            for i, future in enumerate(pending):
                failure, r = future.result()
                if failure:
                    for other in pending:
                        other.cancel()
                    self.fail("run %d of %d under %r: %s" % (i + 1, runs, options, failure))
                # leak_track lists what libc keeps at exit (thread descriptors); nothing else
                # may be reported, and no child may have been left without backtraces.
                log = without_leak_report(r.log, "md_fork")
                self.assertEqual(log, [], "run %d: %s" % (i + 1, "\n".join(r.log[:40])))

    def test_backtrace(self):
        self.check("backtrace")

    def test_free_track(self):
        self.check("free_track")

    def test_leak_track(self):
        self.check("leak_track")

    def test_verify_pointers(self):
        self.check("verify_pointers")

    def test_record_allocs(self):
        self.check("record_allocs")

    def test_every_tracking_option(self):
        self.check("backtrace free_track leak_track verify_pointers record_allocs")

    def test_forks_from_several_threads_at_once(self):
        # A second thread's fork runs its prepare handlers while the first one's fork is under
        # way. record_allocs kept "this fork took the writer lock" in one global: the second
        # prepare cleared it, the first fork's parent handler then left the table closed and
        # its lock held, and every later allocation and fork waited for good.
        for options in ("record_allocs", "backtrace free_track leak_track verify_pointers record_allocs"):
            with self.subTest(options=options):
                self.check(options, runs=20, forks=10, forkers=3)


if __name__ == "__main__":
    unittest.main()
