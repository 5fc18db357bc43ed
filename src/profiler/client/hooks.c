/* hooks.c: the profiler client's allocation functions, and the records they write.
 *
 * While it is ON an allocation of 1 byte to one interval costs one load and compare (the fast
 * limit, client.h, which stands for the state, size 0 and the exact report of blocks of at
 * least one interval) and a subtraction from this thread's sampling countdown (sampler.h).
 * While it is OFF that compare fails and the state is read: glibc's plus two loads and two
 * predicted branches. A sampled block is allocated at an address aligned to HS_SAMPLED_ALIGN
 * (sampled_set.h), so a free, ON or OFF, first tests the low bits of its address, in a register:
 * only the 1 in 64 of unsampled blocks that share the alignment load from the sampled-address
 * filter. Only a sampled allocation, and the free of a block that was sampled, write a record.
 *
 * Sequence numbers: an allocation takes its number after glibc returned the block, a free
 * before glibc gets it back, so a block's free is always numbered after its allocation and
 * before any reuse of its address (heap_tracker.h orders records by them).
 */
#include "client.h"
#include "libc_alloc.h"
#include "sampled_set.h"
#include "sampler.h"
#include "stack_copy.h"
#include "stack_hints.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HS_EXPORT __attribute__((visibility("default")))

__thread int hs_client_busy __attribute__((tls_model("initial-exec")));
static __thread struct hs_sampler_thread t_sampler __attribute__((tls_model("initial-exec")));

/* ---- Records ------------------------------------------------------------------------------ */

/* Captures this thread's registers and stack and writes the sample, built in place in the
 * shared buffer: nothing of the record sits in this frame, which the stack copy starts in.
 * noinline: the capture point and the copied stack must belong to this frame, which stays
 * alive during the copy (and, without alloca, keeps one stack pointer throughout). */
static __attribute__((noinline)) bool write_malloc_record(uint32_t heap, uint64_t seq,
                                                          uint64_t addr, uint64_t size,
                                                          uint64_t sampled, uint64_t interval)
{
    uintptr_t sp;
    __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
    uint32_t tid = hs_client_tid();
    /* Up to where the daemon's last complete unwind of this thread stopped reading, without
     * the parts of big frames it did not read (stack_gap.h). */
    struct hs_stack_range noted[HS_STACK_GAPS];
    unsigned nnoted;
    uintptr_t hint =
        hs_stack_hint_lookup_gaps(hs_stack_hints_of(hs_client.rb.meta), tid, noted, &nnoted);
    uintptr_t end = hs_stack_copy_end(sp, hint);
    size_t span = end > sp ? (size_t)(end - sp) : 0;
    /* One record takes at most a quarter of the buffer, so that writers never starve. */
    size_t cap = hs_client.rb.size / 4 - sizeof(struct hs_record_malloc);
    if (cap > hs_client.max_stack)
        cap = hs_client.max_stack;
    if (span > cap)
        span = cap;
    struct hs_stack_gap gaps[HS_STACK_GAPS] = {{0, 0}};
    unsigned ngaps = end == hint ? hs_stack_copy_gaps(sp, span, noted, nnoted, gaps) : 0;
    size_t stack_len = span - (size_t)hs_stack_gaps_bytes(gaps, ngaps);
    struct hs_rb_reservation res;
    if (!hs_client_reserve(sizeof(struct hs_record_malloc) + stack_len, false, &res))
        return false;
    struct hs_record_malloc *rec = res.data;
    HS_UNWIND_CAPTURE_REGS(&rec->regs);
    rec->type = HS_RECORD_MALLOC;
    rec->heap = heap;
    rec->seq = seq;
    rec->addr = addr;
    rec->size = size;
    rec->sampled = sampled;
    rec->interval = interval;
    rec->ts_ns = hs_client_now_ns();
    rec->tid = tid;
    rec->stack_len = (uint32_t)stack_len;
    rec->pad = 0;
    uintptr_t from = (uintptr_t)rec->regs.rsp;
    if (from == sp) {
        rec->ngaps = ngaps;
        memcpy(rec->gaps, gaps, sizeof(gaps));
        hs_stack_copy_without_gaps(rec + 1, sp, span, gaps, ngaps);
    } else {
        /* Not with this compiler (no alloca here): the copy must start at the captured rsp.
         * Never past the end of the stack; what is not copied reads as zero. No gaps: they
         * were placed from sp. */
        rec->ngaps = 0;
        memset(rec->gaps, 0, sizeof(rec->gaps));
        size_t n = from < sp ? stack_len : (from < end ? (size_t)(end - from) : 0);
        if (n > stack_len)
            n = stack_len;
        memcpy(rec + 1, (const void *)from, n);
        memset((char *)(rec + 1) + n, 0, stack_len - n);
    }
    hs_client_publish(&res);
    return true;
}

static void fill_free(void *dst, void *arg)
{
    memcpy(dst, arg, sizeof(struct hs_record_free));
}

static void write_free_record(uint32_t heap, uint64_t seq, uint64_t addr)
{
    struct hs_record_free rec = {HS_RECORD_FREE, heap, seq, addr};
    /* A lost free would leave a block in use forever in the profile: always delivered. */
    hs_client_write(sizeof(rec), true, fill_free, &rec);
}

/* True for an allocation the client may sample: not its own, and not one of a vfork child
 * borrowing the parent's memory (its pid differs from the session's), whose stack is not the
 * parent's program. */
static bool may_sample(void)
{
    return !hs_client_busy && hs_client_in_session_process();
}

/* True for a free the client may report: not its own. A vfork child's free of a sampled
 * block really frees the parent's block (one address space), so it is reported like any
 * other, and without the cost of getpid(). */
static bool may_report_free(void)
{
    return !hs_client_busy;
}

/* ---- Sampling, shared with the custom heaps (heap_api.c) ----------------------------------- */

void hs_client_record_sample(uint32_t heap, uint64_t key, uint64_t size, uint64_t sampled,
                             uint64_t interval)
{
    if (!may_sample())
        return;
    hs_client_busy = 1;
    hs_client_injected_rescan();
    if (hs_client_enter()) {
        /* Into the set once written (a dropped sample's free is not worth a record); the block
         * is not the program's until we return, so its free cannot come first. */
        if (write_malloc_record(heap, hs_client_next_seq(), key, size, sampled, interval))
            hs_sampled_insert(key);
        hs_client_leave();
    }
    hs_client_busy = 0;
}

/* Writes the free record of key, numbered seq, unless the client itself is freeing. */
static void report_free(uint32_t heap, uint64_t seq, uint64_t key)
{
    if (!may_report_free())
        return;
    hs_client_busy = 1;
    if (hs_client_enter()) {
        write_free_record(heap, seq, key);
        hs_client_leave();
    }
    hs_client_busy = 0;
}

void hs_client_record_free(uint32_t heap, uint64_t key)
{
    if (hs_sampled_remove(key))
        report_free(heap, hs_client_next_seq(), key);
}

/* The countdown of this thread ran out (size already subtracted), or the block is at least
 * one interval big (reported exactly). */
static __attribute__((noinline)) void sample_slow(void *p, size_t size, uint64_t interval)
{
    size_t counted = size ? size : 1; /* malloc(0) counts as one byte: interval 1 sees it */
    size_t sampled =
        counted >= interval ? size : hs_sampler_sample_slow(&t_sampler, interval, counted);
    if (sampled != 0 || counted >= interval)
        hs_client_record_sample(0, (uint64_t)(uintptr_t)p, size, sampled, interval);
}

/* While ON, before an allocation of size bytes: counts it down and says whether it is to be
 * sampled (the countdown ran out, or it is at least one interval big). Sampling decides on
 * the size asked for, so the allocation itself needs no frame of ours unless it is sampled. */
static inline bool sample_due(size_t size, uint64_t interval)
{
    size_t counted = size ? size : 1;
    if (__builtin_expect(counted >= interval, 0))
        return true;
    t_sampler.countdown -= (int64_t)counted;
    return __builtin_expect(t_sampler.countdown <= 0, 0);
}

static inline uint64_t current_interval(void)
{
    return __atomic_load_n(&hs_client.interval, __ATOMIC_RELAXED);
}

/* Whether an allocation of size bytes is to be sampled, with *interval the interval in force,
 * or 0 when the countdown ran out on the fast path: the sampled path then calls
 * session_interval(). An allocation of 1 <= size < interval while ON (hs_client_fast: one load
 * and compare) costs the countdown and nothing else; the state, size 0 and blocks of at least
 * one interval are looked at only when that compare fails. (The fast path makes no call of
 * its own, so that the function needs no stack frame and tail-jumps to glibc.) */
static inline bool due_now(size_t size, uint64_t *interval)
{
    if (hs_client_fast(size)) {
        t_sampler.countdown -= (int64_t)size;
        *interval = 0;
        return __builtin_expect(t_sampler.countdown <= 0, 0);
    }
    if (!hs_client_on())
        return false;
    *interval = current_interval();
    return sample_due(size, *interval);
}

/* For a sampled path given interval 0 by due_now: the interval in force, or 0 when the
 * session has ended (the fast limit was stale: it is put right; the allocation is glibc's). */
static uint64_t session_interval(void)
{
    if (!hs_client_on()) {
        hs_client_publish_fast_limit();
        return 0;
    }
    return current_interval();
}

static __attribute__((noinline)) void free_slow(void *p)
{
    hs_client_record_free(0, (uint64_t)(uintptr_t)p);
    __libc_free(p);
}

/* ---- Sampled blocks: where their address says so ----------------------------------------- */

/* glibc fills fresh memory with a perturb byte when asked (MALLOC_PERTURB_, read at start, or
 * mallopt(M_PERTURB), seen below), so then a sampled calloc must always clear its block. */
static int g_perturb;

__attribute__((constructor)) static void read_perturb(void)
{
    const char *v = getenv("MALLOC_PERTURB_");
    g_perturb = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* dlclose: the daemon reads the samples taken so far before their code goes away
 * (hs_client_sync_before_unmap), so that their stacks unwind. Preloaded, this definition is
 * the program's dlclose; injected, got_hooks.c's wrapper does the same. */
HS_EXPORT int dlclose(void *handle)
{
    static int (*real)(void *);
    int (*fn)(void *) = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose"); /* libc's, after this library */
        if (fn == NULL)
            return -1; /* cannot happen with glibc; the library stays loaded, as on an error */
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    hs_client_sync_before_unmap();
    return fn(handle);
}

extern int __libc_mallopt(int param, int value);

HS_EXPORT int mallopt(int param, int value)
{
    int r = __libc_mallopt(param, value);
    if (param == M_PERTURB && r == 1)
        __atomic_store_n(&g_perturb, value != 0, __ATOMIC_RELAXED);
    return r;
}

static size_t sampled_alignment(size_t alignment)
{
    return alignment > HS_SAMPLED_ALIGN ? alignment : HS_SAMPLED_ALIGN;
}

/* A block for a sampled allocation of size bytes (see sampled_set.h). */
static void *alloc_sampled(size_t alignment, size_t size)
{
    return __libc_memalign(sampled_alignment(alignment), size);
}

/* glibc's chunk header: a block glibc mmapped for itself is fresh from the kernel, zero-filled
 * (glibc's calloc skips the clearing for it likewise). */
static bool fresh_mmapped(const void *p)
{
    return !__atomic_load_n(&g_perturb, __ATOMIC_RELAXED) &&
           (((const size_t *)p)[-1] & 2) != 0; /* IS_MMAPPED */
}

/* ---- The exported functions ---------------------------------------------------------------- */

/* While the client is OFF, and for every allocation it does not sample, each function is two
 * loads and compares at most, a subtraction, and a tail jump to glibc: no stack frame. Only a
 * sampled allocation goes through an out-of-line *_sampled function (given interval 0 by the
 * fast path: it checks the session first). */
#define SAMPLED_PATH static __attribute__((noinline))

SAMPLED_PATH void *malloc_sampled(size_t size, uint64_t interval)
{
    if (interval == 0 && (interval = session_interval()) == 0)
        return __libc_malloc(size);
    void *p = alloc_sampled(0, size);
    if (p != NULL)
        sample_slow(p, size, interval);
    return p;
}

HS_EXPORT void *malloc(size_t size)
{
    uint64_t interval;
    if (!due_now(size, &interval))
        return __libc_malloc(size);
    return malloc_sampled(size, interval);
}

HS_EXPORT void free(void *p)
{
    uint64_t key = (uint64_t)(uintptr_t)p;
    if (__builtin_expect(hs_sampled_aligned(key), 0) && p != NULL && hs_client_on() &&
        hs_sampled_maybe(key)) {
        free_slow(p);
        return;
    }
    __libc_free(p);
}

SAMPLED_PATH void *calloc_sampled(size_t total, uint64_t interval)
{
    if (interval == 0 && (interval = session_interval()) == 0)
        return __libc_calloc(total, 1); /* the product did not overflow */
    void *p = alloc_sampled(0, total);
    if (p != NULL) {
        if (!fresh_mmapped(p))
            memset(p, 0, total);
        sample_slow(p, total, interval);
    }
    return p;
}

HS_EXPORT void *calloc(size_t nmemb, size_t size)
{
    size_t total;
    uint64_t interval;
    /* A product that overflows makes calloc fail: nothing to sample. */
    if (__builtin_mul_overflow(nmemb, size, &total) || !due_now(total, &interval))
        return __libc_calloc(nmemb, size);
    return calloc_sampled(total, interval);
}

/* A sampled realloc that grows or starts from a block placed elsewhere: the new block is
 * placed like every sampled block, so it moves. */
static void *realloc_moving(void *p, size_t size)
{
    void *q = alloc_sampled(0, size);
    if (q != NULL && p != NULL) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < size ? old : size);
    }
    return q;
}

/* Whether glibc resizes p to size where it is, keeping the sampled placement: p is placed
 * like a sampled block and keeps or shrinks its size. glibc then splits the rest off in place,
 * or mremaps a block it mmapped, which keeps the block's offset in its page and so its
 * alignment. (Moving such a block cost a copy of all of it, reading pages the program may never
 * have touched: a sampled 128 KiB block realloc'd to the same size, most of malloc_bench's
 * samples at 512 KiB, copied 128 KiB each time.) */
static bool resized_in_place(void *p, size_t size)
{
    return p != NULL && hs_sampled_aligned((uint64_t)(uintptr_t)p) && size <= malloc_usable_size(p);
}

/* due: the new block is to be sampled (decided by the caller, before the call). */
SAMPLED_PATH void *realloc_on(void *p, size_t size, bool due, uint64_t interval)
{
    if (due && interval == 0 && (interval = session_interval()) == 0)
        due = false;
    if (!due && !hs_client_on())
        return __libc_realloc(p, size);
    uint64_t key = (uint64_t)(uintptr_t)p;
    bool was_sampled =
        p != NULL && hs_sampled_aligned(key) && hs_sampled_maybe(key) && hs_sampled_remove(key);
    /* The free's number is taken before glibc can hand the address to another thread. */
    uint64_t free_seq = was_sampled ? hs_client_next_seq() : 0;
    bool in_place = due && resized_in_place(p, size);
    void *q = due && !in_place ? realloc_moving(p, size) : __libc_realloc(p, size);
    /* glibc keeps a shrinking block where it is (resized_in_place); should it ever move one to
     * an address that a free would not test, the new block is simply not sampled. */
    if (in_place && q != NULL && !hs_sampled_aligned((uint64_t)(uintptr_t)q))
        due = false;
    bool moved_away = due && !in_place && q != NULL && p != NULL;
    if (was_sampled) {
        if (q == NULL && size != 0)
            hs_sampled_insert(key); /* failed: p lives on, still sampled */
        else
            report_free(0, free_seq, key);
    }
    if (moved_away)
        __libc_free(p);
    if (due && q != NULL)
        sample_slow(q, size, interval);
    return q;
}

HS_EXPORT void *realloc(void *p, size_t size)
{
    /* Sampling decides before the call (size 0 frees p: nothing new to sample). A block that
     * cannot have been sampled, resized without a sample, or any resize while OFF: glibc's
     * alone. */
    uint64_t interval = 0;
    bool due = size != 0 && due_now(size, &interval);
    if (!due && !hs_sampled_aligned((uint64_t)(uintptr_t)p))
        return __libc_realloc(p, size);
    return realloc_on(p, size, due, interval);
}

HS_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

SAMPLED_PATH void *memalign_sampled(size_t alignment, size_t size, uint64_t interval)
{
    if (interval == 0 && (interval = session_interval()) == 0)
        return __libc_memalign(alignment, size);
    void *p = alloc_sampled(alignment, size);
    if (p != NULL)
        sample_slow(p, size, interval);
    return p;
}

HS_EXPORT void *memalign(size_t alignment, size_t size)
{
    uint64_t interval;
    if (!due_now(size, &interval))
        return __libc_memalign(alignment, size);
    return memalign_sampled(alignment, size, interval);
}

HS_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    /* glibc 2.36's aligned_alloc is memalign */
    return memalign(alignment, size);
}

SAMPLED_PATH int posix_memalign_sampled(void **memptr, size_t alignment, size_t size,
                                        uint64_t interval)
{
    if (interval == 0 && (interval = session_interval()) == 0)
        return hs_libc_posix_memalign(memptr, alignment, size);
    /* A valid alignment is raised to the sampled blocks' (an invalid one fails as it is). */
    bool valid = alignment != 0 && (alignment & (alignment - 1)) == 0 &&
                   alignment % sizeof(void *) == 0;
    int err = hs_libc_posix_memalign(memptr, valid ? sampled_alignment(alignment) : alignment,
                                     size);
    if (err == 0)
        sample_slow(*memptr, size, interval);
    return err;
}

HS_EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    uint64_t interval;
    if (!due_now(size, &interval))
        return hs_libc_posix_memalign(memptr, alignment, size);
    return posix_memalign_sampled(memptr, alignment, size, interval);
}

HS_EXPORT void *valloc(size_t size)
{
    return hs_client_memalign((size_t)getpagesize(), size);
}

SAMPLED_PATH void *pvalloc_sampled(size_t size, uint64_t interval)
{
    if (interval == 0 && (interval = session_interval()) == 0)
        return __libc_pvalloc(size);
    void *p = __libc_pvalloc(size);
    if (p != NULL)
        sample_slow(p, size, interval);
    return p;
}

HS_EXPORT void *pvalloc(size_t size)
{
    uint64_t interval;
    if (!due_now(size, &interval))
        return __libc_pvalloc(size);
    return pvalloc_sampled(size, interval);
}

/* Inside the library these names always mean the functions above: an injected client is not
 * first in the global scope, where `malloc` is glibc's (injected.c). */
#define HIDDEN_ALIAS(name) \
    __typeof(name) hs_client_##name                                                            \
        __attribute__((alias(#name), copy(name), visibility("hidden")))
HIDDEN_ALIAS(malloc);
HIDDEN_ALIAS(free);
HIDDEN_ALIAS(calloc);
HIDDEN_ALIAS(realloc);
HIDDEN_ALIAS(reallocarray);
HIDDEN_ALIAS(memalign);
HIDDEN_ALIAS(aligned_alloc);
HIDDEN_ALIAS(posix_memalign);
HIDDEN_ALIAS(valloc);
HIDDEN_ALIAS(pvalloc);
