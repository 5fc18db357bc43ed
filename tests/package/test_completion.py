"""bash completion (dist/bash-completion/heapscope): sourced in bash and called as bash calls
it on TAB (COMP_WORDS, COMP_CWORD, COMP_LINE, COMP_POINT, the function 'complete -p' names).

Its option lists are written out; these tests hold them to the code: every subcommand of
'heapscope --help', every option of 'heapscope COMMAND --help' and 'heapprofd --help' (and
whether it takes a value), every malloc debug option and alias of the parser's table.
"""
import os
import tempfile
import unittest

import pkgtest
from pkgtest import complete


class LineSplitting(unittest.TestCase):
    """The harness splits lines as an interactive bash 5.2 did (recorded with a completion
    function that printed its arguments)."""

    def test_as_bash_splits(self):
        seen = {
            'x debug -o "guard fi': (["x", "debug", "-o", '"guard fi'], 3, "guard fi"),
            "x debug --options=gu": (["x", "debug", "--options", "=", "gu"], 4, "gu"),
            "x debug --options=": (["x", "debug", "--options", "="], 3, ""),
            "x debug -o 'backtrace_dump_prefix=/tm":
                (["x", "debug", "-o", "'backtrace_dump_prefix=/tm"], 3,
                 "backtrace_dump_prefix=/tm"),
            "x debug -o backtrace_dump_prefix=/tm":
                (["x", "debug", "-o", "backtrace_dump_prefix", "=", "/tm"], 5, "/tm"),
            'x debug -o "guard=3 fi': (["x", "debug", "-o", '"guard=3 fi'], 3, "guard=3 fi"),
            "x debug ": (["x", "debug", ""], 2, ""),
        }
        for line, expected in seen.items():
            self.assertEqual(pkgtest.split_line(line), expected, line)


class NoDrift(unittest.TestCase):
    """The completion offers exactly what the code accepts."""

    def offered(self, line):
        return set(complete(line)[0])

    def test_subcommands(self):
        commands = pkgtest.commands()
        self.assertEqual(set(pkgtest.completion_variable("_heapscope_commands")), set(commands))
        self.assertEqual(self.offered("heapscope "), set(commands) | {"help"})
        self.assertEqual(self.offered("heapscope help "), set(commands))
        self.assertEqual(self.offered("heapscope -"), set(pkgtest.global_options()))

    def check_options(self, prefix, variable, options):
        value = set(pkgtest.completion_variable(variable + "_value_opts"))
        flag = set(pkgtest.completion_variable(variable + "_flag_opts"))
        self.assertEqual(value, {o for o, v in options.items() if v}, "options with a value")
        self.assertEqual(flag, {o for o, v in options.items() if not v}, "options without")
        self.assertEqual(self.offered(prefix + "-"), set(options))

    def test_options_of_every_subcommand(self):
        for command in pkgtest.commands():
            with self.subTest(command=command):
                options = pkgtest.command_options(command)
                self.assertIn("--help", options)
                self.check_options("heapscope %s " % command, "_heapscope_" + command, options)

    def test_options_of_heapprofd(self):
        self.check_options("heapprofd ", "_heapprofd", pkgtest.heapprofd_options())

    def test_malloc_debug_options_after_o(self):
        table = pkgtest.md_options()
        expected = set()
        for o in table:
            for name in o.spellings():
                expected.add(name + ("=" if o.value == "required" else ""))
        self.assertEqual(set(pkgtest.completion_variable("_heapscope_md_options")), expected)
        paths = {n for o in table if o.value == "string" for n in o.spellings()}
        self.assertEqual(set(pkgtest.completion_variable("_heapscope_md_path_options")), paths)
        for command in ("debug", "leaks"):
            for line in ("heapscope %s -o " % command, "heapscope %s --options=" % command):
                with self.subTest(line=line):
                    self.assertEqual(self.offered(line), expected)


class Completes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        for name in ("alpha.txt", "alpine.log", "beta"):
            open(os.path.join(cls.dir, name), "w").close()
        os.mkdir(os.path.join(cls.dir, "alps"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_commands_by_prefix(self):
        self.assertEqual(complete("heapscope d")[0], ["debug", "dumpheap"])
        self.assertEqual(complete("heapscope help l")[0], ["leaks"])
        self.assertEqual(complete("heapscope --v")[0], ["--version"])
        self.assertEqual(complete("heapscope bogus ")[0], [])

    def test_option_names_by_prefix(self):
        self.assertEqual(complete("heapscope debug --o")[0], ["--options"])
        self.assertEqual(complete("heapprofd --max-s")[0], ["--max-stack"])

    def test_malloc_debug_names_in_a_quoted_list(self):
        reply, _ = complete('heapscope debug -o "guard fi')
        self.assertEqual(sorted(reply), ["guard fill", "guard fill_on_alloc", "guard fill_on_free"])
        reply, _ = complete("heapscope leaks -o 'backtrace leak_t")
        self.assertEqual(reply, ["backtrace leak_track"])
        reply, _ = complete("heapscope debug --options=gu")
        self.assertEqual(reply, ["guard"])  # bash replaces only what follows '='

    def test_a_required_value_gets_its_equal_sign_and_no_space(self):
        reply, opts = complete("heapscope leaks -o backtrace_si")
        self.assertEqual(reply, ["backtrace_size="])
        self.assertIn("-o nospace", opts)
        reply, opts = complete("heapscope debug -o bt_")
        self.assertIn("bt_full", reply)
        self.assertIn("-o nospace", opts)  # bt_sz= and others are among them

    def test_a_path_option_value_completes_files(self):
        d = self.dir
        reply, opts = complete("heapscope debug -o backtrace_dump_prefix=%s/alp" % d)
        self.assertEqual(sorted(reply), [d + "/alpha.txt", d + "/alpine.log", d + "/alps"])
        self.assertIn("-o filenames", opts)
        reply, _ = complete("heapscope debug -o 'guard record_allocs_file=%s/be" % d)
        self.assertEqual(reply, ["guard record_allocs_file=%s/beta" % d])
        reply, _ = complete('heapscope debug -o "bt_dmp_pre=%s/be' % d)
        self.assertEqual(reply, ["bt_dmp_pre=%s/beta" % d])
        self.assertEqual(complete("heapscope debug -o guard=1")[0], [])  # a number

    def test_option_values(self):
        self.assertEqual(complete("heapscope report --format ")[0], ["text", "html", "folded", "pprof"])
        self.assertEqual(complete("heapscope report -f p")[0], ["pprof"])
        self.assertEqual(complete("heapscope report --value=alloc_")[0],
                         ["alloc_space", "alloc_objects"])
        self.assertEqual(complete("heapscope leaks --limit ")[0], [])
        self.assertEqual(sorted(complete("heapscope debug -l al", cwd=self.dir)[0]),
                         ["alpha.txt", "alpine.log", "alps"])
        self.assertEqual(complete("heapscope profile -o al", cwd=self.dir)[0], ["alps"])
        self.assertEqual(complete("heapprofd -o al", cwd=self.dir)[0], ["alps"])
        self.assertEqual(sorted(complete("heapscope report --top 3 al", cwd=self.dir)[0]),
                         ["alpha.txt", "alpine.log", "alps"])

    def test_processes(self):
        pid = str(os.getpid())
        self.assertIn(pid, complete("heapscope leaks -p " + pid[:-1])[0])
        self.assertIn(pid, complete("heapscope dumpheap --pid=" + pid)[0])
        with open("/proc/self/comm") as f:
            comm = f.read().strip()
        # The name of this test's process; the bash that completes has its own.
        reply = complete("heapscope profile -n " + comm[:2])[0]
        self.assertIn(comm, reply)
        self.assertEqual(len(reply), len(set(reply)), "each name once")

    def test_option_values_are_skipped_before_the_program(self):
        self.assertIn("--contents", complete("heapscope leaks --limit 5 --c")[0])
        self.assertIn("--contents", complete("heapscope leaks --limit=5 --c")[0])
        self.assertIn("--log", complete('heapscope debug -o "guard fill" --l')[0])

    def test_the_program_and_its_arguments(self):
        reply, opts = complete("heapscope debug -o guard -- l")
        self.assertIn("ls", reply)
        reply, opts = complete("heapscope debug ./prog -")
        self.assertEqual(reply, [])  # the program's options, not heapscope's: default
        self.assertIn("-o bashdefault -o default", opts)
        reply, _ = complete("heapscope profile -i 1 ./prog --o")
        self.assertEqual(reply, [])
        reply, _ = complete("heapscope dumpheap --p")
        self.assertEqual(reply, ["--pid"])

    def test_the_program_goes_to_bash_completion_when_loaded(self):
        # bash-completion's _command_offset N completes from COMP_WORDS[N] on as a command
        # line of its own; N counts the words bash split at '='.
        stub = '_command_offset() { COMPREPLY=("offset $1"); }'
        self.assertEqual(complete("heapscope debug -o guard=1 -- ls -", prelude=stub)[0],
                         ["offset 7"])
        self.assertEqual(complete("heapscope leaks --limit=3 ./prog --x", prelude=stub)[0],
                         ["offset 5"])


if __name__ == "__main__":
    unittest.main()
