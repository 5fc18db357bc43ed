/* program_run.c: see program_run.h. */
#define _GNU_SOURCE
#include "program_run.h"

#include "cli.h"
#include "report_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The shim's report buffer is 32 KiB (log.c): every message fits. */
#define MESSAGE_MAX (64 * 1024)

static volatile sig_atomic_t g_child;

static void *supp_alloc(size_t size, void *ctx)
{
    (void)ctx;
    return malloc(size ? size : 1);
}

bool hs_load_suppressions(const char *command, const char *path, struct hs_supp_set *set)
{
    size_t len;
    char *text = hs_read_small_file(path, &len);
    if (!text) {
        fprintf(stderr, "heapscope %s: cannot read the suppressions file %s: %s\n", command, path,
                strerror(errno));
        return false;
    }
    char err[256];
    bool ok = hs_supp_parse(text, len, set, supp_alloc, NULL, err, sizeof(err));
    free(text);
    if (!ok)
        fprintf(stderr, "heapscope %s: %s:%s\n", command, path, err);
    return ok;
}

int hs_parse_exitcode(const char *command, const char *text)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end || v < 1 || v > 255) {
        fprintf(stderr, "heapscope %s: bad exit code '%s' (1 to 255)\n", command, text);
        return -1;
    }
    return (int)v;
}

int hs_run_option(int c, const char *arg, struct hs_run_options *run)
{
    switch (c) {
    case 'l':
        run->log_file = arg;
        return 1;
    case HS_RUN_OPT_SUPP:
        run->supp_file = arg;
        return 1;
    case HS_RUN_OPT_EXITCODE:
        run->error_exitcode = hs_parse_exitcode(run->command, arg);
        return run->error_exitcode < 0 ? -1 : 1;
    case HS_RUN_OPT_JSON:
        run->json_file = arg;
        return 1;
    case HS_RUN_OPT_NO_SYMBOLIZE:
        run->symbolize = false;
        return 1;
    default:
        return 0;
    }
}

/* Passes signals sent to the command with kill on to the program; those the terminal sends
 * (SI_KERNEL) went to the program's process group already. */
static void forward(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (g_child > 0 && info->si_code != SI_KERNEL)
        kill(g_child, sig);
}

static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};

static void install_forwarding(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaction(forwarded[i], &sa, NULL);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaction(sig, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stderr must not kill the reader */
}

static void exec_child(const char *command, char **argv, int fd, pid_t parent)
{
    /* The command stands for the program: when it dies (kill -9 on the pid the caller knows)
     * the program goes with it, as it did when the command exec'ed it in place. Only the
     * program itself: its own children are not touched. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
    struct stat st;
    char value[96];
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0 || fstat(fd, &st) != 0) {
        perror("heapscope: preparing the report socket");
        _exit(127);
    }
    snprintf(value, sizeof(value), "%d:%llu:%llu", fd, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    if (setenv("HEAPSCOPE_LOG_FD", value, 1) != 0) {
        perror("heapscope: setting the environment");
        _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "heapscope %s: cannot run '%s': %s\n", command, argv[0], strerror(errno));
    _exit(127);
}

/* Reads what is there (or, when wait is set, waits for a message); false at the end. */
static bool read_messages(int fd, struct hs_report_stream *rs, char *buf, bool wait)
{
    for (;;) {
        ssize_t n = recv(fd, buf, MESSAGE_MAX, wait ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK;
        if (n == 0)
            return false;
        hs_report_stream_feed(rs, buf, (size_t)n);
        wait = false;
    }
}

static int exit_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    /* Die the same way, without a second core dump. */
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    fflush(NULL);
    raise(sig);
    return 128 + sig;
}

int hs_run_program(char **argv, const struct hs_run_options *o)
{
    struct hs_supp_set supp;
    bool have_supp = o->supp_file != NULL;
    if (have_supp && !hs_load_suppressions(o->command, o->supp_file, &supp))
        return 2;
    FILE *json = NULL;
    if (o->json_file && !(json = fopen(o->json_file, "we"))) {
        fprintf(stderr, "heapscope %s: cannot write %s: %s\n", o->command, o->json_file,
                strerror(errno));
        return 1;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        fprintf(stderr, "heapscope %s: cannot create the report socket: %s\n", o->command,
                strerror(errno));
        return 1;
    }
    /* Room for bursts while the command symbolizes (the program blocks only when full). */
    int size = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "heapscope %s: cannot fork: %s\n", o->command, strerror(errno));
        return 1;
    }
    if (child == 0) {
        close(sv[0]);
        exec_child(o->command, argv, sv[1], parent);
    }
    g_child = child;
    install_forwarding();
    close(sv[1]);

    char command[64];
    snprintf(command, sizeof(command), "heapscope %s", o->command);
    struct hs_report_stream_options ro = {.symbolize = o->symbolize,
                                          .supp = have_supp ? &supp : NULL,
                                          .supp_path = o->supp_file,
                                          .out = STDERR_FILENO,
                                          .log_pattern = o->log_file,
                                          .program_pid = child,
                                          .json = json,
                                          .command = command};
    struct hs_report_stream *rs = hs_report_stream_new(&ro);
    char *buf = malloc(MESSAGE_MAX);
    if (!rs || !buf) {
        fprintf(stderr, "heapscope %s: out of memory\n", o->command);
        exit(1);
    }

    int status = 0;
    bool open = true;
    for (;;) {
        if (open) {
            struct pollfd p = {sv[0], POLLIN, 0};
            int r = poll(&p, 1, 100);
            if (r > 0)
                open = read_messages(sv[0], rs, buf, false);
        }
        pid_t w = waitpid(child, &status, open ? WNOHANG : 0);
        if (w == child)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "heapscope %s: waiting for the program: %s\n", o->command,
                    strerror(errno));
            status = 1 << 8;
            break;
        }
    }
    g_child = 0;
    /* The program is gone; what it wrote is in the socket. Descendants that still hold it
     * are not waited for. */
    if (open)
        read_messages(sv[0], rs, buf, false);
    close(sv[0]);
    hs_report_stream_finish(rs);
    size_t findings = hs_report_stream_findings(rs);
    hs_report_stream_free(rs);
    free(buf);
    if (json && fclose(json) != 0)
        fprintf(stderr, "heapscope %s: writing %s failed: %s\n", o->command, o->json_file,
                strerror(errno));
    if (o->error_exitcode >= 0 && findings > 0)
        return o->error_exitcode;
    return exit_status_of(status);
}
