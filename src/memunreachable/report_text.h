/* report_text.h: Android libmemunreachable's text report of a struct UnreachableMemoryInfo.
 *
 *   "  <leak_bytes> bytes in <num_leaks> unreachable allocation[s]"
 *   "  ABI: 'x86_64'"
 *   "  <note>"                                            (only from hs_mu_report_text_note)
 *   ""
 *   then per leak (hs_mu_report_leak) followed by an empty line:
 *   "  <size> bytes unreachable at <hex address>"
 *   "   referencing <referenced_size> unreachable bytes in <referenced_count> allocation[s]"
 *                                                          (only when referenced_count > 0)
 *   "   and <similar_size> similar unreachable bytes in <similar_count> allocation[s]"
 *                                                          (only when similar_count > 0)
 *   "   referencing <similar_referenced_size> unreachable bytes in <n> allocation[s]"
 *                                  (only when similar_count > 0 and similar_referenced_count > 0)
 *   "   contents:"  or  "   first <contents_length> bytes of contents:"  (with log_contents;
 *                                  the second form when size > contents_length)
 *   "   <hex address>: 6c 65 61 6b 00 ...  leak."   16 bytes a line: each byte as two hex
 *                                  digits and a space, three spaces per byte missing on the
 *                                  last line, then the bytes as ASCII ('.' outside 0x20-0x7e)
 *   the allocation backtrace in malloc debug's frame format (when it has frames):
 *   "          #00  pc 00000000000011a9  /path (sym+off)"
 * The plural "s" is added whenever the count is not 1. Addresses are lowercase hex without
 * 0x.
 *
 * Lines are handed to emit(line, len, ctx) without a newline; line is valid only during the
 * call. Symbolizing frames reads /proc/self/maps and ELF files (backtrace.h): run this in the
 * normal process, not in the sweeper. No malloc here (stack buffers); emit may allocate.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_REPORT_TEXT_H
#define HEAPSCOPE_MEMUNREACHABLE_REPORT_TEXT_H

#include <heapscope/memunreachable.h>

#include <stdbool.h>
#include <stddef.h>

typedef void (*hs_mu_emit_fn)(const char *line, size_t len, void *ctx);

/* The whole report of info (its num_reported_leaks leaks). */
void hs_mu_report_text(const struct UnreachableMemoryInfo *info, bool log_contents,
                       hs_mu_emit_fn emit, void *ctx);

/* The same with "  <note>" as one more line after the ABI line (none when note is NULL). */
void hs_mu_report_text_note(const struct UnreachableMemoryInfo *info, bool log_contents,
                            const char *note, hs_mu_emit_fn emit, void *ctx);

/* The note of a report whose heap had no allocation tracking (glibc_heap.h). */
#define HS_MU_UNTRACKED_NOTE                                                                       \
    "Not started under heapscope: no allocation backtraces; leaks of the same size are "           \
    "grouped."

/* The note of a report from malloc debug without allocation tracking
 * (check_unreachable_on_signal alone): glibc's heap was walked. */
#define HS_MU_UNTRACKED_SHIM_NOTE                                                                  \
    "Allocations not tracked: no allocation backtraces (add the malloc debug option backtrace "    \
    "for them); leaks of the same size are grouped."

/* The lines of one leak (no empty line after it). */
void hs_mu_report_leak(const struct UnreachableLeak *leak, bool log_contents, hs_mu_emit_fn emit,
                       void *ctx);

/* The log summary line "<leak_bytes> bytes in <num_leaks> allocation[s] unreachable out of
 * <allocation_bytes> bytes in <num_allocations> allocation[s]" into buf (always
 * NUL-terminated). Returns its length. */
size_t hs_mu_summary_line(const struct UnreachableMemoryInfo *info, char *buf, size_t cap);

/* The ABI name Android prints for this build ("x86_64", "arm64", "x86", "arm", "riscv64"). */
const char *hs_mu_abi_name(void);

#endif
