/* report_sizes.c: blocks of the sizes given, from three call stacks, in use at exit, for the
 * report tests that compare two dumps (--diff) and two builds of one program.
 *
 * Usage: report_sizes GROW SHRINK GONE   (bytes; 0 allocates nothing from that stack)
 * Each size is allocated by hold(), called from grow(), shrink() or gone(), called from main:
 * a test runs it twice with other sizes and reads growth, shrinkage and a stack that vanished.
 * The tests compile it themselves (cc -g -O0) from directories of their own. */
#include <stdlib.h>
#include <string.h>

static void *volatile kept[3];

static __attribute__((noinline)) void hold(int slot, size_t size)
{
    kept[slot] = malloc(size);
    if (kept[slot])
        memset(kept[slot], slot + 1, size);
}

static __attribute__((noinline)) void grow(size_t size)
{
    hold(0, size);
}

static __attribute__((noinline)) void shrink(size_t size)
{
    hold(1, size);
}

static __attribute__((noinline)) void gone(size_t size)
{
    hold(2, size);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    size_t sizes[3];
    for (int i = 0; i < 3; i++)
        sizes[i] = strtoul(argv[i + 1], NULL, 10);
    if (sizes[0])
        grow(sizes[0]);
    if (sizes[1])
        shrink(sizes[1]);
    if (sizes[2])
        gone(sizes[2]);
    return 0;
}
