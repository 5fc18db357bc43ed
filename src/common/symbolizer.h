/* symbolizer.h: turns program counters into function, file:line and inlined frames, with
 * elfutils (libdwfl/libdw). Shared by the report command, the leak detector and the shim.
 *
 * Model. A symbolizer describes one address space: the caller declares its mappings as
 * /proc/<pid>/maps shows them (hs_symbolizer_add_map, or all of a live process with
 * hs_symbolizer_add_maps_of_pid, or maps text with hs_symbolizer_add_maps_text), then asks for
 * pcs. Nothing is opened when mappings are declared: an object file is opened and handed to
 * libdwfl the first time a pc falls into it, and each distinct path is opened once however
 * many times it is mapped. Results are cached per pc, so asking again for the same pc costs a
 * hash lookup.
 *
 * Load bias. The mappings of one path are grouped into runs (one run per time the object was
 * loaded): in address order, a mapping starts a new run when its file offset is not greater
 * than that of the previous mapping of the same path. The bias of a run comes from its first
 * mapping, which has its lowest offset: bias = start - offset - (p_vaddr - p_offset) of the
 * PT_LOAD holding that offset (if the offset's page holds the start of several segments, the
 * one with the greatest p_offset). That is start - offset for PIE executables and DSOs with the
 * usual layout (first PT_LOAD at offset 0 and vaddr 0, including ld -z separate-code layouts
 * where it is r-- and text follows at offset 0x1000), 0 for ET_EXEC executables, and still
 * right when only a later mapping (say the r-x one) was declared. A run whose file cannot be
 * read gets start - offset of its first mapping.
 *
 * rel_pc = pc - bias: an address in the ELF file's own vaddr space, what addr2line -e FILE and
 * eu-addr2line -e FILE accept and what Android's "#00 pc REL_PC PATH" frame lines print.
 *
 * Debug info. Symbols come from .symtab, else .dynsym (and .gnu_debugdata MiniDebugInfo),
 * of the file or of its separate debug file; file:line and inlined frames from DWARF (also
 * without .debug_aranges, which clang does not emit by default). A separate debug file is
 * searched, in this order, by build-id as ROOT/.build-id/xx/yyyy.debug, then by the
 * .gnu_debuglink name (its CRC or the build-id checked) next to the file, in its .debug/
 * subdirectory and as ROOT/<directory of the file>/NAME (also for the directory of the file's
 * real path when it is a symlink). The ROOTs are the directories given to
 * hs_symbolizer_add_debug_dir, then SYSROOT/usr/lib/debug when there is a sysroot, then
 * /usr/lib/debug. dwz alternate files (.gnu_debugaltlink) are found by build-id in the same
 * roots, under the sysroot, or by libdw itself (/usr/lib/debug/.build-id, the link's path).
 * debuginfod is never used, whatever DEBUGINFOD_URLS says: the lookups above replace the
 * elfutils callbacks (dwfl_standard_find_debuginfo, dwfl_build_id_find_elf) that may query it.
 *
 * Sysroot. With a sysroot, the file of a mapping declared as PATH is SYSROOT/PATH when that
 * is a regular file, else PATH itself (like native_heapdump_viewer.py --symbols).
 *
 * Function names. The real (outermost) function is named by the symbol table when a sized
 * symbol holds the pc (several symbols at one address: global over weak over local; a symbol
 * without size holds up to the next symbol or the end of its section), else by DWARF;
 * inlined functions by DWARF (DW_AT_linkage_name, else DW_AT_name). Symbol version suffixes
 * ("fopen@@GLIBC_2.2.5") are dropped.
 *
 * Names are returned as stored (mangled for C++). The demangled form is computed with the
 * C++ runtime's __cxa_demangle, found in the process (C++ programs) or by dlopen of
 * libstdc++.so.6 the first time a mangled name ("_Z...") is met; without it, demangled ==
 * function. Disable with hs_symbolizer_set_demangle.
 *
 * Robustness: nonexistent, unreadable, non-regular (FIFOs and devices are never opened),
 * non-ELF, truncated or foreign-type files give frames with an unknown function (""), never a
 * crash; nonsense mappings are refused by hs_symbolizer_add_map.
 *
 * Cost: the first pc in an object reads its headers and sorts its symbols; the first pc in a
 * compilation unit indexes the unit's functions; then a new pc costs a few binary searches
 * and a walk down the scopes of one function (about 6 us on libc with full DWARF), and a pc
 * seen before one hash lookup.
 *
 * Memory: allocates with malloc (use it outside the shim's malloc, or at its safe points);
 * hs_symbolize uses about 12 KiB of stack. Every string in an hs_frame_info stays valid until
 * hs_symbolizer_free.
 *
 * Threading: a symbolizer is not thread-safe; use one per thread, or serialize every call on
 * one with a lock. Distinct symbolizers may be used concurrently from different threads.
 * Not async-signal-safe.
 */
#ifndef HEAPSCOPE_COMMON_SYMBOLIZER_H
#define HEAPSCOPE_COMMON_SYMBOLIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Most frames one pc can produce (inlining depth + 1); deeper chains keep their innermost
 * HS_SYMBOLIZE_MAX_FRAMES - 1 frames and the outermost function. */
#define HS_SYMBOLIZE_MAX_FRAMES 64

/* One (possibly inlined) function at a pc. All strings are non-NULL ("" when unknown). */
struct hs_frame_info {
    const char *map_path;     /* path of the mapping as declared ("" for anonymous memory) */
    uintptr_t rel_pc;         /* pc - load bias of the object (see the header comment); when
                               * no ELF file could be read: pc - (start - offset) of the first
                               * mapping of the run (anonymous memory: of the mapping) */
    const char *build_id;     /* lowercase hex of the file's NT_GNU_BUILD_ID, or "" */
    const char *function;     /* symbol or DWARF linkage name as stored (mangled), or "" */
    const char *demangled;    /* demangled function, or the same pointer as function */
    uint64_t function_offset; /* rel_pc - start of function (the real pc, not pc - 1); 0 for
                               * inlined frames and when the function is unknown */
    const char *file;         /* source file (as the DWARF names it, usually absolute), or "" */
    unsigned line;            /* source line, or 0 when unknown */
    bool inlined;             /* this function was inlined into the next entry */
};

struct hs_symbolizer;

/* Creates an empty symbolizer. sysroot (may be NULL or "") is the directory searched first
 * for every mapped path, see the header comment. Returns NULL (errno set) on allocation
 * failure. */
struct hs_symbolizer *hs_symbolizer_new(const char *sysroot);

/* Frees the symbolizer, its files, its cache and every string it returned. NULL is a no-op. */
void hs_symbolizer_free(struct hs_symbolizer *s);

/* Declares the mapping [start, end) of path at file offset `offset`, as a line of
 * /proc/<pid>/maps shows it. path may be "" (anonymous), a pseudo name ("[vdso]",
 * "[anon:...]") or a file; only absolute paths are ever opened, and a trailing " (deleted)"
 * is ignored. A mapping overlapping mappings declared before replaces the overlapped parts
 * (like mmap MAP_FIXED); declaring the same mapping twice is a no-op. Cached results are
 * dropped when the set of mappings changes. Returns 0, or -1 with errno EINVAL (s or path
 * NULL, start >= end, path of PATH_MAX characters or more) or ENOMEM. */
int hs_symbolizer_add_map(struct hs_symbolizer *s, uintptr_t start, uintptr_t end, uint64_t offset,
                          const char *path);

/* Declares every mapping of /proc/<pid>/maps (pid 0: this process). Returns 0, or -1 with
 * errno set (the file could not be read, or ENOMEM; mappings read before stay declared). */
int hs_symbolizer_add_maps_of_pid(struct hs_symbolizer *s, pid_t pid);

/* Declares every mapping of maps-formatted text (the MAPS section of a heap dump, a saved
 * /proc/<pid>/maps), len bytes at text; malformed lines are skipped. Returns 0, or -1 with
 * errno ENOMEM or EINVAL. */
int hs_symbolizer_add_maps_text(struct hs_symbolizer *s, const char *text, size_t len);

/* Adds dir (absolute, no ':') to the roots searched for separate debug files, before the
 * roots added earlier and the default ones (see the header comment). Affects files opened
 * afterwards only: call it before the first hs_symbolize. Returns 0, or -1 with errno EINVAL
 * or ENOMEM. */
int hs_symbolizer_add_debug_dir(struct hs_symbolizer *s, const char *dir);

/* Turns demangling on (the default) or off (demangled then always equals function). */
void hs_symbolizer_set_demangle(struct hs_symbolizer *s, bool on);

/* Symbolizes one pc. is_return_address: pc is a caller frame of a stack that may be a return
 * address or its call site (return address - 1, as heapscope, bionic and Go store them), so
 * pc - 1 is looked up, inside the call instruction in both cases (an x86_64 call is at least 2
 * bytes), where a return address itself can name the next line or, after a call to a noreturn
 * function, the next function. Pass 0 when pc is known to be a call site or an exact pc: it is
 * looked up as it is. rel_pc and function_offset are still computed from pc itself.
 * Fills out[0..n-1] with the innermost inlined function first, then the function it was
 * inlined into, and so on up to the real (outermost, not inlined) function, all for the same
 * pc; each entry's file:line is where that function is at this pc (for a caller of an inlined
 * function: the call site). When there are more than max, the innermost max - 1 and the
 * outermost function are kept. Returns n: >= 1 when pc is in a declared mapping (one entry
 * with function "" when nothing is known of it), 0 when pc is in no declared mapping, or s,
 * out or max is 0/NULL. */
size_t hs_symbolize(struct hs_symbolizer *s, uintptr_t pc, int is_return_address,
                    struct hs_frame_info *out, size_t max);

#endif
