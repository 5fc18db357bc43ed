/* got_hooks_lib.c: one small shared library of test_got_hooks, built several times with
 * different link modes (got_hooks_tests.cmake); GH_NAME names its function gh_<GH_NAME>_work.
 *
 * The work makes one call of each allocation function through the library's own GOT: 1
 * malloc, 1 calloc, 1 realloc, 1 posix_memalign, 1 valloc and 4 free. */
#include <stdlib.h>

#define GH_CAT2(a, b, c) a##b##c
#define GH_CAT(a, b, c) GH_CAT2(a, b, c)
#define GH_WORK GH_CAT(gh_, GH_NAME, _work)

/* Keeps the compiler from pairing up or dropping the calls. */
void *volatile gh_sink;

__attribute__((visibility("default"))) int GH_WORK(void)
{
    void *p = malloc(16);
    void *q = calloc(2, 8);
    p = realloc(p, 64);
    void *r = NULL;
    int err = posix_memalign(&r, 64, 32);
    void *v = valloc(16);
    gh_sink = p;
    gh_sink = q;
    gh_sink = r;
    gh_sink = v;
    free(p);
    free(q);
    free(r);
    free(v);
    return p != NULL && q != NULL && err == 0 && v != NULL ? 0 : -1;
}
