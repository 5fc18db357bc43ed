/* requests.h: work the shim's signals ask for, done at the next malloc or free.
 *
 * Signal handlers only set a bit here (async-signal-safe); the next allocation call of any
 * thread does the work (heap dump, allocation records, allocator statistics), where locks
 * and files are safe to use. The check costs one relaxed load on every debug-mode call.
 *
 * Signals (glibc's SIGRTMAX is 64, so the numbers are Android's):
 *   SIGRTMAX-19 (45) toggle allocation backtraces (done in the handler: one atomic flip)
 *   SIGRTMAX-18 (46) write the allocation records      SIGRTMAX-17 (47) heap dump
 *   SIGRTMAX-16 (48) unreachable-memory check           SIGRTMAX-15 (49) allocator statistics
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_REQUESTS_H
#define HEAPSCOPE_MALLOC_DEBUG_REQUESTS_H

enum {
    HS_MD_REQ_HEAP_DUMP = 1 << 0,
    HS_MD_REQ_RECORD_DUMP = 1 << 1,
    HS_MD_REQ_ALLOCATOR_STATS = 1 << 2,
};

extern int hs_md_requests;

void hs_md_serve_requests_slow(void);

static inline void hs_md_serve_requests(void)
{
    if (__builtin_expect(__atomic_load_n(&hs_md_requests, __ATOMIC_RELAXED) != 0, 0))
        hs_md_serve_requests_slow();
}

/* Installs the handlers of the signals the options ask for and logs, with verbose, the
 * "Run: 'kill -N PID' to ..." lines. */
void hs_md_requests_init(void);

/* Asks for work as a signal would (tests, the API). Async-signal-safe. */
void hs_md_request(int bits);

#endif
