/* test_format.c: hs_format (src/common/format.c) against glibc's vsnprintf, on every
 * combination of the flags ('-', '0'), widths (none, digits, '*' positive and negative),
 * length modifiers (hh h l ll z j t) and conversions (d i u x X c s p %) that format.h
 * promises, with values at the edges of each type, and at every buffer size down to 1 (the
 * output is cut where vsnprintf cuts it, always NUL-terminated, and the return value is what
 * was written). Then what is hs_format's own: a NULL %s, unknown conversions copied through,
 * absurd widths neither overflowing nor writing past the buffer.
 */
#define _GNU_SOURCE
#include "check.h"

#include "format.h"

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Formats with both and compares, at full size and at every smaller buffer. */
static void same(const char *fmt, ...)
{
    char want[512], got[512];
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int wn = vsnprintf(want, sizeof(want), fmt, aq);
    va_end(aq);
    if (wn < 0 || (size_t)wn >= sizeof(want)) {
        va_end(ap);
        check_context(fmt);
        CHECK(!"the case does not fit the test's buffer");
        return;
    }
    for (size_t cap = (size_t)wn + 1;; cap--) {
        memset(got, 'Z', sizeof(got));
        va_copy(aq, ap);
        size_t n = hs_vformat(got, cap, fmt, aq);
        va_end(aq);
        size_t expect = cap - 1 < (size_t)wn ? cap - 1 : (size_t)wn;
        bool ok = n == expect && memcmp(got, want, expect) == 0 && got[expect] == '\0' &&
                  got[expect + 1] == 'Z';
        if (!ok) {
            check_context(fmt);
            CHECK(ok);
            fprintf(stderr, "    cap %zu: vsnprintf \"%.*s\", hs_format \"%s\" (%zu)\n", cap,
                    (int)expect, want, got, n);
            break;
        }
        check_passed++;
        if (cap == 1)
            break;
    }
    va_end(ap);
}

static const char *const flag_sets[] = {"", "-", "0"};
static const char *const widths[] = {"", "1", "2", "5", "12", "25", "*"};
static const int star_widths[] = {0, 3, 30, -1, -9};

/* Builds "%<flags><width><length><conv>" into buf. */
static const char *spec(char *buf, size_t cap, const char *flags, const char *width,
                        const char *length, char conv)
{
    snprintf(buf, cap, "<%%%s%s%s%c>", flags, width, length, conv);
    return buf;
}

/* One integer conversion with one value, passed as the length modifier's type. */
static void same_int(const char *fmt, bool star, int star_width, const char *length, char conv,
                     long long v)
{
    bool is_signed = conv == 'd' || conv == 'i';
    if (!strcmp(length, "") || !strcmp(length, "h") || !strcmp(length, "hh")) {
        /* h and hh take an int (promoted) and print it converted to (unsigned) short/char. */
        if (is_signed) {
            if (star)
                same(fmt, star_width, (int)v);
            else
                same(fmt, (int)v);
        } else {
            if (star)
                same(fmt, star_width, (unsigned)v);
            else
                same(fmt, (unsigned)v);
        }
    } else if (!strcmp(length, "l")) {
        if (star)
            same(fmt, star_width, is_signed ? (long)v : (long)(unsigned long)v);
        else
            same(fmt, is_signed ? (long)v : (long)(unsigned long)v);
    } else if (!strcmp(length, "ll")) {
        if (star)
            same(fmt, star_width, v);
        else
            same(fmt, v);
    } else if (!strcmp(length, "z")) {
        if (star)
            same(fmt, star_width, (size_t)v);
        else
            same(fmt, (size_t)v);
    } else if (!strcmp(length, "j")) {
        if (star)
            same(fmt, star_width, (intmax_t)v);
        else
            same(fmt, (intmax_t)v);
    } else {
        if (star)
            same(fmt, star_width, (ptrdiff_t)v);
        else
            same(fmt, (ptrdiff_t)v);
    }
}

static void test_integers(void)
{
    static const char *const lengths[] = {"", "hh", "h", "l", "ll", "z", "j", "t"};
    static const char convs[] = {'d', 'i', 'u', 'x', 'X'};
    static const long long values[] = {
        0,
        1,
        -1,
        7,
        -42,
        255,
        256,
        0x1ff,
        -129,
        32767,
        70000,
        -70000,
        INT_MAX,
        INT_MIN,
        UINT_MAX,
        LLONG_MAX,
        LLONG_MIN,
        0x123456789abcdefll,
        -0x123456789abcdefll,
    };
    char fmt[32];
    for (size_t f = 0; f < sizeof(flag_sets) / sizeof(*flag_sets); f++)
        for (size_t w = 0; w < sizeof(widths) / sizeof(*widths); w++)
            for (size_t l = 0; l < sizeof(lengths) / sizeof(*lengths); l++)
                for (size_t c = 0; c < sizeof(convs); c++) {
                    spec(fmt, sizeof(fmt), flag_sets[f], widths[w], lengths[l], convs[c]);
                    bool star = !strcmp(widths[w], "*");
                    size_t nstar = star ? sizeof(star_widths) / sizeof(*star_widths) : 1;
                    for (size_t s = 0; s < nstar; s++)
                        for (size_t v = 0; v < sizeof(values) / sizeof(*values); v++)
                            same_int(fmt, star, star_widths[s], lengths[l], convs[c], values[v]);
                }
}

static void test_strings_chars_pointers(void)
{
    static const char *const strs[] = {"", "a", "hello", "a longer string of text"};
    static const char *const precisions[] = {"", ".0", ".1", ".4", ".40", ".*"};
    static const int star_precisions[] = {0, 2, 100, -1, -5};
    char fmt[32];
    for (size_t f = 0; f < 2; f++) /* '0' with %s, %c and %p is undefined */
        for (size_t w = 0; w < sizeof(widths) / sizeof(*widths); w++) {
            bool star = !strcmp(widths[w], "*");
            for (size_t p = 0; p < sizeof(precisions) / sizeof(*precisions); p++) {
                bool pstar = !strcmp(precisions[p], ".*");
                char wp[16];
                snprintf(wp, sizeof(wp), "%s%s", widths[w], precisions[p]);
                spec(fmt, sizeof(fmt), flag_sets[f], wp, "", 's');
                for (size_t s = 0; s < sizeof(strs) / sizeof(*strs); s++)
                    for (size_t sw = 0; sw < (star ? 5u : 1u); sw++)
                        for (size_t sp = 0; sp < (pstar ? 5u : 1u); sp++) {
                            if (star && pstar)
                                same(fmt, star_widths[sw], star_precisions[sp], strs[s]);
                            else if (star)
                                same(fmt, star_widths[sw], strs[s]);
                            else if (pstar)
                                same(fmt, star_precisions[sp], strs[s]);
                            else
                                same(fmt, strs[s]);
                        }
            }
            spec(fmt, sizeof(fmt), flag_sets[f], widths[w], "", 'c');
            static const int chars[] = {'x', ' ', '%', 0x7f};
            for (size_t ch = 0; ch < sizeof(chars) / sizeof(*chars); ch++)
                for (size_t sw = 0; sw < (star ? 5u : 1u); sw++) {
                    if (star)
                        same(fmt, star_widths[sw], chars[ch]);
                    else
                        same(fmt, chars[ch]);
                }
            spec(fmt, sizeof(fmt), flag_sets[f], widths[w], "", 'p');
            /* Non-NULL only: glibc prints NULL as "(nil)", hs_format as "0x0". */
            static const uintptr_t ptrs[] = {1, 0x1000, 0x7ffd12345678, UINTPTR_MAX};
            for (size_t i = 0; i < sizeof(ptrs) / sizeof(*ptrs); i++)
                for (size_t sw = 0; sw < (star ? 5u : 1u); sw++) {
                    if (star)
                        same(fmt, star_widths[sw], (void *)ptrs[i]);
                    else
                        same(fmt, (void *)ptrs[i]);
                }
        }
}

static void test_text(void)
{
    check_context("literal text and %%");
    same("%s", "");
    same("plain text, no conversion");
    same("100%% sure %d%%", 5);
    same("%%%%%%");
    same("a%cb%sc%dd%ue%xf%pg", 'q', "str", -3, 3u, 0xabu, (void *)0x10);
    same("%s=%d, %s=%zu, %s=%lx", "x", 1, "size", (size_t)99, "mask", 0xf0ul);
}

/* Hides a constant from the compiler's format checks (these cases are wrong on purpose). */
static const void *opaque(const void *p)
{
    __asm__("" : "+r"(p));
    return p;
}

/* hs_format's own behaviour where printf is undefined or differs. */
static void test_own_rules(void)
{
    char buf[64];
    check_context("NULL %s");
    const char *null = opaque(NULL);
    CHECK_EQ(hs_format(buf, sizeof(buf), "[%s]", null), 8);
    CHECK_STREQ(buf, "[(null)]");
    check_context("NULL %p");
    hs_format(buf, sizeof(buf), "%p", (void *)0);
    CHECK_STREQ(buf, "0x0");

    check_context("unknown conversions are copied through");
    const char *fmt = opaque("a%qb %-5.3yc %");
    CHECK_EQ(hs_format(buf, sizeof(buf), fmt), strlen("a%qb %-5.3yc %"));
    CHECK_STREQ(buf, "a%qb %-5.3yc %");

    check_context("capacity 1 and 0");
    memset(buf, 'Z', sizeof(buf));
    CHECK_EQ(hs_format(buf, 1, "%d", 12345), 0);
    CHECK_EQ(buf[0], '\0');
    CHECK_EQ(buf[1], 'Z');
    CHECK_EQ(hs_format(buf, 0, "%d", 12345), 0);
    CHECK_EQ(buf[1], 'Z');

    check_context("widths too large for an int, and INT_MIN through '*'");
    memset(buf, 'Z', sizeof(buf));
    const char *huge = opaque("%99999999999999999999d|");
    size_t n = hs_format(buf, 16, huge, 7);
    CHECK(n == 15 && buf[15] == '\0' && buf[16] == 'Z');
    const char *huge_precision = opaque("%.99999999999999999999s|");
    n = hs_format(buf, sizeof(buf), huge_precision, "abc");
    CHECK_STREQ(buf, "abc|");
    memset(buf, 'Z', sizeof(buf));
    n = hs_format(buf, 16, opaque("%*d|"), INT_MIN, 7);
    CHECK(n == 15 && buf[0] == '7' && buf[15] == '\0' && buf[16] == 'Z');
    n = hs_format(buf, sizeof(buf), opaque("%.*s|"), INT_MIN, "abc");
    CHECK_STREQ(buf, "abc|");
}

int main(void)
{
    test_text();
    test_integers();
    test_strings_chars_pointers();
    test_own_rules();
    return check_report();
}
