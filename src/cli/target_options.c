/* target_options.c: the malloc debug options a running process was started with, for
 * `dumpheap -p` and `leaks -p`: LIBC_DEBUG_MALLOC_OPTIONS in its environment, or, when that is
 * not set and the process has the preloaded shim, malloc debug's system setting as the shim
 * read it at start (system_setting.h): the process's own view of the file (through
 * /proc/PID/root: a container's root), and only when the setting's program, if any, is the
 * process's. A setting changed since the process started is not what it runs with; the
 * commands then fail as they would have with the old one (the process answers, or not). */
#include "cli.h"

#include "system_setting.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shim's program name: the last part of argv[0]. */
static bool program_is(pid_t pid, const char *want)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    char *cmdline = hs_read_small_file(path, &len);
    bool same = false;
    if (cmdline && len > 0) {
        const char *base = cmdline;
        for (const char *p = cmdline; *p; p++)
            if (*p == '/' && p[1])
                base = p + 1;
        same = strcmp(base, want) == 0;
    }
    free(cmdline);
    return same;
}

static bool has_preloaded_shim(pid_t pid)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    char *maps = hs_read_small_file(path, &len);
    bool shim = maps && strstr(maps, "/libmalloc_debug.so\n") != NULL;
    free(maps);
    return shim;
}

const char *hs_target_md_options(pid_t pid, const char *env, size_t len)
{
    const char *options = env ? hs_environ_value(env, len, "LIBC_DEBUG_MALLOC_OPTIONS") : NULL;
    if (options || !env || !has_preloaded_shim(pid))
        return options;
    static struct hs_md_setting setting;
    char path[PATH_MAX], why[512];
    snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, hs_md_setting_path);
    enum hs_md_setting_status st = hs_md_setting_read(path, &setting, why, sizeof(why));
    if (st == HS_MD_SETTING_BAD) /* /proc/PID/root not ours to follow: the file as we see it */
        st = hs_md_setting_read(hs_md_setting_path, &setting, why, sizeof(why));
    if (st != HS_MD_SETTING_OK || !setting.options)
        return NULL;
    const char *program = hs_environ_value(env, len, "LIBC_DEBUG_MALLOC_PROGRAM");
    program = program ? program : setting.program;
    return program && *program && !program_is(pid, program) ? NULL : setting.options;
}
