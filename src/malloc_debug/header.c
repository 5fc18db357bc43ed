/* header.c: rewriting the rear guard after a shrinking realloc (layout in header.h). */
#include "header.h"

#include <string.h>

void hs_md_rear_guard_write(struct hs_md_header *h)
{
    hs_md_fill(hs_md_user_of(h) + h->size, hs_md.cfg.rear_guard_bytes, hs_md.cfg.rear_guard_value);
}
