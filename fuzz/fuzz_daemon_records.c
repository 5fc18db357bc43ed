/* fuzz_daemon_records.c: libFuzzer target for what the profiler daemon does with the records
 * a client writes into the shared buffer (src/profiler/daemon/profiled_process.c's path):
 * check each record (records.c), unwind a malloc sample's registers and stack copy
 * (unwinder.c, against this process's real maps), apply it to the heap tracker
 * (heap_tracker.c), and write both kinds of profile (profile_writer.c). The client controls
 * every byte of every record; nothing here may crash, hang or read out of bounds.
 *
 * Input: a sequence of records, each a little-endian u16 length then that many bytes (cut at
 * the end of the input). The bytes are copied to an 8-byte aligned buffer, as the daemon's
 * copy out of the shared memory is. Half the time, a record that decodes as a malloc gets
 * the registers of a real capture point in this process, so that unwinding goes deep. The
 * whole input is also read as a perf map (JIT code names, which the profiled process writes
 * too) for the pprof writer.
 */
#include "heap_tracker.h"
#include "perf_map.h"
#include "profile_writer.h"
#include "records.h"
#include "unwinder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct hs_unwinder *g_unwinder;
static char g_maps[1 << 16];
static size_t g_maps_len;

static void init(void)
{
    g_unwinder = hs_unwinder_new(0, -1);
    FILE *f = fopen("/proc/self/maps", "r");
    if (g_unwinder == NULL || f == NULL)
        __builtin_trap();
    g_maps_len = fread(g_maps, 1, sizeof(g_maps), f);
    fclose(f);
    hs_unwinder_set_maps(g_unwinder, g_maps, g_maps_len);
}

static __attribute__((noinline)) void real_regs(struct hs_unwind_regs *regs)
{
    HS_UNWIND_CAPTURE_REGS(regs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_unwinder == NULL)
        init();
    struct hs_tracker *t = hs_tracker_new();
    if (t == NULL)
        return 0;
    static uint64_t record[(sizeof(struct hs_record_malloc) + 65536) / 8 + 1];
    size_t pos = 0;
    while (pos + 2 <= size) {
        size_t len = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
        pos += 2;
        if (len > size - pos)
            len = size - pos;
        memcpy(record, data + pos, len);
        pos += len;
        struct hs_record_view v;
        if (hs_record_decode(record, len, &v) != 0)
            continue;
        uintptr_t pcs[256];
        struct hs_unwind_result res;
        size_t n;
        switch (v.type) {
        case HS_RECORD_MALLOC: {
            struct hs_record_malloc *m = (struct hs_record_malloc *)record;
            if (m->seq & 1)
                real_regs(&m->regs);
            n = hs_unwind_gapped(g_unwinder, &m->regs, v.stack, m->stack_len, m->gaps, m->ngaps,
                                 pcs, 256, &res);
            if (n > 256 || res.stop > HS_UNWIND_BAD_FRAME ||
                (res.read_in_gap && res.stop != HS_UNWIND_TRUNCATED) ||
                res.nunread > HS_UNWIND_UNREAD ||
                !hs_stack_gaps_in_order(res.unread, res.nunread,
                                        m->stack_len + hs_stack_gaps_bytes(m->gaps, m->ngaps)))
                __builtin_trap();
            hs_tracker_malloc(t, m->heap, m->seq, m->addr, m->size, m->sampled, pcs, n, m->ts_ns);
            break;
        }
        case HS_RECORD_FREE:
            hs_tracker_record_free(t, v.free->heap, v.free->seq, v.free->addr);
            break;
        case HS_RECORD_HEAP:
            hs_tracker_set_heap(t, v.heap->heap, v.heap->name, v.heap->interval);
            break;
        }
    }
    FILE *out = fopen("/dev/null", "w");
    if (out != NULL) {
        struct hs_perf_map *jit = hs_perf_map_parse((const char *)data, size);
        struct hs_profile_meta meta = {
            .pid = 1, .interval = 4096, .maps = g_maps, .maps_len = g_maps_len, .perf_map = jit};
        for (uint32_t heap = 0; heap < HS_TRACKER_MAX_HEAPS; heap++) {
            if (!hs_tracker_heap_used(t, heap))
                continue;
            hs_profile_write_pprof(t, heap, NULL, &meta, out);
            meta.at_peak = !meta.at_peak;
            hs_profile_write_android(t, heap, &meta, out);
        }
        fclose(out);
        hs_perf_map_free(jit);
    }
    hs_tracker_free(t);
    return 0;
}
