/* log.c: allocation-free line logging (see log.h). */
#include "log.h"

#include "env.h"
#include "errno_text.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct {
    char tag[32];
    char program[256];
    char file_pattern[PATH_MAX]; /* HEAPSCOPE_LOG_FILE, empty for stderr */
    /* HEAPSCOPE_LOG_FD ("FD:DEV:INO"): the heapscope command's report socket, which wins
     * over the file. Used only while FD is still that socket (a program may close its
     * descriptors and reuse the number): checked with fstat at each report. */
    int stream_fd;
    dev_t stream_dev;
    ino_t stream_ino;
    _Atomic int stream_failed;
    hs_log_sink_fn sink;
    void *sink_ctx;
    /* Report lock: owner is (pid << 32 | tid), 0 when free. Only the owner touches
     * depth and report_fd. */
    _Atomic uint64_t owner;
    int depth;
    int report_dropped; /* hs_log_drop_report: the current report's lines go nowhere */
    int report_fd;
    int report_pid; /* getpid() when the report began: one system call per report, not line */
    /* A report's lines are gathered here and written together (at hs_log_end, or when full):
     * a leak report of 10^5 blocks is millions of lines, and one write(2) each took most of
     * its time. */
    size_t report_len;
    char report_buf[32768];
    /* The log file could not be opened or written: set once, by the first thread to fail.
     * From then on lines go to stderr, or nowhere when a hook took the news. */
    _Atomic int file_failed;
    hs_log_file_error_fn file_error_hook;
} g_log = {.tag = "heapscope", .program = "unknown", .report_fd = -1, .stream_fd = -1};

/* Where a line goes when it has no log file to go to. */
#define TO_STDERR (-1)
#define DROPPED (-2)
#define TO_STREAM (-3)

/* Set while this thread owns the report lock (saves the two system calls of self_id() per
 * line), and while it appends to report_buf (a signal handler that logs then writes its
 * line directly instead of appending into a half-written one). */
static __thread int t_owns_report __attribute__((tls_model("initial-exec")));
static __thread int t_appending __attribute__((tls_model("initial-exec")));

static void set_program_name(const char *name)
{
    size_t len = strnlen(name, sizeof(g_log.program) - 1);
    memcpy(g_log.program, name, len);
    g_log.program[len] = '\0';
}

void hs_log_set_program_name(const char *name)
{
    const char *base = name;
    for (const char *p = name; *p; p++)
        if (*p == '/' && p[1])
            base = p + 1;
    set_program_name(base);
}

static void read_program_name(void)
{
    char buf[sizeof(g_log.program)];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0'; /* argv[0] ends at the first NUL */
    hs_log_set_program_name(buf);
}

/* Parses an unsigned decimal number ending at a ':' or the end of s; NULL when malformed. */
static const char *parse_number(const char *s, unsigned long long *out)
{
    unsigned long long v = 0;
    if (*s < '0' || *s > '9')
        return NULL;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (unsigned long long)(*s - '0');
    if (*s != ':' && *s != '\0')
        return NULL;
    *out = v;
    return s;
}

static void read_stream_setting(void)
{
    char value[96];
    unsigned long long fd, dev, ino;
    if (hs_env_get("HEAPSCOPE_LOG_FD", value, sizeof(value)) <= 0)
        return;
    const char *p = parse_number(value, &fd);
    if (!p || *p != ':' || !(p = parse_number(p + 1, &dev)) || *p != ':' ||
        !(p = parse_number(p + 1, &ino)) || *p != '\0' || fd > INT32_MAX)
        return;
    g_log.stream_dev = (dev_t)dev;
    g_log.stream_ino = (ino_t)ino;
    g_log.stream_fd = (int)fd;
}

static void read_settings(void)
{
    read_program_name();
    hs_env_get("HEAPSCOPE_LOG_FILE", g_log.file_pattern, sizeof(g_log.file_pattern));
    read_stream_setting();
}

void hs_log_init(const char *tag)
{
    size_t n = strnlen(tag, sizeof(g_log.tag) - 1);
    memcpy(g_log.tag, tag, n);
    g_log.tag[n] = '\0';
    read_settings();
}

void hs_log_init_program(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    read_settings();
}

void hs_log_set_file_pattern(const char *pattern)
{
    char probe[1];
    if (hs_env_get("HEAPSCOPE_LOG_FILE", probe, sizeof(probe)) >= 0)
        return;
    size_t len = strnlen(pattern, sizeof(g_log.file_pattern) - 1);
    memcpy(g_log.file_pattern, pattern, len);
    g_log.file_pattern[len] = '\0';
}

const char *hs_log_file_pattern(void)
{
    return g_log.file_pattern;
}

const char *hs_log_program_name(void)
{
    return g_log.program;
}

void hs_log_set_sink(hs_log_sink_fn sink, void *ctx)
{
    g_log.sink = sink;
    g_log.sink_ctx = ctx;
}

static uint64_t self_id(void)
{
    return (uint64_t)getpid() << 32 | (uint32_t)syscall(SYS_gettid);
}

void hs_log_set_file_error_hook(hs_log_file_error_fn hook)
{
    g_log.file_error_hook = hook;
}

static void write_all_fd(int fd, const char *s, size_t n);

/* Where lines go once the log file failed: TO_STDERR or DROPPED. */
static int after_failure(void)
{
    return g_log.file_error_hook ? DROPPED : TO_STDERR;
}

/* The log file at path failed with err: says so once (the hook, or one line on stderr in
 * the log's own format), and returns where the line goes instead. */
static int file_failed(const char *path, int err)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_log.file_failed, &expected, 1))
        return after_failure();
    if (g_log.file_error_hook) {
        g_log.file_error_hook(path, err);
        return DROPPED;
    }
    char line[HS_LOG_LINE_MAX];
    size_t n = hs_format(line, sizeof(line),
                         "%s[%d] %s: cannot write the log file %s: %s; messages go to stderr "
                         "from now on\n",
                         g_log.program, (int)getpid(), g_log.tag, path, hs_errno_text(err));
    write_all_fd(STDERR_FILENO, line, n);
    return TO_STDERR;
}

/* The command's socket is gone (closed by the program, or the command no longer reads):
 * said once on stderr; lines go to stderr (or the log file) from then on. */
static void stream_failed(const char *why)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_log.stream_failed, &expected, 1))
        return;
    char line[HS_LOG_LINE_MAX];
    size_t n = hs_format(line, sizeof(line),
                         "%s[%d] %s: the heapscope command's report stream (descriptor %d) %s; "
                         "messages go to stderr from now on\n",
                         g_log.program, (int)getpid(), g_log.tag, g_log.stream_fd, why);
    write_all_fd(STDERR_FILENO, line, n);
}

/* Whether lines go to the command's socket: set, not failed, and still the same socket. */
static bool stream_usable(void)
{
    if (g_log.stream_fd < 0 || atomic_load_explicit(&g_log.stream_failed, memory_order_relaxed))
        return false;
    int saved = errno;
    struct stat st;
    bool same = fstat(g_log.stream_fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
                st.st_dev == g_log.stream_dev && st.st_ino == g_log.stream_ino;
    errno = saved;
    if (!same)
        stream_failed("was closed by the program");
    return same;
}

/* The log file's path, "%p" expanded to the pid. */
static void log_file_path(char *path, size_t cap)
{
    size_t len = 0;
    for (const char *p = g_log.file_pattern; *p && len + 1 < cap; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            len += hs_format(path + len, cap - len, "%d", (int)getpid());
            p++;
        } else {
            path[len++] = *p;
        }
    }
    path[len] = '\0';
}

/* Opens the log file; TO_STDERR without one, DROPPED when it failed and a hook was told. */
static int open_log_file(void)
{
    if (stream_usable())
        return TO_STREAM;
    if (!g_log.file_pattern[0])
        return TO_STDERR;
    if (atomic_load_explicit(&g_log.file_failed, memory_order_relaxed))
        return after_failure();
    char path[PATH_MAX];
    log_file_path(path, sizeof(path));
    int saved = errno;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        fd = file_failed(path, errno);
    errno = saved;
    return fd;
}

/* Writes all of s; returns 0, or the errno of the failure (EIO when nothing was written). */
static int write_all_err(int fd, const char *s, size_t n)
{
    int saved = errno, err = 0;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : EIO;
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    errno = saved;
    return err;
}

static void write_all_fd(int fd, const char *s, size_t n)
{
    (void)write_all_err(fd, s, n);
}

/* Writes a line to fd (a log file, or TO_STDERR / DROPPED). Returns where the next line of
 * the same report goes: fd, or the fallback once the file failed. */
static int write_line(int fd, const char *line, size_t n)
{
    if (fd == DROPPED)
        return fd;
    if (fd == TO_STDERR) {
        write_all_fd(STDERR_FILENO, line, n);
        return fd;
    }
    if (fd == TO_STREAM) {
        /* A SOCK_SEQPACKET socket: one message, whole or not at all; MSG_NOSIGNAL so that a
         * command that went away gives EPIPE here, not SIGPIPE in the program. */
        int saved = errno;
        ssize_t w;
        do
            w = send(g_log.stream_fd, line, n, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        errno = saved;
        if (w == (ssize_t)n)
            return fd;
        stream_failed("cannot be written (the command is gone)");
        write_all_fd(STDERR_FILENO, line, n);
        return TO_STDERR;
    }
    int err = write_all_err(fd, line, n);
    if (err == 0)
        return fd;
    char path[PATH_MAX];
    log_file_path(path, sizeof(path));
    int next = file_failed(path, err);
    if (next == TO_STDERR)
        write_all_fd(STDERR_FILENO, line, n);
    return next;
}

/* Writes the report's gathered lines where the report goes (the file, or its fallback once
 * the file failed). */
static void flush_report(void)
{
    if (g_log.report_len == 0)
        return;
    int fd = g_log.report_fd;
    int next = write_line(fd, g_log.report_buf, g_log.report_len);
    if (next != fd && fd >= 0)
        close(fd); /* the file failed: the rest of the report goes where next says */
    g_log.report_fd = next;
    g_log.report_len = 0;
}

void hs_log_begin(void)
{
    if (t_owns_report) {
        g_log.depth++;
        return;
    }
    uint64_t me = self_id();
    uint64_t owner;
    for (;;) {
        owner = atomic_load_explicit(&g_log.owner, memory_order_relaxed);
        /* A lock held by a thread of the parent process before fork is stale here. */
        if (owner != 0 && (owner >> 32) != (uint64_t)getpid() &&
            atomic_compare_exchange_weak(&g_log.owner, &owner, me))
            break;
        uint64_t expected = 0;
        if (atomic_compare_exchange_weak_explicit(&g_log.owner, &expected, me, memory_order_acquire,
                                                  memory_order_relaxed))
            break;
        sched_yield();
    }
    g_log.depth = 1;
    g_log.report_fd = open_log_file();
    g_log.report_pid = (int)(me >> 32);
    g_log.report_len = 0;
    t_owns_report = 1;
}

void hs_log_end(void)
{
    if (!t_owns_report)
        return;
    if (--g_log.depth > 0)
        return;
    flush_report();
    g_log.report_dropped = 0;
    t_owns_report = 0;
    if (g_log.report_fd >= 0)
        close(g_log.report_fd);
    g_log.report_fd = -1;
    atomic_store_explicit(&g_log.owner, 0, memory_order_release);
}

void hs_log_drop_report(void)
{
    if (t_owns_report)
        g_log.report_dropped = 1;
}

void hs_vlog(const char *fmt, va_list ap)
{
    hs_vlog_tag(g_log.tag, fmt, ap);
}

void hs_vlog_tag(const char *tag, const char *fmt, va_list ap)
{
    int in_report = t_owns_report;
    if (in_report && g_log.report_dropped)
        return;
    char line[HS_LOG_LINE_MAX];
    int pid = in_report ? g_log.report_pid : (int)getpid();
    size_t n = hs_format(line, sizeof(line), "%s[%d] %s: ", g_log.program, pid, tag);
    n += hs_vformat(line + n, sizeof(line) - n - 1, fmt, ap);
    line[n++] = '\n';
    line[n] = '\0';

    if (g_log.sink) {
        g_log.sink(line, n, g_log.sink_ctx);
        return;
    }
    if (in_report && !t_appending) {
        t_appending = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (g_log.report_len + n > sizeof(g_log.report_buf))
            flush_report();
        memcpy(g_log.report_buf + g_log.report_len, line, n);
        g_log.report_len += n;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t_appending = 0;
        return;
    }
    int fd = in_report ? g_log.report_fd : open_log_file();
    int next = write_line(fd, line, n);
    if (in_report) {
        if (next != fd && fd >= 0)
            close(fd); /* the file failed: the rest of the report goes where next says */
        g_log.report_fd = next;
    } else if (fd >= 0) {
        close(fd);
    }
}

void hs_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_vlog(fmt, ap);
    va_end(ap);
}

void hs_log_tag(const char *tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_vlog_tag(tag, fmt, ap);
    va_end(ap);
}

void hs_log_fatal_tag(const char *tag, const char *fmt, ...)
{
    /* Unless a signal interrupted this thread inside an append (the buffer is then half
     * written), the report gathered so far goes out first; the line itself is written
     * directly, as if outside the report. The report lock stays held: the process dies. */
    if (t_owns_report && !t_appending) {
        flush_report();
        t_owns_report = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    hs_vlog_tag(tag, fmt, ap);
    va_end(ap);
}
