/* heap_tracker.c: the profiler daemon's bookkeeping of one profiled process (see
 * heap_tracker.h).
 *
 * Callstack trie. Nodes live in one growable array (node 0 is the root, the empty stack);
 * each stores its parent, its pc and its depth. A linear-probing hash table of node ids maps
 * (parent, pc) to the child, so interning a stack is one lookup per frame: the frames are
 * inserted from the outermost (pcs[n-1], near main) down to pcs[0], whose node is the
 * callsite. A stack is rebuilt, innermost first, by following parent links from its node.
 * Nodes are never removed. Stacks deeper than HS_TRACKER_MAX_FRAMES keep their innermost
 * frames.
 *
 * Per-heap values. A heap's struct (name, interval) is allocated when the heap is named or
 * first used. The values of all heaps live in one growable array of sites, one per (heap,
 * callsite) pair that ever had a sample, found through a linear-probing table keyed by
 * (heap, node); a live block keeps its site's index. Memory is thus proportional to the
 * pairs used: neither the number of heaps nor the trie's interior nodes multiply it.
 *
 * Live table. Linear probing keyed by (heap, address), with backward-shift deletion (no
 * tombstones). The heap is part of the key: the same address can be live in two heaps at
 * once (a custom heap carving its blocks out of a malloc'd one), and a free only ever frees
 * the block of its own heap; a free naming another heap's live block is "not live" for its
 * heap and follows the pending-free rules below (it ends up stale or dropped).
 *
 * Pending frees. Records in a pool (at most HS_TRACKER_MAX_PENDING_FREES), linked in arrival
 * order in a doubly linked FIFO (so the oldest is dropped in O(1) when the table is full, and
 * any record can be unlinked in O(1)), and chained per (heap, address) in arrival order from
 * a linear-probing table that maps the key to its chain's first record. One address may have
 * several pending frees (it was freed, reused and freed again before the mallocs arrived); a
 * chain holds at most PENDING_PER_ADDRESS of them, the oldest of the chain being dropped
 * first (an address freed over and over without ever being sampled, which a sampled-address
 * filter lets through, must not fill the table by itself). A malloc of (heap, address, seq)
 * drops the chain's records with a sequence number <= seq (stale: they freed earlier blocks
 * never seen; counted in frees_unknown) and uses up the one with the smallest sequence number
 * > seq, if any (counted in frees_reordered; the sample is then allocated and freed at once).
 * Records dropped for room (table full, or chain full) are counted in pending_dropped.
 * Statistics: a free is counted once, in frees (it freed a live block), frees_reordered
 * (used up by its malloc), frees_unknown (found stale, or its heap is out of range) or
 * pending_dropped; frees still pending are in none of them.
 *
 * A malloc whose (heap, address) is live already: when the live block is older (smaller
 * sequence number) its free was lost, so it is counted as freed and replaced; when the live
 * block is newer, the arriving sample is the one whose free was lost (it must have been freed
 * before the address was reused), so it is counted as allocated and freed at once and the
 * live block stays. Both count in `replaced`.
 *
 * Weights. A sample counts `sampled` bytes and sampled / size objects, 1 when size is 0 or
 * sampled <= size. So a sample with sampled == 0 ("not sampled", or a bogus record) counts 1
 * object and 0 bytes; it never moves the peak of sampled bytes.
 *
 * Dump at max, lazily. The tracker keeps a peak epoch E, incremented every time the live
 * sampled bytes of the process (all heaps) exceed their previous peak; the state right after
 * that operation is the new peak. Each (heap, callsite) value keeps its current in-use
 * objects and bytes, a saved copy "at peak", and the epoch of its last change. Before a
 * value's in-use numbers change, if its epoch != E it has not changed since the current peak
 * was reached, so its current numbers are its numbers at the peak: they are copied into the
 * saved copy and its epoch set to E; later changes before the next peak leave the copy alone.
 * Reading: a value whose epoch != E has not changed since the peak (its current numbers are
 * the peak's), one whose epoch == E has its peak numbers in the saved copy. A new peak is then
 * just E++ (every value's epoch becomes != E, i.e. "current is at peak"), O(1) however many
 * callsites there are. Values start zeroed with epoch 0 == the initial E: before any peak,
 * the "peak" is the empty initial state and reads as zero.
 *
 * In-use numbers are doubles summed and subtracted; each value also counts its live blocks
 * and resets its in-use numbers to exactly 0 when the last one is freed, so rounding in the
 * object weights never leaves a residue behind.
 *
 * Every table here is the shared open-addressing table (hash_table.h): linear probing,
 * backward-shift deletion; the trie, site and pending tables store 32-bit indices into the
 * arrays above and read keys through them. Cost against the hand-written tables it replaced
 * (callgrind instruction counts, 2026-11-26; 400,000 records, 24-frame stacks from 300
 * callsites, 20,000 live blocks): 1,769 instructions per malloc record against 1,540 (+15%),
 * 256 per free against 252; +12% for the tracker as a whole. Kept shared all the same: some
 * 230 instructions (under 0.1 us) a sample, while the same sample's unwinding costs
 * microseconds (unwinder.h).
 *
 * Allocation failures: every table is grown before anything is changed, so a failed call
 * leaves the tracker as it was (at most some new trie nodes, which are valid prefixes, and
 * the struct of a heap used for the first time).
 */
#define _GNU_SOURCE
#include "heap_tracker.h"

#include "hash.h"
#include "hs_assert.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define NOT_FOUND SIZE_MAX
#define PENDING_PER_ADDRESS 16
#define MIN_TABLE 64 /* first size of the node, site and pending record arrays */

struct node {
    uintptr_t pc;
    uint32_t parent;
    uint32_t depth; /* frames from the root: 0 for the root */
};

/* One callsite in one heap. */
struct site {
    double alloc_objects, alloc_bytes;
    double inuse_objects, inuse_bytes;
    double peak_objects, peak_bytes; /* in use at the peak; valid when epoch == peak_epoch */
    uint64_t epoch;                  /* the peak epoch when the in-use numbers last changed */
    uint64_t live_blocks;
    uint32_t node;
    uint32_t heap;
};

struct heap {
    char name[HS_TRACKER_HEAP_NAME_MAX];
    bool used;
    uint64_t interval;
};

struct live_block {
    uint64_t addr, seq, size, sampled;
    double objects;
    uint32_t site;
    uint16_t heap;
    bool used; /* slot occupied */
};

struct pending {
    uint64_t addr, seq;
    uint32_t heap;
    uint32_t older, newer; /* FIFO links; `newer` links the free list of unused records */
    uint32_t next;         /* the next pending free of the same (heap, address) */
};

/* The four tables (hash_table.h). The trie, site and pending tables hold 32-bit indices into
 * the tracker's arrays and compare keys through them (ctx is the tracker); the live table
 * holds the blocks themselves. The hash functions are defined after struct hs_tracker. */
struct trie_key {
    uint32_t parent;
    uintptr_t pc;
};
struct site_key {
    uint32_t heap, node;
};
struct addr_key {
    uint32_t heap;
    uint64_t addr;
};

static uint64_t trie_key_hash(const struct trie_key *k, const void *ctx);
static uint64_t trie_entry_hash(const uint32_t *id, const void *ctx);
static bool trie_matches(const uint32_t *id, const struct trie_key *k, const void *ctx);
static uint64_t site_key_hash(const struct site_key *k, const void *ctx);
static uint64_t site_entry_hash(const uint32_t *k, const void *ctx);
static bool site_matches(const uint32_t *k, const struct site_key *key, const void *ctx);
static uint64_t addr_key_hash(const struct addr_key *k, const void *ctx);
static uint64_t live_entry_hash(const struct live_block *b, const void *ctx);
static bool live_matches(const struct live_block *b, const struct addr_key *k, const void *ctx);
static uint64_t pend_entry_hash(const uint32_t *r, const void *ctx);
static bool pend_matches(const uint32_t *r, const struct addr_key *k, const void *ctx);

static inline bool id_is_empty(const uint32_t *id) /* trie: 0 (the root is never stored) */
{
    return *id == 0;
}
static inline void id_clear(uint32_t *id)
{
    *id = 0;
}
static inline bool index_is_empty(const uint32_t *k) /* sites, pending records: NIL */
{
    return *k == NIL;
}
static inline void index_clear(uint32_t *k)
{
    *k = NIL;
}
static inline bool live_is_empty(const struct live_block *b)
{
    return !b->used;
}
static inline void live_clear(struct live_block *b)
{
    b->used = false;
}

HS_HASH_TABLE_DEFINE(trie_table, uint32_t, struct trie_key, trie_key_hash, trie_entry_hash,
                     trie_matches, id_is_empty, id_clear)
HS_HASH_TABLE_DEFINE(site_table, uint32_t, struct site_key, site_key_hash, site_entry_hash,
                     site_matches, index_is_empty, index_clear)
HS_HASH_TABLE_DEFINE(live_table, struct live_block, struct addr_key, addr_key_hash, live_entry_hash,
                     live_matches, live_is_empty, live_clear)
HS_HASH_TABLE_DEFINE(pend_table, uint32_t, struct addr_key, addr_key_hash, pend_entry_hash,
                     pend_matches, index_is_empty, index_clear)

struct hs_tracker {
    /* Trie. */
    struct node *nodes;
    size_t num_nodes, nodes_cap;
    struct trie_table trie; /* (parent, pc) -> node id */

    struct heap *heaps[HS_TRACKER_MAX_HEAPS];

    /* Values per (heap, callsite). */
    struct site *sites;
    size_t num_sites, sites_cap;
    struct site_table smap; /* (heap, node) -> site index */

    /* Live table. */
    struct live_table live; /* (heap, address) -> block */

    /* Pending frees. */
    struct pending *pend;
    size_t pend_cap;  /* records allocated */
    size_t pend_used; /* records ever handed out (the rest of the pool is fresh) */
    size_t pend_count;
    uint32_t pend_free_list;
    uint32_t oldest, newest;
    struct pend_table pmap; /* (heap, address) -> first record of its chain */

    uint64_t peak_epoch;
    struct hs_tracker_stats st; /* callsites and live_blocks are filled in on request */
};

/* ---- Helpers ---------------------------------------------------------------------------- */

static inline uint64_t key_hash(uint32_t heap, uint64_t addr)
{
    return hs_hash_mix64(addr + (uint64_t)(heap + 1) * 0x9e3779b97f4a7c15ull);
}

static inline uint64_t trie_hash(uint32_t parent, uintptr_t pc)
{
    return hs_hash_mix64((uint64_t)pc ^ hs_hash_mix64((uint64_t)parent + 0x632be59bd9b4e019ull));
}

static inline uint64_t site_hash(uint32_t heap, uint32_t node)
{
    return hs_hash_mix64(((uint64_t)heap << 32 | node) + 0x2545f4914f6cdd1dull);
}

static uint64_t trie_key_hash(const struct trie_key *k, const void *ctx)
{
    (void)ctx;
    return trie_hash(k->parent, k->pc);
}
static uint64_t trie_entry_hash(const uint32_t *id, const void *ctx)
{
    const struct node *n = &((const struct hs_tracker *)ctx)->nodes[*id];
    return trie_hash(n->parent, n->pc);
}
static bool trie_matches(const uint32_t *id, const struct trie_key *k, const void *ctx)
{
    const struct node *n = &((const struct hs_tracker *)ctx)->nodes[*id];
    return n->parent == k->parent && n->pc == k->pc;
}
static uint64_t site_key_hash(const struct site_key *k, const void *ctx)
{
    (void)ctx;
    return site_hash(k->heap, k->node);
}
static uint64_t site_entry_hash(const uint32_t *k, const void *ctx)
{
    const struct site *s = &((const struct hs_tracker *)ctx)->sites[*k];
    return site_hash(s->heap, s->node);
}
static bool site_matches(const uint32_t *k, const struct site_key *key, const void *ctx)
{
    const struct site *s = &((const struct hs_tracker *)ctx)->sites[*k];
    return s->node == key->node && s->heap == key->heap;
}
static uint64_t addr_key_hash(const struct addr_key *k, const void *ctx)
{
    (void)ctx;
    return key_hash(k->heap, k->addr);
}
static uint64_t live_entry_hash(const struct live_block *b, const void *ctx)
{
    (void)ctx;
    return key_hash(b->heap, b->addr);
}
static bool live_matches(const struct live_block *b, const struct addr_key *k, const void *ctx)
{
    (void)ctx;
    return b->addr == k->addr && b->heap == k->heap;
}
static uint64_t pend_entry_hash(const uint32_t *r, const void *ctx)
{
    const struct pending *p = &((const struct hs_tracker *)ctx)->pend[*r];
    return key_hash(p->heap, p->addr);
}
static bool pend_matches(const uint32_t *r, const struct addr_key *k, const void *ctx)
{
    const struct pending *p = &((const struct hs_tracker *)ctx)->pend[*r];
    return p->addr == k->addr && p->heap == k->heap;
}

/* A capacity of at least `need` elements of `elem` bytes: double `cap`, at least `min`.
 * Returns 0 on overflow. */
static size_t grown_cap(size_t cap, size_t need, size_t min, size_t elem)
{
    size_t c = cap ? cap : min;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return 0;
        c *= 2;
    }
    if (c > SIZE_MAX / elem)
        return 0;
    return c;
}

/* ---- Trie ------------------------------------------------------------------------------- */

static uint32_t trie_find(const struct hs_tracker *t, uint32_t parent, uintptr_t pc)
{
    const uint32_t *id = trie_table_find(&t->trie, &(struct trie_key){parent, pc});
    return id ? *id : 0;
}

/* Room for one more node in the array and in the table (load <= 1/2). */
static bool trie_reserve(struct hs_tracker *t)
{
    if (t->num_nodes >= NIL - 1)
        return false;
    if (t->num_nodes == t->nodes_cap) {
        size_t cap = grown_cap(t->nodes_cap, t->num_nodes + 1, MIN_TABLE, sizeof(struct node));
        struct node *n = cap ? realloc(t->nodes, cap * sizeof(*n)) : NULL;
        if (!n)
            return false;
        t->nodes = n;
        t->nodes_cap = cap;
    }
    /* After the insertion the table holds num_nodes ids (the root is not in it). */
    return trie_table_reserve(&t->trie, 1);
}

/* The node of the stack pcs[0..n) (innermost first), created as needed. */
static int intern_stack(struct hs_tracker *t, const uintptr_t *pcs, size_t n, uint32_t *leaf)
{
    uint32_t cur = 0;
    for (size_t i = n; i-- > 0;) {
        uint32_t child = trie_find(t, cur, pcs[i]);
        if (child == 0) {
            if (!trie_reserve(t))
                return -1;
            child = (uint32_t)t->num_nodes++;
            t->nodes[child] = (struct node){pcs[i], cur, t->nodes[cur].depth + 1};
            trie_table_put(&t->trie, &child);
        }
        cur = child;
    }
    *leaf = cur;
    return 0;
}

/* Writes the stack of node id into pcs (innermost first); returns its depth. */
static size_t stack_of(const struct hs_tracker *t, uint32_t id, uintptr_t *pcs)
{
    size_t n = 0;
    while (id != 0 && n < HS_TRACKER_MAX_FRAMES) {
        pcs[n++] = t->nodes[id].pc;
        id = t->nodes[id].parent;
    }
    return n;
}

/* ---- Heaps ------------------------------------------------------------------------------ */

static void set_name(struct heap *h, const char *name)
{
    size_t len = strnlen(name, HS_TRACKER_HEAP_NAME_MAX - 1);
    memcpy(h->name, name, len);
    h->name[len] = '\0';
}

/* The heap's struct, created (with a default name) if needed; NULL when out of memory. */
static struct heap *heap_get(struct hs_tracker *t, uint32_t heap)
{
    if (t->heaps[heap])
        return t->heaps[heap];
    struct heap *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    if (heap == 0) {
        set_name(h, "libc.malloc");
    } else {
        snprintf(h->name, sizeof(h->name), "heap %u", (unsigned)heap);
    }
    t->heaps[heap] = h;
    return h;
}

/* ---- Sites ------------------------------------------------------------------------------ */

static size_t site_find(const struct hs_tracker *t, uint32_t heap, uint32_t node)
{
    const uint32_t *k = site_table_find(&t->smap, &(struct site_key){heap, node});
    return k ? *k : NOT_FOUND;
}

/* The site of (heap, node), created if new; NOT_FOUND when out of memory. */
static size_t site_get(struct hs_tracker *t, uint32_t heap, uint32_t node)
{
    size_t k = site_find(t, heap, node);
    if (k != NOT_FOUND)
        return k;
    if (t->num_sites >= NIL - 1)
        return NOT_FOUND;
    if (t->num_sites == t->sites_cap) {
        size_t cap = grown_cap(t->sites_cap, t->num_sites + 1, MIN_TABLE, sizeof(struct site));
        struct site *v = cap ? realloc(t->sites, cap * sizeof(*v)) : NULL;
        if (!v)
            return NOT_FOUND;
        t->sites = v;
        t->sites_cap = cap;
    }
    if (!site_table_reserve(&t->smap, 1))
        return NOT_FOUND;
    k = t->num_sites++;
    t->sites[k] = (struct site){.node = node, .heap = heap};
    site_table_put(&t->smap, &(uint32_t){(uint32_t)k});
    return k;
}

/* Changes a value's in-use numbers by one block (sign +1 or -1), saving its numbers at the
 * peak first if this is its first change since the peak (see the header comment). */
static void site_change(const struct hs_tracker *t, struct site *s, int sign, double objects,
                        uint64_t sampled)
{
    if (s->epoch != t->peak_epoch) {
        s->peak_objects = s->inuse_objects;
        s->peak_bytes = s->inuse_bytes;
        s->epoch = t->peak_epoch;
    }
    if (sign > 0) {
        s->live_blocks++;
        s->inuse_objects += objects;
        s->inuse_bytes += (double)sampled;
    } else {
        s->live_blocks--;
        if (s->live_blocks == 0) {
            s->inuse_objects = 0;
            s->inuse_bytes = 0;
        } else {
            s->inuse_objects -= objects;
            s->inuse_bytes -= (double)sampled;
        }
    }
}

static double weight(uint64_t size, uint64_t sampled)
{
    if (size == 0 || sampled <= size)
        return 1.0;
    return (double)sampled / (double)size;
}

/* ---- Live table ------------------------------------------------------------------------- */

static struct live_block *live_find(struct hs_tracker *t, uint32_t heap, uint64_t addr)
{
    return live_table_find(&t->live, &(struct addr_key){heap, addr});
}

/* ---- Pending frees ---------------------------------------------------------------------- */

/* The table slot of (heap, addr)'s chain, or NULL. */
static uint32_t *pmap_find(struct hs_tracker *t, uint32_t heap, uint64_t addr)
{
    return pend_table_find(&t->pmap, &(struct addr_key){heap, addr});
}

/* Room for one more key and one more record. */
static bool pending_reserve(struct hs_tracker *t)
{
    if (!pend_table_reserve(&t->pmap, 1))
        return false;
    if (t->pend_free_list == NIL && t->pend_used == t->pend_cap &&
        t->pend_count < HS_TRACKER_MAX_PENDING_FREES) {
        size_t cap = grown_cap(t->pend_cap, t->pend_cap + 1, MIN_TABLE, sizeof(struct pending));
        if (cap > HS_TRACKER_MAX_PENDING_FREES)
            cap = HS_TRACKER_MAX_PENDING_FREES;
        struct pending *p = cap ? realloc(t->pend, cap * sizeof(*p)) : NULL;
        if (!p)
            return false;
        t->pend = p;
        t->pend_cap = cap;
    }
    return true;
}

/* Unlinks record r from its chain, the FIFO and the table, and frees it. */
static void pending_remove(struct hs_tracker *t, uint32_t r)
{
    struct pending *p = &t->pend[r];
    uint32_t *slot = pmap_find(t, p->heap, p->addr);
    if (slot) {
        if (*slot == r) {
            if (p->next == NIL)
                pend_table_erase(&t->pmap, slot);
            else
                *slot = p->next; /* same key: the slot stays right */
        } else {
            for (uint32_t q = *slot; q != NIL; q = t->pend[q].next) {
                if (t->pend[q].next == r) {
                    t->pend[q].next = p->next;
                    break;
                }
            }
        }
    }
    if (p->older != NIL)
        t->pend[p->older].newer = p->newer;
    else
        t->oldest = p->newer;
    if (p->newer != NIL)
        t->pend[p->newer].older = p->older;
    else
        t->newest = p->older;
    p->next = NIL;
    p->older = NIL;
    p->newer = t->pend_free_list;
    t->pend_free_list = r;
    t->pend_count--;
}

static int pending_add(struct hs_tracker *t, uint32_t heap, uint64_t addr, uint64_t seq)
{
    if (!pending_reserve(t))
        return -1;
    if (t->pend_count >= HS_TRACKER_MAX_PENDING_FREES) {
        pending_remove(t, t->oldest);
        t->st.pending_dropped++;
    }
    uint32_t *slot = pmap_find(t, heap, addr);
    if (slot) {
        size_t len = 0;
        for (uint32_t q = *slot; q != NIL; q = t->pend[q].next)
            len++;
        if (len >= PENDING_PER_ADDRESS) {
            pending_remove(t, *slot); /* the chain's oldest; the chain stays */
            t->st.pending_dropped++;
            slot = pmap_find(t, heap, addr);
        }
    }

    uint32_t r;
    if (t->pend_free_list != NIL) {
        r = t->pend_free_list;
        t->pend_free_list = t->pend[r].newer;
    } else {
        r = (uint32_t)t->pend_used++;
    }
    struct pending *p = &t->pend[r];
    *p = (struct pending){addr, seq, heap, t->newest, NIL, NIL};
    if (t->newest != NIL)
        t->pend[t->newest].newer = r;
    else
        t->oldest = r;
    t->newest = r;
    t->pend_count++;

    if (!slot) {
        pend_table_put(&t->pmap, &r);
    } else {
        uint32_t q = *slot;
        while (t->pend[q].next != NIL)
            q = t->pend[q].next;
        t->pend[q].next = r;
    }
    return 0;
}

/* At a malloc of (heap, addr, seq): drops the stale pending frees of the address and uses up
 * the one that frees this block, if any (true). */
static bool pending_take(struct hs_tracker *t, uint32_t heap, uint64_t addr, uint64_t seq)
{
    uint32_t *slot = pmap_find(t, heap, addr);
    if (!slot)
        return false;
    uint32_t stale[PENDING_PER_ADDRESS];
    size_t num_stale = 0;
    uint32_t best = NIL;
    for (uint32_t q = *slot; q != NIL; q = t->pend[q].next) {
        if (t->pend[q].seq <= seq) {
            if (num_stale < PENDING_PER_ADDRESS)
                stale[num_stale++] = q;
        } else if (best == NIL || t->pend[q].seq < t->pend[best].seq) {
            best = q;
        }
    }
    for (size_t i = 0; i < num_stale; i++) {
        pending_remove(t, stale[i]);
        t->st.frees_unknown++;
    }
    if (best == NIL)
        return false;
    pending_remove(t, best);
    return true;
}

/* ---- Public API ------------------------------------------------------------------------- */

struct hs_tracker *hs_tracker_new(void)
{
    struct hs_tracker *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->pend_free_list = NIL;
    t->oldest = NIL;
    t->newest = NIL;
    trie_table_init(&t->trie, &hs_table_libc, t, 50);
    site_table_init(&t->smap, &hs_table_libc, t, 50);
    live_table_init(&t->live, &hs_table_libc, t, 75);
    pend_table_init(&t->pmap, &hs_table_libc, t, 50);
    t->nodes = malloc(MIN_TABLE * sizeof(*t->nodes));
    if (!t->nodes || !heap_get(t, 0)) {
        hs_tracker_free(t);
        return NULL;
    }
    t->nodes_cap = MIN_TABLE;
    t->nodes[0] = (struct node){0, 0, 0};
    t->num_nodes = 1;
    return t;
}

void hs_tracker_free(struct hs_tracker *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < HS_TRACKER_MAX_HEAPS; i++)
        free(t->heaps[i]);
    free(t->sites);
    site_table_destroy(&t->smap);
    free(t->nodes);
    trie_table_destroy(&t->trie);
    live_table_destroy(&t->live);
    free(t->pend);
    pend_table_destroy(&t->pmap);
    free(t);
}

int hs_tracker_set_heap(struct hs_tracker *t, uint32_t heap, const char *name, uint64_t interval)
{
    if (!t || heap >= HS_TRACKER_MAX_HEAPS) {
        errno = EINVAL;
        return -1;
    }
    struct heap *h = heap_get(t, heap);
    if (!h) {
        errno = ENOMEM;
        return -1;
    }
    if (name)
        set_name(h, name);
    h->interval = interval;
    return 0;
}

const char *hs_tracker_heap_name(const struct hs_tracker *t, uint32_t heap)
{
    if (!t || heap >= HS_TRACKER_MAX_HEAPS || !t->heaps[heap])
        return NULL;
    return t->heaps[heap]->name;
}

bool hs_tracker_heap_used(const struct hs_tracker *t, uint32_t heap)
{
    return t && heap < HS_TRACKER_MAX_HEAPS && t->heaps[heap] && t->heaps[heap]->used;
}

int hs_tracker_malloc(struct hs_tracker *t, uint32_t heap, uint64_t seq, uint64_t addr,
                      uint64_t size, uint64_t sampled, const uintptr_t *pcs, size_t n,
                      uint64_t ts_ns)
{
    if (!t || heap >= HS_TRACKER_MAX_HEAPS) {
        errno = EINVAL;
        return -1;
    }
    if (!pcs)
        n = 0;
    if (n > HS_TRACKER_MAX_FRAMES)
        n = HS_TRACKER_MAX_FRAMES;

    /* Everything that can fail, before anything changes. */
    uint32_t leaf;
    size_t k = NOT_FOUND;
    struct heap *h = heap_get(t, heap);
    if (!h || intern_stack(t, pcs, n, &leaf) != 0 || !live_table_reserve(&t->live, 1) ||
        (k = site_get(t, heap, leaf)) == NOT_FOUND) {
        errno = ENOMEM;
        return -1;
    }

    double objects = weight(size, sampled);
    struct site *s = &t->sites[k];
    t->st.mallocs++;
    h->used = true;
    s->alloc_objects += objects;
    s->alloc_bytes += (double)sampled;

    if (pending_take(t, heap, addr, seq)) {
        t->st.frees_reordered++; /* allocated and freed at once */
        return 0;
    }

    struct live_block b = {
        .addr = addr,
        .seq = seq,
        .size = size,
        .sampled = sampled,
        .objects = objects,
        .site = (uint32_t)k,
        .heap = (uint16_t)heap,
        .used = true,
    };
    struct live_block *old = live_find(t, heap, addr);
    if (old) {
        t->st.replaced++;
        if (old->seq > seq)
            return 0; /* the live block is newer: this one was freed (free lost) */
        site_change(t, &t->sites[old->site], -1, old->objects, old->sampled);
        t->st.live_sampled_bytes -= old->sampled;
        *old = b;
    } else {
        live_table_put(&t->live, &b);
    }
    site_change(t, s, +1, objects, sampled);
    t->st.live_sampled_bytes += sampled;
    if (t->st.live_sampled_bytes > t->st.peak_sampled_bytes) {
        t->st.peak_sampled_bytes = t->st.live_sampled_bytes;
        t->st.peak_time_ns = ts_ns;
        t->peak_epoch++;
    }
    return 0;
}

int hs_tracker_record_free(struct hs_tracker *t, uint32_t heap, uint64_t seq, uint64_t addr)
{
    if (!t) {
        errno = EINVAL;
        return -1;
    }
    if (heap >= HS_TRACKER_MAX_HEAPS) {
        t->st.frees_unknown++; /* no block can be live there */
        return 0;
    }
    struct live_block *b = live_find(t, heap, addr);
    if (b && b->seq < seq) {
        site_change(t, &t->sites[b->site], -1, b->objects, b->sampled);
        t->st.live_sampled_bytes -= b->sampled;
        t->st.frees++;
        live_table_erase(&t->live, b);
        return 0;
    }
    if (pending_add(t, heap, addr, seq) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void hs_tracker_get_stats(const struct hs_tracker *t, struct hs_tracker_stats *st)
{
    if (!st)
        return;
    if (!t) {
        memset(st, 0, sizeof(*st));
        return;
    }
    *st = t->st;
    st->callsites = t->num_nodes - 1;
    st->live_blocks = t->live.count;
}

size_t hs_tracker_new_pcs(const struct hs_tracker *t, size_t *cursor, uintptr_t *pcs, size_t cap)
{
    hs_assert(*cursor <= t->num_nodes); /* nodes are never removed */
    size_t i = *cursor ? *cursor : 1;   /* node 0, the root, has no pc */
    size_t n = 0;
    while (i < t->num_nodes && n < cap)
        pcs[n++] = t->nodes[i++].pc;
    *cursor = i;
    return n;
}

size_t hs_tracker_memory(const struct hs_tracker *t)
{
    if (!t)
        return 0;
    size_t total = sizeof(*t);
    total += t->nodes_cap * sizeof(struct node);
    total += t->trie.cap * sizeof(uint32_t);
    total += t->live.cap * sizeof(struct live_block);
    total += t->pend_cap * sizeof(struct pending);
    total += t->pmap.cap * sizeof(uint32_t);
    total += t->sites_cap * sizeof(struct site);
    total += t->smap.cap * sizeof(uint32_t);
    for (size_t i = 0; i < HS_TRACKER_MAX_HEAPS; i++)
        if (t->heaps[i])
            total += sizeof(struct heap);
    return total;
}

int hs_tracker_foreach(const struct hs_tracker *t, uint32_t heap, bool at_peak, hs_callsite_fn fn,
                       void *arg)
{
    if (!t || !fn || heap >= HS_TRACKER_MAX_HEAPS)
        return 0;
    uintptr_t pcs[HS_TRACKER_MAX_FRAMES];
    for (size_t k = 0; k < t->num_sites; k++) {
        const struct site *s = &t->sites[k];
        if (s->heap != heap || s->alloc_objects == 0)
            continue;
        struct hs_callsite_values v = {s->alloc_objects, s->alloc_bytes, s->inuse_objects,
                                       s->inuse_bytes};
        if (at_peak && s->epoch == t->peak_epoch) {
            v.inuse_objects = s->peak_objects;
            v.inuse_bytes = s->peak_bytes;
        }
        size_t n = stack_of(t, s->node, pcs);
        int rc = fn(pcs, n, &v, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int hs_tracker_foreach_live(const struct hs_tracker *t, uint32_t heap, hs_live_block_fn fn,
                            void *arg)
{
    if (!t || !fn || heap >= HS_TRACKER_MAX_HEAPS)
        return 0;
    uintptr_t pcs[HS_TRACKER_MAX_FRAMES];
    size_t pos = 0;
    for (const struct live_block *b; (b = live_table_next(&t->live, &pos)) != NULL;) {
        if (b->heap != heap)
            continue;
        size_t n = stack_of(t, t->sites[b->site].node, pcs);
        int rc = fn(pcs, n, b->size, b->objects, b->sampled, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}
