/* writable_file.c: whether a file that something else will write can be written, checked
 * before that something starts: `debug -l FILE` and `leaks -l FILE` (the program is exec'ed in
 * place, and once it runs only the shim can say that its log fails: once, on the program's
 * stderr, src/common/log.c), the files the shim writes by itself (the allocation records,
 * the heap dump at exit), `dumpheap` and `leaks -p` (the process writes the dump or the report
 * where the command then looks for it). What can be seen beforehand (a missing directory, no permission, a
 * read-only or full file system) stops the command with the path and the reason. */
#define _GNU_SOURCE
#include "cli.h"
#include "program_run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* A file system with no block left for us (root may use the reserved ones). */
static bool file_system_full(int fd)
{
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) != 0 || vfs.f_blocks == 0)
        return false;
    return (geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) == 0;
}

bool hs_file_writable(const char *path, char *why, size_t cap)
{
    /* Created only to try, then removed: whoever writes it creates it, as it would have. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    bool created = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "%s", strerror(errno));
        return false;
    }
    struct stat st;
    bool full = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && file_system_full(fd);
    close(fd);
    if (created)
        unlink(path);
    if (full)
        snprintf(why, cap, "%s (its file system is full)", strerror(ENOSPC));
    return !full;
}

/* The shim's expansion of the pattern: "%p" becomes the pid, which the program keeps (exec in
 * place). */
static void expand(const char *pattern, char *out, size_t cap)
{
    size_t len = 0;
    for (const char *p = pattern; *p && len + 1 < cap; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            int n = snprintf(out + len, cap - len, "%d", (int)getpid());
            len += n > 0 && (size_t)n < cap - len ? (size_t)n : 0;
            p++;
        } else {
            out[len++] = *p;
        }
    }
    out[len] = '\0';
}

bool hs_check_log_file(const char *command, const char *pattern)
{
    char path[PATH_MAX], why[128];
    expand(pattern, path, sizeof(path));
    if (hs_file_writable(path, why, sizeof(why)))
        return true;
    fprintf(stderr, "heapscope %s: cannot write the log file %s: %s\n", command, path, why);
    return false;
}

bool hs_check_shim_files(const char *command, const struct hs_md_config *cfg, bool pid_known)
{
    char path[PATH_MAX + 32], why[128];
    if (cfg->suppressions[0]) { /* the shim would only log that it ignores a bad file */
        struct hs_supp_set set;
        if (!hs_load_suppressions(command, cfg->suppressions, &set))
            return false;
        free(set.rules);
        free(set.text);
    }
    if ((cfg->options & HS_OPT_RECORD_ALLOCS) &&
        !hs_file_writable(cfg->record_allocs_file, why, sizeof(why))) {
        fprintf(stderr, "heapscope %s: cannot write the allocation records to %s: %s\n", command,
                cfg->record_allocs_file, why);
        return false;
    }
    /* The command's pid stands in for the program's: the same directory, the same checks. */
    snprintf(path, sizeof(path), "%s.%d.exit.txt", cfg->backtrace_dump_prefix, (int)getpid());
    if ((cfg->options & HS_OPT_BACKTRACE_DUMP_ON_EXIT) && pid_known &&
        !hs_file_writable(path, why, sizeof(why))) {
        fprintf(stderr, "heapscope %s: cannot write the heap dump at exit to %s: %s\n", command,
                path, why);
        return false;
    }
    return true;
}
