"""End-to-end: the heapscope command."""
import os
import shutil
import subprocess
import unittest

from e2e import BUGS, CLI, DIVIDER, LINE_RE, Case


def cli(args, env_extra=None):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "LIBC_DEBUG_MALLOC_OPTIONS", "LIBC_DEBUG_MALLOC_PROGRAM"):
        env.pop(k, None)
    env.update(env_extra or {})
    return subprocess.run([CLI] + args, env=env, capture_output=True, text=True, timeout=120)


class Cli(Case):
    def test_help(self):
        r = cli(["--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: heapscope COMMAND", r.stdout)
        self.assertIn("debug", r.stdout)
        r = cli(["debug", "--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: heapscope debug", r.stdout)
        self.assertEqual(cli(["help", "debug"]).stdout, r.stdout)

    def test_unknown_command(self):
        r = cli(["frobnicate"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)

    def test_debug_reports_overflow(self):
        r = cli(["debug", "--", BUGS, "rear_overflow_1"])
        self.assertEqual(r.returncode, 0)
        bodies = [LINE_RE.match(l).group("body") for l in r.stderr.splitlines()
                  if LINE_RE.match(l)]
        self.assertEqual(bodies[0], DIVIDER)
        self.assertIn("SIZE 100 HAS A CORRUPTED REAR GUARD", bodies[1])

    def test_debug_with_options_and_exit_status(self):
        r = cli(["debug", "-o", "guard abort_on_error", BUGS, "rear_overflow_1"])
        self.assertEqual(r.returncode, -6)
        r = cli(["debug", "-o", "guard", BUGS, "nonsense"])
        self.assertEqual(r.returncode, 2, "the program's own exit status")

    def test_debug_rejects_bad_options_before_running(self):
        r = cli(["debug", "-o", "guard=0", "--", BUGS, "clean"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "", "the program did not run")
        self.assertIn("heapscope debug: md_bugs: bad value for option 'guard', value must be "
                      ">= 1: 0", r.stderr)

    def test_debug_log_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            r = cli(["debug", "--log", os.path.join(d, "log.%p"), BUGS, "rear_overflow_1"])
            self.assertEqual(r.returncode, 0)
            pid = [l for l in r.stdout.splitlines() if l.startswith("pid=")][0][4:]
            with open(os.path.join(d, "log." + pid)) as f:
                self.assertIn("HAS A CORRUPTED REAR GUARD", f.read())

    def test_debug_log_file_that_cannot_be_written(self):
        # Seen before the program runs: the command stops with the path and the reason.
        for command in ("debug", "leaks"):
            r = cli([command, "--log", "/nonexistent-dir/md.log", BUGS, "clean"])
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stdout, "", "the program did not run")
            self.assertEqual(r.stderr, "heapscope %s: cannot write the log file "
                             "/nonexistent-dir/md.log: No such file or directory\n" % command)
        # Failing while the program runs (every write to /dev/full fails with ENOSPC): the
        # command, which writes the log, says so once on its stderr, and the reports follow
        # there, the failed one included.
        r = cli(["debug", "--log", "/dev/full", BUGS, "rear_overflow_1"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(lines[0], "heapscope debug: cannot write the log file /dev/full: No "
                                   "space left on device; reports go to stderr from now on")
        bodies = [LINE_RE.match(l).group("body") for l in lines if LINE_RE.match(l)]
        self.assertEqual(bodies[0], DIVIDER)
        self.assertIn("SIZE 100 HAS A CORRUPTED REAR GUARD", bodies[1])
        self.assertEqual(sum("cannot write the log file" in l for l in lines), 1)

    def test_debug_files_of_the_shim_that_cannot_be_written(self):
        # The allocation records and the heap dump at exit: seen before the program runs.
        r = cli(["debug", "-o", "record_allocs record_allocs_file=/nonexistent-dir/rec.txt",
                 BUGS, "clean"])
        self.assertEqual((r.returncode, r.stdout), (1, ""), r.stderr)
        self.assertEqual(r.stderr, "heapscope debug: cannot write the allocation records to "
                         "/nonexistent-dir/rec.txt: No such file or directory\n")
        r = cli(["leaks", "-o", "backtrace backtrace_dump_on_exit "
                 "backtrace_dump_prefix=/nonexistent-dir/heap", BUGS, "clean"])
        self.assertEqual((r.returncode, r.stdout), (1, ""), r.stderr)
        self.assertRegex(r.stderr, r"^heapscope leaks: cannot write the heap dump at exit to "
                         r"/nonexistent-dir/heap\.\d+\.exit\.txt: No such file or directory\n$")

    @unittest.skipUnless(os.getuid() == 0 and shutil.which("unshare"),
                         "needs root and unshare to mount a small tmpfs")
    def test_debug_log_on_a_file_system_that_fills_up(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            # A 64 KiB tmpfs of our own; a program that fills it (dd, under the shim too)
            # before its own report: the report's write fails mid-run.
            script = ('mount -t tmpfs -o size=64k none "$1" && '
                      'exec "$2" debug --log "$1/md.%%p.log" -- sh -c '
                      '\'dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; exec "$2" "$3"\' '
                      'sh "$1" "%s" rear_overflow_1')
            r = subprocess.run(["unshare", "-m", "sh", "-c", script % BUGS, "sh", d, CLI],
                               capture_output=True, text=True, timeout=60)
            if "unshare failed" in r.stderr or "mount:" in r.stderr:
                self.skipTest("cannot mount a tmpfs here: " + r.stderr)
            self.assertEqual(r.returncode, 0, r.stderr)
            pid = [l for l in r.stdout.splitlines() if l.startswith("pid=")][0][4:]
            bodies = [LINE_RE.match(l).group("body") for l in r.stderr.splitlines()
                      if LINE_RE.match(l)]
            self.assertEqual(r.stderr.splitlines()[0], "heapscope debug: cannot write the log "
                             "file %s/md.%s.log: No space left on device; reports go to stderr "
                             "from now on" % (d, pid))
            self.assertIn("SIZE 100 HAS A CORRUPTED REAR GUARD", "\n".join(bodies))
            # Full before it starts: the command stops.
            script = ('mount -t tmpfs -o size=64k none "$1" && '
                      'dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; '
                      'exec "$2" debug --log "$1/md.log" -- "$3" clean')
            r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", d, CLI, BUGS],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stdout, "")
            self.assertEqual(r.stderr, "heapscope debug: cannot write the log file %s/md.log: "
                             "No space left on device (its file system is full)\n" % d)

    def test_debug_program_filter(self):
        r = cli(["debug", "--program", "other", BUGS, "rear_overflow_1"])
        self.assertNotIn("CORRUPTED", r.stderr)

    def test_zombie_target_has_exited(self):
        # A child that exited and was not waited for: kill(pid, 0) still finds it.
        import time
        zombie = subprocess.Popen(["sh", "-c", "exit 3"])
        try:
            for _ in range(500):
                with open("/proc/%d/stat" % zombie.pid) as f:
                    if f.read().rpartition(")")[2].split()[0] == "Z":
                        break
                time.sleep(0.01)
            want = "process %d (sh) has exited: it is a zombie, whose parent has not " \
                   "collected its exit status yet" % zombie.pid
            for command in (["leaks", "-p"], ["leaks", "--no-inject", "-p"],
                            ["profile", "-p"], ["profile", "--no-inject", "-p"],
                            ["dumpheap", "-p"]):
                r = cli(command + [str(zombie.pid)])
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, "heapscope %s: %s\n" % (command[0], want))
        finally:
            zombie.wait()

    def test_missing_program(self):
        r = cli(["debug"])
        self.assertEqual(r.returncode, 2)
        r = cli(["debug", "/nonexistent/prog"])
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/prog'", r.stderr)

    def test_installed_tree_works_and_can_move(self):
        import shutil
        import tempfile
        from e2e import BUILD
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "prefix")
            r = subprocess.run([os.environ["HS_CMAKE"], "--install", BUILD, "--prefix", prefix],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            for f in ("include/heapscope/malloc_debug.h", "share/doc/heapscope/malloc_debug.md",
                      "lib/systemd/system/heapprofd.socket"):
                self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)
            # The service runs the daemon installed under this prefix.
            with open(os.path.join(prefix, "lib/systemd/system/heapprofd.service")) as f:
                self.assertIn("ExecStart=%s/bin/heapprofd " % prefix, f.read())
            pcs = [os.path.join(dp, f) for dp, _, fs in os.walk(prefix) for f in fs
                   if f == "heapscope.pc"]
            self.assertEqual(len(pcs), 1)
            moved = os.path.join(d, "moved")
            shutil.move(prefix, moved)
            # A program built with the (relocatable) pkg-config file, linked with nothing but
            # -lmemunreachable, finds its leak.
            pc_dir = os.path.dirname(pcs[0]).replace(prefix, moved)
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", "heapscope"],
                                   env=dict(os.environ, PKG_CONFIG_PATH=pc_dir),
                                   capture_output=True, text=True, check=True).stdout.split()
            src = os.path.join(d, "leaky.c")
            with open(src, "w") as f:
                f.write("#include <heapscope/memunreachable.h>\n#include <stdio.h>\n"
                        "#include <stdlib.h>\n"
                        "static void *volatile sink;\n"
                        "static __attribute__((noinline)) void leak(void) {\n"
                        "  sink = malloc(64); sink = 0; }\n"
                        "int main(void) { leak(); printf(\"noleaks=%d\\n\", NoLeaks()); }\n")
            exe = os.path.join(d, "leaky")
            subprocess.run(["cc", "-O0", "-o", exe, src] + flags, check=True)
            r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.stdout, "noleaks=0\n", r.stderr)
            env = dict(os.environ)
            env.pop("HEAPSCOPE_LIBDIR", None)
            r = subprocess.run([os.path.join(moved, "bin", "heapscope"), "debug", "-o", "guard",
                                BUGS, "rear_overflow_1"], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("HAS A CORRUPTED REAR GUARD", r.stderr)
            lib_line = [l for l in r.stderr.splitlines() if "libmalloc_debug" in l]
            self.assertEqual(lib_line, [], "shim frames are not shown")
            # The profiler: the command finds its daemon beside it and its client library.
            out = os.path.join(d, "profiles")
            r = subprocess.run([os.path.join(moved, "bin", "heapscope"), "profile", "-o", out,
                                "--", "sh", "-c", "echo hi"], env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout), (0, "hi\n"), r.stderr)
            self.assertEqual(len([f for f in os.listdir(out) if f.endswith(".final.pb.gz")]), 1,
                             r.stderr)

    def test_library_not_found(self):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            lonely = os.path.join(d, "heapscope")
            shutil.copy(CLI, lonely)
            env = dict(os.environ, HEAPSCOPE_LIBDIR=d)
            r = subprocess.run([lonely, "debug", BUGS, "clean"], env=env,
                               capture_output=True, text=True)
            if r.returncode == 0:
                self.skipTest("an installed heapscope was found")
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot find libmalloc_debug.so", r.stderr)


if __name__ == "__main__":
    unittest.main()
