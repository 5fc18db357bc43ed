/* md_stress.c: concurrency scenarios the shim must survive without a report or a hang.
 *   threads N ITER   N threads doing malloc/calloc/realloc/memalign/free with content checks
 *   many_threads N   N short-lived threads, each a malloc/free burst (Android: 1000 threads)
 *   exit_busy N      exit() while N threads are still allocating
 *   fork_busy N      fork repeatedly while N threads allocate; each child allocates, exits 0
 * Prints "ok" and exits 0 on success. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int g_stop;
static atomic_int g_errors;
static int g_iterations = 20000;

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void check_fill(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != v) {
            atomic_fetch_add(&g_errors, 1);
            return;
        }
    }
}

#define SLOTS 64

static void *churn(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    unsigned char *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    for (int it = 0; it < g_iterations && !atomic_load(&g_stop); it++) {
        int i = (int)(next_random(&seed) % SLOTS);
        unsigned char tag = (unsigned char)i;
        if (slot[i]) {
            check_fill(slot[i], size[i], tag);
            if (next_random(&seed) % 4 == 0) {
                size_t n = next_random(&seed) % 3000;
                unsigned char *r = realloc(slot[i], n);
                if (n && !r) {
                    atomic_fetch_add(&g_errors, 1);
                    continue;
                }
                /* realloc(p, 0) frees p and may return NULL: nothing to check or fill
                 * (memset on NULL is undefined even for 0 bytes). */
                if (n) {
                    size_t keep = n < size[i] ? n : size[i];
                    check_fill(r, keep, tag);
                    memset(r, tag, n);
                }
                slot[i] = n ? r : NULL;
                size[i] = n;
            } else {
                free(slot[i]);
                slot[i] = NULL;
            }
            continue;
        }
        size_t n = 1 + next_random(&seed) % (next_random(&seed) % 8 == 0 ? 70000 : 512);
        void *p = NULL;
        switch (next_random(&seed) % 4) {
        case 0:
            p = malloc(n);
            break;
        case 1:
            p = calloc(1, n);
            if (p)
                check_fill(p, n, 0);
            break;
        case 2:
            if (posix_memalign(&p, 64, n) != 0)
                p = NULL;
            break;
        default:
            p = aligned_alloc(32, n);
            break;
        }
        if (!p) {
            atomic_fetch_add(&g_errors, 1);
            continue;
        }
        memset(p, tag, n);
        slot[i] = p;
        size[i] = n;
    }
    for (int i = 0; i < SLOTS; i++)
        free(slot[i]);
    return NULL;
}

static int run_threads(int n, void *(*fn)(void *))
{
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1)) != 0)
            return 1;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    free(t);
    return 0;
}

static void *burst(void *arg)
{
    for (int i = 0; i < 100; i++) {
        void *p = malloc((size_t)(uintptr_t)arg % 200 + (size_t)i);
        free(p);
    }
    return NULL;
}

static void *forever(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        void *p = malloc(64);
        void *q = malloc(3000);
        free(p);
        free(q);
    }
    return NULL;
}

static int fork_busy(int n)
{
    pthread_t t[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, forever, NULL);
    for (int round = 0; round < 50; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The child must be able to allocate although other threads were allocating
             * when it was forked. */
            for (int i = 0; i < 1000; i++) {
                char *p = malloc((size_t)i + 1);
                memset(p, 1, (size_t)i + 1);
                free(p);
            }
            _exit(0);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            printf("child %d failed (status 0x%x)\n", round, status);
            return 1;
        }
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: md_stress threads|many_threads|exit_busy|fork_busy N [ITER]\n");
        return 2;
    }
    int n = atoi(argv[2]);
    if (argc > 3)
        g_iterations = atoi(argv[3]);
    int rc = 0;
    if (!strcmp(argv[1], "threads")) {
        rc = run_threads(n, churn);
    } else if (!strcmp(argv[1], "many_threads")) {
        for (int batch = 0; batch < n / 100 && rc == 0; batch++)
            rc = run_threads(100, burst);
    } else if (!strcmp(argv[1], "exit_busy")) {
        for (int i = 0; i < n; i++) {
            pthread_t t;
            pthread_create(&t, NULL, forever, NULL);
        }
        usleep(50000);
        printf("ok\n");
        fflush(stdout);
        exit(0);
    } else if (!strcmp(argv[1], "fork_busy")) {
        rc = fork_busy(n);
    } else {
        fprintf(stderr, "md_stress: unknown scenario %s\n", argv[1]);
        return 2;
    }
    if (rc == 0 && atomic_load(&g_errors) == 0) {
        printf("ok\n");
        return 0;
    }
    printf("failed: rc=%d content errors=%d\n", rc, atomic_load(&g_errors));
    return 1;
}
