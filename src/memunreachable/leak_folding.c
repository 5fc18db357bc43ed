/* leak_folding.c: the leak graph, its strongly connected components and the per-root totals
 * (see leak_folding.h).
 *
 * Nodes are the leaked allocations numbered 0..L-1 in address order. Edges are kept in
 * compressed rows (off[v] .. off[v + 1] in tgt[]), built in one scan since nodes are scanned
 * in order. Tarjan's algorithm runs on an explicit call stack of (node, next edge) frames.
 * Component numbers come out in reverse topological order; the component DAG is built in
 * compressed rows too, with duplicate edges removed by a stamp per target.
 */
#include "leak_folding.h"

#include "log.h"
#include "range_lookup.h"

#include <errno.h>
#include <string.h>

#define NONE32 UINT32_MAX

/* A growable array of uint32 in the arena. */
struct u32vec {
    uint32_t *v;
    size_t n, cap;
};

static bool u32vec_push(struct u32vec *a, struct hs_arena *arena, uint32_t x)
{
    if (a->n == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 1024;
        uint32_t *p = hs_arena_alloc(arena, ncap * sizeof(*p));
        if (!p)
            return false;
        if (a->v) {
            memcpy(p, a->v, a->n * sizeof(*p));
            hs_arena_free(arena, a->v, a->cap * sizeof(*p));
        }
        a->v = p;
        a->cap = ncap;
    }
    a->v[a->n++] = x;
    return true;
}

/* Everything the folding needs; freed at the end (the result is copied out). */
struct fold {
    const struct hs_mu_heap_walker *w;
    struct hs_arena *arena;
    size_t n;             /* leaked allocations */
    uint32_t *node_alloc; /* node -> allocation index (ascending: nodes are in address order) */
    size_t *off;          /* n + 1 row offsets into edges */
    struct u32vec edges;
    /* Tarjan */
    uint32_t *index, *low, *comp, *stack, *cs_node;
    size_t *cs_edge;
    uint8_t *on_stack;
    size_t ncomp;
    /* Component DAG */
    size_t *comp_count, *comp_bytes;
    size_t *coff; /* ncomp + 1 */
    uint32_t *ctgt;
    size_t nctgt;
    uint32_t *stamp; /* per component */
    uint8_t *has_incoming;
    size_t *total_count, *total_bytes; /* per root component */
    size_t *ub_count, *ub_bytes;       /* upper bounds, per component (only if needed) */
};

static void *alloc_array(struct fold *f, size_t n, size_t elem)
{
    return hs_arena_alloc(f->arena, (n ? n : 1) * elem);
}

static void free_array(struct fold *f, void *p, size_t n, size_t elem)
{
    hs_arena_free(f->arena, p, (n ? n : 1) * elem);
}

/* The node of leaked allocation j: a binary search of node_alloc (no per-allocation table,
 * which would cost 4 bytes for every allocation of the heap, reachable or not). */
static uint32_t node_of(const struct fold *f, size_t j)
{
    return (uint32_t)hs_partition_point(f->n, i, f->node_alloc[i] >= j);
}

/* Scans every leaked allocation for references to other leaked allocations. */
static int build_edges(struct fold *f)
{
    const struct hs_mu_heap_walker *w = f->w;
    const uintptr_t min = w->min, span = w->span;
    for (size_t v = 0; v < f->n; v++) {
        f->off[v] = f->edges.n;
        if (v + 2 < f->n) {
            /* Leaked blocks are scattered among reachable ones: help the prefetcher (see
             * prefetch_ahead in heap_walker.c). */
            const struct hs_mu_alloc *next = &w->allocs[f->node_alloc[v + 2]];
            size_t len = next->end - next->begin < 1024 ? next->end - next->begin : 1024;
            for (size_t off = 0; off < len; off += 64)
                __builtin_prefetch((const void *)(next->begin + off));
        }
        uint32_t self = f->node_alloc[v];
        uintptr_t b = (w->allocs[self].begin + 7) & ~(uintptr_t)7;
        uintptr_t e = w->allocs[self].end & ~(uintptr_t)7;
        if (e <= b)
            continue;
        uint32_t last = NONE32;
        hs_mu_fault_guard_enter(b, e);
        for (const uintptr_t *p = (const uintptr_t *)b; p < (const uintptr_t *)e; p++) {
            uintptr_t x = *p;
            if (__builtin_expect(x - min >= span, 1))
                continue;
            size_t j = hs_mu_heap_walker_find_slow(w, x);
            /* The mark bit first: reachable targets are common. */
            if (j == HS_MU_NONE || j == self || hs_mu_heap_walker_is_marked(w, j))
                continue;
            uint32_t t = node_of(f, j);
            if (t == last)
                continue;
            last = t;
            if (!u32vec_push(&f->edges, f->arena, t)) {
                hs_mu_fault_guard_leave();
                return -ENOMEM;
            }
        }
        hs_mu_fault_guard_leave();
    }
    f->off[f->n] = f->edges.n;
    return 0;
}

static void tarjan(struct fold *f)
{
    size_t n = f->n, counter = 0, sp = 0, csp = 0;
    const uint32_t *tgt = f->edges.v;
    for (size_t i = 0; i < n; i++)
        f->index[i] = NONE32;
    for (size_t root = 0; root < n; root++) {
        if (f->index[root] != NONE32)
            continue;
        /* "call" root */
        f->index[root] = f->low[root] = (uint32_t)counter++;
        f->stack[sp++] = (uint32_t)root;
        f->on_stack[root] = 1;
        f->cs_node[csp] = (uint32_t)root;
        f->cs_edge[csp++] = f->off[root];
        while (csp > 0) {
            uint32_t v = f->cs_node[csp - 1];
            size_t e = f->cs_edge[csp - 1];
            if (e < f->off[v + 1]) {
                f->cs_edge[csp - 1] = e + 1;
                uint32_t t = tgt[e];
                if (f->index[t] == NONE32) {
                    f->index[t] = f->low[t] = (uint32_t)counter++;
                    f->stack[sp++] = t;
                    f->on_stack[t] = 1;
                    f->cs_node[csp] = t;
                    f->cs_edge[csp++] = f->off[t];
                } else if (f->on_stack[t] && f->index[t] < f->low[v]) {
                    f->low[v] = f->index[t];
                }
                continue;
            }
            /* "return" from v */
            csp--;
            if (f->low[v] == f->index[v]) {
                uint32_t x;
                do {
                    x = f->stack[--sp];
                    f->on_stack[x] = 0;
                    f->comp[x] = (uint32_t)f->ncomp;
                } while (x != v);
                f->ncomp++;
            }
            if (csp > 0) {
                uint32_t u = f->cs_node[csp - 1];
                if (f->low[v] < f->low[u])
                    f->low[u] = f->low[v];
            }
        }
    }
}

/* Builds the component DAG (deduplicated edges), sizes and incoming flags. The nodes of each
 * component are listed via a counting sort into `members` (reusing the Tarjan stack). */
static int build_dag(struct fold *f)
{
    size_t nc = f->ncomp;
    const struct hs_mu_heap_walker *w = f->w;
    f->comp_count = alloc_array(f, nc, sizeof(size_t));
    f->comp_bytes = alloc_array(f, nc, sizeof(size_t));
    f->coff = alloc_array(f, nc + 1, sizeof(size_t));
    f->stamp = alloc_array(f, nc, sizeof(uint32_t));
    f->has_incoming = alloc_array(f, nc, 1);
    if (!f->comp_count || !f->comp_bytes || !f->coff || !f->stamp || !f->has_incoming)
        return -ENOMEM;
    memset(f->comp_count, 0, nc * sizeof(size_t));
    memset(f->comp_bytes, 0, nc * sizeof(size_t));
    memset(f->has_incoming, 0, nc);
    for (size_t v = 0; v < f->n; v++) {
        const struct hs_mu_alloc *a = &w->allocs[f->node_alloc[v]];
        f->comp_count[f->comp[v]]++;
        f->comp_bytes[f->comp[v]] += a->end - a->begin;
    }
    /* members: nodes grouped by component; start[c] = coff scratch. */
    uint32_t *members = f->stack; /* n entries, free after tarjan */
    size_t *start = f->coff;
    size_t sum = 0;
    for (size_t c = 0; c < nc; c++) {
        start[c] = sum;
        sum += f->comp_count[c];
    }
    for (size_t v = 0; v < f->n; v++)
        members[start[f->comp[v]]++] = (uint32_t)v;
    /* start[c] is now the end of component c's members; rebuild the beginnings as we go. */

    /* Pass 1: count distinct out-edges per component. Pass 2: fill. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t c = 0; c < nc; c++)
            f->stamp[c] = NONE32;
        size_t m = 0, total = 0;
        for (size_t c = 0; c < nc; c++) {
            size_t first_member = m;
            m += f->comp_count[c];
            if (pass == 1)
                f->coff[c] = total;
            for (size_t k = first_member; k < m; k++) {
                uint32_t v = members[k];
                for (size_t e = f->off[v]; e < f->off[v + 1]; e++) {
                    uint32_t tc = f->comp[f->edges.v[e]];
                    if (tc == c || f->stamp[tc] == c)
                        continue;
                    f->stamp[tc] = (uint32_t)c;
                    if (pass == 1)
                        f->ctgt[total] = tc;
                    else
                        f->has_incoming[tc] = 1;
                    total++;
                }
            }
        }
        if (pass == 0) {
            f->nctgt = total;
            f->ctgt = alloc_array(f, total, sizeof(uint32_t));
            if (!f->ctgt)
                return -ENOMEM;
        } else {
            f->coff[nc] = total;
        }
    }
    return 0;
}

/* Upper bounds of the allocations and bytes reachable from every component, by dynamic
 * programming over the DAG: component numbers are in reverse topological order (Tarjan emits a
 * component after everything it reaches), so successors are done first. A component reached
 * along two paths is counted twice, so the sums are capped at the totals of all leaks. Exact
 * wherever the DAG below is a tree. */
static int upper_bounds(struct fold *f, size_t leaked, size_t leaked_bytes)
{
    size_t nc = f->ncomp;
    f->ub_count = alloc_array(f, nc, sizeof(size_t));
    f->ub_bytes = alloc_array(f, nc, sizeof(size_t));
    if (!f->ub_count || !f->ub_bytes)
        return -ENOMEM;
    for (size_t c = 0; c < nc; c++) {
        size_t count = f->comp_count[c], bytes = f->comp_bytes[c];
        for (size_t e = f->coff[c]; e < f->coff[c + 1]; e++) {
            count += f->ub_count[f->ctgt[e]];
            bytes += f->ub_bytes[f->ctgt[e]];
            if (count > leaked)
                count = leaked;
            if (bytes > leaked_bytes)
                bytes = leaked_bytes;
        }
        f->ub_count[c] = count;
        f->ub_bytes[c] = bytes;
    }
    return 0;
}

/* For every root component, the allocations and bytes reachable from it (itself included),
 * by a DFS over the DAG with a stamp per root (reusing f->stamp and the Tarjan call stack as
 * the DFS stack: at most one entry per component). The DFS steps are bounded by `budget`:
 * once spent, the remaining roots get upper_bounds() instead (counted in num_approximate). */
static int totals(struct fold *f, size_t budget, const struct hs_mu_folding *out,
                  size_t *num_approximate)
{
    size_t nc = f->ncomp;
    f->total_count = alloc_array(f, nc, sizeof(size_t));
    f->total_bytes = alloc_array(f, nc, sizeof(size_t));
    if (!f->total_count || !f->total_bytes)
        return -ENOMEM;
    uint32_t *dfs = f->cs_node; /* n >= nc entries */
    for (size_t c = 0; c < nc; c++)
        f->stamp[c] = NONE32;
    size_t steps = 0;
    bool exact = true;
    for (size_t r = 0; r < nc; r++) {
        if (f->has_incoming[r])
            continue;
        size_t count = 0, bytes = 0, top = 0;
        f->stamp[r] = (uint32_t)r;
        dfs[top++] = (uint32_t)r;
        while (top > 0 && exact) {
            uint32_t c = dfs[--top];
            count += f->comp_count[c];
            bytes += f->comp_bytes[c];
            steps += 1 + (f->coff[c + 1] - f->coff[c]);
            for (size_t e = f->coff[c]; e < f->coff[c + 1]; e++) {
                uint32_t t = f->ctgt[e];
                if (f->stamp[t] == r)
                    continue;
                f->stamp[t] = (uint32_t)r;
                dfs[top++] = t;
            }
            if (steps > budget) {
                exact = false;
                int err = upper_bounds(f, out->num_leaked, out->leaked_bytes);
                if (err != 0)
                    return err;
            }
        }
        if (exact) {
            f->total_count[r] = count;
            f->total_bytes[r] = bytes;
        } else {
            f->total_count[r] = f->ub_count[r];
            f->total_bytes[r] = f->ub_bytes[r];
            ++*num_approximate;
        }
    }
    return 0;
}

static void fold_free(struct fold *f)
{
    size_t n = f->n, nc = f->ncomp;
    free_array(f, f->node_alloc, n, sizeof(uint32_t));
    free_array(f, f->off, n + 1, sizeof(size_t));
    if (f->edges.v)
        hs_arena_free(f->arena, f->edges.v, f->edges.cap * sizeof(uint32_t));
    free_array(f, f->index, n, sizeof(uint32_t));
    free_array(f, f->low, n, sizeof(uint32_t));
    free_array(f, f->comp, n, sizeof(uint32_t));
    free_array(f, f->stack, n, sizeof(uint32_t));
    free_array(f, f->cs_node, n, sizeof(uint32_t));
    free_array(f, f->cs_edge, n, sizeof(size_t));
    free_array(f, f->on_stack, n, 1);
    free_array(f, f->comp_count, nc, sizeof(size_t));
    free_array(f, f->comp_bytes, nc, sizeof(size_t));
    free_array(f, f->coff, nc + 1, sizeof(size_t));
    free_array(f, f->ctgt, f->nctgt, sizeof(uint32_t));
    free_array(f, f->stamp, nc, sizeof(uint32_t));
    free_array(f, f->has_incoming, nc, 1);
    free_array(f, f->total_count, nc, sizeof(size_t));
    free_array(f, f->total_bytes, nc, sizeof(size_t));
    free_array(f, f->ub_count, nc, sizeof(size_t));
    free_array(f, f->ub_bytes, nc, sizeof(size_t));
}

static int fold_run(struct fold *f, struct hs_mu_folding *out, size_t budget)
{
    const struct hs_mu_heap_walker *w = f->w;
    size_t na = w->num_allocs, words = (na + 63) / 64;
    /* Unmarked allocations, a mark word at a time (reachable ones are the great majority). */
    size_t n = 0;
    for (size_t k = 0; k < words; k++) {
        uint64_t clear = ~w->marked[k];
        if (k == words - 1 && na % 64)
            clear &= (1ull << (na % 64)) - 1;
        n += (size_t)__builtin_popcountll(clear);
    }
    f->n = n;
    out->num_leaked = n;
    f->node_alloc = alloc_array(f, n, sizeof(uint32_t));
    f->off = alloc_array(f, n + 1, sizeof(size_t));
    f->index = alloc_array(f, n, sizeof(uint32_t));
    f->low = alloc_array(f, n, sizeof(uint32_t));
    f->comp = alloc_array(f, n, sizeof(uint32_t));
    f->stack = alloc_array(f, n, sizeof(uint32_t));
    f->cs_node = alloc_array(f, n, sizeof(uint32_t));
    f->cs_edge = alloc_array(f, n, sizeof(size_t));
    f->on_stack = hs_arena_calloc(f->arena, n ? n : 1);
    if (!f->node_alloc || !f->off || !f->index || !f->low || !f->comp || !f->stack || !f->cs_node ||
        !f->cs_edge || !f->on_stack)
        return -ENOMEM;
    size_t v = 0;
    for (size_t k = 0; k < words; k++) {
        uint64_t clear = ~w->marked[k];
        if (k == words - 1 && na % 64)
            clear &= (1ull << (na % 64)) - 1;
        for (; clear; clear &= clear - 1) {
            size_t i = k * 64 + (size_t)__builtin_ctzll(clear);
            f->node_alloc[v++] = (uint32_t)i;
            out->leaked_bytes += w->allocs[i].end - w->allocs[i].begin;
        }
    }
    if (n == 0)
        return 0;

    int r = build_edges(f);
    if (r != 0)
        return r;
    out->num_edges = f->edges.n;
    tarjan(f);
    out->num_components = f->ncomp;
    if ((r = build_dag(f)) != 0 || (r = totals(f, budget, out, &out->num_approximate)) != 0)
        return r;
    if (out->num_approximate > 0)
        hs_log_tag(HS_MU_LOG_TAG,
                   "the leak graph is too interconnected to count exactly in time: the "
                   "referenced counts of %zu leaks are upper bounds",
                   out->num_approximate);

    size_t nleaks = 0;
    for (size_t v = 0; v < n; v++)
        nleaks += !f->has_incoming[f->comp[v]];
    out->leaks = hs_arena_alloc(f->arena, (nleaks ? nleaks : 1) * sizeof(*out->leaks));
    if (!out->leaks)
        return -ENOMEM;
    for (size_t v = 0; v < n; v++) {
        uint32_t c = f->comp[v];
        if (f->has_incoming[c])
            continue;
        const struct hs_mu_alloc *a = &w->allocs[f->node_alloc[v]];
        struct hs_mu_folded_leak *l = &out->leaks[out->num_leaks++];
        l->alloc = f->node_alloc[v];
        l->referenced_count = f->total_count[c] - 1;
        l->referenced_size = f->total_bytes[c] - (a->end - a->begin);
    }
    return 0;
}

int hs_mu_leak_folding_run(const struct hs_mu_heap_walker *w, struct hs_arena *arena,
                           struct hs_mu_folding *out)
{
    return hs_mu_leak_folding_run_budget(w, arena, out, HS_MU_FOLD_BUDGET);
}

int hs_mu_leak_folding_run_budget(const struct hs_mu_heap_walker *w, struct hs_arena *arena,
                                  struct hs_mu_folding *out, size_t budget)
{
    memset(out, 0, sizeof(*out));
    struct fold f;
    memset(&f, 0, sizeof(f));
    f.w = w;
    f.arena = arena;
    int r = fold_run(&f, out, budget);
    fold_free(&f);
    if (r != 0) {
        hs_mu_leak_folding_free(out, arena);
        return r;
    }
    return 0;
}

void hs_mu_leak_folding_free(struct hs_mu_folding *f, struct hs_arena *arena)
{
    if (f->leaks)
        hs_arena_free(arena, f->leaks, (f->num_leaks ? f->num_leaks : 1) * sizeof(*f->leaks));
    memset(f, 0, sizeof(*f));
}
