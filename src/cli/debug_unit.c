/* debug_unit.c: `heapscope debug --unit NAME.service -o OPTIONS [--program NAME] [--log
 * PATTERN]` and `--unit NAME --remove`: a systemd drop-in that runs one service under malloc
 * debug, /etc/systemd/system/NAME.service.d/heapscope-malloc-debug.conf, whose Environment=
 * lines give the service the shim (LD_PRELOAD) and its settings, as `heapscope debug` gives
 * them to a program it runs.
 *
 * Values are written as systemd.exec(5) reads them: each assignment in double quotes, with
 * '\' and '"' escaped by a backslash and '%' doubled (systemd expands specifiers such as %p
 * in Environment=, and %p is also the shim's pid in a log file pattern). systemd reads the
 * drop-in at its next daemon-reload, which the command runs when the machine is booted with
 * systemd (and --root is not given); the service gets it at its next start.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define UNIT_DIR "/etc/systemd/system"
#define DROP_IN_NAME "heapscope-malloc-debug.conf"

/* A unit name systemd accepts (letters, digits, ":-_.\@"); NAME alone means NAME.service. */
static bool unit_name(const char *name, char *out, size_t cap)
{
    size_t len = strlen(name);
    bool ok =
        len > 0 && len < 200 && name[0] != '.' &&
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@") ==
            len;
    const char *dot = strrchr(name, '.');
    if (ok && dot && strcmp(dot, ".service") != 0) {
        fprintf(stderr,
                "heapscope debug: --unit takes a service (NAME or NAME.service), not '%s'\n", name);
        return false;
    }
    if (!ok) {
        fprintf(stderr, "heapscope debug: '%s' is not a systemd unit name\n", name);
        return false;
    }
    snprintf(out, cap, "%s%s", name, dot ? "" : ".service");
    return true;
}

/* Appends `Environment="NAME=VALUE"` (escaped) and a newline. */
static void environment_line(char *out, size_t cap, size_t *len, const char *name,
                             const char *value)
{
    *len += (size_t)snprintf(out + *len, cap - *len, "Environment=\"%s=", name);
    for (const char *v = value; *v && *len + 4 < cap; v++) {
        if (*v == '\\' || *v == '"')
            out[(*len)++] = '\\';
        else if (*v == '%')
            out[(*len)++] = '%';
        out[(*len)++] = *v;
    }
    *len += (size_t)snprintf(out + *len, cap - *len, "\"\n");
}

/* An executable named name in a directory of $PATH. */
static bool on_path(const char *name)
{
    const char *path = getenv("PATH");
    char dir[PATH_MAX], file[PATH_MAX + 64];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof(dir), "%.*s", (int)n, p);
        snprintf(file, sizeof(file), "%s/%s", n ? dir : ".", name);
        if (access(file, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* systemd runs this machine, and the drop-in is for it (no --root): `systemctl daemon-reload`
 * makes it read the drop-in now. Says what was done, or what is left to do. */
static void reload(const struct hs_debug_setting *s, const char *unit, bool removed)
{
    const char *then = removed ? "restart the service to run it without malloc debug"
                               : "restart the service to run it under malloc debug";
    if (s->root) {
        fprintf(stderr, "heapscope debug: systemd in %s reads it when it starts; then %s\n",
                s->root, then);
        return;
    }
    if (access("/run/systemd/system", F_OK) != 0 || !on_path("systemctl")) {
        fprintf(stderr,
                "heapscope debug: this system is not running systemd (or has no systemctl): it "
                "reads the drop-in when it next starts (or run 'systemctl daemon-reload'); then "
                "%s: systemctl restart %s\n",
                then, unit);
        return;
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("systemctl", "systemctl", "daemon-reload", (char *)NULL);
        fprintf(stderr, "heapscope debug: cannot run systemctl: %s\n", strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        fprintf(stderr,
                "heapscope debug: ran 'systemctl daemon-reload'; now %s: systemctl "
                "restart %s\n",
                then, unit);
    else
        fprintf(stderr,
                "heapscope debug: 'systemctl daemon-reload' failed; run it, then %s: "
                "systemctl restart %s\n",
                then, unit);
}

static int add(const struct hs_debug_setting *s, const char *unit, const char *dir,
               const char *path)
{
    char lib[PATH_MAX];
    int rc = hs_debug_prepare_shim(s, lib);
    if (rc != 0)
        return rc;
    /* Every character of a value may double: room for that. */
    size_t cap = 2 * (strlen(s->options) + strlen(lib) + (s->program ? strlen(s->program) : 0) +
                      (s->log_file ? strlen(s->log_file) : 0)) +
                 1024;
    char *text = malloc(cap);
    if (!text) {
        fprintf(stderr, "heapscope debug: out of memory\n");
        return 1;
    }
    size_t len = (size_t)snprintf(
        text, cap,
        "# Runs %s under heapscope's malloc debug; written by 'heapscope debug --unit'.\n"
        "# 'heapscope debug --unit %s --remove' removes it (then systemctl daemon-reload and\n"
        "# restart the service). A heap dump of the running service:\n"
        "#   heapscope dumpheap -p $(systemctl show -p MainPID --value %s)\n"
        "[Service]\n",
        unit, unit, unit);
    environment_line(text, cap, &len, "LD_PRELOAD", lib);
    environment_line(text, cap, &len, "LIBC_DEBUG_MALLOC_OPTIONS", s->options);
    if (s->program)
        environment_line(text, cap, &len, "LIBC_DEBUG_MALLOC_PROGRAM", s->program);
    if (s->log_file)
        environment_line(text, cap, &len, "HEAPSCOPE_LOG_FILE", s->log_file);
    rc = hs_make_directories("debug", dir, 0755) == 0 &&
                     hs_replace_file("debug", path, text, len, 0644) == 0
                 ? 0
                 : 1;
    free(text);
    if (rc != 0)
        return rc;
    fprintf(stderr, "heapscope debug: wrote %s: %s runs with \"%s\"%s%s\n", path, unit, s->options,
            s->log_file ? "; reports go to " : "; reports go to its log (stderr)",
            s->log_file ? s->log_file : "");
    reload(s, unit, false);
    return 0;
}

static int remove_drop_in(const struct hs_debug_setting *s, const char *unit, const char *dir,
                          const char *path)
{
    if (s->options || s->program || s->log_file) {
        fprintf(stderr, "heapscope debug: --remove takes no -o, --program or --log\n");
        return 2;
    }
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "heapscope debug: %s has no heapscope drop-in (%s does not exist)\n", unit,
                path);
        return 0;
    }
    if (hs_remove_file("debug", path) != 0)
        return 1;
    if (rmdir(dir) != 0 && errno != ENOTEMPTY && errno != EEXIST)
        fprintf(stderr, "heapscope debug: cannot remove %s: %s\n", dir, strerror(errno));
    fprintf(stderr, "heapscope debug: removed %s\n", path);
    reload(s, unit, true);
    return 0;
}

int hs_debug_unit(const char *name, bool remove, const struct hs_debug_setting *s)
{
    char unit[256], dir[PATH_MAX], rel[PATH_MAX], path[PATH_MAX + 64];
    if (!unit_name(name, unit, sizeof(unit)))
        return 2;
    snprintf(rel, sizeof(rel), UNIT_DIR "/%s.d", unit);
    if (hs_root_path(s->root, rel, dir, sizeof(dir)) != 0) {
        fprintf(stderr, "heapscope debug: --root %s: path too long\n", s->root);
        return 2;
    }
    snprintf(path, sizeof(path), "%s/" DROP_IN_NAME, dir);
    return remove ? remove_drop_in(s, unit, dir, path) : add(s, unit, dir, path);
}
