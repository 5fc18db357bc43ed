/* header.c: setting up the header and guards of a new allocation (layout in header.h). */
#include "header.h"

#include <string.h>

void *hs_md_header_init(struct hs_md_header *h, void *orig, size_t orig_usable, size_t size)
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
        memset(user - cfg->front_guard_bytes, cfg->front_guard_value, cfg->front_guard_bytes);
    if (cfg->options & HS_OPT_REAR_GUARD)
        memset(user + size, cfg->rear_guard_value, cfg->rear_guard_bytes);
    return user;
}

void hs_md_rear_guard_write(struct hs_md_header *h)
{
    memset(hs_md_user_of(h) + h->size, hs_md.cfg.rear_guard_value, hs_md.cfg.rear_guard_bytes);
}
