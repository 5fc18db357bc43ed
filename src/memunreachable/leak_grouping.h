/* leak_grouping.h: merging folded leaks with the same allocation backtrace, ordering, limit.
 *
 * Input: the folded leaks (leak_folding.h), in address order. Each gets its allocation
 * backtrace from heap->backtrace (up to UNREACHABLE_BACKTRACE_FRAMES frames). A leak whose
 * backtrace is identical (same frames, same count) to an earlier one's is merged into that
 * earlier, lower-addressed leak as "similar": similar_count += 1, similar_size += its size,
 * similar_referenced_count/size += its referenced_count/size. Leaks without a backtrace
 * never merge, unless heap->group_by_size is set (a heap source with no backtraces at all):
 * then leaks without frames merge with the ones of the same size. Then
 *     total_size = size + referenced_size + similar_size + similar_referenced_size
 * (saturating), the leaks are sorted by total_size, largest first (ties: lower address
 * first), and cut to `limit`. The kept ones get their contents (the first
 * min(size, UNREACHABLE_CONTENTS_LENGTH) bytes, read under the fault guard: unreadable pages
 * read as zeros).
 *
 * Cost: one heap->backtrace call and one hash probe per folded leak, a sort of 4-byte
 * indices. Memory from the caller's arena; no malloc. Single-threaded (the sweeper); the
 * fault guard must be installed.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_LEAK_GROUPING_H
#define HEAPSCOPE_MEMUNREACHABLE_LEAK_GROUPING_H

#include "capture.h"
#include "heap_walker.h"
#include "leak_folding.h"

#include <heapscope/memunreachable.h>

#include <stddef.h>

struct hs_mu_grouping {
    struct UnreachableLeak *leaks; /* largest total_size first */
    size_t num_leaks;              /* <= limit */
    size_t num_groups;             /* before the limit */
};

/* Groups folding's leaks of walker w (heap->backtrace may be NULL: nothing merges, except by
 * size with heap->group_by_size). Returns 0
 * with *out filled (free with hs_mu_leak_grouping_free), or -ENOMEM. */
int hs_mu_leak_grouping_run(const struct hs_mu_heap_walker *w, const struct hs_mu_folding *folding,
                            const struct hs_mu_heap_source *heap, size_t limit,
                            struct hs_arena *arena, struct hs_mu_grouping *out);

void hs_mu_leak_grouping_free(struct hs_mu_grouping *g, struct hs_arena *arena);

#endif
