/* symbols_plugin.c: libmalloc_debug_symbols.so, the shim's elfutils plug-in.
 *
 * The shim names frames from the ELF symbol tables of the mapped files without allocating.
 * Files stripped of their symbols (distribution packages ship them in separate debug files)
 * need elfutils, which allocates and pulls in several libraries: too heavy to load into
 * every preloaded process. So it lives here, loaded with dlopen only when a report that can
 * afford it (the leak report at exit) needs names the symbol tables lack.
 */
#include "symbolizer.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static struct hs_symbolizer *g_symbolizer;

/* hs_backtrace_name_fn for hs_backtrace_set_name_fallback: the name of the function
 * containing addr, from .symtab, .dynsym or DWARF of the file or its separate debug file. */
__attribute__((visibility("default"))) bool hs_md_symbols_lookup(uintptr_t addr, char *name,
                                                                 size_t cap, uintptr_t *offset)
{
    if (!g_symbolizer) {
        g_symbolizer = hs_symbolizer_new(NULL);
        if (!g_symbolizer)
            return false;
        hs_symbolizer_add_maps_of_pid(g_symbolizer, 0);
    }
    struct hs_frame_info frames[HS_SYMBOLIZE_MAX_FRAMES];
    size_t n = hs_symbolize(g_symbolizer, addr, 0, frames, HS_SYMBOLIZE_MAX_FRAMES);
    if (n == 0 || cap == 0)
        return false;
    const struct hs_frame_info *outer = &frames[n - 1]; /* the real, not inlined, function */
    if (!outer->function[0])
        return false;
    size_t len = strnlen(outer->function, cap - 1);
    memcpy(name, outer->function, len);
    name[len] = '\0';
    *offset = (uintptr_t)outer->function_offset;
    return true;
}
