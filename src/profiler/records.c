/* records.c: checking the client's ring-buffer records on the daemon side (see records.h). */
#include "records.h"

#include <string.h>

int hs_record_decode(const void *data, size_t len, struct hs_record_view *out)
{
    if (len < 8 || ((uintptr_t)data & 7) != 0)
        return -1;
    const uint32_t *words = data;
    if (words[1] >= HS_RECORD_MAX_HEAPS)
        return -1;
    out->stack = NULL;
    switch (words[0]) {
    case HS_RECORD_MALLOC: {
        const struct hs_record_malloc *m = data;
        if (len < sizeof(*m) || len - sizeof(*m) != m->stack_len ||
            !hs_stack_gaps_valid(m->gaps, m->ngaps,
                                 m->stack_len + (m->ngaps <= HS_STACK_GAPS
                                                     ? hs_stack_gaps_bytes(m->gaps, m->ngaps)
                                                     : 0)))
            return -1;
        out->type = HS_RECORD_MALLOC;
        out->malloc = m;
        out->stack = (const uint8_t *)(m + 1);
        return 0;
    }
    case HS_RECORD_FREE:
        if (len != sizeof(struct hs_record_free))
            return -1;
        out->type = HS_RECORD_FREE;
        out->free = data;
        return 0;
    case HS_RECORD_HEAP: {
        const struct hs_record_heap *h = data;
        if (len != sizeof(*h) || memchr(h->name, 0, sizeof(h->name)) == NULL)
            return -1;
        out->type = HS_RECORD_HEAP;
        out->heap = h;
        return 0;
    }
    default:
        return -1;
    }
}
