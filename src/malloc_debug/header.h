/* header.h: the layout of an allocation when a guard is on.
 *
 *   orig (from glibc)
 *   | link area (16) | header (32) | front guard (F) | user data (size) | rear guard (R) | expand |
 *                                                   ^ user pointer (16-byte aligned, or more
 *                                                     for memalign: the link area grows)
 *
 * The header fields are Android's, in Android's order. The link area is Linux-specific:
 * glibc's free lists write their links into the first 16 bytes of a freed chunk (tcache:
 * next + key; fastbins and smallbins: fd/bk), which would wipe the freed tag and so the
 * USED AFTER FREE report of a second free. With the link area the tag survives.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_HEADER_H
#define HEAPSCOPE_MALLOC_DEBUG_HEADER_H

#include "byte_check.h"
#include "debug_state.h"

#include <stddef.h>
#include <stdint.h>

#define HS_MD_TAG_LIVE 0x1ee7d00du
#define HS_MD_TAG_FREED 0x1cc7dccdu
#define HS_MD_LINK_AREA 16u
#define HS_MD_MIN_ALIGNMENT 16u

struct hs_md_header {
    uint32_t tag;
    void *orig_pointer; /* what glibc returned; passed back to glibc's free */
    size_t size;        /* requested size */
    size_t usable_size; /* what malloc_usable_size reports: size with a rear guard */
} __attribute__((aligned(16)));

_Static_assert(sizeof(struct hs_md_header) == 32, "header is 32 bytes on 64-bit");

static inline struct hs_md_header *hs_md_header_of(const void *user)
{
    return (struct hs_md_header *)((uintptr_t)user - hs_md.cfg.front_guard_bytes -
                                   sizeof(struct hs_md_header));
}

static inline uint8_t *hs_md_user_of(const struct hs_md_header *h)
{
    return (uint8_t *)h + sizeof(*h) + hs_md.cfg.front_guard_bytes;
}

/* Bytes between the start of a glibc block and the user pointer, at minimum alignment. */
static inline size_t hs_md_user_offset(void)
{
    return HS_MD_LINK_AREA + sizeof(struct hs_md_header) + hs_md.cfg.front_guard_bytes;
}

/* Fills in the header at h for a block of `size` user bytes whose glibc block is `orig`
 * (of usable size `orig_usable`), writes both guards, and returns the user pointer. Inline:
 * every allocation with a guard runs it. */
static inline __attribute__((always_inline)) void *
hs_md_header_init(struct hs_md_header *h, void *orig, size_t orig_usable, size_t size)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    uint8_t *user = hs_md_user_of(h);

    h->tag = HS_MD_TAG_LIVE;
    h->orig_pointer = orig;
    h->size = size;
    if (cfg->options & HS_OPT_REAR_GUARD) {
        h->usable_size = size;
    } else {
        /* Everything glibc gave us past the user pointer, minus the expand_alloc slack
         * which the program may use too (that is what expand_alloc is for). */
        h->usable_size = orig_usable - (size_t)(user - (uint8_t *)orig);
    }
    if (cfg->options & HS_OPT_FRONT_GUARD)
        hs_md_fill(user - cfg->front_guard_bytes, cfg->front_guard_bytes, cfg->front_guard_value);
    if (cfg->options & HS_OPT_REAR_GUARD)
        hs_md_fill(user + size, cfg->rear_guard_bytes, cfg->rear_guard_value);
    return user;
}

/* Writes the rear guard after the current h->size bytes (after a shrinking realloc). */
void hs_md_rear_guard_write(struct hs_md_header *h);

#endif
