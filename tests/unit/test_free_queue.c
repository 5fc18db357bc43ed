/* test_free_queue.c: free_track's queue of freed blocks (src/malloc_debug/free_queue.c):
 * first-in first-out eviction of a small queue, each evicted block checked then really freed,
 * a write after free reported with its bytes and free backtrace, verify_all at exit leaving
 * blocks queued, the fill_on_free limit, free backtraces kept in the ring (no table record
 * per free) or, deeper ones and guarded blocks', as table records, and threads pushing into
 * a split queue (the sanitizer
 * leg runs this under ThreadSanitizer). One part per run: `test_free_queue fifo|threads`.
 *
 * The test stands in for the rest of the shim: hs_md_backing_free records what the queue
 * really frees, the report frame is the log's, and log lines go to a buffer.
 */
#define _GNU_SOURCE
#include "check.h"

#include "backtrace_table.h"
#include "debug_state.h"
#include "free_queue.h"
#include "guarded.h"
#include "log.h"
#include "report.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- What the rest of the shim provides ---- */

static pthread_mutex_t g_freed_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_freed[4096];
static struct hs_md_bt *g_freed_bt[4096]; /* the free backtrace each was given back with */
static size_t g_num_freed;

void hs_md_backing_free(void *orig, struct hs_md_bt *free_bt)
{
    /* The queue releases its own reference: free_bt is only compared, never read. */
    pthread_mutex_lock(&g_freed_lock);
    if (g_num_freed < sizeof(g_freed) / sizeof(*g_freed)) {
        g_freed_bt[g_num_freed] = free_bt;
        g_freed[g_num_freed++] = orig;
    }
    pthread_mutex_unlock(&g_freed_lock);
    /* Not given back to malloc: a reused address would look queued again. Freed at exit. */
}

/* Not expected here: the tests have memory for every table record. */
void hs_md_note_out_of_memory(void)
{
    abort();
}

void hs_md_report_begin(void)
{
    hs_log_begin();
}

void hs_md_report_end(void)
{
    hs_log_end();
}

static char g_log[16384];

static void sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    size_t used = strlen(g_log);
    if (used + len < sizeof(g_log)) {
        memcpy(g_log + used, line, len);
        g_log[used + len] = '\0';
    }
}

/* ---- Helpers ---- */

#define BLOCK 64

/* Every block made, to free at exit (queued ones included). */
static void *g_made[4096];
static size_t g_num_made;

/* A freed block as the shim queues it: filled with the free value. */
static unsigned char *freed_block(void)
{
    unsigned char *p = malloc(BLOCK);
    memset(p, hs_md.cfg.fill_free_value, BLOCK);
    pthread_mutex_lock(&g_freed_lock);
    g_made[g_num_made++] = p;
    pthread_mutex_unlock(&g_freed_lock);
    return p;
}

static bool was_freed(const void *p)
{
    for (size_t i = 0; i < g_num_freed; i++)
        if (g_freed[i] == p)
            return true;
    return false;
}

static bool queued(const void *p)
{
    struct hs_md_bt *bt = NULL;
    bool found = hs_md_free_queue_find(p, &bt);
    hs_md_bt_release(bt);
    return found;
}

static void test_fifo_and_write_after_free(void)
{
    check_context("a queue of 4: the oldest goes first, checked then freed");
    hs_md_free_queue_init(4, HS_MD_FREE_QUEUE_INLINE_FRAMES);
    unsigned char *b[6];
    static const uintptr_t frames[] = {0x1000, 0x2000};
    size_t records = hs_md_bt_count();
    for (int i = 0; i < 4; i++) {
        b[i] = freed_block();
        hs_md_free_queue_push(b[i], b[i], BLOCK, frames, 2, NULL);
    }
    for (int i = 0; i < 4; i++)
        CHECK(queued(b[i]));
    CHECK_EQ(g_num_freed, 0);
    /* The frames are kept in the ring: no backtrace table record per free. */
    CHECK_EQ(hs_md_bt_count(), records);
    struct hs_md_bt *bt = NULL;
    CHECK(hs_md_free_queue_find(b[2], &bt) && bt && bt->num_frames == 2);
    CHECK(bt && bt->frames[0] == 0x1000 && bt->frames[1] == 0x2000);
    hs_md_bt_release(bt);

    b[1][3] = 0x41; /* a write after free, into the second oldest */
    b[4] = freed_block();
    hs_md_free_queue_push(b[4], b[4], BLOCK, NULL, 0, NULL);
    CHECK_EQ(g_num_freed, 1);
    CHECK(was_freed(b[0]) && !queued(b[0]));
    CHECK(g_freed_bt[0] == NULL);
    CHECK_STREQ(g_log, ""); /* b[0] was intact */

    b[5] = freed_block();
    hs_md_free_queue_push(b[5], b[5], BLOCK, NULL, 0, NULL);
    CHECK_EQ(g_num_freed, 2);
    CHECK(!queued(b[1]));
    char want[128];
    snprintf(want, sizeof(want), "+++ ALLOCATION %p USED AFTER FREE\n", (void *)b[1]);
    CHECK(strstr(g_log, want) != NULL);
    CHECK(strstr(g_log, "  allocation[3] = 0x41 (expected 0xef)\n") != NULL);
    /* b[1]'s two frames, taken along from the ring when b[5] reused its slot. */
    CHECK(strstr(g_log, "Backtrace at time of free:\n") != NULL);
    CHECK(strstr(g_log, "#00  pc 0000000000001000") != NULL);
    CHECK(strstr(g_log, "#01  pc 0000000000002000") != NULL);
    CHECK(strstr(g_log, "#02") == NULL);
    CHECK(strstr(g_log, "allocation[4]") == NULL);

    check_context("verify_all reports a queued block and keeps it queued");
    g_log[0] = '\0';
    b[3][BLOCK - 1] = 0;
    hs_md_free_queue_verify_all();
    snprintf(want, sizeof(want), "+++ ALLOCATION %p USED AFTER FREE\n", (void *)b[3]);
    CHECK(strstr(g_log, want) != NULL);
    CHECK(strstr(g_log, "  allocation[63] = 0x00 (expected 0xef)\n") != NULL);
    CHECK(queued(b[3]) && queued(b[2]) && queued(b[4]) && queued(b[5]));
    CHECK_EQ(g_num_freed, 2);

    check_context("only the first fill_on_free bytes are checked");
    g_log[0] = '\0';
    hs_md.cfg.fill_on_free_bytes = 8;
    b[2][20] = 0; /* past the checked bytes: no report */
    hs_md_free_queue_verify_all();
    CHECK(strstr(g_log, "allocation[20]") == NULL);
    CHECK(strstr(g_log, "allocation[63]") == NULL);
    hs_md.cfg.fill_on_free_bytes = SIZE_MAX;
}

static void test_backtrace_records(void)
{
    check_context("a backtrace deeper than a ring's row is a table record");
    g_log[0] = '\0';
    uintptr_t deep[HS_MD_FREE_QUEUE_INLINE_FRAMES + 4];
    for (size_t i = 0; i < sizeof(deep) / sizeof(*deep); i++)
        deep[i] = 0x10000 + 0x100 * i;
    size_t records = hs_md_bt_count();
    unsigned char *d = freed_block();
    hs_md_free_queue_push(d, d, BLOCK, deep, sizeof(deep) / sizeof(*deep), NULL);
    CHECK_EQ(hs_md_bt_count(), records + 1);
    struct hs_md_bt *bt = NULL;
    CHECK(hs_md_free_queue_find(d, &bt) && bt && bt->num_frames == sizeof(deep) / sizeof(*deep));
    CHECK(bt && bt->frames[HS_MD_FREE_QUEUE_INLINE_FRAMES + 3] == deep[HS_MD_FREE_QUEUE_INLINE_FRAMES + 3]);
    hs_md_bt_release(bt);

    check_context("a guarded block's backtrace record goes back with the block");
    static const uintptr_t frames[] = {0x3000, 0x4000, 0x5000};
    struct hs_md_bt *guarded_bt = hs_md_bt_acquire(frames, 3);
    unsigned char *g = freed_block();
    hs_md_free_queue_push(g, g, BLOCK, NULL, 0, guarded_bt);
    CHECK(hs_md_free_queue_find(g, &bt) && bt == guarded_bt);
    hs_md_bt_release(bt);
    g[0] = 0; /* reported with the record's frames when it leaves */
    size_t freed = g_num_freed;
    for (int i = 0; i < 4; i++) { /* the queue holds 4: d, then g, leave */
        unsigned char *x = freed_block();
        hs_md_free_queue_push(x, x, BLOCK, NULL, 0, NULL);
    }
    CHECK_EQ(g_num_freed, freed + 4);
    bool g_back = false;
    for (size_t i = freed; i < g_num_freed; i++)
        if (g_freed[i] == g)
            g_back = g_freed_bt[i] == guarded_bt;
    CHECK(g_back);
    char want[128];
    snprintf(want, sizeof(want), "+++ ALLOCATION %p USED AFTER FREE\n", (void *)g);
    CHECK(strstr(g_log, want) != NULL);
    CHECK(strstr(g_log, "#02  pc 0000000000005000") != NULL);
    hs_md_bt_release(guarded_bt);
}

enum { THREADS = 4, PER_THREAD = 500, CAPACITY = 100 };

static bool g_bad_frames;

static void *pusher(void *arg)
{
    unsigned char **blocks = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        blocks[i] = freed_block();
        uintptr_t frames[] = {0x1000 + (uintptr_t)i, 0x2000};
        hs_md_free_queue_push(blocks[i], blocks[i], BLOCK, frames, 2, NULL);
        struct hs_md_bt *bt = NULL;
        if (hs_md_free_queue_find(blocks[i / 2], &bt)) {
            if (bt && bt->frames[0] != 0x1000 + (uintptr_t)(i / 2))
                g_bad_frames = true; /* (CHECK is not thread-safe) */
            hs_md_bt_release(bt);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    check_context("threads pushing into a split queue: each block queued or freed, once");
    g_num_freed = 0;
    g_log[0] = '\0';
    static unsigned char *blocks[THREADS][PER_THREAD];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, pusher, blocks[i]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    size_t in_queue = 0, freed = 0, both = 0;
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < PER_THREAD; j++) {
            bool q = queued(blocks[i][j]), f = was_freed(blocks[i][j]);
            in_queue += q;
            freed += f;
            both += q && f;
        }
    CHECK_EQ(both, 0);
    CHECK_EQ(in_queue + freed, THREADS * PER_THREAD);
    /* The queue is one ring per freeing thread (free_queue.c): a ring gives back what runs
     * over its share gradually, and an exited thread's ring drains as others free, so while
     * threads come and go the total can run over the budget for a while; no ring ever holds
     * more than the whole budget. The shares themselves are checked exactly, without races,
     * by test_free_queue_rings.c. */
    CHECK(in_queue <= (size_t)THREADS * CAPACITY);
    CHECK(!g_bad_frames); /* each block found came with its own free backtrace */
    CHECK_STREQ(g_log, "");
}

/* The queue is set up once per process: one part per run (CTest runs both). */
int main(int argc, char **argv)
{
    hs_log_set_sink(sink, NULL);
    hs_md.cfg.fill_free_value = 0xef;
    hs_md.cfg.fill_on_free_bytes = SIZE_MAX;
    if (argc == 2 && strcmp(argv[1], "fifo") == 0) {
        test_fifo_and_write_after_free();
        test_backtrace_records();
    } else if (argc == 2 && strcmp(argv[1], "threads") == 0) {
        hs_md_free_queue_init(CAPACITY, HS_MD_FREE_QUEUE_INLINE_FRAMES);
        test_threads();
    } else {
        fprintf(stderr, "usage: test_free_queue fifo|threads\n");
        return 2;
    }
    for (size_t i = 0; i < g_num_made; i++)
        free(g_made[i]);
    return check_report();
}
