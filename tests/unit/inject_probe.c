/* inject_probe.c: the library test_process_inject loads into its children. Its init
 * function allocates (the thread must be at a safe point for malloc) and returns 42 plus the
 * number of times it ran, so a second load is visible. */
#include <stdlib.h>

static int g_runs;

__attribute__((visibility("default"))) int inject_probe_init(void)
{
    char *p = malloc(1000);
    if (p == NULL)
        return -1;
    p[999] = 1;
    free(p);
    return 42 + g_runs++;
}
