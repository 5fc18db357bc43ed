/* test_fault_context.c: unit tests of src/common/fault_context.c: a real SIGSEGV on a
 * PROT_NONE page, read then written, must be told apart, and the stack unwound from the
 * signal context must start at the faulting instruction (exact) in the faulting function,
 * then the call site in its caller. The unwind goes through the capture gate: while another
 * thread holds the gate closed (a fork in progress), a fault's unwind waits for it to open.
 */
#define _GNU_SOURCE
#include "capture_gate.h"
#include "check.h"
#include "fault_context.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline, noclone))

static sigjmp_buf g_jump;
static struct {
    int access;
    uintptr_t pc;
    uintptr_t frames[16];
    size_t n;
    int unwound; /* set by the handler once hs_fault_backtrace returned */
} g_seen;

static void handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    g_seen.access = hs_fault_access(uc);
    g_seen.pc = hs_fault_pc(uc);
    g_seen.n = hs_fault_backtrace(uc, g_seen.frames, 16);
    __atomic_store_n(&g_seen.unwound, 1, __ATOMIC_RELEASE);
    siglongjmp(g_jump, 1);
}

/* The faulting functions, and a label after each so its code range is known: the compiler
 * keeps the order of functions in one file at -O0/-O2 with noinline, which is all the range
 * check needs (it also accepts the range up to the next function). */
static NOINLINE int read_it(volatile char *p)
{
    return p[3];
}

static NOINLINE void write_it(volatile char *p)
{
    p[5] = 1;
}

static NOINLINE void caller(volatile char *p, int write)
{
    if (write)
        write_it(p);
    else
        (void)read_it(p);
    __asm__ volatile("" ::: "memory"); /* no tail call: the caller's frame stays */
}

static NOINLINE void after_caller(void) {}

static bool in_function(uintptr_t pc, void (*fn)(void), void (*next)(void))
{
    uintptr_t a = (uintptr_t)fn, b = (uintptr_t)next;
    return pc >= a && pc < (b > a ? b : a + 512);
}

static void fault(char *page, int write)
{
    memset(&g_seen, 0, sizeof(g_seen));
    if (sigsetjmp(g_jump, 1) == 0)
        caller(page, write);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A fork in another thread: closes the gate (as the fork's prepare handler does), looks
 * whether the faulting thread's unwind finished meanwhile, then opens the gate (the parent
 * handler). */
static int g_gate_closed, g_unwound_while_closed = -1;

static void *forker(void *arg)
{
    (void)arg;
    hs_capture_gate_fork_prepare();
    __atomic_store_n(&g_gate_closed, 1, __ATOMIC_RELEASE);
    /* Time enough for the fault and an ungated unwind to finish; with the gate, the unwind
     * cannot finish before the gate opens, however long this is. */
    sleep_ms(300);
    g_unwound_while_closed = __atomic_load_n(&g_seen.unwound, __ATOMIC_ACQUIRE);
    hs_capture_gate_fork_parent();
    return NULL;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);

    fault(page, 0);
    CHECK_EQ(g_seen.access, HS_FAULT_READ);
    CHECK(g_seen.n >= 3);
    CHECK_EQ(g_seen.frames[0], g_seen.pc); /* exact: not pc - 1 */
    CHECK(in_function(g_seen.frames[0], (void (*)(void))read_it, (void (*)(void))write_it));
    CHECK(in_function(g_seen.frames[1], (void (*)(void))caller, after_caller));

    fault(page, 1);
    CHECK_EQ(g_seen.access, HS_FAULT_WRITE);
    CHECK(g_seen.n >= 3);
    CHECK_EQ(g_seen.frames[0], g_seen.pc);
    CHECK(in_function(g_seen.frames[0], (void (*)(void))write_it, (void (*)(void))caller));
    CHECK(in_function(g_seen.frames[1], (void (*)(void))caller, after_caller));

    /* During a fork in another thread the unwind waits for the gate, then unwinds fully. */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, forker, NULL), 0);
    while (!__atomic_load_n(&g_gate_closed, __ATOMIC_ACQUIRE))
        sleep_ms(1);
    fault(page, 0);
    pthread_join(t, NULL);
    CHECK_EQ(g_unwound_while_closed, 0);
    CHECK_EQ(g_seen.access, HS_FAULT_READ);
    CHECK(g_seen.n >= 3);
    CHECK(in_function(g_seen.frames[1], (void (*)(void))caller, after_caller));

    /* No context: nothing known, nothing stored. */
    CHECK_EQ(hs_fault_access(NULL), HS_FAULT_UNKNOWN);
    CHECK_EQ(hs_fault_backtrace(NULL, g_seen.frames, 16), 0);
    CHECK_EQ(hs_fault_backtrace(NULL, g_seen.frames, 0), 0);
    return check_report();
}
