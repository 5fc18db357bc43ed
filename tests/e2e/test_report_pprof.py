"""End-to-end: heapscope's pprof profiles opened with Go's pprof (`go tool pprof`, from Debian's
golang-go, which `make deps` installs for the tests).

Profiles: the profiler's own (`heapscope profile`), and `heapscope report -o X.pb.gz` of a heap
dump, of the profiler's profile, of two dumps merged and of a diff of two dumps. pprof reads
each with -raw, -top and -traces, alone and merged with another one given on the same command
line, and must say nothing on stderr (no "Main binary filename not available", no other word
about mappings or symbols), see the period type the inputs had, and a mapping for every
location. pprof runs with HOME and PPROF_TMPDIR in a temporary directory, on local files only.
"""
import html
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from e2e import CLI, build_sizes, checked_radios, chromium_dom, clean_env, sizes_dump

WORKLOAD = os.environ["HS_HP_WORKLOAD"]


def find_go():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    if not os.access(go, os.X_OK):
        raise AssertionError("go is missing: this test needs Debian's golang-go package "
                             "(make deps installs it; or apt-get install golang-go)")
    return go


def report(*args):
    proc = subprocess.run([CLI, "report", "-q"] + list(args), capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise AssertionError("heapscope report %s: exit %d: %s"
                             % (" ".join(args), proc.returncode, proc.stderr))
    return proc.stdout


class Raw:
    """`go tool pprof -raw` output: header fields, samples, locations and mappings."""

    def __init__(self, text):
        self.text = text
        self.fields = {}
        self.samples = []    # (values, location ids)
        self.locations = {}  # id: (mapping id or None, [line text, ...])
        self.mappings = {}   # id: (file, build id)
        section = None
        last = None
        for line in text.splitlines():
            if line in ("Samples:", "Locations", "Mappings"):
                section = line.rstrip(":")
                continue
            if section is None:
                key, _, value = line.partition(": ")
                self.fields[key] = value
            elif section == "Samples":
                if ":" in line and not line.endswith("]"):
                    values, _, ids = line.partition(":")
                    self.samples.append(([int(v) for v in values.split()],
                                         [int(i) for i in ids.split()]))
            elif section == "Locations":
                m = re.match(r"^ +(\d+): 0x[0-9a-f]+ (?:M=(\d+) )?(.*)$", line)
                if m:
                    last = int(m.group(1))
                    mapping = int(m.group(2)) if m.group(2) else None
                    self.locations[last] = (mapping, [m.group(3)])
                else:  # a caller of an inlined function at the same address
                    self.locations[last][1].append(line.strip())
            elif section == "Mappings":
                m = re.match(r"^(\d+): 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S*) ?(\S*)", line)
                if m:
                    self.mappings[int(m.group(1))] = (m.group(2), m.group(3))

    def mapping_files(self):
        return sorted(os.path.basename(f) for f, _ in self.mappings.values())


class GoPprof(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.go = find_go()
        cls.tmp = tempfile.mkdtemp(prefix="hs-report-pprof-")
        home = os.path.join(cls.tmp, "home")
        os.makedirs(os.path.join(home, "pprof"))
        cls.env = clean_env()
        cls.env.update(HOME=home, PPROF_TMPDIR=os.path.join(home, "pprof"),
                       PPROF_BINARY_PATH=os.path.join(home, "binaries"), GOPROXY="off",
                       GOFLAGS="", GOTOOLCHAIN="local", GOCACHE=os.path.join(home, "gocache"))

        # The profiler's profile of a program with known call sites, every byte sampled.
        out = os.path.join(cls.tmp, "profile")
        proc = subprocess.run([CLI, "profile", "-q", "-i", "1", "-o", out, "--", WORKLOAD,
                               "known"], capture_output=True, text=True, env=clean_env(),
                              timeout=300)
        if proc.returncode != 0:
            raise AssertionError("heapscope profile: %s" % proc.stderr)
        finals = [f for f in os.listdir(out) if f.endswith(".final.pb.gz")]
        assert len(finals) == 1, finals
        cls.profile = os.path.join(out, finals[0])

        # Two runs of one program: grow() and shrink() in both, gone() only in the first.
        binary = build_sizes(os.path.join(cls.tmp, "build"))
        cls.dump_a = sizes_dump(binary, 1000, 5000, 700, os.path.join(cls.tmp, "a"))
        cls.dump_b = sizes_dump(binary, 3000, 2000, 0, os.path.join(cls.tmp, "b"))

        cls.out = {}
        for name, args in (("dump", [cls.dump_a]),
                           ("reexport", [cls.profile]),
                           ("merged", [cls.dump_a, cls.dump_b]),
                           ("diff", ["--diff", cls.dump_a, cls.dump_b])):
            path = os.path.join(cls.tmp, name + ".pb.gz")
            report("-o", path, *args)
            cls.out[name] = path

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pprof(self, option, *profiles):
        """Runs go tool pprof OPTION PROFILES...; returns stdout, asserting that it succeeded
        and printed nothing on stderr."""
        proc = subprocess.run([self.go, "tool", "pprof", option] + list(profiles),
                              capture_output=True, text=True, env=self.env, cwd=self.tmp,
                              timeout=120)
        command = "go tool pprof %s %s" % (option, " ".join(map(os.path.basename, profiles)))
        self.assertEqual(proc.returncode, 0, "%s: %s" % (command, proc.stderr))
        self.assertNotIn("binary filename", proc.stderr, command)
        self.assertNotIn("apping", proc.stderr, command)
        self.assertEqual(proc.stderr, "", command)
        return proc.stdout

    def check_all_commands(self, *profiles):
        """-raw, -top and -traces succeed quietly; every location has a mapping with a file;
        returns the -raw output."""
        raw = Raw(self.pprof("-raw", *profiles))
        self.assertTrue(raw.locations, raw.text)
        for loc, (mapping, lines) in raw.locations.items():
            self.assertIsNotNone(mapping, "location %d has no mapping:\n%s" % (loc, raw.text))
            self.assertIn(mapping, raw.mappings)
            self.assertTrue(raw.mappings[mapping][0], "mapping %d has no file" % mapping)
        self.pprof("-top", *profiles)
        self.pprof("-traces", *profiles)
        return raw

    def total(self, top):
        """The total of a -top output ("Showing nodes accounting for X, 100% of TOTAL")."""
        m = re.search(r"of (\S+) total", top)
        self.assertIsNotNone(m, top)
        return m.group(1)

    # ---- The profiler's own profile ----

    def test_profiler_output(self):
        raw = self.check_all_commands(self.profile)
        self.assertEqual(raw.fields["PeriodType"], "space bytes")
        self.assertEqual(raw.fields["Period"], "1")
        self.assertIn("hp_workload", raw.mapping_files())

    # ---- heapscope report -o X.pb.gz ----

    def test_dump(self):
        raw = self.check_all_commands(self.out["dump"])
        # A heap dump holds every allocation: a period of one byte.
        self.assertEqual(raw.fields["PeriodType"], "space bytes")
        self.assertEqual(raw.fields["Period"], "1")
        self.assertEqual(raw.mapping_files(), ["libc.so.6", "report_sizes"])
        for file, build_id in raw.mappings.values():
            self.assertRegex(build_id, r"^[0-9a-f]{40}$", file)
        self.assertEqual(sorted(v[-1] for v, _ in raw.samples), [700, 1000, 5000])

    def test_reexported_profile(self):
        raw = self.check_all_commands(self.out["reexport"])
        original = Raw(self.pprof("-raw", self.profile))
        self.assertEqual(raw.fields["PeriodType"], original.fields["PeriodType"])
        self.assertEqual(raw.fields["Period"], original.fields["Period"])
        self.assertEqual(raw.mapping_files(), original.mapping_files())
        self.assertEqual(self.total(self.pprof("-top", self.out["reexport"])),
                         self.total(self.pprof("-top", self.profile)))

    def test_merged_dumps(self):
        raw = self.check_all_commands(self.out["merged"])
        self.assertEqual(raw.fields["PeriodType"], "space bytes")
        # Both runs' program and libc; pprof merges the mappings of one file and build.
        self.assertEqual(raw.mapping_files(), ["libc.so.6", "report_sizes"])
        self.assertEqual(sum(v[-1] for v, _ in raw.samples), 6700 + 5000)

    def test_diff(self):
        raw = self.check_all_commands(self.out["diff"])
        self.assertEqual(raw.fields["PeriodType"], "space bytes")
        self.assertEqual(raw.mapping_files(), ["libc.so.6", "report_sizes"])
        # gone() only in the base: its stack (the base's locations) shrank by 700.
        traces = self.pprof("-traces", self.out["diff"])
        self.assertRegex(traces, r"-700B +hold\n +gone\n")
        self.assertEqual(sorted(v[-1] for v, _ in raw.samples), [-3000, -700, 2000])

    def test_value_is_the_default_sample_type(self):
        path = os.path.join(self.tmp, "alloc.pb.gz")
        report("--value", "alloc_objects", "-o", path, self.profile)
        header = [l for l in self.pprof("-raw", path).splitlines() if "/count" in l][0]
        self.assertEqual(header.split(), ["alloc_objects/count[dflt]", "alloc_space/bytes",
                                          "inuse_objects/count", "inuse_space/bytes"])
        self.assertIn("inuse_space/bytes[dflt]", self.pprof("-raw", self.out["reexport"]))

    # ---- The HTML flame graph of the profiler's profile ----

    def test_html_opens_on_the_value_asked(self):
        pages, doms = {}, {}
        for value in ("inuse_space", "alloc_space", "alloc_objects"):
            path = os.path.join(self.tmp, value + ".html")
            report("--value", value, "-o", path, self.profile)
            with open(path) as f:
                pages[value] = f.read()
            doms[value] = chromium_dom(path)
        self.assertTrue(pages["alloc_space"] != pages["inuse_space"], "the same page")
        self.assertIn('"value":"alloc_bytes"', pages["alloc_space"])
        self.assertIn('"value":"alloc_count"', pages["alloc_objects"])
        self.assertEqual(checked_radios(doms["inuse_space"]),
                         {"hs-unit": "bytes", "hs-kind": "inuse"})
        self.assertEqual(checked_radios(doms["alloc_space"]),
                         {"hs-unit": "bytes", "hs-kind": "alloc"})
        self.assertEqual(checked_radios(doms["alloc_objects"]),
                         {"hs-unit": "count", "hs-kind": "alloc"})
        self.assertRegex(doms["alloc_space"], r'<div id="hs-total">Total: [^<]* allocated bytes;')
        self.assertRegex(doms["inuse_space"], r'<div id="hs-total">Total: [^<]* in-use bytes;')

    def test_html_subtitle_is_whole(self):
        """The profile's description (the profiler's statistics, over 600 characters) is in
        the page's subtitle whole, a line per line, as the text report prints it."""
        path = os.path.join(self.tmp, "whole.html")
        report("-o", path, self.profile)
        with open(path) as f:
            page = f.read()
        m = re.search(r'<div class="hs-sub" id="hs-subtitle">(.*?)</div>', page, re.S)
        subtitle = html.unescape(m.group(1)).splitlines()
        text = report(self.profile).splitlines()
        header = text[1:text.index([l for l in text if l.startswith("  In use: ")][0])]
        self.assertGreater(sum(len(l) for l in header), 600)
        self.assertEqual([l.strip() for l in subtitle[:-1]], [l.strip() for l in header])
        self.assertRegex(subtitle[-1], r"^[\d,]+ bytes in use in [\d,]+ allocations$")
        self.assertIn(".hs-sub { white-space: pre-line; }", page)

    # ---- Merging on pprof's command line ----

    def test_merge_with_profiler_output(self):
        for option in ("-raw", "-top", "-traces"):
            self.pprof(option, self.profile, self.out["reexport"])
        raw = self.check_all_commands(self.profile, self.out["reexport"])
        self.assertEqual(raw.fields["PeriodType"], "space bytes")
        alone = Raw(self.pprof("-raw", self.profile))
        self.assertEqual(sum(v[-1] for v, _ in raw.samples),
                         2 * sum(v[-1] for v, _ in alone.samples))

    def test_merge_report_outputs(self):
        raw = self.check_all_commands(self.out["dump"], self.out["merged"], self.out["diff"])
        self.assertEqual(sum(v[-1] for v, _ in raw.samples), 6700 + 11700 + (-1700))


if __name__ == "__main__":
    unittest.main()
