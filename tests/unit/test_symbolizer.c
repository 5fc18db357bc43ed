/* test_symbolizer.c: symbolization with elfutils (src/common/symbolizer.c).
 *
 * Fixtures (tests/unit/symbolizer_tests.cmake): symbolizer_fixture.c built as libsymfix.so
 * (linked here), a non-PIE executable (both stripped, debug info in FILE.debug found through
 * .gnu_debuglink) and a PIE linked with -z noseparate-code. The fixture records return
 * addresses of calls made at known lines, in a static function, in two levels of
 * always_inline functions and in a function with a C++ mangled name.
 *
 * - This process: the DSO through /proc/self/maps (names, static functions from the debug
 *   file, file:line, inlined frames with the callers' lines, rel_pc against the dynamic
 *   linker's load bias, function offsets, build-id), cross-checked with binutils addr2line
 *   when installed; libc symbols against dlsym.
 * - Executables: non-PIE (ET_EXEC, separate-code) and PIE, through their printed maps text
 *   and through /proc/<pid>/maps of a live child.
 * - Load bias from the executable mapping alone (-z separate-code puts text at offset 0x1000),
 *   and for an object mapped twice.
 * - Separate debug files by build-id (ROOT/.build-id/xx/yyyy.debug), by debuglink under a
 *   root (ROOT/<dir>/NAME), a mismatching debug file rejected, no debug file; a sysroot.
 * - Mapping rules: unknown addresses, bad arguments, overlapping mappings, redeclaration.
 * - Hostile files: nonexistent, directory, device, FIFO, non-ELF, every kind of truncation of
 *   the object and of its debug file, corrupted debug files.
 * - debuginfod is never loaded (ctest sets DEBUGINFOD_URLS to an unroutable address).
 * - Speed: 200k and 3.2M lookups over 3k distinct pcs; the figures are printed.
 */
#define _GNU_SOURCE
#include "check.h"
#include "proc_maps.h"
#include "symbolizer.h"
#include "symbolizer_fixture.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <link.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXF HS_SYMBOLIZE_MAX_FRAMES

/* ---- Helpers ---- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        *len = n;
    return buf;
}

static bool write_whole(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static bool copy_file(const char *from, const char *to)
{
    size_t len;
    char *d = read_whole(from, &len);
    bool ok = d && write_whole(to, d, len);
    free(d);
    return ok;
}

static void mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(tmp, 0755);
        *p = '/';
    }
    mkdir(tmp, 0755);
}

static void rm_rf(const char *path)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", path);
}

/* Whether an ELF file has a section of that name. */
static bool has_section(const char *path, const char *name)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    bool found = false;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
        for (Elf_Scn *scn = elf_nextscn(e, NULL); scn && !found; scn = elf_nextscn(e, scn)) {
            GElf_Shdr sh;
            const char *n;
            if (gelf_getshdr(scn, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)))
                found = strcmp(n, name) == 0;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return found;
}

static int elf_type_of(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int t = -1;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    if (e && gelf_getehdr(e, &eh))
        t = eh.e_type;
    if (e)
        elf_end(e);
    close(fd);
    return t;
}

/* ---- What a fixture instance recorded ---- */

struct fix_info {
    uintptr_t bias, pc_static, pc_inner, pc_run, pc_mangled, addr_static, addr_outer;
    int line_static, line_inner, line_call_inner, line_call_middle, line_run, line_mangled;
};

static void fix_info_self(struct fix_info *fi)
{
    Dl_info info;
    struct link_map *lm = NULL;
    memset(fi, 0, sizeof(*fi));
    if (dladdr1((void *)&symfix_run, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm)
        fi->bias = (uintptr_t)lm->l_addr;
    fi->pc_static = symfix_pc_static;
    fi->pc_inner = symfix_pc_inner;
    fi->pc_run = symfix_pc_run;
    fi->pc_mangled = symfix_pc_mangled;
    fi->addr_static = symfix_addr_static;
    fi->addr_outer = symfix_addr_outer;
    fi->line_static = symfix_line_static;
    fi->line_inner = symfix_line_inner;
    fi->line_call_inner = symfix_line_call_inner;
    fi->line_call_middle = symfix_line_call_middle;
    fi->line_run = symfix_line_run;
    fi->line_mangled = symfix_line_mangled;
}

/* Parses one "key value" line of the fixture executable's output. */
static void fix_info_parse(struct fix_info *fi, const char *line)
{
    char key[64];
    char val[64];
    if (sscanf(line, "%63s %63s", key, val) != 2)
        return;
    uintptr_t hex = (uintptr_t)strtoull(val, NULL, 16);
    int dec = atoi(val);
    static const struct {
        const char *key;
        size_t off;
    } hexes[] = {
        {"bias", offsetof(struct fix_info, bias)},
        {"pc_static", offsetof(struct fix_info, pc_static)},
        {"pc_inner", offsetof(struct fix_info, pc_inner)},
        {"pc_run", offsetof(struct fix_info, pc_run)},
        {"pc_mangled", offsetof(struct fix_info, pc_mangled)},
        {"addr_static", offsetof(struct fix_info, addr_static)},
        {"addr_outer", offsetof(struct fix_info, addr_outer)},
    };
    static const struct {
        const char *key;
        size_t off;
    } decs[] = {
        {"line_static", offsetof(struct fix_info, line_static)},
        {"line_inner", offsetof(struct fix_info, line_inner)},
        {"line_call_inner", offsetof(struct fix_info, line_call_inner)},
        {"line_call_middle", offsetof(struct fix_info, line_call_middle)},
        {"line_run", offsetof(struct fix_info, line_run)},
        {"line_mangled", offsetof(struct fix_info, line_mangled)},
    };
    for (size_t i = 0; i < sizeof(hexes) / sizeof(hexes[0]); i++)
        if (strcmp(key, hexes[i].key) == 0)
            memcpy((char *)fi + hexes[i].off, &hex, sizeof(hex));
    for (size_t i = 0; i < sizeof(decs) / sizeof(decs[0]); i++)
        if (strcmp(key, decs[i].key) == 0)
            memcpy((char *)fi + decs[i].off, &dec, sizeof(dec));
}

/* ---- The checks every fixture instance must pass ---- */

/* with_debug: the debug info is reachable (else only exported symbols can be known). */
static void check_fixture(struct hs_symbolizer *s, const struct fix_info *fi, const char *map_path,
                          bool with_debug)
{
    struct hs_frame_info fr[MAXF];
    const char *src = base_name(HS_SYMFIX_SRC);

    /* Static function, through the separate debug file's .symtab and DWARF. */
    size_t n = hs_symbolize(s, fi->pc_static, 1, fr, MAXF);
    if (CHECK_EQ(n, 1)) {
        CHECK_STREQ(fr[0].map_path, map_path);
        CHECK_EQ(fr[0].rel_pc, fi->pc_static - fi->bias);
        CHECK_EQ(strlen(fr[0].build_id), 40);
        CHECK(!fr[0].inlined);
        if (with_debug) {
            CHECK_STREQ(fr[0].function, "fix_static_fn");
            CHECK(fr[0].demangled == fr[0].function);
            CHECK_EQ(fr[0].function_offset, fi->pc_static - fi->addr_static);
            CHECK_STREQ(base_name(fr[0].file), src);
            CHECK_EQ(fr[0].line, fi->line_static);
        } else {
            CHECK(strcmp(fr[0].function, "fix_static_fn") != 0);
            CHECK_EQ(fr[0].line, 0);
            CHECK_STREQ(fr[0].file, "");
        }
    }

    /* Two levels of inlining: fix_inner in fix_middle in fix_outer. */
    n = hs_symbolize(s, fi->pc_inner, 1, fr, MAXF);
    if (with_debug && CHECK_EQ(n, 3)) {
        CHECK_STREQ(fr[0].function, "fix_inner");
        CHECK_EQ(fr[0].line, fi->line_inner);
        CHECK(fr[0].inlined);
        CHECK_EQ(fr[0].function_offset, 0);
        CHECK_STREQ(fr[1].function, "fix_middle");
        CHECK_EQ(fr[1].line, fi->line_call_inner);
        CHECK(fr[1].inlined);
        CHECK_STREQ(fr[2].function, "fix_outer");
        CHECK_EQ(fr[2].line, fi->line_call_middle);
        CHECK(!fr[2].inlined);
        CHECK_EQ(fr[2].function_offset, fi->pc_inner - fi->addr_outer);
        for (size_t i = 0; i < 3; i++) {
            CHECK_STREQ(base_name(fr[i].file), src);
            CHECK_EQ(fr[i].rel_pc, fi->pc_inner - fi->bias);
            CHECK_STREQ(fr[i].map_path, map_path);
        }
        /* Fewer slots: the innermost ones and the real function. */
        n = hs_symbolize(s, fi->pc_inner, 1, fr, 1);
        if (CHECK_EQ(n, 1)) {
            CHECK_STREQ(fr[0].function, "fix_outer");
            CHECK_EQ(fr[0].line, fi->line_call_middle);
        }
        n = hs_symbolize(s, fi->pc_inner, 1, fr, 2);
        if (CHECK_EQ(n, 2)) {
            CHECK_STREQ(fr[0].function, "fix_inner");
            CHECK_STREQ(fr[1].function, "fix_outer");
        }
    } else if (!with_debug) {
        CHECK_EQ(n, 1);
    }

    /* An exported function: known even without the debug file. */
    n = hs_symbolize(s, fi->pc_run, 1, fr, MAXF);
    if (CHECK_EQ(n, 1)) {
        CHECK_STREQ(fr[0].function, "symfix_run");
        if (with_debug)
            CHECK_EQ(fr[0].line, fi->line_run);
    }

    /* Not a return address: the entry of fix_static_fn itself. */
    n = hs_symbolize(s, fi->addr_static, 0, fr, MAXF);
    if (with_debug && CHECK_EQ(n, 1)) {
        CHECK_STREQ(fr[0].function, "fix_static_fn");
        CHECK_EQ(fr[0].function_offset, 0);
        CHECK_EQ(fr[0].rel_pc, fi->addr_static - fi->bias);
        CHECK(fr[0].line > 0 && (int)fr[0].line < fi->line_static);
    }

    /* A mangled name, demangled when the C++ runtime can be found. */
    n = hs_symbolize(s, fi->pc_mangled, 1, fr, MAXF);
    if (with_debug && CHECK_EQ(n, 1)) {
        CHECK_STREQ(fr[0].function, "_ZN6symfix7mangledEv");
        CHECK_EQ(fr[0].line, fi->line_mangled);
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            h = dlopen("libstdc++.so.6", RTLD_LAZY);
        if (h)
            CHECK_STREQ(fr[0].demangled, "symfix::mangled()");
        else
            printf("note: libstdc++.so.6 not found, demangling not checked\n");
    }
}

/* ---- addr2line cross-check ---- */

/* Runs binutils addr2line -f -i on (file, vaddr); fills up to max (function, line) pairs.
 * Returns how many, or -1 if addr2line could not be run. */
static int addr2line(const char *file, uintptr_t vaddr, char fn[][128], unsigned *lines, int max)
{
    if (system("command -v addr2line >/dev/null 2>&1") != 0)
        return -1;
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "addr2line -f -i -e '%s' 0x%" PRIxPTR, file, vaddr);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int n = 0;
    char a[512], b[512];
    while (n < max && fgets(a, sizeof(a), p) && fgets(b, sizeof(b), p)) {
        a[strcspn(a, "\n")] = '\0';
        snprintf(fn[n], 128, "%.127s", a);
        char *colon = strrchr(b, ':');
        lines[n] = colon ? (unsigned)atoi(colon + 1) : 0;
        n++;
    }
    pclose(p);
    return n;
}

static void check_against_addr2line(struct hs_symbolizer *s, const char *file, uintptr_t pc)
{
    struct hs_frame_info fr[MAXF];
    size_t n = hs_symbolize(s, pc, 1, fr, MAXF);
    if (!CHECK(n >= 1))
        return;
    char fn[8][128];
    unsigned lines[8];
    int m = addr2line(file, fr[0].rel_pc - 1, fn, lines, 8);
    if (m < 0) {
        printf("note: addr2line not installed, cross-check skipped\n");
        return;
    }
    if (!CHECK_EQ(m, n))
        return;
    for (int i = 0; i < m; i++) {
        CHECK_STREQ(fr[i].function, fn[i]);
        CHECK_EQ(fr[i].line, lines[i]);
    }
}

/* ---- This process ---- */

static char g_lib_path[PATH_MAX];

static void test_self(void)
{
    check_context("self: libsymfix.so via /proc/self/maps");
    CHECK(realpath(HS_SYMFIX_LIB, g_lib_path) != NULL);
    /* The fixture really is stripped: static functions and lines need the .debug file. */
    CHECK(!has_section(g_lib_path, ".symtab"));
    CHECK(!has_section(g_lib_path, ".debug_info"));
    CHECK(has_section(g_lib_path, ".gnu_debuglink"));

    struct fix_info fi;
    fix_info_self(&fi);
    CHECK(fi.bias != 0);
    struct hs_symbolizer *s = hs_symbolizer_new(NULL);
    if (!CHECK(s != NULL))
        return;
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 0), 0);
    check_fixture(s, &fi, g_lib_path, true);
    /* Same answers from the cache. */
    check_fixture(s, &fi, g_lib_path, true);
    check_context("self: addr2line");
    check_against_addr2line(s, g_lib_path, fi.pc_inner);
    check_against_addr2line(s, g_lib_path, fi.pc_static);
    check_against_addr2line(s, g_lib_path, fi.pc_run);

    check_context("self: demangling off");
    hs_symbolizer_free(s);
    s = hs_symbolizer_new(NULL);
    hs_symbolizer_set_demangle(s, false);
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 0), 0);
    struct hs_frame_info fr[MAXF];
    if (CHECK_EQ(hs_symbolize(s, fi.pc_mangled, 1, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].function, "_ZN6symfix7mangledEv");
        CHECK(fr[0].demangled == fr[0].function);
    }

    check_context("self: libc");
    static const char *const names[] = {"getenv", "qsort", "fopen", "pthread_create"};
    /* libc's own definitions (not interceptors of a sanitizer runtime, say). */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    CHECK(libc != NULL);
    for (size_t i = 0; libc && i < sizeof(names) / sizeof(names[0]); i++) {
        void *addr = dlsym(libc, names[i]);
        if (!CHECK(addr != NULL))
            continue;
        Dl_info di;
        CHECK(dladdr(addr, &di) != 0);
        for (uintptr_t delta = 0; delta <= 5; delta += 5) {
            size_t n = hs_symbolize(s, (uintptr_t)addr + delta, 0, fr, MAXF);
            if (!CHECK_EQ(n, 1))
                continue;
            check_context(names[i]);
            CHECK(strstr(fr[0].map_path, "libc.so") != NULL);
            CHECK(fr[0].function[0] != '\0');
            CHECK_EQ(fr[0].function_offset, delta);
            /* The name found is a symbol at that very address. */
            void *back = dlsym(libc, fr[0].function);
            CHECK(back == addr);
            CHECK_EQ(fr[0].rel_pc, (uintptr_t)addr + delta - (uintptr_t)di.dli_fbase);
        }
    }

    if (libc)
        dlclose(libc);

    check_context("self: unknown addresses");
    CHECK_EQ(hs_symbolize(s, 0x10, 0, fr, MAXF), 0);
    CHECK_EQ(hs_symbolize(s, UINTPTR_MAX - 16, 1, fr, MAXF), 0);
    CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, 0), 0);
    CHECK_EQ(hs_symbolize(NULL, fi.pc_static, 1, fr, MAXF), 0);
    CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, NULL, MAXF), 0);
    hs_symbolizer_free(s);
    hs_symbolizer_free(NULL);
}

/* ---- Fixture executables ---- */

static void test_exe_output(const char *exe, bool stripped, int want_type)
{
    char real[PATH_MAX];
    check_context(exe);
    if (!CHECK(realpath(exe, real) != NULL))
        return;
    CHECK_EQ(elf_type_of(real), want_type);
    CHECK_EQ(has_section(real, ".debug_info"), !stripped);
    FILE *p = popen(real, "r");
    if (!CHECK(p != NULL))
        return;
    struct fix_info fi = {0};
    char line[8192];
    size_t cap = 1 << 16, len = 0;
    char *maps = malloc(cap);
    bool in_maps = false;
    while (fgets(line, sizeof(line), p)) {
        if (!in_maps) {
            if (strcmp(line, "MAPS\n") == 0)
                in_maps = true;
            else
                fix_info_parse(&fi, line);
            continue;
        }
        size_t l = strlen(line);
        if (len + l > cap)
            maps = realloc(maps, cap = 2 * (len + l));
        memcpy(maps + len, line, l);
        len += l;
    }
    CHECK_EQ(pclose(p), 0);
    CHECK(in_maps);
    if (want_type == ET_EXEC)
        CHECK_EQ(fi.bias, 0);
    struct hs_symbolizer *s = hs_symbolizer_new(NULL);
    CHECK_EQ(hs_symbolizer_add_maps_text(s, maps, len), 0);
    check_fixture(s, &fi, real, true);
    check_against_addr2line(s, real, fi.pc_inner);
    check_against_addr2line(s, real, fi.pc_static);
    hs_symbolizer_free(s);
    free(maps);
}

/* A live child, through /proc/<pid>/maps. */
static void test_exe_live(const char *exe)
{
    char real[PATH_MAX];
    check_context("live child via /proc/<pid>/maps");
    if (!CHECK(realpath(exe, real) != NULL))
        return;
    int to_child[2], from_child[2];
    if (!CHECK(pipe(to_child) == 0 && pipe(from_child) == 0))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        execl(real, real, "wait", (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    FILE *in = fdopen(from_child[0], "r");
    struct fix_info fi = {0};
    char line[512];
    bool ready = false;
    while (fgets(line, sizeof(line), in)) {
        if (strcmp(line, "READY\n") == 0) {
            ready = true;
            break;
        }
        fix_info_parse(&fi, line);
    }
    if (CHECK(ready)) {
        struct hs_symbolizer *s = hs_symbolizer_new(NULL);
        CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, pid), 0);
        check_fixture(s, &fi, real, true);
        hs_symbolizer_free(s);
    }
    close(to_child[1]);
    fclose(in);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- Copies of the DSO: debug file lookups, sysroot, hostile files ---- */

/* The mappings of the loaded libsymfix.so, redeclared under other paths. */
static struct hs_map g_lib_maps[32];
static size_t g_nlib_maps;

static int collect_lib_maps(const struct hs_map *m, void *arg)
{
    (void)arg;
    if (strcmp(m->path, g_lib_path) == 0 && g_nlib_maps < 32)
        g_lib_maps[g_nlib_maps++] = *m;
    return 0;
}

static struct hs_symbolizer *symbolizer_for_copy(const char *sysroot, const char *path,
                                                 const char *debug_dir)
{
    struct hs_symbolizer *s = hs_symbolizer_new(sysroot);
    if (!s)
        return NULL;
    if (debug_dir)
        CHECK_EQ(hs_symbolizer_add_debug_dir(s, debug_dir), 0);
    for (size_t i = 0; i < g_nlib_maps; i++)
        CHECK_EQ(hs_symbolizer_add_map(s, g_lib_maps[i].start, g_lib_maps[i].end,
                                       g_lib_maps[i].offset, path),
                 0);
    return s;
}

static char g_tmp[512]; /* short, so that paths built on it always fit */

static void test_debug_lookups(void)
{
    struct fix_info fi;
    fix_info_self(&fi);
    hs_maps_foreach(0, collect_lib_maps, NULL);
    check_context("copies: mappings of the DSO");
    CHECK(g_nlib_maps >= 2);
    char debug_file[PATH_MAX + 8], path[PATH_MAX + 64], root[PATH_MAX + 64];
    snprintf(debug_file, sizeof(debug_file), "%s.debug", g_lib_path);

    /* Build-id of the object, for the .build-id path. */
    struct hs_frame_info fr[MAXF];
    struct hs_symbolizer *s = symbolizer_for_copy(NULL, g_lib_path, NULL);
    CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, MAXF), 1);
    char bid[48];
    snprintf(bid, sizeof(bid), "%.40s", fr[0].build_id);
    hs_symbolizer_free(s);
    if (!CHECK_EQ(strlen(bid), 40))
        return;

    check_context("only the executable mapping declared");
    s = hs_symbolizer_new(NULL);
    size_t nexec = 0;
    for (size_t i = 0; i < g_nlib_maps; i++) {
        if (!(g_lib_maps[i].perms & HS_MAP_EXEC))
            continue;
        CHECK(g_lib_maps[i].offset != 0); /* -z separate-code: text is not at offset 0 */
        CHECK_EQ(hs_symbolizer_add_map(s, g_lib_maps[i].start, g_lib_maps[i].end,
                                       g_lib_maps[i].offset, g_lib_path),
                 0);
        nexec++;
    }
    CHECK_EQ(nexec, 1);
    check_fixture(s, &fi, g_lib_path, true);
    hs_symbolizer_free(s);

    check_context("the object loaded twice");
    const uintptr_t shift = (uintptr_t)1 << 40;
    s = symbolizer_for_copy(NULL, g_lib_path, NULL);
    for (size_t i = 0; i < g_nlib_maps; i++)
        CHECK_EQ(hs_symbolizer_add_map(s, g_lib_maps[i].start + shift, g_lib_maps[i].end + shift,
                                       g_lib_maps[i].offset, g_lib_path),
                 0);
    check_fixture(s, &fi, g_lib_path, true);
    struct fix_info moved = fi;
    moved.bias += shift;
    moved.pc_static += shift;
    moved.pc_inner += shift;
    moved.pc_run += shift;
    moved.pc_mangled += shift;
    moved.addr_static += shift;
    moved.addr_outer += shift;
    check_fixture(s, &moved, g_lib_path, true);
    hs_symbolizer_free(s);

    check_context("no debug file");
    snprintf(path, sizeof(path), "%s/none/libsymfix.so", g_tmp);
    mkdirs(path);
    rmdir(path);
    CHECK(copy_file(g_lib_path, path));
    s = symbolizer_for_copy(NULL, path, NULL);
    check_fixture(s, &fi, path, false);
    hs_symbolizer_free(s);

    check_context("mismatched debug file next to the object");
    snprintf(root, sizeof(root), "%s/none/libsymfix.so.debug", g_tmp);
    char exe_debug[PATH_MAX];
    CHECK(realpath(HS_SYMFIX_EXE_NOPIE, exe_debug) != NULL);
    strcat(exe_debug, ".debug");
    CHECK(copy_file(exe_debug, root));
    s = symbolizer_for_copy(NULL, path, NULL);
    check_fixture(s, &fi, path, false);
    hs_symbolizer_free(s);

    check_context("build-id root");
    snprintf(root, sizeof(root), "%s/root1/.build-id/%.2s", g_tmp, bid);
    mkdirs(root);
    snprintf(root, sizeof(root), "%s/root1/.build-id/%.2s/%s.debug", g_tmp, bid, bid + 2);
    CHECK(copy_file(debug_file, root));
    snprintf(root, sizeof(root), "%s/root1", g_tmp);
    s = symbolizer_for_copy(NULL, path, root);
    check_fixture(s, &fi, path, true);
    hs_symbolizer_free(s);

    check_context("debuglink under a root");
    snprintf(path, sizeof(path), "%s/dl/libsymfix.so", g_tmp);
    mkdirs(path);
    rmdir(path);
    CHECK(copy_file(g_lib_path, path));
    snprintf(root, sizeof(root), "%s/root2%s/dl", g_tmp, g_tmp);
    mkdirs(root);
    strcat(root, "/libsymfix.so.debug");
    CHECK(copy_file(debug_file, root));
    snprintf(root, sizeof(root), "%s/root2", g_tmp);
    s = symbolizer_for_copy(NULL, path, root);
    check_fixture(s, &fi, path, true);
    hs_symbolizer_free(s);

    check_context("debuglink in .debug/");
    snprintf(root, sizeof(root), "%s/dl/.debug", g_tmp);
    mkdirs(root);
    strcat(root, "/libsymfix.so.debug");
    CHECK(copy_file(debug_file, root));
    s = symbolizer_for_copy(NULL, path, NULL);
    check_fixture(s, &fi, path, true);
    hs_symbolizer_free(s);

    check_context("sysroot");
    char sysroot[PATH_MAX + 64];
    snprintf(sysroot, sizeof(sysroot), "%s/sysroot/", g_tmp);
    snprintf(path, sizeof(path), "%s/sysroot/system/lib64", g_tmp);
    mkdirs(path);
    strcat(path, "/libsymfix.so");
    CHECK(copy_file(g_lib_path, path));
    strcat(path, ".debug");
    CHECK(copy_file(debug_file, path));
    s = symbolizer_for_copy(sysroot, "/system/lib64/libsymfix.so", NULL);
    check_fixture(s, &fi, "/system/lib64/libsymfix.so", true);
    hs_symbolizer_free(s);
    /* Without the sysroot the path does not exist: mapping known, nothing else. */
    s = symbolizer_for_copy(NULL, "/system/lib64/libsymfix.so", NULL);
    if (CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].function, "");
        CHECK_STREQ(fr[0].build_id, "");
        CHECK_STREQ(fr[0].map_path, "/system/lib64/libsymfix.so");
        /* No ELF: bias is start - offset of the first mapping. */
        CHECK_EQ(fr[0].rel_pc, fi.pc_static - (g_lib_maps[0].start - g_lib_maps[0].offset));
    }
    hs_symbolizer_free(s);
}

/* A main file without a build-id is matched with its debuglink file by the CRC-32 that
 * .gnu_debuglink records: the right file is used, a file whose bytes differ is not. The copy
 * loses its build-id by having its note's type zeroed in place (the layout stays). */
static void test_debuglink_crc(void)
{
    struct fix_info fi;
    fix_info_self(&fi);
    struct hs_frame_info fr[MAXF];
    struct hs_symbolizer *s = symbolizer_for_copy(NULL, g_lib_path, NULL);
    CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, MAXF), 1);
    unsigned char bid[20];
    for (size_t i = 0; i < sizeof(bid); i++)
        sscanf(fr[0].build_id + 2 * i, "%2hhx", &bid[i]);
    hs_symbolizer_free(s);

    check_context("debuglink CRC: a copy without its build-id");
    size_t len = 0;
    char *lib = read_whole(g_lib_path, &len);
    char *note = NULL;
    for (size_t i = 16; lib && i + sizeof(bid) <= len && !note; i++)
        if (memcmp(lib + i, bid, sizeof(bid)) == 0 && memcmp(lib + i - 4, "GNU", 4) == 0)
            note = lib + i;
    if (!CHECK(note != NULL)) {
        free(lib);
        return;
    }
    memset(note - 8, 0, 4); /* n_type: no longer NT_GNU_BUILD_ID */
    char path[PATH_MAX + 64], debug[PATH_MAX + 72], orig_debug[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/crc/libsymfix.so", g_tmp);
    mkdirs(path);
    rmdir(path);
    CHECK(write_whole(path, lib, len));
    free(lib);
    snprintf(orig_debug, sizeof(orig_debug), "%s.debug", g_lib_path);
    snprintf(debug, sizeof(debug), "%s.debug", path);
    CHECK(copy_file(orig_debug, debug));

    s = symbolizer_for_copy(NULL, path, NULL);
    if (CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].build_id, "");
        CHECK_STREQ(fr[0].function, "fix_static_fn");
        CHECK_EQ(fr[0].line, fi.line_static);
    }
    hs_symbolizer_free(s);

    check_context("debuglink CRC: a debug file one byte longer is refused");
    char *dbg = read_whole(orig_debug, &len);
    if (CHECK(dbg != NULL)) {
        char *longer = realloc(dbg, len + 1);
        if (CHECK(longer != NULL)) {
            dbg = longer;
            dbg[len] = 0;
            CHECK(write_whole(debug, dbg, len + 1));
        }
    }
    free(dbg);
    s = symbolizer_for_copy(NULL, path, NULL);
    if (CHECK_EQ(hs_symbolize(s, fi.pc_static, 1, fr, MAXF), 1)) {
        CHECK(strcmp(fr[0].function, "fix_static_fn") != 0);
        CHECK_EQ(fr[0].line, 0);
    }
    hs_symbolizer_free(s);
}

/* Symbolizes the fixture's pcs in a copy at path; nothing may crash, the mapping is known. */
static void poke(const struct fix_info *fi, const char *path, const char *debug_dir)
{
    struct hs_symbolizer *s = symbolizer_for_copy(NULL, path, debug_dir);
    if (!CHECK(s != NULL))
        return;
    struct hs_frame_info fr[MAXF];
    const uintptr_t pcs[] = {fi->pc_static, fi->pc_inner, fi->pc_run, fi->addr_static};
    for (size_t i = 0; i < 4; i++) {
        size_t n = hs_symbolize(s, pcs[i], i != 3, fr, MAXF);
        if (CHECK(n >= 1))
            CHECK_STREQ(fr[0].map_path, path);
    }
    hs_symbolizer_free(s);
}

static void test_hostile_files(void)
{
    struct fix_info fi;
    fix_info_self(&fi);
    char path[PATH_MAX + 64];
    struct hs_frame_info fr[MAXF];

    check_context("nonexistent, directory, device, FIFO, non-ELF");
    snprintf(path, sizeof(path), "%s/fifo", g_tmp);
    CHECK_EQ(mkfifo(path, 0600), 0);
    char text[PATH_MAX + 64];
    snprintf(text, sizeof(text), "%s/text.so", g_tmp);
    CHECK(write_whole(text, "this is not an ELF file\n", 24));
    const char *odd[] = {"/nonexistent/dir/libnothere.so",
                         "/",
                         "/dev/null",
                         "/dev/zero",
                         path,
                         text,
                         "relative/lib.so",
                         "[vdso]",
                         "[anon:stuff]"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        check_context(odd[i]);
        double t0 = now_s();
        poke(&fi, odd[i], NULL);
        struct hs_symbolizer *s = hs_symbolizer_new(NULL);
        CHECK_EQ(hs_symbolizer_add_map(s, 0x40000000, 0x40002000, 0x3000, odd[i]), 0);
        if (CHECK_EQ(hs_symbolize(s, 0x40001234, 1, fr, MAXF), 1)) {
            CHECK_STREQ(fr[0].function, "");
            CHECK_STREQ(fr[0].file, "");
            CHECK_EQ(fr[0].line, 0);
            CHECK_EQ(fr[0].rel_pc, 0x4234);
        }
        hs_symbolizer_free(s);
        CHECK(now_s() - t0 < 5);
    }

    check_context("truncated object");
    size_t lib_len, dbg_len;
    char *lib = read_whole(g_lib_path, &lib_len);
    char dbg_path[PATH_MAX + 8];
    snprintf(dbg_path, sizeof(dbg_path), "%s.debug", g_lib_path);
    char *dbg = read_whole(dbg_path, &dbg_len);
    if (!CHECK(lib && dbg))
        return;
    snprintf(path, sizeof(path), "%s/trunc", g_tmp);
    mkdirs(path);
    strcat(path, "/libsymfix.so");
    size_t cuts = 0;
    for (size_t len = 0; len < lib_len; len += (len < 128 ? 1 : len < 4096 ? 61 : 509)) {
        CHECK(write_whole(path, lib, len));
        poke(&fi, path, NULL);
        cuts++;
    }

    check_context("truncated debug file");
    char dpath[PATH_MAX + 64];
    snprintf(dpath, sizeof(dpath), "%s.debug", path);
    CHECK(write_whole(path, lib, lib_len));
    for (size_t len = 0; len < dbg_len; len += (len < 128 ? 7 : len < 4096 ? 97 : 1021)) {
        CHECK(write_whole(dpath, dbg, len));
        poke(&fi, path, NULL);
        cuts++;
    }

    check_context("corrupted debug file");
    unsigned rng = 12345;
    char *bad = malloc(dbg_len);
    for (int round = 0; round < 300 && bad; round++) {
        memcpy(bad, dbg, dbg_len);
        int flips = 1 + round % 8;
        for (int k = 0; k < flips; k++) {
            rng = rng * 1103515245u + 12345u;
            size_t at = (rng >> 4) % dbg_len;
            rng = rng * 1103515245u + 12345u;
            bad[at] ^= (char)(1u << ((rng >> 8) % 8));
        }
        CHECK(write_whole(dpath, bad, dbg_len));
        poke(&fi, path, NULL);
        cuts++;
    }
    free(bad);
    printf("hostile files: %zu truncated or corrupted variants symbolized\n", cuts);
    free(lib);
    free(dbg);
}

/* ---- Mapping rules ---- */

static void test_maps(void)
{
    struct hs_frame_info fr[MAXF];
    struct hs_symbolizer *s = hs_symbolizer_new(NULL);
    check_context("bad arguments");
    errno = 0;
    CHECK_EQ(hs_symbolizer_add_map(s, 0x2000, 0x2000, 0, "/x"), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(hs_symbolizer_add_map(s, 0x3000, 0x2000, 0, "/x"), -1);
    CHECK_EQ(hs_symbolizer_add_map(s, 0x1000, 0x2000, 0, NULL), -1);
    CHECK_EQ(hs_symbolizer_add_map(NULL, 0x1000, 0x2000, 0, "/x"), -1);
    CHECK_EQ(hs_symbolizer_add_debug_dir(s, "relative"), -1);
    CHECK_EQ(hs_symbolizer_add_debug_dir(s, "/a:/b"), -1);
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 999999999), -1);
    CHECK_EQ(hs_symbolize(s, 0x1000, 0, fr, MAXF), 0);

    check_context("overlaps");
    CHECK_EQ(hs_symbolizer_add_map(s, 0x10000, 0x50000, 0, "/nonexistent/a"), 0);
    CHECK_EQ(hs_symbolize(s, 0x20000, 0, fr, MAXF), 1);
    CHECK_STREQ(fr[0].map_path, "/nonexistent/a");
    CHECK_EQ(hs_symbolizer_add_map(s, 0x20000, 0x30000, 0, "/nonexistent/b"), 0);
    /* Declaring it again changes nothing. */
    CHECK_EQ(hs_symbolizer_add_map(s, 0x20000, 0x30000, 0, "/nonexistent/b"), 0);
    if (CHECK_EQ(hs_symbolize(s, 0x15000, 0, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].map_path, "/nonexistent/a");
        CHECK_EQ(fr[0].rel_pc, 0x5000);
    }
    if (CHECK_EQ(hs_symbolize(s, 0x20000, 0, fr, MAXF), 1)) { /* the cache was dropped */
        CHECK_STREQ(fr[0].map_path, "/nonexistent/b");
        CHECK_EQ(fr[0].rel_pc, 0);
    }
    if (CHECK_EQ(hs_symbolize(s, 0x3ffff, 1, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].map_path, "/nonexistent/a");
        CHECK_EQ(fr[0].rel_pc, 0x2ffff); /* same run as 0x10000: bias 0x10000 */
    }
    CHECK_EQ(hs_symbolize(s, 0x50000, 0, fr, MAXF), 0);
    /* Covering several mappings at once, and anonymous memory. */
    CHECK_EQ(hs_symbolizer_add_map(s, 0x18000, 0x48000, 0, ""), 0);
    if (CHECK_EQ(hs_symbolize(s, 0x20000, 0, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].map_path, "");
        CHECK_EQ(fr[0].rel_pc, 0x8000);
    }
    if (CHECK_EQ(hs_symbolize(s, 0x49000, 0, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].map_path, "/nonexistent/a");
        CHECK_EQ(fr[0].rel_pc, 0x39000);
    }
    CHECK_EQ(hs_symbolizer_add_map(s, 0x60000, 0x61000, 0, "/nonexistent/c (deleted)"), 0);
    if (CHECK_EQ(hs_symbolize(s, 0x60010, 0, fr, MAXF), 1))
        CHECK_STREQ(fr[0].map_path, "/nonexistent/c");

    check_context("a second load of the same file starts a new run");
    CHECK_EQ(hs_symbolizer_add_map(s, 0x100000, 0x101000, 0, "/nonexistent/d"), 0);
    CHECK_EQ(hs_symbolizer_add_map(s, 0x101000, 0x103000, 0x1000, "/nonexistent/d"), 0);
    CHECK_EQ(hs_symbolizer_add_map(s, 0x200000, 0x201000, 0, "/nonexistent/d"), 0);
    CHECK_EQ(hs_symbolizer_add_map(s, 0x201000, 0x203000, 0x1000, "/nonexistent/d"), 0);
    if (CHECK_EQ(hs_symbolize(s, 0x102000, 0, fr, MAXF), 1))
        CHECK_EQ(fr[0].rel_pc, 0x2000);
    if (CHECK_EQ(hs_symbolize(s, 0x202000, 0, fr, MAXF), 1))
        CHECK_EQ(fr[0].rel_pc, 0x2000);

    check_context("maps text");
    static const char text[] = "7f0000000000-7f0000001000 r--p 00000000 08:01 1234 /nonexistent/e\n"
                               "garbage line\n"
                               "7f0000001000-7f0000003000 r-xp 00001000 08:01 1234 /nonexistent/e";
    CHECK_EQ(hs_symbolizer_add_maps_text(s, text, sizeof(text) - 1), 0);
    if (CHECK_EQ(hs_symbolize(s, 0x7f0000002000, 0, fr, MAXF), 1)) {
        CHECK_STREQ(fr[0].map_path, "/nonexistent/e");
        CHECK_EQ(fr[0].rel_pc, 0x2000);
    }
    hs_symbolizer_free(s);
}

/* ---- debuginfod ---- */

static int find_debuginfod(const struct hs_map *m, void *arg)
{
    (void)arg;
    return strstr(m->path, "libdebuginfod") != NULL;
}

static void test_no_debuginfod(void)
{
    check_context("debuginfod never loaded");
    const char *urls = getenv("DEBUGINFOD_URLS");
    printf("DEBUGINFOD_URLS=%s\n", urls ? urls : "(unset)");
    CHECK_EQ(hs_maps_foreach(0, find_debuginfod, NULL), 0);
}

/* ---- Speed ---- */

struct exec_pick {
    const char *want[3];
    struct hs_map got[3];
    bool have[3];
};

static int pick_exec(const struct hs_map *m, void *arg)
{
    struct exec_pick *p = arg;
    if (!(m->perms & HS_MAP_EXEC))
        return 0;
    for (int i = 0; i < 3; i++)
        if (!p->have[i] && strstr(m->path, p->want[i])) {
            p->got[i] = *m;
            p->have[i] = true;
        }
    return 0;
}

static void test_speed(void)
{
    check_context("speed");
    char self[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (!CHECK(l > 0))
        return;
    self[l] = '\0';
    struct exec_pick *pick = calloc(1, sizeof(*pick));
    pick->want[0] = "/libc.so";
    pick->want[1] = self;
    pick->want[2] = g_lib_path;
    hs_maps_foreach(0, pick_exec, pick);
    enum { PER = 1000, DISTINCT = 3 * PER };
    static uintptr_t pcs[DISTINCT];
    for (int i = 0; i < 3; i++) {
        if (!CHECK(pick->have[i])) {
            free(pick);
            return;
        }
        uintptr_t size = pick->got[i].end - pick->got[i].start;
        for (int k = 0; k < PER; k++)
            pcs[i * PER + k] = pick->got[i].start + 1 + (uintptr_t)((double)size * k / PER);
    }
    free(pick);

    struct hs_frame_info fr[MAXF];
    struct hs_symbolizer *s = hs_symbolizer_new(NULL);
    double t0 = now_s();
    CHECK_EQ(hs_symbolizer_add_maps_of_pid(s, 0), 0);
    size_t known = 0, named = 0, lined = 0;
    for (int i = 0; i < DISTINCT; i++) {
        size_t n = hs_symbolize(s, pcs[i], 1, fr, MAXF);
        known += n >= 1;
        named += n >= 1 && fr[0].function[0];
        lined += n >= 1 && fr[0].line;
    }
    double t1 = now_s();
    unsigned rng = 1;
    size_t frames = 0;
    for (int i = DISTINCT; i < 200000; i++) {
        rng = rng * 1103515245u + 12345u;
        frames += hs_symbolize(s, pcs[(rng >> 8) % DISTINCT], 1, fr, MAXF);
    }
    double t2 = now_s();
    for (int i = 0; i < 3200000; i++) {
        rng = rng * 1103515245u + 12345u;
        frames += hs_symbolize(s, pcs[(rng >> 8) % DISTINCT], 1, fr, MAXF);
    }
    double t3 = now_s();
    CHECK_EQ(known, DISTINCT);
    CHECK(named > DISTINCT / 3);
    printf("speed: %d distinct pcs (libc, test binary, libsymfix): %.3f s cold "
           "(%zu named, %zu with line)\n",
           DISTINCT, t1 - t0, named, lined);
    printf("speed: 200000 lookups in total: %.3f s; 3200000 more (100k records x 32 frames): "
           "%.3f s (%zu frames)\n",
           t2 - t0, t3 - t2, frames);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* Orders of magnitude, not timings; a sanitizer build (make sanitize) is slower by more. */
    CHECK(t2 - t0 < 5.0);
    CHECK(t3 - t2 < 5.0);
#endif
    hs_symbolizer_free(s);
}

int main(void)
{
    /* Also for an elfutils that would read it lazily (ctest sets it before start). */
    setenv("DEBUGINFOD_URLS", "http://192.0.2.1:8002/", 0);
    elf_version(EV_CURRENT);
    snprintf(g_tmp, sizeof(g_tmp), "%s/hs_symbolizer_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    symfix_run();
    test_self();
    test_exe_output(HS_SYMFIX_EXE_NOPIE, true, ET_EXEC);
    test_exe_output(HS_SYMFIX_EXE_PIE, false, ET_DYN);
    test_exe_live(HS_SYMFIX_EXE_NOPIE);
    test_debug_lookups();
    test_debuglink_crc();
    test_maps();
    test_hostile_files();
    test_speed();
    test_no_debuginfod();
    rm_rf(g_tmp);
    return check_report();
}
