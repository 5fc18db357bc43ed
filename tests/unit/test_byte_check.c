/* test_byte_check.c: hs_md_first_mismatch (src/malloc_debug/byte_check.h), which checks
 * guards and freed blocks 64 bytes at a time: every length up to 300 bytes, at every
 * alignment of 0-15, with no difference and with one wrong byte at each position (the
 * first one wins when there are two). */
#include "byte_check.h"
#include "check.h"

#include <string.h>

int main(void)
{
    static uint8_t buf[16 + 320];
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
    return check_report();
}
