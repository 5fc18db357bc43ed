"""End-to-end tests of the sampling heap profiler: `heapscope profile`, the heapprofd
daemon and the libheapprofd.so client, on tests/e2e/programs/hp_workload.c, whose call
sites and byte totals are known. Profiles are read back through `heapscope report -f folded`
(one line per stack, the leaf frame being the function that called the allocator)."""
import glob
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

from e2e import clean_env, per_site

CLI = os.environ["HS_CLI"]
WORKLOAD = os.environ["HS_HP_WORKLOAD"]
DAEMON = os.environ["HS_HEAPPROFD"]
CLIENT = os.environ["HS_HEAPPROFD_CLIENT"]
WIRE_FORMAT = 2  # HS_HANDSHAKE_VERSION (src/profiler/handshake.h)

KNOWN = {  # site: (allocated bytes, allocations, in-use bytes at exit, in-use allocations)
    "site_small": (20000 * 64, 20000, 1000 * 64, 1000),
    "site_medium": (5000 * 1000, 5000, 0, 0),
    "site_large": (100 * 100000, 100, 100 * 100000, 100),
    "site_calloc": (3000 * 240, 3000, 0, 0),
    "site_realloc": (2000 * 300, 2000, 2000 * 300, 2000),
    "site_memalign": (500 * 4096, 500, 0, 0),
}


def comments(profile):
    """The statistics lines the daemon put in the profile (from its text report header)."""
    return subprocess.run([CLI, "report", "-q", profile], capture_output=True, text=True,
                          check=True).stdout


RUNNING = []  # daemons and programs to kill if a test fails half-way


class Daemon:
    """A heapprofd of our own on an abstract socket, for tests that need to reach it."""

    def __init__(self, out_dir, *args):
        self.address = "@hs-e2e-%d-%d" % (os.getpid(), int(time.time() * 1e6) % 10**9)
        r, w = os.pipe()
        self.proc = subprocess.Popen(
            [DAEMON, "--socket", self.address, "--output", out_dir, "--ready-fd", str(w),
             "--log", os.path.join(out_dir, "heapprofd.log")] + list(args),
            pass_fds=(w,), env=clean_env())
        RUNNING.append(self.proc)
        os.close(w)
        self.events = os.fdopen(r, "r")
        assert self.events.readline().strip() == "ready"

    def client_env(self, pid_filter=None):
        env = clean_env()
        env["LD_PRELOAD"] = CLIENT
        env["HEAPSCOPE_PROFILE_SOCKET"] = self.address
        return env

    def next_event(self):
        return self.events.readline().strip()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rest = self.events.read()
        self.proc.wait(timeout=60)
        return rest


class ProfilerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs-profile-")

    def tearDown(self):
        while RUNNING:
            p = RUNNING.pop()
            if p.poll() is None:
                p.kill()
                p.wait()

    def profile(self, *args, expect_rc=0, timeout=120):
        proc = subprocess.run([CLI, "profile", "-o", self.dir] + list(args),
                              capture_output=True, text=True, env=clean_env(), timeout=timeout)
        self.assertEqual(proc.returncode, expect_rc, proc.stderr)
        return proc

    def final(self, pattern="hp_workload.*.final.pb.gz"):
        files = glob.glob(os.path.join(self.dir, pattern))
        self.assertEqual(len(files), 1, "profiles: %s" % os.listdir(self.dir))
        return files[0]

    # ---- Exact and sampled totals -----------------------------------------------------

    def test_exact_at_interval_1(self):
        plain = subprocess.run([WORKLOAD, "known"], capture_output=True, text=True,
                               env=clean_env())
        proc = self.profile("-i", "1", "--", WORKLOAD, "known")
        self.assertEqual(proc.stdout, plain.stdout)  # the program computed the same
        profile = self.final()
        sites = {v: per_site(profile, v) for v in
                 ("alloc_space", "alloc_objects", "inuse_space", "inuse_objects")}
        for site, (ab, ao, ib, io) in KNOWN.items():
            self.assertEqual(sites["alloc_space"].get(site), ab, site)
            self.assertEqual(sites["alloc_objects"].get(site), ao, site)
            self.assertEqual(sites["inuse_space"].get(site, 0), ib, site)
            self.assertEqual(sites["inuse_objects"].get(site, 0), io, site)
        # The realloc's first block came from known() itself and was freed by the realloc.
        self.assertEqual(sites["alloc_space"].get("known"), 2000 * 100)
        self.assertEqual(sites["inuse_space"].get("known", 0), 0)
        text = comments(profile)
        self.assertIn("buffer overran: no", text)

    def test_sampled_at_4096_within_tolerance(self):
        self.profile("--", WORKLOAD, "known")
        profile = self.final()
        sites = per_site(profile, "alloc_space")
        total = sum(ab for ab, _, _, _ in KNOWN.values())
        # Adaptive sampling may have raised the interval while the program's burst filled the
        # buffer; the profile says how far.
        m = re.search(r"largest in force: (\d+)", comments(profile))
        interval = int(m.group(1))
        self.assertGreaterEqual(interval, 4096)
        for site, (ab, ao, _, _) in KNOWN.items():
            # Each byte is sampled with probability 1/interval: the estimate's standard error
            # is at most sqrt(bytes * interval). Five of them; blocks of at least the interval
            # are always sampled, exactly.
            exact = ab // ao >= interval
            tolerance = 0 if exact else 5 * math.sqrt(ab * interval)
            if ab >= total / 100:
                self.assertLessEqual(abs(sites.get(site, 0) - ab), tolerance,
                                     "%s: %s vs %d" % (site, sites.get(site), ab))

    def test_blocks_of_one_interval_are_exact(self):
        # The allocation fast path takes only blocks below the interval (size - 1 <
        # interval - 1, one compare): a block of exactly the interval, and larger ones, are
        # each reported with their exact size; site_medium's blocks are 1000 bytes.
        self.profile("-i", "1000", "--", WORKLOAD, "known")
        profile = self.final()
        m = re.search(r"largest in force: (\d+)", comments(profile))
        interval = int(m.group(1))
        space = per_site(profile, "alloc_space")
        objects = per_site(profile, "alloc_objects")
        checked = 0
        for site, (ab, ao, _, _) in KNOWN.items():
            if ab // ao >= interval:  # adaptive sampling may have raised it: then fewer
                self.assertEqual((space.get(site), objects.get(site)), (ab, ao), site)
                checked += 1
        self.assertGreaterEqual(checked, 2)  # site_large and site_memalign at the least

    def test_vfork_child_samples_nothing(self):
        # A vfork child runs on its parent's memory: what it allocates is not sampled (its
        # stack is not the parent's program), and the parent samples again once it is back.
        proc = self.profile("-i", "1", "--", WORKLOAD, "vfork")
        self.assertIn("vfork done status=7", proc.stdout)
        sites = per_site(self.final(), "alloc_objects")
        self.assertEqual(sites.get("site_before_vfork"), 100)
        self.assertEqual(sites.get("site_vfork_child", 0), 0)
        self.assertEqual(sites.get("site_after_vfork"), 100)

    def test_clone_vm_child_allocating_runs_correctly(self):
        # posix_spawn's way, clone(CLONE_VM | CLONE_VFORK) on a stack of the child's own, calls
        # no vfork the client could see; a child that allocates there must still run, and be
        # sampled nothing (its pid is not the session's); the parent samples on.
        plain = subprocess.run([WORKLOAD, "clone_vm"], capture_output=True, text=True,
                               env=clean_env())
        self.assertIn("clone_vm done status=7", plain.stdout)
        proc = self.profile("-i", "1", "--", WORKLOAD, "clone_vm")
        self.assertIn("clone_vm done status=7", proc.stdout)
        sites = per_site(self.final(), "alloc_objects")
        self.assertEqual(sites.get("site_before_vfork"), 100, sites)
        self.assertEqual(sites.get("site_clone_child", 0), 0, sites)
        self.assertEqual(sites.get("site_after_vfork"), 100, sites)
        self.assertEqual(per_site(self.final(), "inuse_objects").get("site_after_vfork", 0), 0)

    def test_sampled_blocks_are_placed_by_address(self):
        # The client places every block it samples at a multiple of 1024, so that a free
        # tests the address's low bits before any load: at interval 1 every block is sampled,
        # by each allocation function, and each stays usable as asked (realloc moves the
        # contents, calloc clears, also when glibc perturbs fresh memory, posix_memalign keeps
        # its EINVAL). Every one of them is freed,
        # and every free is seen: nothing is left in use at the site.
        # A shrinking realloc keeps its block where it is, as glibc's does: the sampled block
        # is already placed, so it is not copied to a new one.
        plain = subprocess.run([WORKLOAD, "placement"], capture_output=True, text=True,
                               env=clean_env())
        self.assertIn("placement ok=1 ", plain.stdout)
        self.assertIn(" in_place=200 of 200", plain.stdout)
        proc = self.profile("-i", "1", "--", WORKLOAD, "placement")
        m = re.search(r"placement ok=1 aligned=(\d+) of (\d+) in_place=(\d+) of 200",
                      proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        self.assertEqual(m.group(1), m.group(2))
        self.assertEqual(m.group(3), "200")
        profile = self.final()
        self.assertEqual(per_site(profile, "alloc_objects").get("placement"), 200 * 6 + 2)
        self.assertEqual(per_site(profile, "inuse_objects").get("placement", 0), 0)

    def test_short_lived_process_keeps_its_last_data(self):
        self.profile("--", WORKLOAD, "short")
        sites = per_site(self.final(), "inuse_space")
        self.assertEqual(sites.get("site_short"), 3 * 50000)

    def test_threads(self):
        self.profile("-i", "1", "--", WORKLOAD, "threads", "8")
        profile = self.final()
        self.assertEqual(per_site(profile, "alloc_objects").get("site_thread"), 8 * 4000)
        self.assertEqual(per_site(profile, "alloc_space").get("site_thread"), 8 * 4000 * 512)
        self.assertEqual(per_site(profile, "inuse_space").get("site_thread", 0), 0)

    def test_thread_stacks_copied_only_as_far_as_unwound(self):
        # After a thread's first complete unwind, the daemon notes where it stopped reading,
        # and the client copies no further: not the static TLS at the top of a thread's
        # mapping (about 2 KiB a sample of the 3 threads other than main; 1,200 bytes more
        # per sample on average when the client ignores the notes). The stacks stay complete.
        # 4 threads, 500 rounds of 64 samples 1 ms apart: only the rounds before the daemon's
        # first note copy more (a quarter of the run on a loaded machine still passes).
        self.profile("-i", "1", "--", WORKLOAD, "spin", "4", "500")
        with open(os.path.join(self.dir, "heapprofd.log")) as f:
            log = f.read()
        m = re.search(r"unwinding: (\d+) stacks: (\d+) complete", log)
        self.assertIsNotNone(m, log)
        self.assertEqual(m.group(1), m.group(2), log)
        self.assertGreaterEqual(int(m.group(1)), 4 * 500 * 64)
        copied = int(re.search(r"per sample \(mean\): (\d+) bytes of stack copied", log).group(1))
        m = re.search(r"stack copies: (\d+) bytes per sample read by the unwinder \(mean\); "
                      r"(\d+) cut short", log)
        self.assertIsNotNone(m, log)
        self.assertEqual(m.group(2), "0", log)
        self.assertLessEqual(copied, int(m.group(1)) + 300, log)

    def test_big_frames_left_out_of_the_copies(self):
        # Two frames with 6000 and 3000 bytes of locals under the allocations: once samples from
        # different stack pointers left them unread for half a second, the daemon notes them as
        # gaps and the client leaves them out (stack_gap.h). Then 200 small frames over the
        # same addresses: the first sample of that phase needs words where the gaps were, ends
        # truncated, and the thread's later copies have no gaps. Each phase pauses after its
        # first sample and its first two rounds, so that the daemon has read them before the
        # next.
        self.profile("-i", "1", "--", WORKLOAD, "big_frames")
        with open(os.path.join(self.dir, "heapprofd.log")) as f:
            log = f.read()
        m = re.search(r"unwinding: (\d+) stacks: (\d+) complete, \d+ at the frame limit, (\d+) "
                      r"truncated copies", log)
        self.assertIsNotNone(m, log)
        self.assertEqual(int(m.group(1)) - int(m.group(2)), 1, log)
        self.assertEqual(m.group(3), "1", log)
        m = re.search(r"stack gaps: (\d+) bytes per sample left out of the copies, parts of big "
                      r"frames the unwinder did not read \(mean\); (\d+) copies lacked a word of "
                      r"one", log)
        self.assertIsNotNone(m, log)
        self.assertEqual(m.group(2), "1", log)
        # Some 800 of about 1,700 samples leave out about 9,000 bytes.
        self.assertGreater(int(m.group(1)), 3000, log)
        out = subprocess.run([CLI, "report", "-q", "--value", "alloc_objects", "-f", "folded",
                              self.final()], capture_output=True, text=True, check=True).stdout
        whole = {"site_under_big": 0, "site_over_gap": 0}
        cut = dict(whole)
        for line in out.splitlines():
            stack, _, number = line.rpartition(" ")
            leaf = stack.split(";")[-1].split(" (")[0]
            if leaf in whole:
                frames = [f.split(" (")[0] for f in stack.split(";")]
                whole_stack = "main" in frames and "big_frames" in frames
                (whole if whole_stack else cut)[leaf] += int(number)
                if leaf == "site_under_big":
                    self.assertIn("big_inner", frames, line[:300])
        self.assertEqual(whole, {"site_under_big": 849, "site_over_gap": 848}, out[:2000])
        self.assertEqual(cut, {"site_under_big": 0, "site_over_gap": 1}, out[:2000])

    def test_call_sites_symbolized_while_the_program_runs(self):
        # The daemon symbolizes each new call site's pc in the background as it comes, so that
        # the final profile does not wait for debug info to be opened after the program
        # exited: every trie node's pc is queued once. How many the worker did before the
        # end depends on idle CPUs (it waits while every CPU is busy, as under ctest -j2), so
        # only the sum is exact here; unit.presymbolizer tests the worker itself.
        self.profile("-i", "1", "--", WORKLOAD, "spin", "4", "500")
        with open(os.path.join(self.dir, "heapprofd.log")) as f:
            log = f.read()
        m = re.search(r"symbolizing: (\d+) pcs of call sites done during the run, (\d+) left to "
                      r"the dumps", log)
        self.assertIsNotNone(m, log)
        callsites = int(re.search(r"tracker: (\d+) callsites", log).group(1))
        self.assertGreater(callsites, 0, log)
        self.assertEqual(int(m.group(1)) + int(m.group(2)), callsites, log)
        sites = per_site(self.final(), "alloc_objects")
        self.assertGreaterEqual(sites.get("site_spin", 0), 4 * 500 * 64, sites)

    def test_fork_child_is_not_profiled(self):
        proc = self.profile("-i", "1", "--", WORKLOAD, "fork")
        self.assertIn("fork done child_status=0", proc.stdout)
        profile = self.final()
        alloc = per_site(profile, "alloc_space")
        inuse = per_site(profile, "inuse_space")
        self.assertEqual(alloc.get("site_parent"), 1000 * 2000)
        # The child freed its copies of the parent's blocks: the parent's stay in use.
        self.assertEqual(inuse.get("site_parent"), 1000 * 2000)
        self.assertNotIn("site_child", alloc)

    def test_fork_followed(self):
        self.profile("-i", "1", "--follow-children", "--", WORKLOAD, "fork")
        profiles = glob.glob(os.path.join(self.dir, "hp_workload.*.final.pb.gz"))
        self.assertEqual(len(profiles), 2, os.listdir(self.dir))
        children = [p for p in profiles if "site_child" in per_site(p, "alloc_space")]
        self.assertEqual(len(children), 1)
        self.assertEqual(per_site(children[0], "alloc_space")["site_child"], 1000 * 3000)

    def test_custom_heap(self):
        self.profile("--", WORKLOAD, "custom")
        pool = self.final("hp_workload.*.final.pool.pb.gz")
        # The reporting call is made by heapprofd.h's inline wrapper, inlined into custom():
        # its call site names the wrapper, then custom() (a return address named custom()).
        leaf = "heapscope_heap_report_alloc_if_loaded"
        self.assertEqual(per_site(pool, "alloc_space").get(leaf), 1000 * 128)
        self.assertEqual(per_site(pool, "inuse_space").get(leaf), 500 * 128)
        out = subprocess.run([CLI, "report", "-q", "-f", "folded", pool], capture_output=True,
                             text=True, check=True).stdout
        self.assertRegex(out, r";custom \(hp_workload\.c:\d+\);%s \(heapprofd\.h:\d+\) " % leaf)
        self.assertIn("heap pool", comments(pool))

    def test_library_loaded_after_attach(self):
        # The first sample in the new library meets an unknown mapping: the daemon reads the
        # maps again at once and the whole stack unwinds, named.
        self.profile("-i", "1", "--", WORKLOAD, "dlopen", os.environ["HS_HP_LIB"])
        profile = self.final()
        out = subprocess.run([CLI, "report", "-q", "--value", "alloc_space", "-f", "folded",
                              profile], capture_output=True, text=True, check=True).stdout
        self.assertEqual(per_site(profile, "alloc_space").get("hp_lib_alloc"), 1000 * 1000,
                         out + comments(profile))
        stack = [l for l in out.splitlines() if "hp_lib_alloc" in l][0]
        self.assertIn("dlopened (hp_workload.c", stack)
        self.assertIn("main (hp_workload.c", stack)
        text = comments(profile)
        self.assertRegex(text, r"maps read: [2-9] times")
        self.assertIn("0 unknown map", text)

    def test_library_unloaded_right_after_its_sample(self):
        # Each round loads the library, allocates once from it and unloads it at once: the
        # dlclose waits until the daemon has read the sample (hs_client_sync_before_unmap), so
        # it unwinds while the library is mapped. Before, these samples had no stack at all.
        self.profile("-i", "1", "--", WORKLOAD, "dlclose", os.environ["HS_HP_LIB"])
        profile = self.final()
        out = subprocess.run([CLI, "report", "-q", "--value", "alloc_objects", "-f", "folded",
                              profile], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("[no backtrace]", out)
        stacks = [l for l in out.splitlines() if "hp_lib_alloc" in l]
        self.assertEqual(len(stacks), 1, out)
        self.assertIn("dlclosed (hp_workload.c", stacks[0])
        self.assertTrue(stacks[0].endswith(" 20"), stacks[0])
        self.assertIn("0 unknown map", comments(profile))

    @unittest.skipUnless(shutil.which("node"), "Node.js is not installed")
    def test_node_js_functions_named_from_the_perf_map(self):
        script = os.path.join(self.dir, "buffers.js")
        with open(script, "w") as f:
            f.write("function makeBuffers(n) {\n"
                    "  const out = [];\n"
                    "  for (let i = 0; i < n; i++) out.push(Buffer.allocUnsafeSlow(200000));\n"
                    "  return out;\n"
                    "}\n"
                    "let keep = [];\n"
                    "for (let r = 0; r < 10; r++) keep = makeBuffers(20);\n"
                    "console.log('done', keep.length);\n")
        proc = self.profile("-i", "65536", "--", "node", "--perf-basic-prof",
                            "--interpreted-frames-native-stack", script)
        self.assertEqual(proc.stdout, "done 20\n")
        profile = self.final("node.*.final.pb.gz")
        out = subprocess.run([CLI, "report", "-q", "--value", "alloc_space", "-f", "folded",
                              profile], capture_output=True, text=True, check=True).stdout
        # The JavaScript function that asked for the buffers, named by V8's perf map; the
        # buffers (200,000 bytes each, above the interval) are counted exactly.
        js = [l for l in out.splitlines() if "makeBuffers " + script in l]
        self.assertTrue(js, out[:3000])
        buffers = [l for l in js if "ArrayBufferAllocator" in l.rpartition(" ")[0].split(";")[-1]]
        self.assertEqual(sum(int(l.rpartition(" ")[2]) for l in buffers), 200 * 200000, js)
        # "JS:~makeBuffers FILE:1:21" (V8 11), "LazyCompile:~makeBuffers ..." (older V8).
        self.assertRegex(js[0], r";[A-Za-z]+:[~*^]?makeBuffers " + re.escape(script) + ":1")
        self.assertRegex(comments(profile), r"perf map: \d+ names of JIT code")

    def test_android_dump_and_dump_at_max(self):
        self.profile("-i", "1", "--android-dump", "--dump-at-max", "--", WORKLOAD, "known")
        text = self.final("hp_workload.*.final.txt")
        with open(text) as f:
            self.assertEqual(f.readline().strip(), "Android Native Heap Dump v1.2")
        # The report reads it: the same in-use bytes per site as the pprof profile.
        pprof_inuse = per_site(self.final(), "inuse_space")
        dump_inuse = per_site(text, "inuse_space")
        for site in ("site_small", "site_large", "site_realloc"):
            self.assertEqual(dump_inuse.get(site), pprof_inuse.get(site), site)
        # At the peak, one aligned block was live and the medium ones were all freed.
        at_max = per_site(self.final("hp_workload.*.max.pb.gz"), "inuse_space")
        self.assertEqual(at_max.get("site_memalign"), 4096)
        self.assertEqual(at_max.get("site_medium", 0), 0)
        self.assertEqual(at_max.get("site_large"), 100 * 100000)

    def test_continuous_dumps(self):
        self.profile("--continuous", "200", "--", WORKLOAD, "serve", "1")
        numbered = glob.glob(os.path.join(self.dir, "hp_workload.*.[0-9]*.pb.gz"))
        self.assertGreaterEqual(len(numbered), 2, os.listdir(self.dir))
        self.final()

    # ---- Processes and daemons that go away ---------------------------------------------

    def test_daemon_killed_program_finishes(self):
        d = Daemon(self.dir)
        plain = subprocess.run([WORKLOAD, "serve", "2"], capture_output=True, text=True)
        prog = subprocess.Popen([WORKLOAD, "serve", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=d.client_env())
        self.assertEqual(d.next_event(), "connected %d" % prog.pid)
        time.sleep(0.5)
        d.proc.kill()
        d.proc.wait()
        out, err = prog.communicate(timeout=60)
        self.assertEqual(prog.returncode, 0, err)
        self.assertEqual(out.splitlines()[-1], plain.stdout.splitlines()[-1])
        self.assertIn("heapprofd: profiling stopped: the profiler daemon went away", err)

    def test_client_killed_daemon_serves_others(self):
        d = Daemon(self.dir, "--interval", "1")
        victim = subprocess.Popen([WORKLOAD, "serve", "30"], stdout=subprocess.PIPE,
                                  env=d.client_env())
        self.assertEqual(d.next_event(), "connected %d" % victim.pid)
        time.sleep(0.3)
        victim.kill()  # mid-write, most likely: it writes all the time at interval 1
        victim.wait()
        other = subprocess.Popen([WORKLOAD, "known"], stdout=subprocess.PIPE,
                                 env=d.client_env())
        other.communicate(timeout=60)
        self.assertEqual(other.returncode, 0)
        events = [d.next_event() for _ in range(3)]
        d.stop()
        self.assertIn("connected %d" % other.pid, events)
        finished = [e for e in events if e.startswith("finished")]
        self.assertEqual(len(finished), 2, events)
        # The victim's profile was written, and the other's is exact.
        victim_profile = glob.glob(os.path.join(self.dir, "hp_workload.%d.final.pb.gz"
                                                % victim.pid))
        self.assertEqual(len(victim_profile), 1)
        self.assertGreater(per_site(victim_profile[0], "alloc_objects").get("site_serve", 0), 0)
        other_profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % other.pid)
        self.assertEqual(per_site(other_profile, "alloc_space")["site_medium"], 5000 * 1000)

    def test_two_programs_at_once(self):
        d = Daemon(self.dir, "--interval", "1")
        progs = [subprocess.Popen([WORKLOAD, "threads", "4"], stdout=subprocess.PIPE,
                                  env=d.client_env()) for _ in range(2)]
        for p in progs:
            p.wait(timeout=60)
            self.assertEqual(p.returncode, 0)
        d.stop()
        for p in progs:
            profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % p.pid)
            self.assertEqual(per_site(profile, "alloc_objects").get("site_thread"), 4 * 4000)

    def test_dump_on_demand_and_memory_guardrail(self):
        d = Daemon(self.dir, "--max-memory", "1")
        prog = subprocess.Popen([WORKLOAD, "serve", "30"], stdout=subprocess.PIPE, text=True,
                                env=d.client_env())
        RUNNING.append(prog)
        self.assertEqual(d.next_event(), "connected %d" % prog.pid)
        time.sleep(0.3)
        d.proc.send_signal(signal.SIGUSR1)  # a numbered dump now
        # The daemon's own memory is far above 1 MiB: at its first check (within a second)
        # it stops the session with a final profile and exits with status 3.
        rest = d.events.read()
        self.assertEqual(d.proc.wait(timeout=30), 3)
        self.assertIn("finished %d" % prog.pid, rest)
        numbered = os.path.join(self.dir, "hp_workload.%d.1.pb.gz" % prog.pid)
        self.assertGreater(per_site(numbered, "alloc_objects").get("site_serve", 0), 0)
        final = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % prog.pid)
        self.assertRegex(comments(final), r"session stopped by the daemon: guardrail: the "
                         r"daemon's memory \(\d+ MiB\) passed 1 MiB")
        # The program runs on, unprofiled, and finishes normally.
        self.assertIsNone(prog.poll())
        prog.send_signal(signal.SIGTERM)
        out, _ = prog.communicate(timeout=30)
        self.assertEqual(prog.returncode, 0)
        self.assertIn("serve done checksum_ok=1", out)

    def test_socket_activation_and_plain_signal(self):
        # The daemon as systemd starts it (dist/systemd/heapprofd.socket): the listening socket
        # is descriptor 3, LISTEN_PID its pid. A dormant client that gets `kill -36` (no value)
        # connects to its HEAPSCOPE_PROFILE_SOCKET (else to the system socket).
        import fcntl
        path = os.path.join(self.dir, "heapprofd.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(8)
        r, w = os.pipe()
        lfd = fcntl.fcntl(listener.fileno(), fcntl.F_DUPFD, 10)
        wfd = fcntl.fcntl(w, fcntl.F_DUPFD, 10)
        os.close(w)
        daemon = subprocess.Popen(
            ["bash", "-c", 'exec 3<&%d %d<&-; LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"'
             % (lfd, lfd), DAEMON, "--output", self.dir, "--ready-fd", str(wfd)],
            pass_fds=(lfd, wfd), env=clean_env())
        RUNNING.append(daemon)
        os.close(lfd)
        os.close(wfd)
        listener.close()
        events = os.fdopen(r, "r")
        self.assertEqual(events.readline().strip(), "ready")
        env = clean_env()
        env.update(LD_PRELOAD=CLIENT, HEAPSCOPE_PROFILE_SOCKET=path, HEAPSCOPE_PROFILE_PID="1")
        prog = subprocess.Popen([WORKLOAD, "serve", "30"], stdout=subprocess.PIPE, text=True,
                                env=env)
        RUNNING.append(prog)
        self.assertTrue(prog.stdout.readline().startswith("serving pid="))
        os.kill(prog.pid, 36)
        self.assertEqual(events.readline().strip(), "connected %d" % prog.pid)
        time.sleep(0.3)
        daemon.send_signal(signal.SIGTERM)
        self.assertIn("finished %d" % prog.pid, events.read())
        self.assertEqual(daemon.wait(timeout=30), 0)
        profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % prog.pid)
        self.assertGreater(per_site(profile, "alloc_objects").get("site_serve", 0), 0)
        self.assertTrue(os.path.exists(path))  # systemd's socket file is systemd's to remove
        prog.send_signal(signal.SIGTERM)
        out, _ = prog.communicate(timeout=30)
        self.assertEqual(prog.returncode, 0)
        self.assertIn("serve done checksum_ok=1", out)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"),
                         "needs root and unshare(1) for a private mount namespace")
    def test_whole_machine_mode_in_a_mount_namespace(self):
        # /etc/ld.so.preload loads the dormant client into every process; here only inside a
        # private mount namespace whose /etc is a copy, so the machine's own processes never
        # see it. Three programs started with nothing in their environment are profiled at
        # once, by name.
        etc = os.path.join(self.dir, "etc")
        subprocess.run(["cp", "-a", "/etc", etc], check=True)
        with open(os.path.join(etc, "ld.so.preload"), "w") as f:
            f.write(CLIENT + "\n")
        # The workload under a name of its own: the mount namespace does not hide processes,
        # and other suites running at the same time (ctest -j) have hp_workload processes that
        # -n must not pick up, nor the end of the script kill.
        name, workload = self.unique_workload()
        script = """
            set -e
            mount --make-rprivate /
            mount --bind "$ETC" /etc
            pids=
            for i in 1 2 3; do env -i "$WORKLOAD" serve 30 > "$OUT/prog$i.out" & pids="$pids $!"; done
            sleep 0.5
            grep -l libheapprofd.so /proc/$!/maps > /dev/null
            "$CLI" profile -n "$NAME" --duration 1 -o "$OUT/profiles"
            "$CLI" profile --all --duration 1 -o "$OUT/all" 2> "$OUT/all.err"
            kill -TERM $pids
            wait
        """
        env = dict(clean_env(), ETC=etc, WORKLOAD=workload, NAME=name, CLI=CLI, OUT=self.dir)
        proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 and "unshare failed" in proc.stderr:
            self.skipTest("unshare -m is not allowed here: " + proc.stderr.strip())
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("profiling 3 processes", proc.stderr)
        profiles = glob.glob(os.path.join(self.dir, "profiles", name + ".*.final.pb.gz"))
        self.assertEqual(len(profiles), 3, proc.stderr)
        for profile in profiles:
            self.assertGreater(per_site(profile, "alloc_objects").get("site_serve", 0), 0)
        # --all: every process of ours with the client loaded and its signal armed (the three,
        # and whatever else in the namespace has it), in second sessions.
        with open(os.path.join(self.dir, "all.err")) as f:
            self.assertRegex(f.read(), r"profiling [3-9] processes")
        second = glob.glob(os.path.join(self.dir, "all", name + ".*.final.pb.gz"))
        self.assertEqual(len(second), 3, os.listdir(os.path.join(self.dir, "all")))
        for i in (1, 2, 3):
            with open(os.path.join(self.dir, "prog%d.out" % i)) as f:
                self.assertIn("serve done checksum_ok=1", f.read())
        # Outside the namespace, nothing changed.
        self.assertFalse(os.path.exists("/etc/ld.so.preload") and
                         CLIENT in open("/etc/ld.so.preload").read())

    def test_data_rate_bound(self):
        # A daemon bounded to 64 KiB/s of records for all its processes together asks two busy
        # programs for larger intervals; their profiles stay unbiased (each sample weighs the
        # interval it was drawn with), and say how far the bound went.
        d = Daemon(self.dir, "--max-rate", "65536")
        progs = [subprocess.Popen([WORKLOAD, "serve", "3"], stdout=subprocess.PIPE, text=True,
                                  env=d.client_env()) for _ in range(2)]
        for p in progs:
            RUNNING.append(p)
        for p in progs:
            out, _ = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0)
            self.assertIn("serve done checksum_ok=1", out)
        d.stop()
        with open(os.path.join(self.dir, "heapprofd.log")) as f:
            self.assertRegex(f.read(), r"data rate \d+ bytes/s \(--max-rate 65536\): asking "
                                       r"every process for an interval of at least \d+ bytes")
        for p in progs:
            profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % p.pid)
            text = comments(profile)
            m = re.search(r"asked for an interval of up to (\d+) bytes", text)
            self.assertIsNotNone(m, text)
            self.assertGreaterEqual(int(m.group(1)), 8192)
            largest = int(re.search(r"largest in force: (\d+)", text).group(1))
            self.assertGreaterEqual(largest, 8192)
            self.assertGreater(per_site(profile, "alloc_objects").get("site_serve", 0), 0)

    def test_hostile_clients(self):
        d = Daemon(self.dir)
        # Not a client at all.
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + d.address[1:])
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100)
        self.assertEqual(s.recv(4096)[8:12], b"\0\0\0\0")  # accepted = 0
        s.close()
        self.assertIn("not a heapscope profiler client", d.next_event())
        # A client of another heapscope, whose records and buffer the daemon would misread.
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + d.address[1:])
        fds = [os.open("/proc/self/maps", os.O_RDONLY), os.open("/proc/self/mem", os.O_RDONLY)]
        socket.send_fds(s, [struct.pack("<IIiIQ", 0x52505348, WIRE_FORMAT - 1, os.getpid(), 0,
                                        0)], fds)
        self.assertEqual(s.recv(4096)[8:12], b"\0\0\0\0")
        s.close()
        self.assertIn("a profiler client of another heapscope (wire format %d, this profiler's "
                      "%d)" % (WIRE_FORMAT - 1, WIRE_FORMAT), d.next_event())
        # Descriptors of another process than the one that connects.
        other = subprocess.Popen(["sleep", "30"])
        RUNNING.append(other)
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + d.address[1:])
        fds = [os.open("/proc/%d/maps" % other.pid, os.O_RDONLY),
               os.open("/proc/self/mem", os.O_RDONLY)]
        hello = struct.pack("<IIiIQ", 0x52505348, WIRE_FORMAT, os.getpid(), 0, 0)
        socket.send_fds(s, [hello], fds)
        s.recv(4096)
        s.close()
        self.assertIn("are not the process's /proc maps and mem", d.next_event())
        # A real handshake, then garbage in the shared buffer: the daemon gives up on this
        # buffer only, and still serves a real program.
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + d.address[1:])
        fds = [os.open("/proc/self/maps", os.O_RDONLY), os.open("/proc/self/mem", os.O_RDONLY)]
        socket.send_fds(s, [hello], fds)
        msg, got, _, _ = socket.recv_fds(s, 4096, 1)
        self.assertEqual(struct.unpack_from("<I", msg, 8)[0], 1, msg)
        self.assertIn("connected %d" % os.getpid(), d.next_event())
        import mmap
        shared = mmap.mmap(got[0], os.fstat(got[0]).st_size)
        shared[64:72] = struct.pack("<Q", 10**12)  # read_pos far beyond write_pos
        shared[8:16] = struct.pack("<Q", 4096 * 3 + 5)  # write_pos: not a multiple of 8
        shared[4096:4096 + 64] = os.urandom(64)
        s.send(b"w")
        good = subprocess.Popen([WORKLOAD, "known"], stdout=subprocess.PIPE, env=d.client_env())
        good.communicate(timeout=60)
        self.assertEqual(good.returncode, 0)
        s.close()
        rest = d.stop()
        self.assertIn("finished %d" % good.pid, rest)
        profile = os.path.join(self.dir, "hp_workload.%d.final.pb.gz" % good.pid)
        self.assertIn("site_large", per_site(profile, "alloc_space"))
        with open(os.path.join(self.dir, "heapprofd.log")) as f:
            self.assertIn("stopped reading its buffer: corrupt", f.read())

    def test_record_never_published_costs_no_cpu(self):
        """A client that reserves a record and never publishes it (stalled, or hostile):
        the daemon looks again every few ms, without spinning, until the buffer's stall
        timeout (2 s) makes it give up on that buffer."""
        d = Daemon(self.dir)
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + d.address[1:])
        fds = [os.open("/proc/self/maps", os.O_RDONLY), os.open("/proc/self/mem", os.O_RDONLY)]
        hello = struct.pack("<IIiIQ", 0x52505348, WIRE_FORMAT, os.getpid(), 0, 0)
        socket.send_fds(s, [hello], fds)
        msg, got, _, _ = socket.recv_fds(s, 4096, 1)
        self.assertEqual(struct.unpack_from("<I", msg, 8)[0], 1, msg)
        self.assertIn("connected %d" % os.getpid(), d.next_event())
        import mmap
        shared = mmap.mmap(got[0], os.fstat(got[0]).st_size)
        # One record of 64 bytes reserved at the start of the data area: its header is still
        # 0 ("not ready"), and stays so.
        self.assertEqual(shared[4096:4104], b"\0" * 8)
        shared[8:16] = struct.pack("<Q", 64)  # write_pos
        s.send(b"w")

        def cpu_seconds():
            with open("/proc/%d/stat" % d.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        before = cpu_seconds()
        time.sleep(1.5)
        used = cpu_seconds() - before
        # Spinning on the record took a whole CPU for the 1.5 s (about 1.5 s of CPU time);
        # looking every 2 ms takes a few ms.
        self.assertLess(used, 0.5)
        deadline = time.time() + 30
        log = os.path.join(self.dir, "heapprofd.log")
        text = ""
        while time.time() < deadline and "record never published" not in text:
            time.sleep(0.1)
            if os.path.exists(log):  # the log is created with its first line
                with open(log) as f:
                    text = f.read()
        self.assertIn("stopped reading its buffer: record never published", text)
        s.close()
        shared.close()
        d.stop()

    # ---- Running processes ----------------------------------------------------------------

    def start_dormant(self, seconds="60", workload=WORKLOAD):
        env = clean_env()
        env["LD_PRELOAD"] = CLIENT
        prog = subprocess.Popen([workload, "serve", seconds], stdout=subprocess.PIPE,
                                text=True, env=env)
        self.assertTrue(prog.stdout.readline().startswith("serving pid="))
        return prog

    def test_attach_to_running_process_twice(self):
        prog = self.start_dormant()
        try:
            for round in (1, 2):
                proc = self.profile("-p", str(prog.pid), "--duration", "1")
                self.assertIn("profiling 1 process", proc.stderr)
                profile = os.path.join(self.dir, "hp_workload.%d%s.final.pb.gz"
                                       % (prog.pid, "" if round == 1 else "-2"))
                self.assertGreater(per_site(profile, "alloc_objects").get("site_serve", 0), 0)
                self.assertIn("session stopped by the daemon", comments(profile))
                self.assertIsNone(prog.poll())  # still running, unharmed
        finally:
            prog.send_signal(signal.SIGTERM)
            out, _ = prog.communicate(timeout=30)
        self.assertEqual(prog.returncode, 0)
        self.assertIn("serve done checksum_ok=1", out)

    def unique_workload(self):
        """The workload under a name no other process has: -n must not pick up the
        hp_workload processes of suites running at the same time (ctest -j)."""
        name = "hp_wl%d" % os.getpid()
        path = os.path.join(self.dir, name)
        shutil.copy(WORKLOAD, path)
        return name, path

    def test_attach_by_name_until_exit(self):
        name, workload = self.unique_workload()
        prog = self.start_dormant("2", workload)
        proc = self.profile("-n", name)
        self.assertIn("wrote", proc.stderr)
        prog.wait(timeout=30)
        self.final(name + ".*.final.pb.gz")

    def test_attach_errors(self):
        proc = self.profile("-p", "12x", expect_rc=2)
        self.assertIn("'12x' is not a process id", proc.stderr)
        dead = subprocess.Popen(["true"])
        dead.wait()
        proc = self.profile("-p", str(dead.pid), expect_rc=1)
        self.assertIn("no process %d" % dead.pid, proc.stderr)
        plain = subprocess.Popen(["sleep", "30"])
        try:
            proc = self.profile("--no-inject", "-p", str(plain.pid), expect_rc=1)
            self.assertIn("the profiler's client is not loaded in process %d" % plain.pid,
                          proc.stderr)
        finally:
            plain.kill()
            plain.wait()
        proc = self.profile("-n", "no-such-program-here", expect_rc=1)
        self.assertIn("no process named 'no-such-program-here'", proc.stderr)
        proc = self.profile(expect_rc=2)
        self.assertIn("give a program to run", proc.stderr)

    def test_program_keeps_its_descriptors(self):
        proc = subprocess.run([CLI, "profile", "-q", "-o", self.dir, "--", "wc", "-c"],
                              input="hello\n", capture_output=True, text=True, env=clean_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "6")

    def test_program_exit_status_and_missing_program(self):
        proc = self.profile("--", "sh", "-c", "exit 7", expect_rc=7)
        proc = self.profile("--", "/nonexistent/program", expect_rc=127)
        # What happened, and nothing that did not ("never connected").
        self.assertEqual(proc.stderr, "heapscope profile: cannot run '/nonexistent/program': "
                                      "No such file or directory\n")

    def daemon_of(self, command_pid):
        """The pid of the heapprofd a `heapscope profile` started."""
        for _ in range(500):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open("/proc/%s/stat" % entry) as f:
                        stat = f.read()
                except OSError:
                    continue
                comm, _, rest = stat.partition("(")[2].rpartition(")")
                if comm == "heapprofd" and int(rest.split()[1]) == command_pid:
                    return int(entry)
            time.sleep(0.01)
        self.fail("no daemon under process %d" % command_pid)

    def test_daemon_killed_is_said_as_such(self):
        proc = subprocess.Popen([CLI, "profile", "-o", self.dir, "--", WORKLOAD, "serve", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        RUNNING.append(proc)
        self.assertTrue(proc.stdout.readline().startswith("serving pid="))  # connected
        os.kill(self.daemon_of(proc.pid), signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        self.assertIn("serve done", out)  # the program unharmed
        self.assertEqual(proc.returncode, 1, err)
        self.assertIn("heapscope profile: the profiler daemon died (signal 9): no profile was "
                      "written; see %s/heapprofd.log\n" % self.dir, err)
        self.assertNotIn("never connected", err)

    @unittest.skipUnless(os.getuid() == 0 and shutil.which("unshare"),
                         "needs root and unshare to mount a small tmpfs")
    def test_full_disk_is_reported(self):
        # A 64 KiB tmpfs of our own, filled up: the daemon's log and the profile's data fail
        # to be written (the files themselves can still be created).
        fill = ('mount -t tmpfs -o size=64k none "$1" && '
                'dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; ')
        run = subprocess.run(["unshare", "-m", "sh", "-c",
                              fill + 'exec "$2" profile -i 1 -o "$1" -- "$3" known',
                              "sh", self.dir, CLI, WORKLOAD],
                             capture_output=True, text=True, env=clean_env(), timeout=120)
        if "mount:" in run.stderr or "unshare:" in run.stderr:
            self.skipTest("cannot mount a tmpfs here: " + run.stderr)
        self.assertIn("known done checksum=", run.stdout)  # the program unharmed
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertRegex(run.stderr, r"heapscope profile: process (\d+): cannot write %s/"
                         r"hp_workload\.\1\.final\.pb\.gz: No space left on device\n"
                         % re.escape(self.dir))
        self.assertIn("heapscope profile: cannot write the profiler's log %s/heapprofd.log: "
                      "No space left on device\n" % self.dir, run.stderr)
        self.assertNotIn("view with", run.stderr)
        # The same when attached to a running process.
        prog = self.start_dormant()
        try:
            run = subprocess.run(["unshare", "-m", "sh", "-c",
                                  fill + 'exec "$2" profile -o "$1" -p "$3" --duration 1',
                                  "sh", self.dir, CLI, str(prog.pid)],
                                 capture_output=True, text=True, env=clean_env(), timeout=120)
            self.assertEqual(run.returncode, 1, run.stderr)
            self.assertIn("heapscope profile: process %d: cannot write %s/hp_workload.%d.final."
                          "pb.gz: No space left on device\n" % (prog.pid, self.dir, prog.pid),
                          run.stderr)
            self.assertIsNone(prog.poll())
        finally:
            prog.send_signal(signal.SIGTERM)
            out, _ = prog.communicate(timeout=30)
        self.assertIn("serve done checksum_ok=1", out)


if __name__ == "__main__":
    unittest.main()
