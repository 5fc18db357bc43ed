/* heapprofd.c: the profiler daemon. Accepts profiled processes on a UNIX socket, drains their
 * shared buffers, and writes their profiles (profiled_process.h): at the end of each session,
 * on SIGUSR1, every --continuous milliseconds, and at the peak with --dump-at-max.
 *
 * One thread: the unwinder (unwinder.h) turns a sample into pcs in well under a
 * microsecond, so a single core drains hundreds of thousands of samples a second, and one
 * thread keeps every process's records in order without locks.
 *
 * Guardrails: --max-memory and --max-cpu stop every session (with final dumps saying why)
 * and end the daemon when its resident memory or CPU time passes the limit.
 *
 * --ready-fd N: the daemon reports on descriptor N, one line each, "ready" once it listens,
 * "connected PID", "refused PID: REASON", "finished PID PROFILE" (PROFILE empty when the
 * final profile could not be written) and "error TEXT" for each file it could not write,
 * its log included (for `heapscope profile`, which says so and exits non-zero).
 */
#define _GNU_SOURCE
#include "clock.h"
#include "handshake.h"
#include "log.h"
#include "profiled_process.h"
#include "ring_buffer.h"
#include "session_options.h"
#include "unix_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_BATCH 4096
#define POLL_SOON_MS 2 /* the buffer of a busy client is looked at this often */
#define MAX_PROCESSES 1000
#define STOP_DEADLINE_NS 10000000000ull /* stopping: at most 10 s to drain */

static void usage(FILE *out)
{
    fprintf(out, "usage: heapprofd --socket ADDRESS [options]\n"
                 "\n"
                 "The daemon of heapscope's sampling heap profiler: programs started with\n"
                 "libheapprofd.so preloaded connect to ADDRESS (a path, or @NAME for an abstract\n"
                 "socket); their profiles are written to the output directory. Usually started by\n"
                 "'heapscope profile'.\n"
                 "\n"
                 "Options:\n"
                 "  -s, --socket ADDRESS     where to listen (required, unless systemd passes the\n"
                 "                           socket: heapprofd.socket)\n"
                 "  -o, --output DIR         where profiles go (default: the current directory)\n");
    /* The session's options, as `heapscope profile` describes those it forwards. */
    hs_sopt_help(out, false, 27);
    fprintf(out, "  -p, --pid PID            accept only this process (repeatable)\n"
                 "  -l, --log FILE           log to FILE instead of stderr\n"
                 "      --ready-fd N         report events on descriptor N\n"
                 "  -h, --help               show this help\n"
                 "\n"
                 "Signals: SIGUSR1 dumps every process now; SIGTERM or SIGINT stops the sessions,\n"
                 "writes their final profiles and exits.\n");
}

struct daemon {
    struct hs_daemon_config cfg;
    int listen_fd, signal_fd, ready_fd;
    struct hs_profiled_process *procs[MAX_PROCESSES];
    size_t num_procs;
    uint64_t continuous_ns, next_continuous;
    uint64_t max_memory, max_cpu_ns;
    uint64_t max_rate;           /* record bytes per second, all processes (0: no bound) */
    uint64_t requested_interval; /* what the bound asks of every process now (0: nothing) */
    uint64_t next_guard;
    bool stopping;
    uint64_t stop_deadline;
    int exit_code;
};

static struct daemon *g_daemon; /* for the callbacks below */

static void report(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct daemon *d, const char *fmt, ...)
{
    if (d->ready_fd < 0)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(d->ready_fd, line, (size_t)n) < 0)
        d->ready_fd = -1; /* nobody listens any more */
}

static void profile_write_failed(pid_t pid, const char *path, const char *reason)
{
    report(g_daemon, "error process %d: cannot write %s: %s", (int)pid, path, reason);
}

/* The log file failed (log.h): told to the command that started us, which has our stderr
 * too but a prefix of its own. */
static void log_write_failed(const char *path, int err)
{
    report(g_daemon, "error cannot write the profiler's log %s: %s", path, strerror(err));
}

/* ---- Options ----------------------------------------------------------------------------- */

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* The daemon's own options (the session's are in session_options.h). */
enum { OPT_READY_FD = 256 };

/* Applies session option id with its parsed value v (0 for a flag). */
static void apply_session_option(struct daemon *d, int id, uint64_t v)
{
    struct hs_daemon_config *c = &d->cfg;
    switch ((enum hs_sopt_id)id) {
    case HS_SOPT_INTERVAL:
        c->interval = v;
        break;
    case HS_SOPT_CONTINUOUS:
        d->continuous_ns = v * 1000000ull;
        break;
    case HS_SOPT_DUMP_AT_MAX:
        c->dump_at_max = true;
        break;
    case HS_SOPT_ANDROID_DUMP:
        c->android_dump = true;
        break;
    case HS_SOPT_NO_BLOCK:
        c->flags &= ~HS_CONFIG_BLOCK_CLIENT;
        break;
    case HS_SOPT_BLOCK_TIMEOUT:
        c->block_timeout_ms = v;
        break;
    case HS_SOPT_NO_ADAPTIVE:
        c->flags &= ~HS_CONFIG_ADAPTIVE;
        break;
    case HS_SOPT_MAX_INTERVAL:
        c->max_interval = v;
        break;
    case HS_SOPT_BUFFER_SIZE:
        c->buffer_size = (size_t)v;
        break;
    case HS_SOPT_MAX_STACK:
        c->max_stack = (uint32_t)v;
        break;
    case HS_SOPT_MAX_MEMORY:
        d->max_memory = v << 20;
        break;
    case HS_SOPT_MAX_CPU:
        d->max_cpu_ns = v * 1000000000ull;
        break;
    case HS_SOPT_MAX_RATE:
        d->max_rate = v;
        break;
    case HS_SOPT_COUNT:
        break;
    }
}

static pid_t g_pids[256];

/* The listening socket systemd passed (socket activation: LISTEN_PID is us, LISTEN_FDS >= 1,
 * the first one is descriptor 3), or -1. */
static int activated_socket(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (pid == NULL || fds == NULL || atol(pid) != (long)getpid() || atol(fds) < 1)
        return -1;
    return 3;
}

/* Returns 0, 1 (exit 0: help) or 2 (bad usage, told). */
static int parse_options(int argc, char **argv, struct daemon *d, const char **address)
{
    struct option longopts[HS_SOPT_COUNT + 8] = {
        {"socket", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"pid", required_argument, NULL, 'p'},
        {"log", required_argument, NULL, 'l'},
        {"ready-fd", required_argument, NULL, OPT_READY_FD},
        {"help", no_argument, NULL, 'h'},
    };
    int num_longopts = hs_sopt_longopts(longopts + 6, false) + 6;
    longopts[num_longopts] = (struct option){NULL, 0, NULL, 0};
    char shortopts[64];
    snprintf(shortopts, sizeof(shortopts), "s:o:p:l:h%s", hs_sopt_shortopts(false));
    struct hs_daemon_config *c = &d->cfg;
    uint64_t v;
    int opt;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const char *bad = NULL;
        int id = hs_sopt_of(opt, false);
        if (id >= 0) {
            v = 0;
            if (hs_sopts[id].arg && !hs_sopt_parse(id, optarg, &v)) {
                fprintf(stderr, "heapprofd: %s takes %s\n", hs_sopts[id].name, hs_sopts[id].takes);
                return 2;
            }
            apply_session_option(d, id, v);
            continue;
        }
        switch (opt) {
        case 's':
            *address = optarg;
            break;
        case 'o':
            c->out_dir = optarg;
            break;
        case 'p':
            if (!parse_u64(optarg, 1, INT32_MAX, &v))
                bad = "--pid takes a process id";
            else if (c->num_pids == sizeof(g_pids) / sizeof(g_pids[0]))
                bad = "too many --pid options (256 at most)";
            else
                g_pids[c->num_pids++] = (pid_t)v;
            c->pids = g_pids;
            break;
        case 'l':
            setenv("HEAPSCOPE_LOG_FILE", optarg, 1);
            break;
        case OPT_READY_FD:
            if (!parse_u64(optarg, 0, INT_MAX, &v))
                bad = "--ready-fd takes a descriptor number";
            d->ready_fd = (int)v;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
        if (bad != NULL) {
            fprintf(stderr, "heapprofd: %s\n", bad);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "heapprofd: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (*address == NULL && activated_socket() < 0) {
        fprintf(stderr, "heapprofd: --socket ADDRESS is required (see --help), unless systemd "
                        "passes the socket\n");
        return 2;
    }
    if (c->max_interval < c->interval)
        c->max_interval = c->interval;
    if (d->max_rate != 0)
        c->flags |= HS_CONFIG_ADAPTIVE; /* the clients take the requests there */
    if (c->interval == 1)
        c->flags &= ~HS_CONFIG_ADAPTIVE; /* exact means exact: wait instead */
    if ((uint64_t)c->max_stack + 4096 > c->buffer_size / 4)
        c->max_stack =
            (uint32_t)(c->buffer_size / 4 - 4096 > 256 ? c->buffer_size / 4 - 4096 : 256);
    return 0;
}

/* ---- Processes --------------------------------------------------------------------------- */

static void accept_all(struct daemon *d)
{
    for (;;) {
        int sock = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (sock < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                hs_log("accept: %s", strerror(errno));
            return;
        }
        if (d->stopping || d->num_procs == MAX_PROCESSES) {
            close(sock);
            continue;
        }
        char err[256];
        struct hs_profiled_process *p = hs_process_accept(sock, &d->cfg, err, sizeof(err));
        if (p == NULL) {
            hs_log("refused %s", err);
            report(d, "refused %s", err);
            continue;
        }
        d->procs[d->num_procs++] = p;
        if (d->requested_interval != 0)
            hs_process_request_interval(p, d->requested_interval);
        report(d, "connected %d", (int)hs_process_pid(p));
    }
}

static void finish(struct daemon *d, size_t i)
{
    struct hs_profiled_process *p = d->procs[i];
    hs_process_dump(p, HS_DUMP_FINAL);
    report(d, "finished %d %s", (int)hs_process_pid(p), hs_process_last_profile(p));
    hs_process_free(p);
    d->procs[i] = d->procs[--d->num_procs];
}

static void dump_all(struct daemon *d)
{
    for (size_t i = 0; i < d->num_procs; i++)
        hs_process_dump(d->procs[i], HS_DUMP_NUMBERED);
}

static void stop_all(struct daemon *d, const char *why)
{
    if (!d->stopping) {
        d->stopping = true;
        d->stop_deadline = hs_monotonic_ns() + STOP_DEADLINE_NS;
    }
    for (size_t i = 0; i < d->num_procs; i++)
        hs_process_stop(d->procs[i], why);
}

/* ---- Guardrails -------------------------------------------------------------------------- */

static void check_guardrails(struct daemon *d)
{
    char why[160];
    if (d->max_memory != 0) {
        uint64_t rss = hs_daemon_resident_bytes();
        if (rss > d->max_memory) {
            snprintf(why, sizeof(why), "guardrail: the daemon's memory (%llu MiB) passed %llu MiB",
                     (unsigned long long)(rss >> 20), (unsigned long long)(d->max_memory >> 20));
            hs_log("%s; stopping", why);
            stop_all(d, why);
            d->exit_code = 3;
        }
    }
    if (d->max_cpu_ns != 0) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        if (cpu > d->max_cpu_ns) {
            snprintf(why, sizeof(why), "guardrail: the daemon's CPU time passed %llu s",
                     (unsigned long long)(d->max_cpu_ns / 1000000000ull));
            hs_log("%s; stopping", why);
            stop_all(d, why);
            d->exit_code = 3;
        }
    }
}

/* Once a second: when all processes together sent more than --max-rate bytes, asks each of
 * them for a larger interval (the samples carry the interval they were drawn with: the
 * profiles stay unbiased); when they send well under it, relaxes the request by half. */
static void bound_data_rate(struct daemon *d)
{
    uint64_t total = 0;
    for (size_t i = 0; i < d->num_procs; i++)
        total += hs_process_take_bytes(d->procs[i]);
    if (d->max_rate == 0)
        return;
    uint64_t wanted = d->requested_interval;
    if (total > d->max_rate) {
        uint64_t base = wanted ? wanted : d->cfg.interval;
        uint64_t factor = 2;
        while (factor < 16 && total / factor > d->max_rate)
            factor *= 2;
        wanted = base * factor > (1ull << 30) ? (1ull << 30) : base * factor;
    } else if (wanted != 0 && total < d->max_rate / 4) {
        wanted = wanted / 2 <= d->cfg.interval ? 0 : wanted / 2;
    }
    if (wanted == d->requested_interval)
        return;
    hs_log("data rate %llu bytes/s (--max-rate %llu): asking every process for an interval of "
           "at least %llu bytes",
           (unsigned long long)total, (unsigned long long)d->max_rate,
           (unsigned long long)(wanted ? wanted : d->cfg.interval));
    d->requested_interval = wanted;
    for (size_t i = 0; i < d->num_procs; i++)
        hs_process_request_interval(d->procs[i], wanted);
}

/* ---- The loop ---------------------------------------------------------------------------- */

static void on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;
    while (read(d->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGUSR1)
            dump_all(d);
        else
            stop_all(d, "the profiler was asked to stop");
    }
}

static int run(struct daemon *d)
{
    struct pollfd fds[MAX_PROCESSES + 2];
    enum hs_drain_state need = HS_DRAIN_IDLE;
    for (;;) {
        uint64_t now = hs_monotonic_ns();
        if (d->stopping && (d->num_procs == 0 || now >= d->stop_deadline)) {
            while (d->num_procs > 0)
                finish(d, d->num_procs - 1);
            return d->exit_code;
        }
        int timeout = need == HS_DRAIN_MORE ? 0 : need == HS_DRAIN_SOON ? POLL_SOON_MS : 100;
        if (d->continuous_ns != 0 && !d->stopping) {
            uint64_t left = d->next_continuous > now ? d->next_continuous - now : 0;
            if (left / 1000000 < (uint64_t)timeout)
                timeout = (int)(left / 1000000);
        }
        size_t n = 0;
        fds[n++] = (struct pollfd){d->listen_fd, POLLIN, 0};
        fds[n++] = (struct pollfd){d->signal_fd, POLLIN, 0};
        for (size_t i = 0; i < d->num_procs; i++)
            fds[n++] = (struct pollfd){hs_process_socket(d->procs[i]), POLLIN, 0};
        if (poll(fds, n, timeout) < 0 && errno != EINTR) {
            hs_log("poll: %s", strerror(errno));
            return 1;
        }
        if (fds[1].revents)
            on_signal(d);
        for (size_t i = 0; i < d->num_procs; i++)
            if (fds[i + 2].revents)
                hs_process_on_socket(d->procs[i]);
        if (fds[0].revents)
            accept_all(d);

        need = HS_DRAIN_IDLE;
        for (size_t i = 0; i < d->num_procs; i++) {
            enum hs_drain_state s = hs_process_drain(d->procs[i], DRAIN_BATCH);
            if (s > need)
                need = s;
        }
        for (size_t i = d->num_procs; i-- > 0;)
            if (hs_process_finished(d->procs[i]))
                finish(d, i);

        now = hs_monotonic_ns();
        if (d->continuous_ns != 0 && now >= d->next_continuous) {
            dump_all(d);
            d->next_continuous = now + d->continuous_ns;
        }
        if (now >= d->next_guard) {
            check_guardrails(d);
            bound_data_rate(d);
            d->next_guard = now + 1000000000ull;
        }
    }
}

int main(int argc, char **argv)
{
    struct daemon d;
    memset(&d, 0, sizeof(d));
    d.ready_fd = -1;
    d.cfg.interval = 4096;
    d.cfg.max_interval = 1 << 20;
    d.cfg.flags = HS_CONFIG_BLOCK_CLIENT | HS_CONFIG_ADAPTIVE;
    d.cfg.block_timeout_ms = 30000;
    d.cfg.max_stack = 65536;
    d.cfg.buffer_size = HS_RB_DEFAULT_SIZE;
    d.cfg.out_dir = ".";
    const char *address = NULL;
    int rc = parse_options(argc, argv, &d, &address);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    hs_log_init("heapprofd");
    hs_log_set_program_name("heapprofd");
    g_daemon = &d;
    d.cfg.write_failed = profile_write_failed;
    if (d.ready_fd >= 0)
        hs_log_set_file_error_hook(log_write_failed);

    struct stat st;
    if (stat(d.cfg.out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "heapprofd: output directory %s: %s\n", d.cfg.out_dir,
                errno ? strerror(errno) : "not a directory");
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    d.signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    bool socket_file = address != NULL && address[0] != '@'; /* ours to remove at the end */
    if (address == NULL) {
        /* Socket activation: keep systemd's socket, and do not pass it on. */
        d.listen_fd = activated_socket();
        fcntl(d.listen_fd, F_SETFD, FD_CLOEXEC);
        fcntl(d.listen_fd, F_SETFL, fcntl(d.listen_fd, F_GETFL) | O_NONBLOCK);
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        address = "(socket from systemd)";
    } else {
        d.listen_fd = hs_sock_listen(address);
    }
    if (d.signal_fd < 0 || d.listen_fd < 0) {
        fprintf(stderr, "heapprofd: cannot listen on %s: %s\n", address, strerror(errno));
        return 1;
    }
    uint64_t now = hs_monotonic_ns();
    d.next_continuous = now + d.continuous_ns;
    d.next_guard = now + 1000000000ull;
    report(&d, "ready");
    rc = run(&d);
    if (socket_file)
        unlink(address);
    return rc;
}
