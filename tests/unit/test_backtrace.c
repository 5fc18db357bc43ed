/* test_backtrace.c: stack capture and Android-format printing (src/common/backtrace.c).
 *
 * Built twice: as a PIE and as a non-PIE (ET_EXEC) executable (HS_TEST_NO_PIE), without
 * -rdynamic, so the names of its own functions can only come from .symtab.
 *
 * The test defines malloc and friends (forwarding to glibc's __libc_* entry points) so that it
 * can count every allocation made while capturing and printing: there must be none.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include "arena.h"
#include "backtrace.h"
#include "check.h"
#include "log.h"
#include "signal_trampoline.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__clang__)
#define TEST_NOINLINE __attribute__((noinline))
#else
#define TEST_NOINLINE __attribute__((noinline, noipa))
#endif
/* Keeps a call out of tail position. */
#define BARRIER() __asm__ volatile("" ::: "memory")

/* ---- Counting allocator ---- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_int g_counting;
static atomic_long g_allocs;

static inline void count_alloc(void)
{
    if (atomic_load_explicit(&g_counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
}

#define EXPORT __attribute__((visibility("default")))
EXPORT void *malloc(size_t n)
{
    count_alloc();
    return __libc_malloc(n);
}
EXPORT void *calloc(size_t a, size_t b)
{
    count_alloc();
    return __libc_calloc(a, b);
}
EXPORT void *realloc(void *p, size_t n)
{
    count_alloc();
    return __libc_realloc(p, n);
}
EXPORT void free(void *p)
{
    if (p)
        count_alloc();
    __libc_free(p);
}
EXPORT void *memalign(size_t align, size_t n)
{
    count_alloc();
    return __libc_memalign(align, n);
}
EXPORT void *aligned_alloc(size_t align, size_t n)
{
    count_alloc();
    return __libc_memalign(align, n);
}
EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    count_alloc();
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}
EXPORT void *valloc(size_t n)
{
    count_alloc();
    return __libc_memalign((size_t)getpagesize(), n);
}

/* ---- Log capture (no allocation: fixed static buffers) ---- */

#define MAX_LINES 300
static char g_lines[MAX_LINES][HS_LOG_LINE_MAX];
static size_t g_nlines;

static void sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    if (g_nlines >= MAX_LINES)
        return;
    if (len >= HS_LOG_LINE_MAX)
        len = HS_LOG_LINE_MAX - 1;
    memcpy(g_lines[g_nlines], line, len);
    while (len > 0 && g_lines[g_nlines][len - 1] == '\n')
        len--;
    g_lines[g_nlines][len] = '\0';
    g_nlines++;
}

/* The message part of a captured line (after "<prog>[<pid>] <tag>: "). */
static const char *msg(size_t i)
{
    const char *p = i < g_nlines ? strstr(g_lines[i], "] test: ") : NULL;
    return p ? p + 8 : "";
}

struct frame_line {
    bool ok; /* the fixed part of the format matched */
    unsigned index;
    uintptr_t pc;
    char path[PATH_MAX];
    char sym[512]; /* "" when no symbol */
    unsigned long offset;
};

/* Parses "          #NN  pc <16 hex>  <path>[ (<sym>+<dec>)]" strictly. */
static void parse_frame(const char *m, struct frame_line *f)
{
    memset(f, 0, sizeof(*f));
    if (strncmp(m, "          #", 11) != 0)
        return;
    m += 11;
    if (m[0] < '0' || m[0] > '9' || m[1] < '0' || m[1] > '9')
        return;
    char *end;
    f->index = (unsigned)strtoul(m, &end, 10);
    if (end - m < 2 || strncmp(end, "  pc ", 5) != 0)
        return;
    m = end + 5;
    for (int i = 0; i < 16; i++)
        if (!((m[i] >= '0' && m[i] <= '9') || (m[i] >= 'a' && m[i] <= 'f')))
            return;
    f->pc = (uintptr_t)strtoull(m, &end, 16);
    if (end - m != 16 || strncmp(end, "  ", 2) != 0)
        return;
    m = end + 2;
    snprintf(f->path, sizeof(f->path), "%s", m);
    size_t len = strlen(f->path);
    char *open = strrchr(f->path, '(');
    if (len > 0 && f->path[len - 1] == ')' && open && open > f->path && open[-1] == ' ') {
        char *plus = strrchr(open, '+');
        if (plus) {
            *plus = '\0';
            snprintf(f->sym, sizeof(f->sym), "%s", open + 1);
            f->offset = strtoul(plus + 1, NULL, 10);
            open[-1] = '\0';
        }
    }
    f->ok = true;
}

/* ---- Objects (dl_iterate_phdr is the reference) ---- */

struct object {
    uintptr_t pc;
    bool found;
    uintptr_t bias; /* dlpi_addr */
    char name[PATH_MAX];
};

static int object_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct object *o = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && o->pc >= start && o->pc < start + ph->p_memsz) {
            o->found = true;
            o->bias = info->dlpi_addr;
            snprintf(o->name, sizeof(o->name), "%s", info->dlpi_name);
            return 1;
        }
    }
    return 0;
}

static struct object object_of(uintptr_t pc)
{
    struct object o = {.pc = pc};
    dl_iterate_phdr(object_cb, &o);
    return o;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static char g_exe[PATH_MAX];

/* The target of the direct call (e8 rel32) whose instruction ends at ret, or 0 when the five
 * bytes before ret are not one: a frame stored as a call site is ret - 1. */
static uintptr_t call_target(uintptr_t ret)
{
    const unsigned char *p = (const unsigned char *)ret - 5;
    if (p[0] != 0xe8)
        return 0;
    int32_t rel;
    memcpy(&rel, p + 1, sizeof(rel));
    return ret + (uintptr_t)(intptr_t)rel;
}

/* ---- The call chain ---- */

static uintptr_t g_frames[HS_BACKTRACE_MAX_FRAMES];
static size_t g_n;

static TEST_NOINLINE void bt_level_c(size_t skip)
{
    g_n = hs_backtrace_capture(g_frames, 64, skip);
    BARRIER();
}

TEST_NOINLINE void bt_level_b(size_t skip)
{
    bt_level_c(skip);
    BARRIER();
}

TEST_NOINLINE void bt_level_a(size_t skip)
{
    bt_level_b(skip);
    BARRIER();
}

TEST_NOINLINE void bt_chain(size_t skip)
{
    bt_level_a(skip);
    BARRIER();
}

static void log_frames(const uintptr_t *frames, size_t n)
{
    g_nlines = 0;
    hs_backtrace_log(frames, n);
}

/* Checks every logged line of g_frames against dl_iterate_phdr and dladdr. */
static void check_lines_against_loader(void)
{
    static struct frame_line f;
    CHECK_EQ(g_nlines, g_n);
    int bad_format = 0, bad_pc = 0, bad_path = 0, bad_sym = 0;
    for (size_t i = 0; i < g_nlines && i < g_n; i++) {
        parse_frame(msg(i), &f);
        if (!f.ok || f.index != i) {
            bad_format++;
            fprintf(stderr, "bad line: \"%s\"\n", msg(i));
            continue;
        }
        struct object o = object_of(g_frames[i]);
        if (!o.found) {
            if (strcmp(f.path, "<unknown>") != 0 || f.pc != g_frames[i])
                bad_path++;
            continue;
        }
        if (f.pc != g_frames[i] - o.bias) {
            bad_pc++;
            fprintf(stderr, "frame %zu: pc %lx, expected %lx\n", i, (unsigned long)f.pc,
                    (unsigned long)(g_frames[i] - o.bias));
        }
        const char *expect_path = o.name[0] ? o.name : g_exe;
        if (strcmp(base_name(f.path), base_name(expect_path)) != 0) {
            bad_path++;
            fprintf(stderr, "frame %zu: path %s, expected %s\n", i, f.path, expect_path);
        }
        /* Where both know a symbol, they must agree on where it starts. Every frame is a
         * call site (or an exact pc): it lies in its function. */
        Dl_info info;
        uintptr_t lookup = g_frames[i];
        if (f.sym[0] && dladdr((void *)lookup, &info) && info.dli_saddr && info.dli_sname &&
            (uintptr_t)info.dli_saddr <= lookup) {
            if (g_frames[i] - f.offset != (uintptr_t)info.dli_saddr) {
                bad_sym++;
                fprintf(stderr, "frame %zu: %s+%lu, dladdr says %s at %p\n", i, f.sym, f.offset,
                        info.dli_sname, info.dli_saddr);
            }
        }
    }
    CHECK_EQ(bad_format, 0);
    CHECK_EQ(bad_pc, 0);
    CHECK_EQ(bad_path, 0);
    CHECK_EQ(bad_sym, 0);
}

static TEST_NOINLINE void test_chain(void)
{
    check_context("call chain, skip 0");
    static struct frame_line f;
#ifdef HS_TEST_NO_PIE
    CHECK_EQ(object_of((uintptr_t)&bt_chain).bias, 0); /* really an ET_EXEC executable */
#else
    CHECK(object_of((uintptr_t)&bt_chain).bias != 0);
#endif
    bt_chain(0);
    CHECK(g_n >= 5);
    log_frames(g_frames, g_n);
    check_lines_against_loader();

    const char *names[] = {"bt_level_c", "bt_level_b", "bt_level_a", "bt_chain", "test_chain"};
    const void *fns[] = {(void *)&bt_level_c, (void *)&bt_level_b, (void *)&bt_level_a,
                         (void *)&bt_chain, (void *)&test_chain};
    for (size_t i = 0; i < 5 && i < g_nlines; i++) {
        parse_frame(msg(i), &f);
        CHECK(f.ok);
        CHECK_STREQ(f.sym, names[i]);
        CHECK_STREQ(f.path, g_exe);
        /* The offset is from the function's start to the call site. */
        CHECK_EQ(f.offset, g_frames[i] - (uintptr_t)fns[i]);
    }
    /* Each frame is the last byte of the call to the function above it (a call site, not the
     * return address after the call). */
    const void *callees[] = {(void *)&hs_backtrace_capture, (void *)&bt_level_c,
                             (void *)&bt_level_b, (void *)&bt_level_a, (void *)&bt_chain};
    for (size_t i = 0; i < 5; i++) {
        CHECK_EQ(call_target(g_frames[i] + 1), (uintptr_t)callees[i]);
        CHECK(call_target(g_frames[i]) != (uintptr_t)callees[i]);
    }
    /* Deeper frames come from libc (__libc_start_call_main, ...). */
    parse_frame(msg(g_nlines - 1), &f);
    CHECK(f.ok);

    check_context("call chain, skip 1 and 2");
    bt_chain(1);
    log_frames(g_frames, g_n);
    parse_frame(msg(0), &f);
    CHECK_STREQ(f.sym, "bt_level_b");
    CHECK_EQ(f.index, 0);
    bt_chain(2);
    log_frames(g_frames, g_n);
    parse_frame(msg(0), &f);
    CHECK_STREQ(f.sym, "bt_level_a");
    parse_frame(msg(1), &f);
    CHECK_STREQ(f.sym, "bt_chain");

    check_context("errno");
    errno = 1234;
    bt_chain(0);
    CHECK_EQ(errno, 1234);
    log_frames(g_frames, g_n);
    CHECK_EQ(errno, 1234);
}

/* ---- Depth, limits, fast path against slow path ---- */

static TEST_NOINLINE size_t recurse_capture(int depth, uintptr_t *frames, size_t max, size_t skip)
{
    size_t n;
    if (depth == 0)
        n = hs_backtrace_capture(frames, max, skip);
    else
        n = recurse_capture(depth - 1, frames, max, skip);
    BARRIER();
    return n;
}

static void test_limits(void)
{
    check_context("limits");
    static uintptr_t a[HS_BACKTRACE_MAX_FRAMES], b[HS_BACKTRACE_MAX_FRAMES];
    CHECK_EQ(recurse_capture(30, a, 16, 0), 16);
    size_t n = recurse_capture(30, a, 64, 0);
    CHECK(n >= 32 && n < 64);
    CHECK_EQ(recurse_capture(30, a, 0, 0), 0);
    CHECK_EQ(recurse_capture(300, a, 100000, 0), HS_BACKTRACE_MAX_FRAMES);
    CHECK_EQ(recurse_capture(5, a, 64, 100000), 0);

    /* Skips beyond the fast path's limit take the unw_step path: same frames. The first 151
     * frames are in recurse_capture (depths 0 to 150); the compiler may unroll the loop, so
     * the call sites in this function can differ. */
    static const size_t skips[] = {0, 100, 65, 64, 1};
    static const size_t maxes[] = {256, 50, 256, 256, 256};
    size_t na = 0;
    for (size_t k = 0; k < 5; k++) {
        size_t nb = recurse_capture(150, k == 0 ? a : b, maxes[k], skips[k]);
        if (k == 0) {
            na = nb;
            CHECK(na > 150);
            continue;
        }
        size_t expect = na - skips[k] < maxes[k] ? na - skips[k] : maxes[k];
        CHECK_EQ(nb, expect);
        size_t same = 151 - skips[k] < expect ? 151 - skips[k] : expect;
        CHECK(memcmp(a + skips[k], b, same * sizeof(uintptr_t)) == 0);
    }
}

/* ---- Special frames ---- */

/* Finds a symbol's value in the vdso's .dynsym (the test trusts the kernel's image). */
static uintptr_t vdso_symbol(uintptr_t base, const char *want)
{
    const ElfW(Ehdr) *eh = (const void *)base;
    const ElfW(Shdr) *sh = (const void *)(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const ElfW(Sym) *syms = (const void *)(base + sh[i].sh_offset);
        const char *str = (const char *)(base + sh[sh[i].sh_link].sh_offset);
        for (size_t j = 0; j < sh[i].sh_size / sizeof(ElfW(Sym)); j++)
            if (strcmp(str + syms[j].st_name, want) == 0)
                return syms[j].st_value;
    }
    return 0;
}

static void test_special_frames(void)
{
    static struct frame_line f;
    check_context("no frames");
    log_frames(g_frames, 0);
    CHECK_EQ(g_nlines, 1);
    CHECK_STREQ(msg(0), "  Backtrace failed to get any frames.");

    check_context("unknown");
    void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(anon != MAP_FAILED);
    uintptr_t unknown[] = {0, 0x10, (uintptr_t)anon + 0x10 /* anonymous code (JIT) */};
    log_frames(unknown, 3);
    CHECK_EQ(g_nlines, 3);
    CHECK_STREQ(msg(0), "          #00  pc 0000000000000000  <unknown>");
    CHECK_STREQ(msg(1), "          #01  pc 0000000000000010  <unknown>");
    parse_frame(msg(2), &f);
    CHECK(f.ok);
    CHECK_EQ(f.pc, unknown[2]);
    CHECK_STREQ(f.path, "<unknown>");
    CHECK_STREQ(f.sym, "");
    munmap(anon, 4096);

    /* A pc in a mapping that holds no code: a read-only mapping of an ELF file, such as the
     * printers' own of the files they read symbols from, which the kernel may place where a
     * library the program unloaded was. Its frames are unknown, not the file's. */
    check_context("read-only file mapping");
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    void *ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(ro != MAP_FAILED);
    close(fd);
    uintptr_t stale[] = {(uintptr_t)ro + 0x1121};
    log_frames(stale, 1);
    CHECK_EQ(g_nlines, 1);
    parse_frame(msg(0), &f);
    CHECK(f.ok && f.pc == stale[0]);
    CHECK_STREQ(f.path, "<unknown>");
    static struct hs_arena arena = HS_ARENA_INIT;
    struct hs_backtrace_printer *printer = hs_backtrace_printer_new(&arena);
    CHECK(printer != NULL);
    g_nlines = 0;
    hs_backtrace_printer_log(printer, stale, 1);
    CHECK_EQ(g_nlines, 1);
    parse_frame(msg(0), &f);
    CHECK(f.ok && f.pc == stale[0]);
    CHECK_STREQ(f.path, "<unknown>");
    hs_backtrace_printer_free(printer);
    munmap(ro, 8192);

    check_context("libc");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL);
    uintptr_t getpid_addr = (uintptr_t)dlsym(libc, "getpid");
    CHECK(getpid_addr != 0);
    uintptr_t frames[] = {getpid_addr + 4, getpid_addr + 1};
    log_frames(frames, 2);
    struct object o = object_of(getpid_addr);
    parse_frame(msg(0), &f);
    CHECK(strstr(f.path, "libc.so.6") != NULL);
    CHECK(strstr(f.sym, "getpid") != NULL);
    CHECK_EQ(f.offset, 4);
    CHECK_EQ(f.pc, getpid_addr + 4 - o.bias);
    parse_frame(msg(1), &f);
    CHECK(strstr(f.sym, "getpid") != NULL);
    CHECK_EQ(f.offset, 1);
    /* A frame after #00 is looked up as it is: an exact pc (a signal interrupted the
     * function's first instruction) names its own function, not the one before. */
    uintptr_t exact[] = {getpid_addr + 4, getpid_addr};
    log_frames(exact, 2);
    parse_frame(msg(1), &f);
    CHECK(strstr(f.sym, "getpid") != NULL);
    CHECK_EQ(f.offset, 0);
    CHECK_EQ(f.pc, getpid_addr - o.bias);

    check_context("vdso");
    uintptr_t vdso = getauxval(AT_SYSINFO_EHDR);
    if (vdso) {
        uintptr_t fn = vdso_symbol(vdso, "__vdso_clock_gettime");
        CHECK(fn != 0);
        uintptr_t vf[] = {vdso + fn + 2};
        log_frames(vf, 1);
        parse_frame(msg(0), &f);
        CHECK_STREQ(f.path, "[vdso]");
        CHECK_EQ(f.pc, fn + 2);
        CHECK(strstr(f.sym, "clock_gettime") != NULL);
        CHECK_EQ(f.offset, 2);
    }
}

/* ---- Signals ---- */

static uintptr_t g_sig_frames[64];
static size_t g_sig_n;

static TEST_NOINLINE void bt_signal_handler(int sig)
{
    (void)sig;
    g_sig_n = hs_backtrace_capture(g_sig_frames, 64, 0);
    BARRIER();
}

TEST_NOINLINE void bt_signal_raiser(void)
{
    raise(SIGUSR1);
    BARRIER();
}

/* A frame interrupted by a signal is exact. bt_faulting executes a ud2 at bt_fault_pc; the
 * SIGILL handler captures through both paths and steps over the ud2. */
extern const char bt_fault_pc[];

TEST_NOINLINE void bt_faulting(void)
{
    __asm__ volatile(".globl bt_fault_pc\n"
                     "bt_fault_pc:\n\t"
                     "ud2\n");
    BARRIER();
}

TEST_NOINLINE void bt_fault_caller(void)
{
    bt_faulting();
    BARRIER();
}

/* A recursion of exactly `depth` frames (called through a volatile pointer, so that the
 * compiler can neither inline nor unroll it), for captures whose skip must be exact. */
static size_t deep_capture(int depth, uintptr_t *frames, size_t max, size_t skip);
static size_t (*volatile g_deep)(int, uintptr_t *, size_t, size_t) = deep_capture;

static TEST_NOINLINE size_t deep_capture(int depth, uintptr_t *frames, size_t max, size_t skip)
{
    size_t n =
        depth == 0 ? hs_backtrace_capture(frames, max, skip) : g_deep(depth - 1, frames, max, skip);
    BARRIER();
    return n;
}

static uintptr_t g_fault_fast[64], g_fault_slow[64];
static size_t g_fault_fast_n, g_fault_slow_n;

static void fault_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    g_fault_fast_n = hs_backtrace_capture(g_fault_fast, 64, 0);
    /* 65 frames of deep_capture, all skipped: more than the fast path skips, so this is the
     * unw_step path, starting at this handler. */
    g_fault_slow_n = g_deep(64, g_fault_slow, 64, 65);
    ucontext_t *uc = ctx;
    uc->uc_mcontext.gregs[REG_RIP] += 2; /* over the ud2 */
}

/* Checks the frames around the interrupted one: the trampoline frame before it is a call site
 * like the others, the interrupted pc is exact, its caller a call site again. */
static void check_fault_frames(const uintptr_t *frames, size_t n, uintptr_t restorer)
{
    size_t k = 0;
    while (k < n && frames[k] != (uintptr_t)bt_fault_pc)
        k++;
    CHECK(k > 0 && k + 1 < n);
    if (!(k > 0 && k + 1 < n))
        return;
    CHECK_EQ(frames[k - 1], restorer - 1);
    CHECK_EQ(call_target(frames[k + 1] + 1), (uintptr_t)&bt_faulting);
    for (size_t i = 0; i < n; i++)
        CHECK(frames[i] != (uintptr_t)bt_fault_pc - 1);
}

static void test_signal_frames(void)
{
    check_context("a frame interrupted by a signal is exact");
    struct sigaction sa = {.sa_sigaction = fault_handler, .sa_flags = SA_SIGINFO}, old;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGILL, &sa, NULL), 0);
    CHECK_EQ(sigaction(SIGILL, NULL, &old), 0);
    uintptr_t restorer = (uintptr_t)old.sa_restorer; /* glibc's __restore_rt */
    CHECK(restorer != 0);
    bt_fault_caller();
    signal(SIGILL, SIG_DFL);
    CHECK(g_fault_fast_n > 4);
    check_fault_frames(g_fault_fast, g_fault_fast_n, restorer);
    CHECK(g_fault_slow_n > 4);
    check_fault_frames(g_fault_slow, g_fault_slow_n, restorer);
    /* Both start in the handler (at two different calls) and store the same frames above. */
    CHECK_EQ(g_fault_slow_n, g_fault_fast_n);
    CHECK(memcmp(g_fault_slow + 1, g_fault_fast + 1, (g_fault_slow_n - 1) * sizeof(uintptr_t)) ==
          0);

    check_context("signal trampoline");
    CHECK(hs_is_signal_trampoline(restorer));
    CHECK(!hs_is_signal_trampoline(restorer + 1));
    CHECK(!hs_is_signal_trampoline(restorer - 1));
    CHECK(!hs_is_signal_trampoline(0));
    CHECK(!hs_is_signal_trampoline(UINTPTR_MAX));
    CHECK(!hs_is_signal_trampoline((uintptr_t)&bt_faulting));
    /* Code that looks like it, outside libc, is not read, nor is a page that cannot be. */
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    CHECK(!hs_is_signal_trampoline((uintptr_t)page));
    munmap(page, 4096);
    CHECK_EQ(hs_call_site(0x1000, false), 0xfff);
    CHECK_EQ(hs_call_site(0x1000, true), 0x1000);
    CHECK_EQ(hs_call_site(0, false), 0);
}

static atomic_long g_prof_ticks, g_prof_ok;

static void prof_handler(int sig)
{
    (void)sig;
    int saved = errno;
    uintptr_t frames[32];
    atomic_fetch_add(&g_prof_ticks, 1);
    size_t n = hs_backtrace_capture(frames, 32, 0);
    if (n > 2)
        atomic_fetch_add(&g_prof_ok, 1);
    errno = saved;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void test_signals(void)
{
    check_context("capture in a signal handler");
    signal(SIGUSR1, bt_signal_handler);
    bt_signal_raiser();
    CHECK(g_sig_n > 3);
    log_frames(g_sig_frames, g_sig_n);
    bool saw_handler = false, saw_raiser = false;
    static struct frame_line f;
    for (size_t i = 0; i < g_nlines; i++) {
        parse_frame(msg(i), &f);
        saw_handler |= strcmp(f.sym, "bt_signal_handler") == 0;
        saw_raiser |= strcmp(f.sym, "bt_signal_raiser") == 0;
    }
    CHECK(saw_handler);
    CHECK(saw_raiser);
    signal(SIGUSR1, SIG_DFL);

    /* A profiling timer capturing in its handler while this thread captures in a loop, so
     * that handlers interrupt captures (they then take the slow path). */
    check_context("captures interrupted by capturing handlers");
    struct sigaction sa = {.sa_handler = prof_handler, .sa_flags = SA_RESTART};
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 100}, {0, 100}};
    setitimer(ITIMER_PROF, &it, NULL);
    uintptr_t frames[64];
    size_t bad = 0;
    double end = now_ns() + 300e6;
    while (now_ns() < end)
        for (int i = 0; i < 100; i++)
            if (recurse_capture(10, frames, 64, 0) < 11)
                bad++;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    signal(SIGPROF, SIG_DFL);
    CHECK_EQ(bad, 0);
    CHECK(atomic_load(&g_prof_ticks) > 0);
    CHECK_EQ(atomic_load(&g_prof_ok), atomic_load(&g_prof_ticks));
}

/* ---- Threads ---- */

static atomic_long g_thread_lines;

static void thread_sink(const char *line, size_t len, void *ctx)
{
    (void)len;
    (void)ctx;
    if (strstr(line, "(bt_thread_worker+"))
        atomic_fetch_add(&g_thread_lines, 1);
}

static TEST_NOINLINE void *bt_thread_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        uintptr_t frames[32];
        size_t n = hs_backtrace_capture(frames, 32, 0);
        hs_backtrace_log(frames, n);
    }
    BARRIER();
    return NULL;
}

static void test_threads(void)
{
    check_context("threads");
    hs_log_set_sink(thread_sink, NULL);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, bt_thread_worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    hs_log_set_sink(sink, NULL);
    CHECK_EQ(atomic_load(&g_thread_lines), 4 * 50);
}

/* ---- No allocation, and cost ---- */

static long g_first_thread_allocs = -1;

static void *first_capture_thread(void *arg)
{
    (void)arg;
    uintptr_t frames[16];
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    size_t n = hs_backtrace_capture(frames, 16, 0);
    atomic_store(&g_counting, 0);
    g_first_thread_allocs = atomic_load(&g_allocs);
    return (void *)n;
}

static void test_no_malloc(void)
{
    check_context("no malloc");
    /* The counter works: libc's own strdup goes through our malloc. (Called through a
     * volatile pointer, or the compiler may elide the strdup/free pair.) */
    char *(*volatile dup)(const char *) = strdup;
    atomic_store(&g_counting, 1);
    char *s = dup("x");
    atomic_store(&g_counting, 0);
    free(s);
    CHECK(atomic_load(&g_allocs) >= 1);

    /* The first capture in the process (libunwind sets itself up). */
    static uintptr_t frames[64];
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    size_t n = recurse_capture(20, frames, 16, 0);
    atomic_store(&g_counting, 0);
    long first = atomic_load(&g_allocs);
    CHECK_EQ(n, 16);
    CHECK_EQ(first, 0);

    /* 1000 more captures. */
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    for (int i = 0; i < 1000; i++)
        recurse_capture(20 + i % 7, frames, 16 + i % 40, (size_t)(i % 3));
    atomic_store(&g_counting, 0);
    long steady = atomic_load(&g_allocs);
    CHECK_EQ(steady, 0);

    /* The first capture of a new thread (libunwind maps its per-thread cache). */
    pthread_t t;
    pthread_create(&t, NULL, first_capture_thread, NULL);
    void *tn;
    pthread_join(t, &tn);
    CHECK((size_t)tn > 0);
    CHECK_EQ(g_first_thread_allocs, 0);

    /* Printing: maps, ELF files, the log line. */
    n = recurse_capture(3, frames, 64, 0);
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    log_frames(frames, n);
    atomic_store(&g_counting, 0);
    long logging = atomic_load(&g_allocs);
    CHECK_EQ(logging, 0);
    CHECK_EQ(g_nlines, n);
    /* The slow path too. */
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    n = recurse_capture(80, frames, 64, 70);
    atomic_store(&g_counting, 0);
    CHECK_EQ(atomic_load(&g_allocs), 0);
    CHECK(n > 10);

    printf("allocations: first capture %ld, 1000 captures %ld, first capture in a thread %ld, "
           "logging %zu frames %ld\n",
           first, steady, g_first_thread_allocs, g_nlines, logging);
}

/* For the record: an unw_step loop, the alternative to unw_backtrace. */
static TEST_NOINLINE size_t step_capture(uintptr_t *frames, size_t max)
{
    unw_context_t uc;
    unw_cursor_t c;
    size_t n = 0;
    unw_getcontext(&uc);
    unw_init_local(&c, &uc);
    while (n < max && unw_step(&c) > 0) {
        unw_word_t ip;
        unw_get_reg(&c, UNW_REG_IP, &ip);
        frames[n++] = ip;
    }
    return n;
}

static TEST_NOINLINE size_t recurse_step(int depth, uintptr_t *frames, size_t max)
{
    size_t n = depth == 0 ? step_capture(frames, max) : recurse_step(depth - 1, frames, max);
    BARRIER();
    return n;
}

static void test_cost(void)
{
    check_context("cost");
    uintptr_t frames[16];
    const int iters = 100000;
    recurse_capture(20, frames, 16, 0);
    double t0 = now_ns();
    for (int i = 0; i < iters; i++)
        recurse_capture(20, frames, 16, 0);
    double fast = (now_ns() - t0) / iters;
    const int step_iters = 2000;
    recurse_step(20, frames, 16);
    t0 = now_ns();
    for (int i = 0; i < step_iters; i++)
        recurse_step(20, frames, 16);
    double slow = (now_ns() - t0) / step_iters;
    printf("capture of 16 frames (20-deep recursion, including the recursion): "
           "hs_backtrace_capture (unw_backtrace) %.0f ns, unw_step loop %.0f ns\n",
           fast, slow);

    uintptr_t many[64];
    size_t n = recurse_capture(10, many, 64, 0);
    t0 = now_ns();
    for (int i = 0; i < 20; i++) {
        g_nlines = 0;
        hs_backtrace_log(many, n);
    }
    printf("hs_backtrace_log of %zu frames: %.0f us\n", n, (now_ns() - t0) / 20 / 1000);
    CHECK(fast > 0);
}

int main(void)
{
    ssize_t len = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
    g_exe[len > 0 ? len : 0] = '\0';
    hs_log_init("test");
    hs_log_set_sink(sink, NULL);

    test_no_malloc(); /* first: it measures the first capture of the process */
    test_chain();
    test_limits();
    test_special_frames();
    test_signals();
    test_signal_frames();
    test_threads();
    test_cost();
    hs_log_set_sink(NULL, NULL);
    return check_report();
}
