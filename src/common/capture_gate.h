/* capture_gate.h: the fork gate of stack capture, so that a fork never leaves the child
 * with an unwinder lock held by a thread that does not exist there.
 *
 * Why. A capture (hs_backtrace_capture) runs libunwind, which takes locks of its own: on
 * every miss of its per-thread frame cache, unw_step looks the frame's unwind rules up in a
 * cache shared by the process, under the pthread mutex unw_local_addr_space->global_cache.lock
 * (libunwind 1.6, dwarf/Gparser.c get_rs_cache, the default caching policy UNW_CACHE_GLOBAL);
 * the rules of an uncached frame are found through dl_iterate_phdr (glibc's
 * dl_load_write_lock, which glibc's fork does not reset), and libunwind's memory pools and
 * one-time set-up take more. fork() copies those locks as they are: if another thread held
 * one, the child's first capture waits for it forever. Only captures take them (the program
 * itself does not use libunwind), so no lock can be stranded if no capture is in flight in
 * another thread at the moment of fork.
 *
 * How. Every capture is bracketed by hs_capture_gate_enter/leave, which count it in the
 * calling thread's stripe: a counter on a cache line of its own, one per thread for the
 * first HS_CAPTURE_GATE_STRIPES threads of the process (later threads share them round
 * robin). The fork prepare handler closes the gate, then waits until every stripe is zero
 * (the forking thread's own captures aside); a capture that finds the gate closed takes its
 * count back and sleeps (futex) until the parent handler opens the gate again. Enter is a
 * locked add to the thread's own line and a load of the gate word, which only forks write
 * (store-load ordering: the locked add is a full barrier, so either the capture sees the
 * gate closed or the forker sees its count). Leave is a locked subtract. No cache line is
 * written by two threads unless more than HS_CAPTURE_GATE_STRIPES threads were created.
 *
 * Limits, each of which turns captures off in the child rather than hanging anything:
 *  - A capture that does not finish within HS_CAPTURE_GATE_DRAIN_MS (a thread stopped by a
 *    debugger in the middle of one, or one that left it by longjmp from a signal handler):
 *    the fork goes ahead and the child captures nothing (0 frames; one log line says so).
 *    The parent keeps capturing.
 *  - fork() called by a signal handler that interrupted a capture of its own thread, in a
 *    thread whose stripe is shared: its own share of the count cannot be told from another
 *    thread's, so the child captures nothing.
 * A capture in a signal handler that interrupted a capture of the same thread while the gate
 * is closed returns no frames (it cannot wait: the fork may be waiting for the capture it
 * interrupted). vfork and posix_spawn run no fork handlers and need none: their child
 * shares the parent's memory, whose threads keep running and release what they hold.
 * _Fork and raw clone children are not covered (only async-signal-safe calls are allowed in
 * them anyway).
 *
 * Users register the three handlers with pthread_atfork, ordered so that the prepare
 * handler runs before any handler that takes a lock a capturing thread may need, and after
 * any that waits for work that may capture (prepare handlers run in reverse order of
 * registration). Without them the gate stays open and costs the same.
 */
#ifndef HEAPSCOPE_COMMON_CAPTURE_GATE_H
#define HEAPSCOPE_COMMON_CAPTURE_GATE_H

#include <stdbool.h>

/* Stripes, one cache line each (a power of two). */
#define HS_CAPTURE_GATE_STRIPES 256
/* How long the fork prepare handler waits for captures in flight. */
#define HS_CAPTURE_GATE_DRAIN_MS 1000

enum { HS_CAPTURE_GATE_OPEN, HS_CAPTURE_GATE_CLOSED, HS_CAPTURE_GATE_OFF };

struct hs_capture_stripe {
    unsigned long in_flight;
} __attribute__((aligned(64)));

/* On a line of its own: read by every capture, written only by forks. */
struct hs_capture_gate_word {
    int state;
} __attribute__((aligned(64)));

extern struct hs_capture_stripe hs_capture_stripes[HS_CAPTURE_GATE_STRIPES];
extern struct hs_capture_gate_word hs_capture_gate;
/* This thread's number + 1 (0: none yet); its stripe is number % HS_CAPTURE_GATE_STRIPES. */
extern __thread unsigned hs_capture_thread_number __attribute__((tls_model("initial-exec")));
/* Captures of this thread between enter and leave, nested ones (signal handlers) included. */
extern __thread unsigned hs_capture_depth __attribute__((tls_model("initial-exec")));

unsigned hs_capture_gate_number_thread(void);
bool hs_capture_gate_enter_slow(struct hs_capture_stripe *s);

static inline struct hs_capture_stripe *hs_capture_gate_stripe(void)
{
    unsigned n = hs_capture_thread_number;
    if (__builtin_expect(n == 0, 0))
        n = hs_capture_gate_number_thread();
    return &hs_capture_stripes[(n - 1) & (HS_CAPTURE_GATE_STRIPES - 1)];
}

/* Call before a capture. Returns true when the capture may run (then call
 * hs_capture_gate_leave after it), false when it must return no frames (captures are off in
 * this process, or a nested capture met a closed gate). May sleep while a fork is in
 * progress in another thread. Async-signal-safe. Preserves errno. */
static inline bool hs_capture_gate_enter(void)
{
    struct hs_capture_stripe *s = hs_capture_gate_stripe();
    /* Depth first: a signal handler that interrupts between the two sees this capture as
     * possibly counted already, and does not wait for the fork that may be waiting for it. */
    hs_capture_depth++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_fetch_add(&s->in_flight, 1, __ATOMIC_SEQ_CST);
    if (__builtin_expect(
            __atomic_load_n(&hs_capture_gate.state, __ATOMIC_SEQ_CST) == HS_CAPTURE_GATE_OPEN, 1))
        return true;
    return hs_capture_gate_enter_slow(s);
}

/* Call after a capture that hs_capture_gate_enter allowed. Async-signal-safe. */
static inline void hs_capture_gate_leave(void)
{
    struct hs_capture_stripe *s = hs_capture_gate_stripe();
    /* Count first, depth second: the reverse of enter, for the same reason. */
    __atomic_fetch_sub(&s->in_flight, 1, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hs_capture_depth--;
}

/* The fork handlers (see above for their registration order). prepare closes the gate and
 * waits for captures in flight; parent opens it; child resets the counts of the threads
 * that are gone and opens it, or turns captures off for good in this process (and its
 * future children) when the prepare handler could not be sure that none was in flight. */
void hs_capture_gate_fork_prepare(void);
void hs_capture_gate_fork_parent(void);
void hs_capture_gate_fork_child(void);

/* True while captures are off in this process (see above). */
bool hs_capture_gate_is_off(void);

#endif
