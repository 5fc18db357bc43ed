"""The man pages: each renders without a warning, and each says what the code does.

Rendering: groff -ww (every warning) and man --warnings on the configured pages, as installed
(before compression); any warning fails. Content: the pages are written by hand, so these
tests hold them to the code (docs/packaging.md): every malloc debug option of the parser's
table with its value, default and range, every message the shim logs, every signal it sets
up and variable it reads; every heapscope subcommand and every option its --help lists;
heapprofd's options; every function of the public headers in a section 3 page.
"""
import glob
import os
import re
import subprocess
import unittest

import pkgtest

MAN_DIR = os.environ["HS_MAN_DIR"]
SOURCES = sorted(glob.glob(os.path.join(pkgtest.SOURCE, "man", "*.in")))
RENDER_ENV = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80", MANPAGER="cat", PAGER="cat")


def read(path):
    with open(path) as f:
        return f.read()


def page(name):
    return pkgtest.ManPage(os.path.join(MAN_DIR, name))


def c_strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


C_STRING = r'"(?:[^"\\\n]|\\.)*"'
LOG_CALL_RE = re.compile(r"\b(?:hs_log|hs_md_error)\s*\(\s*((?:" + C_STRING + r"\s*)+|[A-Z_][A-Z0-9_]*)")
CONVERSION_RE = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t)?[diouxXcsp]")


def c_string_value(literals):
    """The value of adjacent C string literals."""
    parts = re.findall(C_STRING, literals)
    return "".join(bytes(p[1:-1], "ascii").decode("unicode_escape") for p in parts)


def malloc_debug_formats():
    """Every format string malloc debug logs, with the file it is in."""
    defines = {}
    for path in glob.glob(os.path.join(pkgtest.SOURCE, "src", "malloc_debug", "*.h")):
        for m in re.finditer(r"#define\s+([A-Z_][A-Z0-9_]*)\s+(" + C_STRING + r")",
                             read(path)):
            defines[m.group(1)] = c_string_value(m.group(2))
    formats = []
    for path in sorted(glob.glob(os.path.join(pkgtest.SOURCE, "src", "malloc_debug", "*.c"))):
        for m in LOG_CALL_RE.finditer(c_strip_comments(read(path))):
            arg = m.group(1)
            if arg.startswith('"'):
                formats.append((os.path.basename(path), c_string_value(arg)))
            elif arg in defines:
                formats.append((os.path.basename(path), defines[arg]))
            else:
                raise AssertionError("%s logs %s, which is not a string macro of "
                                     "src/malloc_debug/*.h" % (path, arg))
    return formats


def format_pieces(fmt):
    """The fixed text of a printf format, between its conversions, spaces normalized."""
    pieces = CONVERSION_RE.split(fmt.replace("%%", "%"))
    return [" ".join(p.split()) for p in pieces if p.strip()]


def line_has_pieces(line, pieces):
    line = " ".join(line.split())
    at = 0
    for p in pieces:
        at = line.find(p, at)
        if at < 0:
            return False
        at += len(p)
    return True


class Rendering(unittest.TestCase):
    def test_every_page_is_configured_and_ascii(self):
        self.assertGreaterEqual(len(SOURCES), 6)
        for src in SOURCES:
            name = os.path.basename(src)[:-3]
            with self.subTest(page=name):
                with open(src, "rb") as f:
                    data = f.read()
                bad = [i for i, b in enumerate(data) if b > 127]
                self.assertEqual(bad, [], "%s: non-ASCII bytes (use roff escapes)" % src)
                built = os.path.join(MAN_DIR, name)
                self.assertTrue(os.path.exists(built), "%s is not in man/CMakeLists.txt" % name)
                with open(built) as f:
                    text = f.read()
                self.assertEqual(re.findall(r"@[A-Za-z_]+@", text), [],
                                 "%s: placeholder left unconfigured" % built)

    def test_groff_renders_without_warnings(self):
        for src in SOURCES:
            built = os.path.join(MAN_DIR, os.path.basename(src)[:-3])
            with self.subTest(page=built):
                r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", "-z", built],
                                   capture_output=True, text=True, env=RENDER_ENV)
                self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_man_renders_without_warnings(self):
        for src in SOURCES:
            built = os.path.join(MAN_DIR, os.path.basename(src)[:-3])
            with self.subTest(page=built):
                r = subprocess.run(["man", "--warnings", "-l", built], capture_output=True,
                                   text=True, env=RENDER_ENV)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertIn("NAME", r.stdout)
                self.assertIn("SEE ALSO", r.stdout)

    def test_mandb_reads_every_name(self):
        """lexgrog parses NAME as mandb does for whatis and apropos: every name is there."""
        for src in SOURCES:
            built = os.path.join(MAN_DIR, os.path.basename(src)[:-3])
            with self.subTest(page=built):
                r = subprocess.run(["lexgrog", built], capture_output=True, text=True,
                                   env=RENDER_ENV)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                names = re.findall(r'^[^:]+: "(\S+) - ', r.stdout, re.M)
                self.assertEqual(names, pkgtest.ManPage(built).names())


class MallocDebugPage(unittest.TestCase):
    """heapscope-malloc-debug(7) against src/malloc_debug."""

    @classmethod
    def setUpClass(cls):
        cls.page = page("heapscope-malloc-debug.7")

    def expected_tag(self, o):
        if o.value == "word":
            return o.name + "[=" + "|".join(o.words) + "]"
        value = {"none": "", "optional": "[=N]", "required": "=N", "string": "[=PATH]"}[o.value]
        return ", ".join(s + value for s in o.spellings())

    def expected_facts(self, o):
        """The sentence every option's paragraph ends with, from the table's row."""
        if o.value == "none":
            return "takes no value."
        if o.value == "string":  # an empty default string: the option is off without a path
            return "default %s." % o.default_string if o.default_string else "no default."
        if o.value == "word":
            return "one of %s; default %s." % (", ".join(o.words), o.default_string)
        if o.value == "required":
            return "n from %s to %s, no default (the value is required)." % (o.min, o.max)
        return "n from %s to %s, default %s" % (o.min, o.max, o.default)

    def test_every_option_of_the_table_with_its_value_default_and_range(self):
        items = {i.tags[0]: i for i in self.page.section("OPTIONS").items}
        table = pkgtest.md_options()
        for o in table:
            with self.subTest(option=o.name):
                tag = self.expected_tag(o)
                self.assertIn(tag, items, "no paragraph tagged %r in OPTIONS" % tag)
                self.assertIn(self.expected_facts(o).lower(), items[tag].body_text().lower())
        stale = set(items) - {self.expected_tag(o) for o in table}
        self.assertEqual(stale, set(), "options in the page that the parser does not have")

    def test_every_message_the_shim_logs(self):
        lines = self.page.section("MESSAGES").lines
        formats = malloc_debug_formats()
        self.assertGreater(len(formats), 40)
        for path, fmt in formats:
            pieces = format_pieces(fmt)
            if not pieces:
                continue  # "%s": a message formatted elsewhere
            with self.subTest(message=fmt, file=path):
                self.assertTrue(any(line_has_pieces(l, pieces) for l in lines),
                                "MESSAGES does not show %r (%s)" % (fmt, path))

    def test_every_signal_the_shim_sets_up(self):
        offsets = set()
        for path in glob.glob(os.path.join(pkgtest.SOURCE, "src", "malloc_debug", "*.c")):
            src = c_strip_comments(read(path))
            offsets |= {int(n) for n in re.findall(r"SIGRTMAX\s*-\s*(\d+)", src)}
        self.assertGreaterEqual(len(offsets), 5)
        tags = {t for i in self.page.section("SIGNALS").items for t in i.tags}
        expected = {"SIGRTMAX-%d (%d)" % (n, 64 - n) for n in offsets}
        self.assertEqual(tags, expected)

    def test_every_variable_the_shim_reads(self):
        names = set()
        for pattern in ("src/malloc_debug/*.c", "src/common/*.c"):
            for path in glob.glob(os.path.join(pkgtest.SOURCE, pattern)):
                names |= set(re.findall(r'\b(?:hs_env_get|getenv)\s*\(\s*"([A-Z_]+)"',
                                        read(path)))
        self.assertIn("LIBC_DEBUG_MALLOC_OPTIONS", names)
        tags = {t for i in self.page.section("ENVIRONMENT").items for t in i.tags}
        self.assertEqual(names - tags, set())


class HeapscopePage(unittest.TestCase):
    """heapscope(1) against the command's --help."""

    @classmethod
    def setUpClass(cls):
        cls.page = page("heapscope.1")

    def documented_options(self, section):
        return {o for i in self.page.section(section).items for t in i.tags
                for o in pkgtest.tag_options(t)}

    def test_a_section_per_subcommand(self):
        described = {t for i in self.page.section("DESCRIPTION").items for t in i.tags}
        for command in pkgtest.commands():
            with self.subTest(command=command):
                self.page.section("HEAPSCOPE " + command.upper())
                self.assertIn(command, described)
                self.assertIn("heapscope " + command, self.page.section("SYNOPSIS").text())

    def test_every_option_of_every_subcommand(self):
        for command in pkgtest.commands():
            with self.subTest(command=command):
                options = set(pkgtest.command_options(command))
                self.assertIn("--help", options)
                self.assertEqual(self.documented_options("HEAPSCOPE " + command.upper()), options)

    def test_global_options(self):
        self.assertEqual(self.documented_options("OPTIONS"), set(pkgtest.global_options()))


class HeapprofdPage(unittest.TestCase):
    def test_every_option(self):
        p = page("heapprofd.8")
        documented = {o for i in p.section("OPTIONS").items for t in i.tags
                      for o in pkgtest.tag_options(t)}
        self.assertEqual(documented, set(pkgtest.heapprofd_options()))

    def test_every_signal(self):
        help_text = pkgtest.run_help([pkgtest.HEAPPROFD])
        signals = set(re.findall(r"\bSIG[A-Z0-9]+", help_text[help_text.index("Signals:"):]))
        tags = " ".join(t for i in page("heapprofd.8").section("SIGNALS").items for t in i.tags)
        self.assertEqual(signals - set(re.findall(r"SIG[A-Z0-9]+", tags)), set())


class CApiPages(unittest.TestCase):
    """Every function of include/heapscope/*.h has a section 3 page (one of its NAME names,
    installed as a link), and every name there is a function of the headers."""

    def header_functions(self):
        names = {}
        for path in glob.glob(os.path.join(pkgtest.SOURCE, "include", "heapscope", "*.h")):
            src = c_strip_comments(read(path))
            for line in src.splitlines():
                if not line or line[0] in " \t#}" or line.startswith(("typedef", "struct", "enum")):
                    continue
                m = re.search(r"([A-Za-z_]\w*)\s*\(", line)
                if m and not m.group(1).endswith("_"):  # a trailing _: the headers' own helpers
                    names[m.group(1)] = os.path.basename(path)
        return names

    def test_every_header_function_has_a_page(self):
        functions = self.header_functions()
        self.assertIn("GetUnreachableMemory", functions)
        self.assertIn("heapscope_heap_register", functions)
        self.assertIn("get_malloc_leak_info", functions)
        documented = {}
        for src in SOURCES:
            name = os.path.basename(src)[:-3]
            if name.endswith(".3"):
                p = page(name)
                synopsis = p.section("SYNOPSIS").text()
                for n in p.names():
                    documented[n] = name
                    if n in functions:
                        self.assertIn(n + "(", synopsis, "%s: %s not in SYNOPSIS" % (name, n))
                    if n + ".3" != name:
                        link = os.path.join(MAN_DIR, "gz", n + ".3.gz")
                        self.assertEqual(os.readlink(link), name + ".gz")
        self.assertEqual(set(functions) - set(documented), set(), "functions without a page")
        pages = {os.path.basename(s)[:-5] for s in SOURCES if s.endswith(".3.in")}
        self.assertEqual(set(documented) - set(functions) - pages, set(),
                         "names in NAME lines that no header declares")


if __name__ == "__main__":
    unittest.main()
