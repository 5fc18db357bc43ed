/* test_byte_check.c: hs_md_first_mismatch (src/malloc_debug/byte_check.h), which checks
 * guards and freed blocks 64 bytes at a time: every length up to 300 bytes, at every
 * alignment of 0-15, with no difference and with one wrong byte at each position (the
 * first one wins when there are two). Then the guards' short cases against it:
 * hs_md_all_equal (overlapping loads for 16 to 64 bytes, an accumulated 64-byte loop with an
 * overlapping last step beyond, 16-byte aligned or not) with one wrong byte at each
 * position up to 600 bytes, the last one included, and wrong bytes just outside the range, and hs_md_fill
 * (overlapping stores), which must write exactly the n bytes. */
#include "byte_check.h"
#include "check.h"

#include <string.h>

static uint8_t buf[16 + 320];
/* hs_md_all_equal's long blocks: 16 bytes of margin before p, 16-byte aligned. */
#define LONG_MAX_N 600
static uint8_t long_buf[16 + 16 + LONG_MAX_N + 1] __attribute__((aligned(16)));

/* hs_md_all_equal must say what hs_md_first_mismatch says, at every length, alignment and
 * position of one wrong byte; bytes just outside the range never count. */
static size_t all_equal_disagreements(void)
{
    static const uint8_t values[] = {0x00, 0xaa, 0xff};
    size_t wrong = 0;
    for (size_t vi = 0; vi < sizeof(values); vi++) {
        uint8_t v = values[vi];
        for (size_t align = 0; align < 16; align += 3) { /* 0: the aligned loads */
            uint8_t *p = long_buf + 16 + align;
            for (size_t n = 0; n <= LONG_MAX_N; n++) {
                memset(long_buf, v, sizeof(long_buf));
                p[-1] = (uint8_t)(v ^ 0x5a); /* outside: before and after the range */
                p[n] = (uint8_t)(v ^ 0x5a);
                if (!hs_md_all_equal(p, n, v))
                    wrong++;
                for (size_t bad = 0; bad < n; bad++) {
                    for (unsigned bit = 0; bit < 8; bit += 7) { /* lowest and highest bit */
                        p[bad] = (uint8_t)(v ^ (1u << bit));
                        bool expect = hs_md_first_mismatch(p, n, v) == n;
                        if (expect || hs_md_all_equal(p, n, v))
                            wrong++;
                        p[bad] = v;
                    }
                }
            }
        }
    }
    return wrong;
}

/* hs_md_fill writes v to exactly the n bytes at p. */
static size_t fill_errors(void)
{
    size_t wrong = 0;
    for (size_t align = 0; align < 16; align++) {
        uint8_t *p = buf + align + 1;
        for (size_t n = 0; n <= 300; n++) {
            memset(buf, 0x33, sizeof(buf));
            hs_md_fill(p, n, 0xc4);
            if (hs_md_first_mismatch(p, n, 0xc4) != n || p[-1] != 0x33 || p[n] != 0x33)
                wrong++;
        }
    }
    return wrong;
}

int main(void)
{
    size_t wrong = 0;
    for (size_t align = 0; align < 16; align++) {
        uint8_t *p = buf + align;
        for (size_t n = 0; n <= 300; n++) {
            memset(buf, 0xef, sizeof(buf));
            if (hs_md_first_mismatch(p, n, 0xef) != n)
                wrong++;
            for (size_t bad = 0; bad < n; bad++) {
                p[bad] = 0xee;
                if (bad + 7 < n)
                    p[bad + 7] = 0x00; /* a later difference does not hide the first */
                if (hs_md_first_mismatch(p, n, 0xef) != bad)
                    wrong++;
                p[bad] = 0xef;
                if (bad + 7 < n)
                    p[bad + 7] = 0xef;
            }
            /* A difference just past the end is not looked at. */
            p[n] = 0x11;
            if (hs_md_first_mismatch(p, n, 0xef) != n)
                wrong++;
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(all_equal_disagreements(), 0);
    CHECK_EQ(fill_errors(), 0);
    return check_report();
}
