"""Helpers for the packaging tests: what the code accepts (the commands' --help, malloc debug's
option table) and a reader for the hand-written man pages (man(7) macros).

The man page and completion tests compare these with what is documented and completed, so
that neither can drift from the code (docs/packaging.md).
"""
import os
import re
import shlex
import subprocess
import tempfile

SOURCE = os.environ.get("HS_SOURCE_DIR", "")
BUILD = os.environ.get("HS_BUILD_DIR", "")
CLI = os.environ.get("HS_CLI", "")
HEAPPROFD = os.environ.get("HS_HEAPPROFD", "")
MD_OPTION_TABLE = os.environ.get("HS_MD_OPTION_TABLE", "")

# An option line of a --help text: "  -o, --options OPTIONS  text", "      --contents  text".
# The value's placeholder is upper case (PID, PID[,PID], S, BYTES); the text is not.
HELP_OPTION_RE = re.compile(r"^\s+(?:(?P<short>-[A-Za-z])(?:,\s*|\s|$))?"
                            r"(?P<long>--[A-Za-z][A-Za-z0-9-]*)?"
                            r"(?:[ =](?P<value>[A-Z][A-Z0-9_,\[\].]*))?(?=\s|$)")


def run_help(argv):
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("%s --help: status %d: %s" % (argv, r.returncode, r.stderr))
    return r.stdout


def help_options(text):
    """The options of a --help text: {option: takes_value}, short and long spellings."""
    options = {}
    for line in text.splitlines():
        m = HELP_OPTION_RE.match(line)
        if not m or not (m.group("short") or m.group("long")):
            continue
        for name in (m.group("short"), m.group("long")):
            if name:
                options[name] = m.group("value") is not None
    return options


def commands():
    """heapscope's subcommands, from the Commands: list of 'heapscope --help'."""
    names, listing = [], False
    for line in run_help([CLI]).splitlines():
        if line.strip() == "Commands:":
            listing = True
        elif listing and not line.strip():
            break
        elif listing:
            names.append(line.split()[0])
    if not names:
        raise AssertionError("'heapscope --help' lists no commands")
    return names


def command_options(command):
    return help_options(run_help([CLI, command]))


def global_options():
    """heapscope's own options: the Options: part of 'heapscope --help'."""
    text = run_help([CLI])
    return help_options(text[text.index("\nOptions:"):])


def heapprofd_options():
    return help_options(run_help([HEAPPROFD]))


class MdOption:
    """One row of malloc debug's option table (tests/package/md_option_table.c)."""

    def __init__(self, line):
        f = line.split("\t")
        self.name, self.alias, self.value = f[0], None if f[1] == "-" else f[1], f[2]
        self.default, self.min, self.max = f[3], f[4], f[5]
        self.default_string = None if f[6] == "-" else f[6]
        self.words = None if f[7] == "-" else f[7].split("|")

    def spellings(self):
        return [self.name] + ([self.alias] if self.alias else [])


def md_options():
    out = subprocess.run([MD_OPTION_TABLE], capture_output=True, text=True, check=True).stdout
    rows = [MdOption(line) for line in out.splitlines()]
    if len(rows) < 20:
        raise AssertionError("malloc debug's option table has only %d rows" % len(rows))
    return rows


# ---- man pages ------------------------------------------------------------------------

ESCAPES = [(r"\(dq", '"'), (r"\(aq", "'"), (r"\(bu", "*"), (r"\(em", "--"), (r"\-", "-"),
           (r"\e", "\\"), (r"\&", ""), (r"\%", ""), (r"\c", "")]
# Macros that alternate fonts between their arguments, which are joined without spaces.
ALTERNATING = {"BR", "RB", "BI", "IB", "IR", "RI"}
FONT_MACROS = ALTERNATING | {"B", "I", "SM", "SB"}


def roff_text(s):
    """The text of roff source: font changes dropped, the special characters used here read."""
    s = re.sub(r"\\f(?:\(..|\[[^]]*\]|.)", "", s)
    for escape, text in ESCAPES:
        s = s.replace(escape, text)
    return s


def macro_args(rest):
    """A macro's arguments: blank-separated, double quotes group ("" is a quote)."""
    args, i = [], 0
    while i < len(rest):
        if rest[i] in " \t":
            i += 1
        elif rest[i] == '"':
            j, arg = i + 1, ""
            while j < len(rest):
                if rest[j] == '"' and rest[j + 1:j + 2] == '"':
                    arg, j = arg + '"', j + 2
                elif rest[j] == '"':
                    break
                else:
                    arg, j = arg + rest[j], j + 1
            args.append(arg)
            i = j + 1
        else:
            j = i
            while j < len(rest) and rest[j] not in " \t":
                j += 1
            args.append(rest[i:j])
            i = j
    return args


class Item:
    """A .TP paragraph: its tag lines (.TP and .TQ) and its body lines."""

    def __init__(self, subsection):
        self.tags, self.body, self.subsection = [], [], subsection

    def body_text(self):
        return " ".join(" ".join(self.body).split())


class Section:
    def __init__(self, name):
        self.name, self.items, self.lines = name, [], []

    def text(self):
        return "\n".join(self.lines)


class ManPage:
    """A man page as sections; each holds its .TP items and every text line (tags, bodies and
    paragraphs alike, one source line each, escapes read)."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="ascii") as f:
            self.source = f.read()
        self.sections = {}
        section, item, want_tag, subsection = None, None, False, None
        for raw in self.source.splitlines():
            line = raw
            if line.startswith(".") or line.startswith("'"):
                name, _, rest = line[1:].partition(" ")
                if name.startswith('\\"'):
                    continue
                if name in ("SH", "SS"):
                    title = roff_text(" ".join(macro_args(rest)))
                    if name == "SH":
                        section = self.sections.setdefault(title, Section(title))
                        subsection = None
                    else:
                        subsection = title
                    item, want_tag = None, False
                    continue
                if name == "TP":
                    item = Item(subsection)
                    section.items.append(item)
                    want_tag = True
                    continue
                if name == "TQ":
                    want_tag = True
                    continue
                if name in ("PP", "LP", "P", "IP"):
                    item, want_tag = None, False
                    continue
                if name not in FONT_MACROS:
                    continue  # layout: .EX .EE .nf .fi .br .RS .RE .nh .ad .nr ...
                args = macro_args(rest)
                text = roff_text(("" if name in ALTERNATING else " ").join(args))
            else:
                text = roff_text(line)
            if section is None:
                continue
            section.lines.append(text)
            if want_tag:
                item.tags.append(text)
                want_tag = False
            elif item is not None:
                item.body.append(text)

    def section(self, name):
        if name not in self.sections:
            raise AssertionError("%s has no section %s (it has %s)"
                                 % (self.path, name, sorted(self.sections)))
        return self.sections[name]

    def names(self):
        """The names of the NAME line, "a, b, c - summary"."""
        line = self.section("NAME").lines[0]
        return [n.strip() for n in line.split(" - ")[0].split(",")]


def tag_options(tag):
    """The option spellings of an option tag: "-o, --options OPTIONS" -> [-o, --options]."""
    return [w for w in re.split(r"[\s,]+", tag) if re.fullmatch(r"--?[A-Za-z][A-Za-z0-9-]*", w)]


# ---- bash completion -------------------------------------------------------------------

COMPLETION = os.path.join(SOURCE, "dist", "bash-completion", "heapscope")


def split_line(line):
    """COMP_WORDS, COMP_CWORD and the text readline completes ($2) when TAB is pressed at the
    end of line, as bash 5 makes them (checked against an interactive bash): blanks separate
    words; a quoted part stays in its word, quote included, and an unclosed quote makes $2 the
    text after it; outside quotes '=' (of COMP_WORDBREAKS) is a word of its own, and $2 is
    what follows it."""
    words, cur, quote = [], "", None
    for ch in line:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur += ch
        elif ch in " \t":
            if cur:
                words.append(cur)
            cur = ""
        elif ch == "=":
            if cur:
                words.append(cur)
            words.append("=")
            cur = ""
        else:
            cur += ch
    if cur or line[-1:] in (" ", "\t"):
        words.append(cur)
    last = words[-1]
    if quote:
        text = last[last.index(quote) + 1:]
    elif last == "=":
        text = ""
    else:
        text = last
    return words, len(words) - 1, text


def complete(line, script=COMPLETION, cwd=None, prelude=""):
    """Completes line (TAB at its end) the way bash does: loads script, finds the function
    'complete -p COMMAND' names, sets COMP_WORDS, COMP_CWORD, COMP_LINE and COMP_POINT and
    calls it with the command, the text to complete and the previous word. Returns COMPREPLY
    and the arguments of each compopt call (compopt, which only works inside a completion
    bash started itself, is replaced by a recorder)."""
    words, cword, text = split_line(line)
    q = shlex.quote
    with tempfile.NamedTemporaryFile("r") as log:
        program = "\n".join([
            "source %s || exit 3" % q(script),
            "compopt() { printf '%%s\\n' \"$*\" >> %s; }" % q(log.name),
            prelude,
            "COMP_WORDS=(%s)" % " ".join(q(w) for w in words),
            "COMP_CWORD=%d" % cword,
            "COMP_LINE=%s" % q(line),
            "COMP_POINT=%d" % len(line),
            "spec=$(complete -p %s) || exit 3" % q(words[0]),
            "func=${spec#*-F }; func=${func%% *}",
            "COMPREPLY=()",
            "$func %s %s %s" % (q(words[0]), q(text), q(words[cword - 1])),
            "((${#COMPREPLY[@]} == 0)) || printf '%s\\n' \"${COMPREPLY[@]}\"",
        ])
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", program],
                           capture_output=True, text=True, cwd=cwd, timeout=60)
        if r.returncode != 0 or r.stderr:
            raise AssertionError("completing %r: status %d, stderr %r"
                                 % (line, r.returncode, r.stderr))
        return r.stdout.splitlines(), log.read().splitlines()


def completion_variable(name, script=COMPLETION):
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                        'source "$0" && printf "%s" "${!1}"', script, name],
                       capture_output=True, text=True, check=True)
    return r.stdout.split()
