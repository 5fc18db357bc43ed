/* format.h: a printf subset that never allocates and is async-signal-safe.
 *
 * Used everywhere the tools must not call malloc or stdio: inside the malloc shim, signal
 * handlers, the unreachable-memory collector. Supports the conversions the tools need:
 *   %% %c %s %d %i %u %x %X %p, length modifiers hh h l ll z j t, flags '-' and '0',
 *   a field width (digits or '*') and a precision for %s ('.N' or '.*'). Output matches
 *   vsnprintf's for these (tests/unit/test_format.c), except that NULL prints as "0x0" with
 *   %p and "(null)" with %s (cut by a precision), and widths and precisions past 10^8 are cut
 *   to 10^8.
 * Anything else is copied through literally, so a bad format never reads bad memory.
 */
#ifndef HEAPSCOPE_COMMON_FORMAT_H
#define HEAPSCOPE_COMMON_FORMAT_H

#include <stdarg.h>
#include <stddef.h>

/* Formats into buf (capacity cap, cap >= 1), always NUL-terminating and truncating what does
 * not fit. Returns the number of characters written, excluding the NUL. */
size_t hs_format(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t hs_vformat(char *buf, size_t cap, const char *fmt, va_list ap);

#endif
