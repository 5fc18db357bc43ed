"""`make package`: scripts/package.sh builds heapscope_VERSION_ARCH.deb into the build directory,
and the package holds what it must, where Debian wants it, with Depends computed by
dpkg-shlibdeps. Needs no root (test_install.py installs it).
"""
import glob
import gzip
import os
import re
import subprocess
import unittest

import pkgtest

VERSION = os.environ["HS_VERSION"]


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kw).stdout


class Deb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for old in glob.glob(os.path.join(pkgtest.BUILD, "heapscope_*.deb")):
            os.unlink(old)
        r = subprocess.run([os.path.join(pkgtest.SOURCE, "scripts", "package.sh"), pkgtest.BUILD,
                            "2"], capture_output=True, text=True, timeout=840)
        if r.returncode != 0:
            raise AssertionError("scripts/package.sh failed:\n" + r.stdout[-3000:] + r.stderr)
        cls.arch = run(["dpkg", "--print-architecture"]).strip()
        cls.multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
        cls.deb = os.path.join(pkgtest.BUILD, "heapscope_%s_%s.deb" % (VERSION, cls.arch))
        cls.fields = {}
        for line in run(["dpkg-deb", "-f", cls.deb]).splitlines():
            if not line.startswith(" "):
                key, _, value = line.partition(": ")
                cls.fields[key] = value
        cls.entries = {}  # path -> (mode string, link target or None)
        for line in run(["dpkg-deb", "-c", cls.deb]).splitlines():
            f = line.split(None, 5)
            path, _, target = f[5].partition(" -> ")
            cls.entries[path[1:].rstrip("/") or "/"] = (f[0], target or None)
        cls.unpacked = os.path.join(pkgtest.BUILD, "deb-contents")
        subprocess.run(["rm", "-rf", cls.unpacked], check=True)
        run(["dpkg-deb", "-x", cls.deb, cls.unpacked])

    def files(self):
        return {p for p, (mode, _) in self.entries.items() if not mode.startswith("d")}

    def test_the_deb_is_where_make_package_puts_it(self):
        self.assertEqual(glob.glob(os.path.join(pkgtest.BUILD, "heapscope_*.deb")), [self.deb])

    def test_control_fields(self):
        self.assertEqual(self.fields["Package"], "heapscope")
        self.assertEqual(self.fields["Version"], VERSION)
        self.assertEqual(self.fields["Architecture"], self.arch)
        self.assertEqual(self.fields["Section"], "devel")
        self.assertTrue(self.fields["Description"].startswith("native-memory tools"))
        self.assertEqual(self.fields["Suggests"], "bash-completion")

    def test_depends_names_the_package_of_every_library_linked(self):
        """Depends is what dpkg-shlibdeps computes: the package of each DT_NEEDED library of
        each ELF file, with a version."""
        depends = {d.split()[0]: d for d in self.fields["Depends"].split(", ")}
        needed = set()
        for path in self.files():
            full = os.path.join(self.unpacked, path.lstrip("/"))
            if os.path.islink(full) or "ELF" not in run(["file", "-b", full]):
                continue
            needed |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]",
                                     run(["readelf", "-d", full])))
        self.assertIn("libunwind.so.8", needed)
        for lib in needed:
            owner = run(["dpkg", "-S", "*/%s/%s" % (self.multiarch, lib)]).split(":")[0]
            with self.subTest(library=lib):
                self.assertIn(owner, depends, "Depends: %s" % self.fields["Depends"])
        self.assertRegex(depends["libc6"], r"^libc6 \(>= 2\.\d+\)$")

    def test_contents(self):
        ma = self.multiarch
        libdir = "/usr/lib/%s/heapscope" % ma
        headers = {"/usr/include/heapscope/" + os.path.basename(h) for h in
                   glob.glob(os.path.join(pkgtest.SOURCE, "include", "heapscope", "*.h"))}
        expected = {
            "/usr/bin/heapscope", "/usr/bin/heapprofd",
            libdir + "/libmalloc_debug.so", libdir + "/libmalloc_debug_symbols.so",
            libdir + "/libmemunreachable.so", libdir + "/libheapprofd.so",
            "/usr/lib/%s/pkgconfig/heapscope.pc" % ma,
            "/usr/lib/systemd/system/heapprofd.service", "/usr/lib/systemd/system/heapprofd.socket",
            "/usr/share/bash-completion/completions/heapscope",
            "/usr/share/bash-completion/completions/heapprofd",
            "/usr/share/doc/heapscope/README.md",
        } | headers
        for src in glob.glob(os.path.join(pkgtest.SOURCE, "man", "*.in")):
            name = os.path.basename(src)[:-3]
            section = name[-1]
            page = pkgtest.ManPage(os.path.join(pkgtest.BUILD, "man", name))
            for n in page.names():
                expected.add("/usr/share/man/man%s/%s.%s.gz" % (section, n, section))
        files = self.files()
        self.assertEqual(expected - files, set(), "missing from the package")
        allowed = ("/usr/bin/heapscope", "/usr/bin/heapprofd", "/usr/include/heapscope/",
                   libdir + "/", "/usr/lib/%s/pkgconfig/heapscope.pc" % ma,
                   "/usr/lib/systemd/system/heapprofd.", "/usr/share/man/man",
                   "/usr/share/bash-completion/completions/heap", "/usr/share/doc/heapscope/")
        self.assertEqual({f for f in files if not f.startswith(allowed)}, set(),
                         "files outside heapscope's places")

    def test_links(self):
        self.assertEqual(self.entries["/usr/share/bash-completion/completions/heapprofd"][1],
                         "heapscope")
        self.assertEqual(self.entries["/usr/share/man/man3/NoLeaks.3.gz"][1],
                         "libmemunreachable.3.gz")

    def test_installed_paths_are_compiled_in(self):
        root = self.unpacked
        libdir = "/usr/lib/%s/heapscope" % self.multiarch
        self.assertIn(libdir.encode(), read(os.path.join(root, "usr/bin/heapscope"), "rb"))
        service = read(os.path.join(root, "usr/lib/systemd/system/heapprofd.service"))
        self.assertIn("ExecStart=/usr/bin/heapprofd ", service)
        with gzip.open(os.path.join(root, "usr/share/man/man7/heapscope-malloc-debug.7.gz"),
                       "rt") as f:
            page = f.read()
        self.assertIn(libdir + "/libmalloc_debug.so", page)
        self.assertNotIn("/usr/local", page)

    def test_man_pages_are_compressed_reproducibly(self):
        for path in glob.glob(os.path.join(self.unpacked, "usr/share/man/man*/*.gz")):
            if os.path.islink(path):
                continue
            with open(path, "rb") as f:
                header = f.read(10)
            with self.subTest(page=path):
                self.assertEqual(header[:3], b"\x1f\x8b\x08")
                self.assertEqual(header[3], 0, "no file name stored (gzip -n)")
                self.assertEqual(header[4:8], b"\0\0\0\0", "no time stamp (gzip -n)")

    def test_binaries_are_stripped(self):
        for path in ["usr/bin/heapscope", "usr/bin/heapprofd"] + glob.glob(
                os.path.join(self.unpacked, "usr/lib/*/heapscope/*.so")):
            full = os.path.join(self.unpacked, path)
            with self.subTest(file=path):
                self.assertIn(", stripped", run(["file", "-b", full]))

    def test_maintainer_scripts(self):
        control = os.path.join(pkgtest.BUILD, "deb-control")
        subprocess.run(["rm", "-rf", control], check=True)
        run(["dpkg-deb", "-e", self.deb, control])
        for script in ("postinst", "prerm", "postrm"):
            with self.subTest(script=script):
                path = os.path.join(control, script)
                self.assertTrue(os.access(path, os.X_OK))
                run(["sh", "-n", path])


if __name__ == "__main__":
    unittest.main()
