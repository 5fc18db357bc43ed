/* debug_alloc.c: malloc, free, realloc and friends with malloc debug on.
 *
 * Without a guard the block is glibc's own (plus expand_alloc bytes) and only the fills
 * apply. With a guard every block carries the header of header.h: its tag is checked on
 * free, realloc and malloc_usable_size, its guards on free and realloc.
 */
#include "debug_alloc.h"

#include "debug_state.h"
#include "guard.h"
#include "header.h"
#include "libc_malloc.h"
#include "report.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static inline bool is_power_of_two(size_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

static inline size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static void *fail_enomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* Allocates a block with header and guards; alignment is a power of two >= 16. */
static void *header_alloc(size_t size, size_t alignment, bool zero)
{
    size_t slack = alignment > HS_MD_MIN_ALIGNMENT ? alignment : 0;
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes, &total) ||
        __builtin_add_overflow(total, slack, &total))
        return fail_enomem();
    void *orig = zero ? __libc_calloc(1, total) : __libc_malloc(total);
    if (!orig)
        return NULL;
    uintptr_t user = (uintptr_t)orig + hs_md_user_offset();
    user = (user + alignment - 1) & ~(uintptr_t)(alignment - 1);
    size_t orig_usable =
        (hs_md.cfg.options & HS_OPT_REAR_GUARD) ? 0 : hs_md_libc_usable_size(orig);
    return hs_md_header_init(hs_md_header_of((void *)user), orig, orig_usable, size);
}

/* glibc block without header: only expand_alloc is added. */
static void *plain_alloc(size_t size, size_t alignment, bool zero)
{
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes, &total))
        return fail_enomem();
    if (alignment > HS_MD_MIN_ALIGNMENT)
        return __libc_memalign(alignment, total);
    return zero ? __libc_calloc(1, total) : __libc_malloc(total);
}

static size_t usable_size(void *ptr)
{
    return hs_md.header ? hs_md_header_of(ptr)->usable_size : hs_md_libc_usable_size(ptr);
}

static void *debug_alloc(size_t size, size_t alignment, bool zero)
{
    if (size == 0)
        size = 1;
    void *p = hs_md.header ? header_alloc(size, alignment, zero) : plain_alloc(size, alignment, zero);
    if (p && !zero && (hs_md.cfg.options & HS_OPT_FILL_ON_ALLOC))
        memset(p, hs_md.cfg.fill_alloc_value, min_size(usable_size(p), hs_md.cfg.fill_on_alloc_bytes));
    return p;
}

/* Checks the header tag of ptr for `function`; reports and returns false when it is not a
 * live allocation. */
static bool verify_tag(void *ptr, const char *function)
{
    struct hs_md_header *h = hs_md_header_of(ptr);
    if (__builtin_expect(h->tag == HS_MD_TAG_LIVE, 1))
        return true;
    if (h->tag == HS_MD_TAG_FREED)
        hs_md_report_pointer_error(ptr, "USED AFTER FREE", function);
    else
        hs_md_report_invalid_tag(ptr, h->tag, function);
    return false;
}

/* Frees a pointer whose tag and guards have been checked. */
static void release(void *ptr)
{
    void *orig = ptr;
    size_t usable;
    if (hs_md.header) {
        struct hs_md_header *h = hs_md_header_of(ptr);
        h->tag = HS_MD_TAG_FREED;
        orig = h->orig_pointer;
        usable = h->usable_size;
    } else {
        usable = hs_md_libc_usable_size(ptr);
    }
    if (hs_md.cfg.options & HS_OPT_FILL_ON_FREE)
        memset(ptr, hs_md.cfg.fill_free_value, min_size(usable, hs_md.cfg.fill_on_free_bytes));
    __libc_free(orig);
}

void *hs_md_debug_malloc(size_t size)
{
    return debug_alloc(size, HS_MD_MIN_ALIGNMENT, false);
}

void hs_md_debug_free(void *ptr)
{
    if (!ptr)
        return;
    if (hs_md.header) {
        if (!verify_tag(ptr, "free"))
            return; /* after a bad pointer free does nothing */
        hs_md_guards_check(hs_md_header_of(ptr));
    }
    release(ptr);
}

void *hs_md_debug_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total))
        return fail_enomem();
    return debug_alloc(total, HS_MD_MIN_ALIGNMENT, true);
}

static void *header_realloc(void *ptr, size_t size)
{
    if (!verify_tag(ptr, "realloc"))
        return NULL;
    struct hs_md_header *h = hs_md_header_of(ptr);
    hs_md_guards_check(h);
    if (size > SIZE_MAX - hs_md.extra_bytes - HS_MD_MIN_ALIGNMENT)
        return fail_enomem();
    if (size == h->size)
        return ptr;
    if (size < h->usable_size) {
        /* Shrinking keeps the block; the rear guard moves to the new end. */
        h->size = size;
        if (hs_md.cfg.options & HS_OPT_REAR_GUARD) {
            h->usable_size = size;
            hs_md_rear_guard_write(h);
        }
        return ptr;
    }
    void *new_ptr = debug_alloc(size, HS_MD_MIN_ALIGNMENT, false);
    if (!new_ptr)
        return NULL;
    memcpy(new_ptr, ptr, h->usable_size);
    release(ptr);
    return new_ptr;
}

static void *plain_realloc(void *ptr, size_t size)
{
    size_t total;
    if (__builtin_add_overflow(size, hs_md.extra_bytes, &total))
        return fail_enomem();
    size_t prev_usable = hs_md_libc_usable_size(ptr);
    void *new_ptr = __libc_realloc(ptr, total);
    if (new_ptr && (hs_md.cfg.options & HS_OPT_FILL_ON_ALLOC)) {
        size_t bytes = min_size(hs_md_libc_usable_size(new_ptr), hs_md.cfg.fill_on_alloc_bytes);
        if (bytes > prev_usable)
            memset((char *)new_ptr + prev_usable, hs_md.cfg.fill_alloc_value, bytes - prev_usable);
    }
    return new_ptr;
}

void *hs_md_debug_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return hs_md_debug_malloc(size);
    if (size == 0) {
        hs_md_debug_free(ptr);
        return NULL;
    }
    return hs_md.header ? header_realloc(ptr, size) : plain_realloc(ptr, size);
}

void *hs_md_debug_memalign(size_t alignment, size_t size)
{
    if (alignment < HS_MD_MIN_ALIGNMENT)
        alignment = HS_MD_MIN_ALIGNMENT;
    if (!is_power_of_two(alignment)) {
        /* Round up to the next power of two, as Android does. */
        if (alignment > (SIZE_MAX >> 1))
            return fail_enomem();
        alignment = (size_t)1 << (64 - __builtin_clzl(alignment));
    }
    return debug_alloc(size, alignment, false);
}

int hs_md_debug_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (alignment < sizeof(void *) || !is_power_of_two(alignment))
        return EINVAL;
    int saved_errno = errno;
    *memptr = hs_md_debug_memalign(alignment, size);
    errno = saved_errno;
    return *memptr ? 0 : ENOMEM;
}

void *hs_md_debug_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return hs_md_debug_memalign(alignment, size);
}

void *hs_md_debug_pvalloc(size_t size)
{
    size_t page = (size_t)getpagesize();
    size_t rounded = (size + page - 1) & ~(page - 1);
    if (rounded < size)
        return fail_enomem();
    return hs_md_debug_memalign(page, rounded);
}

size_t hs_md_debug_malloc_usable_size(void *ptr)
{
    if (!ptr)
        return 0;
    if (hs_md.header && !verify_tag(ptr, "malloc_usable_size"))
        return 0;
    return usable_size(ptr);
}
