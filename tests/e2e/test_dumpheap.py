"""End-to-end tests of `heapscope dumpheap -p PID`: a heap dump of a running program,
delivered to the caller, and the refusals."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from e2e import clean_env

CLI = os.environ["HS_CLI"]
WORKLOAD = os.environ["HS_HP_WORKLOAD"]


class DumpHeapTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs-dumpheap-")

    def start(self, options):
        """hp_workload serve under heapscope debug; returns (wrapper process, program pid)."""
        prog = subprocess.Popen([CLI, "debug", "-o", options, "--", WORKLOAD, "serve", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=clean_env())
        self.addCleanup(lambda: (prog.kill(), prog.wait()))
        line = prog.stdout.readline()
        self.assertTrue(line.startswith("serving pid="), line)
        time.sleep(0.3)  # its ring of 256 live blocks is full by then
        return prog, int(line.split("=")[1])

    def dumpheap(self, *args):
        return subprocess.run([CLI, "dumpheap"] + list(args), capture_output=True, text=True,
                              env=clean_env(), timeout=60)

    def test_dump_of_a_running_program(self):
        prefix = os.path.join(self.dir, "heap")
        prog, pid = self.start("backtrace backtrace_dump_prefix=" + prefix)
        out = os.path.join(self.dir, "serve.txt")
        for _ in range(2):  # twice: the program runs on
            r = self.dumpheap("-p", str(pid), "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"wrote %s \(Allocation records: \d+, Total memory: \d+\)"
                             % out)
            self.assertFalse(os.path.exists("%s.%d.txt" % (prefix, pid)))  # moved, not copied
            with open(out) as f:
                text = f.read()
            self.assertTrue(text.startswith("Android Native Heap Dump v1.2\n"))
            self.assertTrue(text.endswith("END\n"))
            report = subprocess.run([CLI, "report", "-q", "-f", "folded", out],
                                    capture_output=True, text=True, check=True).stdout
            self.assertIn("site_serve (hp_workload.c", report)
        self.assertIsNone(prog.poll())
        prog.send_signal(signal.SIGTERM)  # the command passes it on to the program
        out_text, _ = prog.communicate(timeout=30)
        self.assertEqual(prog.returncode, 0)
        self.assertIn("serve done checksum_ok=1", out_text)

    def test_default_output_name(self):
        prog, pid = self.start("backtrace backtrace_dump_prefix=" + os.path.join(self.dir, "h"))
        r = subprocess.run([CLI, "dumpheap", "-p", str(pid)], capture_output=True, text=True,
                           env=clean_env(), cwd=self.dir, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "hp_workload.%d.heapdump.txt"
                                                    % pid)))

    @unittest.skipUnless(os.getuid() == 0 and shutil.which("unshare"),
                         "needs root and unshare to mount a small tmpfs")
    def test_full_disk_is_reported(self):
        # The dump goes to a 64 KiB tmpfs of our own with ROOM KiB left: less than the dump
        # (its write fails half-way), or none (seen before the process is asked).
        script = ('mount -t tmpfs -o size=64k none "$1" || exit 99; '
                  'dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null; '
                  'truncate -s -"$4"K "$1/fill"; '
                  '"$2" debug -o "backtrace backtrace_dump_prefix=$1/heap" -- "$3" serve 30 '
                  '>/dev/null & '
                  'sleep 0.5; "$2" dumpheap --timeout 5 -p $! -o "$1/out.txt"; rc=$?; '
                  'kill $!; echo "pid=$!"; exit $rc')
        for room in (8, 0):
            r = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", self.dir, CLI,
                                WORKLOAD, str(room)],
                               capture_output=True, text=True, env=clean_env(), timeout=60)
            if r.returncode == 99:
                self.skipTest("cannot mount a tmpfs here: " + r.stderr)
            self.assertEqual(r.returncode, 1, r.stderr)
            # -p names the heapscope debug command ($!): dumpheap asks the program it runs,
            # its child, whose pid the messages and the dump's name carry.
            if room:
                want = r"heapscope dumpheap: process (\d+) could not write its heap dump " \
                       r"%s/heap\.\1\.txt: No space left on device\n" % re.escape(self.dir)
            else:
                want = r"heapscope dumpheap: process (\d+) cannot write its heap dump " \
                       r"%s/heap\.\1\.txt: No space left on device \(its file system is " \
                       r"full\)\n" % re.escape(self.dir)
            # (The process's own log lines say it too, on the stderr it shares here.)
            self.assertRegex(r.stderr, want)
            self.assertNotIn("no dump from process", r.stderr)

    def test_refusals(self):
        r = self.dumpheap("-p", "12x")
        self.assertEqual(r.returncode, 2)
        self.assertIn("'12x' is not a process id", r.stderr)
        gone = subprocess.Popen(["true"])
        gone.wait()
        r = self.dumpheap("-p", str(gone.pid))
        self.assertEqual((r.returncode, r.stderr.strip()),
                         (1, "heapscope dumpheap: no process %d" % gone.pid))
        plain = subprocess.Popen(["sleep", "30"])
        self.addCleanup(lambda: (plain.kill(), plain.wait()))
        r = self.dumpheap("-p", str(plain.pid))
        self.assertEqual(r.returncode, 1)
        self.assertIn("process %d does not run malloc debug" % plain.pid, r.stderr)
        _, pid = self.start("guard")
        r = self.dumpheap("-p", str(pid))
        self.assertEqual(r.returncode, 1)
        self.assertIn("runs malloc debug without backtraces (option 'backtrace')", r.stderr)


if __name__ == "__main__":
    unittest.main()
