/* injected.c: heapscope_unreachable_injected_init (include/heapscope/memunreachable_injected.h)
 * and the check signal of the injected mode.
 *
 * The library's constructors stay inert when it is dlopen'ed into a running process: the
 * embedded malloc debug copy sees that the program's malloc is not its own and stays a
 * pass-through (src/malloc_debug/init.c), and nothing else starts at load. Only this function
 * changes the process: a SIGRTMAX-16 handler that wakes a small thread ("hs-unreachable"),
 * which runs the check (heapscope_unreachable_check) outside the handler, as malloc debug's
 * check_unreachable_on_signal does (both through signal_worker.h).
 *
 * The library is pinned (RTLD_NODELETE): the handler must not outlive its code.
 *
 * The process's stderr is its owner's: in this mode the library's log lines (a check that
 * failed, and why) are kept here instead, and the check hands them to the command in its
 * report file; the report itself goes only there.
 */
#define _GNU_SOURCE
#include "heapscope/memunreachable_injected.h"

#include "injected.h"
#include "log.h"
#include "signal_worker.h"
#include "symbol_binding.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HS_EXPORT __attribute__((visibility("default")))

static int g_injected;                                          /* set once init succeeded */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER; /* serializes init */

/* The log lines of the current check (their bodies, one a line), for its report. Filled by
 * every part of the check without a lock (each line reserves its place; what does not fit is
 * dropped): the check's thread, the collector (which shares our memory) and the sweeper (a
 * forked process: the page is mapped shared, so that its lines reach us too). */
#define KEPT_LOG_BYTES 4096
struct kept_log {
    size_t len;
    char text[KEPT_LOG_BYTES - sizeof(size_t)];
};
static struct kept_log g_private_log; /* when no shared page could be mapped */
static struct kept_log *g_kept = &g_private_log;

bool hs_mu_injected(void)
{
    return __atomic_load_n(&g_injected, __ATOMIC_ACQUIRE) != 0;
}

/* The log's sink in this mode: "<program>[<pid>] <tag>: <body>\n" kept as "<body>\n". */
static void keep_line(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    const char *end = line + len, *body = memchr(line, ']', len);
    for (body = body ? body : line; body + 1 < end && !(body[0] == ':' && body[1] == ' '); body++)
        ;
    body = body + 1 < end ? body + 2 : line;
    size_t n = (size_t)(end - body), cap = sizeof(g_kept->text);
    size_t at = __atomic_fetch_add(&g_kept->len, n, __ATOMIC_RELAXED);
    if (at < cap && n <= cap - at)
        memcpy(g_kept->text + at, body, n);
}

void hs_mu_injected_log_reset(void)
{
    __atomic_store_n(&g_kept->len, 0, __ATOMIC_RELAXED);
}

const char *hs_mu_injected_log(size_t *len)
{
    size_t n = __atomic_load_n(&g_kept->len, __ATOMIC_ACQUIRE), cap = sizeof(g_kept->text);
    *len = n < cap ? n : cap;
    /* A line that did not fit left a hole only at the end: cut at the last whole line. */
    while (*len > 0 && g_kept->text[*len - 1] != '\n')
        (*len)--;
    return g_kept->text;
}

static int check_signal(void)
{
    return SIGRTMAX - 16;
}

/* glibc's malloc is the one the program calls: libc.so.6's functions are what the global
 * scope binds the names to (symbol_binding.h). */
static int check_allocator(void)
{
    static const char *const names[] = {"malloc", "free", "calloc", "realloc", "memalign"};
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc)
        return HEAPSCOPE_INJECTED_NOT_GLIBC_MALLOC;
    bool glibc = true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && glibc; i++) {
        void *fn = dlsym(libc, names[i]);
        glibc = fn != NULL && hs_symbol_binds_to(names[i], fn);
    }
    dlclose(libc); /* drops the reference NOLOAD took */
    if (glibc)
        return HEAPSCOPE_INJECTED_OK;
    /* heapscope's shim (preloaded, or this library linked in) answers malloc_iterate. */
    return dlsym(RTLD_DEFAULT, "malloc_iterate") ? HEAPSCOPE_INJECTED_HEAPSCOPE_MALLOC
                                                 : HEAPSCOPE_INJECTED_NOT_GLIBC_MALLOC;
}

/* Safe-linking and the heap layouts the walk knows: glibc 2.32 and later. */
bool hs_mu_glibc_walkable(void)
{
    const char *v = gnu_get_libc_version();
    char *end;
    long major = strtol(v, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return major > 2 || (major == 2 && minor >= 32);
}

static int check_glibc_version(void)
{
    return hs_mu_glibc_walkable() ? HEAPSCOPE_INJECTED_OK : HEAPSCOPE_INJECTED_OLD_GLIBC;
}

/* Keeps this library loaded for good: the handler and the thread run its code. */
static void pin_library(void)
{
    Dl_info self;
    if (dladdr((void *)&heapscope_unreachable_injected_init, &self) && self.dli_fname)
        dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static int init(void)
{
    int sig = check_signal();
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0)
        return HEAPSCOPE_INJECTED_SETUP_FAILED;
    if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL
                                    : old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
        return HEAPSCOPE_INJECTED_SIGNAL_IN_USE;
    int r = check_allocator();
    if (r == HEAPSCOPE_INJECTED_OK)
        r = check_glibc_version();
    if (r != HEAPSCOPE_INJECTED_OK)
        return r;
    /* The mode first: a signal arriving right after the handler finds it set. */
    void *shared = mmap(NULL, sizeof(struct kept_log), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared != MAP_FAILED)
        g_kept = shared; /* kept for good, like the library */
    hs_log_set_sink(keep_line, NULL);
    __atomic_store_n(&g_injected, 1, __ATOMIC_RELEASE);
    if (hs_signal_worker_start(sig, "hs-unreachable", heapscope_unreachable_check) != 0) {
        /* A thread already started stays, idle (only the handler wakes it). */
        __atomic_store_n(&g_injected, 0, __ATOMIC_RELEASE);
        hs_log_set_sink(NULL, NULL);
        return HEAPSCOPE_INJECTED_SETUP_FAILED;
    }
    pin_library();
    return HEAPSCOPE_INJECTED_OK;
}

HS_EXPORT int heapscope_unreachable_injected_init(void)
{
    if (hs_mu_injected())
        return HEAPSCOPE_INJECTED_OK;
    pthread_mutex_lock(&g_init_lock);
    int r = hs_mu_injected() ? HEAPSCOPE_INJECTED_OK : init();
    pthread_mutex_unlock(&g_init_lock);
    return r;
}
