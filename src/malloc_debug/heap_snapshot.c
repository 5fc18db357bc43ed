/* heap_snapshot.c: consistent sorted copy of the live-allocation table (see heap_snapshot.h).
 *
 * Cost while the program is stopped (all shards locked): one pass over the table slots plus
 * one backtrace-table lock round trip; sorting (introsort, O(n log n)) and merging run after
 * the locks are dropped.
 */
#include "heap_snapshot.h"

#include "arena.h"
#include "debug_state.h"
#include "pointer_table.h"
#include "sort.h"

#include <string.h>

int hs_md_snapshot_compare(const void *pa, const void *pb, void *ctx)
{
    (void)ctx;
    const struct hs_md_snapshot_entry *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->bt != b->bt) {
        if (!a->bt || !b->bt)
            return a->bt ? -1 : 1;
        if (a->bt->num_frames != b->bt->num_frames)
            return a->bt->num_frames > b->bt->num_frames ? -1 : 1;
        for (uint32_t i = 0; i < a->bt->num_frames; i++)
            if (a->bt->frames[i] != b->bt->frames[i])
                return a->bt->frames[i] < b->bt->frames[i] ? -1 : 1;
    }
    if (a->ptr != b->ptr)
        return a->ptr < b->ptr ? -1 : 1;
    return 0;
}

bool hs_md_snapshot_same(const struct hs_md_snapshot_entry *a, const struct hs_md_snapshot_entry *b)
{
    if (a->size != b->size)
        return false;
    if (a->bt == b->bt)
        return true;
    if (!a->bt || !b->bt || a->bt->num_frames != b->bt->num_frames)
        return false;
    return memcmp(a->bt->frames, b->bt->frames, a->bt->num_frames * sizeof(uintptr_t)) == 0;
}

size_t hs_md_snapshot_sort_merge(struct hs_md_snapshot_entry *entries, size_t n,
                                 void (*release)(struct hs_md_bt *bt))
{
    if (n == 0)
        return 0;
    hs_sort(entries, n, sizeof(*entries), hs_md_snapshot_compare, NULL);
    size_t out = 0;
    for (size_t i = 1; i < n; i++) {
        if (hs_md_snapshot_same(&entries[out], &entries[i])) {
            entries[out].num += entries[i].num;
            if (release)
                release(entries[i].bt);
        } else {
            entries[++out] = entries[i];
        }
    }
    return out + 1;
}

struct copy_state {
    struct hs_md_snapshot *s;
    unsigned flags;
};

/* Runs with every shard and the backtrace table locked. */
static void copy_entry(uintptr_t ptr, const struct hs_md_ptr_info *info, void *arg)
{
    struct copy_state *c = arg;
    struct hs_md_snapshot *s = c->s;
    if (!info->bt && (c->flags & HS_MD_SNAPSHOT_ONLY_WITH_BACKTRACE))
        return;
    if (s->count == s->capacity)
        return;             /* cannot happen: capacity >= count checked */
    hs_md_bt_ref(info->bt); /* alive: the table entry holds a reference */
    s->entries[s->count++] = (struct hs_md_snapshot_entry){ptr, info->size, 1, info->bt};
    s->allocations++;
    s->total_memory += info->size;
}

static size_t array_bytes(size_t capacity)
{
    return capacity * sizeof(struct hs_md_snapshot_entry);
}

bool hs_md_snapshot_take(struct hs_md_snapshot *s, unsigned flags)
{
    memset(s, 0, sizeof(*s));
    size_t capacity = hs_md_ptr_count();
    for (;;) {
        /* Room for what the table may gain before the locks are taken. */
        capacity += capacity / 8 + 64;
        struct hs_md_snapshot_entry *entries = hs_arena_alloc(&hs_md_arena, array_bytes(capacity));
        if (!entries)
            return false;

        hs_md_ptr_lock_all();
        size_t live = hs_md_ptr_count(); /* exact: no shard can change */
        if (live > capacity) {
            hs_md_ptr_unlock_all();
            hs_arena_free(&hs_md_arena, entries, array_bytes(capacity));
            capacity = live;
            continue;
        }
        s->entries = entries;
        s->capacity = capacity;
        struct copy_state c = {s, flags};
        hs_md_ptr_foreach_locked(copy_entry, &c);
        hs_md_ptr_unlock_all();
        break;
    }
    s->count = hs_md_snapshot_sort_merge(s->entries, s->count, hs_md_bt_release);
    return true;
}

void hs_md_snapshot_release(struct hs_md_snapshot *s)
{
    for (size_t i = 0; i < s->count; i++)
        hs_md_bt_release(s->entries[i].bt);
    if (s->entries)
        hs_arena_free(&hs_md_arena, s->entries, array_bytes(s->capacity));
    memset(s, 0, sizeof(*s));
}
