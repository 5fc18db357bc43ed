/* test_records.c: the daemon's check of the client's records (src/profiler/records.c), for
 * the malloc record's stack copy and the gaps it leaves out (stack_gap.h): every field that
 * says how long the copy is must agree with the record's length, and gaps must lie in order
 * inside the span. */
#include "check.h"
#include "records.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t g_buf[(sizeof(struct hs_record_malloc) + 4096) / 8];

/* A malloc record with stack_len bytes of copy and the given gaps; returns its length. */
static size_t malloc_record(uint32_t stack_len, const struct hs_stack_gap *gaps, uint32_t ngaps)
{
    memset(g_buf, 0, sizeof g_buf);
    struct hs_record_malloc *m = (struct hs_record_malloc *)g_buf;
    m->type = HS_RECORD_MALLOC;
    m->stack_len = stack_len;
    m->ngaps = ngaps;
    if (ngaps > 0 && ngaps <= HS_STACK_GAPS)
        memcpy(m->gaps, gaps, ngaps * sizeof gaps[0]);
    return sizeof *m + stack_len;
}

static int decode(size_t len)
{
    struct hs_record_view v;
    return hs_record_decode(g_buf, len, &v);
}

int main(void)
{
    struct hs_record_view v;
    /* Without gaps: the copy is what follows. */
    size_t len = malloc_record(1024, NULL, 0);
    CHECK_EQ(hs_record_decode(g_buf, len, &v), 0);
    CHECK(v.type == HS_RECORD_MALLOC && v.stack == (const uint8_t *)g_buf + sizeof(*v.malloc));
    CHECK_EQ(decode(len - 8), -1);

    /* Three gaps inside a span of 1024 + 3072 bytes. */
    const struct hs_stack_gap ok[3] = {{64, 1024}, {1600, 1024}, {3000, 1024}};
    len = malloc_record(1024, ok, 3);
    CHECK_EQ(decode(len), 0);
    /* The same gaps with the copy a word short of what the record says: refused. */
    CHECK_EQ(decode(len - 8), -1);

    const struct hs_stack_gap bad[][2] = {
        {{0, 512}},               /* at the very start: the innermost frame is always copied */
        {{64, 4}},                /* shorter than a word */
        {{68, 512}},              /* not word aligned */
        {{64, 1024}, {32, 64}},   /* out of order */
        {{64, 1024}, {1088, 64}}, /* touching */
        {{64, 1024}, {1000, 64}}, /* overlapping */
        {{1024, 1024}},           /* up to the span's end (1024 copied + 1024) */
    };
    const uint32_t nbad[] = {1, 1, 1, 2, 2, 2, 1};
    for (size_t i = 0; i < sizeof nbad / sizeof nbad[0]; i++) {
        len = malloc_record(1024, bad[i], nbad[i]);
        if (!CHECK_EQ(decode(len), -1))
            fprintf(stderr, "    bad gaps %zu\n", i);
    }
    /* More gaps than a record holds. */
    len = malloc_record(1024, ok, 3);
    ((struct hs_record_malloc *)g_buf)->ngaps = HS_STACK_GAPS + 1;
    CHECK_EQ(decode(len), -1);
    ((struct hs_record_malloc *)g_buf)->ngaps = UINT32_MAX;
    CHECK_EQ(decode(len), -1);
    return check_report();
}
