"""Helpers for heapscope's end-to-end tests: run a program under the shim, split the log.

Log lines look like "<program>[<pid>] malloc_debug: <body>"; reports are compared on their
bodies, with the program name and pid checked separately.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ["HS_BUILD_DIR"]
SHIM = os.environ["HS_MALLOC_DEBUG"]
BUGS = os.environ["HS_MD_BUGS"]
STRESS = os.environ["HS_MD_STRESS"]
CLI = os.environ["HS_CLI"]

DIVIDER = "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***"
LINE_RE = re.compile(r"^(?P<prog>[^\[\s]+)\[(?P<pid>\d+)\] malloc_debug: (?P<body>.*)$")
FRAME_RE = re.compile(r"^          #(?P<num>\d\d)  pc (?P<pc>[0-9a-f]{16})  (?P<path>\S+)"
                      r"(?: \((?P<sym>[^+()]+)\+(?P<off>\d+)\))?$")
USAGE = [
    "For malloc debug option descriptions go to:",
]


class Run:
    """The result of one program run: stdout values, log bodies, exit status."""

    def __init__(self, proc, prog):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.values = {}
        for line in proc.stdout.splitlines():
            for word in line.split():
                if "=" in word:
                    k, v = word.split("=", 1)
                    self.values[k] = v
        self.log = []       # bodies of malloc_debug lines
        self.other = []     # stderr lines that are not malloc_debug lines
        for line in proc.stderr.splitlines():
            m = LINE_RE.match(line)
            if m:
                if m.group("prog") != prog:
                    raise AssertionError("log line names program %r, expected %r: %s"
                                         % (m.group("prog"), prog, line))
                if "pid" in self.values and m.group("pid") != self.values["pid"]:
                    raise AssertionError("log line pid %s, program pid %s"
                                         % (m.group("pid"), self.values["pid"]))
                self.log.append(m.group("body"))
            else:
                self.other.append(line)


def run(args, options=None, env_extra=None, preload=True, timeout=120):
    env = dict(os.environ)
    env.pop("LIBC_DEBUG_MALLOC_OPTIONS", None)
    env.pop("LIBC_DEBUG_MALLOC_PROGRAM", None)
    env.pop("HEAPSCOPE_LOG_FILE", None)
    if preload:
        env["LD_PRELOAD"] = SHIM
    if options is not None:
        env["LIBC_DEBUG_MALLOC_OPTIONS"] = options
    env.update(env_extra or {})
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    return Run(proc, os.path.basename(args[0]))


def without_leak_report(log, prog):
    """The log bodies less leak_track's report at exit: its summary by stack, its block lines
    and their backtraces."""
    p = re.escape(prog)
    leak = re.compile(r"\+\+\+ (%s leaked \d+ blocks? \(|\d+ blocks? of sizes? |%s: the |"
                      r"%s leaked block of size |\d+ more stacks? |%s: \d+ more leaked|"
                      r"\d+ blocks? \(\d+ bytes\) without)" % (p, p, p, p))
    return [l for l in log if not leak.match(l)
            and l != "Backtrace at time of allocation:" and not l.startswith("  ")]


def clean_env():
    """This environment without heapscope's variables or a preload: for a tool under test
    that must set up its own."""
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("HEAPSCOPE_") or k in ("LD_PRELOAD", "LIBC_DEBUG_MALLOC_OPTIONS"):
            del env[k]
    return env


# Traces thread argv[1] (PTRACE_SEIZE: it runs on), passes every signal on, says "tracing".
TRACER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
tid = int(sys.argv[1])
assert libc.ptrace(0x4206, tid, None, None) == 0  # PTRACE_SEIZE
print("tracing", flush=True)
while True:
    _, status = os.waitpid(tid, 0x40000000)  # __WALL
    if not os.WIFSTOPPED(status):
        break
    sig = os.WSTOPSIG(status)
    libc.ptrace(7, tid, None, sig if sig != 5 else 0)  # PTRACE_CONT
"""


def start_tracer(tid, directory, name="python3"):
    """A process that traces thread tid (a debugger that lets it run), its command name
    `name` (its interpreter linked under that name in directory). Kill it to let go."""
    exe = os.path.join(directory, name)
    if not os.path.exists(exe):
        os.symlink(os.path.realpath(sys.executable), exe)
    tracer = subprocess.Popen([exe, "-c", TRACER, str(tid)], stdout=subprocess.PIPE, text=True)
    line = tracer.stdout.readline().strip()
    if line != "tracing":
        tracer.kill()
        tracer.wait()
        raise AssertionError("the tracer did not start: %r" % line)
    return tracer


def stop_tracer(tracer):
    tracer.kill()  # the tracee is let go
    tracer.wait()
    tracer.stdout.close()


def per_site(profile, value):
    """{leaf function: summed value} of a profile."""
    out = subprocess.run([CLI, "report", "-q", "--value", value, "-f", "folded", profile],
                         capture_output=True, text=True, check=True).stdout
    sites = {}
    for line in out.splitlines():
        stack, _, number = line.rpartition(" ")
        leaf = stack.split(";")[-1].split(" (")[0]
        sites[leaf] = sites.get(leaf, 0) + int(number)
    return sites


def split_backtrace(testcase, lines, function=None):
    """Checks a block of frame lines and returns the symbols. With `function`, the first
    frame must be in that function of the test program."""
    testcase.assertTrue(lines, "no frames")
    syms = []
    for i, line in enumerate(lines):
        m = FRAME_RE.match(line)
        testcase.assertIsNotNone(m, "not a frame line: %r" % line)
        testcase.assertEqual(int(m.group("num")), i)
        syms.append(m.group("sym"))
        if i == 0 and function:
            testcase.assertEqual(m.group("path"), os.path.realpath(BUGS), line)
            testcase.assertEqual(m.group("sym"), function, line)
    return syms


class Case(unittest.TestCase):
    def assert_report(self, log, head, function, start=0, alloc_function=None):
        """Asserts that log[start:] begins with one report: divider, the `head` lines
        exactly, "Backtrace at time of failure:", frames (first in `function`), then, when
        alloc_function is given, "Backtrace at time of allocation:" and frames (first in
        alloc_function), divider. Returns the index after the report."""
        i = start
        self.assertEqual(log[i], DIVIDER, "\n".join(log))
        i += 1
        for expected in head:
            self.assertEqual(log[i], expected, "\n".join(log))
            i += 1
        self.assertEqual(log[i], "Backtrace at time of failure:", "\n".join(log))
        i += 1
        sections = [[]]
        while i < len(log) and log[i] != DIVIDER:
            if log[i] == "Backtrace at time of allocation:":
                sections.append([])
            else:
                sections[-1].append(log[i])
            i += 1
        self.assertEqual(len(sections), 2 if alloc_function else 1, "\n".join(log))
        split_backtrace(self, sections[0], function)
        if alloc_function:
            split_backtrace(self, sections[1], alloc_function)
        self.assertEqual(log[i], DIVIDER)
        return i + 1


SIZES_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs",
                            "report_sizes.c")


def build_sizes(directory):
    """Compiles programs/report_sizes.c as `cc -g -O0` from a copy under directory/src, named
    by its absolute path as build systems do (so the debug info names that directory);
    returns the binary's path."""
    src = os.path.join(directory, "src")
    os.makedirs(src, exist_ok=True)
    with open(SIZES_SOURCE) as f, open(os.path.join(src, "report_sizes.c"), "w") as out:
        out.write(f.read())
    binary = os.path.join(directory, "report_sizes")
    subprocess.run(["cc", "-g", "-O0", "-o", binary, os.path.join(src, "report_sizes.c")],
                   cwd=directory, check=True, capture_output=True, timeout=120)
    return binary


def sizes_dump(binary, grow, shrink, gone, prefix):
    """Runs report_sizes under the shim with a heap dump at exit (prefix: a path of its own);
    returns the dump's path."""
    env = clean_env()
    env["LD_PRELOAD"] = SHIM
    env["LIBC_DEBUG_MALLOC_OPTIONS"] = ("backtrace backtrace_dump_on_exit "
                                        "backtrace_dump_prefix=" + prefix)
    proc = subprocess.run([binary, str(grow), str(shrink), str(gone)], env=env,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError("report_sizes failed (%d): %s" % (proc.returncode, proc.stderr))
    dumps = glob.glob(glob.escape(prefix) + ".*.exit.txt")
    if len(dumps) != 1:
        raise AssertionError("expected one dump at %s: %s" % (prefix, dumps))
    return dumps[0]


def chromium_dom(path, fragment=""):
    """The DOM of the page at path once its scripts ran, from headless Chromium (Debian's
    chromium package, which `make deps` installs)."""
    chromium = "/usr/bin/chromium"
    if not os.access(chromium, os.X_OK):
        raise AssertionError("%s is missing: this test needs Debian's chromium package "
                             "(make deps installs it; or apt-get install chromium)" % chromium)
    profile = tempfile.mkdtemp(prefix="hs-chromium-")
    try:
        url = "file://" + path + ("#" + fragment if fragment else "")
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--no-first-run", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync",
                            "--disable-dev-shm-usage", "--user-data-dir=" + profile,
                            "--virtual-time-budget=5000", "--dump-dom", url],
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("chromium failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
        return r.stdout.decode("utf-8")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def checked_radios(dom):
    """{radio group: value} of the checked radio buttons of a page's DOM."""
    out = {}
    for tag in re.findall(r"<input [^>]*>", dom):
        if 'type="radio"' in tag and re.search(r"\bchecked\b", tag):
            group = re.search(r'name="([^"]*)"', tag).group(1)
            out[group] = re.search(r'value="([^"]*)"', tag).group(1)
    return out
