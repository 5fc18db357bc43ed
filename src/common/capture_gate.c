/* capture_gate.c: the slow paths and the fork handlers of the capture gate (see
 * capture_gate.h for the design and its limits).
 *
 * State: hs_capture_gate (OPEN, CLOSED while a fork is between its prepare and parent or
 * child handler, OFF for good in a child whose prepare handler could not drain), the
 * stripes, and per thread its number, its capture depth and t_owner_depth below. Only the
 * thread that closed the gate (the forker) reads or writes g_fork; other forkers wait in
 * prepare for the gate to open before they can close it.
 */
#define _GNU_SOURCE
#include "capture_gate.h"

#include "clock.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct hs_capture_stripe hs_capture_stripes[HS_CAPTURE_GATE_STRIPES];
struct hs_capture_gate_word hs_capture_gate = {HS_CAPTURE_GATE_OPEN};
__thread unsigned hs_capture_thread_number __attribute__((tls_model("initial-exec")));
__thread unsigned hs_capture_depth __attribute__((tls_model("initial-exec")));

/* Threads numbered so far (the next number). */
static unsigned g_threads_numbered;
/* Forks in progress that this thread closed the gate for (nested: fork from a signal handler
 * during a fork). Its captures pass the closed gate: they end before its fork happens. */
static __thread unsigned t_owner_depth __attribute__((tls_model("initial-exec")));
/* What the latest prepare handler found, for the child handler. */
static struct {
    bool drained;       /* no other thread's capture was in flight when prepare returned */
    unsigned own_count; /* this thread's share of its stripe's count */
} g_fork;

static long futex(int *word, int op, int val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

unsigned hs_capture_gate_number_thread(void)
{
    /* A signal handler capturing between these two lines numbers the thread too; the first
     * number is then simply not used. */
    unsigned n = __atomic_fetch_add(&g_threads_numbered, 1, __ATOMIC_RELAXED) + 1;
    hs_capture_thread_number = n;
    return n;
}

bool hs_capture_gate_enter_slow(struct hs_capture_stripe *s)
{
    int saved_errno = errno;
    bool ok = false;
    for (;;) {
        int gate = __atomic_load_n(&hs_capture_gate.state, __ATOMIC_SEQ_CST);
        if (gate == HS_CAPTURE_GATE_OPEN || (gate == HS_CAPTURE_GATE_CLOSED && t_owner_depth)) {
            ok = true;
            break;
        }
        /* Take the count back. */
        __atomic_fetch_sub(&s->in_flight, 1, __ATOMIC_RELEASE);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        hs_capture_depth--;
        /* Off; or nested in a capture of this thread that the forker may be waiting for. */
        if (gate == HS_CAPTURE_GATE_OFF || hs_capture_depth > 0)
            break;
        while (__atomic_load_n(&hs_capture_gate.state, __ATOMIC_SEQ_CST) == HS_CAPTURE_GATE_CLOSED)
            futex(&hs_capture_gate.state, FUTEX_WAIT_PRIVATE, HS_CAPTURE_GATE_CLOSED);
        hs_capture_depth++;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_fetch_add(&s->in_flight, 1, __ATOMIC_SEQ_CST);
    }
    errno = saved_errno;
    return ok;
}

bool hs_capture_gate_is_off(void)
{
    return __atomic_load_n(&hs_capture_gate.state, __ATOMIC_ACQUIRE) == HS_CAPTURE_GATE_OFF;
}

/* True when this thread's stripe has been given to no other thread: its count is then this
 * thread's alone. */
static bool own_stripe_is_private(void)
{
    unsigned n = hs_capture_thread_number;
    return n != 0 && n <= HS_CAPTURE_GATE_STRIPES &&
           __atomic_load_n(&g_threads_numbered, __ATOMIC_RELAXED) <=
               n - 1 + HS_CAPTURE_GATE_STRIPES;
}

/* Backs off while waiting for captures: spins first (a capture takes microseconds), then
 * yields (a preempted capturer gets the CPU on a 2-core machine), then sleeps briefly. */
static void back_off(unsigned round)
{
    if (round < 64) {
        __builtin_ia32_pause();
    } else if (round < 128) {
        sched_yield();
    } else {
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Waits until no other thread has a capture in flight, or until the deadline. Returns true
 * when drained; own_count receives this thread's share of its stripe (exact when drained). */
static bool drain(unsigned *own_count)
{
    unsigned own_index = hs_capture_thread_number != 0
                             ? (hs_capture_thread_number - 1) & (HS_CAPTURE_GATE_STRIPES - 1)
                             : HS_CAPTURE_GATE_STRIPES;
    unsigned mine = hs_capture_depth;
    *own_count = 0;
    if (mine > 0 && !own_stripe_is_private())
        return false; /* its count mixes this thread's share with other threads' */
    *own_count = own_index < HS_CAPTURE_GATE_STRIPES ? mine : 0;
    uint64_t deadline = hs_monotonic_ns() + (uint64_t)HS_CAPTURE_GATE_DRAIN_MS * 1000000u;
    unsigned round = 0;
    for (unsigned i = 0; i < HS_CAPTURE_GATE_STRIPES; i++) {
        unsigned long want = i == own_index ? mine : 0;
        while (__atomic_load_n(&hs_capture_stripes[i].in_flight, __ATOMIC_ACQUIRE) != want) {
            if ((round & 63) == 63 && hs_monotonic_ns() >= deadline)
                return false;
            back_off(round++);
        }
    }
    return true;
}

void hs_capture_gate_fork_prepare(void)
{
    int saved_errno = errno;
    if (t_owner_depth > 0) {
        /* A fork from a signal handler during this thread's own fork: the gate is closed
         * already, but the drain may have been interrupted. */
        t_owner_depth++;
        g_fork.drained = drain(&g_fork.own_count);
        errno = saved_errno;
        return;
    }
    for (;;) {
        int expected = HS_CAPTURE_GATE_OPEN;
        if (__atomic_compare_exchange_n(&hs_capture_gate.state, &expected, HS_CAPTURE_GATE_CLOSED,
                                        false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            break;
        if (expected == HS_CAPTURE_GATE_OFF) {
            errno = saved_errno;
            return; /* captures are off in this process: nothing to wait for */
        }
        /* Another thread is forking: wait for its parent handler. */
        futex(&hs_capture_gate.state, FUTEX_WAIT_PRIVATE, HS_CAPTURE_GATE_CLOSED);
    }
    t_owner_depth = 1;
    g_fork.drained = drain(&g_fork.own_count);
    errno = saved_errno;
}

void hs_capture_gate_fork_parent(void)
{
    if (t_owner_depth == 0 || --t_owner_depth > 0)
        return;
    int saved_errno = errno;
    __atomic_store_n(&hs_capture_gate.state, HS_CAPTURE_GATE_OPEN, __ATOMIC_SEQ_CST);
    futex(&hs_capture_gate.state, FUTEX_WAKE_PRIVATE, INT_MAX);
    errno = saved_errno;
}

void hs_capture_gate_fork_child(void)
{
    if (t_owner_depth == 0)
        return;
    t_owner_depth--;
    int saved_errno = errno;
    /* The other threads are gone, and so are their counts (some were between a count and
     * taking it back at a closed gate). */
    unsigned own_index = hs_capture_thread_number != 0
                             ? (hs_capture_thread_number - 1) & (HS_CAPTURE_GATE_STRIPES - 1)
                             : HS_CAPTURE_GATE_STRIPES;
    for (unsigned i = 0; i < HS_CAPTURE_GATE_STRIPES; i++)
        __atomic_store_n(&hs_capture_stripes[i].in_flight, i == own_index ? g_fork.own_count : 0,
                         __ATOMIC_RELAXED);
    if (!g_fork.drained) {
        __atomic_store_n(&hs_capture_gate.state, HS_CAPTURE_GATE_OFF, __ATOMIC_SEQ_CST);
        hs_log("%s: fork: a stack capture of another thread may still have been running; "
               "no backtraces are captured in this child",
               hs_log_program_name());
    } else {
        __atomic_store_n(&hs_capture_gate.state,
                         t_owner_depth > 0 ? HS_CAPTURE_GATE_CLOSED : HS_CAPTURE_GATE_OPEN,
                         __ATOMIC_SEQ_CST);
    }
    errno = saved_errno;
}
