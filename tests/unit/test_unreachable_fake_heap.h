/* test_unreachable_fake_heap.h: synthetic heaps for the memunreachable unit tests.
 *
 * Blocks are carved from one mmap'd pool (16-byte aligned, 16 bytes apart, zeroed), and
 * listed in a fake allocation table that fake_iterate and fake_backtrace serve as a
 * struct hs_mu_heap_source, so the walker sees exactly the blocks a test made. The table
 * lives in mmap'd memory too; it stores pointers encoded (~ptr) so that it is never mistaken
 * for a root (the tests do not scan it anyway: roots are only what a test adds).
 */
#ifndef HEAPSCOPE_TESTS_UNREACHABLE_FAKE_HEAP_H
#define HEAPSCOPE_TESTS_UNREACHABLE_FAKE_HEAP_H

#include "capture.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#define FAKE_MAX_BLOCKS (1u << 21)
#define FAKE_POOL_BYTES (512ul << 20)
#define FAKE_BT_FRAMES 16

struct fake_entry {
    uintptr_t enc; /* ~pointer */
    size_t size;
    size_t num_frames;
    uintptr_t frames[FAKE_BT_FRAMES];
};

static struct fake_entry *g_fake;
static size_t g_fake_n;
static uint8_t *g_pool;
static size_t g_pool_used;

static inline void *fake_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        abort();
    }
    return p;
}

/* Forgets every block and zeroes the pool used so far. */
static inline void fake_reset(void)
{
    if (!g_fake) {
        g_fake = fake_map(FAKE_MAX_BLOCKS * sizeof(*g_fake));
        g_pool = fake_map(FAKE_POOL_BYTES);
    }
    memset(g_pool, 0, g_pool_used);
    g_pool_used = 0;
    g_fake_n = 0;
}

/* Carves `size` bytes from the pool (not listed as a block). */
static inline void *fake_carve(size_t size)
{
    size_t at = (g_pool_used + 15) & ~(size_t)15;
    if (at + size + 16 > FAKE_POOL_BYTES)
        abort();
    g_pool_used = at + size + 16; /* 16-byte gap: one past the end is in no block */
    return g_pool + at;
}

/* Lists [p, p + size) as a live block. */
static inline void fake_add(void *p, size_t size)
{
    if (g_fake_n >= FAKE_MAX_BLOCKS)
        abort();
    struct fake_entry *e = &g_fake[g_fake_n++];
    e->enc = ~(uintptr_t)p;
    e->size = size;
    e->num_frames = 0;
}

/* A new listed block of `size` bytes. */
static inline void *fake_block(size_t size)
{
    void *p = fake_carve(size);
    fake_add(p, size);
    return p;
}

static inline void fake_set_backtrace(void *p, size_t n, const uintptr_t *frames)
{
    for (size_t i = 0; i < g_fake_n; i++) {
        if (g_fake[i].enc == ~(uintptr_t)p) {
            g_fake[i].num_frames = n;
            memcpy(g_fake[i].frames, frames, n * sizeof(uintptr_t));
            return;
        }
    }
    abort();
}

static inline int fake_iterate(uintptr_t base, size_t size,
                               void (*callback)(uintptr_t ptr, size_t size, void *arg), void *arg)
{
    uintptr_t end = base + size < base ? UINTPTR_MAX : base + size;
    /* Backwards: the walker must not rely on the table's order. */
    for (size_t i = g_fake_n; i-- > 0;) {
        uintptr_t p = ~g_fake[i].enc;
        if (p >= base && p < end)
            callback(p, g_fake[i].size, arg);
    }
    return 0;
}

static inline ssize_t fake_backtrace(void *ptr, uintptr_t *frames, size_t max)
{
    for (size_t i = 0; i < g_fake_n; i++) {
        if (g_fake[i].enc == ~(uintptr_t)ptr) {
            size_t n = g_fake[i].num_frames < max ? g_fake[i].num_frames : max;
            memcpy(frames, g_fake[i].frames, n * sizeof(uintptr_t));
            return (ssize_t)n;
        }
    }
    return 0;
}

static const struct hs_mu_heap_source g_fake_heap = {
    .iterate = fake_iterate,
    .backtrace = fake_backtrace,
};

#endif
