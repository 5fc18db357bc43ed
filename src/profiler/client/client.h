/* client.h: the profiler's client, libheapprofd.so, preloaded into the profiled program.
 *
 * States: OFF (dormant: every allocation call is one load and one predicted branch on top of
 * glibc), ATTACHING (a handshake in progress) and ON (sampling). The client goes ON at start
 * when the environment asks for it (HEAPSCOPE_PROFILE_SOCKET), or when the profiling signal
 * (HS_CLIENT_SIGNAL, sent with sigqueue by `heapscope profile -p`) names a daemon; it goes OFF
 * for good in a forked child (unless children are followed) and whenever the session ends:
 * the daemon shut the buffer down, its socket closed, or a full buffer stayed full past the
 * block timeout. The program keeps running either way; the blocks sampled so far simply stop
 * being tracked.
 *
 * Files: hooks.c (the allocation functions and the sample and free records), session.c (the
 * handshake, fork, the signal, the constructor), heap_api.c (custom heaps), sampled_set.c,
 * vfork_guard.c (vfork children sample nothing).
 */
#ifndef HEAPSCOPE_PROFILER_CLIENT_H
#define HEAPSCOPE_PROFILER_CLIENT_H

#include "records.h"
#include "ring_buffer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { HS_CLIENT_OFF = 0, HS_CLIENT_ATTACHING = 1, HS_CLIENT_ON = 2 };

/* Android's profiler signal number (bionic's __SIGRTMIN + 4); its value names the daemon. */
#define HS_CLIENT_SIGNAL 36

/* The largest interval a daemon's request can impose (1 GiB: still a sample now and then). */
#define HS_CLIENT_MAX_REQUESTED_INTERVAL (1ull << 30)

/* Where the system daemon listens (dist/systemd/heapprofd.socket), for a signal without a
 * value and no HEAPSCOPE_PROFILE_SOCKET. */
#define HS_CLIENT_SYSTEM_SOCKET "/run/heapscope/heapprofd.sock"

struct hs_client {
    /* Read on every allocation call: kept apart from the counters the samples write. */
    int state;      /* HS_CLIENT_*; read on every allocation call */
    int sock;       /* the daemon connection, -1 when none */
    int pid;        /* the pid the session belongs to */
    uint32_t flags; /* HS_CONFIG_* */
    uint32_t max_stack;
    uint64_t interval; /* the interval in force (adaptive sampling may raise it) */
    /* interval - 1 while ON, 0 otherwise (hs_client_publish_fast_limit): an allocation of
     * size bytes with size - 1 < fast_limit (1 <= size < interval) needs only the countdown;
     * one compare stands for the state, size 0 and size >= interval checks. */
    uint64_t fast_limit;
    uint64_t base_interval, max_interval;
    uint64_t block_timeout_ns;
    struct hs_rb rb;
    /* Written by samples. */
    int inflight __attribute__((aligned(64))); /* writers using rb (a new session waits for 0) */
    uint64_t seq __attribute__((aligned(64))); /* mallocs and frees, one counter */
    uint64_t last_adapt_ns __attribute__((aligned(64))); /* when the interval last changed */
    uint64_t interval_raises;                            /* how often adaptive sampling raised it */
};

extern struct hs_client hs_client;

/* Per-thread: set while the client itself runs, so that allocations it causes are not
 * sampled. */
extern __thread int hs_client_busy __attribute__((tls_model("initial-exec")));

static inline bool hs_client_on(void)
{
    return __builtin_expect(__atomic_load_n(&hs_client.state, __ATOMIC_RELAXED) == HS_CLIENT_ON, 0);
}

/* True when an allocation of size bytes is decided by the countdown alone (see fast_limit). */
static inline bool hs_client_fast(size_t size)
{
    return __builtin_expect(size - 1 < __atomic_load_n(&hs_client.fast_limit, __ATOMIC_RELAXED), 1);
}

/* Sets fast_limit from the state and the interval. Called after each change of either, and by
 * an allocation that found the limit stale (a session that ended while adaptive sampling was
 * raising the interval): it corrects itself. */
void hs_client_publish_fast_limit(void);

/* Connects to the daemon at address and starts a session. Async-signal-safe. Returns 0, or
 * -1 after logging why (already on, daemon unreachable, refused). */
int hs_client_attach(const char *address);

/* Ends the session (any thread, any context): the state goes OFF and the daemon sees the
 * socket close. why is logged once. */
void hs_client_detach(const char *why);

/* Writes a record of len bytes (header included) built by fill(dst, arg) into the buffer, with
 * the session's policy for a full buffer (wait when blocking or must_deliver, else drop).
 * Wakes the daemon when its reader sleeps. Returns true when written. Call between
 * hs_client_enter and hs_client_leave. */
bool hs_client_write(size_t len, bool must_deliver, void (*fill)(void *dst, void *arg), void *arg);

/* hs_client_write in two halves, for a record built in place: reserve len bytes under the
 * same policy (false: nothing reserved), write res->data, then publish promptly (the daemon
 * cannot read past an unpublished record). */
bool hs_client_reserve(size_t len, bool must_deliver, struct hs_rb_reservation *res);
void hs_client_publish(const struct hs_rb_reservation *res);

/* Brackets a use of the session's buffer; enter returns false (no session) when the client is
 * not ON, and then leave must not be called. */
bool hs_client_enter(void);
void hs_client_leave(void);

/* Before the program unmaps code (dlclose): waits until the daemon has read every record
 * written so far, at most HS_CLIENT_UNMAP_WAIT_NS. The daemon unwinds a sample when it reads
 * it, and reads the maps again when a pc lies outside those it knows: a sample taken in a
 * library that is unloaded before the daemon read it had no stack at all. No wait without a
 * session or when the daemon is up to date (the common case: one load). */
void hs_client_sync_before_unmap(void);
#define HS_CLIENT_UNMAP_WAIT_NS (100ull * 1000000ull)

/* True unless this is a vfork child borrowing the session process's memory (vfork_guard.c);
 * a system call only after a vfork on this thread, or when the client does not interpose
 * vfork. */
bool hs_client_in_session_process(void);

/* The next sequence number. */
static inline uint64_t hs_client_next_seq(void)
{
    return __atomic_add_fetch(&hs_client.seq, 1, __ATOMIC_RELAXED);
}

/* The client's thread id cache and clock, for records. */
uint32_t hs_client_tid(void);
uint64_t hs_client_now_ns(void);

/* Custom heaps (heap_api.c): re-sends the HEAP records of the registered heaps at the start of
 * a session. */
void hs_client_announce_heaps(void);

/* The allocation functions of hooks.c under hidden names: inside the library they never
 * resolve to glibc's, even when the client is not first in the global scope (injected). */
void *hs_client_malloc(size_t size);
void hs_client_free(void *p);
void *hs_client_calloc(size_t nmemb, size_t size);
void *hs_client_realloc(void *p, size_t size);
void *hs_client_reallocarray(void *p, size_t nmemb, size_t size);
void *hs_client_memalign(size_t alignment, size_t size);
void *hs_client_aligned_alloc(size_t alignment, size_t size);
int hs_client_posix_memalign(void **memptr, size_t alignment, size_t size);
void *hs_client_valloc(size_t size);
void *hs_client_pvalloc(size_t size);

/* Installs the fork handler and the profiling signal's handler, once. Returns false when the
 * program handles that signal itself (the client then only attaches from the environment). */
bool hs_client_arm(void);

/* Injected mode (injected.c): the client was loaded into a running process with dlopen
 * (`heapscope profile -p` on a process started without it) and redirects the program's calls
 * through the GOT while a session runs. */
bool hs_client_injected(void);
/* The client was preloaded: its malloc is the process's. */
bool hs_client_interposes(void);
/* Session start and end (hs_client_attach, hs_client_detach, a forked child): redirect the
 * GOT slots, or put them back. Async-signal-safe; nothing when not injected. */
void hs_client_injected_on(void);
void hs_client_injected_off(void);
/* From a sampled allocation (a normal context): hooks the objects loaded since the last
 * scan, when one is wanted (after a dlopen or dlclose, and at each session start). */
void hs_client_injected_rescan(void);

#endif
