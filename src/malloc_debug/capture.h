/* capture.h: stacks as the shim records them: the program's frames only.
 *
 * The shim's own frames (entry point, debug path, report) are dropped from the top by
 * address range, which works whatever the compiler inlined.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H
#define HEAPSCOPE_MALLOC_DEBUG_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

/* Stores up to max frames of the calling thread, innermost program frame first. */
size_t hs_md_capture(uintptr_t *frames, size_t max);

#endif
