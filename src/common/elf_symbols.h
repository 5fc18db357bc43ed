/* elf_symbols.h: allocation-free ELF symbol lookup for backtraces printed inside malloc.
 *
 * An ELF file is mapped read-only with mmap (no malloc, no stdio) and its .symtab, then its
 * .dynsym, is searched linearly for the function containing an address. Only 64-bit
 * little-endian ELF files are understood (the x86_64 targets of heapscope); anything else is
 * rejected.
 *
 * Addresses. A "vaddr" is an address in the ELF file's own virtual address space: the value
 * symbols (st_value) and program headers (p_vaddr) use, and what addr2line expects. A run-time
 * address is vaddr + load bias; the load bias is 0 for ET_EXEC (non-PIE) executables and the
 * address the object was loaded at for ET_DYN objects (PIE executables and DSOs) whose first
 * PT_LOAD has p_vaddr 0. hs_elf_load_bias computes it exactly from a mapping of the file.
 *
 * Robustness: the input is treated as hostile. Every offset, size, count and string in the file
 * is bounds-checked against the file size before use, structures are copied out with memcpy
 * (no unaligned access), and loops are bounded by the file size, so a truncated or corrupt
 * file yields false or a symbol whose name lies inside the file, never a crash. One limit of
 * mmap remains: if another process truncates the file while it is mapped, reading the lost
 * pages raises SIGBUS.
 *
 * Not handled: files without section headers (sstrip'ed), MiniDebugInfo (.gnu_debugdata,
 * LZMA-compressed), separate debug files, zero-sized symbols (only sized symbols can contain an
 * address), demangling (names are returned as stored).
 *
 * Threading and signals: no global state; all functions are reentrant and async-signal-safe
 * (stat, open, fstat, mmap, munmap, close).
 */
#ifndef HEAPSCOPE_COMMON_ELF_SYMBOLS_H
#define HEAPSCOPE_COMMON_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An ELF image in memory: a file mapped by hs_elf_open, or caller-provided bytes. */
struct hs_elf {
    const unsigned char *data;
    size_t size;
    size_t mapped; /* bytes to munmap in hs_elf_close; 0 for caller-provided images */
    dev_t dev;     /* of the file opened by hs_elf_open (0 for images) */
    uint64_t inode;
};

/* An address-sorted index of a file's function symbols, for many lookups in one file (a
 * report of thousands of distinct frames): hs_elf_lookup scans the whole symbol table each
 * time, 60% of a leak report's time on a program like cc1. Built once into memory from a
 * private arena; answers exactly as hs_elf_lookup does (the symbol containing the address
 * with the highest start, then the strongest binding; .symtab first, .dynsym only when
 * .symtab has no match). Valid while the hs_elf it was built from stays open. */
struct hs_arena;
struct hs_elf_sym_entry;
struct hs_elf_index {
    struct hs_elf_sym_entry *syms[2]; /* [0] .symtab, [1] .dynsym; sorted by value */
    size_t count[2];
    uint64_t max_size[2]; /* largest st_size: how far back a containing symbol can start */
};

/* Builds the index; false (index empty, lookups fall back to nothing) when the arena runs
 * out. */
bool hs_elf_index_build(const struct hs_elf *elf, struct hs_arena *arena, struct hs_elf_index *ix);

/* hs_elf_lookup through the index. */
bool hs_elf_index_lookup(const struct hs_elf *elf, const struct hs_elf_index *ix, uintptr_t vaddr,
                         char *name, size_t name_cap, uintptr_t *offset);

void hs_elf_index_free(struct hs_elf_index *ix, struct hs_arena *arena);

/* Maps the regular file at path. Returns false (and leaves *elf empty, safe to close) if the
 * file cannot be opened or mapped, is not a regular file, or has no valid 64-bit ELF header. */
bool hs_elf_open(struct hs_elf *elf, const char *path);

/* Uses size bytes at image (which must stay valid and readable while in use). Returns false if
 * they do not start with a valid 64-bit ELF header. */
bool hs_elf_open_image(struct hs_elf *elf, const void *image, size_t size);

/* Unmaps what hs_elf_open mapped; safe on an empty or failed struct and to call twice. */
void hs_elf_close(struct hs_elf *elf);

/* e_type (ET_EXEC, ET_DYN, ...) or -1 if elf holds no valid header. */
int hs_elf_type(const struct hs_elf *elf);

/* Load bias of the object, given one of its mappings: the file offset map_offset mapped at
 * run-time address map_start (from /proc/<pid>/maps), executable or not (map_exec). The
 * mapping belongs to the PT_LOAD segment whose file range holds map_offset and whose
 * page-rounded p_offset is the greatest (a later segment overlays the page it shares with an
 * earlier one; the last such in the table on a tie); with map_exec only PF_X segments count,
 * which settles the one ambiguous case (two segments starting in the same page) for code.
 * Then bias = map_start - map_offset - (p_vaddr - p_offset): 0 for ET_EXEC, and start - offset
 * of the mapping for the usual ET_DYN layout (p_vaddr == p_offset). Returns false (setting
 * nothing) when no program header fits. */
bool hs_elf_load_bias(const struct hs_elf *elf, uintptr_t map_start, uint64_t map_offset,
                      bool map_exec, uintptr_t *bias);

/* Finds the symbol containing vaddr (see the header comment): a defined, sized STT_FUNC,
 * STT_GNU_IFUNC or STT_NOTYPE symbol with st_value <= vaddr < st_value + st_size and a
 * non-empty name, searching .symtab first and .dynsym when .symtab has none. When several
 * contain vaddr the innermost (greatest st_value) wins, then global over weak over local, then
 * the first in the table. Copies the name (as stored, i.e. mangled; truncated to name_cap - 1
 * characters, always NUL-terminated when name_cap > 0) and sets *offset = vaddr - st_value.
 * Returns false, leaving name and offset untouched, when no symbol contains vaddr. */
bool hs_elf_lookup(const struct hs_elf *elf, uintptr_t vaddr, char *name, size_t name_cap,
                   uintptr_t *offset);

/* Finds the exported function `name` (a defined global or weak STT_FUNC of .dynsym, the
 * first in the table: glibc gives its versions of one function the same address) and sets
 * *vaddr to its st_value. Returns false when there is none. */
bool hs_elf_find_function(const struct hs_elf *elf, const char *name, uintptr_t *vaddr);

/* hs_elf_open + hs_elf_lookup + hs_elf_close. pc is a vaddr: the run-time address minus the
 * load bias (0 for ET_EXEC, the load address for ET_DYN; see hs_elf_load_bias). */
bool hs_elf_symbolize(const char *path, uintptr_t pc, char *name, size_t name_cap,
                      uintptr_t *offset);

#endif
