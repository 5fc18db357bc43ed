/* shim_stubs.c: what init.c defines in the shim, for unit tests that compile some of the
 * shim's modules without the rest: the global state (tests set hs_md.cfg and hs_md.mode
 * themselves), the private arena, the re-entry guard, an hs_md_init that only reports
 * the mode the test set, and guarded.c's lookup of a record (no guarded memory). */
#include "debug_state.h"

#include <pthread.h>
#include <stdlib.h>

struct hs_md_state hs_md;
struct hs_arena hs_md_arena;
__thread int hs_md_in_shim __attribute__((tls_model("initial-exec")));

int hs_md_init(void)
{
    return hs_md_mode_now();
}

/* The pointer table's records of the tests' made-up pointers (0x1000, 1 << 52, ...): kept
 * here, as a guarded block's record is kept in its guarded record (pointer_table.c asks
 * hs_md_guarded_track_slot when hs_md.guarded is set), so that nothing is written at
 * addresses the tests do not own. A test adding made-up pointers sets hs_md.guarded; the
 * pointer table's own test (test_pointer_table.c) gives real memory instead. Open addressing,
 * never shrinking, under a mutex (tests add from several threads). */
#define RECORD_SLOTS (1u << 21)

struct record_slot {
    uintptr_t key;
    uint64_t record[2];
};

static struct record_slot *g_record_slots;
static pthread_mutex_t g_record_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_record_count;

void *hs_md_guarded_track_slot(uintptr_t p)
{
    pthread_mutex_lock(&g_record_lock);
    if (!g_record_slots)
        g_record_slots = calloc(RECORD_SLOTS, sizeof(*g_record_slots));
    if (!g_record_slots)
        abort();
    size_t i = (size_t)((p >> 4) * 0x9e3779b97f4a7c15ull >> 43);
    while (g_record_slots[i].key != p && g_record_slots[i].key != 0)
        i = (i + 1) % RECORD_SLOTS;
    if (g_record_slots[i].key == 0) {
        if (++g_record_count > RECORD_SLOTS / 2)
            abort(); /* a test made more pointers than this store is sized for */
        g_record_slots[i].key = p;
    }
    pthread_mutex_unlock(&g_record_lock);
    return g_record_slots[i].record;
}
