/* got_hooks_self.c: compiled into test_got_hooks's copy of the module's library (with
 * got_hooks.c), whose object the module must never patch. */
#include <dlfcn.h>
#include <stdlib.h>

void *volatile gh_self_sink;

__attribute__((visibility("default"))) int gh_self_work(void)
{
    void *p = malloc(16);
    gh_self_sink = p;
    free(p);
    return p != NULL ? 0 : -1;
}

/* A dlopen made from this object (whose slots stay glibc's): glibc looks along this
 * object's RUNPATH, which does not have the test's late library. */
__attribute__((visibility("default"))) void *gh_self_dlopen(const char *name, int flags)
{
    return dlopen(name, flags);
}
