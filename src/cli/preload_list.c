/* preload_list.c: heapscope's line in /etc/ld.so.preload (the dynamic loader loads every
 * library listed there into every program that starts), added and removed without touching
 * the other lines.
 *
 * heapscope's entry is a line of its own holding the library's absolute path; a line is
 * heapscope's when its path ends in "/NAME" (NAME: libmalloc_debug.so), whatever directory
 * an older installation used. Adding puts the line first (the shim must come before other
 * preloaded libraries that might allocate, as `heapscope debug` puts it first in LD_PRELOAD),
 * replacing a line of an older installation in place; removing takes exactly that line out,
 * its newline with it, so that adding then removing gives back the file byte for byte. A file
 * left empty is removed (the file did not exist, or held only our line); a symbolic link is
 * kept and the file it names replaced. Every write goes through hs_replace_file.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The line [start, end) without blanks around it names a library whose file name is name. */
static bool line_names(const char *start, const char *end, const char *name)
{
    while (start < end && (*start == ' ' || *start == '\t'))
        start++;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    size_t n = strlen(name), len = (size_t)(end - start);
    return len > n && *start == '/' && end[-n - 1] == '/' && memcmp(end - n, name, n) == 0 &&
           memchr(start, ' ', len) == NULL && memchr(start, '\t', len) == NULL;
}

/* One line of a text: [start, end) without its newline; next: where the next line starts. */
struct line {
    const char *start, *end, *next;
};

/* Advances l (zeroed for the first line) to the next line of text (len bytes); false at
 * the end. */
static bool next_line(const char *text, size_t len, struct line *l)
{
    const char *from = l->next ? l->next : text, *stop = text + len;
    if (from >= stop)
        return false;
    const char *nl = memchr(from, '\n', (size_t)(stop - from));
    l->start = from;
    l->end = nl ? nl : stop;
    l->next = nl ? nl + 1 : stop;
    return true;
}

static char *read_list(const char *command, const char *path, size_t *len, bool *exists)
{
    char *text = hs_read_small_file(path, len);
    *exists = text != NULL;
    if (text || errno == ENOENT) {
        if (!text)
            *len = 0;
        return text ? text : calloc(1, 1);
    }
    fprintf(stderr, "heapscope %s: cannot read %s: %s\n", command, path, strerror(errno));
    return NULL;
}

bool hs_preload_list_find(const char *path, const char *name, char *out, size_t cap)
{
    size_t len;
    char *text = hs_read_small_file(path, &len);
    struct line l = {0};
    bool found = false;
    while (text && !found && next_line(text, len, &l)) {
        if (line_names(l.start, l.end, name)) {
            const char *s = l.start, *e = l.end;
            while (*s == ' ' || *s == '\t')
                s++;
            while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                e--;
            snprintf(out, cap, "%.*s", (int)(e - s), s);
            found = true;
        }
    }
    free(text);
    return found;
}

int hs_preload_list_add(const char *command, const char *path, const char *lib)
{
    const char *name = strrchr(lib, '/');
    name = name ? name + 1 : lib;
    size_t len;
    bool exists;
    char *text = read_list(command, path, &len, &exists);
    if (!text)
        return -1;
    size_t lib_len = strlen(lib), cap = len + lib_len + 2, out_len = 0;
    char *out = malloc(cap);
    if (!out) {
        free(text);
        fprintf(stderr, "heapscope %s: out of memory\n", command);
        return -1;
    }
    /* An older line of ours is replaced where it stands; otherwise ours goes first. */
    bool placed = false, same = false;
    struct line l = {0};
    while (next_line(text, len, &l)) {
        if (line_names(l.start, l.end, name) && !placed) {
            same = (size_t)(l.end - l.start) == lib_len && memcmp(l.start, lib, lib_len) == 0;
            memcpy(out + out_len, lib, lib_len);
            out_len += lib_len;
            out[out_len++] = '\n';
            placed = true;
        } else if (!line_names(l.start, l.end, name)) {
            memcpy(out + out_len, l.start, (size_t)(l.next - l.start));
            out_len += (size_t)(l.next - l.start);
        }
    }
    if (!placed) {
        memmove(out + lib_len + 1, out, out_len);
        memcpy(out, lib, lib_len);
        out[lib_len] = '\n';
        out_len += lib_len + 1;
    }
    int rc = 0;
    if (!(same && out_len == len && memcmp(out, text, len) == 0))
        rc = hs_replace_file(command, path, out, out_len, 0644);
    free(out);
    free(text);
    return rc;
}

int hs_preload_list_remove(const char *command, const char *path, const char *name, bool *removed)
{
    size_t len;
    bool exists;
    *removed = false;
    char *text = read_list(command, path, &len, &exists);
    if (!text)
        return -1;
    char *out = malloc(len + 1);
    size_t out_len = 0;
    struct line l = {0};
    while (out && next_line(text, len, &l)) {
        if (line_names(l.start, l.end, name)) {
            *removed = true;
        } else {
            memcpy(out + out_len, l.start, (size_t)(l.next - l.start));
            out_len += (size_t)(l.next - l.start);
        }
    }
    int rc = 0;
    if (!out) {
        fprintf(stderr, "heapscope %s: out of memory\n", command);
        rc = -1;
    } else if (*removed) {
        /* Left empty: removed, unless it is a link (the file it names is emptied instead, so
         * that no copy of our line is left behind where the link pointed). */
        struct stat st;
        bool link = lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
        rc = out_len == 0 && !link ? hs_remove_file(command, path)
                                   : hs_replace_file(command, path, out, out_len, 0644);
    }
    free(out);
    free(text);
    return rc;
}
