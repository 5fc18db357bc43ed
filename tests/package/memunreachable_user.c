/* memunreachable_user.c: a program built against the installed package's header and library
 * (pkg-config heapscope) by the package test: the leak detector's C API finds its leak. */
#include <heapscope/memunreachable.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

static __attribute__((noinline)) void leak(void)
{
    sink = malloc(64);
    sink = NULL;
}

/* A stale copy of the pointer in a dead stack slot would keep the block reachable. */
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
    struct UnreachableMemoryInfo info = {0};
    if (!GetUnreachableMemory(&info, 10)) {
        printf("check failed\n");
        return 1;
    }
    printf("leaks=%zu bytes=%zu\n", info.num_leaks, info.leak_bytes);
    FreeUnreachableMemory(&info);
    return 0;
}
