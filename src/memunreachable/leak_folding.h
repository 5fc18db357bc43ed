/* leak_folding.h: which unreachable allocations are reported, and what each keeps alive.
 *
 * After marking, the unreachable ("leaked") allocations form a graph: an edge a -> b when a
 * word of a (8-byte aligned) points anywhere inside b (interior pointers count, one past the
 * end does not). Its strongly connected components are collapsed (iterative Tarjan: no
 * recursion, whatever the depth) into a DAG; the components with no edge coming in from
 * another component are the root components. Every allocation of a root component is
 * reported as one leak with
 *     referenced_count = (allocations reachable from its component, its own included) - 1
 *     referenced_size  = (their bytes) - (its own bytes)
 * so A->B gives one leak referencing 1, A<->B->C two leaks referencing 2 each, a 1000-block
 * cycle 1000 leaks referencing 999 each, a diamond one leak referencing 3. Allocations of the
 * other components are only counted in those totals.
 *
 * Cost: scanning the leaked bytes once (under the fault guard) to build the edges; Tarjan is
 * linear in blocks + edges; the totals take one DFS over the component DAG per root
 * component (with a visited stamp, so a block is counted once per root), linear when the
 * roots' reachable sets are disjoint, as in real leaks. Many roots sharing one large subgraph
 * would cost roots x subgraph, so the DFS steps are capped (HS_MU_FOLD_BUDGET: ~60 ms on a
 * shared chain, more when the DAG is scattered in memory): past it, the remaining roots get upper
 * bounds computed over the DAG in one linear pass (shared parts counted once per path, capped at
 * the leak totals; exact when what lies below is a tree), num_approximate counts them and a line is
 * logged.
 *
 * Memory from the caller's arena (~40 bytes per leaked allocation plus 4 bytes per edge);
 * everything but the result is freed before returning. Single-threaded; no malloc.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_LEAK_FOLDING_H
#define HEAPSCOPE_MEMUNREACHABLE_LEAK_FOLDING_H

#include "heap_walker.h"

#include <stddef.h>
#include <stdint.h>

/* One reported leak: an allocation of a root component. */
struct hs_mu_folded_leak {
    uint32_t alloc; /* index into the walker's allocs */
    size_t referenced_count;
    size_t referenced_size;
};

struct hs_mu_folding {
    size_t num_leaked;               /* every unreachable allocation */
    size_t leaked_bytes;             /* their bytes */
    struct hs_mu_folded_leak *leaks; /* ascending address order */
    size_t num_leaks;
    size_t num_components;  /* strongly connected components of the leak graph */
    size_t num_edges;       /* edges between leaked allocations (duplicates dropped) */
    size_t num_approximate; /* root components whose totals are upper bounds (budget spent) */
};

/* DFS steps (components visited + DAG edges followed) for exact referenced counts. */
#define HS_MU_FOLD_BUDGET ((size_t)50 * 1000 * 1000)

/* Folds the unmarked allocations of w (marked with hs_mu_heap_walker_mark). The fault guard
 * must be installed. Returns 0 with *out filled (free with hs_mu_leak_folding_free), or
 * -ENOMEM (*out is then empty). */
int hs_mu_leak_folding_run(const struct hs_mu_heap_walker *w, struct hs_arena *arena,
                           struct hs_mu_folding *out);

/* The same with another step budget (tests). */
int hs_mu_leak_folding_run_budget(const struct hs_mu_heap_walker *w, struct hs_arena *arena,
                                  struct hs_mu_folding *out, size_t budget);

void hs_mu_leak_folding_free(struct hs_mu_folding *f, struct hs_arena *arena);

#endif
