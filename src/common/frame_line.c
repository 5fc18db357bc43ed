/* frame_line.c: see frame_line.h. */
#include "frame_line.h"

#include <string.h>

/* The last c in s[0..n), or NULL (memrchr without _GNU_SOURCE). */
static const char *last_of(const char *s, size_t n, char c)
{
    while (n-- > 0)
        if (s[n] == c)
            return s + n;
    return NULL;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool hs_frame_line_parse(const char *body, size_t len, struct hs_frame_line *out)
{
    size_t i = 0;
    while (i < len && body[i] == ' ')
        i++;
    if (i == 0 || i + 1 >= len || body[i] != '#')
        return false;
    out->indent = i;
    i++;
    unsigned index = 0;
    size_t digits = 0;
    while (i < len && body[i] >= '0' && body[i] <= '9' && digits < 6) {
        index = index * 10 + (unsigned)(body[i++] - '0');
        digits++;
    }
    if (digits < 2 || len - i < 6 || memcmp(body + i, "  pc ", 5) != 0)
        return false;
    i += 5;
    uint64_t pc = 0;
    digits = 0;
    while (i < len && is_hex(body[i]) && digits < 16) {
        char c = body[i++];
        pc = pc << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        digits++;
    }
    if (digits == 0 || len - i < 3 || body[i] != ' ' || body[i + 1] != ' ')
        return false;
    i += 2;
    const char *path = body + i;
    size_t path_len = len - i;
    out->function = NULL;
    out->function_len = 0;
    /* "(function+offset)" at the end: function names have no spaces (mangled), so the last
     * " (" opens it. */
    if (path_len > 3 && path[path_len - 1] == ')') {
        for (size_t j = path_len - 1; j-- > 1;) {
            if (path[j] == '(' && path[j - 1] == ' ') {
                const char *fn = path + j + 1;
                size_t fn_len = path_len - j - 2;
                const char *plus = last_of(fn, fn_len, '+');
                if (plus) { /* "(deleted)" has no '+': it is part of the path */
                    out->function = fn;
                    out->function_len = (size_t)(plus - fn);
                    path_len = j - 1;
                }
                break;
            }
        }
    }
    static const char deleted[] = " (deleted)";
    out->deleted =
        path_len >= sizeof(deleted) - 1 &&
        memcmp(path + path_len - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0;
    if (out->deleted)
        path_len -= sizeof(deleted) - 1;
    if (path_len == 0)
        return false;
    out->index = index;
    out->rel_pc = pc;
    out->path = path;
    out->path_len = path_len;
    return true;
}
