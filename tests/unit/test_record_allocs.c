/* test_record_allocs.c: unit tests of malloc debug's allocation recorder
 * (src/malloc_debug/record_allocs.c).
 *
 * The module is driven directly: records are made with made-up pointers, writes are
 * requested the real way (raise(SIGRTMAX-18), then hs_md_record_dump_if_requested) into a
 * file in a private temporary directory, and the lines read back are compared exactly. Log
 * lines are captured with hs_log_set_sink. The test defines the shim's re-entry guard, which
 * the real shim defines in init.c.
 *
 * `test_record_allocs bench [N]` only measures the cost of one record (N per thread).
 */
#define _GNU_SOURCE
#include "check.h"
#include "log.h"
#include "options.h"
#include "record_allocs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__thread int hs_md_in_shim __attribute__((tls_model("initial-exec")));

static char g_dir[] = "/tmp/hs_record_test.XXXXXX";
static char g_file[PATH_MAX];

/* ---- log capture ---- */

#define MAX_LOG 64

static struct {
    pthread_mutex_t lock;
    int count;
    char body[MAX_LOG][HS_LOG_LINE_MAX];
} logcap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void log_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    (void)len;
    pthread_mutex_lock(&logcap.lock);
    int i = logcap.count++;
    if (i < MAX_LOG) {
        const char *close = strstr(line, "] ");
        const char *body = close ? strstr(close + 2, ": ") : NULL;
        snprintf(logcap.body[i], sizeof(logcap.body[i]), "%s", body ? body + 2 : line);
        size_t n = strlen(logcap.body[i]);
        if (n && logcap.body[i][n - 1] == '\n')
            logcap.body[i][n - 1] = '\0';
    }
    pthread_mutex_unlock(&logcap.lock);
}

static void log_reset(void)
{
    pthread_mutex_lock(&logcap.lock);
    logcap.count = 0;
    pthread_mutex_unlock(&logcap.lock);
}

/* ---- set-up and reading the file ---- */

/* Initialises the recorder from an option string (through the real parser). */
static bool setup(const char *options)
{
    char text[PATH_MAX + 256];
    snprintf(text, sizeof(text), "%s record_allocs_file=%s", options, g_file);
    struct hs_md_config cfg;
    if (!CHECK(hs_md_config_parse(&cfg, text)))
        return false;
    unlink(g_file);
    log_reset();
    return CHECK(hs_md_record_init(&cfg));
}

struct lines {
    int n;
    char **line;
    char *text;
};

static void lines_free(struct lines *l)
{
    free(l->line);
    free(l->text);
    memset(l, 0, sizeof(*l));
}

/* Reads a whole file into lines; false when it cannot be read. */
static bool read_lines(const char *path, struct lines *out)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap + 1);
    for (;;) {
        if (len == cap)
            text = realloc(text, (cap *= 2) + 1);
        ssize_t r = read(fd, text + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    text[len] = '\0';
    int n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    out->line = calloc((size_t)n + 1, sizeof(char *));
    out->text = text;
    char *p = text;
    for (int i = 0; i < n; i++) {
        char *nl = strchr(p, '\n');
        *nl = '\0';
        out->line[i] = p;
        p = nl + 1;
    }
    out->n = n;
    CHECK(*p == '\0'); /* the file ends with a newline */
    return true;
}

/* Requests a write the real way and performs it. */
static void dump(void)
{
    raise(SIGRTMAX - 18);
    hs_md_record_dump_if_requested();
}

/* Dumps and reads the file (empty result when no file was written). */
static void dump_lines(struct lines *out)
{
    unlink(g_file);
    dump();
    if (!read_lines(g_file, out))
        memset(out, 0, sizeof(*out));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Checks that `line` is `prefix` followed by " END" with END in [lo, hi] (the end timestamp
 * is taken inside the module, so only its range is known). */
static void check_line_at(const char *line, const char *prefix, uint64_t lo, uint64_t hi, int at)
{
    size_t n = strlen(prefix);
    if (!check_at(line && strncmp(line, prefix, n) == 0 && line[n] == ' ', __FILE__, at,
                  "line starts with prefix")) {
        fprintf(stderr, "    line:   \"%s\"\n    prefix: \"%s\"\n", line ? line : "(null)", prefix);
        return;
    }
    char *end;
    errno = 0;
    unsigned long long t = strtoull(line + n + 1, &end, 10);
    check_at(errno == 0 && *end == '\0' && end != line + n + 1, __FILE__, at, "END is a number");
    check_at(t >= lo && t <= hi, __FILE__, at, "END in range");
}
#define CHECK_LINE(line, prefix, lo, hi) check_line_at((line), (prefix), (lo), (hi), __LINE__)

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    static char buf[8][512];
    static int next;
    char *b = buf[next++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof(buf[0]), f, ap);
    va_end(ap);
    return b;
}

static bool starts_with(const char *s, const char *prefix)
{
    bool ok = s && strncmp(s, prefix, strlen(prefix)) == 0;
    if (!ok)
        fprintf(stderr, "    \"%s\" does not start with \"%s\"\n", s ? s : "(null)", prefix);
    return ok;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- tests ---- */

static void test_line_formats(void)
{
    check_context("line formats");
    if (!setup("record_allocs"))
        return;
    int tid = gettid();
    uint64_t t0 = now_ns();
    hs_md_record_malloc((void *)0x1000, 100, 11);
    uint64_t s = hs_md_record_reserve();
    CHECK(s != HS_MD_RECORD_NO_SLOT);
    hs_md_record_free(s, (void *)0x1000, 12);
    hs_md_record_calloc((void *)0xabcdef012345, 32, 4, 13);
    s = hs_md_record_reserve();
    hs_md_record_realloc(s, (void *)0x3000, (void *)0x2000, 12, 14);
    hs_md_record_memalign((void *)0x4000, 4096, 123, 15);
    /* NULL pointers: failed allocations, realloc from/to NULL. */
    hs_md_record_malloc(NULL, (size_t)1 << 62, 16);
    hs_md_record_calloc(NULL, 0, 0, 17);
    s = hs_md_record_reserve();
    hs_md_record_realloc(s, (void *)0x5000, NULL, 8, 18);
    s = hs_md_record_reserve();
    hs_md_record_realloc(s, NULL, (void *)0x5000, 0, 19);
    s = hs_md_record_reserve();
    hs_md_record_free(s, NULL, 20);
    hs_md_record_memalign(NULL, 16, 0, 21);
    hs_md_record_malloc((void *)UINTPTR_MAX, SIZE_MAX, UINT64_MAX - 1);
    s = hs_md_record_reserve();
    hs_md_record_cancel(s); /* leaves no line */
    uint64_t t1 = now_ns();

    struct lines l;
    dump_lines(&l);
    CHECK_EQ(l.n, 12);
    if (l.n == 12) {
        CHECK_LINE(l.line[0], fmt("%d: malloc 0x1000 100 11", tid), t0, t1);
        CHECK_LINE(l.line[1], fmt("%d: free 0x1000 12", tid), t0, t1);
        CHECK_LINE(l.line[2], fmt("%d: calloc 0xabcdef012345 32 4 13", tid), t0, t1);
        CHECK_LINE(l.line[3], fmt("%d: realloc 0x3000 0x2000 12 14", tid), t0, t1);
        CHECK_LINE(l.line[4], fmt("%d: memalign 0x4000 4096 123 15", tid), t0, t1);
        CHECK_LINE(l.line[5], fmt("%d: malloc 0x0 4611686018427387904 16", tid), t0, t1);
        CHECK_LINE(l.line[6], fmt("%d: calloc 0x0 0 0 17", tid), t0, t1);
        CHECK_LINE(l.line[7], fmt("%d: realloc 0x5000 0x0 8 18", tid), t0, t1);
        CHECK_LINE(l.line[8], fmt("%d: realloc 0x0 0x5000 0 19", tid), t0, t1);
        CHECK_LINE(l.line[9], fmt("%d: free 0x0 20", tid), t0, t1);
        CHECK_LINE(l.line[10], fmt("%d: memalign 0x0 16 0 21", tid), t0, t1);
        CHECK_LINE(
            l.line[11],
            fmt("%d: malloc 0xffffffffffffffff 18446744073709551615 18446744073709551614", tid), t0,
            t1);
        /* Start times from the clock the module uses. */
        uint64_t before = hs_md_record_now_ns();
        CHECK(before >= t0 && before <= now_ns());
    }
    lines_free(&l);
    CHECK_EQ(logcap.count, 0);
}

static void test_dump_clears_and_empty(void)
{
    check_context("dump clears; empty table");
    if (!setup("record_allocs=10"))
        return;
    /* Nothing recorded yet: a message, and the file is neither created nor truncated. */
    dump();
    CHECK(!file_exists(g_file));
    CHECK_EQ(logcap.count, 1);
    CHECK_STREQ(logcap.body[0], "No alloc entries to write.");

    int fd = open(g_file, O_WRONLY | O_CREAT, 0644);
    CHECK(write(fd, "old\n", 4) == 4);
    close(fd);
    log_reset();
    dump();
    struct lines l;
    CHECK(read_lines(g_file, &l));
    CHECK_EQ(l.n, 1);
    if (l.n == 1)
        CHECK_STREQ(l.line[0], "old");
    lines_free(&l);
    CHECK_EQ(logcap.count, 1);

    /* Records are written once, then gone. */
    for (int i = 0; i < 5; i++)
        hs_md_record_malloc((void *)(uintptr_t)(0x100 + i), 1, 1);
    log_reset();
    dump_lines(&l);
    CHECK_EQ(l.n, 5);
    CHECK(l.n == 5 && strstr(l.line[4], ": malloc 0x104 1 1 ") != NULL);
    CHECK(l.n == 5 && strstr(l.line[0], ": malloc 0x100 1 1 ") != NULL);
    lines_free(&l);
    CHECK_EQ(logcap.count, 0);
    dump();
    CHECK_EQ(logcap.count, 1);
    CHECK_STREQ(logcap.body[0], "No alloc entries to write.");
    CHECK(read_lines(g_file, &l)); /* still the previous file */
    CHECK_EQ(l.n, 5);
    lines_free(&l);

    /* A write that is not requested does not happen. */
    hs_md_record_malloc((void *)0x1, 1, 1);
    unlink(g_file);
    hs_md_record_dump_if_requested();
    CHECK(!file_exists(g_file));

    /* errno survives a write. */
    raise(SIGRTMAX - 18);
    errno = 1234;
    hs_md_record_dump_if_requested();
    CHECK_EQ(errno, 1234);
    CHECK(file_exists(g_file));
}

static void test_full_table(void)
{
    for (size_t n = 1; n <= 3; n++) {
        check_context(fmt("full table, record_allocs=%zu", n));
        if (!setup(fmt("record_allocs=%zu", n)))
            return;
        for (size_t i = 0; i < n + 4; i++) {
            if (i == n - 1)
                CHECK_EQ(logcap.count, 0); /* not full before the last place is taken */
            if (i % 2)
                hs_md_record_malloc((void *)(0x10 + i), i, 1);
            else
                hs_md_record_free(hs_md_record_reserve(), (void *)(0x10 + i), 1);
        }
        CHECK(hs_md_record_reserve() == HS_MD_RECORD_NO_SLOT);
        CHECK_EQ(logcap.count, 1);
        CHECK_STREQ(logcap.body[0],
                    "Maximum number of records added, all new operations will be dropped.");
        struct lines l;
        dump_lines(&l);
        CHECK_EQ(l.n, n);
        for (int i = 0; i < l.n; i++) {
            char want[64];
            if (i % 2)
                snprintf(want, sizeof(want), ": malloc 0x%x %d 1 ", 0x10 + i, i);
            else
                snprintf(want, sizeof(want), ": free 0x%x 1 ", 0x10 + i);
            CHECK(strstr(l.line[i], want) != NULL);
        }
        lines_free(&l);
        /* Written and emptied: recording works again, and the message comes back when the
         * table fills up again. */
        log_reset();
        for (size_t i = 0; i < n; i++)
            hs_md_record_malloc((void *)0x99, 1, 1);
        hs_md_record_malloc((void *)0x98, 1, 1);
        CHECK_EQ(logcap.count, 1);
        dump_lines(&l);
        CHECK_EQ(l.n, n);
        CHECK(l.n > 0 && strstr(l.line[l.n - 1], ": malloc 0x99 1 1 ") != NULL);
        lines_free(&l);
    }
}

static void test_nofollow(void)
{
    check_context("O_NOFOLLOW");
    if (!setup("record_allocs"))
        return;
    char target[PATH_MAX + 16];
    snprintf(target, sizeof(target), "%s/target", g_dir);
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(write(fd, "keep\n", 5) == 5);
    close(fd);
    CHECK(symlink(target, g_file) == 0);
    hs_md_record_malloc((void *)0x10, 1, 1);
    hs_md_record_malloc((void *)0x20, 2, 2);
    dump();
    CHECK_EQ(logcap.count, 1);
    CHECK_STREQ(logcap.body[0], fmt("Cannot create record alloc file %s: Too many levels of "
                                    "symbolic links",
                                    g_file));
    struct lines l;
    CHECK(read_lines(target, &l));
    CHECK(l.n == 1 && strcmp(l.line[0], "keep") == 0);
    lines_free(&l);
    /* The records are still there. */
    CHECK(unlink(g_file) == 0);
    hs_md_record_malloc((void *)0x30, 3, 3);
    dump_lines(&l);
    CHECK_EQ(l.n, 3);
    CHECK(l.n == 3 && strstr(l.line[0], "malloc 0x10 1 1 "));
    CHECK(l.n == 3 && strstr(l.line[2], "malloc 0x30 3 3 "));
    lines_free(&l);
    unlink(target);

    /* A directory that does not exist: same message, other reason. */
    check_context("missing directory");
    char missing[PATH_MAX + 32];
    snprintf(missing, sizeof(missing), "%s/nodir/rec.txt", g_dir);
    struct hs_md_config cfg;
    CHECK(hs_md_config_parse(&cfg, fmt("record_allocs record_allocs_file=%s", missing)));
    CHECK(hs_md_record_init(&cfg));
    hs_md_record_malloc((void *)0x10, 1, 1);
    log_reset();
    dump();
    CHECK_EQ(logcap.count, 1);
    CHECK_STREQ(logcap.body[0],
                fmt("Cannot create record alloc file %s: No such file or directory", missing));
}

/* ---- threads ---- */

struct thread_arg {
    int index;
    int tid;
    uint64_t last_end;
};

static void *one_thread(void *p)
{
    struct thread_arg *a = p;
    a->tid = gettid();
    hs_md_record_malloc((void *)0xabc, 10, 1);
    hs_md_record_free(hs_md_record_reserve(), (void *)0xabc, 2);
    a->last_end = now_ns();
    return NULL;
}

static pthread_key_t g_other_key;

/* A destructor of another key that allocates: its record must come before thread_done. */
static void other_destructor(void *v)
{
    (void)v;
    hs_md_record_malloc((void *)0xdead, 1, 3);
}

static void *thread_with_destructor(void *p)
{
    struct thread_arg *a = p;
    a->tid = gettid();
    pthread_setspecific(g_other_key, (void *)1);
    hs_md_record_malloc((void *)0xbeef, 5, 4);
    return NULL;
}

static void *idle_thread(void *p)
{
    return p;
}

static void test_thread_done(void)
{
    check_context("thread_done");
    if (!setup("record_allocs"))
        return;
    struct thread_arg a = {0};
    pthread_t th;
    uint64_t t0 = now_ns();
    pthread_create(&th, NULL, one_thread, &a);
    pthread_join(th, NULL);
    uint64_t t1 = now_ns();
    struct lines l;
    dump_lines(&l);
    CHECK_EQ(l.n, 3);
    if (l.n == 3) {
        CHECK_LINE(l.line[0], fmt("%d: malloc 0xabc 10 1", a.tid), t0, t1);
        CHECK_LINE(l.line[1], fmt("%d: free 0xabc 2", a.tid), t0, t1);
        CHECK_LINE(l.line[2], fmt("%d: thread_done 0x0", a.tid), a.last_end, t1);
    }
    lines_free(&l);

    check_context("thread_done after other destructors");
    CHECK(pthread_key_create(&g_other_key, other_destructor) == 0);
    pthread_create(&th, NULL, thread_with_destructor, &a);
    pthread_join(th, NULL);
    dump_lines(&l);
    CHECK_EQ(l.n, 3);
    if (l.n == 3) {
        CHECK(starts_with(l.line[0], fmt("%d: malloc 0xbeef 5 4 ", a.tid)));
        CHECK(starts_with(l.line[1], fmt("%d: malloc 0xdead 1 3 ", a.tid)));
        CHECK(starts_with(l.line[2], fmt("%d: thread_done 0x0 ", a.tid)));
    }
    lines_free(&l);
    pthread_key_delete(g_other_key);

    check_context("no thread_done for a thread that recorded nothing");
    pthread_create(&th, NULL, idle_thread, NULL);
    pthread_join(th, NULL);
    dump_lines(&l);
    CHECK_EQ(l.n, 0);
    lines_free(&l);
}

/* 8 threads record while the main thread writes over and over: every record must appear in
 * exactly one write. Pointers encode (thread, operation). */
#define ADDERS 8
#define OPS 50000

static int g_adders_done;
static int g_adder_tid[ADDERS];

static void *adder(void *p)
{
    uintptr_t t = (uintptr_t)p;
    g_adder_tid[t] = gettid();
    for (uintptr_t i = 0; i < OPS; i++) {
        void *ptr = (void *)((t + 1) << 32 | i);
        uint64_t start = hs_md_record_now_ns();
        uint64_t slot;
        switch (i % 5) {
        case 0:
            hs_md_record_malloc(ptr, i, start);
            break;
        case 1:
            hs_md_record_calloc(ptr, 2, i, start);
            break;
        case 2:
            hs_md_record_memalign(ptr, 64, i, start);
            break;
        case 3:
            slot = hs_md_record_reserve();
            if (i % 7 == 0)
                sched_yield(); /* a reservation held across a slow operation */
            hs_md_record_free(slot, ptr, start);
            break;
        default:
            slot = hs_md_record_reserve();
            hs_md_record_realloc(slot, ptr, (void *)0x1, i, start);
            break;
        }
    }
    __atomic_fetch_add(&g_adders_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int tally(const struct lines *l, unsigned char *seen, int *thread_done, int *bad)
{
    for (int i = 0; i < l->n; i++) {
        int tid;
        char op[32];
        unsigned long long ptr;
        if (sscanf(l->line[i], "%d: %31s 0x%llx", &tid, op, &ptr) != 3) {
            (*bad)++;
            continue;
        }
        if (strcmp(op, "thread_done") == 0) {
            (*thread_done)++;
            continue;
        }
        unsigned long long t = (ptr >> 32) - 1, k = ptr & 0xffffffffull;
        if (t >= ADDERS || k >= OPS || g_adder_tid[t] != tid) {
            (*bad)++;
            continue;
        }
        if (seen[t * OPS + k] < 255)
            seen[t * OPS + k]++;
    }
    return l->n;
}

static void test_concurrent_adders(void)
{
    check_context("8 adders, writes in between");
    if (!setup("record_allocs=1000000"))
        return;
    unsigned char *seen = calloc(ADDERS * OPS, 1);
    int thread_done = 0, bad = 0, writes_with_records = 0;
    pthread_t th[ADDERS];
    __atomic_store_n(&g_adders_done, 0, __ATOMIC_RELAXED);
    for (uintptr_t t = 0; t < ADDERS; t++)
        pthread_create(&th[t], NULL, adder, (void *)t);
    struct lines l;
    while (__atomic_load_n(&g_adders_done, __ATOMIC_ACQUIRE) < ADDERS) {
        dump_lines(&l);
        if (l.n > 0)
            writes_with_records++;
        tally(&l, seen, &thread_done, &bad);
        lines_free(&l);
    }
    for (int t = 0; t < ADDERS; t++)
        pthread_join(th[t], NULL);
    dump_lines(&l);
    tally(&l, seen, &thread_done, &bad);
    lines_free(&l);

    int missing = 0, duplicated = 0;
    for (size_t i = 0; i < ADDERS * OPS; i++) {
        missing += seen[i] == 0;
        duplicated += seen[i] > 1;
    }
    CHECK_EQ(missing, 0);
    CHECK_EQ(duplicated, 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(thread_done, ADDERS);
    CHECK(writes_with_records >= 2);
    printf("concurrent adders: %d writes had records\n", writes_with_records);
    /* No "Maximum number" message; only "No alloc entries" ones. */
    for (int i = 0; i < logcap.count && i < MAX_LOG; i++)
        CHECK_STREQ(logcap.body[i], "No alloc entries to write.");
    free(seen);
}

/* ---- fork ---- */

static int g_fork_stop;

static void *fork_adder(void *p)
{
    (void)p;
    for (uintptr_t i = 0; !__atomic_load_n(&g_fork_stop, __ATOMIC_RELAXED); i++) {
        hs_md_record_malloc((void *)i, 1, 1);
        hs_md_record_free(hs_md_record_reserve(), (void *)i, 1);
        if (i % 64 == 0) /* keep the tables the children write small */
            usleep(20);
    }
    return NULL;
}

/* The shim's fork handlers, as its start-up registers them (once). */
static void register_fork_handlers(void)
{
    static bool registered;
    if (!registered)
        pthread_atfork(hs_md_record_lock, hs_md_record_unlock, hs_md_record_unlock);
    registered = true;
}

static void test_fork(void)
{
    check_context("fork");
    if (!setup("record_allocs=4000000"))
        return;
    register_fork_handlers();
    int parent_tid = gettid();
    hs_md_record_malloc((void *)0x1, 1, 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        hs_md_record_malloc((void *)0x2, 2, 2);
        dump();
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct lines l;
    CHECK(read_lines(g_file, &l));
    CHECK_EQ(l.n, 2);
    if (l.n == 2) {
        CHECK(starts_with(l.line[0], fmt("%d: malloc 0x1 1 1 ", parent_tid)));
        CHECK(starts_with(l.line[1], fmt("%d: malloc 0x2 2 2 ", pid)));
    }
    lines_free(&l);
    dump_lines(&l); /* the parent still has its own record */
    CHECK_EQ(l.n, 1);
    lines_free(&l);

    /* Forks while other threads record: the child must be able to write (no hang). */
    check_context("fork with concurrent adders");
    pthread_t th[2];
    __atomic_store_n(&g_fork_stop, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, fork_adder, NULL);
    int ok = 0;
    for (int i = 0; i < 20; i++) {
        pid = fork();
        if (pid == 0) {
            alarm(20);
            hs_md_record_malloc((void *)0x2, 2, 2);
            raise(SIGRTMAX - 18);
            hs_md_record_dump_if_requested();
            hs_md_record_malloc((void *)0x3, 2, 2);
            raise(SIGRTMAX - 18);
            hs_md_record_dump_if_requested();
            struct lines cl;
            bool good = read_lines(g_file, &cl) && cl.n == 1 && strstr(cl.line[0], "malloc 0x3 ");
            _exit(good ? 0 : 1);
        }
        ok += waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        dump(); /* keep the table from filling up */
    }
    __atomic_store_n(&g_fork_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(ok, 20);
}

/* A fork waits only for the places handed out since the last fork or write, not for the
 * whole table again (each fork of a program with a full table of 8,000,000 places had cost a
 * pass over 384 MB); the child still gets every record. */
static void test_fork_checks_new_places(void)
{
    check_context("fork waits for the new places only");
    if (!setup("record_allocs=100000"))
        return;
    register_fork_handlers();
    for (uintptr_t i = 1; i <= 1000; i++)
        hs_md_record_malloc((void *)i, 1, 1);
    int status;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(hs_md_record_fork_checked(), 1000);
    pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_EQ(hs_md_record_fork_checked(), 0);
    for (uintptr_t i = 1001; i <= 1010; i++)
        hs_md_record_malloc((void *)i, 1, 1);
    hs_md_record_free(hs_md_record_reserve(), (void *)0x1, 1);
    pid = fork();
    if (pid == 0) {
        /* The child has all 1011 records. */
        alarm(20);
        struct lines cl;
        dump_lines(&cl);
        bool good = cl.n == 1011 && strstr(cl.line[1010], ": free 0x1 ");
        _exit(good ? 0 : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(hs_md_record_fork_checked(), 11);
    /* A write empties the table: the places handed out after it are new again. */
    struct lines l;
    dump_lines(&l);
    CHECK_EQ(l.n, 1011);
    lines_free(&l);
    for (uintptr_t i = 1; i <= 5; i++)
        hs_md_record_malloc((void *)i, 1, 1);
    pid = fork();
    if (pid == 0) {
        alarm(20);
        struct lines cl;
        dump_lines(&cl);
        _exit(cl.n == 5 ? 0 : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(hs_md_record_fork_checked(), 5);
}

static void test_on_exit_and_verbose(void)
{
    check_context("record_allocs_on_exit");
    if (!setup("record_allocs record_allocs_on_exit"))
        return;
    hs_md_record_malloc((void *)0x77, 7, 7);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s.%d", g_file, (int)getpid());
    unlink(path);
    hs_md_record_write_at_exit();
    struct lines l;
    CHECK(read_lines(path, &l));
    CHECK(l.n == 1 && starts_with(l.line[0], fmt("%d: malloc 0x77 7 7 ", gettid())));
    lines_free(&l);
    CHECK(!file_exists(g_file));
    unlink(path);

    check_context("no exit file without record_allocs_on_exit");
    if (!setup("record_allocs"))
        return;
    hs_md_record_malloc((void *)0x77, 7, 7);
    hs_md_record_write_at_exit();
    CHECK(!file_exists(path));
    CHECK_EQ(logcap.count, 0);

    check_context("verbose");
    if (!setup("record_allocs verbose"))
        return;
    CHECK_EQ(logcap.count, 1);
    CHECK_STREQ(logcap.body[0], fmt("%s: Run: 'kill -%d %d' to dump the allocation records.",
                                    hs_log_program_name(), SIGRTMAX - 18, (int)getpid()));
    CHECK_EQ(SIGRTMAX - 18, 46);
}

/* The table is reserved on the first record, and reserving does not commit it. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static void test_lazy_reservation(void)
{
    check_context("lazy reservation");
    if (!setup("record_allocs=50000000"))
        return;
    long vm0 = status_kb("VmSize"), rss0 = status_kb("RssAnon");
    hs_md_record_malloc((void *)0x1, 1, 1);
    long vm1 = status_kb("VmSize"), rss1 = status_kb("RssAnon");
    CHECK(vm1 - vm0 >= 50000000L * 48 / 1024); /* reserved now */
    CHECK(rss1 - rss0 < 8 * 1024);             /* but not committed */
    printf("lazy reservation: VmSize +%ld kB, RssAnon +%ld kB\n", vm1 - vm0, rss1 - rss0);
}

/* ---- cost ---- */

struct bench_arg {
    long n;
    double ns_per_record;
};

static void *bench_thread(void *p)
{
    struct bench_arg *a = p;
    hs_md_record_malloc((void *)0x1, 1, 1); /* registers the thread */
    uint64_t t0 = now_ns();
    for (long i = 0; i < a->n; i++)
        hs_md_record_malloc((void *)(uintptr_t)i, 32, t0);
    a->ns_per_record = (double)(now_ns() - t0) / (double)a->n;
    return NULL;
}

static void *bench_free_thread(void *p)
{
    struct bench_arg *a = p;
    uint64_t t0 = now_ns();
    for (long i = 0; i < a->n; i++)
        hs_md_record_free(hs_md_record_reserve(), (void *)(uintptr_t)i, t0);
    a->ns_per_record = (double)(now_ns() - t0) / (double)a->n;
    return NULL;
}

static void *bench_clock_thread(void *p)
{
    struct bench_arg *a = p;
    uint64_t t0 = now_ns(), sum = 0;
    for (long i = 0; i < a->n; i++)
        sum += hs_md_record_now_ns();
    a->ns_per_record = (double)(now_ns() - t0) / (double)a->n;
    return (void *)(uintptr_t)(sum & 1);
}

static double run_bench(void *(*fn)(void *), int threads, long n)
{
    pthread_t th[8];
    struct bench_arg a[8];
    for (int i = 0; i < threads; i++) {
        a[i].n = n;
        pthread_create(&th[i], NULL, fn, &a[i]);
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += a[i].ns_per_record;
    }
    return sum / threads;
}

/* Best of `reps` runs on a table whose pages are already committed (a first run faults them
 * in; writes go to /dev/null and empty the table between runs). */
static double best_of(void *(*fn)(void *), int threads, long n, int reps)
{
    double best = 1e9;
    for (int r = 0; r <= reps; r++) {
        double ns = run_bench(fn, threads, n);
        if (r > 0 && ns < best)
            best = ns;
        dump();
    }
    return best;
}

static void bench(long n, int reps)
{
    struct hs_md_config cfg;
    char opts[128];
    snprintf(opts, sizeof(opts), "record_allocs=%ld record_allocs_file=/dev/null", 2 * n + 64);
    if (!CHECK(hs_md_config_parse(&cfg, opts)) || !CHECK(hs_md_record_init(&cfg)))
        return;
    printf("clock_gettime alone:            %6.1f ns\n", best_of(bench_clock_thread, 1, n, reps));
    for (int threads = 1; threads <= 2; threads++) {
        printf("malloc record, %d thread(s):     %6.1f ns\n", threads,
               best_of(bench_thread, threads, n, reps));
        printf("reserve+free, %d thread(s):      %6.1f ns\n", threads,
               best_of(bench_free_thread, threads, n, reps));
    }
    /* Full table: the drop path. */
    snprintf(opts, sizeof(opts), "record_allocs=1 record_allocs_file=/dev/null");
    if (!CHECK(hs_md_config_parse(&cfg, opts)) || !CHECK(hs_md_record_init(&cfg)))
        return;
    hs_md_record_malloc(NULL, 0, 0);
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double ns = run_bench(bench_thread, 1, n);
        best = ns < best ? ns : best;
    }
    printf("dropped record (table full):    %6.1f ns\n", best);
}

int main(int argc, char **argv)
{
    hs_log_init("malloc_debug");
    hs_log_set_sink(log_sink, NULL);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_file, sizeof(g_file), "%s/record_allocs.txt", g_dir);

    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        bench(argc > 2 ? atol(argv[2]) : 1000000, argc > 3 ? atoi(argv[3]) : 5);
    } else {
        test_line_formats();
        test_dump_clears_and_empty();
        test_full_table();
        test_nofollow();
        test_thread_done();
        test_concurrent_adders();
        test_fork();
        test_fork_checks_new_places();
        test_on_exit_and_verbose();
        test_lazy_reservation();
        check_context("cost");
        bench(100000, 1);
    }
    unlink(g_file);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s.%d", g_file, (int)getpid());
    unlink(path);
    rmdir(g_dir);
    return check_report();
}
