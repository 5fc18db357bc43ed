/* symbols_loader.c: dlopen of the elfutils plug-in (see symbols_loader.h). */
#include "symbols_loader.h"

#include "backtrace.h"
#include "debug_state.h"
#include "format.h"

#include <dlfcn.h>
#include <limits.h>
#include <string.h>

bool hs_md_symbols_load(void)
{
    static int loaded;
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
        return true;
    if (__atomic_load_n(&hs_md.heap_suspect, __ATOMIC_RELAXED))
        return false;
    static int tried;
    if (__atomic_exchange_n(&tried, 1, __ATOMIC_ACQ_REL) || !hs_md.self_path[0])
        return false;
    char path[PATH_MAX];
    const char *slash = strrchr(hs_md.self_path, '/');
    if (!slash)
        return false;
    hs_format(path, sizeof(path), "%.*s/libmalloc_debug_symbols.so", (int)(slash - hs_md.self_path),
              hs_md.self_path);
    hs_md_in_shim++;
    void *plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *fn = plugin ? dlsym(plugin, "hs_md_symbols_lookup") : NULL;
    hs_md_in_shim--;
    if (!fn)
        return false;
    hs_backtrace_set_name_fallback((hs_backtrace_name_fn)fn);
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
    return true;
}
