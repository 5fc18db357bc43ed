/* md_record.c: a known sequence of allocation calls for the record_allocs end-to-end tests.
 *
 *   md_record seq [threads]   every allocation function once (and a second thread with its
 *                             own calls), then SIGRTMAX-18 and one more malloc, which writes
 *                             the records
 *   md_record many N          N malloc/free pairs, then SIGRTMAX-18 and one more malloc
 *   md_record exit            a few calls, no signal: only record_allocs_on_exit writes
 *
 * Nothing is printed before the write (stdio would allocate its buffer and add records of its
 * own); afterwards each pointer is printed as "name=%p", the live ones listed in "live=", and
 * "pid=", "tid=" (and "tid2=") give the thread ids the record lines start with.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keeps the compiler from dropping or merging the calls. */
static void *volatile sink;

#define MAX_NAMED 32

static struct {
    const char *name;
    void *ptr;
    int live;
} g_named[MAX_NAMED];
static int g_count;

static void *note(const char *name, void *p, int live)
{
    if (g_count < MAX_NAMED) {
        g_named[g_count].name = name;
        g_named[g_count].ptr = p;
        g_named[g_count].live = live;
        g_count++;
    }
    sink = p;
    return p;
}

static void set_live(void *p, int live)
{
    for (int i = 0; i < g_count; i++)
        if (g_named[i].ptr == p)
            g_named[i].live = live;
}

static int g_tid2;

static void *second_thread(void *arg)
{
    (void)arg;
    g_tid2 = gettid();
    void *a = note("t2_malloc", malloc(33), 1);
    void *b = note("t2_calloc", calloc(3, 11), 1);
    free(a);
    set_live(a, 0);
    void *c = realloc(b, 200);
    set_live(b, 0);
    note("t2_realloc", c, 1);
    return NULL;
}

/* Requests the write and makes the allocation that performs it. */
static void trigger_write(void)
{
    kill(getpid(), SIGRTMAX - 18);
    note("trigger", malloc(23), 1);
}

static void print_all(void)
{
    printf("pid=%d tid=%d\n", (int)getpid(), (int)gettid());
    if (g_tid2)
        printf("tid2=%d\n", g_tid2);
    for (int i = 0; i < g_count; i++)
        printf("%s=%p\n", g_named[i].name, g_named[i].ptr);
    printf("live=");
    const char *sep = "";
    for (int i = 0; i < g_count; i++) {
        if (g_named[i].live && g_named[i].ptr) {
            printf("%s%p", sep, g_named[i].ptr);
            sep = ",";
        }
    }
    printf("\n");
    fflush(stdout);
}

static int run_seq(int threads)
{
    void *p1 = note("malloc", malloc(100), 1);
    void *p2 = note("calloc", calloc(10, 20), 1);
    void *p3 = note("memalign", memalign(64, 200), 1);
    void *p4 = NULL;
    if (posix_memalign(&p4, 128, 300) != 0)
        return 1;
    note("posix_memalign", p4, 1);
    note("aligned_alloc", aligned_alloc(256, 512), 1);
    note("valloc", valloc(1000), 1);
    note("pvalloc", pvalloc(5000), 1);
    void *p8 = note("realloc_new", realloc(NULL, 50), 1);
    void *p9 = realloc(p8, 5000); /* grows: a new block (or the same one) */
    set_live(p8, 0);
    note("realloc_grown", p9, 1);
    free(p2);
    set_live(p2, 0);
    sink = realloc(p3, 0); /* frees p3 */
    set_live(p3, 0);
    free(NULL);
    sink = p1;
    if (threads) {
        pthread_t th;
        if (pthread_create(&th, NULL, second_thread, NULL) != 0)
            return 1;
        pthread_join(th, NULL);
    }
    trigger_write();
    print_all();
    return 0;
}

static int run_many(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc((size_t)(16 + i % 64));
        sink = p;
        free(p);
    }
    trigger_write();
    print_all();
    return 0;
}

static int run_exit(void)
{
    void *a = note("malloc", malloc(64), 1);
    void *b = note("calloc", calloc(4, 4), 1);
    free(a);
    set_live(a, 0);
    sink = b;
    print_all();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: md_record seq [threads] | many N | exit\n");
        return 2;
    }
    if (strcmp(argv[1], "seq") == 0)
        return run_seq(argc > 2 && strcmp(argv[2], "threads") == 0);
    if (strcmp(argv[1], "many") == 0 && argc > 2)
        return run_many(atol(argv[2]));
    if (strcmp(argv[1], "exit") == 0)
        return run_exit();
    fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
}
