/* symbol_binding.h: what the process's calls to a function name are bound to.
 *
 * For a library loaded into a running process (heapscope profile -p, heapscope leaks -p),
 * which must know whether the program calls glibc's malloc or another allocator's. dlsym in
 * the global scope answers that, with one exception: a non-PIE program that takes a
 * function's address defines the name as its own PLT entry (an undefined symbol with a value,
 * a "canonical PLT"), which dlsym returns while calls are bound past it. node does so for
 * malloc and free.
 */
#ifndef HEAPSCOPE_COMMON_SYMBOL_BINDING_H
#define HEAPSCOPE_COMMON_SYMBOL_BINDING_H

#include <stdbool.h>

/* True when calls to name in the global scope go to fn, as far as the dynamic linker's
 * tables tell: dlsym returns fn, or the program's canonical PLT entry for the name (calls are
 * then assumed to reach fn; callers check several names, which another allocator defines
 * all of). Not async-signal-safe (dlsym, dladdr1). */
bool hs_symbol_binds_to(const char *name, const void *fn);

#endif
