/* pointer_table_helpers.h: filling and emptying malloc debug's pointer table in unit tests
 * (test_heap_snapshot.c, test_heap_dump.c). Static functions: include once per test. */
#ifndef HEAPSCOPE_TESTS_POINTER_TABLE_HELPERS_H
#define HEAPSCOPE_TESTS_POINTER_TABLE_HELPERS_H

#include "check.h"
#include "pointer_table.h"

#include <stdint.h>
#include <stdlib.h>

/* Adds a made-up allocation with a backtrace of n frames (none when n is 0); returns the
 * backtrace record (the table holds the reference). */
static struct hs_md_bt *add(uintptr_t ptr, size_t size, size_t n, const uintptr_t *frames)
{
    struct hs_md_ptr_info info = {.size = size, .bt = hs_md_bt_acquire(frames, n)};
    CHECK(hs_md_ptr_add((void *)ptr, &info));
    return info.bt;
}

struct hs_test_collect {
    uintptr_t *ptrs;
    size_t count;
};

static void hs_test_collect_ptr(uintptr_t p, const struct hs_md_ptr_info *info, void *arg)
{
    (void)info;
    struct hs_test_collect *c = arg;
    c->ptrs[c->count++] = p;
}

/* Removes every entry of the table, dropping the references the entries held. */
static void remove_all(void)
{
    hs_md_ptr_lock_all();
    struct hs_test_collect c = {calloc(hs_md_ptr_count() + 1, sizeof(uintptr_t)), 0};
    hs_md_ptr_foreach_locked(hs_test_collect_ptr, &c);
    hs_md_ptr_unlock_all();
    for (size_t i = 0; i < c.count; i++) {
        struct hs_md_ptr_info out;
        if (hs_md_ptr_remove((void *)c.ptrs[i], &out))
            hs_md_bt_release(out.bt);
    }
    free(c.ptrs);
}

#endif
