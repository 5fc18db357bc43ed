"""The layers the build keeps apart: what the preloaded libraries and hs_base may call.

libmalloc_debug.so, libmemunreachable.so and libheapprofd.so run inside every allocation and
signal handler of the program they are loaded into. They link hs_base (src/common) and never
hs_tools (README.md, "Layers"). These tests read the built files, so a link of hs_tools, a
stray call or a compiler that does not pass --as-needed shows here:

- no preloaded library imports a symbol of libdw, libelf, zlib or stdio (`nm -D -u`), nor
  names libdw, libelf or zlib in its NEEDED entries (`readelf -d`);
- no object of hs_base (libhs_base.a) calls any of those, nor a function that allocates
  with malloc (`nm -u`, less what the archive defines itself).

"stdio" here means the FILE streams and the printf/scanf formatting engine: every function
whose name contains "printf" or "scanf" (snprintf and vsnprintf included, and their _chk
forms: POSIX does not make them async-signal-safe, and glibc's formatting engine calls malloc
for positional arguments, wide strings and wide fields; hs_format (format.h) is the
allocation-free replacement the libraries use), the functions that take or return a FILE,
and the stdin/stdout/stderr objects. Not counted: rename() and remove(), which <stdio.h>
declares but which are plain system calls on paths (libmemunreachable.so renames its report
into place).

"Allocates" means the malloc family and the libc functions that return or use malloc'd
memory (strdup, asprintf, realpath, glibc's qsort, which mallocs its merge buffer: sort.h is
the replacement, backtrace and backtrace_symbols, which load libgcc_s). The preloaded
libraries themselves are not held to this list: they define malloc and call glibc's own
(__libc_malloc), and libmemunreachable's public API returns malloc'd strings to its caller.
"""
import os
import re
import subprocess
import unittest

NM = os.environ.get("HS_NM", "nm")
READELF = os.environ.get("HS_READELF", "readelf")
PRELOADED = [p for p in os.environ.get("HS_PRELOADED_LIBS", "").split(":") if p]
BASE_ARCHIVE = os.environ.get("HS_BASE_ARCHIVE", "")

LIBDW_RE = re.compile(r"^(dwfl_|dwarf_|dwelf_)")
LIBELF_RE = re.compile(r"^(elf_|elf32_|elf64_|gelf_)")
ZLIB_RE = re.compile(r"^(inflate|deflate|crc32|adler32|gz[a-z]|zlib|zError$|compress$|"
                     r"compress2$|compressBound$|uncompress|get_crc_table$)")
STDIO_FORMAT_RE = re.compile(r"printf|scanf")
STDIO_NAMES = set("""
    fopen fopen64 fdopen freopen freopen64 fclose fcloseall fflush fflush_unlocked
    fread fread_unlocked __fread_chk fwrite fwrite_unlocked fgets fgets_unlocked __fgets_chk
    gets fputs fputs_unlocked puts fputc fputc_unlocked putc putc_unlocked putchar
    putchar_unlocked putw fgetc fgetc_unlocked getc getc_unlocked getchar getchar_unlocked
    getw ungetc getline getdelim __getdelim fputws fgetws fputwc fgetwc putwc getwc ungetwc
    setvbuf setbuf setbuffer setlinebuf fseek fseeko fseeko64 ftell ftello ftello64 fgetpos
    fgetpos64 fsetpos fsetpos64 rewind fileno fileno_unlocked feof feof_unlocked ferror
    ferror_unlocked clearerr clearerr_unlocked perror popen pclose tmpfile tmpfile64
    open_memstream open_wmemstream fmemopen fopencookie flockfile ftrylockfile funlockfile
    __uflow __underflow __overflow __fpending __freading __fwriting __fsetlocking
    stdin stdout stderr
""".split())
ALLOC_NAMES = set("""
    malloc calloc realloc reallocarray free cfree memalign aligned_alloc posix_memalign
    valloc pvalloc strdup strndup __strdup __strndup wcsdup asprintf vasprintf realpath
    canonicalize_file_name qsort qsort_r backtrace backtrace_symbols scandir glob tempnam
""".split())


def forbidden_in_preloaded(symbol):
    """Why a preloaded library must not import symbol, or None."""
    if LIBDW_RE.match(symbol):
        return "libdw"
    if LIBELF_RE.match(symbol):
        return "libelf"
    if ZLIB_RE.match(symbol):
        return "zlib"
    if (STDIO_FORMAT_RE.search(symbol) or symbol in STDIO_NAMES or symbol.startswith("_IO_")):
        return "stdio"
    return None


def forbidden_in_base(symbol):
    """Why an object of hs_base must not call symbol, or None."""
    why = forbidden_in_preloaded(symbol)
    if why is None and symbol in ALLOC_NAMES:
        why = "malloc"
    return why


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("%s: status %d: %s" % (" ".join(argv), r.returncode, r.stderr))
    return r.stdout


def dynamic_imports(library):
    """The undefined dynamic symbols of library, without their version (malloc@GLIBC_2.2.5)."""
    out = run([NM, "-D", "--undefined-only", library])
    return sorted({line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()})


def needed(library):
    out = run([READELF, "-d", library])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def archive_calls(archive):
    """{object: [symbols it uses that no object of archive defines]}."""
    # Lines of `nm -A`: "libhs_base.a:arena.c.o:0000000000000000 T hs_arena_new" and
    # "libhs_base.a:arena.c.o:                 U memcpy".
    defined = {line.split()[-1]
               for line in run([NM, "-A", "--defined-only", archive]).splitlines()
               if line.strip()}
    calls = {}
    for line in run([NM, "-A", "--undefined-only", archive]).splitlines():
        fields = line.split()
        if not fields or fields[-1] in defined:
            continue
        obj = fields[0].split(":")[1] if fields[0].count(":") >= 2 else fields[0]
        calls.setdefault(obj, []).append(fields[-1])
    return calls


class Classifier(unittest.TestCase):
    """The lists above catch what they must and let the libraries' everyday calls through."""

    def test_forbidden(self):
        for symbol, why in [("dwfl_begin", "libdw"), ("dwarf_getscopes", "libdw"),
                            ("dwelf_elf_gnu_build_id", "libdw"), ("elf_begin", "libelf"),
                            ("gelf_getehdr", "libelf"), ("inflateInit2_", "zlib"),
                            ("deflate", "zlib"), ("crc32", "zlib"), ("gzopen", "zlib"),
                            ("compress2", "zlib"), ("snprintf", "stdio"),
                            ("__snprintf_chk", "stdio"), ("vsnprintf", "stdio"),
                            ("fprintf", "stdio"), ("__isoc99_sscanf", "stdio"),
                            ("fopen64", "stdio"), ("fwrite", "stdio"), ("puts", "stdio"),
                            ("stderr", "stdio"), ("_IO_putc", "stdio")]:
            self.assertEqual(forbidden_in_preloaded(symbol), why, symbol)
        for symbol in ["malloc", "free", "strdup", "qsort", "asprintf", "realpath"]:
            self.assertIsNotNone(forbidden_in_base(symbol), symbol)

    def test_allowed(self):
        for symbol in ["write", "rename", "remove", "strtol", "memcpy", "__libc_malloc",
                       "hs_format", "dlsym", "dl_iterate_phdr", "_ULx86_64_step", "compressor",
                       "elfish", "strerrordesc_np", "sigaction", "mmap"]:
            self.assertIsNone(forbidden_in_base(symbol), symbol)
        self.assertIsNone(forbidden_in_preloaded("strdup"))


class PreloadedLibraries(unittest.TestCase):
    def setUp(self):
        self.assertEqual(len(PRELOADED), 3, "HS_PRELOADED_LIBS: %r" % PRELOADED)

    def test_imports(self):
        bad = []
        for library in PRELOADED:
            for symbol in dynamic_imports(library):
                why = forbidden_in_preloaded(symbol)
                if why:
                    bad.append("%s imports %s (%s)" % (os.path.basename(library), symbol, why))
        self.assertEqual(bad, [], "the preloaded libraries link hs_base only (README.md, "
                         "\"Layers\"):\n  " + "\n  ".join(bad))

    def test_needed(self):
        bad = []
        for library in PRELOADED:
            for entry in needed(library):
                if re.match(r"lib(dw|elf|z)\.so", entry):
                    bad.append("%s needs %s" % (os.path.basename(library), entry))
        self.assertEqual(bad, [], "\n  ".join(bad))


class BaseLibrary(unittest.TestCase):
    def test_calls(self):
        calls = archive_calls(BASE_ARCHIVE)
        self.assertGreater(len(calls), 10, "no objects read from %s" % BASE_ARCHIVE)
        bad = []
        for obj, symbols in sorted(calls.items()):
            for symbol in symbols:
                why = forbidden_in_base(symbol)
                if why:
                    bad.append("%s calls %s (%s)" % (obj, symbol, why))
        self.assertEqual(bad, [], "hs_base must stay allocation- and stdio-free (README.md, "
                         "\"Layers\"):\n  " + "\n  ".join(bad))


if __name__ == "__main__":
    unittest.main()
