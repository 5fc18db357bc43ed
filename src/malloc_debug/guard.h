/* guard.h: checking the front and rear guards of an allocation.
 *
 * Called on free and realloc. A corrupted guard is reported with one line per bad byte
 * (index relative to the user pointer: negative in the front guard) and the allocation is
 * still freed, as on Android.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_GUARD_H
#define HEAPSCOPE_MALLOC_DEBUG_GUARD_H

#include "header.h"

#include <stdbool.h>

/* Checks whichever guards are on; reports each corrupted one. Returns true when intact. */
bool hs_md_guards_check(const struct hs_md_header *h);

#endif
