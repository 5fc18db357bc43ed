/* got_hooks_ifunc.c: a library of test_got_hooks whose IFUNC resolver runs hs_got_scan while
 * glibc is still relocating the library (dlopen): the scan must skip it as not relocated.
 *
 * Built with -fno-plt and -z now: the resolver reaches hs_got_scan through a GLOB_DAT slot,
 * which glibc fills before it runs the IRELATIVE relocation of gh_ifunc_ptr (it defers
 * IRELATIVE relocations to the end of their table). */
#include <stdlib.h>

extern int hs_got_scan(void);

static int scan_result = -100;
void *volatile gh_ifunc_sink;

static int impl(void)
{
    return 42;
}

static int (*resolve(void))(void)
{
    scan_result = hs_got_scan();
    return impl;
}

__attribute__((visibility("hidden"), ifunc("resolve"))) int gh_ifunc_fn(void);
/* An IRELATIVE relocation: the resolver runs during the relocation of this library. */
__attribute__((visibility("default"))) int (*gh_ifunc_ptr)(void) = gh_ifunc_fn;

__attribute__((visibility("default"))) int gh_ifunc_scan_result(void)
{
    return scan_result;
}

__attribute__((visibility("default"))) int gh_ifunc_work(void)
{
    void *p = malloc(24);
    gh_ifunc_sink = p;
    free(p);
    return p != NULL ? 0 : -1;
}
