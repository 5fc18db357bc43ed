/* env.c: allocation-free environment lookup (see env.h). */
#include "env.h"

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static ssize_t copy_value(const char *value, size_t n, char *out, size_t cap)
{
    if (n + 1 > cap) {
        out[0] = '\0';
        return (ssize_t)n;
    }
    memcpy(out, value, n);
    out[n] = '\0';
    return (ssize_t)n;
}

/* Streams /proc/self/environ looking for "name=" at the start of an entry. */
static ssize_t env_from_proc(const char *name, size_t name_len, char *out, size_t cap)
{
    int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    size_t entry_pos = 0; /* position within the current entry */
    int state = 0;        /* 0 matching name, 1 copying value, 2 skipping entry */
    size_t out_len = 0, value_len = 0;
    bool found = false, done = false;
    ssize_t n;
    while (!done && (n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n && !done; i++) {
            char c = buf[i];
            if (state == 0) {
                if (entry_pos < name_len && c == name[entry_pos])
                    entry_pos++;
                else if (entry_pos == name_len && c == '=')
                    state = 1;
                else
                    state = c == '\0' ? 0 : 2, entry_pos = 0;
                if (c == '\0')
                    entry_pos = 0;
            } else if (state == 1) {
                if (c == '\0') {
                    found = done = true;
                } else {
                    if (out_len + 1 < cap)
                        out[out_len++] = c;
                    value_len++;
                }
            } else if (c == '\0') {
                state = 0;
                entry_pos = 0;
            }
        }
    }
    if (state == 1 && !done)
        found = true; /* last entry without a terminating NUL */
    close(fd);
    if (!found)
        return -1;
    out[value_len == out_len ? out_len : 0] = '\0';
    return (ssize_t)value_len;
}

ssize_t hs_env_get(const char *name, char *out, size_t cap)
{
    if (cap == 0)
        return -1;
    out[0] = '\0';
    size_t name_len = strlen(name);
    if (environ) {
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, name, name_len) == 0 && (*e)[name_len] == '=') {
                const char *v = *e + name_len + 1;
                return copy_value(v, strlen(v), out, cap);
            }
        }
        return -1;
    }
    return env_from_proc(name, name_len, out, cap);
}
