/* test_proc_maps.c: the /proc/<pid>/maps parser (src/common/proc_maps.c).
 *
 * Synthetic maps text (odd paths, " (deleted)", pseudo paths, malformed lines, a path longer
 * than PATH_MAX, no final newline) is parsed whole, in every chunk size from 1 byte up, and
 * through a pipe written a few bytes at a time; every way must give the same entries. Then the
 * real /proc/self/maps is checked against dl_iterate_phdr.
 */
#define _GNU_SOURCE
#include "check.h"
#include "maps_snapshot.h"
#include <sys/mman.h>
#include "proc_maps.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* One parsed entry, copied (the parser reuses its struct). */
struct rec {
    uintptr_t start, end, load_base;
    uint64_t offset, inode;
    unsigned perms;
    dev_t dev;
    bool deleted;
    char *path;
};

struct recs {
    struct rec v[64];
    size_t n;
    size_t stop_at; /* return 7 when this many entries have been seen (0: never) */
};

static int collect(const struct hs_map *m, void *arg)
{
    struct recs *r = arg;
    if (r->n < 64) {
        struct rec *e = &r->v[r->n];
        e->start = m->start;
        e->end = m->end;
        e->load_base = m->load_base;
        e->offset = m->offset;
        e->inode = m->inode;
        e->perms = m->perms;
        e->dev = m->dev;
        e->deleted = m->deleted;
        e->path = strdup(m->path);
    }
    r->n++;
    return r->stop_at && r->n == r->stop_at ? 7 : 0;
}

static void recs_free(struct recs *r)
{
    for (size_t i = 0; i < r->n && i < 64; i++)
        free(r->v[i].path);
    r->n = 0;
}

static bool recs_equal(const struct recs *a, const struct recs *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n && i < 64; i++) {
        const struct rec *x = &a->v[i], *y = &b->v[i];
        if (x->start != y->start || x->end != y->end || x->load_base != y->load_base ||
            x->offset != y->offset || x->inode != y->inode || x->perms != y->perms ||
            x->dev != y->dev || x->deleted != y->deleted || strcmp(x->path, y->path) != 0)
            return false;
    }
    return true;
}

static char *g_text;
static size_t g_text_len;
static char g_long_path[PATH_MAX + 1000];

/* Builds the synthetic maps text. */
static void make_text(void)
{
    /* A path longer than PATH_MAX: "/long/xxxx...". */
    memset(g_long_path, 'x', sizeof(g_long_path) - 1);
    memcpy(g_long_path, "/long/", 6);
    g_long_path[sizeof(g_long_path) - 1] = '\0';

    size_t cap = 16384;
    g_text = malloc(cap);
    int n = snprintf(
        g_text, cap,
        "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n"
        "00651000-00652000 r--p 00051000 08:02 173521      /usr/bin/dbus-daemon\n"
        "00652000-00655000 rw-p 00052000 08:02 173521      /usr/bin/dbus-daemon\n"
        "00e03000-00e24000 rw-p 00000000 00:00 0                                  [heap]\n"
        "7f0000000000-7f0000001000 r--p 00000000 fd:01 42   /tmp/dir with spaces/lib x.so\n"
        "7f0000001000-7f0000003000 r-xp 00001000 fd:01 42   /tmp/dir with spaces/lib x.so\n"
        "7f0000003000-7f0000004000 rw-p 00000000 00:00 0 \n"
        "7f0000004000-7f0000005000 rw-p 00003000 fd:01 42   /tmp/dir with spaces/lib x.so\n"
        "7f0000010000-7f0000011000 r-xs 00002000 103:0a 77  /gone/lib.so (deleted)\n"
        "7f0000020000-7f0000021000 ---p 00000000 00:00 0\n"
        "garbage line here\n"
        "\n"
        "7f0000030000-7f0000031000 rwzp 00000000 00:00 0    [bad perms]\n"
        "7f0000032000-7f0000031000 rw-p 00000000 00:00 0    [end before start]\n"
        "7f0000033000-7f0000034000 rw-p 00000000 00:00\n"
        "7f0000035000-7f0000036000 rw-p 00000000 00:00 0    [anon:named region]\n"
        "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
        "7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0                          [vdso]\n"
        "7f0000040000-7f0000041000 r--p 00000000 fd:01 99   %s\n"
        "11111111111111111-7f0000042000 r--p 00000000 fd:01 99   /too/many/digits\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n"
        "7f0000050000-7f0000051000 r--p 00001000 fd:01 100  /no/newline (deleted) x",
        g_long_path);
    g_text_len = (size_t)n;
}

/* Parses text in chunks of `chunk` bytes. */
static int parse_chunked(const char *text, size_t len, size_t chunk, struct recs *out)
{
    struct hs_map scratch;
    struct hs_maps_parser p;
    hs_maps_parser_init(&p, &scratch);
    for (size_t i = 0; i < len; i += chunk) {
        size_t n = len - i < chunk ? len - i : chunk;
        int r = hs_maps_parser_feed(&p, text + i, n, collect, out);
        if (r != 0)
            return r;
    }
    return hs_maps_parser_finish(&p, collect, out);
}

static const struct rec *find_path(const struct recs *r, const char *path)
{
    for (size_t i = 0; i < r->n && i < 64; i++)
        if (strcmp(r->v[i].path, path) == 0)
            return &r->v[i];
    return NULL;
}

static void test_synthetic(void)
{
    check_context("synthetic");
    static struct recs whole;
    CHECK_EQ(parse_chunked(g_text, g_text_len, g_text_len, &whole), 0);
    CHECK_EQ(whole.n, 16);

    const struct rec *e = &whole.v[0];
    CHECK_EQ(e->start, 0x400000);
    CHECK_EQ(e->end, 0x452000);
    CHECK_EQ(e->offset, 0);
    CHECK_EQ(e->perms, HS_MAP_READ | HS_MAP_EXEC | HS_MAP_PRIVATE);
    CHECK_EQ(e->dev, makedev(8, 2));
    CHECK_EQ(e->inode, 173521);
    CHECK_EQ(e->load_base, 0x400000);
    CHECK(!e->deleted);
    CHECK_STREQ(e->path, "/usr/bin/dbus-daemon");
    CHECK_EQ(whole.v[1].load_base, 0x400000);
    CHECK_EQ(whole.v[1].perms, HS_MAP_READ | HS_MAP_PRIVATE);
    CHECK_EQ(whole.v[2].load_base, 0x400000);
    CHECK_EQ(whole.v[2].offset, 0x52000);
    CHECK_EQ(whole.v[2].perms, HS_MAP_READ | HS_MAP_WRITE | HS_MAP_PRIVATE);

    CHECK_STREQ(whole.v[3].path, "[heap]");
    CHECK_EQ(whole.v[3].inode, 0);
    CHECK_EQ(whole.v[3].load_base, 0xe03000);

    /* Paths with spaces; the anonymous mapping between two mappings of the file does not end
     * the run, so load_base stays the offset-0 mapping's start. */
    CHECK_STREQ(whole.v[4].path, "/tmp/dir with spaces/lib x.so");
    CHECK_STREQ(whole.v[5].path, "/tmp/dir with spaces/lib x.so");
    CHECK_EQ(whole.v[5].load_base, 0x7f0000000000);
    CHECK_STREQ(whole.v[6].path, "");
    CHECK_EQ(whole.v[6].load_base, 0x7f0000003000);
    CHECK_EQ(whole.v[7].load_base, 0x7f0000000000);
    CHECK_EQ(whole.v[7].dev, makedev(0xfd, 1));

    e = &whole.v[8];
    CHECK_STREQ(e->path, "/gone/lib.so");
    CHECK(e->deleted);
    CHECK_EQ(e->perms, HS_MAP_READ | HS_MAP_EXEC); /* shared */
    CHECK_EQ(e->dev, makedev(0x103, 0xa));
    CHECK_EQ(e->load_base, 0x7f0000010000 - 0x2000);

    CHECK_EQ(whole.v[9].perms, HS_MAP_PRIVATE);
    CHECK_STREQ(whole.v[9].path, "");
    /* Malformed lines are skipped: garbage, empty, bad perms, end < start, no inode. */
    CHECK_STREQ(whole.v[10].path, "[anon:named region]");
    CHECK_STREQ(whole.v[11].path, "[stack]");
    CHECK_STREQ(whole.v[12].path, "[vdso]");

    /* The long path is truncated to PATH_MAX - 1 characters. */
    e = &whole.v[13];
    CHECK_EQ(e->start, 0x7f0000040000);
    CHECK_EQ(strlen(e->path), PATH_MAX - 1);
    CHECK(strncmp(e->path, g_long_path, PATH_MAX - 1) == 0);

    /* The line with too many digits is dropped; the vsyscall line parses. */
    e = &whole.v[14];
    CHECK_STREQ(e->path, "[vsyscall]");
    CHECK_EQ(e->start, 0xffffffffff600000ull);
    CHECK_EQ(e->perms, HS_MAP_EXEC | HS_MAP_PRIVATE);

    /* The last line has no newline; " (deleted)" not at the end is part of the name. */
    const struct rec *last = find_path(&whole, "/no/newline (deleted) x");
    CHECK(last == &whole.v[15]);
    CHECK(last && !last->deleted && last->offset == 0x1000);

    /* Every chunk size gives the same entries. */
    bool all_same = true;
    for (size_t chunk = 1; chunk <= g_text_len; chunk += chunk < 200 ? 1 : 97) {
        static struct recs r;
        parse_chunked(g_text, g_text_len, chunk, &r);
        if (!recs_equal(&whole, &r)) {
            all_same = false;
            fprintf(stderr, "chunk %zu differs\n", chunk);
        }
        recs_free(&r);
    }
    CHECK(all_same);
    recs_free(&whole);
}

static void test_last_line_and_stop(void)
{
    check_context("unterminated last line, early stop");
    static struct recs r;
    const char *text = "1000-2000 r--p 00000000 fd:01 100  /no/newline (deleted) x";
    CHECK_EQ(parse_chunked(text, strlen(text), 7, &r), 0);
    CHECK_EQ(r.n, 1);
    CHECK_STREQ(r.v[0].path, "/no/newline (deleted) x");
    CHECK(!r.v[0].deleted);
    recs_free(&r);

    text = "1000-2000 r--p 00000000 00:00 0";
    CHECK_EQ(parse_chunked(text, strlen(text), 3, &r), 0);
    CHECK_EQ(r.n, 1);
    CHECK_STREQ(r.v[0].path, "");
    recs_free(&r);

    /* Finishing an empty parser, or one after a newline, delivers nothing. */
    CHECK_EQ(parse_chunked("", 0, 1, &r), 0);
    CHECK_EQ(r.n, 0);
    text = "1000-2000 r--p 00000000 00:00 0 [x]\n";
    CHECK_EQ(parse_chunked(text, strlen(text), 5, &r), 0);
    CHECK_EQ(r.n, 1);
    recs_free(&r);

    /* The callback's value stops the parse and is returned. */
    r.stop_at = 3;
    CHECK_EQ(parse_chunked(g_text, g_text_len, 13, &r), 7);
    CHECK_EQ(r.n, 3);
    recs_free(&r);
    r.stop_at = 0;

    /* Exactly " (deleted)" as a whole name is not a suffix. */
    text = "1000-2000 r--p 00000000 fd:01 5  (deleted)\n";
    parse_chunked(text, strlen(text), 100, &r);
    CHECK_EQ(r.n, 1);
    CHECK_STREQ(r.v[0].path, "(deleted)");
    recs_free(&r);

    /* Same file mapped again at offset 0 starts a new run. */
    text = "1000-2000 r--p 00000000 fd:01 5 /a\n"
           "2000-3000 r-xp 00001000 fd:01 5 /a\n"
           "8000-9000 r--p 00000000 fd:01 5 /a\n"
           "9000-a000 r-xp 00001000 fd:01 5 /a\n"
           "a000-b000 r-xp 00001000 fd:01 6 /b\n";
    parse_chunked(text, strlen(text), 100, &r);
    CHECK_EQ(r.n, 5);
    CHECK_EQ(r.v[1].load_base, 0x1000);
    CHECK_EQ(r.v[3].load_base, 0x8000);
    CHECK_EQ(r.v[4].load_base, 0x9000);
    recs_free(&r);
}

/* Writes the text into a pipe a few bytes at a time. */
static void *pipe_writer(void *arg)
{
    int fd = *(int *)arg;
    for (size_t i = 0; i < g_text_len; i += 3) {
        size_t n = g_text_len - i < 3 ? g_text_len - i : 3;
        if (write(fd, g_text + i, n) != (ssize_t)n)
            break;
        if (i % 300 == 0)
            usleep(100);
    }
    close(fd);
    return NULL;
}

static void test_fd(void)
{
    check_context("pipe");
    static struct recs whole, piped;
    parse_chunked(g_text, g_text_len, g_text_len, &whole);
    int fds[2];
    CHECK(pipe(fds) == 0);
    pthread_t t;
    pthread_create(&t, NULL, pipe_writer, &fds[1]);
    CHECK_EQ(hs_maps_foreach_fd(fds[0], collect, &piped), 0);
    pthread_join(t, NULL);
    close(fds[0]);
    CHECK(recs_equal(&whole, &piped));
    recs_free(&whole);
    recs_free(&piped);

    /* A read error is reported as -1. */
    CHECK_EQ(hs_maps_foreach_fd(-1, collect, &piped), (unsigned long long)-1);
}

struct object {
    const char *name_part;
    uintptr_t addr; /* dlpi_addr */
    bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct object *o = arg;
    if (o->found)
        return 0;
    if ((o->name_part[0] == '\0' && info->dlpi_name[0] == '\0') ||
        (o->name_part[0] && strstr(info->dlpi_name, o->name_part))) {
        o->addr = info->dlpi_addr;
        o->found = true;
    }
    return 0;
}

static int count_cb(const struct hs_map *m, void *arg)
{
    size_t *n = arg;
    if (m->start < m->end)
        (*n)++;
    return 0;
}

__attribute__((noinline)) int proc_maps_test_marker(int x)
{
    return x * 3 + 1;
}

static void test_real(void)
{
    check_context("/proc/self/maps");
    size_t n = 0;
    CHECK_EQ(hs_maps_foreach(0, count_cb, &n), 0);
    CHECK(n > 5);
    size_t n2 = 0;
    CHECK_EQ(hs_maps_foreach(getpid(), count_cb, &n2), 0);
    CHECK(n2 > 5);

    static struct hs_map m;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    CHECK(len > 0);
    exe[len > 0 ? len : 0] = '\0';

    struct object self = {"", 0, false};
    dl_iterate_phdr(find_object, &self);
    CHECK(self.found);
    CHECK(hs_maps_find(0, (uintptr_t)&proc_maps_test_marker, &m));
    CHECK_STREQ(m.path, exe);
    CHECK(m.perms & HS_MAP_EXEC);
    CHECK(m.inode != 0);
    if (self.addr != 0) /* PIE: the load base is where the ELF header is */
        CHECK_EQ(m.load_base, self.addr);

    struct object libc = {"libc.so", 0, false};
    dl_iterate_phdr(find_object, &libc);
    CHECK(libc.found);
    CHECK(hs_maps_find(getpid(), (uintptr_t)&getpid, &m));
    CHECK(strstr(m.path, "libc.so") != NULL);
    CHECK(m.perms & HS_MAP_EXEC);
    CHECK_EQ(m.load_base, libc.addr);

    int local = 0;
    CHECK(hs_maps_find(0, (uintptr_t)&local, &m));
    CHECK_STREQ(m.path, "[stack]");
    CHECK(m.perms & HS_MAP_WRITE);

    CHECK(!hs_maps_find(0, 0, &m));
    errno = 0;
    CHECK_EQ(hs_maps_foreach(0x7ffffff0, count_cb, &n), (unsigned long long)-1);
    CHECK_EQ(errno, ENOENT);
    CHECK(!hs_maps_find(0x7ffffff0, (uintptr_t)&local, &m));
}

/* A snapshot answers as hs_maps_find does: for the first, last and a middle byte of every
 * mapping of a file, one byte before the first and after the last, and after a re-read. */
static int snapshot_cb(const struct hs_map *m, void *arg)
{
    const struct hs_maps_snapshot *s = arg;
    static struct hs_map got;
    /* Anonymous mappings move under a live process (the arena's own chunks merge with their
     * neighbours, the stack grows); the files' mappings stay put. */
    if (m->inode == 0)
        return 0;
    uintptr_t probes[] = {m->start, m->end - 1, m->start + (m->end - m->start) / 2};
    for (size_t i = 0; i < 3; i++) {
        CHECK(hs_maps_snapshot_find(s, probes[i], &got));
        CHECK_EQ(got.start, m->start);
        CHECK_EQ(got.end, m->end);
        CHECK_EQ(got.offset, m->offset);
        CHECK_EQ(got.load_base, m->load_base);
        CHECK_EQ(got.inode, m->inode);
        CHECK_EQ(got.perms, m->perms);
        CHECK_EQ(got.deleted, m->deleted);
        CHECK_STREQ(got.path, m->path);
    }
    return 0;
}

static void test_snapshot(void)
{
    static struct hs_arena arena = HS_ARENA_INIT;
    struct hs_maps_snapshot s;
    hs_maps_snapshot_init(&s, &arena);
    static struct hs_map m;
    CHECK(!hs_maps_snapshot_find(&s, (uintptr_t)&test_snapshot, &m)); /* empty */
    for (int round = 0; round < 2; round++) {
        CHECK(hs_maps_snapshot_read(&s, 0));
        CHECK(s.count > 5);
        /* Mappings made after the snapshot are not in it; the rest must agree. */
        void *late = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(late != MAP_FAILED);
        CHECK(hs_maps_find(0, (uintptr_t)&test_snapshot, &m));
        CHECK(hs_maps_snapshot_find(&s, (uintptr_t)&test_snapshot, &m));
        CHECK(m.path[0] == '/');
        CHECK(!hs_maps_snapshot_find(&s, 0, &m));
        CHECK(!hs_maps_snapshot_find(&s, UINTPTR_MAX, &m));
        munmap(late, 4096);
        hs_maps_foreach(0, snapshot_cb, &s);
    }
    hs_maps_snapshot_free(&s);
    CHECK_EQ(s.count, 0);
    CHECK(!hs_maps_snapshot_find(&s, (uintptr_t)&test_snapshot, &m));
}

int main(void)
{
    make_text();
    test_synthetic();
    test_last_line_and_stop();
    test_fd();
    test_real();
    test_snapshot();
    free(g_text);
    return check_report();
}
