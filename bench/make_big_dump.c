/* make_big_dump.c: writes a synthetic Android native heap dump for bench/report.sh:
 *   make_big_dump RECORDS FRAMES OUT
 * Frames are real code addresses (spread over the text of libc and of this program, so the
 * report has real symbolization work to do) and the MAPS section is this process's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct range {
    uint64_t start, end;
};

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: make_big_dump RECORDS FRAMES OUT\n");
        return 2;
    }
    long records = atol(argv[1]), frames = atol(argv[2]);
    FILE *maps = fopen("/proc/self/maps", "r"), *out = fopen(argv[3], "w");
    if (!maps || !out)
        return 1;
    struct range text[64];
    int n = 0;
    char line[4096], *all = NULL;
    size_t all_len = 0;
    while (fgets(line, sizeof(line), maps)) {
        uint64_t a, b;
        char perms[8];
        size_t len = strlen(line);
        all = realloc(all, all_len + len + 1);
        memcpy(all + all_len, line, len + 1);
        all_len += len;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &a, &b, perms) == 3 && perms[2] == 'x' &&
            strchr(line, '/') && n < 64)
            text[n++] = (struct range){a, b};
    }
    fprintf(out, "Android Native Heap Dump v1.2\n\nBuild fingerprint: 'bench'\n\n");
    fprintf(out, "Total memory: %ld\nAllocation records: %ld\nBacktrace size: %ld\n\n",
            records * 64, records, frames);
    uint64_t seed = 12345;
    for (long r = 0; r < records; r++) {
        fprintf(out, "z 0  sz %8ld  num %4d  bt", 64L + (r % 64) * 16, 1);
        for (long f = 0; f < frames; f++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            /* ~3000 distinct pcs, like a real program's hot allocation paths. */
            const struct range *t = &text[(seed >> 33) % (uint64_t)n];
            uint64_t pc = t->start + ((seed >> 20) % 3000) * 37 % (t->end - t->start);
            fprintf(out, " %" PRIx64, pc);
        }
        fputc('\n', out);
    }
    fprintf(out, "MAPS\n%sEND\n", all);
    fclose(out);
    return 0;
}
