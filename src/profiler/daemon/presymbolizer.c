/* presymbolizer.c: background symbolizing of the profiled processes' pcs (see
 * presymbolizer.h).
 *
 * Locks. g.lock guards the worker's state and every queue (pcs, head, len, cap, listed,
 * next, the counters); a queue's sym_lock guards its symbolizer. The worker never holds
 * both: it copies a batch out under g.lock, then takes sym_lock for one pc at a time, so a
 * writer waits at most for one pc. A queue is freed only once the worker is not busy with it
 * (g.busy), so the worker never touches a freed queue.
 */
#define _GNU_SOURCE
#include "presymbolizer.h"

#include "clock.h"
#include "cpu_room.h"
#include "hs_assert.h"
#include "symbolizer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct hs_presym {
    pthread_mutex_t sym_lock;
    struct hs_symbolizer *sym;
    /* Under g.lock: */
    uintptr_t *pcs; /* the queue: pcs[head..len) */
    size_t head, len, cap;
    bool listed;            /* in g's list of queues with work */
    struct hs_presym *next; /* that list's link */
    uint64_t queued, symbolized, paused;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;            /* a queue was listed */
    pthread_cond_t done;            /* the worker finished a batch */
    pthread_cond_t wake;            /* the worker, waiting for room, is to look again */
    struct hs_presym *first, *last; /* queues with work, served in turn */
    struct hs_presym *busy;         /* the queue of the batch in progress */
    bool cancel;                    /* hs_presym_free wants busy's batch ended */
    bool started, failed;
    bool any_cpu; /* the gate is off (tests) */
} g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

static void list_append(struct hs_presym *ps)
{
    ps->next = NULL;
    if (g.last)
        g.last->next = ps;
    else
        g.first = ps;
    g.last = ps;
    ps->listed = true;
}

static struct hs_presym *list_pop(void)
{
    struct hs_presym *ps = g.first;
    g.first = ps->next;
    if (g.first == NULL)
        g.last = NULL;
    ps->listed = false;
    return ps;
}

static void list_remove(struct hs_presym *ps)
{
    struct hs_presym *prev = NULL;
    for (struct hs_presym *q = g.first; q != NULL; prev = q, q = q->next) {
        if (q != ps)
            continue;
        if (prev)
            prev->next = q->next;
        else
            g.first = q->next;
        if (g.last == q)
            g.last = prev;
        break;
    }
    ps->listed = false;
}

void hs_presym_set_idle_only(bool on)
{
    pthread_mutex_lock(&g.lock);
    g.any_cpu = !on;
    pthread_cond_broadcast(&g.wake);
    pthread_mutex_unlock(&g.lock);
}

#define LOOK_NS ((uint64_t)HS_PRESYM_LOOK_MS * 1000000u)

/* The worker's view of the CPUs: the room they had over the last stretch measured. */
struct gate {
    struct hs_cpu_room room;
    bool room_seen; /* the last stretch had room */
};

/* Whether the worker may take a CPU now: the last whole stretch had room, measured afresh
 * once a stretch is over. A stretch older than two (the worker slept on an empty queue)
 * says nothing of now: a new one starts, and until it is over the answer is no. */
static bool gate_open(struct gate *gt)
{
    uint64_t elapsed = hs_cpu_room_elapsed_ns(&gt->room);
    if (elapsed > 2 * LOOK_NS) {
        hs_cpu_room_restart(&gt->room);
        gt->room_seen = false;
    } else if (elapsed >= LOOK_NS) {
        gt->room_seen = hs_cpu_room_take(&gt->room) >= HS_PRESYM_ROOM;
    }
    return gt->room_seen;
}

/* Under g.lock (released while it waits): waits until the gate opens or is turned off
 * (true), or until the batch in progress is cancelled by hs_presym_free (false). */
static bool wait_for_room(struct gate *gt)
{
    while (!g.any_cpu && !g.cancel && !gate_open(gt)) {
        uint64_t elapsed = hs_cpu_room_elapsed_ns(&gt->room);
        uint64_t left = elapsed < LOOK_NS ? LOOK_NS - elapsed : 1000000u;
        /* pthread_cond_timedwait's clock, by default. */
        uint64_t end = hs_clock_ns(CLOCK_REALTIME) + left;
        struct timespec deadline = {(time_t)(end / 1000000000ull), (long)(end % 1000000000ull)};
        pthread_cond_timedwait(&g.wake, &g.lock, &deadline);
    }
    return !g.cancel;
}

static void *worker(void *arg)
{
    (void)arg;
    struct hs_frame_info frames[HS_SYMBOLIZE_MAX_FRAMES];
    uintptr_t batch[HS_PRESYM_BATCH];
    struct gate gt = {.room_seen = false};
    hs_cpu_room_open(&gt.room); /* when it cannot read, the gate is always open */
    pthread_mutex_lock(&g.lock);
    for (;;) {
        while (g.first == NULL)
            pthread_cond_wait(&g.work, &g.lock);
        struct hs_presym *ps = list_pop();
        size_t n = ps->len - ps->head;
        hs_assert(n > 0);
        if (n > HS_PRESYM_BATCH)
            n = HS_PRESYM_BATCH;
        memcpy(batch, ps->pcs + ps->head, n * sizeof(*batch));
        ps->head += n;
        if (ps->head == ps->len)
            ps->head = ps->len = 0;
        else
            list_append(ps); /* the others' turn first */
        g.busy = ps;
        pthread_mutex_unlock(&g.lock);

        /* The gate is looked at before every pc: the program may have got busy meanwhile.
         * The pcs of a batch cancelled while it waits are left to the dumps. */
        size_t done = 0;
        while (done < n) {
            if (!gate_open(&gt)) {
                pthread_mutex_lock(&g.lock);
                if (!g.any_cpu)
                    ps->paused++; /* a wait follows (none when the gate is off) */
                bool go_on = wait_for_room(&gt);
                pthread_mutex_unlock(&g.lock);
                if (!go_on)
                    break;
            }
            pthread_mutex_lock(&ps->sym_lock);
            hs_symbolize(ps->sym, batch[done], 0, frames, HS_SYMBOLIZE_MAX_FRAMES);
            pthread_mutex_unlock(&ps->sym_lock);
            done++;
        }

        pthread_mutex_lock(&g.lock);
        ps->symbolized += done;
        g.busy = NULL;
        g.cancel = false;
        pthread_cond_broadcast(&g.done);
    }
    return NULL;
}

/* Under g.lock. The worker blocks every signal: the daemon takes its signals through a
 * signalfd, and its other threads must not be picked to run a handler. */
static bool worker_running(void)
{
    if (!g.started && !g.failed) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t attr;
        pthread_t th;
        bool ok = pthread_attr_init(&attr) == 0;
        if (ok) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&th, &attr, worker, NULL) == 0;
            pthread_attr_destroy(&attr);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (ok)
            g.started = true;
        else
            g.failed = true;
    }
    return g.started;
}

struct hs_presym *hs_presym_new(struct hs_symbolizer *sym)
{
    struct hs_presym *ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return NULL;
    pthread_mutex_init(&ps->sym_lock, NULL);
    ps->sym = sym;
    return ps;
}

void hs_presym_free(struct hs_presym *ps)
{
    if (ps == NULL)
        return;
    pthread_mutex_lock(&g.lock);
    if (ps->listed)
        list_remove(ps);
    ps->head = ps->len = 0;
    if (g.busy == ps) {
        g.cancel = true; /* the worker may be waiting for room with this batch in hand */
        pthread_cond_broadcast(&g.wake);
    }
    while (g.busy == ps)
        pthread_cond_wait(&g.done, &g.lock);
    hs_assert(!ps->listed && g.busy != ps);
    pthread_mutex_unlock(&g.lock);
    /* Nobody holds the symbolizer now: not the worker (above), not the caller (see the
     * header). */
    hs_assert(pthread_mutex_trylock(&ps->sym_lock) == 0);
    pthread_mutex_unlock(&ps->sym_lock);
    pthread_mutex_destroy(&ps->sym_lock);
    free(ps->pcs);
    free(ps);
}

/* Under g.lock: room for n more pcs at the end of the queue. */
static bool queue_reserve(struct hs_presym *ps, size_t n)
{
    if (ps->head > 0) {
        memmove(ps->pcs, ps->pcs + ps->head, (ps->len - ps->head) * sizeof(*ps->pcs));
        ps->len -= ps->head;
        ps->head = 0;
    }
    if (ps->cap - ps->len >= n)
        return true;
    size_t cap = ps->cap ? ps->cap : 1024;
    while (cap - ps->len < n) {
        if (cap > SIZE_MAX / 2 / sizeof(*ps->pcs))
            return false;
        cap *= 2;
    }
    uintptr_t *pcs = realloc(ps->pcs, cap * sizeof(*pcs));
    if (pcs == NULL)
        return false;
    ps->pcs = pcs;
    ps->cap = cap;
    return true;
}

void hs_presym_add(struct hs_presym *ps, const uintptr_t *pcs, size_t n)
{
    if (ps == NULL || n == 0)
        return;
    pthread_mutex_lock(&g.lock);
    if (worker_running() && queue_reserve(ps, n)) {
        hs_assert(ps->head == 0 && ps->cap - ps->len >= n); /* compacted, room made */
        memcpy(ps->pcs + ps->len, pcs, n * sizeof(*pcs));
        ps->len += n;
        ps->queued += n;
        if (!ps->listed)
            list_append(ps);
        pthread_cond_signal(&g.work);
    }
    pthread_mutex_unlock(&g.lock);
}

void hs_presym_lock(struct hs_presym *ps)
{
    pthread_mutex_lock(&ps->sym_lock);
}

void hs_presym_unlock(struct hs_presym *ps)
{
    pthread_mutex_unlock(&ps->sym_lock);
}

void hs_presym_get_stats(struct hs_presym *ps, struct hs_presym_stats *st)
{
    pthread_mutex_lock(&g.lock);
    st->queued = ps->queued;
    st->symbolized = ps->symbolized;
    st->paused = ps->paused;
    pthread_mutex_unlock(&g.lock);
}

bool hs_presym_wait(struct hs_presym *ps, unsigned timeout_ms)
{
    /* pthread_cond_timedwait's clock, by default. */
    uint64_t end = hs_clock_ns(CLOCK_REALTIME) + (uint64_t)timeout_ms * 1000000ull;
    struct timespec deadline = {(time_t)(end / 1000000000ull), (long)(end % 1000000000ull)};
    pthread_mutex_lock(&g.lock);
    int rc = 0;
    while ((ps->len > ps->head || g.busy == ps) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&g.done, &g.lock, &deadline);
    bool done = ps->len == ps->head && g.busy != ps;
    pthread_mutex_unlock(&g.lock);
    return done;
}
