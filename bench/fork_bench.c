/* fork_bench.c: how long fork() takes in a program that made many allocations first, for
 * record_allocs, whose fork handler waits until every record handed out is filled in.
 *
 * Usage: fork_bench CALLS FORKS. Makes CALLS malloc/free calls (CALLS / 2 pairs, blocks of
 * 16-528 bytes, a few live at a time), then forks FORKS times; each child exits at once and is
 * waited for. Prints one line of key=value:
 *   result calls=N forks=K fork_ms_median=M fork_ms_max=X
 * where a fork's time runs from the call of fork() to its return in the parent (the prepare
 * and parent handlers included, the child's run not).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fork_bench CALLS FORKS\n");
        return 2;
    }
    long calls = atol(argv[1]), forks = atol(argv[2]);
    if (calls < 0 || forks < 1) {
        fprintf(stderr, "fork_bench: CALLS >= 0 and FORKS >= 1\n");
        return 2;
    }
    void *live[64] = {0};
    unsigned seed = 1;
    for (long i = 0; i < calls / 2; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned slot = (seed >> 8) & 63;
        free(live[slot]);
        live[slot] = malloc(16 + (seed >> 16) % 513);
    }
    double *ms = malloc((size_t)forks * sizeof(*ms));
    if (!ms)
        return 1;
    for (long k = 0; k < forks; k++) {
        double t0 = now_ms();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        double t1 = now_ms();
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
            fprintf(stderr, "fork_bench: fork %ld failed\n", k);
            return 1;
        }
        ms[k] = t1 - t0;
    }
    qsort(ms, (size_t)forks, sizeof(*ms), cmp_double);
    printf("result calls=%ld forks=%ld fork_ms_median=%.3f fork_ms_max=%.3f\n", calls, forks,
           ms[(forks - 1) / 2], ms[forks - 1]);
    for (int i = 0; i < 64; i++)
        free(live[i]);
    free(ms);
    return 0;
}
