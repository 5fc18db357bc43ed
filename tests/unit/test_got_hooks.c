/* test_got_hooks.c: the profiler client's GOT redirection (src/profiler/client/got_hooks.c),
 * without any preload: libgh_now (-z now -z relro), libgh_lazy (-z lazy -z norelro) and
 * libgh_noplt (-fno-plt: GLOB_DAT slots) are linked, libgh_late is dlopen'ed by bare name after
 * apply (found through this program's RUNPATH only), libgh_deep is bound to an allocator of
 * its own (RTLD_DEEPBIND), libgh_ifunc scans from an IFUNC resolver while being relocated.
 * The module itself lives in libgh_module.so, which must never be patched.
 *
 * The replacements count the calls of threads that asked for it and forward to glibc; each
 * library's work makes 1 malloc, 1 calloc, 1 realloc, 1 posix_memalign, 1 valloc (a hook
 * whose expected function is not glibc's: never redirected) and 4 free. */
#define _GNU_SOURCE
#include "check.h"
#include "got_hooks.h"
#include "libc_alloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int gh_now_work(void);
int gh_lazy_work(void);
int gh_noplt_work(void);
int gh_self_work(void);
void *gh_self_dlopen(const char *name, int flags);

/* ---- The replacements ------------------------------------------------------------------------ */

enum { C_MALLOC, C_CALLOC, C_REALLOC, C_MEMALIGN, C_VALLOC, C_FREE, N_COUNTS };
static unsigned long counts[N_COUNTS];
static __thread int tl_counting;

static void count(int which)
{
    if (tl_counting)
        __atomic_fetch_add(&counts[which], 1, __ATOMIC_RELAXED);
}

static void *count_malloc(size_t n)
{
    count(C_MALLOC);
    return __libc_malloc(n);
}

static void *count_calloc(size_t n, size_t size)
{
    count(C_CALLOC);
    return __libc_calloc(n, size);
}

static void *count_realloc(void *p, size_t n)
{
    count(C_REALLOC);
    return __libc_realloc(p, n);
}

static int count_posix_memalign(void **out, size_t align, size_t n)
{
    count(C_MEMALIGN);
    return hs_libc_posix_memalign(out, align, n);
}

static void *count_valloc(size_t n)
{
    count(C_VALLOC);
    return __libc_valloc(n);
}

static void count_free(void *p)
{
    count(C_FREE);
    __libc_free(p);
}

static void not_glibc(void) {}

enum { H_MALLOC, H_CALLOC, H_REALLOC, H_MEMALIGN, H_FREE, H_VALLOC, N_HOOKS };
static struct hs_got_hook hooks[N_HOOKS] = {
    [H_MALLOC] = {"malloc", (void *)count_malloc, NULL},
    [H_CALLOC] = {"calloc", (void *)count_calloc, NULL},
    [H_REALLOC] = {"realloc", (void *)count_realloc, NULL},
    [H_MEMALIGN] = {"posix_memalign", (void *)count_posix_memalign, NULL},
    [H_FREE] = {"free", (void *)count_free, NULL},
    /* Expects something else than glibc's valloc: no slot is ever redirected. */
    [H_VALLOC] = {"valloc", (void *)count_valloc, (void *)not_glibc},
};

/* The program's own work, through its own GOT. */
void *volatile main_sink;

static int main_work(void)
{
    void *p = malloc(16);
    void *q = calloc(2, 8);
    p = realloc(p, 64);
    void *r = NULL;
    int err = posix_memalign(&r, 64, 32);
    void *v = valloc(16);
    main_sink = p;
    main_sink = q;
    main_sink = r;
    main_sink = v;
    free(p);
    free(q);
    free(r);
    free(v);
    return p != NULL && q != NULL && err == 0 && v != NULL ? 0 : -1;
}

struct tally {
    unsigned long c[N_COUNTS];
};

static struct tally tally_now(void)
{
    struct tally t;
    for (int i = 0; i < N_COUNTS; i++)
        t.c[i] = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
    return t;
}

/* Runs work with counting on; returns the calls counted. */
static struct tally run_counted(int (*work)(void))
{
    struct tally before = tally_now();
    tl_counting = 1;
    int ret = work();
    tl_counting = 0;
    CHECK_EQ(ret, 0);
    struct tally after = tally_now();
    for (int i = 0; i < N_COUNTS; i++)
        after.c[i] -= before.c[i];
    return after;
}

/* Checks that work's calls were all counted (hooked) or none (not). */
static void check_work_at(int (*work)(void), bool hooked, const char *what, int line)
{
    struct tally t = run_counted(work);
    static const unsigned long expect[N_COUNTS] = {1, 1, 1, 1, 0, 4};
    bool ok = true;
    for (int i = 0; i < N_COUNTS; i++)
        ok &= t.c[i] == (hooked ? expect[i] : 0);
    if (!check_at(ok, __FILE__, line, what))
        fprintf(stderr,
                "    %s: malloc %lu calloc %lu realloc %lu posix_memalign %lu valloc %lu "
                "free %lu (expected %s)\n",
                what, t.c[0], t.c[1], t.c[2], t.c[3], t.c[4], t.c[5],
                hooked ? "1 1 1 1 0 4" : "none");
}
#define CHECK_WORK(work, hooked) check_work_at(work, hooked, #work, __LINE__)

/* ---- Looking at the recorded slots ----------------------------------------------------------- */

static struct hs_got_slot_info infos[HS_GOT_MAX_SLOTS];

static size_t slots_now(void)
{
    size_t n = hs_got_slots(infos, HS_GOT_MAX_SLOTS);
    return n < HS_GOT_MAX_SLOTS ? n : HS_GOT_MAX_SLOTS;
}

static bool in_object(const struct hs_got_slot_info *s, const char *lib)
{
    return s->object != NULL &&
           (lib[0] == '\0' ? s->object[0] == '\0' : strstr(s->object, lib) != NULL);
}

/* Slots of lib; *relro counts those in its RELRO range. */
static unsigned slots_of(const char *lib, unsigned *relro)
{
    size_t n = slots_now();
    unsigned found = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        if (in_object(&infos[i], lib)) {
            found++;
            r += infos[i].relro;
        }
    }
    if (relro)
        *relro = r;
    return found;
}

/* The protection of the page holding addr, from /proc/self/maps ("r--p", ...). */
static bool page_perms(const void *addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi) {
            memcpy(perms, p, 5);
            found = true;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Every recorded slot of a loaded object holds the replacement (hooked) or its original (a
 * lazily bound slot may come back as glibc's function, which its stub resolves to). RELRO
 * slots are back on read-only pages. */
static void check_slot_values(bool hooked)
{
    size_t n = slots_now();
    unsigned bad = 0, checked = 0, relro_bad = 0;
    for (size_t i = 0; i < n; i++) {
        const struct hs_got_slot_info *s = &infos[i];
        if (s->current == NULL)
            continue; /* object gone */
        checked++;
        if (s->hook >= N_HOOKS) { /* the module's own: dlopen, dlmopen, dlclose */
            static const char *const names[] = {"dlopen", "dlmopen", "dlclose"};
            void *glibc =
                s->hook < N_HOOKS + 3 ? dlsym(RTLD_DEFAULT, names[s->hook - N_HOOKS]) : NULL;
            if (hooked)
                bad += s->current == s->original || s->current == glibc;
            else
                bad += s->current != s->original && s->current != glibc;
            continue;
        }
        if (hooked)
            bad += s->current != hooks[s->hook].replacement;
        else
            bad += s->current != s->original && s->current != hooks[s->hook].expected;
        if (s->relro) {
            char perms[5] = "";
            relro_bad += !page_perms(s->slot, perms) || perms[1] != '-';
        }
    }
    CHECK(checked > 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(relro_bad, 0);
}

/* ---- The tests ------------------------------------------------------------------------------- */

static void test_init(void)
{
    check_context("init");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL);
    for (int i = 0; i < N_HOOKS; i++)
        if (hooks[i].expected == NULL)
            hooks[i].expected = dlsym(libc, hooks[i].name);
    CHECK(hooks[H_MALLOC].expected != NULL);
    struct hs_got_hook bad = {"malloc", NULL, hooks[H_MALLOC].expected};
    CHECK_EQ(hs_got_init(&bad, 1, (void *)gh_self_work), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(hs_got_scan(), -1); /* not initialized */
    CHECK_EQ(hs_got_init(hooks, N_HOOKS, (void *)gh_self_work), 0);
    CHECK_EQ(hs_got_init(hooks, N_HOOKS, (void *)gh_self_work), -1);
    CHECK_EQ(errno, EBUSY);
}

static void test_scan(void)
{
    check_context("scan");
    CHECK(hs_got_scan() > 0);
    CHECK_EQ(hs_got_scan(), 0); /* nothing new */
    unsigned relro;
    /* malloc, calloc, realloc, posix_memalign and free; valloc expects another function. */
    CHECK_EQ(slots_of("libgh_now.so", &relro), 5);
    CHECK_EQ(relro, 5);
    CHECK_EQ(slots_of("libgh_lazy.so", &relro), 5);
    CHECK_EQ(relro, 0);
    CHECK_EQ(slots_of("libgh_noplt.so", &relro), 5);
    CHECK_EQ(relro, 5); /* GLOB_DAT slots, in .got */
    /* The program: the five, dlopen and dlclose. */
    CHECK_EQ(slots_of("", NULL), 7);
    CHECK_EQ(slots_of("libgh_module.so", NULL), 0); /* never its own object */
    CHECK(slots_of("libc.so.6", NULL) >= 4);        /* glibc's own calls (strdup & co.) */
    struct hs_got_stats st;
    hs_got_get_stats(&st);
    CHECK(st.slots_foreign >= 4); /* valloc of the three libraries and the program */
    CHECK_EQ(st.slots_overflow, 0);
    CHECK_EQ(st.slots_patched, 0);
    CHECK_EQ(st.slots_hooked_now, 0);
    CHECK(!hs_got_active());

    /* Recorded but not written: nothing counted yet. */
    CHECK_WORK(gh_now_work, false);
    CHECK_WORK(gh_lazy_work, false);
    CHECK_WORK(gh_noplt_work, false);
    CHECK_WORK(main_work, false);
    check_slot_values(false);
}

static void test_apply(void)
{
    check_context("apply");
    CHECK_EQ(hs_got_apply(), 0);
    CHECK(hs_got_active());
    CHECK_WORK(gh_now_work, true);
    CHECK_WORK(gh_lazy_work, true);
    CHECK_WORK(gh_noplt_work, true);
    CHECK_WORK(main_work, true);
    CHECK_WORK(gh_self_work, false); /* the module's own object */
    check_slot_values(true);
    struct hs_got_stats st;
    hs_got_get_stats(&st);
    CHECK_EQ(st.slots_hooked_now, st.slots_now);
    CHECK_EQ(st.slots_patched, st.slots_now);
    CHECK_EQ(hs_got_apply(), 0); /* again: nothing more to write */
    struct hs_got_stats st2;
    hs_got_get_stats(&st2);
    CHECK_EQ(st2.slots_patched, st.slots_patched);
}

static void drain_rescans(void)
{
    for (int i = 0; i < 4 && hs_got_rescan_wanted(); i++)
        hs_got_scan();
}

static void test_late_dlopen(void)
{
    check_context("dlopen after apply");
    drain_rescans();
    CHECK(!hs_got_rescan_wanted());
    /* From the module's object (no redirection, its RUNPATH): not found. What the program's
     * dlopen below would see if the trampoline called glibc instead of jumping. */
    CHECK(gh_self_dlopen("libgh_late.so", RTLD_NOW) == NULL);
    CHECK(!hs_got_rescan_wanted());
    struct hs_got_stats st;
    hs_got_get_stats(&st);

    void *h = dlopen("libgh_late.so", RTLD_LAZY); /* through the trampoline */
    CHECK(h != NULL);
    if (!h) {
        fprintf(stderr, "    dlopen: %s\n", dlerror());
        return;
    }
    CHECK(hs_got_rescan_wanted());
    struct hs_got_stats st2;
    hs_got_get_stats(&st2);
    CHECK_EQ(st2.trampoline_calls, st.trampoline_calls + 1);
    int (*late_work)(void) = (int (*)(void))dlsym(h, "gh_late_work");
    CHECK(late_work != NULL);
    if (!late_work)
        return;
    CHECK_WORK(late_work, false); /* not scanned yet */
    CHECK_EQ(hs_got_scan(), 5);
    CHECK_WORK(late_work, true); /* a scan while active writes the new slots */
    CHECK_EQ(hs_got_apply(), 0);
    CHECK_WORK(late_work, true);
    CHECK_EQ(slots_of("gh_late/libgh_late.so", NULL), 5);

    /* dlclose behind the module's back (glibc's, not through a redirected slot) while hooked,
     * then restore before any scan: the records of the unloaded library must be skipped, not
     * written. (Through the wrapper, the records go at once: below.) */
    check_context("dlclose behind our back, then restore");
    int (*glibc_dlclose)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "dlclose");
    CHECK(glibc_dlclose != NULL);
    CHECK_EQ(glibc_dlclose(h), 0);
    CHECK(dlopen("libgh_late.so", RTLD_LAZY | RTLD_NOLOAD) == NULL); /* really unloaded */
    CHECK_EQ(hs_got_restore(), 0);
    CHECK(!hs_got_active());
    CHECK_WORK(gh_now_work, false);
    CHECK_WORK(gh_lazy_work, false);
    CHECK_WORK(gh_noplt_work, false);
    CHECK_WORK(main_work, false);
    check_slot_values(false);
    hs_got_get_stats(&st);
    CHECK_EQ(st.slots_hooked_now, 5); /* the unloaded library's, until the scan */
    hs_got_scan();
    hs_got_get_stats(&st2);
    CHECK_EQ(st2.objects_pruned, st.objects_pruned + 1);
    CHECK_EQ(st2.slots_now, st.slots_now - 5);
    CHECK_EQ(st2.slots_hooked_now, 0);
    CHECK_EQ(slots_of("libgh_late.so", NULL), 0);

    /* Loaded again (often at the same address, with the same link map): a new object. */
    check_context("dlopen again");
    h = dlopen("libgh_late.so", RTLD_NOW);
    CHECK(h != NULL);
    if (!h)
        return;
    late_work = (int (*)(void))dlsym(h, "gh_late_work");
    CHECK_EQ(hs_got_scan(), 5);
    CHECK_WORK(late_work, false); /* recorded while off: not written */
    CHECK_EQ(hs_got_apply(), 0);
    CHECK_WORK(late_work, true);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_WORK(late_work, false);
    CHECK_EQ(dlclose(h), 0);
    drain_rescans();

    /* dlclose through the wrapper drops the library's records at once: loaded again at the
     * same place with its link map at the same place (a plug-in reloaded in a loop), it is a
     * new object to the next scan. Before, the stale record passed for it, and its fresh
     * slots stayed glibc's until a scan happened to fall between the dlclose and the load. */
    check_context("dlclose through the wrapper, then load again");
    h = dlopen("libgh_late.so", RTLD_NOW);
    CHECK(h != NULL);
    if (!h)
        return;
    CHECK_EQ(hs_got_scan(), 5);
    CHECK_EQ(hs_got_apply(), 0);
    hs_got_get_stats(&st);
    CHECK_EQ(dlclose(h), 0);
    hs_got_get_stats(&st2);
    CHECK_EQ(st2.objects_pruned, st.objects_pruned + 1);
    CHECK_EQ(st2.slots_now, st.slots_now - 5);
    h = dlopen("libgh_late.so", RTLD_LAZY);
    CHECK(h != NULL);
    if (!h)
        return;
    late_work = (int (*)(void))dlsym(h, "gh_late_work");
    CHECK_EQ(hs_got_scan(), 5);
    CHECK_WORK(late_work, true);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_WORK(late_work, false);
    CHECK_EQ(dlclose(h), 0);
    drain_rescans();

    /* Loaded while off and never scanned: apply asks for the scan that finds it. */
    check_context("dlopen while off, then apply");
    h = dlopen("libgh_late.so", RTLD_NOW);
    CHECK(h != NULL);
    if (!h)
        return;
    late_work = (int (*)(void))dlsym(h, "gh_late_work");
    CHECK(!hs_got_rescan_wanted()); /* dlopen is not redirected while off */
    CHECK_EQ(hs_got_apply(), 0);
    CHECK_WORK(late_work, false);
    CHECK(hs_got_rescan_wanted());
    CHECK_EQ(hs_got_scan(), 5);
    CHECK_WORK(late_work, true);
    CHECK_WORK(gh_now_work, true);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_WORK(late_work, false);
    CHECK_EQ(dlclose(h), 0);
    drain_rescans();
    CHECK_EQ(slots_of("libgh_late.so", NULL), 0);
}

static void test_foreign_allocator(void)
{
    check_context("a library bound to another allocator");
    struct hs_got_stats st, st2;
    hs_got_get_stats(&st);
    void *h = dlopen(GH_DEEP_LIB, RTLD_NOW | RTLD_DEEPBIND);
    CHECK(h != NULL);
    if (!h)
        return;
    int (*deep_work)(void) = (int (*)(void))dlsym(h, "gh_deep_work");
    unsigned long (*alt_calls)(void) = (unsigned long (*)(void))dlsym(h, "gh_alt_calls");
    CHECK(deep_work != NULL && alt_calls != NULL);
    if (!deep_work || !alt_calls)
        return;
    CHECK_EQ(hs_got_scan(), 0);
    hs_got_get_stats(&st2);
    CHECK_EQ(st2.slots_foreign, st.slots_foreign + 6); /* all six names: bound to libgh_altmalloc */
    CHECK_EQ(hs_got_apply(), 0);
    unsigned long before = alt_calls();
    CHECK_WORK(deep_work, false);
    CHECK_EQ(alt_calls() - before, 9);
    CHECK_WORK(gh_now_work, true);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_EQ(dlclose(h), 0);
    drain_rescans();
}

static void test_unrelocated(void)
{
    check_context("an object scanned during its own relocation");
    struct hs_got_stats st, st2;
    hs_got_get_stats(&st);
    CHECK_EQ(hs_got_apply(), 0);
    void *h = dlopen(GH_IFUNC_LIB, RTLD_NOW);
    CHECK(h != NULL);
    if (!h) {
        fprintf(stderr, "    dlopen: %s\n", dlerror());
        return;
    }
    int (*scan_result)(void) = (int (*)(void))dlsym(h, "gh_ifunc_scan_result");
    int (*ifunc_work)(void) = (int (*)(void))dlsym(h, "gh_ifunc_work");
    CHECK(scan_result != NULL && ifunc_work != NULL);
    if (!scan_result || !ifunc_work)
        return;
    CHECK(scan_result() >= 0); /* the resolver did scan */
    hs_got_get_stats(&st2);
    CHECK(st2.objects_incomplete > st.objects_incomplete); /* ...and skipped the library, */
    /* which the dlopen (a path, through the trampoline) scanned as soon as it returned. */
    CHECK(!hs_got_rescan_wanted());
    CHECK_EQ(hs_got_scan(), 0);
    struct tally t = run_counted(ifunc_work);
    CHECK_EQ(t.c[C_MALLOC], 1);
    CHECK_EQ(t.c[C_FREE], 1);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_EQ(dlclose(h), 0);
    drain_rescans();
}

/* ---- apply and restore from signal handlers, against 4 allocating threads ------------------- */

#define STRESS_THREADS 4
#define STRESS_CYCLES 200

static int stress_stop;
static unsigned long stress_calls[STRESS_THREADS];
static int handled;

static void on_signal(int sig)
{
    (void)sig;
    int n = __atomic_load_n(&handled, __ATOMIC_ACQUIRE);
    if (n % 2 == 0)
        hs_got_apply();
    else
        hs_got_restore();
    __atomic_store_n(&handled, n + 1, __ATOMIC_RELEASE);
}

static void *stress_thread(void *arg)
{
    size_t id = (size_t)arg;
    int (*works[])(void) = {gh_now_work, gh_lazy_work, gh_noplt_work, main_work};
    tl_counting = 1;
    unsigned long calls = 0, failures = 0;
    while (!__atomic_load_n(&stress_stop, __ATOMIC_ACQUIRE)) {
        failures += works[calls % 4]() != 0;
        calls++;
    }
    tl_counting = 0;
    __atomic_store_n(&stress_calls[id], calls, __ATOMIC_RELEASE);
    return (void *)failures;
}

static void test_signal_stress(void)
{
    check_context("apply/restore in signal handlers");
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    struct tally before = tally_now();
    struct hs_got_stats st, st2;
    hs_got_get_stats(&st);
    pthread_t threads[STRESS_THREADS];
    for (size_t i = 0; i < STRESS_THREADS; i++)
        pthread_create(&threads[i], NULL, stress_thread, (void *)i);
    for (int cycle = 0; cycle < STRESS_CYCLES; cycle++) {
        pthread_kill(threads[cycle % STRESS_THREADS], SIGUSR1);
        while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) <= cycle)
            sched_yield();
        /* And from this thread, racing the next handler now and then. */
        if (cycle % 10 == 5) {
            hs_got_apply();
            hs_got_restore();
        }
        usleep(200);
    }
    __atomic_store_n(&stress_stop, 1, __ATOMIC_RELEASE);
    unsigned long failures = 0, calls = 0;
    for (size_t i = 0; i < STRESS_THREADS; i++) {
        void *ret;
        pthread_join(threads[i], &ret);
        failures += (unsigned long)ret;
        calls += stress_calls[i];
    }
    CHECK_EQ(failures, 0);
    CHECK(calls > 0);
    struct tally t = tally_now();
    unsigned long mallocs = t.c[C_MALLOC] - before.c[C_MALLOC];
    unsigned long frees = t.c[C_FREE] - before.c[C_FREE];
    /* Counted while hooked only: some, never more than made. */
    CHECK(mallocs > 0);
    CHECK(mallocs <= calls);
    CHECK(frees <= 4 * calls);
    CHECK_EQ(t.c[C_VALLOC], before.c[C_VALLOC]);
    hs_got_get_stats(&st2);
    CHECK(st2.slots_patched > st.slots_patched);
    CHECK(st2.slots_restored > st.slots_restored);
    printf("stress: %lu calls, %lu mallocs counted, %llu slot writes\n", calls, mallocs,
           (unsigned long long)(st2.slots_patched - st.slots_patched + st2.slots_restored -
                                st.slots_restored));

    /* The last handler restored (200 cycles, even count): nothing counted. */
    CHECK(!hs_got_active());
    CHECK_WORK(gh_now_work, false);
    CHECK_WORK(main_work, false);
    check_slot_values(false);
    CHECK_EQ(hs_got_apply(), 0);
    CHECK_WORK(gh_now_work, true);
    CHECK_WORK(gh_lazy_work, true);
    CHECK_WORK(gh_noplt_work, true);
    CHECK_WORK(main_work, true);
    CHECK_EQ(hs_got_restore(), 0);
    CHECK_WORK(gh_lazy_work, false);
    check_slot_values(false);
}

/* A child forked while hooks are active keeps them, and can restore and scan (the module's
 * locks are not inherited held). */
static void test_fork(void)
{
    check_context("fork");
    CHECK_EQ(hs_got_apply(), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct tally t = run_counted(gh_now_work);
        bool ok = t.c[C_MALLOC] == 1 && t.c[C_FREE] == 4;
        ok &= hs_got_restore() == 0 && hs_got_scan() >= 0;
        t = run_counted(gh_now_work);
        ok &= t.c[C_MALLOC] == 0 && t.c[C_FREE] == 0;
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_WORK(gh_lazy_work, true); /* the parent's are untouched */
    CHECK_EQ(hs_got_restore(), 0);
}

int main(void)
{
    test_init();
    test_scan();
    test_apply();
    test_late_dlopen();
    test_foreign_allocator();
    test_unrelocated();
    test_signal_stress();
    test_fork();
    struct hs_got_stats st;
    hs_got_get_stats(&st);
    printf("objects %llu scanned (%u now), %llu incomplete, %llu pruned; slots %llu recorded "
           "(%u now), %llu patched, %llu restored, %llu changed, %llu foreign, %llu overflow; "
           "%llu trampoline calls\n",
           (unsigned long long)st.objects_scanned, st.objects_now,
           (unsigned long long)st.objects_incomplete, (unsigned long long)st.objects_pruned,
           (unsigned long long)st.slots_recorded, st.slots_now,
           (unsigned long long)st.slots_patched, (unsigned long long)st.slots_restored,
           (unsigned long long)st.slots_changed, (unsigned long long)st.slots_foreign,
           (unsigned long long)st.slots_overflow, (unsigned long long)st.trampoline_calls);
    return check_report();
}
