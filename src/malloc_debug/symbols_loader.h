/* symbols_loader.h: loading the elfutils plug-in (libmalloc_debug_symbols.so) on demand. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SYMBOLS_LOADER_H
#define HEAPSCOPE_MALLOC_DEBUG_SYMBOLS_LOADER_H

/* Loads the plug-in from the shim's own directory, once, and makes backtrace printing use
 * it for frames the symbol tables do not name. Allocates (dlopen, elfutils): call it only
 * where the shim may (at exit, after taking the data a report needs). Silently does nothing
 * when the plug-in is missing. */
void hs_md_symbols_load(void);

#endif
