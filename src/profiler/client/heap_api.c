/* heap_api.c: custom heaps (include/heapscope/heapprofd.h).
 *
 * A heap has a name, an interval and a sampler of its own, shared by all threads under a
 * small spinlock (custom allocators report less often than malloc runs). Its allocations are
 * keyed in the sampled-address set, and sent to the daemon, as id ^ (heap << 56), so that
 * equal ids of different heaps (and malloc's addresses, below 2^56) never meet.
 */
#include "client.h"
#include "sampled_set.h"
#include "sampler.h"
#include "spinlock.h"

#include <string.h>

#define HS_EXPORT __attribute__((visibility("default")))

struct custom_heap {
    char name[HS_RECORD_HEAP_NAME_MAX];
    uint64_t interval; /* 0: the session's */
    hs_spinlock lock;
    struct hs_sampler_thread sampler;
};

static struct custom_heap g_heaps[HS_RECORD_MAX_HEAPS];
static uint32_t g_num_heaps = 1; /* heap 0 is malloc's */
static hs_spinlock g_register_lock;

/* hooks.c */
void hs_client_record_sample(uint32_t heap, uint64_t key, uint64_t size, uint64_t sampled,
                             uint64_t interval);
void hs_client_record_free(uint32_t heap, uint64_t key);

static uint64_t heap_key(uint32_t heap, uint64_t id)
{
    return id ^ ((uint64_t)heap << 56);
}

static void fill_heap(void *dst, void *arg)
{
    memcpy(dst, arg, sizeof(struct hs_record_heap));
}

static void announce(uint32_t heap)
{
    struct hs_record_heap rec;
    memset(&rec, 0, sizeof(rec));
    rec.type = HS_RECORD_HEAP;
    rec.heap = heap;
    rec.interval = g_heaps[heap].interval;
    memcpy(rec.name, g_heaps[heap].name, sizeof(rec.name));
    int busy = hs_client_busy;
    hs_client_busy = 1;
    if (hs_client_enter()) {
        hs_client_write(sizeof(rec), true, fill_heap, &rec);
        hs_client_leave();
    }
    hs_client_busy = busy;
}

void hs_client_announce_heaps(void)
{
    uint32_t n = __atomic_load_n(&g_num_heaps, __ATOMIC_ACQUIRE);
    for (uint32_t h = 1; h < n; h++)
        announce(h);
}

HS_EXPORT uint32_t heapscope_heap_register(const char *name, uint64_t interval)
{
    size_t len = name ? strnlen(name, HS_RECORD_HEAP_NAME_MAX) : 0;
    if (len == 0 || len >= HS_RECORD_HEAP_NAME_MAX || strcmp(name, "libc.malloc") == 0)
        return 0;
    hs_spin_lock(&g_register_lock);
    uint32_t n = g_num_heaps, heap = 0;
    for (uint32_t h = 1; h < n && heap == 0; h++)
        if (strcmp(g_heaps[h].name, name) == 0)
            heap = h;
    bool is_new = heap == 0 && n < HS_RECORD_MAX_HEAPS;
    if (is_new) {
        heap = n;
        memcpy(g_heaps[heap].name, name, len + 1);
        g_heaps[heap].interval = interval;
        __atomic_store_n(&g_num_heaps, n + 1, __ATOMIC_RELEASE);
    }
    hs_spin_unlock(&g_register_lock);
    if (is_new)
        announce(heap);
    return heap;
}

static bool valid_heap(uint32_t heap)
{
    return heap > 0 && heap < __atomic_load_n(&g_num_heaps, __ATOMIC_ACQUIRE);
}

HS_EXPORT bool heapscope_heap_report_alloc(uint32_t heap, uint64_t id, uint64_t size)
{
    if (!hs_client_on() || !valid_heap(heap))
        return false;
    struct custom_heap *h = &g_heaps[heap];
    uint64_t interval =
        h->interval ? h->interval : __atomic_load_n(&hs_client.interval, __ATOMIC_RELAXED);
    hs_spin_lock(&h->lock);
    size_t sampled = hs_sampler_sample(&h->sampler, interval, size ? size : 1);
    hs_spin_unlock(&h->lock);
    if (sampled == 0)
        return false;
    if (size == 0)
        sampled = 0; /* as for malloc(0): one object of no bytes */
    hs_client_record_sample(heap, heap_key(heap, id), size, sampled, interval);
    return true;
}

HS_EXPORT bool heapscope_heap_report_sample(uint32_t heap, uint64_t id, uint64_t size,
                                            uint64_t sampled_size)
{
    if (!hs_client_on() || !valid_heap(heap))
        return false;
    hs_client_record_sample(heap, heap_key(heap, id), size, sampled_size, 0);
    return true;
}

HS_EXPORT void heapscope_heap_report_free(uint32_t heap, uint64_t id)
{
    uint64_t key = heap_key(heap, id);
    if (hs_client_on() && valid_heap(heap) && hs_sampled_maybe(key))
        hs_client_record_free(heap, key);
}

HS_EXPORT bool heapscope_profiling(void)
{
    return hs_client_on();
}
