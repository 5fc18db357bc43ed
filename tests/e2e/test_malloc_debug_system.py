"""End-to-end: malloc debug for services and whole machines (issue 21): the system setting the
shim reads when the environment sets nothing, `heapscope debug --system enable|disable|status`
and `heapscope debug --unit NAME [--remove]`.

The whole-machine tests run in a private mount namespace (unshare -m) whose /etc is a copy
bind-mounted over the real one, as the profiler's whole-machine test does: /etc/ld.so.preload
and /etc/heapscope/ are those of the copy, and the machine's own processes never see them."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

from e2e import BUGS, CLI, DIVIDER, clean_env

WORKLOAD = os.environ["HS_HP_WORKLOAD"]
MU_INJECTED = os.environ["HS_MU_INJECTED"]
SETTING = "/etc/heapscope/malloc_debug.conf"
PRERM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dist", "debian",
                     "prerm")
USAGE_1 = "For malloc debug option descriptions go to:"


def libm_path():
    """A harmless library for pre-existing ld.so.preload lines: this interpreter's libm."""
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("/libm.so.6"):
                return line.split()[-1]
    raise AssertionError("no libm.so.6 in this process")


def lines_of(stderr, prog):
    """The bodies of prog's malloc_debug log lines."""
    prefix = re.compile(r"^%s\[\d+\] malloc_debug: " % re.escape(prog))
    return [prefix.sub("", l) for l in stderr.splitlines() if prefix.match(l)]


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"),
                     "needs root and unshare(1) for a private mount namespace")
class WholeMachine(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hs-md-system-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.etc = os.path.join(self.dir, "etc")
        subprocess.run(["cp", "-a", "/etc", self.etc], check=True)
        for stale in ("ld.so.preload", "heapscope"):
            path = os.path.join(self.etc, stale)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)

    def namespace(self, script, extra_env=None):
        """Runs the shell script with the copy of /etc over /etc; $D is the test's directory."""
        full = 'set -e\nmount --make-rprivate /\nmount --bind "$ETC" /etc\n' + script
        env = dict(clean_env(), ETC=self.etc, D=self.dir, CLI=CLI, BUGS=BUGS,
                   WORKLOAD=WORKLOAD, MU=MU_INJECTED)
        env.update(extra_env or {})
        r = subprocess.run(["unshare", "-m", "sh", "-c", full], env=env, capture_output=True,
                           text=True, timeout=180)
        if r.returncode != 0 and "unshare failed" in r.stderr:
            self.skipTest("unshare -m is not allowed here: " + r.stderr.strip())
        return r

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def test_programs_started_with_an_empty_environment(self):
        r = self.namespace("""
            "$CLI" debug --system enable -o "guard verbose"
            env -i "$BUGS" rear_overflow_1 > "$D/bugs.out" 2> "$D/bugs.err"
            env -i LIBC_DEBUG_MALLOC_OPTIONS= "$BUGS" rear_overflow_1 > "$D/optout.out" \
                2> "$D/optout.err"
            "$CLI" debug --system enable -o "guard" --log "$D/md.%p.log"
            env -i "$BUGS" rear_overflow_1 > "$D/logged.out" 2> "$D/logged.err"
            "$CLI" debug --system disable
            env -i "$BUGS" rear_overflow_1 > "$D/after.out" 2> "$D/after.err"
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("malloc debug is on for every program started from now on", r.stderr)
        log = lines_of(self.read("bugs.err"), "md_bugs")
        self.assertEqual(log[0], "md_bugs: malloc debug enabled")
        self.assertEqual(log[1], DIVIDER)
        ptr = re.search(r"ptr=0x([0-9a-f]+)", self.read("bugs.out")).group(1)
        self.assertEqual(log[2], "+++ ALLOCATION 0x%s SIZE 100 HAS A CORRUPTED REAR GUARD" % ptr)
        # The environment wins: set, even empty, it turns the setting off for that program.
        self.assertEqual(lines_of(self.read("optout.err"), "md_bugs"), [])
        self.assertIn("ptr=", self.read("optout.out"))
        # --log: one file per process, nothing on the program's stderr.
        self.assertEqual(self.read("logged.err"), "")
        pid = re.search(r"pid=(\d+)", self.read("logged.out")).group(1)
        logged = lines_of(self.read("md.%s.log" % pid), "md_bugs")
        self.assertIn("HAS A CORRUPTED REAR GUARD", "\n".join(logged))
        # Disabled: programs started afterwards run without it.
        self.assertEqual(self.read("after.err"), "")
        self.assertFalse(os.path.exists(os.path.join(self.etc, "ld.so.preload")))
        self.assertFalse(os.path.exists(os.path.join(self.etc, "heapscope")))

    def test_program_filter(self):
        r = self.namespace("""
            "$CLI" debug --system enable -o "guard verbose" --program md_bugs
            env -i "$BUGS" rear_overflow_1 > "$D/bugs.out" 2> "$D/bugs.err"
            env -i sh -c 'echo other' > "$D/other.out" 2> "$D/other.err"
            "$CLI" debug --system status > "$D/status"
            "$CLI" debug --system disable
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("malloc debug is on for the programs named md_bugs", r.stderr)
        bugs_err = self.read("bugs.err")
        self.assertIn("md_bugs: malloc debug enabled", bugs_err)
        self.assertIn("HAS A CORRUPTED REAR GUARD", bugs_err)
        self.assertNotIn("env: malloc debug enabled", bugs_err)  # env ran md_bugs: not it
        self.assertEqual(self.read("other.out"), "other\n")
        self.assertEqual(self.read("other.err"), "")
        self.assertIn("    program: md_bugs\n", self.read("status"))

    def bad_setting(self, text, expected):
        """A setting the shim cannot use: the error once in each process, which runs on
        without malloc debug (its overflow goes unreported)."""
        with open(os.path.join(self.dir, "setting"), "w") as f:
            f.write(text)
        r = self.namespace("""
            "$CLI" debug --system enable -o guard
            cp "$D/setting" /etc/heapscope/malloc_debug.conf
            env -i "$BUGS" rear_overflow_1 > "$D/bugs.out" 2> "$D/bugs.err"
            echo "status=$?" >> "$D/bugs.out"
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("status=0", self.read("bugs.out"))
        self.assertIn("ptr=", self.read("bugs.out"))
        self.assertEqual(lines_of(self.read("bugs.err"), "md_bugs"), expected)

    def test_bad_options_in_the_setting(self):
        self.bad_setting("LIBC_DEBUG_MALLOC_OPTIONS=guard bogus\n",
                         ["md_bugs: unknown option bogus", USAGE_1, mock.ANY])

    def test_malformed_setting(self):
        self.bad_setting("LIBC_DEBUG_MALLOC_OPTIONS=guard\nFOO=bar\n",
                         ["md_bugs: %s:2: unknown name 'FOO' (known: LIBC_DEBUG_MALLOC_OPTIONS, "
                          "LIBC_DEBUG_MALLOC_PROGRAM, HEAPSCOPE_LOG_FILE); malloc debug stays off"
                          % SETTING])
        self.bad_setting("LIBC_DEBUG_MALLOC_OPTIONS=guard\n" + "#" * 9000 + "\n",
                         ["md_bugs: %s is larger than 8192 bytes; malloc debug stays off"
                          % SETTING])

    def test_enable_status_disable_leave_ld_so_preload_as_it_was(self):
        libm = libm_path()
        original = ("%s\n\n  %s" % (libm, libm)).encode()  # a blank line, no final newline
        with open(os.path.join(self.etc, "ld.so.preload"), "wb") as f:
            f.write(original)
        os.chmod(os.path.join(self.etc, "ld.so.preload"), 0o600)
        r = self.namespace("""
            "$CLI" debug --system status > "$D/status.before"
            "$CLI" debug --system enable -o "backtrace leak_track" --log "$D/md.%p.log"
            cp /etc/ld.so.preload "$D/during"
            "$CLI" debug --system status > "$D/status.on"
            "$CLI" debug --system disable
            "$CLI" debug --system status > "$D/status.after"
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        lib = os.path.realpath(os.environ["HS_MALLOC_DEBUG"])
        with open(os.path.join(self.dir, "during"), "rb") as f:
            self.assertEqual(f.read(), lib.encode() + b"\n" + original)
        with open(os.path.join(self.etc, "ld.so.preload"), "rb") as f:
            self.assertEqual(f.read(), original)
        self.assertEqual(os.stat(os.path.join(self.etc, "ld.so.preload")).st_mode & 0o777, 0o600)
        off = ("malloc debug for the whole system: off\n"
               "  /etc/ld.so.preload: no libmalloc_debug.so line\n"
               "  %s: none\n" % SETTING)
        self.assertEqual(self.read("status.before"), off)
        self.assertEqual(self.read("status.after"), off)
        self.assertEqual(self.read("status.on"),
                         "malloc debug for the whole system: on\n"
                         "  /etc/ld.so.preload: %s\n"
                         "  %s:\n"
                         "    options: backtrace leak_track\n"
                         "    program: (every program)\n"
                         "    log:     %s/md.%%p.log\n" % (lib, SETTING, self.dir))
        self.assertEqual(os.listdir(self.dir).count("heapscope"), 0)

    def test_refusals_change_nothing(self):
        fake = os.path.join(self.dir, "fake")
        os.mkdir(fake)
        with open(os.path.join(fake, "libmalloc_debug.so"), "w") as f:
            f.write("not a library\n")
        short = os.path.join(self.dir, "short")
        os.mkdir(short)
        with open(os.environ["HS_MALLOC_DEBUG"], "rb") as f:
            head = f.read(4096)
        with open(os.path.join(short, "libmalloc_debug.so"), "wb") as f:
            f.write(head)  # an ELF header of the right kind, but not a library that loads
        with open(os.path.join(self.etc, "ld.so.preload"), "w") as f:
            f.write(libm_path() + "\n")
        r = self.namespace("""
            cp /etc/ld.so.preload "$D/before"
            for dir in fake short; do
                HEAPSCOPE_LIBDIR="$D/$dir" "$CLI" debug --system enable -o guard \
                    2> "$D/$dir.err" && exit 1
            done
            "$CLI" debug --system enable -o "guard bogus" 2> "$D/bogus.err" && exit 1
            "$CLI" debug --system enable -o guard --log "$D/missing/md.%p.log" \
                2> "$D/nodir.err" && exit 1
            "$CLI" debug --system enable -o guard --log relative.%p.log 2> "$D/rel.err" && exit 1
            "$CLI" debug --system enable 2> "$D/noopt.err" && exit 1
            cmp /etc/ld.so.preload "$D/before"
            test ! -e /etc/heapscope
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("refusing: %s/fake/libmalloc_debug.so is not an ELF file" % self.dir,
                      self.read("fake.err"))
        self.assertIn("%s/short/libmalloc_debug.so does not load in a program" % self.dir,
                      self.read("short.err"))
        self.assertIn("refusing to preload it", self.read("short.err"))
        self.assertIn("heapscope debug: debug: unknown option bogus", self.read("bogus.err"))
        self.assertIn("the log file's directory %s/missing does not exist" % self.dir,
                      self.read("nodir.err"))
        self.assertIn("--log takes an absolute path here", self.read("rel.err"))
        self.assertIn("say which malloc debug options: -o OPTIONS", self.read("noopt.err"))

    def test_heap_dump_of_a_process_under_the_setting(self):
        r = self.namespace("""
            "$CLI" debug --system enable --program hp_workload \
                -o "backtrace backtrace_dump_prefix=$D/heap"
            env -i "$WORKLOAD" serve 60 > "$D/serve.out" &
            until grep -q serving "$D/serve.out"; do sleep 0.1; done
            "$CLI" dumpheap -p $! -o "$D/dump.txt"
            kill -TERM $!
            wait $!
            "$CLI" debug --system disable
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        dump = self.read("dump.txt")
        self.assertTrue(dump.startswith("Android Native Heap Dump v1.2\n"), dump[:200])
        self.assertTrue(dump.endswith("END\n"))
        self.assertIn("serve done checksum_ok=1", self.read("serve.out"))

    def test_leak_check_of_a_daemon_goes_to_the_settings_log(self):
        # A process with no terminal: check_unreachable_on_signal alone from the setting, the
        # reports in the setting's log file, not on the process's stderr; `leaks -p` reads
        # the setting to see that the process answers the check signal.
        r = self.namespace("""
            "$CLI" debug --system enable --program mu_injected -o check_unreachable_on_signal \
                --log "$D/md.%p.log"
            mkfifo "$D/in"
            env -i "$MU" - < "$D/in" > "$D/mu.out" 2> "$D/mu.err" &
            exec 3> "$D/in"
            until grep -q READY "$D/mu.out"; do sleep 0.1; done
            s=0; "$CLI" leaks -p $! > "$D/leaks.out" || s=$?; echo "$s" > "$D/leaks.status"
            exec 3>&-
            wait $!
            echo "pid=$!" >> "$D/mu.out"
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.read("mu.out")
        self.assertIn("\ndone\n", out)
        self.assertEqual(self.read("leaks.status"), "23\n")  # leaks found (issue 15)
        self.assertEqual(self.read("mu.err"), "")
        report = self.read("leaks.out")
        self.assertRegex(report, r"^  \d+ bytes in 4 unreachable allocations\n")
        self.assertIn("  Allocations not tracked: no allocation backtraces", report)
        pid = re.search(r"pid=(\d+)", out).group(1)
        log = self.read("md.%s.log" % pid)
        self.assertRegex(log, r"mu_injected\[%s\] memunreachable: \d+ bytes in 4 allocations "
                         r"unreachable" % pid)

    def test_package_removal_takes_it_off_the_machine(self):
        # The Debian package's prerm runs 'heapscope debug --system disable' on removal (not on
        # upgrade): /etc/ld.so.preload must not keep naming a library that is about to go.
        # /usr/bin/heapscope is the build's command here, through an overlay of /usr/bin.
        extra = os.path.join(self.dir, "bin")
        os.mkdir(extra)
        with open(os.path.join(extra, "heapscope"), "w") as f:
            f.write('#!/bin/sh\nexec "%s" "$@"\n' % CLI)
        os.chmod(os.path.join(extra, "heapscope"), 0o755)
        r = self.namespace("""
            mount -t overlay overlay -o lowerdir="$D/bin":/usr/bin /usr/bin 2> "$D/overlay.err" \
                || { echo "no overlay: $(cat "$D/overlay.err")"; exit 0; }
            "$CLI" debug --system enable -o guard
            sh "$PRERM" upgrade
            cp /etc/ld.so.preload "$D/after.upgrade"
            sh "$PRERM" remove
            test ! -e /etc/ld.so.preload
            test ! -e /etc/heapscope
            sh "$PRERM" remove
        """, {"PRERM": PRERM})
        if r.stdout.startswith("no overlay"):
            self.skipTest("cannot mount an overlay over /usr/bin here: " + r.stdout)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.dir, "after.upgrade")) as f:
            self.assertIn("libmalloc_debug.so", f.read())
        self.assertIn("malloc debug is off for programs started from now on", r.stderr)

    def test_unit_on_a_machine_run_by_systemd(self):
        # Without --root on a machine booted with systemd (/run/systemd/system; here a tmpfs
        # over /run in the namespace), the command runs 'systemctl daemon-reload' (here a
        # stand-in that records its arguments) and says to restart the service.
        fake = os.path.join(self.dir, "fakebin")
        os.mkdir(fake)
        with open(os.path.join(fake, "systemctl"), "w") as f:
            f.write('#!/bin/sh\necho "$@" >> "$D/systemctl.calls"\n')
        os.chmod(os.path.join(fake, "systemctl"), 0o755)
        r = self.namespace("""
            mount -t tmpfs none /run
            mkdir -p /run/systemd/system
            export PATH="$D/fakebin:$PATH"
            "$CLI" debug --unit web -o backtrace
            cp /etc/systemd/system/web.service.d/heapscope-malloc-debug.conf "$D/drop-in"
            "$CLI" debug --unit web --remove
            test ! -e /etc/systemd/system/web.service.d
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.read("systemctl.calls"), "daemon-reload\ndaemon-reload\n")
        self.assertIn("ran 'systemctl daemon-reload'; now restart the service to run it under "
                      "malloc debug: systemctl restart web.service", r.stderr)
        self.assertIn("ran 'systemctl daemon-reload'; now restart the service to run it "
                      "without malloc debug: systemctl restart web.service", r.stderr)
        self.assertIn('Environment="LIBC_DEBUG_MALLOC_OPTIONS=backtrace"\n', self.read("drop-in"))
        self.assertFalse(os.path.exists(os.path.join(self.etc, "systemd/system/web.service.d")))


class Unit(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="hs-md-unit-")
        self.addCleanup(shutil.rmtree, self.root, True)
        os.makedirs(os.path.join(self.root, "var/log/hs"))
        lib = os.path.realpath(os.environ["HS_MALLOC_DEBUG"])
        os.makedirs(os.path.dirname(self.root + lib))
        shutil.copy(lib, self.root + lib)  # the image has the library where the line points
        self.lib = lib

    def cli(self, *args):
        return subprocess.run([CLI, "debug", "--root", self.root] + list(args),
                              capture_output=True, text=True, env=clean_env(), timeout=60)

    def test_drop_in_written_and_removed(self):
        log = '/var/log/hs/web "%p" \\ 100%.log'
        r = self.cli("--unit", "web", "-o", "backtrace leak_track", "--program", "web-worker",
                     "--log", log)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = os.path.join(self.root, "etc/systemd/system/web.service.d")
        with open(os.path.join(d, "heapscope-malloc-debug.conf")) as f:
            text = f.read()
        self.assertEqual(text,
                         "# Runs web.service under heapscope's malloc debug; written by "
                         "'heapscope debug --unit'.\n"
                         "# 'heapscope debug --unit web.service --remove' removes it (then "
                         "systemctl daemon-reload and\n"
                         "# restart the service). A heap dump of the running service:\n"
                         "#   heapscope dumpheap -p $(systemctl show -p MainPID --value "
                         "web.service)\n"
                         "[Service]\n"
                         'Environment="LD_PRELOAD=%s"\n'
                         'Environment="LIBC_DEBUG_MALLOC_OPTIONS=backtrace leak_track"\n'
                         'Environment="LIBC_DEBUG_MALLOC_PROGRAM=web-worker"\n'
                         'Environment="HEAPSCOPE_LOG_FILE=/var/log/hs/web \\"%%%%p\\" \\\\ '
                         '100%%%%.log"\n' % self.lib)
        self.assertIn("restart the service", r.stderr)
        r = self.cli("--unit", "web.service", "--remove")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(d))
        self.assertIn("removed %s/heapscope-malloc-debug.conf" % d, r.stderr)

    def test_system_files_of_an_image_behind_a_link(self):
        # --system with --root, /etc/ld.so.preload a symbolic link (as some images have it):
        # the file it names is edited, the link stays.
        etc = os.path.join(self.root, "etc")
        os.makedirs(etc)
        real = os.path.join(etc, "preload.real")
        with open(real, "w") as f:
            f.write("/lib/other.so\n")
        os.symlink(real, os.path.join(etc, "ld.so.preload"))
        r = self.cli("--system", "enable", "-o", "guard", "--program", "web")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(etc, "ld.so.preload")))
        with open(real) as f:
            self.assertEqual(f.read(), self.lib + "\n/lib/other.so\n")
        with open(os.path.join(etc, "heapscope/malloc_debug.conf")) as f:
            lines = [l for l in f.read().splitlines() if not l.startswith("#")]
        self.assertEqual(lines, ["LIBC_DEBUG_MALLOC_OPTIONS=guard", "LIBC_DEBUG_MALLOC_PROGRAM=web"])
        r = self.cli("--system", "disable")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(etc, "ld.so.preload")))
        with open(real) as f:
            self.assertEqual(f.read(), "/lib/other.so\n")
        # Only our line in it: emptied, and the link kept.
        with open(real, "w") as f:
            f.write("")
        self.assertEqual(self.cli("--system", "enable", "-o", "guard").returncode, 0)
        self.assertEqual(self.cli("--system", "disable").returncode, 0)
        self.assertTrue(os.path.islink(os.path.join(etc, "ld.so.preload")))
        self.assertEqual(os.path.getsize(real), 0)
        self.assertFalse(os.path.exists(os.path.join(etc, "heapscope")))

    def test_refusals(self):
        r = self.cli("--unit", "web.socket", "-o", "backtrace")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--unit takes a service (NAME or NAME.service), not 'web.socket'", r.stderr)
        r = self.cli("--unit", "../x", "-o", "backtrace")
        self.assertEqual(r.returncode, 2)
        self.assertIn("'../x' is not a systemd unit name", r.stderr)
        r = self.cli("--unit", "web")
        self.assertEqual(r.returncode, 2)
        self.assertIn("say which malloc debug options: -o OPTIONS", r.stderr)
        r = self.cli("--unit", "web", "-o", "backtrace\nExecStart=/bin/evil")
        self.assertEqual(r.returncode, 2)
        self.assertIn("the options cannot hold a line break", r.stderr)
        os.unlink(self.root + self.lib)
        r = self.cli("--unit", "web", "-o", "backtrace")
        self.assertEqual(r.returncode, 1)
        self.assertIn("refusing: the library %s is not there" % self.lib, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "etc")))


if __name__ == "__main__":
    unittest.main()
