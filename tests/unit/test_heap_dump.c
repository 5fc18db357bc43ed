/* test_heap_dump.c: unit tests of the heap dump file (src/malloc_debug/heap_dump.c).
 *
 * The pointer table is filled with made-up pointers and frames (Android's own test cases:
 * pcs like 0xa000 lie in no mapping), dumps are triggered the real ways (raise(SIGRTMAX-17)
 * then hs_md_heap_dump_if_requested; hs_md_heap_dump_at_exit; hs_md_heap_dump_to) into a
 * private temporary directory, and the files are compared exactly after the machine-specific
 * parts (fingerprint, maps) are replaced, as Android's tests do. bt_info lines are checked
 * with made-up pcs and with pcs inside this test's own functions and inside libc.
 *
 * What init.c defines in the shim comes from shim_stubs.c.
 */
#define _GNU_SOURCE
#include "check.h"
#include "debug_state.h"
#include "heap_dump.h"
#include "log.h"
#include "options.h"
#include "pointer_table.h"
#include "pointer_table_helpers.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

static char g_dir[] = "/tmp/hs_heap_dump_test.XXXXXX";

/* ---- log capture ---- */

#define MAX_LOG 16
static int log_count;
static char log_body[MAX_LOG][HS_LOG_LINE_MAX];

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    (void)len;
    if (log_count >= MAX_LOG)
        return;
    const char *close = strstr(line, "] ");
    const char *body = close ? strstr(close + 2, ": ") : NULL;
    snprintf(log_body[log_count], HS_LOG_LINE_MAX, "%s", body ? body + 2 : line);
    size_t n = strlen(log_body[log_count]);
    if (n && log_body[log_count][n - 1] == '\n')
        log_body[log_count][n - 1] = '\0';
    log_count++;
}

/* ---- helpers ---- */

#define FRAMES(...)                                                                                \
    (sizeof((uintptr_t[]){__VA_ARGS__}) / sizeof(uintptr_t)), (uintptr_t[])                        \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }

static void configure(const char *options)
{
    char full[PATH_MAX + 256];
    snprintf(full, sizeof(full), "%s backtrace_dump_prefix=%s/bt", options, g_dir);
    CHECK(hs_md_config_parse(&hs_md.cfg, full));
    __atomic_store_n(&hs_md.mode, HS_MD_DEBUG, __ATOMIC_RELEASE);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    size_t n;
    while ((n = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2)
            s = realloc(s, cap *= 2);
    }
    s[len] = '\0';
    fclose(f);
    return s;
}

static void path_of(char *buf, size_t cap, const char *suffix)
{
    snprintf(buf, cap, "%s/bt.%d%s", g_dir, (int)getpid(), suffix);
}

/* Replaces the fingerprint by '' and the maps by "MAP_DATA" (Android's SanitizeHeapData);
 * checks on the way that the fingerprint starts with uname's sysname and that the maps
 * section ends with END. Returns a malloc'd string. */
static char *sanitize(const char *text)
{
    char *out = malloc(strlen(text) + 64);
    size_t len = 0;
    bool in_maps = false, had_maps = false;
    struct utsname u;
    uname(&u);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (in_maps) {
            if (n == 3 && memcmp(line, "END", 3) == 0) {
                if (had_maps)
                    len += (size_t)sprintf(out + len, "MAP_DATA\n");
                in_maps = false;
            } else {
                had_maps = true;
                line = end ? end + 1 : line + n;
                continue;
            }
        }
        if (strncmp(line, "Build fingerprint: '", 20) == 0) {
            CHECK(strncmp(line + 20, u.sysname, strlen(u.sysname)) == 0);
            CHECK(line[n - 1] == '\'');
            len += (size_t)sprintf(out + len, "Build fingerprint: ''\n");
        } else {
            if (n == 4 && memcmp(line, "MAPS", 4) == 0)
                in_maps = true;
            memcpy(out + len, line, n);
            len += n;
            out[len++] = '\n';
        }
        line = end ? end + 1 : line + n;
    }
    out[len] = '\0';
    return out;
}

static void check_dump(const char *path, const char *expected)
{
    char *text = slurp(path);
    CHECK(text != NULL);
    if (!text)
        return;
    char *clean = sanitize(text);
    CHECK_STREQ(clean, expected);
    size_t n = strlen(text);
    CHECK(n > 4 && strcmp(text + n - 4, "END\n") == 0);
    free(clean);
    free(text);
}

/* ---- tests ---- */

/* Android's BacktraceDumpOnSignal (its non-zygote allocations): the signal sets the flag,
 * the next malloc/free hook writes <prefix>.<pid>.txt. */
static void test_dump_on_signal(void)
{
    check_context("signal");
    configure("backtrace=4 verbose");
    log_count = 0;
    hs_md_heap_dump_init();
    CHECK_EQ(log_count, 1);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof(want), "test_heap_dump: Run: 'kill -%d %d' to dump the backtrace.",
             SIGRTMAX - 17, (int)getpid());
    CHECK_STREQ(log_body[0], want);

    add(0x1000, 10, FRAMES(0xa000, 0xb000));
    add(0x2000, 50, FRAMES(0xa100, 0xb200));
    add(0x3000, 5, FRAMES(0xa300, 0xb300));

    char path[PATH_MAX];
    path_of(path, sizeof(path), ".txt");
    CHECK_EQ(hs_md_heap_dump_pending, 0);
    hs_md_heap_dump_if_requested(); /* nothing asked: nothing written */
    CHECK(access(path, F_OK) != 0);

    CHECK_EQ(raise(SIGRTMAX - 17), 0);
    CHECK_EQ(hs_md_heap_dump_pending, 1);
    /* Inside the shim's own code the request waits. */
    hs_md_in_shim++;
    hs_md_heap_dump_if_requested();
    hs_md_in_shim--;
    CHECK(access(path, F_OK) != 0);
    CHECK_EQ(hs_md_heap_dump_pending, 1);

    log_count = 0;
    errno = 1234;
    hs_md_heap_dump_if_requested();
    CHECK_EQ(errno, 1234); /* the program's errno survives the dump */
    CHECK_EQ(hs_md_heap_dump_pending, 0);
    CHECK_EQ(log_count, 1);
    snprintf(want, sizeof(want), "Dumping to file: %s", path);
    CHECK_STREQ(log_body[0], want);
    check_dump(path, "Android Native Heap Dump v1.2\n"
                     "\n"
                     "Build fingerprint: ''\n"
                     "\n"
                     "Total memory: 65\n"
                     "Allocation records: 3\n"
                     "Backtrace size: 4\n"
                     "\n"
                     "z 0  sz       50  num    1  bt a100 b200\n"
                     "z 0  sz       10  num    1  bt a000 b000\n"
                     "z 0  sz        5  num    1  bt a300 b300\n"
                     "MAPS\n"
                     "MAP_DATA\n"
                     "END\n");
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
    unlink(path);
    remove_all();

    /* Without verbose the init is silent. */
    configure("backtrace=4");
    log_count = 0;
    hs_md_heap_dump_init();
    CHECK_EQ(log_count, 0);
    check_context(NULL);
}

/* Android's backtrace_dump_on_exit_shared_backtrace, plus the entries without backtrace. */
static void test_dump_on_exit(void)
{
    check_context("exit");
    configure("backtrace=4 backtrace_dump_on_exit");
    add(0x1000, 300, FRAMES(0x100, 0x200));
    add(0x2000, 400, FRAMES(0xa000, 0xb000, 0xc000));
    add(0x3000, 300, FRAMES(0x100, 0x200));
    add(0x4000, 70, 0, NULL);
    add(0x5000, 70, 0, NULL);
    add(0x6000, 400, FRAMES(0xa000, 0xb000));
    char path[PATH_MAX];
    path_of(path, sizeof(path), ".exit.txt");
    hs_md_heap_dump_at_exit();
    check_dump(path, "Android Native Heap Dump v1.2\n"
                     "\n"
                     "Build fingerprint: ''\n"
                     "\n"
                     "Total memory: 1540\n"
                     "Allocation records: 4\n"
                     "Backtrace size: 4\n"
                     "\n"
                     "z 0  sz      400  num    1  bt a000 b000 c000\n"
                     "z 0  sz      400  num    1  bt a000 b000\n"
                     "z 0  sz      300  num    2  bt 100 200\n"
                     "z 0  sz       70  num    2  bt\n"
                     "MAPS\n"
                     "MAP_DATA\n"
                     "END\n");
    unlink(path);

    /* Without backtrace_dump_on_exit, or with malloc debug off, the exit hook writes nothing. */
    configure("backtrace=4");
    hs_md_heap_dump_at_exit();
    CHECK(access(path, F_OK) != 0);
    configure("backtrace=4 backtrace_dump_on_exit");
    __atomic_store_n(&hs_md.mode, HS_MD_PASSTHROUGH, __ATOMIC_RELEASE);
    hs_md_heap_dump_at_exit();
    CHECK(access(path, F_OK) != 0);
    remove_all();
    check_context(NULL);
}

__attribute__((noinline)) static int dump_test_func_a(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) static int dump_test_func_b(int x)
{
    return dump_test_func_a(x) + 7;
}

/* backtrace_full: made-up pcs in no mapping print {"" pc "" 0}; pcs in this executable and in
 * libc name their file, their address relative to the load bias and their function. */
static void test_backtrace_full(void)
{
    check_context("backtrace_full");
    configure("backtrace=4 backtrace_full");
    add(0x1000, 300, FRAMES(0x1100, 0x1200));

    Dl_info exe, libc;
    CHECK(dladdr((void *)dump_test_func_a, &exe) != 0);
    CHECK(dladdr((void *)getpid, &libc) != 0);
    uintptr_t a = (uintptr_t)dump_test_func_a + 5, b = (uintptr_t)dump_test_func_b + 1;
    uintptr_t c = (uintptr_t)getpid + 2;
    /* Frames are call sites or exact pcs, looked up as they are: a pc at a function's first
     * byte (where a signal interrupted it) names that function, not the one before. */
    uintptr_t d = (uintptr_t)dump_test_func_b;
    add(0x2000, 200, 4, (uintptr_t[]){a, b, d, c});

    char exe_path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
    CHECK(n > 0);
    exe_path[n > 0 ? n : 0] = '\0';
    char libc_path[PATH_MAX];
    CHECK(realpath(libc.dli_fname, libc_path) != NULL);

    char path[PATH_MAX];
    path_of(path, sizeof(path), ".full.txt");
    CHECK_EQ(hs_md_heap_dump_to(path), 0);
    char *text = slurp(path);
    char *clean = sanitize(text);

    char expected[4 * PATH_MAX + 1024];
    uintptr_t exe_bias = (uintptr_t)exe.dli_fbase, libc_bias = (uintptr_t)libc.dli_fbase;
    snprintf(expected, sizeof(expected),
             "Android Native Heap Dump v1.2\n\nBuild fingerprint: ''\n\n"
             "Total memory: 500\nAllocation records: 2\nBacktrace size: 4\n\n"
             "z 0  sz      300  num    1  bt 1100 1200\n"
             "  bt_info {\"\" 1100 \"\" 0} {\"\" 1200 \"\" 0}\n"
             "z 0  sz      200  num    1  bt %lx %lx %lx %lx\n"
             "  bt_info {\"%s\" %lx \"dump_test_func_a\" 5} {\"%s\" %lx \"dump_test_func_b\" 1}"
             " {\"%s\" %lx \"dump_test_func_b\" 0} {\"%s\" %lx \"",
             (unsigned long)a, (unsigned long)b, (unsigned long)d, (unsigned long)c, exe_path,
             (unsigned long)(a - exe_bias), exe_path, (unsigned long)(b - exe_bias), exe_path,
             (unsigned long)(d - exe_bias), libc_path, (unsigned long)(c - libc_bias));
    /* The records come in size order: the 300 first. Compare up to libc's symbol name. */
    CHECK(strncmp(clean, expected, strlen(expected)) == 0);
    if (strncmp(clean, expected, strlen(expected)) != 0)
        fprintf(stderr, "expected prefix:\n%s\nactual:\n%s\n", expected, clean);
    const char *sym = clean + strlen(expected);
    CHECK(strncmp(sym, "getpid\" 2}\n", 11) == 0 || strncmp(sym, "__getpid\" 2}\n", 13) == 0);
    free(clean);
    free(text);
    unlink(path);
    remove_all();
    check_context(NULL);
}

/* Many records with long backtraces: more than the writer's buffer, and the maps copied
 * verbatim. */
static void test_large_dump(void)
{
    check_context("large");
    configure("backtrace=16 backtrace_full");
    enum { N = 3000 };
    size_t total = 0;
    for (uintptr_t i = 0; i < N; i++) {
        uintptr_t f[16];
        for (int k = 0; k < 16; k++)
            f[k] = 0x1000 + i * 16 + (uintptr_t)k;
        add(0x100000 + i * 16, 100 + i, 16, f);
        total += 100 + i;
    }
    char path[PATH_MAX];
    path_of(path, sizeof(path), ".large.txt");
    CHECK_EQ(hs_md_heap_dump_to(path), 0);
    char *text = slurp(path);
    CHECK(text != NULL);
    char want[64];
    snprintf(want, sizeof(want), "Total memory: %zu\nAllocation records: %d\n", total, N);
    CHECK(strstr(text, want) != NULL);
    size_t z = 0, info = 0;
    size_t prev = SIZE_MAX;
    bool ordered = true;
    for (const char *p = text; (p = strchr(p, '\n')); p++) {
        if (strncmp(p + 1, "z 0  sz ", 8) == 0) {
            size_t sz = strtoul(p + 9, NULL, 10);
            if (sz >= prev)
                ordered = false;
            prev = sz;
            z++;
        }
        if (strncmp(p + 1, "  bt_info {", 11) == 0)
            info++;
    }
    CHECK_EQ(z, N);
    CHECK_EQ(info, N);
    CHECK(ordered);
    /* The MAPS section is this process's maps (the part before any later change). */
    char *maps = slurp("/proc/self/maps");
    const char *section = strstr(text, "\nMAPS\n");
    CHECK(section != NULL);
    if (section && maps) {
        section += 6;
        const char *first_line_end = strchr(maps, '\n');
        CHECK(strncmp(section, maps, (size_t)(first_line_end - maps)) == 0);
    }
    free(maps);
    free(text);
    unlink(path);
    remove_all();
    check_context(NULL);
}

static void test_errors(void)
{
    check_context("errors");
    configure("backtrace=4");
    char path[PATH_MAX + 64], want[PATH_MAX + 128];

    /* A directory that does not exist. */
    snprintf(path, sizeof(path), "%s/missing/x.txt", g_dir);
    log_count = 0;
    errno = 0;
    CHECK_EQ(hs_md_heap_dump_to(path), -1);
    CHECK_EQ(errno, ENOENT);
    CHECK_EQ(log_count, 1);
    snprintf(want, sizeof(want), "Unable to create heap dump file %s: No such file or directory",
             path);
    CHECK_STREQ(log_body[0], want);

    /* A symlink is not followed. */
    char target[PATH_MAX];
    snprintf(target, sizeof(target), "%s/target", g_dir);
    snprintf(path, sizeof(path), "%s/link", g_dir);
    CHECK_EQ(symlink(target, path), 0);
    log_count = 0;
    CHECK_EQ(hs_md_heap_dump_to(path), -1);
    CHECK_EQ(errno, ELOOP);
    CHECK(access(target, F_OK) != 0);
    CHECK_EQ(log_count, 1);
    unlink(path);

    /* The signal path with a prefix in a missing directory logs and leaves errno alone. */
    char options[PATH_MAX];
    snprintf(options, sizeof(options), "backtrace=4 backtrace_dump_prefix=%s/missing/bt", g_dir);
    CHECK(hs_md_config_parse(&hs_md.cfg, options));
    log_count = 0;
    raise(SIGRTMAX - 17);
    errno = 77;
    hs_md_heap_dump_if_requested();
    CHECK_EQ(errno, 77);
    CHECK_EQ(log_count, 1);
    snprintf(want, sizeof(want),
             "Unable to create heap dump file %s/missing/bt.%d.txt: No such file or directory",
             g_dir, (int)getpid());
    CHECK_STREQ(log_body[0], want);

    /* Backtraces off: the file explains how to turn them on. */
    configure("guard");
    snprintf(path, sizeof(path), "%s/off.txt", g_dir);
    log_count = 0;
    CHECK_EQ(hs_md_heap_dump_to(path), -1);
    CHECK_EQ(errno, ENOTSUP);
    char *text = slurp(path);
    CHECK(text && strncmp(text, "Native heap dump not available.", 31) == 0);
    free(text);
    unlink(path);
    check_context(NULL);
}

/* The records' pcs of a default (non-full) dump and the header of an empty table. */
static void test_empty(void)
{
    check_context("empty");
    configure("backtrace=8");
    char path[PATH_MAX];
    path_of(path, sizeof(path), ".empty.txt");
    CHECK_EQ(hs_md_heap_dump_to(path), 0);
    check_dump(path, "Android Native Heap Dump v1.2\n\nBuild fingerprint: ''\n\n"
                     "Total memory: 0\nAllocation records: 0\nBacktrace size: 8\n\n"
                     "MAPS\nMAP_DATA\nEND\n");
    unlink(path);
    check_context(NULL);
}

int main(void)
{
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    hs_log_init("malloc_debug");
    hs_md.guarded = true; /* records of made-up pointers in shim_stubs.c's store */
    hs_log_set_sink(log_sink, NULL);
    test_dump_on_signal();
    test_dump_on_exit();
    test_backtrace_full();
    test_large_dump();
    test_errors();
    test_empty();
    rmdir(g_dir);
    return check_report();
}
