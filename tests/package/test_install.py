"""The Debian package on this machine: `apt-get install ./build/heapscope_*.deb` (what
package.deb built), then the installed tools at work - heapscope debug, leaks, profile and
report on a small leaking program, a program built with pkg-config against the installed
header and library, the man pages, the completion - then `apt-get remove --purge`, after
which no file the package had (dpkg -L) is left, nor the units' links or the service's data.

It writes to /usr, so it runs only as root (CI is root) and alone (RUN_SERIAL), and it
refuses to run (skipped, status 77, with the reason) when a heapscope package is installed
already or when any file the package holds exists, e.g. from `make install PREFIX=/usr`:
purging would remove those. The purge always runs once the install started.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import pkgtest

SKIP = 77
VERSION = os.environ["HS_VERSION"]
PACKAGE = "heapscope"
STATE_DIR = "/var/lib/heapscope"
SOCKET_LINK = "/etc/systemd/system/sockets.target.wants/heapprofd.socket"
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
# The installed tools see a plain environment: nothing pointing into the build tree.
PLAIN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root"),
             "LC_ALL": "C.UTF-8"}


def run(argv, check=True, env=PLAIN_ENV, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s: status %d\n%s%s" % (argv, r.returncode, r.stdout, r.stderr))
    return r


def skip(reason):
    print("package.install: SKIPPED: " + reason)
    sys.exit(SKIP)


def package_status():
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", PACKAGE],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "not known"


def deb_path():
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    return os.path.join(pkgtest.BUILD, "heapscope_%s_%s.deb" % (VERSION, arch))


def deb_files(deb):
    """The files and links of the .deb (not its directories), as absolute paths."""
    out = run(["dpkg-deb", "-c", deb]).stdout
    return [line.split(None, 5)[5].split(" -> ")[0][1:] for line in out.splitlines()
            if not line.startswith("d")]


def preconditions():
    if os.geteuid() != 0:
        skip("installing a package needs root (CI runs as root)")
    for tool in ("apt-get", "dpkg", "cc", "man", "pkg-config"):
        if shutil.which(tool) is None:
            skip("%s is not installed" % tool)
    deb = deb_path()
    if not os.path.exists(deb):
        raise SystemExit("package.install: %s is missing (package.deb builds it)" % deb)
    status = package_status()
    if status not in ("not known", "un", "pn"):
        skip("refusing: a heapscope package is installed already (dpkg status %r); remove it "
             "with 'dpkg --purge heapscope' to run this test" % status)
    there = [p for p in deb_files(deb) + [STATE_DIR, SOCKET_LINK] if os.path.lexists(p)]
    if there:
        skip("refusing: files the package would own (and its purge remove) exist already: "
             + ", ".join(there[:5]))
    return deb


class Install(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
        self.libdir = "/usr/lib/%s/heapscope" % self.multiarch
        src = os.path.join(pkgtest.SOURCE, "tests", "package")
        self.leaky = os.path.join(self.dir, "leaky")
        run(["cc", "-O0", "-g", "-o", self.leaky, os.path.join(src, "leaky.c")])

    def tearDown(self):
        self.tmp.cleanup()

    def test_install_use_purge(self):
        deb = DEB
        installed = []
        t0 = time.monotonic()
        try:
            run(["apt-get", "install", "-y", "--no-install-recommends",
                 "-o", "DPkg::Lock::Timeout=300", deb], env=APT_ENV)
            print("\napt-get install: %.1f s" % (time.monotonic() - t0))
            installed = run(["dpkg", "-L", PACKAGE]).stdout.split("\n")[:-1]
            self.check_installed(deb, installed)
        finally:
            t1 = time.monotonic()
            purge = run(["apt-get", "remove", "--purge", "-y", "-o", "DPkg::Lock::Timeout=300",
                         PACKAGE], env=APT_ENV, check=False)
            print("apt-get remove --purge: %.1f s" % (time.monotonic() - t1))
        self.assertEqual(purge.returncode, 0, purge.stdout + purge.stderr)
        self.assertIn(package_status(), ("not known", "un", "pn"))
        self.assertGreater(len(installed), 50)
        left = [p for p in installed if os.path.lexists(p) and not os.path.isdir(p)]
        self.assertEqual(left, [], "files left behind")
        left = [p for p in installed if "heapscope" in p and os.path.lexists(p)]
        self.assertEqual(left, [], "heapscope's directories left behind")
        self.assertFalse(os.path.lexists(STATE_DIR), "the service's profiles left behind")
        self.assertFalse(os.path.lexists(SOCKET_LINK), "the enabled socket's link left behind")

    def check_installed(self, deb, installed):
        with self.subTest("dpkg -L lists every file of the .deb"):
            self.assertEqual(set(deb_files(deb)) - set(installed), set())
        with self.subTest("the command"):
            self.assertEqual(run(["sh", "-c", "command -v heapscope"]).stdout, "/usr/bin/heapscope\n")
            self.assertEqual(run(["heapscope", "--version"]).stdout, "heapscope %s\n" % VERSION)
            run(["heapprofd", "--help"])
        with self.subTest("heapscope debug"):
            r = run(["heapscope", "debug", "-o", "backtrace leak_track", "--", self.leaky],
                    cwd=self.dir)
            self.assertEqual(r.stdout, "loaded %s/libmalloc_debug.so\n" % self.libdir)
            self.assertRegex(r.stderr, r"malloc_debug: \+\+\+ leaky leaked block of size 4321 at ")
            self.assertRegex(r.stderr, r"#00  pc [0-9a-f]+  \S+/leaky \(leak\+\d+\)")
        with self.subTest("heapscope leaks"):
            r = run(["heapscope", "leaks", "--", self.leaky], cwd=self.dir)
            self.assertEqual(r.stdout, "loaded %s/libmemunreachable.so\n" % self.libdir)
            self.assertRegex(r.stderr, r"memunreachable: 4321 bytes in 1 allocations? unreachable")
            self.assertRegex(r.stderr, r"memunreachable: +4321 bytes unreachable at [0-9a-f]+\n"
                                       r".*#00  pc [0-9a-f]+  \S+/leaky \(leak\+\d+\)")
        with self.subTest("heapscope profile and report"):
            out = os.path.join(self.dir, "profiles")
            r = run(["heapscope", "profile", "-i", "1", "-o", out, "--", self.leaky])
            self.assertEqual(r.stdout, "loaded %s/libheapprofd.so\n" % self.libdir)
            profiles = glob.glob(os.path.join(out, "leaky.*.final.pb.gz"))
            self.assertEqual(len(profiles), 1, r.stderr)
            r = run(["heapscope", "report", "-q", profiles[0]])
            self.assertRegex(r.stdout, r"4,321 bytes .*\n +leak \(leaky\.c:\d+\)")
        with self.subTest("the C API through pkg-config"):
            flags = run(["pkg-config", "--cflags", "--libs", "heapscope"]).stdout.split()
            exe = os.path.join(self.dir, "mu_user")
            run(["cc", "-O0", "-o", exe, os.path.join(pkgtest.SOURCE, "tests", "package",
                                                      "memunreachable_user.c")] + flags)
            self.assertEqual(run([exe]).stdout, "leaks=1 bytes=64\n")
        with self.subTest("man pages"):
            man_env = dict(PLAIN_ENV, MANPAGER="cat", PAGER="cat", MANWIDTH="80")
            self.assertEqual(run(["man", "-w", "heapscope"]).stdout,
                             "/usr/share/man/man1/heapscope.1.gz\n")
            for args, text in ((["heapscope"], "HEAPSCOPE DEBUG"),
                               (["7", "heapscope-malloc-debug"], "check_unreachable_on_signal"),
                               (["8", "heapprofd"], "--max-rate"),
                               (["3", "NoLeaks"], "GetUnreachableMemory"),
                               (["3", "heapscope_heap_report_free"], "heapscope_heap_register"),
                               (["3", "malloc_iterate"], "get_malloc_leak_info")):
                r = run(["man"] + args, env=man_env)
                self.assertIn(text, r.stdout, args)
            self.assertIn("heapscope (1)", run(["whatis", "heapscope"]).stdout)
        with self.subTest("bash completion"):
            completions = "/usr/share/bash-completion/completions/"
            self.assertEqual(pkgtest.complete("heapscope pro", completions + "heapscope")[0],
                             ["profile"])
            self.assertEqual(pkgtest.complete("heapscope debug -o leak_t",
                                              completions + "heapscope")[0], ["leak_track"])
            self.assertEqual(pkgtest.complete("heapprofd --no-a", completions + "heapprofd")[0],
                             ["--no-adaptive"])
        with self.subTest("systemd units"):
            with open("/usr/lib/systemd/system/heapprofd.service") as f:
                service = f.read()
            exec_start = re.search(r"^ExecStart=(\S+)", service, re.M).group(1)
            self.assertEqual(exec_start, "/usr/bin/heapprofd")
            self.assertTrue(os.access(exec_start, os.X_OK))
            # What a user may do, that removing the package must undo: enable the socket, and
            # let the service write profiles.
            if shutil.which("systemctl"):
                run(["systemctl", "enable", "heapprofd.socket"])
                self.assertTrue(os.path.islink(SOCKET_LINK))
            os.makedirs(os.path.join(STATE_DIR, "profiles"))
            with open(os.path.join(STATE_DIR, "profiles", "prog.1.final.pb.gz"), "w") as f:
                f.write("a profile the service wrote")


if __name__ == "__main__":
    DEB = preconditions()
    unittest.main()
