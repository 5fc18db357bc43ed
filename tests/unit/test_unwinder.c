/* test_unwinder.c: unit test of the profiler's unwinder of copied stacks
 * (src/profiler/daemon/unwinder.c).
 *
 * Stacks are real: chains of -O2 -fomit-frame-pointer functions in a shared library
 * (unwinder_fixture.c), through libc's qsort (its comparator continues the chain), ending in
 * this file's functions (built with frame pointers), where capture_here() takes the registers
 * with HS_UNWIND_CAPTURE_REGS, asks libunwind's local unw_backtrace for the frames, and copies
 * the stack from rsp to the end of the thread's stack (at most 64 KiB), as the profiler's
 * client does. The unwinder must give libunwind's frames from the copy, in both modes. Stacks
 * are taken on the main thread, on another thread, in a signal handler (the signal frame needs
 * the libdwfl step), through code without CFI (frame-pointer step), and in a forked child that
 * dlopen()ed a library this process never loads, unwound from /proc/CHILD/maps and the copy
 * only. Also: skip ranges, max frames, truncated copies, garbage, unknown pcs, new maps after a
 * dlopen and a dlclose.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include "check.h"
#include "proc_maps.h"
#include "signal_trampoline.h"
#include "unwinder.h"
#include "unwinder_fixture.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK_MAX (64 * 1024)
#define MAX_FRAMES 256

/* One sample, as the client would put it in shared memory, with libunwind's answer. */
struct cap {
    struct hs_unwind_regs regs;
    uintptr_t stack_end; /* end of the capturing thread's stack (set before the chain runs) */
    size_t len;
    size_t nexp;
    uintptr_t exp[MAX_FRAMES];
    uint8_t stack[STACK_MAX];
};

static const enum hs_unwind_mode modes[] = {HS_UNWIND_MODE_CACHED, HS_UNWIND_MODE_DWFL};
static const char *const mode_names[] = {"cached", "dwfl"};

static uintptr_t thread_stack_end(void)
{
    pthread_attr_t a;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return 0;
    pthread_attr_getstack(&a, &addr, &size);
    pthread_attr_destroy(&a);
    return (uintptr_t)addr + size;
}

/* A raw copy of live stack memory, redzones of sanitized builds included (volatile: no memcpy,
 * which sanitizers intercept). */
__attribute__((no_sanitize("address"))) static void copy_raw(uint8_t *dst, uintptr_t src,
                                                             size_t len)
{
    for (size_t i = 0; i + 8 <= len; i += 8) {
        uint64_t v = *(const volatile uint64_t *)(src + i);
        memcpy(dst + i, &v, 8);
    }
}

__attribute__((noinline)) static void capture_here(struct cap *c)
{
    void *tmp[MAX_FRAMES];
    HS_UNWIND_CAPTURE_REGS(&c->regs);
    int n = unw_backtrace(tmp, MAX_FRAMES);
    c->nexp = n > 0 ? (size_t)n : 0;
    /* The unwinder returns call sites: libunwind's return addresses minus 1, except the frame
     * after a signal trampoline (exact). */
    for (size_t i = 0; i < c->nexp; i++)
        c->exp[i] = hs_call_site((uintptr_t)tmp[i],
                                 i > 0 && hs_is_signal_trampoline((uintptr_t)tmp[i - 1]));
    size_t len = c->stack_end - c->regs.rsp;
    if (len > STACK_MAX)
        len = STACK_MAX;
    len &= ~(size_t)7;
    copy_raw(c->stack, c->regs.rsp, len);
    c->len = len;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void leaf_capture(void *arg)
{
    capture_here(arg);
    __asm__ volatile("" ::: "memory");
}

static struct cap *volatile g_sig_cap;

static void on_sigusr1(int sig)
{
    (void)sig;
    capture_here(g_sig_cap);
}

__attribute__((noinline)) static void leaf_signal(void *arg)
{
    g_sig_cap = arg;
    raise(SIGUSR1);
    __asm__ volatile("" ::: "memory");
}

/* Runs the fixture chain on this thread, ending in leaf. */
__attribute__((noinline)) static void run_chain(hs_uwfix_run_fn run, struct cap *c, int levels,
                                                int qsort_at, int realign_at, hs_uwfix_leaf_fn leaf)
{
    memset(&c->regs, 0, sizeof c->regs);
    c->stack_end = thread_stack_end();
    run(levels, qsort_at, realign_at, leaf, c);
    __asm__ volatile("" ::: "memory");
}

struct thread_job {
    struct cap *c;
    int levels, qsort_at, realign_at;
    hs_uwfix_run_fn run;
};

static void *thread_main(void *arg)
{
    struct thread_job *j = arg;
    run_chain(j->run, j->c, j->levels, j->qsort_at, j->realign_at, leaf_capture);
    return NULL;
}

static void run_chain_in_thread(hs_uwfix_run_fn run, struct cap *c, int levels, int qsort_at,
                                int realign_at)
{
    struct thread_job j = {
        .c = c, .levels = levels, .qsort_at = qsort_at, .realign_at = realign_at, .run = run};
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, &j) == 0)
        pthread_join(t, NULL);
}

/* Code without CFI in an anonymous executable mapping, as a JIT would make it: sets up a
 * frame pointer and calls fn(arg). */
typedef void (*jit_fn)(hs_uwfix_leaf_fn fn, void *arg);
static const uint8_t jit_code[] = {
    0x55,             /* push %rbp */
    0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
    0x48, 0x89, 0xf8, /* mov %rdi,%rax */
    0x48, 0x89, 0xf7, /* mov %rsi,%rdi */
    0xff, 0xd0,       /* call *%rax */
    0x5d,             /* pop %rbp */
    0xc3,             /* ret */
};

static char *read_text(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n == cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *len = n;
    return buf;
}

static int set_maps_of(struct hs_unwinder *u, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t len = 0;
    char *text = read_text(path, &len);
    if (!text)
        return -1;
    int r = hs_unwinder_set_maps(u, text, len);
    free(text);
    return r;
}

static struct hs_unwinder *self_unwinder(enum hs_unwind_mode mode)
{
    struct hs_unwinder *u = hs_unwinder_new(getpid(), -1);
    if (!u)
        return NULL;
    hs_unwinder_set_mode(u, mode);
    if (set_maps_of(u, getpid()) != 0) {
        hs_unwinder_free(u);
        return NULL;
    }
    return u;
}

static const char *name_of(uintptr_t pc, char *buf, size_t size)
{
    Dl_info di;
    if (dladdr((void *)pc, &di) && di.dli_fname) {
        snprintf(buf, size, "%s!%s",
                 strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname,
                 di.dli_sname ? di.dli_sname : "?");
    } else {
        snprintf(buf, size, "?");
    }
    return buf;
}

static void dump_frames(const struct cap *c, const uintptr_t *pcs, size_t n)
{
    size_t m = n > c->nexp ? n : c->nexp;
    for (size_t i = 0; i < m; i++) {
        char a[128], b[128];
        fprintf(stderr, "    #%02zu  ours %#14lx %-32s  libunwind %#14lx %s\n", i,
                i < n ? (unsigned long)pcs[i] : 0ul, i < n ? name_of(pcs[i], a, sizeof a) : "",
                i < c->nexp ? (unsigned long)c->exp[i] : 0ul,
                i < c->nexp ? name_of(c->exp[i], b, sizeof b) : "");
    }
}

/* The unwind gave libunwind's frames: pcs[0] is the capture point (libunwind's frame 0 is the
 * return address of its own call, in the same function), then the same frames, as call
 * sites. */
static bool check_same(const struct cap *c, const uintptr_t *pcs, size_t n,
                       const struct hs_unwind_result *res)
{
    bool ok = CHECK_EQ(res->stop, HS_UNWIND_END);
    ok &= CHECK_EQ(n, c->nexp);
    ok &= CHECK(n > 0 && pcs[0] == c->regs.rip);
    bool same = n == c->nexp;
    for (size_t i = 1; i < n && i < c->nexp; i++)
        same &= pcs[i] == c->exp[i];
    ok &= CHECK(same);
    if (!ok || getenv("HS_TEST_VERBOSE"))
        dump_frames(c, pcs, n);
    return ok;
}

static struct cap g_cap, g_cap2;

/* Main thread, another thread, different depths, both modes; a second unwind of the same copy
 * needs no new rule, and the libdwfl step only for the stack-realigning frame. */
static void test_in_process(void)
{
    /* levels, qsort_at, realign_at */
    static const int shapes[][3] = {{3, 0, 0}, {6, 3, 0}, {15, 10, 5}, {20, 20, 19}};
    for (int mi = 0; mi < 2; mi++) {
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        for (int th = 0; th < 2; th++) {
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                char ctx[96];
                snprintf(ctx, sizeof ctx, "%s, %s thread, %d levels, qsort at %d, realign at %d",
                         mode_names[mi], th ? "other" : "main", shapes[s][0], shapes[s][1],
                         shapes[s][2]);
                check_context(ctx);
                struct cap *c = &g_cap;
                if (th)
                    run_chain_in_thread(hs_uwfix_run, c, shapes[s][0], shapes[s][1], shapes[s][2]);
                else
                    run_chain(hs_uwfix_run, c, shapes[s][0], shapes[s][1], shapes[s][2],
                              leaf_capture);
                CHECK(c->nexp >= (size_t)(2 * shapes[s][0] + 4));
                uintptr_t pcs[MAX_FRAMES];
                struct hs_unwind_result res;
                size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
                check_same(c, pcs, n, &res);
                n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
                check_same(c, pcs, n, &res);
                if (modes[mi] == HS_UNWIND_MODE_CACHED) {
                    CHECK_EQ(res.cache_misses, 0);
                    CHECK_EQ(res.slow_steps, shapes[s][2] ? 1 : 0);
                }
            }
        }
        struct hs_unwind_stats st;
        hs_unwinder_stats(u, &st);
        check_context(mode_names[mi]);
        CHECK_EQ(st.unwinds, 16);
        CHECK_EQ(st.stops[HS_UNWIND_END], 16);
        CHECK(st.modules >= 3); /* test, libuwfix, libc, ... */
        if (modes[mi] == HS_UNWIND_MODE_CACHED) {
            CHECK(st.cache_hits > 0);
            CHECK(st.cache_entries > 0 && st.cache_entries == st.cache_misses);
            CHECK(st.cache_bytes >= st.cache_entries * 32);
        }
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

/* The signal trampoline's CFI is DWARF expressions: the cached mode hands that frame to libdwfl,
 * and the frame after it (the interrupted one) is looked up at its exact pc. */
static void test_signal_frame(void)
{
    struct sigaction sa = {.sa_handler = on_sigusr1};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap;
        run_chain(hs_uwfix_run, c, 7, 4, 2, leaf_signal);
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);
        CHECK(res.slow_steps >= 2); /* the signal frame and the realigning frame */
        hs_unwinder_free(u);
    }
    signal(SIGUSR1, SIG_DFL);
    check_context(NULL);
}

/* A frame in an anonymous executable mapping (no module, no CFI): the frame pointer. */
static void test_no_cfi_frame(void)
{
    void *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(code != MAP_FAILED))
        return;
    memcpy(code, jit_code, sizeof jit_code);
    if (!CHECK(mprotect(code, 4096, PROT_READ | PROT_EXEC) == 0))
        return;
    jit_fn jit = (jit_fn)code;
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            break;
        struct cap *c = &g_cap;
        memset(&c->regs, 0, sizeof c->regs);
        c->stack_end = thread_stack_end();
        jit(leaf_capture, c);
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);
        bool in_jit = false;
        for (size_t i = 0; i < n; i++)
            in_jit |= pcs[i] >= (uintptr_t)code && pcs[i] < (uintptr_t)code + sizeof jit_code;
        CHECK(in_jit);
        if (modes[mi] == HS_UNWIND_MODE_CACHED)
            CHECK_EQ(res.fp_steps, 1);
        hs_unwinder_free(u);
    }
    munmap(code, 4096);
    check_context(NULL);
}

/* Frames in a skip range are unwound through and dropped; max frames stops early. */
static void test_skip_and_max(void)
{
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap;
        run_chain(hs_uwfix_run, c, 9, 5, 7, leaf_capture);
        /* libuwfix's code (not &hs_uwfix_run, a PLT address in a non-PIE executable). */
        struct hs_map m = {0};
        for (size_t i = 1; i < c->nexp && m.end == 0; i++) {
            Dl_info di;
            if (dladdr((void *)c->exp[i], &di) && di.dli_fname &&
                strstr(di.dli_fname, "/libuwfix.so"))
                hs_maps_find(0, c->exp[i], &m);
        }
        CHECK(m.end != 0);
        uintptr_t want[MAX_FRAMES];
        size_t nwant = 0, ndrop = 0;
        for (size_t i = 0; i < c->nexp; i++) {
            uintptr_t pc = i == 0 ? c->regs.rip : c->exp[i];
            if (pc >= m.start && pc < m.end)
                ndrop++;
            else
                want[nwant++] = pc;
        }
        CHECK(ndrop >= 18);
        CHECK_EQ(hs_unwinder_skip_range(u, m.start, m.end), 0);
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        CHECK_EQ(res.stop, HS_UNWIND_END);
        CHECK_EQ(res.dropped, ndrop);
        CHECK(n == nwant && memcmp(pcs, want, n * sizeof *pcs) == 0);
        CHECK_EQ(hs_unwinder_skip_range(u, 2, 1), -1);
        CHECK_EQ(hs_unwinder_skip_range(u, 0, 0), 0);

        n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, 3, &res);
        CHECK_EQ(n, 3);
        CHECK_EQ(res.stop, HS_UNWIND_MAX_FRAMES);
        CHECK(pcs[0] == c->regs.rip && pcs[1] == c->exp[1] && pcs[2] == c->exp[2]);
        n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, 0, &res);
        CHECK_EQ(n, 0);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

/* Copies cut short give a prefix of the full unwind and stop with TRUNCATED; a copy cut where
 * the complete unwind stopped reading (copy_used) gives the whole. */
static void test_truncated(void)
{
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap;
        run_chain_in_thread(hs_uwfix_run, c, 12, 6, 9);
        uintptr_t full[MAX_FRAMES], pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t nfull = hs_unwind(u, &c->regs, c->stack, c->len, full, MAX_FRAMES, &res);
        check_same(c, full, nfull, &res);
        /* What the complete unwind read is all it needs: cut there, the same frames; a word
         * less, truncated. */
        size_t used = res.copy_used;
        CHECK(used >= 8 && used <= c->len);
        size_t n_used = hs_unwind(u, &c->regs, c->stack, used, pcs, MAX_FRAMES, &res);
        CHECK_EQ(res.stop, HS_UNWIND_END);
        CHECK(n_used == nfull && memcmp(pcs, full, n_used * sizeof *pcs) == 0);
        CHECK_EQ(res.copy_used, used);
        hs_unwind(u, &c->regs, c->stack, used - 8, pcs, MAX_FRAMES, &res);
        CHECK_EQ(res.stop, HS_UNWIND_TRUNCATED);
        CHECK(res.copy_used <= used - 8);
        bool prefix = true, stops = true, monotonic = true;
        size_t last = 0, ntrunc = 0;
        size_t step = modes[mi] == HS_UNWIND_MODE_CACHED ? 8 : 40;
        for (size_t len = 0; len <= c->len; len += step) {
            size_t n = hs_unwind(u, &c->regs, c->stack, len, pcs, MAX_FRAMES, &res);
            prefix &= n <= nfull && memcmp(pcs, full, n * sizeof *pcs) == 0;
            if (res.stop == HS_UNWIND_TRUNCATED)
                ntrunc++;
            else
                stops &= res.stop == HS_UNWIND_END && n == nfull;
            monotonic &= n >= last;
            last = n;
        }
        CHECK(prefix);
        CHECK(stops);
        CHECK(monotonic);
        CHECK(ntrunc > 0);
        /* No copy at all: only the capture point. */
        size_t n = hs_unwind(u, &c->regs, NULL, 0, pcs, MAX_FRAMES, &res);
        CHECK_EQ(n, 1);
        CHECK_EQ(res.stop, HS_UNWIND_TRUNCATED);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

/* The copy of c without the n gaps, into out (as the client's hs_stack_copy_without_gaps);
 * returns its length. */
static size_t copy_without(const struct cap *c, const struct hs_stack_gap *g, unsigned n,
                           uint8_t *out)
{
    size_t at = 0, len = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(out + len, c->stack + at, g[i].off - at);
        len += g[i].off - at;
        at = (size_t)g[i].off + g[i].len;
    }
    memcpy(out + len, c->stack + at, c->len - at);
    return len + c->len - at;
}

static uint8_t g_gapped[STACK_MAX];

/* A complete unwind names the longest parts of the copy it did not read (the 600-byte
 * buffers of the fixture's large frames); a copy without them gives the same frames, reads
 * the same and names the same parts; a gap one word longer, over a word the unwind reads,
 * ends it truncated (read_in_gap) with a prefix of the frames; gaps that do not fit the span
 * are refused before any read. */
static void test_gaps(void)
{
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap;
        run_chain_in_thread(hs_uwfix_run, c, 12, 6, 9);
        uintptr_t full[MAX_FRAMES], pcs[MAX_FRAMES];
        struct hs_unwind_result res, res2;
        size_t nfull = hs_unwind(u, &c->regs, c->stack, c->len, full, MAX_FRAMES, &res);
        check_same(c, full, nfull, &res);
        /* Not asked for: the same unwind, without the parts. */
        hs_unwinder_want_parts(u, false);
        size_t n0 = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        CHECK(n0 == nfull && !res.parts_known && res.nunread == 0 && res.nouter == 0);
        hs_unwinder_want_parts(u, true);
        nfull = hs_unwind(u, &c->regs, c->stack, c->len, full, MAX_FRAMES, &res);
        CHECK(res.parts_known && res.nouter > 0 && res.outer[0].off + 8 == res.copy_used);
        CHECK(res.nunread >= HS_STACK_GAPS && res.nunread <= HS_UNWIND_UNREAD);
        CHECK(hs_stack_gaps_in_order(res.unread, res.nunread, c->len));
        /* The capture's own frame (its locals, below the first word read), then the
         * fixture's 600-byte buffers (more with a sanitizer's redzones). */
        unsigned big = 0;
        for (unsigned i = 0; i < res.nunread; i++) {
            CHECK(res.unread[i].len >= HS_STACK_GAP_MIN);
            big += res.unread[i].len >= 600;
        }
        CHECK(big >= 3);
        CHECK(!res.read_in_gap);
        /* A sample leaves out at most HS_STACK_GAPS of them: the lowest. */
        unsigned ng = res.nunread < HS_STACK_GAPS ? res.nunread : HS_STACK_GAPS;
        size_t len = copy_without(c, res.unread, ng, g_gapped);
        CHECK_EQ(len + hs_stack_gaps_bytes(res.unread, ng), c->len);
        size_t n =
            hs_unwind_gapped(u, &c->regs, g_gapped, len, res.unread, ng, pcs, MAX_FRAMES, &res2);
        CHECK_EQ(res2.stop, HS_UNWIND_END);
        CHECK(n == nfull && memcmp(pcs, full, n * sizeof *pcs) == 0);
        CHECK_EQ(res2.copy_used, res.copy_used);
        CHECK(!res2.read_in_gap);
        CHECK(res2.nunread == res.nunread &&
              memcmp(res2.unread, res.unread, res.nunread * sizeof res.unread[0]) == 0);
        /* The middle gap a word longer: the word after it is one the unwind reads. */
        struct hs_stack_gap wider[HS_STACK_GAPS];
        memcpy(wider, res.unread, sizeof wider);
        wider[1].len += 8;
        if (CHECK(hs_stack_gaps_valid(wider, ng, c->len))) {
            len = copy_without(c, wider, ng, g_gapped);
            n = hs_unwind_gapped(u, &c->regs, g_gapped, len, wider, ng, pcs, MAX_FRAMES, &res2);
            CHECK_EQ(res2.stop, HS_UNWIND_TRUNCATED);
            CHECK(res2.read_in_gap);
            CHECK_EQ(res2.nunread, 0);
            CHECK(n > 1 && n < nfull && memcmp(pcs, full, n * sizeof *pcs) == 0);
        }
        /* Gaps that do not fit a span of 64 bytes and theirs: at the very start, up to the
         * span's end, misaligned, unordered. */
        struct hs_stack_gap bad[4][2] = {{{0, 64}}, {{64, 64}}, {{12, 64}}, {{800, 64}, {64, 64}}};
        unsigned nbad[4] = {1, 1, 1, 2};
        for (int b = 0; b < 4; b++) {
            n = hs_unwind_gapped(u, &c->regs, c->stack, 64, bad[b], nbad[b], pcs, MAX_FRAMES,
                                 &res2);
            CHECK_EQ(n, 0);
            CHECK_EQ(res2.stop, HS_UNWIND_BAD_FRAME);
        }
        /* More gaps than a sample has: refused before they are read. */
        n = hs_unwind_gapped(u, &c->regs, c->stack, 64, res.unread, HS_STACK_GAPS + 1000, pcs,
                             MAX_FRAMES, &res2);
        CHECK_EQ(n, 0);
        CHECK_EQ(res2.stop, HS_UNWIND_BAD_FRAME);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

struct exec_ranges {
    uintptr_t lo[512], hi[512];
    size_t n;
};

static int collect_exec(const struct hs_map *m, void *arg)
{
    struct exec_ranges *r = arg;
    if ((m->perms & HS_MAP_EXEC) && r->n < 512) {
        r->lo[r->n] = m->start;
        r->hi[r->n] = m->end;
        r->n++;
    }
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random registers and stacks (random words, code addresses, addresses inside the copy): no
 * crash, bounded depth, every pc returned in executable memory. */
static void test_garbage(void)
{
    static struct exec_ranges ex;
    hs_maps_foreach(0, collect_exec, &ex);
    if (!CHECK(ex.n > 0))
        return;
    int mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = hs_unwinder_new(getpid(), mi ? mem_fd : -1);
        if (!CHECK(u != NULL))
            break;
        hs_unwinder_set_mode(u, modes[mi]);
        CHECK_EQ(set_maps_of(u, getpid()), 0);
        hs_unwinder_set_cache_limit(u, 100); /* exercise the flushes too */
        static uint64_t stack[1024];
        int iters = modes[mi] == HS_UNWIND_MODE_CACHED ? 20000 : 2000;
        bool bounded = true, in_code = true;
        unsigned long frames = 0;
        for (int it = 0; it < iters; it++) {
            uint64_t base = (it % 3 == 0) ? (uint64_t)-4096 : 0x7ff000000000ull + (rnd() & 0xfff8);
            size_t words = (size_t)(rnd() % 1024) + 1;
            for (size_t w = 0; w < words; w++) {
                size_t k = rnd() % ex.n;
                switch (rnd() % 4) {
                case 0:
                    stack[w] = rnd();
                    break;
                case 1:
                    stack[w] = ex.lo[k] + rnd() % (ex.hi[k] - ex.lo[k]);
                    break;
                case 2:
                    stack[w] = base + (rnd() % (words + 16)) * 8;
                    break;
                default:
                    stack[w] = rnd() % 64;
                    break;
                }
            }
            struct hs_unwind_regs regs;
            for (int r = 0; r < HS_UNWIND_NREGS; r++)
                regs.dwarf[r] = stack[rnd() % words];
            size_t k = rnd() % ex.n;
            regs.rip = ex.lo[k] + rnd() % (ex.hi[k] - ex.lo[k]);
            regs.rsp = base;
            regs.rbp = base + (rnd() % words) * 8;
            uintptr_t pcs[64];
            struct hs_unwind_result res;
            size_t n = hs_unwind(u, &regs, stack, words * 8, pcs, 64, &res);
            bounded &= n <= 64 && res.steps <= HS_UNWIND_MAX_STEPS;
            for (size_t i = 0; i < n; i++) {
                struct hs_map m;
                bool ok = false;
                for (size_t e = 0; e < ex.n && !ok; e++)
                    ok = pcs[i] >= ex.lo[e] && pcs[i] < ex.hi[e];
                (void)m;
                in_code &= ok;
            }
            frames += n;
        }
        CHECK(bounded);
        CHECK(in_code);
        CHECK(frames >= (unsigned long)iters); /* at least the first frame each time */
        struct hs_unwind_stats st;
        hs_unwinder_stats(u, &st);
        if (getenv("HS_TEST_VERBOSE")) {
            printf("garbage, %s: %d unwinds, %lu frames, %llu slow steps, %llu fp steps, stops:",
                   mode_names[mi], iters, frames, (unsigned long long)st.slow_steps,
                   (unsigned long long)st.fp_steps);
            for (int k = 0; k <= HS_UNWIND_BAD_FRAME; k++)
                printf(" %llu", (unsigned long long)st.stops[k]);
            printf("\n");
        }
        CHECK_EQ(st.unwinds, iters);
        if (modes[mi] == HS_UNWIND_MODE_CACHED)
            CHECK(st.cache_flushes > 0 && st.cache_entries <= 100);
        /* Still right after all that. */
        struct cap *c = &g_cap;
        run_chain(hs_uwfix_run, c, 5, 2, 4, leaf_capture);
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);
        hs_unwinder_free(u);
    }
    if (mem_fd >= 0)
        close(mem_fd);
    check_context(NULL);
}

/* Real stacks with a few words overwritten (random values, code addresses, addresses inside
 * the copy): no crash, bounded depth, every pc returned in executable memory, frame 0 kept. */
static void test_mutated(void)
{
    static struct exec_ranges ex;
    hs_maps_foreach(0, collect_exec, &ex);
    if (!CHECK(ex.n > 0))
        return;
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap, *d = &g_cap2;
        run_chain_in_thread(hs_uwfix_run, c, 16, 8, 12);
        uintptr_t full[MAX_FRAMES], pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t nfull = hs_unwind(u, &c->regs, c->stack, c->len, full, MAX_FRAMES, &res);
        check_same(c, full, nfull, &res);
        /* The frames' part of the copy. */
        size_t span = c->len < 4096 ? c->len : 4096;
        int iters = modes[mi] == HS_UNWIND_MODE_CACHED ? 20000 : 1000;
        bool bounded = true, in_code = true, first = true;
        unsigned long frames = 0;
        *d = *c;
        for (int it = 0; it < iters; it++) {
            memcpy(d->stack, c->stack, span);
            int nmut = 1 + (int)(rnd() % 3);
            for (int k = 0; k < nmut; k++) {
                size_t w = rnd() % (span / 8);
                uint64_t v;
                size_t e = rnd() % ex.n;
                switch (rnd() % 3) {
                case 0:
                    v = rnd();
                    break;
                case 1:
                    v = ex.lo[e] + rnd() % (ex.hi[e] - ex.lo[e]);
                    break;
                default:
                    v = c->regs.rsp + (rnd() % (span / 8)) * 8;
                    break;
                }
                memcpy(d->stack + w * 8, &v, 8);
            }
            size_t n = hs_unwind(u, &d->regs, d->stack, d->len, pcs, MAX_FRAMES, &res);
            bounded &= n <= MAX_FRAMES && res.steps <= HS_UNWIND_MAX_STEPS;
            first &= n >= 1 && pcs[0] == full[0];
            for (size_t i = 0; i < n; i++) {
                bool ok = false;
                for (size_t e = 0; e < ex.n && !ok; e++)
                    ok = pcs[i] >= ex.lo[e] && pcs[i] < ex.hi[e];
                in_code &= ok;
            }
            frames += n;
        }
        CHECK(bounded);
        CHECK(in_code);
        CHECK(first);
        if (getenv("HS_TEST_VERBOSE"))
            printf("mutated, %s: %d unwinds, %lu frames (clean: %zu each)\n", mode_names[mi], iters,
                   frames, nfull);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

/* A pc in no mapping is reported for a maps refresh; a pc in data is garbage. */
static void test_unknown_pc(void)
{
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        struct cap *c = &g_cap;
        run_chain(hs_uwfix_run, c, 4, 0, 0, leaf_capture);
        struct hs_unwind_regs regs = c->regs;
        uintptr_t pcs[8];
        struct hs_unwind_result res;
        regs.rip = 0x1000; /* below mmap_min_addr: never mapped */
        size_t n = hs_unwind(u, &regs, c->stack, c->len, pcs, 8, &res);
        CHECK_EQ(n, 0);
        CHECK_EQ(res.stop, HS_UNWIND_UNKNOWN_MAP);
        CHECK_EQ(res.stop_pc, 0x1000);
        regs.rip = (uintptr_t)&g_cap; /* data */
        n = hs_unwind(u, &regs, c->stack, c->len, pcs, 8, &res);
        CHECK_EQ(n, 0);
        CHECK_EQ(res.stop, HS_UNWIND_NOT_CODE);
        regs.rip = 0;
        n = hs_unwind(u, &regs, c->stack, c->len, pcs, 8, &res);
        CHECK_EQ(n, 0);
        CHECK_EQ(res.stop, HS_UNWIND_NOT_CODE);
        /* A return address into nowhere, one frame up: the frames below it are kept. */
        struct cap *d = &g_cap2;
        *d = *c;
        /* The slot of the return address of frame 2 (not capture_here's copy in tmp[], where
         * the return addresses follow one another). */
        size_t slot = 0;
        for (size_t off = 8; off + 16 <= d->len; off += 8) {
            uint64_t v, prev, next;
            memcpy(&v, d->stack + off, 8);
            memcpy(&prev, d->stack + off - 8, 8);
            memcpy(&next, d->stack + off + 8, 8);
            if (v == d->exp[2] + 1 && prev != d->exp[1] + 1 && next != d->exp[3] + 1) {
                slot = off;
                break;
            }
        }
        if (CHECK(slot != 0)) {
            uint64_t bogus = 0x1008;
            memcpy(d->stack + slot, &bogus, 8);
            n = hs_unwind(u, &d->regs, d->stack, d->len, pcs, 8, &res);
            CHECK_EQ(n, 2);
            CHECK_EQ(res.stop, HS_UNWIND_UNKNOWN_MAP);
            CHECK_EQ(res.stop_pc, 0x1008);
        }
        struct hs_unwind_stats st;
        hs_unwinder_stats(u, &st);
        CHECK(st.stops[HS_UNWIND_UNKNOWN_MAP] >= 1);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

/* ---- Another process ---------------------------------------------------------------------- */

static bool pc_in_self(uintptr_t pc)
{
    struct hs_map m;
    return hs_maps_find(0, pc, &m);
}

/* A forked child dlopen()s libuwfix_dl (never loaded here), runs the chain on a new thread and
 * leaves the sample in shared memory; this process unwinds it from the child's maps and the
 * copy, with and without /proc/CHILD/mem. */
static void test_other_process(void)
{
    check_context("other process");
    struct cap *c =
        mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(c != MAP_FAILED))
        return;
    int ready[2], done[2];
    if (!CHECK(pipe(ready) == 0 && pipe(done) == 0))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(done[1]);
        char ok = 0;
        void *h = dlopen(HS_UWFIX_DL, RTLD_NOW | RTLD_LOCAL);
        hs_uwfix_run_fn run = h ? (hs_uwfix_run_fn)dlsym(h, "hs_uwfix_run") : NULL;
        if (run) {
            run_chain_in_thread(run, c, 14, 7, 11);
            ok = 1;
        }
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        /* Stay alive (with the thread's stack gone) until the parent is done. */
        if (read(done[0], &ok, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    char ok = 0;
    if (read(ready[0], &ok, 1) != 1 || !CHECK(ok == 1))
        goto out;
    /* The frames of libuwfix_dl exist only in the child. */
    size_t foreign = 0;
    for (size_t i = 1; i < c->nexp; i++)
        foreign += !pc_in_self(c->exp[i]);
    CHECK(foreign >= 28);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem_fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(mem_fd >= 0);
    for (int mi = 0; mi < 2; mi++) {
        for (int with_mem = 0; with_mem < 2; with_mem++) {
            char ctx[64];
            snprintf(ctx, sizeof ctx, "other process, %s, %s", mode_names[mi],
                     with_mem ? "with /proc/PID/mem" : "copy only");
            check_context(ctx);
            struct hs_unwinder *u = hs_unwinder_new(pid, with_mem ? mem_fd : -1);
            if (!CHECK(u != NULL))
                continue;
            hs_unwinder_set_mode(u, modes[mi]);
            CHECK_EQ(set_maps_of(u, pid), 0);
            uintptr_t pcs[MAX_FRAMES];
            struct hs_unwind_result res;
            size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
            check_same(c, pcs, n, &res);
            hs_unwinder_free(u);
        }
    }
    if (mem_fd >= 0)
        close(mem_fd);
out:
    ok = 1;
    if (write(done[1], &ok, 1) != 1)
        CHECK(false);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(done[1]);
    munmap(c, sizeof *c);
    check_context(NULL);
}

/* Maps read before a dlopen do not know the library: the unwind stops there with
 * UNKNOWN_MAP, and succeeds after the maps are set again (the Dwfl and the rules kept). After
 * dlclose the new maps drop the library (the Dwfl is rebuilt). */
static void test_dlopen_maps(void)
{
    for (int mi = 0; mi < 2; mi++) {
        check_context(mode_names[mi]);
        struct hs_unwinder *u = self_unwinder(modes[mi]);
        if (!CHECK(u != NULL))
            return;
        /* Warm the rules with a stack that does not use the new library. */
        struct cap *c = &g_cap;
        run_chain(hs_uwfix_run, c, 6, 3, 0, leaf_capture);
        uintptr_t pcs[MAX_FRAMES];
        struct hs_unwind_result res;
        size_t n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);

        void *h = dlopen(HS_UWFIX_DL, RTLD_NOW | RTLD_LOCAL);
        hs_uwfix_run_fn run = h ? (hs_uwfix_run_fn)dlsym(h, "hs_uwfix_run") : NULL;
        if (!CHECK(run != NULL)) {
            hs_unwinder_free(u);
            return;
        }
        struct cap *d = &g_cap2;
        run_chain(run, d, 10, 5, 8, leaf_capture);
        n = hs_unwind(u, &d->regs, d->stack, d->len, pcs, MAX_FRAMES, &res);
        CHECK_EQ(res.stop, HS_UNWIND_UNKNOWN_MAP);
        CHECK_EQ(n, 2); /* capture_here, leaf_capture */
        Dl_info di;
        CHECK(dladdr((void *)res.stop_pc, &di) && di.dli_fname && strstr(di.dli_fname, "uwfix_dl"));

        CHECK_EQ(set_maps_of(u, getpid()), 0);
        n = hs_unwind(u, &d->regs, d->stack, d->len, pcs, MAX_FRAMES, &res);
        check_same(d, pcs, n, &res);
        n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);
        struct hs_unwind_stats st;
        hs_unwinder_stats(u, &st);
        CHECK_EQ(st.dwfl_rebuilds, 0);
        if (modes[mi] == HS_UNWIND_MODE_CACHED)
            CHECK_EQ(res.cache_misses, 0);

        CHECK_EQ(dlclose(h), 0);
        CHECK_EQ(set_maps_of(u, getpid()), 0);
        hs_unwinder_stats(u, &st);
        CHECK_EQ(st.dwfl_rebuilds, 1);
        n = hs_unwind(u, &d->regs, d->stack, d->len, pcs, MAX_FRAMES, &res);
        CHECK_EQ(res.stop, HS_UNWIND_UNKNOWN_MAP);
        CHECK_EQ(n, 2);
        n = hs_unwind(u, &c->regs, c->stack, c->len, pcs, MAX_FRAMES, &res);
        check_same(c, pcs, n, &res);
        hs_unwinder_free(u);
    }
    check_context(NULL);
}

int main(void)
{
    /* Before anything here loads libuwfix_dl. */
    test_other_process();
    test_in_process();
    test_signal_frame();
    test_no_cfi_frame();
    test_skip_and_max();
    test_truncated();
    test_gaps();
    test_unknown_pc();
    test_garbage();
    test_mutated();
    test_dlopen_maps();
    hs_unwinder_free(NULL);
    return check_report();
}
