/* symbols_loader.h: loading the elfutils plug-in (libmalloc_debug_symbols.so) on demand. */
#ifndef HEAPSCOPE_MALLOC_DEBUG_SYMBOLS_LOADER_H
#define HEAPSCOPE_MALLOC_DEBUG_SYMBOLS_LOADER_H

#include <stdbool.h>

/* Loads the plug-in from the shim's own directory, once, and makes backtrace printing use
 * it for frames the symbol tables do not name. Allocates from glibc (dlopen, elfutils): call
 * it only where the shim may (at exit, after taking the data a report needs). Returns false,
 * loading nothing, once an error report has been logged (hs_md.heap_suspect): a heap the
 * program has overwritten (a smashed top chunk) makes glibc's next malloc abort, which would
 * lose the report and the program's buffered output. Also false when the plug-in is
 * missing. */
bool hs_md_symbols_load(void);

#endif
