/* leaky.c: the small leaking program the package test runs with the installed heapscope.
 * It drops the only pointer to a 4321-byte block, and prints the heapscope libraries it has
 * loaded (from /proc/self/maps), so that the test sees they are the package's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAK_SIZE 4321

static void *volatile sink;

static __attribute__((noinline)) void leak(void)
{
    sink = malloc(LEAK_SIZE);
    memset(sink, 'x', LEAK_SIZE);
    sink = NULL;
}

/* The detector is conservative: a stale copy of the pointer in a dead stack slot would keep
 * the block reachable, so the stack below main's frame is zeroed. */
static __attribute__((noinline)) void scrub(void)
{
    volatile char area[16384];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

int main(void)
{
    leak();
    scrub();
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return 1;
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof(line), maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, "/heapscope/lib") || strcmp(path, last) == 0)
            continue;
        strcpy(last, path);
        printf("loaded %s", path);
    }
    fclose(maps);
    return 0;
}
