/* test_guarded_block.c: unit tests of guarded_block.h, where page_guard and sample_guard put
 * a block in its pages: a rear block ends as close to its guard page as its alignment allows
 * (less than the alignment short of it, 0 for sizes that are multiples of it), a front block
 * starts right after its guard page (or at the first aligned address after it), the user
 * pointer (block + align_offset) is aligned, and a block that does not fit is refused. Also
 * the slack fill and check.
 */
#include "check.h"
#include "guarded_block.h"

#include <stdint.h>
#include <stdlib.h>

/* hs_md_gblock_start takes a reference to the allocation backtrace; these blocks have none. */
void hs_md_bt_ref(struct hs_md_bt *bt)
{
    CHECK(bt == NULL);
}

#define PAGE HS_MD_PAGE

static void check_place(uintptr_t lo, uintptr_t hi, size_t size, size_t align, size_t off,
                        bool front)
{
    uintptr_t b = hs_md_gblock_place(lo, hi, size, align, off, front);
    char ctx[160];
    snprintf(ctx, sizeof(ctx), "lo=%#lx hi=%#lx size=%zu align=%zu off=%zu %s", (unsigned long)lo,
             (unsigned long)hi, size, align, off, front ? "front" : "rear");
    check_context(ctx);
    bool fits = size + (align - 1) <= hi - lo; /* always fits when this holds */
    if (b == 0) {
        CHECK(!fits);
        check_context(NULL);
        return;
    }
    CHECK(b >= lo);
    CHECK(b + size <= hi);
    CHECK_EQ((b + off) % align, 0);
    CHECK_EQ(b % 16, 0);
    if (front)
        CHECK(b - lo < align); /* the first aligned place */
    else
        CHECK(hi - (b + size) < align); /* the last aligned place */
    check_context(NULL);
}

int main(void)
{
    static const size_t sizes[] = {1, 15, 16, 17, 100, 128, 4095, 4096, 4097, 8191, 12288};
    static const size_t aligns[] = {16, 32, 64, 4096, 8192, 65536};
    static const size_t offsets[] = {0, 48, 80, 16448};
    uintptr_t lo = 0x10000000;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++)
            for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++)
                for (uintptr_t pages = 1; pages <= 32; pages *= 2)
                    for (int front = 0; front < 2; front++)
                        check_place(lo, lo + pages * PAGE, sizes[s], aligns[a], offsets[o], front);

    /* The cases the guards rely on. */
    CHECK_EQ(hs_md_gblock_place(lo, lo + PAGE, 128, 16, 0, false), lo + PAGE - 128);
    CHECK_EQ(hs_md_gblock_place(lo, lo + PAGE, 100, 16, 0, false), lo + PAGE - 112);
    CHECK_EQ(hs_md_gblock_place(lo, lo + PAGE, 100, 16, 0, true), lo);
    CHECK_EQ(hs_md_gblock_place(lo, lo + PAGE, 4096, 16, 0, false), lo);
    CHECK_EQ(hs_md_gblock_place(lo, lo + PAGE, 4097, 16, 0, false), 0);
    CHECK_EQ(hs_md_gblock_place(lo, lo + 2 * PAGE, 100, 4096, 0, false), lo + PAGE);
    /* A header of 80 bytes in front of a 64-byte-aligned user pointer. */
    uintptr_t b = hs_md_gblock_place(lo, lo + PAGE, 200, 64, 80, false);
    CHECK_EQ((b + 80) % 64, 0);
    CHECK(lo + PAGE - (b + 200) < 64);

    /* Slack: filled, intact, then one byte changed. */
    uint8_t *page = aligned_alloc(PAGE, PAGE);
    struct hs_md_gblock g = {0};
    hs_md_gblock_start(&g, (uintptr_t)page + PAGE - 112, 100, (uintptr_t)page,
                       (uintptr_t)page + PAGE, NULL);
    CHECK_EQ(hs_md_gb_user(&g), (uintptr_t)page + PAGE - 112);
    CHECK_EQ(hs_md_gb_data_end(&g), (uintptr_t)page + PAGE);
    /* No plain address of the block in its record (a scanner must not see a reference). */
    for (size_t i = 0; i < sizeof(g) / sizeof(uintptr_t); i++) {
        uintptr_t word;
        memcpy(&word, (const char *)&g + i * sizeof(word), sizeof(word));
        CHECK(word - (uintptr_t)page >= PAGE);
    }
    hs_md_gblock_fill_slack(&g, 0xbb);
    CHECK_EQ(hs_md_gblock_slack_mismatch(&g, 0xbb), 12);
    page[PAGE - 12 + 5] = 0;
    CHECK_EQ(hs_md_gblock_slack_mismatch(&g, 0xbb), 5);
    free(page);
    return check_report();
}
