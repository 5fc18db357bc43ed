/* cmd_profile.c: `heapscope profile`, the sampling heap profiler.
 *
 *   heapscope profile [options] -- PROGRAM ARGS   runs PROGRAM with the profiler's client
 *       (libheapprofd.so) preloaded and a private daemon (heapprofd) listening, and writes
 *       PROGRAM.PID.final.pb.gz when it exits;
 *   heapscope profile [options] -p PID | -n NAME  profiles running processes: a process
 *       started without the client gets it loaded with ptrace (process_inject.h; the client
 *       then redirects malloc & co. through the GOT while a session runs); the daemon is
 *       started, each process is sent the profiling signal naming it, and the profiles are
 *       written when the processes exit, at --duration, or on Ctrl-C (the processes then
 *       run on unprofiled).
 * The daemon reports on a pipe (heapprofd.c: "ready", "connected PID", "refused PID: WHY",
 * "finished PID PROFILE", "error TEXT"); its log goes to OUTDIR/heapprofd.log. A file that
 * could not be written (a profile, the log) is said with its path and the reason, and the
 * command then exits non-zero (with the program's status when that is not 0).
 */
#define _GNU_SOURCE /* pipe2 */
#include "cli.h"
#include "clock.h"
#include "inject_status.h"
#include "process_inject.h"
#include "session_options.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROFILE_SIGNAL 36 /* the client's (src/profiler/client/client.h) */
#define MAX_TARGETS 64
#define READY_TIMEOUT_MS 5000
#define CONNECT_TIMEOUT_MS 5000

static void usage(FILE *out)
{
    fprintf(out,
            "usage: heapscope profile [options] -- PROGRAM [ARGS...]\n"
            "       heapscope profile [options] -p PID[,PID...] | -n NAME | --all [--duration S]\n"
            "\n"
            "Samples a program's heap allocations with their call stacks (Android's heapprofd):\n"
            "about one allocation per 4 KiB allocated is recorded, its stack unwound in a\n"
            "separate daemon, and the program runs at nearly full speed. Writes pprof profiles\n"
            "(allocated and in-use bytes and objects per call stack) named\n"
            "PROGRAM.PID.final.pb.gz; view them with 'heapscope report FILE' or any pprof tool.\n"
            "Exits with PROGRAM's status, or 1 when it is 0 but a profile or the log could\n"
            "not be written (each said with its path and the reason) or the daemon died.\n"
            "\n"
            "  -- PROGRAM ARGS       run PROGRAM and profile it until it exits\n"
            "  -p, --pid PID[,PID]   profile running processes until they exit, --duration\n"
            "                        passes or Ctrl-C; a process started without the client\n"
            "                        gets it loaded with ptrace (one thread pauses for a few\n"
            "                        milliseconds; allocations made before are not counted)\n"
            "  -n, --name NAME       the same for every process named NAME\n"
            "  -a, --all             the same for every process of yours whose client is\n"
            "                        loaded (a machine or container with /etc/ld.so.preload)\n"
            "\n"
            "Options:\n");
    /* The session's options, shared with heapprofd, which this command forwards them to. */
    hs_sopt_help(out, true, 24);
    fprintf(out,
            "  -o, --output DIR      where the profiles go (default: the current directory)\n"
            "      --follow-children also profile the processes PROGRAM starts\n"
            "      --duration S      with -p, -n or --all: stop after S seconds\n"
            "      --print-library   print the client library's path and exit\n"
            "      --no-inject       with -p/-n: only attach to processes that already have\n"
            "                        the client (preloaded), never load it with ptrace\n"
            "      --allow-seccomp   load the client even into a process under a seccomp\n"
            "                        filter (the filter may forbid or kill its system calls)\n"
            "  -q, --quiet           print nothing but errors\n"
            "  -h, --help            show this help\n"
            "\n"
            "Examples:\n"
            "  heapscope profile -- ./myserver --port 8080\n"
            "  heapscope report myserver.*.final.pb.gz\n"
            "  heapscope profile -i 1 -o prof -- ./unit_test       # exact byte counts\n"
            "  heapscope profile -p $(pidof myserver) --duration 60\n"
            "  LD_PRELOAD=$(heapscope profile --print-library) ./myserver &   # no ptrace\n"
            "  heapscope profile -p $! --duration 60\n");
}

struct profile_args {
    const char *daemon_args[32 + 2 * MAX_TARGETS];
    int num_daemon_args;
    const char *out_dir;
    bool follow, quiet;
    bool inject, allow_seccomp; /* load the client into processes started without it */
    long duration_s;
    pid_t targets[MAX_TARGETS];
    int num_targets;
    char pid_args[MAX_TARGETS][16]; /* the targets as --pid arguments */
};

static void daemon_arg(struct profile_args *a, const char *arg)
{
    if (a->num_daemon_args < (int)(sizeof(a->daemon_args) / sizeof(a->daemon_args[0])) - 1)
        a->daemon_args[a->num_daemon_args++] = arg;
}

/* ---- Finding things ----------------------------------------------------------------------- */

/* heapprofd sits next to this command, in the build tree and installed. */
static int find_daemon(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    if (snprintf(out, cap, "%s/heapprofd", self) >= (int)cap || access(out, X_OK) != 0) {
        fprintf(stderr, "heapscope profile: the profiler daemon is missing (looked for %s)\n", out);
        return -1;
    }
    return 0;
}

static bool add_target(struct profile_args *a, pid_t pid)
{
    for (int i = 0; i < a->num_targets; i++)
        if (a->targets[i] == pid)
            return true;
    if (a->num_targets == MAX_TARGETS) {
        fprintf(stderr, "heapscope profile: at most %d processes at once\n", MAX_TARGETS);
        return false;
    }
    a->targets[a->num_targets++] = pid;
    return true;
}

static bool parse_pids(struct profile_args *a, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    bool ok = copy != NULL;
    for (char *t = ok ? strtok_r(copy, ",", &save) : NULL; t && ok;
         t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end != '\0' || v <= 0 || v > INT32_MAX) {
            fprintf(stderr, "heapscope profile: '%s' is not a process id\n", t);
            ok = false;
        } else {
            ok = add_target(a, (pid_t)v);
        }
    }
    free(copy);
    return ok;
}

/* The process has a handler for the profiling signal (its /proc status SigCgt mask). */
static bool signal_caught(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    return (hs_proc_status_field(path, "SigCgt", 16) & (1ull << (PROFILE_SIGNAL - 1))) != 0;
}

/* The client is loaded in pid and listens for the profiling signal (quietly: for --all). */
static bool client_armed(pid_t pid)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    char *maps = kill(pid, 0) == 0 ? hs_read_small_file(path, &len) : NULL;
    bool loaded = maps != NULL && strstr(maps, "/libheapprofd.so") != NULL;
    free(maps);
    return loaded && signal_caught(pid);
}

/* Every process (but this one) whose name (/proc/PID/comm) is name, or with name NULL every
 * process of ours whose client is loaded and armed. */
static bool find_processes(struct profile_args *a, const char *name)
{
    DIR *d = opendir("/proc");
    if (d == NULL) {
        perror("heapscope profile: /proc");
        return false;
    }
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == getpid())
            continue;
        bool match;
        if (name == NULL) {
            match = client_armed((pid_t)pid);
        } else {
            char path[64], comm[64];
            snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
            FILE *f = fopen(path, "re");
            if (f == NULL)
                continue;
            match = fgets(comm, sizeof(comm), f) != NULL &&
                    (comm[strcspn(comm, "\n")] = '\0', strcmp(comm, name) == 0);
            fclose(f);
        }
        if (match) {
            if (!add_target(a, (pid_t)pid)) {
                closedir(d);
                return false;
            }
            found++;
        }
    }
    closedir(d);
    if (found == 0 && name != NULL)
        fprintf(stderr, "heapscope profile: no process named '%s'\n", name);
    else if (found == 0)
        fprintf(stderr, "heapscope profile: no process of yours has the profiler's client "
                        "loaded (see 'heapscope profile --print-library')\n");
    return found > 0;
}

/* Loads the client into pid with ptrace and runs its injected init. */
static bool inject_client(const struct profile_args *a, pid_t pid)
{
    char lib[PATH_MAX];
    if (hs_find_library("libheapprofd.so", lib, sizeof(lib)) != 0)
        return false;
    struct hs_inject_options opt = {lib, HS_CLIENT_INJECTED_INIT, a->allow_seccomp, 5000};
    struct hs_inject_result res;
    if (hs_inject_library("profile", pid, &opt, &res) != 0)
        return false;
    if (res.init_status != HS_INJECT_OK) {
        fprintf(stderr, "heapscope profile: cannot profile process %d: %s\n", (int)pid,
                hs_inject_status_text(res.init_status));
        return false;
    }
    if (!a->quiet) {
        char pause[160];
        hs_inject_describe_pause(&res, pause, sizeof(pause));
        fprintf(stderr, "heapscope profile: loaded the client into process %d (%s)\n", (int)pid,
                pause);
    }
    return true;
}

/* The process runs the client (loading it if need be), and the client listens for the
 * profiling signal. */
static bool target_ready(const struct profile_args *a, pid_t pid)
{
    size_t len;
    char *maps = hs_target_maps("profile", pid, &len);
    if (maps == NULL)
        return false;
    bool loaded = strstr(maps, "/libheapprofd.so") != NULL;
    free(maps);
    if (!loaded && !a->inject) {
        fprintf(stderr,
                "heapscope profile: the profiler's client is not loaded in process %d (and "
                "--no-inject was given); start it with LD_PRELOAD=<heapscope libdir>/"
                "libheapprofd.so (see 'heapscope profile --print-library'), or run it with "
                "'heapscope profile -- PROGRAM'\n",
                (int)pid);
        return false;
    }
    if (!loaded && !inject_client(a, pid))
        return false;
    if (!signal_caught(pid)) {
        /* A client an earlier attach loaded stays in the process when it refused it, silent:
         * say why again rather than blame the signal. */
        char other[PATH_MAX];
        if (hs_inject_other_malloc(pid, other, sizeof(other)))
            fprintf(stderr, "heapscope profile: cannot profile process %d: %s (%s defines it)\n",
                    (int)pid, hs_inject_status_text(HS_INJECT_OTHER_ALLOCATOR), other);
        else
            fprintf(stderr,
                    "heapscope profile: process %d does not listen for the profiling signal %d "
                    "(its HEAPSCOPE_PROFILE_SIGNAL is 0, or the program handles that signal "
                    "itself)\n",
                    (int)pid, PROFILE_SIGNAL);
        return false;
    }
    return true;
}

/* ---- The daemon --------------------------------------------------------------------------- */

struct daemon_proc {
    pid_t pid;
    int events; /* read end of its report pipe */
    char buf[8192];
    size_t len;
    char address[64];
};

static pid_t start_daemon(struct profile_args *a, const char *daemon_path, struct daemon_proc *d)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        perror("heapscope profile: pipe");
        return -1;
    }
    char log[PATH_MAX];
    snprintf(log, sizeof(log), "%s/heapprofd.log", a->out_dir);
    pid_t pid = fork();
    if (pid < 0) {
        perror("heapscope profile: fork");
        return -1;
    }
    if (pid == 0) {
        /* Its own process group: Ctrl-C goes to the program, the daemon finishes the job. */
        setpgid(0, 0);
        dup2(pipefd[1], 3); /* not close-on-exec: the daemon's --ready-fd */
        char address[64];
        snprintf(address, sizeof(address), "@heapscope-heapprofd.%d", (int)getpid());
        const char *argv[64];
        int n = 0;
        argv[n++] = daemon_path;
        argv[n++] = "--socket";
        argv[n++] = address;
        argv[n++] = "--output";
        argv[n++] = a->out_dir;
        argv[n++] = "--log";
        argv[n++] = log;
        argv[n++] = "--ready-fd";
        argv[n++] = "3";
        for (int i = 0; i < a->num_daemon_args; i++)
            argv[n++] = a->daemon_args[i];
        argv[n] = NULL;
        execv(daemon_path, (char **)argv);
        fprintf(stderr, "heapscope profile: cannot run %s: %s\n", daemon_path, strerror(errno));
        _exit(127);
    }
    close(pipefd[1]);
    d->pid = pid;
    d->events = pipefd[0];
    d->len = 0;
    snprintf(d->address, sizeof(d->address), "@heapscope-heapprofd.%d", (int)pid);
    return pid;
}

/* Reads the next line of the daemon's reports into line, waiting up to timeout_ms (-1:
 * forever). Returns 1 with a line, 0 on timeout, -1 when the daemon closed the pipe. */
static int next_event(struct daemon_proc *d, char *line, size_t cap, int timeout_ms)
{
    for (;;) {
        char *nl = memchr(d->buf, '\n', d->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - d->buf);
            snprintf(line, cap, "%.*s", (int)n, d->buf);
            memmove(d->buf, nl + 1, d->len - n - 1);
            d->len -= n + 1;
            return 1;
        }
        struct pollfd p = {d->events, POLLIN, 0};
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            return 0;
        if (r <= 0)
            return r == 0 ? 0 : -1;
        if (d->len == sizeof(d->buf))
            d->len = 0; /* a line too long to be ours: drop it */
        ssize_t got = read(d->events, d->buf + d->len, sizeof(d->buf) - d->len);
        if (got <= 0)
            return -1;
        d->len += (size_t)got;
    }
}

struct results {
    int connected; /* sessions the daemon accepted */
    int finished;  /* sessions it ended */
    int written;   /* of those, the ones whose final profile was written */
    int refused;
    int errors; /* files it could not write (said as they came) */
    int died;   /* the signal that killed the daemon, 0 when it exited */
};

static void handle_event(const char *line, struct profile_args *a, struct results *r)
{
    if (strncmp(line, "connected ", 10) == 0) {
        r->connected++;
    } else if (strncmp(line, "finished ", 9) == 0) {
        r->finished++;
        const char *file = strchr(line + 9, ' ');
        if (file != NULL && file[1] != '\0') {
            r->written++;
            if (!a->quiet)
                fprintf(stderr, "heapscope profile: process %.*s: wrote %s\n",
                        (int)(file - line - 9), line + 9, file + 1);
        }
    } else if (strncmp(line, "refused ", 8) == 0) {
        r->refused++;
        fprintf(stderr, "heapscope profile: the profiler refused %s\n", line + 8);
    } else if (strncmp(line, "error ", 6) == 0) {
        r->errors++;
        fprintf(stderr, "heapscope profile: %s\n", line + 6);
    }
}

/* Stops the daemon and collects its last reports. Returns its exit status (1 when it died,
 * with r->died set: the caller says so, with what it means). */
static int stop_daemon(struct daemon_proc *d, struct profile_args *a, struct results *r)
{
    kill(d->pid, SIGTERM);
    char line[8192];
    while (next_event(d, line, sizeof(line), 30000) == 1)
        handle_event(line, a, r);
    int status = 0;
    while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR)
        ;
    close(d->events);
    if (WIFSIGNALED(status)) {
        r->died = WTERMSIG(status);
        return 1;
    }
    return WEXITSTATUS(status);
}

/* What became of the profiles, when something went wrong; says nothing when all is well. */
static void say_outcome(const struct results *r, int drc, const struct profile_args *a)
{
    if (r->died != 0) {
        fprintf(stderr, "heapscope profile: the profiler daemon died (signal %d)%s; see %s/"
                        "heapprofd.log\n",
                r->died,
                r->connected > r->written
                    ? r->written ? ": some profiles were not written" : ": no profile was written"
                    : "",
                a->out_dir);
    } else if (drc != 0) {
        fprintf(stderr, "heapscope profile: the profiler daemon ended with status %d; see %s/"
                        "heapprofd.log\n",
                drc, a->out_dir);
    }
}

static bool wait_ready(struct daemon_proc *d)
{
    char line[256];
    if (next_event(d, line, sizeof(line), READY_TIMEOUT_MS) == 1 && strcmp(line, "ready") == 0)
        return true;
    fprintf(stderr, "heapscope profile: the profiler daemon did not start (see %s)\n",
            "its messages above");
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    return false;
}

/* ---- Running a program ---------------------------------------------------------------------- */

/* The child's exec failed (its errno came down the pipe): it said why, and exits 127. */
static bool exec_failed(int status_fd)
{
    int err;
    ssize_t n;
    while ((n = read(status_fd, &err, sizeof(err))) < 0 && errno == EINTR)
        ;
    close(status_fd);
    return n == (ssize_t)sizeof(err);
}

static int run_program(struct profile_args *a, char **argv, const char *lib,
                       const char *daemon_path)
{
    struct daemon_proc d;
    if (start_daemon(a, daemon_path, &d) < 0 || !wait_ready(&d))
        return 1;
    int exec_status[2]; /* close-on-exec: end of file once the program runs */
    if (pipe2(exec_status, O_CLOEXEC) != 0) {
        perror("heapscope profile: pipe");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("heapscope profile: fork");
        return 1;
    }
    if (child == 0) {
        char pid[32];
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        if (hs_preload_prepend(lib) != 0 || setenv("HEAPSCOPE_PROFILE_SOCKET", d.address, 1) ||
            setenv("HEAPSCOPE_PROFILE_PID", pid, 1) ||
            (a->follow && setenv("HEAPSCOPE_PROFILE_FOLLOW", "1", 1))) {
            perror("heapscope profile: setting the environment");
            _exit(127);
        }
        close(d.events);
        close(exec_status[0]);
        execvp(argv[0], argv);
        int err = errno;
        fprintf(stderr, "heapscope profile: cannot run '%s': %s\n", argv[0], strerror(err));
        ssize_t told = write(exec_status[1], &err, sizeof(err));
        (void)told; /* nothing more to do about it: exit 127 says it too */
        _exit(127);
    }
    close(exec_status[1]);
    bool not_run = exec_failed(exec_status[0]);
    /* Like time(1): Ctrl-C is for the program; this command stays to finish the profile. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    struct results r = {0};
    char line[8192];
    while (next_event(&d, line, sizeof(line), 0) == 1)
        handle_event(line, a, &r);
    int drc = stop_daemon(&d, a, &r);
    say_outcome(&r, drc, a);
    if (not_run)
        return 127; /* said by the child */
    if (r.connected == 0 && r.died == 0 && !a->quiet)
        fprintf(stderr,
                "heapscope profile: no profile was written: '%s' never connected (a static "
                "program, or one that clears LD_PRELOAD?); see %s/heapprofd.log\n",
                argv[0], a->out_dir);
    else if (r.written > 0 && !a->quiet)
        fprintf(stderr, "heapscope profile: view with 'heapscope report FILE' (or pprof)\n");
    int program = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    /* The program's status, unless it is 0 and the profiling failed. */
    bool failed = r.errors > 0 || r.died != 0 || drc != 0;
    return program == 0 && failed ? 1 : program;
}

/* ---- Running processes ------------------------------------------------------------------- */

static volatile sig_atomic_t g_interrupted;

static void on_interrupt(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

static int profile_running(struct profile_args *a, const char *daemon_path)
{
    for (int i = 0; i < a->num_targets; i++)
        if (!target_ready(a, a->targets[i]))
            return 1;
    for (int i = 0; i < a->num_targets; i++) {
        /* Only the targets may connect. */
        snprintf(a->pid_args[i], sizeof(a->pid_args[i]), "%d", (int)a->targets[i]);
        daemon_arg(a, "--pid");
        daemon_arg(a, a->pid_args[i]);
    }
    struct daemon_proc d;
    if (start_daemon(a, daemon_path, &d) < 0 || !wait_ready(&d))
        return 1;
    struct results r = {0};
    int connected = 0;
    for (int i = 0; i < a->num_targets; i++) {
        union sigval v = {.sival_int = (int)d.pid};
        if (sigqueue(a->targets[i], PROFILE_SIGNAL, v) != 0)
            fprintf(stderr, "heapscope profile: cannot signal process %d: %s\n", (int)a->targets[i],
                    strerror(errno));
    }
    /* Each target answers with a connection, or a refusal. */
    char line[8192];
    uint64_t waited = 0;
    while (connected + r.refused < a->num_targets && waited < CONNECT_TIMEOUT_MS) {
        int e = next_event(&d, line, sizeof(line), 100);
        waited += 100;
        if (e < 0)
            break;
        if (e == 1)
            handle_event(line, a, &r);
        connected = r.connected;
    }
    if (connected == 0) {
        int drc = stop_daemon(&d, a, &r);
        if (r.died != 0 || drc != 0)
            say_outcome(&r, drc, a);
        else
            fprintf(stderr, "heapscope profile: no process connected to the profiler%s\n",
                    r.refused ? "" : " (is another profiling session running in it?)");
        return 1;
    }
    if (!a->quiet)
        fprintf(stderr,
                "heapscope profile: profiling %d process%s%s; Ctrl-C to stop and write the "
                "profiles\n",
                connected, connected == 1 ? "" : "es", a->duration_s ? " for the duration" : "");
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_interrupt;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* The deadline in nanoseconds: whole seconds of two readings differ by one as soon as
     * the second one crosses a second boundary, up to a second early. */
    uint64_t deadline = hs_monotonic_ns() + (uint64_t)a->duration_s * 1000000000ull;
    while (!g_interrupted && r.finished < connected) {
        int timeout_ms = 200;
        if (a->duration_s > 0) {
            uint64_t now = hs_monotonic_ns();
            if (now >= deadline)
                break;
            if ((deadline - now) / 1000000 < (uint64_t)timeout_ms)
                timeout_ms = (int)((deadline - now + 999999) / 1000000);
        }
        int e = next_event(&d, line, sizeof(line), timeout_ms);
        if (e < 0)
            break;
        if (e == 1)
            handle_event(line, a, &r);
    }
    int drc = stop_daemon(&d, a, &r);
    say_outcome(&r, drc, a);
    if (!a->quiet && r.written > 0)
        fprintf(stderr, "heapscope profile: view with 'heapscope report FILE' (or pprof)\n");
    return drc == 0 && r.errors == 0 && r.written > 0 ? 0 : 1;
}

/* ---- The command ------------------------------------------------------------------------- */

/* This command's own options (the session's are in session_options.h). */
enum {
    OPT_FOLLOW = 256,
    OPT_DURATION,
    OPT_PRINT_LIBRARY,
    OPT_NO_INJECT,
    OPT_ALLOW_SECCOMP,
};

int hs_cmd_profile(int argc, char **argv)
{
    struct option longopts[HS_SOPT_COUNT + 16] = {
        {"pid", required_argument, NULL, 'p'},
        {"name", required_argument, NULL, 'n'},
        {"all", no_argument, NULL, 'a'},
        {"output", required_argument, NULL, 'o'},
        {"follow-children", no_argument, NULL, OPT_FOLLOW},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"print-library", no_argument, NULL, OPT_PRINT_LIBRARY},
        {"no-inject", no_argument, NULL, OPT_NO_INJECT},
        {"allow-seccomp", no_argument, NULL, OPT_ALLOW_SECCOMP},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
    };
    int num_longopts = hs_sopt_longopts(longopts + 11, true) + 11;
    longopts[num_longopts] = (struct option){NULL, 0, NULL, 0};
    char shortopts[64];
    snprintf(shortopts, sizeof(shortopts), "+p:n:ao:qh%s", hs_sopt_shortopts(true));
    struct profile_args a;
    memset(&a, 0, sizeof(a));
    a.inject = true;
    a.out_dir = ".";
    const char *name = NULL;
    bool print_library = false, all = false;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int id = hs_sopt_of(opt, true);
        if (id >= 0) {
            /* Checked here, with the daemon's rules and words, then forwarded by name. */
            uint64_t v;
            if (hs_sopts[id].arg && !hs_sopt_parse(id, optarg, &v)) {
                fprintf(stderr, "heapscope profile: %s takes %s\n", hs_sopts[id].name,
                        hs_sopts[id].takes);
                return 2;
            }
            daemon_arg(&a, hs_sopts[id].name);
            if (hs_sopts[id].arg)
                daemon_arg(&a, optarg);
            continue;
        }
        switch (opt) {
        case 'p':
            if (!parse_pids(&a, optarg))
                return 2;
            break;
        case 'n':
            name = optarg;
            break;
        case 'a':
            all = true;
            break;
        case 'o':
            a.out_dir = optarg;
            break;
        case OPT_FOLLOW:
            a.follow = true;
            break;
        case OPT_DURATION: {
            char *end;
            a.duration_s = strtol(optarg, &end, 10);
            if (*end != '\0' || a.duration_s <= 0 || a.duration_s > 3153600000L) {
                fprintf(stderr, "heapscope profile: --duration takes a number of seconds\n");
                return 2;
            }
            break;
        }
        case OPT_PRINT_LIBRARY:
            print_library = true;
            break;
        case OPT_NO_INJECT:
            a.inject = false;
            break;
        case OPT_ALLOW_SECCOMP:
            a.allow_seccomp = true;
            break;
        case 'q':
            a.quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "heapscope profile: see 'heapscope profile --help'\n");
            return 2;
        }
    }
    char lib[PATH_MAX], daemon_path[PATH_MAX];
    if (print_library) {
        if (hs_find_library("libheapprofd.so", lib, sizeof(lib)) != 0)
            return 1;
        printf("%s\n", lib);
        return 0;
    }
    bool attach = a.num_targets > 0 || name != NULL || all;
    if (attach == (optind < argc)) {
        fprintf(stderr, attach ? "heapscope profile: give -p/-n or a program, not both\n"
                               : "heapscope profile: give a program to run (after --), or -p "
                                 "PID / -n NAME / --all (see --help)\n");
        return 2;
    }
    if ((name != NULL || all) && !find_processes(&a, name))
        return 1;
    struct stat st;
    if (mkdir(a.out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "heapscope profile: cannot create %s: %s\n", a.out_dir, strerror(errno));
        return 1;
    }
    if (stat(a.out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "heapscope profile: %s is not a directory\n", a.out_dir);
        return 1;
    }
    if (find_daemon(daemon_path, sizeof(daemon_path)) != 0)
        return 1;
    /* The session options were checked above with the daemon's own rules (session_options.h). */
    if (attach)
        return profile_running(&a, daemon_path);
    if (hs_find_library("libheapprofd.so", lib, sizeof(lib)) != 0)
        return 1;
    return run_program(&a, argv + optind, lib, daemon_path);
}
