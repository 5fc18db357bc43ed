"""End-to-end tests of attaching with no prior setup: `heapscope profile -p PID` on programs
started with nothing preloaded. The client is loaded with ptrace (src/cli/process_inject.c)
and redirects the program's allocation calls through the GOT while the session runs
(src/profiler/client/injected.c). Each test checks the program's own output is what it is
without heapscope, and the refusals' messages."""
import ctypes
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from e2e import clean_env, per_site, start_tracer, stop_tracer

CLI = os.environ["HS_CLI"]
WORKLOAD = os.environ["HS_HP_WORKLOAD"]
HP_LIB = os.environ["HS_HP_LIB"]
CLIENT = os.environ["HS_HEAPPROFD_CLIENT"]
TARGET = os.environ["HS_ATTACH_TARGET"]
TARGET_STATIC = os.environ["HS_ATTACH_TARGET_STATIC"]
MALLOC_DEBUG = os.environ["HS_MALLOC_DEBUG"]

SPIN = [WORKLOAD, "spin", "4", "2500"]  # 4 threads, about 4 s


def client_loaded(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libheapprofd.so" in f.read()


class AttachTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs-attach-")
        self.progs = []

    def tearDown(self):
        for p in self.progs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
        subprocess.run(["rm", "-rf", self.dir])

    def start(self, argv, ready_prefix, env=None):
        prog = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                env=env or clean_env())
        self.progs.append(prog)
        line = prog.stdout.readline()
        self.assertTrue(line.startswith(ready_prefix), line)
        return prog

    def profile(self, *args, expect_rc=0):
        proc = subprocess.run([CLI, "profile", "-o", self.dir] + list(args),
                              capture_output=True, text=True, env=clean_env(), timeout=120)
        self.assertEqual(proc.returncode, expect_rc, proc.stderr)
        return proc

    def finish(self, prog):
        out, _ = prog.communicate(timeout=60)
        self.assertEqual(prog.returncode, 0)
        return out

    def test_attach_to_threads_started_without_preload_twice(self):
        plain = subprocess.run(SPIN, capture_output=True, text=True, env=clean_env(),
                               timeout=60)
        self.assertEqual(plain.returncode, 0)
        prog = self.start(SPIN, "spinning pid=")
        self.assertFalse(client_loaded(prog.pid))
        for round in (1, 2):
            proc = self.profile("-p", str(prog.pid), "--duration", "1")
            # Loaded once; the second session finds it there.
            self.assertEqual("loaded the client into process %d" % prog.pid in proc.stderr,
                             round == 1, proc.stderr)
            self.assertIn("profiling 1 process", proc.stderr)
            profile = os.path.join(self.dir, "hp_workload.%d%s.final.pb.gz"
                                   % (prog.pid, "" if round == 1 else "-2"))
            sites = per_site(profile, "alloc_objects")
            self.assertGreater(sites.get("site_spin", 0), 0, sites)
            # Blocks allocated before the session are freed during it: those frees are not
            # reported, so nothing in use can be negative or unknown.
            inuse = per_site(profile, "inuse_space")
            self.assertTrue(all(v >= 0 for v in inuse.values()), inuse)
            self.assertIsNone(prog.poll())  # still running
        self.assertTrue(client_loaded(prog.pid))
        out = self.finish(prog)
        # The first line ("spinning pid=P") was read by start().
        self.assertEqual(out.splitlines(), plain.stdout.splitlines()[1:])

    def start_idle(self, env):
        """attach_target idle: a quiet service that never allocates; its stderr in a file."""
        err = open(os.path.join(self.dir, "target.err"), "w+")
        prog = subprocess.Popen([TARGET, "idle", "60"], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env)
        self.progs.append(prog)
        self.addCleanup(err.close)
        self.assertTrue(prog.stdout.readline().startswith("ready pid="))
        return prog, err

    def timed_session(self, pid, seconds):
        """profile -p PID --duration SECONDS; returns (stderr, seconds from the start of the
        session to the end of the command)."""
        profiler = subprocess.Popen([CLI, "profile", "-o", self.dir, "-p", str(pid),
                                     "--duration", str(seconds)],
                                    stderr=subprocess.PIPE, text=True, env=clean_env())
        started, head = None, ""
        for line in profiler.stderr:
            head += line
            if "profiling 1 process" in line:
                started = time.monotonic()
                break
        rest = profiler.communicate(timeout=60)[1]
        elapsed = time.monotonic() - started if started else 0
        self.assertEqual(profiler.returncode, 0, head + rest)
        return head + rest, elapsed

    def test_attach_again_to_an_idle_process(self):
        # A process that never allocates learns of the end of a session from the daemon's
        # hang-up, not from its next sample: a second session finds it free.
        prog, err = self.start_idle(clean_env())
        for round in (1, 2):
            stderr, elapsed = self.timed_session(prog.pid, 2)
            self.assertIn("wrote %s/attach_target.%d%s.final.pb.gz"
                          % (self.dir, prog.pid, "" if round == 1 else "-2"), stderr)
            # --duration 2 lasts two seconds (a lower bound on a sleep, not a timing claim).
            self.assertGreaterEqual(elapsed, 1.9, stderr)
        self.assertIsNone(prog.poll())
        prog.terminate()
        prog.wait(timeout=30)
        # Attached from outside: the tool reports, the program's stderr stays its own.
        err.seek(0)
        self.assertEqual(err.read(), "")

    def test_attach_again_to_an_idle_preloaded_process(self):
        env = clean_env()
        env["LD_PRELOAD"] = CLIENT
        prog, err = self.start_idle(env)
        for round in (1, 2):
            proc = self.profile("-p", str(prog.pid), "--duration", "1")
            self.assertIn("profiling 1 process", proc.stderr)
            # Preloaded: Android's log line, as soon as the session ends (no allocation).
            want = "attach_target[%d] heapprofd: profiling stopped: the profiler daemon " \
                   "ended the session\n" % prog.pid
            for _ in range(100):
                err.seek(0)
                if err.read() == want * round:
                    break
                time.sleep(0.1)
            err.seek(0)
            self.assertEqual(err.read(), want * round)
        self.assertIsNone(prog.poll())

    def profile_library_calls(self, extra, done):
        """Attaches to hp_workload spin with LIB (and extra), then makes its main thread use
        the library (SIGUSR2) until it prints done; returns the final profile's path."""
        prog = self.start([WORKLOAD, "spin", "2", "4000", HP_LIB] + extra, "spinning pid=")
        profiler = subprocess.Popen([CLI, "profile", "-i", "1", "-o", self.dir, "-p",
                                     str(prog.pid), "--duration", "3"],
                                    stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            for line in profiler.stderr:
                if "profiling 1 process" in line:
                    break
            os.kill(prog.pid, signal.SIGUSR2)
            self.assertEqual(prog.stdout.readline().strip(), done)
            _, err = profiler.communicate(timeout=60)
        finally:
            if profiler.poll() is None:
                profiler.kill()
        self.assertEqual(profiler.returncode, 0, err)
        self.assertIn("spin thread 1 checksum=", self.finish(prog))
        return os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % prog.pid)

    def test_library_loaded_after_attach(self):
        profile = self.profile_library_calls([], "dlopen done")
        sites = per_site(profile, "alloc_objects")
        # Interval 1: every call, as the dlopen (a path) scans the library before returning.
        self.assertEqual(sites.get("hp_lib_alloc"), 1000, sites)
        self.assertEqual(per_site(profile, "inuse_space").get("hp_lib_alloc"), 1000 * 1000)

    def test_library_reloaded_after_attach(self):
        # A plug-in loaded, used and unloaded in a loop comes back at the same address with its
        # link map at the same place: each dlclose drops its record, so each load is hooked.
        profile = self.profile_library_calls(["200"], "dlclose done")
        # Every load hooked, and every sample unwound (the dlclose waits for the daemon).
        self.assertEqual(per_site(profile, "alloc_objects").get("hp_lib_alloc"), 200)

    def test_process_in_another_mount_namespace(self):
        libdir = os.path.dirname(CLIENT)
        script = 'mount -t tmpfs none "%s" && exec "$@"' % libdir
        prog = self.start(["unshare", "-m", "sh", "-c", script, "sh"] + SPIN, "spinning pid=")
        self.assertFalse(os.path.exists("/proc/%d/root%s" % (prog.pid, CLIENT)))
        before = set(glob.glob("/tmp/heapscope-inject-*"))
        proc = self.profile("-p", str(prog.pid), "--duration", "1")
        self.assertIn("loaded the client into process %d" % prog.pid, proc.stderr)
        profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % prog.pid)
        self.assertGreater(per_site(profile, "alloc_objects").get("site_spin", 0), 0)
        self.assertEqual(set(glob.glob("/tmp/heapscope-inject-*")), before)  # copy removed
        self.assertIn("spin thread 3 checksum=", self.finish(prog))

    @unittest.skipUnless(shutil.which("node"), "Node.js is not installed")
    def test_program_that_takes_mallocs_address(self):
        # node is not PIE and takes malloc's address: dlsym("malloc") names its own PLT entry.
        script = os.path.join(self.dir, "churn.js")
        with open(script, "w") as f:
            f.write("console.log('ready');\n"
                    "const keep = [], end = Date.now() + 3000;\n"
                    "function churn() {\n"
                    "  for (let i = 0; i < 50; i++) keep[i % 100] = Buffer.allocUnsafeSlow(100000);\n"
                    "  if (Date.now() < end) setTimeout(churn, 1); else console.log('done');\n"
                    "}\n"
                    "churn();\n")
        prog = self.start(["node", script], "ready")
        proc = self.profile("-p", str(prog.pid), "--duration", "1")
        self.assertIn("loaded the client into process %d" % prog.pid, proc.stderr)
        profile = os.path.join(self.dir, "node.%d.final.pb.gz" % prog.pid)
        out = subprocess.run([CLI, "report", "-q", "--value", "alloc_space", "-f", "folded",
                              profile], capture_output=True, text=True, check=True).stdout
        self.assertIn("node::", out)
        self.assertEqual(self.finish(prog), "done\n")

    def test_statically_linked_program_is_refused(self):
        prog = self.start([TARGET_STATIC, "sleep", "30"], "ready pid=")
        proc = self.profile("-p", str(prog.pid), expect_rc=1)
        self.assertIn("runs a statically linked program (%s)" % TARGET_STATIC, proc.stderr)
        self.assertIsNone(prog.poll())

    def test_seccomp_filter_is_refused_unless_allowed(self):
        prog = self.start([TARGET, "seccomp", "6"], "ready pid=")
        proc = self.profile("-p", str(prog.pid), expect_rc=1)
        self.assertIn("runs under seccomp filtering", proc.stderr)
        self.assertIn("--allow-seccomp", proc.stderr)
        self.assertFalse(client_loaded(prog.pid))
        proc = self.profile("--allow-seccomp", "-p", str(prog.pid), "--duration", "1")
        profile = os.path.join(self.dir, "attach_target.%d.final.pb.gz" % prog.pid)
        self.assertGreater(per_site(profile, "alloc_objects").get("site_target", 0), 0)
        self.assertEqual(self.finish(prog).strip(), "done 600")

    def test_process_already_traced_is_refused(self):
        prog = self.start([TARGET, "sleep", "30"], "ready pid=")
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
        self.assertEqual(libc.ptrace(PTRACE_SEIZE, prog.pid, None, None), 0)
        try:
            proc = self.profile("-p", str(prog.pid), expect_rc=1)
            self.assertIn("is already traced by process %d" % os.getpid(), proc.stderr)
        finally:
            libc.ptrace(PTRACE_DETACH, prog.pid, None, None)

    def test_process_stuck_in_the_c_library_is_left_unharmed(self):
        # Both threads wait for a lock of the C library's own (in its .bss): neither is at a
        # point where dlopen may run. The command gives up after its 5 s, and the process
        # runs on as it was: no SIGTRAP left behind by the single steps to kill it.
        prog = self.start([TARGET, "stuck", "30"], "ready pid=")
        for _ in range(500):  # until both wait in futex(2), the deadlock made
            calls = []
            for t in os.listdir("/proc/%d/task" % prog.pid):
                with open("/proc/%d/task/%s/syscall" % (prog.pid, t)) as f:
                    calls.append(f.read().split()[0])
            if calls == ["202", "202"]:
                break
            time.sleep(0.01)
        self.assertEqual(calls, ["202", "202"])
        proc = self.profile("-p", str(prog.pid), expect_rc=1)
        self.assertIn("no thread of process %d stopped outside the C library and the loader "
                      "within 5000 ms" % prog.pid, proc.stderr)
        with self.assertRaises(subprocess.TimeoutExpired, msg="the process died"):
            prog.wait(timeout=1)
        self.assertFalse(client_loaded(prog.pid))
        with open("/proc/%d/status" % prog.pid) as f:
            self.assertIn("TracerPid:\t0\n", f.read())

    @unittest.skipUnless(os.getuid() == 0 and shutil.which("unshare"),
                         "needs root and unshare to mount a small tmpfs")
    def test_leaks_report_on_a_full_tmp(self):
        # The process writes its report in /tmp: here a full 64 KiB tmpfs of our own.
        script = ('mount -t tmpfs -o size=64k none /tmp || exit 99; '
                  'dd if=/dev/zero of=/tmp/fill bs=4k 2>/dev/null; '
                  '"$1" idle 30 >/dev/null & sleep 0.3; '
                  '"$2" leaks --timeout 5 -p $!; rc=$?; kill $!; echo "pid=$!"; exit $rc')
        r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", TARGET, CLI],
                           capture_output=True, text=True, env=clean_env(), timeout=60)
        if r.returncode == 99:
            self.skipTest("cannot mount a tmpfs here: " + r.stderr)
        pid = int(r.stdout.split("pid=")[1])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("heapscope leaks: process %d cannot write its report "
                      "/tmp/heapscope_unreachable.%d.txt: No space left on device (its file "
                      "system is full)\n" % (pid, pid), r.stderr)
        self.assertNotIn("loaded the detector", r.stderr)  # nothing loaded for nothing

    def test_traced_thread_names_its_tracer(self):
        # Not the main thread: traced since the first check, or only one thread, the
        # process cannot be loaded into while another process traces any of its threads.
        prog = self.start(SPIN, "spinning pid=")
        for _ in range(500):
            other = [int(t) for t in os.listdir("/proc/%d/task" % prog.pid)
                     if int(t) != prog.pid]
            if other:
                break
            time.sleep(0.01)
        other = min(other)
        tracer = start_tracer(other, self.dir)
        try:
            for command in ("leaks", "profile"):
                proc = subprocess.run([CLI, command, "-p", str(prog.pid)], capture_output=True,
                                      text=True, env=clean_env(), timeout=60)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertEqual(proc.stderr, "heapscope %s: process %d (hp_workload) is "
                                 "already traced (its thread %d) by process %d (python3), a "
                                 "debugger or another tool; detach it first\n"
                                 % (command, prog.pid, other, tracer.pid))
        finally:
            stop_tracer(tracer)
        self.assertFalse(client_loaded(prog.pid))

    def test_process_traced_by_another_heapscope(self):
        # `leaks -p` while `profile -p` loads its client (or the other way round): the other
        # heapscope is named, not a security module.
        prog = self.start([TARGET, "idle", "30"], "ready pid=")
        tracer = start_tracer(prog.pid, self.dir, name="heapscope")
        try:
            for command in ("leaks", "profile"):
                proc = subprocess.run([CLI, command, "-p", str(prog.pid)], capture_output=True,
                                      text=True, env=clean_env(), timeout=60)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertEqual(proc.stderr, "heapscope %s: process %d (attach_target) is "
                                 "being traced by another heapscope (process %d), which is "
                                 "loading its own library into it; try again when it is done\n"
                                 % (command, prog.pid, tracer.pid))
        finally:
            stop_tracer(tracer)

    def test_process_traced_by_its_own_child(self):
        # A leak check's collector (or a crash handler) is a child of the process.
        prog = self.start([TARGET, "traced", "30"], "ready pid=")
        with open("/proc/%d/status" % prog.pid) as f:
            tracer = int(f.read().split("TracerPid:")[1].split()[0])
        proc = self.profile("-p", str(prog.pid), expect_rc=1)
        self.assertEqual(proc.stderr, "heapscope profile: process %d (attach_target) is being "
                         "traced by its own child process %d: a leak check running inside it "
                         "(heapscope leaks -p), or a crash handler of the program's; try again "
                         "when it is done\n" % (prog.pid, tracer))

    @unittest.skipUnless(os.getuid() == 0, "needs root to run as another user")
    def test_process_of_another_user_is_refused(self):
        prog = self.start([TARGET, "sleep", "30"], "ready pid=")
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               CLI, "profile", "-o", "/tmp", "-p", str(prog.pid)],
                              capture_output=True, text=True, env=clean_env(), timeout=60)
        if "Permission denied" in proc.stderr and "heapscope" not in proc.stderr:
            self.skipTest("the build tree is not readable by nobody")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("process %d belongs to another user" % prog.pid, proc.stderr)

    def test_other_allocator_is_refused_with_its_reason_every_time(self):
        # The first attach loads the client, whose init finds malloc is not glibc's (here the
        # malloc debug shim, preloaded) and refuses; the client stays, silent. The second
        # attach gives the same reason, naming the allocator, instead of blaming the signal.
        env = clean_env()
        env["LD_PRELOAD"] = MALLOC_DEBUG
        prog, err = self.start_idle(env)
        reason = "cannot profile process %d: its malloc is not glibc's" % prog.pid
        first = self.profile("-p", str(prog.pid), "--duration", "1", expect_rc=1)
        self.assertIn(reason, first.stderr)
        self.assertTrue(client_loaded(prog.pid))
        second = self.profile("-p", str(prog.pid), "--duration", "1", expect_rc=1)
        self.assertIn(reason, second.stderr)
        self.assertIn("(%s defines it)" % MALLOC_DEBUG, second.stderr)
        self.assertNotIn("does not listen", second.stderr)
        self.assertIsNone(prog.poll())  # left running, unharmed

    def test_no_inject_keeps_the_old_behaviour(self):
        prog = self.start([TARGET, "sleep", "30"], "ready pid=")
        proc = self.profile("--no-inject", "-p", str(prog.pid), expect_rc=1)
        self.assertIn("the profiler's client is not loaded in process %d" % prog.pid,
                      proc.stderr)
        self.assertFalse(client_loaded(prog.pid))


if __name__ == "__main__":
    unittest.main()
