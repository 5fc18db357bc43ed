/* callsite.c: three calls to allocating helpers on consecutive lines, for the call-site
 * tests (tests/e2e/test_callsite.py). Built with -O0 -g: each call is a statement of its own,
 * so the instruction after a call (its return address) belongs to the next line, and a tool
 * that symbolizes a return address instead of the call names the wrong line.
 *
 * The lines of the three calls are marked CALL_A, CALL_B and CALL_C; the test finds them in
 * this file. The blocks stay live until exit (heap dumps, leak reports, in-use profiles see
 * them), unless argv[1] is "drop": then they are unreachable at exit (`heapscope leaks`).
 * With "strdup", the program allocates only through glibc (every stack's innermost frame is
 * glibc's), for the profile's first mapping, which must still be the program.
 */
#include <stdlib.h>
#include <string.h>

static void *volatile g_keep[3];

__attribute__((noinline)) void keep_a(void)
{
    g_keep[0] = malloc(1111);
}

__attribute__((noinline)) void keep_b(void)
{
    g_keep[1] = malloc(2222);
}

__attribute__((noinline)) void keep_c(void)
{
    g_keep[2] = malloc(3333);
}

__attribute__((noinline)) void three_calls(void)
{
    keep_a(); /* CALL_A */
    keep_b(); /* CALL_B */
    keep_c(); /* CALL_C */
}

/* Zeroes the stack below this frame, where stale copies of the pointers may remain. */
static __attribute__((noinline)) void scrub(void)
{
    volatile char area[65536];
    memset((char *)area, 0, sizeof(area));
    __asm__ volatile("" : : "r"(area) : "memory");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "strdup") == 0) {
        for (int i = 0; i < 3; i++)
            g_keep[i] = strdup(argv[1]);
        return 0;
    }
    three_calls(); /* CALL_MAIN */
    if (argc > 1 && strcmp(argv[1], "drop") == 0) {
        /* Unreachable at exit, for `heapscope leaks`. */
        for (int i = 0; i < 3; i++)
            g_keep[i] = NULL;
        scrub();
    }
    return 0;
}
