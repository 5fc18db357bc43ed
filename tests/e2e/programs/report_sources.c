/* report_sources.c: findings whose source lines the heapscope command must name.
 *
 *   leaks        two leaks from two functions (first_leak: 100 bytes, second_leak: 200)
 *   inlined      a leak made by an always_inline function (its frame is an inlined one)
 *   serve        the two leaks, then "ready" on stdout, then waits for stdin to close
 *   serve_clean  no leak, "ready", waits for stdin to close
 *   overflow     writes one byte past a block, then frees it
 *   fault        writes one byte past a 32-byte block (page_guard: a fault on its guard page)
 *   clean        allocates and frees
 *   closefds     closes every descriptor above 2 (as daemons do), then the two leaks
 * Lines the tests look for carry a "LINE:name" comment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile g_sink; /* keeps the compiler from dropping the allocations */

__attribute__((noinline)) static void first_leak(void)
{
    char *p = malloc(100); /* LINE:first_leak */
    memset(p, 1, 100);
    g_sink = p;
    g_sink = NULL;
}

__attribute__((noinline)) static void second_leak(void)
{
    char *p = malloc(200); /* LINE:second_leak */
    memset(p, 2, 200);
    g_sink = p;
    g_sink = NULL;
}

static inline __attribute__((always_inline)) void inlined_leak(void)
{
    char *p = malloc(300); /* LINE:inlined_leak */
    memset(p, 3, 300);
    g_sink = p;
    g_sink = NULL;
}

/* Overwrites the stack the leaks ran on (called from main, so its frame covers theirs): a
 * stale copy of their pointers there would keep them reachable for the check. */
__attribute__((noinline)) static void scrub_stack(void)
{
    volatile char buf[16384];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = 0;
}

static void wait_for_stdin(void)
{
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (fgets(buf, sizeof(buf), stdin))
        ;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "clean";
    if (strcmp(mode, "leaks") == 0) {
        first_leak();
        second_leak();
        scrub_stack();
    } else if (strcmp(mode, "inlined") == 0) {
        inlined_leak(); /* LINE:inlined_call */
        scrub_stack();
    } else if (strcmp(mode, "serve") == 0) {
        first_leak();
        second_leak();
        scrub_stack(); /* from here: the leaks' frames were at this depth */
        wait_for_stdin();
    } else if (strcmp(mode, "serve_clean") == 0) {
        wait_for_stdin();
    } else if (strcmp(mode, "overflow") == 0) {
        char *p = malloc(10);
        memset(p, 0, 11); /* LINE:overflow_write */
        free(p);          /* LINE:overflow_free */
    } else if (strcmp(mode, "fault") == 0) {
        volatile char *p = malloc(32);
        p[32] = 1; /* LINE:fault_write */
        free((void *)p);
    } else if (strcmp(mode, "clean") == 0) {
        free(malloc(10));
    } else if (strcmp(mode, "closefds") == 0) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        first_leak();
        second_leak();
        scrub_stack();
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
