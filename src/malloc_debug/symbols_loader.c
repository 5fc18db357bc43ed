/* symbols_loader.c: dlopen of the elfutils plug-in (see symbols_loader.h). */
#include "symbols_loader.h"

#include "backtrace.h"
#include "debug_state.h"
#include "format.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

void hs_md_symbols_load(void)
{
    static int tried;
    if (__atomic_exchange_n(&tried, 1, __ATOMIC_ACQ_REL) || !hs_md.self_path[0])
        return;
    char path[PATH_MAX];
    const char *slash = strrchr(hs_md.self_path, '/');
    if (!slash)
        return;
    hs_format(path, sizeof(path), "%.*s/libmalloc_debug_symbols.so", (int)(slash - hs_md.self_path),
              hs_md.self_path);
    hs_md_in_shim++;
    void *plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *fn = plugin ? dlsym(plugin, "hs_md_symbols_lookup") : NULL;
    hs_md_in_shim--;
    if (fn)
        hs_backtrace_set_name_fallback((hs_backtrace_name_fn)fn);
}
