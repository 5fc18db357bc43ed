/* fuzz_ring_buffer.c: libFuzzer target for the reader of the profiler's shared ring buffer
 * (src/profiler/ring_buffer.c), which the daemon runs on memory its client controls.
 *
 * The input becomes the contents of a shared area with a 4096-byte data area: its first
 * 4096 bytes the metadata page, the next 4096 the data (zero-padded, longer inputs cut).
 * A fresh reader attaches to the memfd the way the daemon does and reads whatever it can.
 * Beyond the sanitizers, it traps when the reader breaks its contract: a record outside the
 * double mapping or longer than the data area, more records than can fit, a status a reader
 * must not return, a read loop that does not end, or an error that was not recorded in the
 * metadata page. Then a writer tries one record on the same garbage (it must refuse or write
 * inside the mapping).
 *
 * Seeds (fuzz/corpus/ring_buffer/) are valid buffers written by the real writer:
 * `test_ring_buffer --write-seeds DIR` makes them.
 */
#include "ring_buffer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DATA_SIZE 4096u

static struct hs_rb g_owner; /* created once; its mapping is where the input goes */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_owner.map_base == NULL && hs_rb_create(&g_owner, DATA_SIZE) != 0)
        __builtin_trap();

    uint8_t *meta = (uint8_t *)g_owner.meta;
    memset(meta, 0, HS_RB_PAGE_SIZE);
    memset(g_owner.data, 0, DATA_SIZE);
    size_t n = size < HS_RB_PAGE_SIZE ? size : HS_RB_PAGE_SIZE;
    memcpy(meta, data, n);
    if (size > HS_RB_PAGE_SIZE) {
        size_t d = size - HS_RB_PAGE_SIZE;
        memcpy(g_owner.data, data + HS_RB_PAGE_SIZE, d < DATA_SIZE ? d : DATA_SIZE);
    }

    struct hs_rb r;
    if (hs_rb_attach(&r, g_owner.fd) != 0)
        __builtin_trap();
    hs_rb_set_stall_timeout(&r, 0); /* an unpublished record: give up on the second look */

    static uint8_t copy[DATA_SIZE];
    uint64_t records = 0, bytes = 0;
    enum hs_rb_status st = HS_RB_OK;
    /* At most S/8 records (8 bytes each at least), then two looks at a pending one. */
    for (unsigned i = 0; i < DATA_SIZE / 8 + 4; i++) {
        struct hs_rb_record rec;
        st = hs_rb_peek(&r, &rec);
        if (st == HS_RB_PENDING)
            continue;
        if (st != HS_RB_OK)
            break;
        const uint8_t *p = rec.data;
        if (rec.len > DATA_SIZE - 8 || p < r.data || p + rec.len > r.data + 2 * DATA_SIZE ||
            ((uintptr_t)p & 7) != 0)
            __builtin_trap();
        memcpy(copy, p, rec.len); /* what the daemon does first */
        records++;
        bytes += (rec.len + 8 + 7) & ~(size_t)7;
        if (records > DATA_SIZE / 8 || bytes > DATA_SIZE)
            __builtin_trap();
        hs_rb_consume(&r);
    }
    if (st == HS_RB_OK || st == HS_RB_PENDING)
        __builtin_trap(); /* did not stop */
    if (st != HS_RB_EMPTY && st != HS_RB_CORRUPT && st != HS_RB_STALLED)
        __builtin_trap();
    if (st != HS_RB_EMPTY && hs_rb_error(&r) == HS_RB_OK)
        __builtin_trap();
    /* Given up: the reader keeps saying so, and never asks to sleep. */
    struct hs_rb_record rec;
    if (st != HS_RB_EMPTY && (hs_rb_peek(&r, &rec) != st || hs_rb_reader_pause(&r)))
        __builtin_trap();
    hs_rb_reader_resume(&r);
    struct hs_rb_stats stats;
    hs_rb_get_stats(&r, &stats);
    hs_rb_destroy(&r);

    /* A writer on the same metadata: must refuse, or write inside the double mapping (its
     * offset is below S and its record at most S long, whatever the positions say). */
    hs_rb_set_lock_timeout(&g_owner, 0);
    bool wake;
    size_t len = size ? data[0] * 17u : 0;
    hs_rb_write(&g_owner, data, len < size ? len : size, &wake);
    return 0;
}
