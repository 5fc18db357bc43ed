/* frame_source.h: source lines for Android-format frame lines, in the heapscope command.
 *
 * A frame line, as malloc debug, leak_track and memunreachable print it:
 *     "          #00  pc 00000000000011f7  /path/overflow (main+65)"
 * names a module (the mapped file) and rel_pc, the pc in the file's own address space (see
 * symbolizer.h). Frames are call sites or exact pcs (backtrace.h), so rel_pc is looked up as
 * it is: the line printed is the line of the call, not the one after it.
 *
 * The command never sees the program's mappings, and needs not: each module is declared to
 * one hs_symbolizer at an address of its own (module k at HS_FRAME_SOURCE_BASE + k * 2^36,
 * file offset 0), and rel_pc is turned back into an address there with the module's load
 * bias, which the symbolizer computes from the file. The symbolizer's per-pc cache is then a
 * cache keyed by (module, rel_pc). Paths that are not files ("<unknown>", "[vdso]") and
 * deleted files (the file at the path is another one now) are never looked up.
 *
 * Not thread-safe; allocates with malloc (the command's own process).
 */
#ifndef HEAPSCOPE_CLI_FRAME_SOURCE_H
#define HEAPSCOPE_CLI_FRAME_SOURCE_H

#include "frame_line.h"
#include "symbolizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hs_frame_source;

/* NULL with errno set on failure (out of memory, elfutils). */
struct hs_frame_source *hs_frame_source_new(void);
void hs_frame_source_free(struct hs_frame_source *fs);

/* Symbolizes a parsed frame line: fills out[0..n-1] as hs_symbolize does (innermost inlined
 * function first, the real function last) and returns n; 0 when nothing is known (not a
 * file, a deleted or unreadable file, no symbols). The strings live until
 * hs_frame_source_free. */
size_t hs_frame_source_lookup(struct hs_frame_source *fs, const struct hs_frame_line *fl,
                              struct hs_frame_info *out, size_t max);

#endif
