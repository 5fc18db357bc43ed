/* fuzz_heap_dump.c: libFuzzer target for the heap dump reader of `heapscope report`: any input
 * gives a parsed dump or an error message, never a crash, and a parsed dump is consistent. */
#include "heap_dump_reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hs_dump d;
    char err[512];
    if (hs_dump_parse((const char *)data, size, &d, err, sizeof(err)) != 0) {
        if (strnlen(err, sizeof(err)) == sizeof(err) || strncmp(err, "line ", 5) != 0)
            abort(); /* every error names its line */
        return 0;
    }
    uint64_t frames = 0;
    for (size_t i = 0; i < d.num_records; i++) {
        frames += d.records[i].num_frames;
        for (uint32_t f = 0; f < d.records[i].num_frames; f++)
            frames ^= d.records[i].frames[f] & 1; /* touch every frame */
    }
    if (d.maps_len > size || strlen(d.fingerprint) > size)
        abort();
    hs_dump_free(&d);
    return (int)(frames & 0);
}
