/* library_path.c: finding heapscope's preload libraries and putting them in LD_PRELOAD.
 *
 * Looked for, in order: $HEAPSCOPE_LIBDIR; the build tree (the command is build/bin/heapscope
 * and the libraries build/lib/); the installed layout relative to the command (so an
 * installed tree can be moved); the configured install directory.
 */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef HEAPSCOPE_INSTALL_LIBDIR
#define HEAPSCOPE_INSTALL_LIBDIR "/usr/local/lib/heapscope"
#endif
#ifndef HEAPSCOPE_BINDIR_TO_LIBDIR
#define HEAPSCOPE_BINDIR_TO_LIBDIR "../lib/heapscope"
#endif

/* Tries dir/name; on success stores the canonical path. */
static int try_dir(const char *dir, const char *name, char *out, size_t cap)
{
    char path[PATH_MAX], real[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return -1;
    if (access(path, R_OK) != 0 || !realpath(path, real))
        return -1;
    if (snprintf(out, cap, "%s", real) >= (int)cap)
        return -1;
    return 0;
}

/* Appends a/b (b may be empty) to the list of directories, unless it does not fit. */
static void add_dir(char dirs[][PATH_MAX], size_t *n, const char *a, const char *b)
{
    int len = snprintf(dirs[*n], PATH_MAX, "%s%s%s", a, *b ? "/" : "", b);
    if (len > 0 && len < PATH_MAX)
        (*n)++;
}

int hs_find_library(const char *name, char *out, size_t cap)
{
    char dirs[4][PATH_MAX];
    size_t n = 0;
    const char *env = getenv("HEAPSCOPE_LIBDIR");
    if (env && *env)
        add_dir(dirs, &n, env, "");

    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            add_dir(dirs, &n, exe, "../lib");
            add_dir(dirs, &n, exe, HEAPSCOPE_BINDIR_TO_LIBDIR);
        }
    }
    add_dir(dirs, &n, HEAPSCOPE_INSTALL_LIBDIR, "");

    for (size_t i = 0; i < n; i++)
        if (try_dir(dirs[i], name, out, cap) == 0)
            return 0;
    fprintf(stderr, "heapscope: cannot find %s; looked in:\n", name);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  %s\n", dirs[i]);
    fprintf(stderr, "heapscope: set HEAPSCOPE_LIBDIR to the directory that holds it\n");
    return -1;
}

int hs_preload_prepend(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old)
        return setenv("LD_PRELOAD", lib, 1);
    size_t need = strlen(lib) + 1 + strlen(old) + 1;
    char *value = malloc(need);
    if (!value)
        return -1;
    snprintf(value, need, "%s:%s", lib, old);
    int rc = setenv("LD_PRELOAD", value, 1);
    free(value);
    return rc;
}
