/* guard_fault.c: the fault handler of guarded memory (see guard_fault.h). */
#define _GNU_SOURCE
#include "guard_fault.h"

#include "debug_state.h"
#include "fault_context.h"
#include "guard_report.h"
#include "guarded.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define HS_MD_FAULT_FRAMES 64
#define HS_MD_REPORT_STACK (256 * 1024)

/* glibc's own, under its internal name (always exported; never interposed by the shim). */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static int (*g_real_sigaction)(int, const struct sigaction *, struct sigaction *);

/* The program's SIGSEGV and SIGBUS actions, as it set them (or found them). Written under
 * g_program_lock with g_program_seq odd; the handler copies them without the lock and retries
 * while a write is in progress. */
static struct sigaction g_program[2];
static unsigned g_program_seq;
static int g_program_lock;
static int g_installed;

/* The report lock: (pid << 32 | tid) of the thread reporting, 0 when free. Stale in a child
 * forked while another thread reported (its pid differs). */
static uint64_t g_report_owner;

static uint8_t *g_report_stack;
static ucontext_t g_report_ctx, g_back_ctx;

/* What the report on the report stack works on (under the report lock). */
static struct {
    uintptr_t addr;
    void *uc;
    const struct hs_md_guard_verdict *verdict;
    const char *note;
} g_job;

static void fault_handler(int sig, siginfo_t *si, void *uc);

int hs_md_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int (*fn)(int, const struct sigaction *, struct sigaction *) =
        __atomic_load_n(&g_real_sigaction, __ATOMIC_ACQUIRE);
    return (fn ? fn : __sigaction)(sig, act, old);
}

static int slot_of(int sig)
{
    return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1;
}

static uint64_t self_id(void)
{
    return (uint64_t)getpid() << 32 | (uint32_t)syscall(SYS_gettid);
}

static void report_lock(void)
{
    uint64_t me = self_id();
    for (;;) {
        uint64_t owner = __atomic_load_n(&g_report_owner, __ATOMIC_RELAXED);
        if ((owner == 0 || (owner >> 32) != (me >> 32)) &&
            __atomic_compare_exchange_n(&g_report_owner, &owner, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

static void report_unlock(void)
{
    __atomic_store_n(&g_report_owner, 0, __ATOMIC_RELEASE);
}

/* ---- the program's actions ---- */

static void program_write_begin(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    /* No handler of this thread may run (and call sigaction) while the lock is held. */
    pthread_sigmask(SIG_SETMASK, &all, saved);
    hs_md_guard_fault_lock();
    __atomic_fetch_add(&g_program_seq, 1, __ATOMIC_ACQ_REL);
}

static void program_write_end(const sigset_t *saved)
{
    __atomic_fetch_add(&g_program_seq, 1, __ATOMIC_ACQ_REL);
    hs_md_guard_fault_unlock();
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

void hs_md_guard_fault_lock(void)
{
    while (__atomic_exchange_n(&g_program_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

void hs_md_guard_fault_unlock(void)
{
    __atomic_store_n(&g_program_lock, 0, __ATOMIC_RELEASE);
}

/* A consistent copy of the program's action for slot i (lock-free, for the handler). */
static void program_read(int i, struct sigaction *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        unsigned seq = __atomic_load_n(&g_program_seq, __ATOMIC_ACQUIRE);
        memcpy(out, &g_program[i], sizeof(*out));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(seq & 1) && seq == __atomic_load_n(&g_program_seq, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

bool hs_md_guard_fault_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int i = slot_of(sig);
    if (i < 0 || !__atomic_load_n(&g_installed, __ATOMIC_ACQUIRE))
        return false;
    /* The handler in the kernel first: one set behind our back (the raw system call, as
     * libmemunreachable's sweeper resets its faults to the default action) is put back now,
     * or the action recorded below would never run. */
    hs_md_guard_fault_check_installed();
    sigset_t saved;
    program_write_begin(&saved);
    if (old)
        *old = g_program[i];
    if (act)
        g_program[i] = *act;
    program_write_end(&saved);
    return true;
}

static bool is_ours(const struct sigaction *sa)
{
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == fault_handler;
}

static void our_action(struct sigaction *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sa_sigaction = fault_handler;
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa->sa_mask);
}

void hs_md_guard_fault_check_installed(void)
{
    if (!__atomic_load_n(&g_installed, __ATOMIC_ACQUIRE))
        return;
    static const int sigs[2] = {SIGSEGV, SIGBUS};
    for (int i = 0; i < 2; i++) {
        struct sigaction cur, ours;
        if (hs_md_real_sigaction(sigs[i], NULL, &cur) != 0 || is_ours(&cur))
            continue;
        sigset_t saved;
        our_action(&ours);
        program_write_begin(&saved);
        g_program[i] = cur;
        hs_md_real_sigaction(sigs[i], &ours, NULL);
        program_write_end(&saved);
    }
}

bool hs_md_guard_fault_init(void)
{
    void *next = dlsym(RTLD_NEXT, "sigaction");
    if (next)
        __atomic_store_n(&g_real_sigaction,
                         (int (*)(int, const struct sigaction *, struct sigaction *))next,
                         __ATOMIC_RELEASE);
    /* The report stack, with a PROT_NONE page below it. */
    void *stack = mmap(NULL, HS_MD_REPORT_STACK + 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack != MAP_FAILED) {
        mprotect(stack, 4096, PROT_NONE);
        g_report_stack = (uint8_t *)stack + 4096;
    }
    static const int sigs[2] = {SIGSEGV, SIGBUS};
    struct sigaction ours;
    our_action(&ours);
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        if (hs_md_real_sigaction(sigs[i], &ours, &old) != 0)
            return false;
        if (is_ours(&old)) { /* set up twice: the program's action is the default */
            memset(&old, 0, sizeof(old));
            old.sa_handler = SIG_DFL;
        }
        g_program[i] = old;
    }
    __atomic_store_n(&g_installed, 1, __ATOMIC_RELEASE);
    return true;
}

/* ---- chaining to the program ---- */

static void chain(int sig, siginfo_t *si, void *uc)
{
    int i = slot_of(sig);
    struct sigaction pa;
    program_read(i, &pa);
    bool sent = si == NULL || si->si_code <= 0; /* kill, tgkill, sigqueue: not a fault */
    if (!(pa.sa_flags & SA_SIGINFO) && (pa.sa_handler == SIG_IGN || pa.sa_handler == SIG_DFL)) {
        if (pa.sa_handler == SIG_IGN && sent)
            return;
        /* The default action (the kernel forces it for an ignored fault too): restore it; a
         * fault happens again when the instruction is retried, a sent signal is sent again
         * (it is blocked until this handler returns). */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        hs_md_real_sigaction(sig, &dfl, NULL);
        if (sent)
            raise(sig);
        return;
    }
    if (pa.sa_flags & SA_RESETHAND) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        hs_md_guard_fault_sigaction(sig, &dfl, NULL);
    }
    /* The mask the program asked for while its handler runs. */
    sigset_t mask = pa.sa_mask, saved;
    if (!(pa.sa_flags & SA_NODEFER))
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_BLOCK, &mask, &saved);
    if (pa.sa_flags & SA_NODEFER) {
        sigset_t self;
        sigemptyset(&self);
        sigaddset(&self, sig);
        pthread_sigmask(SIG_UNBLOCK, &self, NULL);
    }
    if (pa.sa_flags & SA_SIGINFO)
        pa.sa_sigaction(sig, si, uc);
    else
        pa.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* ---- a fault in guarded memory ---- */

static void report_job(void)
{
    uintptr_t frames[HS_MD_FAULT_FRAMES];
    size_t n = hs_fault_backtrace(g_job.uc, frames, HS_MD_FAULT_FRAMES);
    int access = hs_fault_access(g_job.uc);
    hs_md_guard_report_fault(g_job.addr,
                             access == HS_FAULT_WRITE  ? HS_MD_GUARD_ACCESS_WRITE
                             : access == HS_FAULT_READ ? HS_MD_GUARD_ACCESS_READ
                                                       : HS_MD_GUARD_ACCESS_UNKNOWN,
                             g_job.verdict, frames, n, g_job.note);
}

/* Runs fn on the report stack (under the report lock), and returns here when it returns. */
static void run_on_report_stack(void (*fn)(void))
{
    if (!g_report_stack || getcontext(&g_report_ctx) != 0) {
        fn();
        return;
    }
    g_report_ctx.uc_stack.ss_sp = g_report_stack;
    g_report_ctx.uc_stack.ss_size = HS_MD_REPORT_STACK;
    g_report_ctx.uc_link = &g_back_ctx;
    makecontext(&g_report_ctx, fn, 0);
    if (swapcontext(&g_back_ctx, &g_report_ctx) != 0)
        fn();
}

/* Explains a fault at addr in guarded memory. Returns true when the program may go on
 * (sample_guard_recover); otherwise aborts. */
static bool on_guarded_fault(uintptr_t addr, void *uc)
{
    report_lock();
    struct hs_md_guard_verdict v;
    hs_md_guard_explain(addr, &v);
    bool recover =
        (hs_md.cfg.options & HS_OPT_SAMPLE_GUARD_RECOVER) && hs_md_sample_guard_owns(addr);
    /* A slot reported before: only make the page accessible again. */
    if (recover && v.g && (v.state == HS_MD_GB_RETIRED || v.g->retire) &&
        hs_md_sample_guard_recover(addr)) {
        report_unlock();
        return true;
    }
    g_job.addr = addr;
    g_job.uc = uc;
    g_job.verdict = &v;
    g_job.note = recover ? "  sample_guard_recover: the page is made accessible, its slot is "
                           "retired, the program goes on"
                         : NULL;
    run_on_report_stack(report_job);
    if (recover && hs_md_sample_guard_recover(addr)) {
        report_unlock();
        return true;
    }
    abort();
}

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    /* A fault on a live block's own pages is the program's (it changed their protection):
     * its handler gets it. */
    if (sig == SIGSEGV && si && si->si_code > 0 && hs_md_guarded_owns((uintptr_t)si->si_addr) &&
        !hs_md_guarded_live_page((uintptr_t)si->si_addr) &&
        on_guarded_fault((uintptr_t)si->si_addr, uc)) {
        errno = saved_errno;
        return;
    }
    chain(sig, si, uc);
    errno = saved_errno;
}
