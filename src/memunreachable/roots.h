/* roots.h: which memory of the captured process holds the roots of the mark phase.
 *
 * From the capture (thread registers and stack pointers, /proc/PID/maps as read while every
 * thread was stopped, the detector's own ranges) and the walker's allocation list, adds to the
 * walker:
 *
 *  1. Registers: every register word of every thread, as a root value.
 *  2. Thread stacks: for every thread, the mapping containing its stack pointer, from
 *     SP - 128 (the x86_64 red zone, where a leaf function may keep live values below SP) to
 *     the mapping's end. A glibc thread's TCB and static TLS block sit at the top of its stack
 *     mapping, so its __thread variables and pthread_setspecific slots are covered. A thread
 *     whose SP is inside an allocation (a stack the program malloc'ed) gets no range: its SP
 *     register already makes that whole allocation reachable.
 *  3. Data of loaded objects: every readable and writable file mapping (.data, .got, ...,
 *     also shared writable file mappings), except device files under /dev/ other than
 *     /dev/zero and /dev/shm/, and anon_inode: mappings (reading device memory can have side
 *     effects, be slow, or fault).
 *  4. .bss: the anonymous mapping (or [heap]: with randomization off the kernel merges the
 *     brk area into the .bss mapping) directly following a file mapping. The object's end of
 *     data is read from its ELF program headers in memory (the highest PT_LOAD end): the part
 *     below it is .bss. Without readable headers, an unnamed mapping is .bss as a whole and a
 *     [heap] mapping has none.
 *  5. Other readable and writable anonymous mappings (unnamed or [anon:...]): ld.so's area
 *     holding the main thread's static TLS and TCB, the program's own mmaps, a cached stack,
 *     anything else - EXCEPT
 *       - [heap] (glibc's main arena; beyond the .bss part of rule 4),
 *       - glibc's per-thread arena heaps, recognised by their heap_info header at the 64 MiB
 *         aligned start: (ar_ptr != 0, 0 < size <= mprotect_size, mprotect_size == the rest
 *         of the mapping, both page multiples). The free chunks of an arena hold stale
 *         pointers that would hide leaks, so an arena is never scanned, even with no live
 *         allocation in it;
 *       - mappings holding a thread's stack (rule 2 scans them from SP only);
 *       - [stack] without a thread in it, [vvar], [vdso], [vsyscall] and other pseudo maps.
 *  glibc's data (the rw mappings of libc.so and its .bss) is flagged HS_MU_ROOT_MALLOC_STATE:
 *  main_arena lives there, whose pointers to chunk headers would otherwise keep the allocation
 *  just below each such chunk alive (heap_walker.h).
 *  In every root range, the allocations and the capture's excluded ranges (the detector's
 *  own memory) are cut out: an allocation is heap, reached only through references, never a
 *  root. This matters because the kernel merges adjacent anonymous mappings: glibc's mmapped
 *  chunks (large allocations) often share one mapping with ld.so's TLS area or another
 *  anonymous mapping, which must stay a root; the gaps left between allocations there are
 *  chunk headers and page tails, not stale data. Nothing unreadable is ever scanned.
 *
 * Not covered: stale data of glibc's cached stacks of exited threads is scanned (rule 5)
 * and can only hide leaks, never invent them; a main arena that had to fall back to mmap
 * (brk failed) is not recognised as heap and its free chunks are scanned.
 *
 * Threading and signals: runs in the single-threaded sweeper; reads the snapshot (ELF and
 * heap_info headers) under the walker's fault guard, which must be installed. No malloc.
 */
#ifndef HEAPSCOPE_MEMUNREACHABLE_ROOTS_H
#define HEAPSCOPE_MEMUNREACHABLE_ROOTS_H

#include "capture.h"
#include "heap_walker.h"

/* glibc's HEAP_MAX_SIZE on 64-bit: per-thread arena heaps are aligned to it. */
#define HS_MU_GLIBC_HEAP_MAX (64ul << 20)
/* Bytes below a thread's SP that are scanned (x86_64 red zone). */
#define HS_MU_RED_ZONE 128

/* Adds the roots of capture to w, which must be finished (hs_mu_heap_walker_finish). Memory
 * for the parsed maps comes from arena and is returned before the call ends. Returns 0, or
 * -ENOMEM. */
int hs_mu_roots_collect(const struct hs_mu_capture *capture, struct hs_mu_heap_walker *w,
                        struct hs_arena *arena);

#endif
