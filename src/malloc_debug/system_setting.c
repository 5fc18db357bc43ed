/* system_setting.c: reading malloc debug's system setting (see system_setting.h). */
#include "system_setting.h"

#include "errno_text.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#ifndef HEAPSCOPE_MALLOC_DEBUG_SETTING
#define HEAPSCOPE_MALLOC_DEBUG_SETTING "/etc/heapscope/malloc_debug.conf"
#endif

const char hs_md_setting_path[] = HEAPSCOPE_MALLOC_DEBUG_SETTING;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* [start, end) without the blanks around it. */
static void trim(char **start, char **end)
{
    while (*start < *end && is_blank(**start))
        (*start)++;
    while (*end > *start && is_blank((*end)[-1]))
        (*end)--;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(name, want, len) == 0;
}

enum hs_md_setting_status hs_md_setting_parse(struct hs_md_setting *s, size_t len, const char *path,
                                              char *why, size_t cap)
{
    s->options = s->program = s->log_file = NULL;
    s->text[len] = '\0';
    if (memchr(s->text, '\0', len) != NULL) {
        hs_format(why, cap, "%s: not a text file (it holds a NUL byte)", path);
        return HS_MD_SETTING_BAD;
    }
    char *line = s->text, *text_end = s->text + len;
    for (int number = 1; line < text_end; number++) {
        char *eol = memchr(line, '\n', (size_t)(text_end - line));
        if (!eol)
            eol = text_end;
        char *next = eol < text_end ? eol + 1 : eol;
        char *start = line, *end = eol;
        trim(&start, &end);
        line = next;
        if (start == end || *start == '#')
            continue;
        char *eq = memchr(start, '=', (size_t)(end - start));
        if (!eq) {
            hs_format(why, cap, "%s:%d: expected NAME=VALUE, got '%.*s'", path, number,
                      (int)(end - start), start);
            return HS_MD_SETTING_BAD;
        }
        char *name = start, *name_end = eq, *value = eq + 1, *value_end = end;
        trim(&name, &name_end);
        trim(&value, &value_end);
        size_t name_len = (size_t)(name_end - name), value_len = (size_t)(value_end - value);
        const char **slot = NULL;
        size_t max = HS_MD_SETTING_MAX;
        if (name_is(name, name_len, "LIBC_DEBUG_MALLOC_OPTIONS")) {
            slot = &s->options;
        } else if (name_is(name, name_len, "LIBC_DEBUG_MALLOC_PROGRAM")) {
            slot = &s->program;
            max = HS_MD_SETTING_PROGRAM_MAX;
        } else if (name_is(name, name_len, "HEAPSCOPE_LOG_FILE")) {
            slot = &s->log_file;
            max = PATH_MAX - 1;
        } else {
            hs_format(why, cap,
                      "%s:%d: unknown name '%.*s' (known: LIBC_DEBUG_MALLOC_OPTIONS, "
                      "LIBC_DEBUG_MALLOC_PROGRAM, HEAPSCOPE_LOG_FILE)",
                      path, number, (int)name_len, name);
            return HS_MD_SETTING_BAD;
        }
        if (*slot != NULL) {
            hs_format(why, cap, "%s:%d: %.*s is set twice", path, number, (int)name_len, name);
            return HS_MD_SETTING_BAD;
        }
        if (value_len > max) {
            hs_format(why, cap, "%s:%d: %.*s is longer than %zu bytes", path, number, (int)name_len,
                      name, max);
            return HS_MD_SETTING_BAD;
        }
        *value_end = '\0'; /* the blank or newline after it, or the final NUL */
        if (value_len > 0)
            *slot = value;
    }
    return HS_MD_SETTING_OK;
}

enum hs_md_setting_status hs_md_setting_read(const char *path, struct hs_md_setting *s, char *why,
                                             size_t cap)
{
    s->options = s->program = s->log_file = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return HS_MD_SETTING_ABSENT;
        hs_format(why, cap, "cannot read %s: %s", path, hs_errno_text(errno));
        return HS_MD_SETTING_BAD;
    }
    /* One byte more than allowed: reading it means the file is too large. */
    size_t len = 0;
    int err = 0;
    while (len < HS_MD_SETTING_MAX + 1) {
        ssize_t n = read(fd, s->text + len, HS_MD_SETTING_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = errno;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (err != 0) {
        hs_format(why, cap, "cannot read %s: %s", path, hs_errno_text(err));
        return HS_MD_SETTING_BAD;
    }
    if (len > HS_MD_SETTING_MAX) {
        hs_format(why, cap, "%s is larger than %d bytes", path, HS_MD_SETTING_MAX);
        return HS_MD_SETTING_BAD;
    }
    return hs_md_setting_parse(s, len, path, why, cap);
}
