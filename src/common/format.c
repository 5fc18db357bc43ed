/* format.c: allocation-free printf subset (see format.h for the supported conversions). */
#include "format.h"

#include "hs_assert.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

struct out {
    char *buf;
    size_t cap; /* usable characters, excluding the NUL */
    size_t len;
};

static void put(struct out *o, char c)
{
    if (o->len < o->cap)
        o->buf[o->len++] = c;
}

static void put_padded(struct out *o, const char *s, size_t n, int width, int left, char pad)
{
    int fill = width > (int)n ? width - (int)n : 0;
    if (!left) {
        /* Zero padding goes after the sign, as in printf. */
        if (pad == '0' && n > 0 && s[0] == '-') {
            put(o, '-');
            s++;
            n--;
        }
        for (; fill > 0 && o->len < o->cap; fill--)
            o->buf[o->len++] = pad;
    }
    /* One copy, not a put() per character: reports print millions of paths and names. */
    size_t room = o->cap - o->len;
    size_t copy = n < room ? n : room;
    memcpy(o->buf + o->len, s, copy);
    o->len += copy;
    if (left)
        for (; fill > 0 && o->len < o->cap; fill--)
            o->buf[o->len++] = ' ';
}

/* Writes v in the given base into the end of tmp; returns the first character. */
static char *utoa(uintmax_t v, unsigned base, int upper, char *end)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char *p = end;
    do {
        *--p = digits[v % base];
        v /= base;
    } while (v != 0);
    return p;
}

/* Widths and precisions past this are cut to it: the output is cut at the buffer anyway,
 * and the count must not overflow an int on "%99999999999d". */
#define MAX_COUNT 100000000

/* Reads a decimal count at *f, moving past it. */
static int read_count(const char **f)
{
    int n = 0;
    for (; **f >= '0' && **f <= '9'; (*f)++)
        if (n < MAX_COUNT)
            n = n * 10 + (**f - '0');
    return n;
}

size_t hs_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
    struct out o = {buf, cap ? cap - 1 : 0, 0};
    if (cap == 0)
        return 0;

    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            size_t run = 1;
            while (f[run] && f[run] != '%')
                run++;
            put_padded(&o, f, run, 0, 0, ' ');
            f += run - 1;
            continue;
        }
        const char *spec = f++;
        int left = 0, width = 0, precision = -1;
        char pad = ' ';
        for (; *f == '-' || *f == '0'; f++) {
            if (*f == '-')
                left = 1;
            else
                pad = '0';
        }
        if (*f == '*') {
            width = va_arg(ap, int);
            if (width < 0) {
                left = 1;
                width = width == INT_MIN ? MAX_COUNT : -width;
            }
            if (width > MAX_COUNT)
                width = MAX_COUNT;
            f++;
        } else {
            width = read_count(&f);
        }
        if (*f == '.') {
            f++;
            if (*f == '*') {
                precision = va_arg(ap, int); /* negative: as if none, as in printf */
                f++;
            } else {
                precision = read_count(&f);
            }
        }
        /* Length modifier: -2 char, -1 short (both passed as int), 0 int, 1 long, 2 long
         * long, 3 size_t/intmax/ptrdiff. */
        int length = 0;
        if (*f == 'h') {
            length = -1;
            if (*++f == 'h') {
                length = -2;
                f++;
            }
        } else if (*f == 'l') {
            length = 1;
            if (*++f == 'l') {
                length = 2;
                f++;
            }
        } else if (*f == 'z' || *f == 'j' || *f == 't') {
            length = 3;
            f++;
        }
        if (left)
            pad = ' ';

        char tmp[72];
        char *end = tmp + sizeof(tmp);
        char *s;
        switch (*f) {
        case '%':
            put(&o, '%');
            break;
        case 'c':
            tmp[0] = (char)va_arg(ap, int);
            put_padded(&o, tmp, 1, width, left, ' ');
            break;
        case 's': {
            const char *str = va_arg(ap, const char *);
            if (!str)
                str = "(null)";
            size_t n = precision < 0 ? strlen(str) : strnlen(str, (size_t)precision);
            put_padded(&o, str, n, width, left, ' ');
            break;
        }
        case 'd':
        case 'i': {
            intmax_t v;
            if (length == -2)
                v = (signed char)va_arg(ap, int);
            else if (length == -1)
                v = (short)va_arg(ap, int);
            else if (length == 0)
                v = va_arg(ap, int);
            else if (length == 1)
                v = va_arg(ap, long);
            else if (length == 2)
                v = va_arg(ap, long long);
            else
                v = va_arg(ap, intptr_t);
            uintmax_t mag = v < 0 ? -(uintmax_t)v : (uintmax_t)v;
            s = utoa(mag, 10, 0, end);
            if (v < 0)
                *--s = '-';
            put_padded(&o, s, (size_t)(end - s), width, left, pad);
            break;
        }
        case 'u':
        case 'x':
        case 'X': {
            uintmax_t v;
            if (length == -2)
                v = (unsigned char)va_arg(ap, unsigned);
            else if (length == -1)
                v = (unsigned short)va_arg(ap, unsigned);
            else if (length == 0)
                v = va_arg(ap, unsigned);
            else if (length == 1)
                v = va_arg(ap, unsigned long);
            else if (length == 2)
                v = va_arg(ap, unsigned long long);
            else
                v = va_arg(ap, size_t);
            s = utoa(v, *f == 'u' ? 10 : 16, *f == 'X', end);
            put_padded(&o, s, (size_t)(end - s), width, left, pad);
            break;
        }
        case 'p': {
            uintptr_t v = (uintptr_t)va_arg(ap, void *);
            s = utoa(v, 16, 0, end);
            *--s = 'x';
            *--s = '0';
            put_padded(&o, s, (size_t)(end - s), width, left, ' ');
            break;
        }
        default:
            /* Unknown conversion: copy it through so the mistake is visible. */
            for (const char *c = spec; c <= f && *c; c++)
                put(&o, *c);
            if (!*f)
                f--;
            break;
        }
    }
    hs_assert(o.len <= o.cap);
    buf[o.len] = '\0';
    return o.len;
}

size_t hs_format(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = hs_vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}
