/* target_process.c: looking at a running process that a command was pointed at (-p PID). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *hs_read_small_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t r;
    while (buf && (r = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)r;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int saved = errno;
    close(fd);
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    errno = saved;
    return buf;
}

unsigned long long hs_proc_status_field(const char *path, const char *field, int base)
{
    size_t len, flen = strlen(field);
    char *text = hs_read_small_file(path, &len);
    unsigned long long value = 0;
    for (const char *line = text; line && *line;) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            value = strtoull(line + flen + 1, NULL, base);
            break;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    free(text);
    return value;
}

/* The state letter of /proc/PID/stat ('R', 'S', 'Z' ...), or 0 when it cannot be read. The
 * command name before it is in parentheses and may itself hold ") ". */
static char process_state(pid_t pid, char *comm, size_t comm_cap)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *stat = hs_read_small_file(path, &len);
    const char *open = stat ? strchr(stat, '(') : NULL;
    const char *close = stat ? strrchr(stat, ')') : NULL;
    char state = 0;
    if (open && close && close > open && close[1] == ' ' && close[2] != '\0') {
        state = close[2];
        if (comm)
            snprintf(comm, comm_cap, "%.*s", (int)(close - open - 1), open + 1);
    }
    free(stat);
    return state;
}

bool hs_process_exited(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char state = process_state(pid, NULL, 0);
    return state == 'Z' || state == 'X';
}

char *hs_target_maps(const char *command, pid_t pid, size_t *len)
{
    char path[64], comm[64] = "?";
    if (kill(pid, 0) != 0) {
        if (errno == EPERM)
            fprintf(stderr,
                    "heapscope %s: process %d belongs to another user; run heapscope as that "
                    "user (or as root)\n",
                    command, (int)pid);
        else
            fprintf(stderr, "heapscope %s: no process %d\n", command, (int)pid);
        return NULL;
    }
    /* A zombie still answers kill(pid, 0), and its maps are empty. */
    char state = process_state(pid, comm, sizeof(comm));
    if (state == 'Z' || state == 'X') {
        fprintf(stderr,
                "heapscope %s: process %d (%s) has exited: it is a zombie, whose parent has not "
                "collected its exit status yet\n",
                command, (int)pid, comm);
        return NULL;
    }
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    char *maps = hs_read_small_file(path, len);
    if (!maps) {
        if (errno == EACCES || errno == EPERM)
            fprintf(stderr,
                    "heapscope %s: not allowed to inspect process %d (%s): it runs as another "
                    "user or under ptrace restrictions\n",
                    command, (int)pid, path);
        else
            fprintf(stderr, "heapscope %s: cannot read %s: %s\n", command, path, strerror(errno));
    }
    return maps;
}

const char *hs_environ_value(const char *env, size_t len, const char *name)
{
    size_t name_len = strlen(name);
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (strncmp(env + i, name, name_len) == 0 && env[i + name_len] == '=')
            return env + i + name_len + 1;
    return NULL;
}

/* Whether process pid has one of heapscope's preloaded libraries mapped. */
static bool runs_heapscope_library(pid_t pid)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    char *maps = hs_read_small_file(path, &len);
    bool found =
        maps && (strstr(maps, "/libmalloc_debug.so") || strstr(maps, "/libmemunreachable.so"));
    free(maps);
    return found;
}

pid_t hs_program_of_command(pid_t pid)
{
    char exe[64], target[PATH_MAX], self[PATH_MAX];
    snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(exe, target, sizeof(target) - 1);
    ssize_t m = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || m <= 0 || n != m || memcmp(target, self, (size_t)n) != 0)
        return pid;
    /* A heapscope command: its program is the child that runs a heapscope library (a shell's
     * process substitution can leave other children to it). */
    char path[96];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    char *children = hs_read_small_file(path, &len);
    if (!children)
        return pid;
    pid_t program = 0;
    int found = 0;
    for (char *p = children, *end; *p; p = end) {
        long child = strtol(p, &end, 10);
        if (end == p)
            break;
        if (child > 0 && runs_heapscope_library((pid_t)child)) {
            program = (pid_t)child;
            found++;
        }
    }
    free(children);
    return found == 1 ? program : pid;
}
