/* leak_exit_bench: a program that never frees, for timing malloc debug's exit-time leak
 * report (bench/leak_exit.sh). It leaks N blocks (argv[1], default 100000) of 16 to 271
 * bytes from 64 call paths, each 8 to 23 frames deep (two functions recursing in a pattern
 * set by the path's number), so the report has as many distinct stacks as a real program's
 * hot allocation sites and stacks as deep. Prints "leaked=N" and exits without freeing. */
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

static __attribute__((noinline)) void leak_at(unsigned path, unsigned depth, size_t size);

static __attribute__((noinline)) void step_b(unsigned path, unsigned depth, size_t size)
{
    leak_at(path, depth, size);
    __asm__ volatile("" ::: "memory"); /* not a tail call: each level keeps its frame */
}

static __attribute__((noinline)) void step_a(unsigned path, unsigned depth, size_t size)
{
    leak_at(path, depth, size);
    __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void leak_at(unsigned path, unsigned depth, size_t size)
{
    if (depth == 0) {
        void **p = malloc(size);
        p[0] = (void *)sink; /* keeps the compiler from dropping the block */
        sink = p;
        return;
    }
    if ((path >> (depth % 6)) & 1)
        step_a(path, depth - 1, size);
    else
        step_b(path, depth - 1, size);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    for (unsigned long i = 0; i < n; i++) {
        unsigned path = (unsigned)(i % 64);
        leak_at(path, 4 + path % 16, 16 + (i * 7) % 256);
    }
    printf("leaked=%lu\n", n);
    return 0;
}
