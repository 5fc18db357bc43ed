/* elf_symbols.c: allocation-free, bounds-checked ELF symbol lookup (see elf_symbols.h).
 *
 * Invariant: nothing reads elf->data outside [0, elf->size). Every access goes through
 * in_bounds() (overflow-safe) and copies with memcpy, so hostile values cannot cause an
 * out-of-bounds or unaligned read.
 */
#include "elf_symbols.h"

#include "arena.h"
#include "range_lookup.h"
#include "sort.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* True when [off, off + len) lies inside the image. */
static bool in_bounds(const struct hs_elf *elf, uint64_t off, uint64_t len)
{
    return off <= elf->size && len <= elf->size - off;
}

static bool read_at(const struct hs_elf *elf, uint64_t off, void *out, size_t len)
{
    if (!in_bounds(elf, off, len))
        return false;
    memcpy(out, elf->data + off, len);
    return true;
}

static bool read_ehdr(const struct hs_elf *elf, Elf64_Ehdr *eh)
{
    if (!elf->data || !read_at(elf, 0, eh, sizeof(*eh)))
        return false;
    return memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
           eh->e_ident[EI_DATA] == ELFDATA2LSB;
}

/* The section header table, validated. */
struct shtab {
    uint64_t off;
    uint64_t num;
    uint64_t entsize;
};

static bool read_shtab(const struct hs_elf *elf, const Elf64_Ehdr *eh, struct shtab *t)
{
    t->off = eh->e_shoff;
    t->num = eh->e_shnum;
    t->entsize = eh->e_shentsize;
    if (t->off == 0 || t->entsize < sizeof(Elf64_Shdr))
        return false;
    if (t->num == 0) {
        /* Extended numbering: the count is in the sh_size of section 0. */
        Elf64_Shdr first;
        if (!read_at(elf, t->off, &first, sizeof(first)))
            return false;
        t->num = first.sh_size;
    }
    if (!in_bounds(elf, t->off, 0) || t->num > (elf->size - t->off) / t->entsize)
        return false;
    return t->num > 0;
}

static bool read_shdr(const struct hs_elf *elf, const struct shtab *t, uint64_t i, Elf64_Shdr *sh)
{
    if (i >= t->num)
        return false;
    return read_at(elf, t->off + i * t->entsize, sh, sizeof(*sh));
}

int hs_elf_type(const struct hs_elf *elf)
{
    Elf64_Ehdr eh;
    return read_ehdr(elf, &eh) ? eh.e_type : -1;
}

bool hs_elf_open_image(struct hs_elf *elf, const void *image, size_t size)
{
    elf->data = image;
    elf->size = image ? size : 0;
    elf->mapped = 0;
    elf->dev = 0;
    elf->inode = 0;
    Elf64_Ehdr eh;
    if (read_ehdr(elf, &eh))
        return true;
    elf->data = NULL;
    elf->size = 0;
    return false;
}

bool hs_elf_open(struct hs_elf *elf, const char *path)
{
    elf->data = NULL;
    elf->size = 0;
    elf->mapped = 0;
    elf->dev = 0;
    elf->inode = 0;

    /* Check the type before opening: opening a device or a FIFO can block or have effects. */
    int saved = errno;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        errno = saved;
        return false;
    }
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        errno = saved;
        return false;
    }
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
              (uint64_t)st.st_size <= SIZE_MAX;
    void *p = MAP_FAILED;
    if (ok)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    errno = saved;
    if (p == MAP_FAILED)
        return false;

    elf->data = p;
    elf->size = (size_t)st.st_size;
    elf->mapped = (size_t)st.st_size;
    elf->dev = st.st_dev;
    elf->inode = st.st_ino;
    Elf64_Ehdr eh;
    if (read_ehdr(elf, &eh))
        return true;
    hs_elf_close(elf);
    return false;
}

void hs_elf_close(struct hs_elf *elf)
{
    if (elf->mapped)
        munmap((void *)elf->data, elf->mapped);
    elf->data = NULL;
    elf->size = 0;
    elf->mapped = 0;
}

bool hs_elf_load_bias(const struct hs_elf *elf, uintptr_t map_start, uint64_t map_offset,
                      bool map_exec, uintptr_t *bias)
{
    Elf64_Ehdr eh;
    if (!read_ehdr(elf, &eh) || eh.e_phentsize < sizeof(Elf64_Phdr))
        return false;
    uint64_t phnum = eh.e_phnum;
    if (phnum == PN_XNUM) {
        /* Extended numbering: the count is in the sh_info of section 0. */
        struct shtab t;
        Elf64_Shdr first;
        if (!read_shtab(elf, &eh, &t) || !read_shdr(elf, &t, 0, &first))
            return false;
        phnum = first.sh_info;
    }
    if (!in_bounds(elf, eh.e_phoff, 0) || phnum > (elf->size - eh.e_phoff) / eh.e_phentsize)
        return false;

    uint64_t page_mask = (uint64_t)getpagesize() - 1;
    bool found = false;
    uint64_t best_page = 0, best_delta = 0; /* p_vaddr - p_offset of the chosen segment */
    for (uint64_t i = 0; i < phnum; i++) {
        Elf64_Phdr ph;
        if (!read_at(elf, eh.e_phoff + i * eh.e_phentsize, &ph, sizeof(ph)))
            return false;
        if (ph.p_type != PT_LOAD || ph.p_filesz == 0 || (map_exec && !(ph.p_flags & PF_X)))
            continue;
        uint64_t page = ph.p_offset & ~page_mask;
        if (page > map_offset)
            continue;
        /* The mapping must start inside the segment's file range. */
        if (map_offset - ph.p_offset >= ph.p_filesz && map_offset >= ph.p_offset)
            continue;
        if (!found || page >= best_page) {
            found = true;
            best_page = page;
            best_delta = ph.p_vaddr - ph.p_offset;
        }
    }
    if (!found)
        return false;
    *bias = (uintptr_t)(map_start - map_offset - best_delta);
    return true;
}

/* Best symbol found so far. */
struct best {
    bool found;
    uint64_t value;
    int rank;
    const char *name; /* inside the image */
    size_t name_max;  /* bytes from name to the end of its string table */
};

static int binding_rank(unsigned char info)
{
    switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL:
        return 3;
    case STB_WEAK:
        return 2;
    case STB_LOCAL:
        return 1;
    default:
        return 0;
    }
}

/* The first valid section of type `type` (SHT_SYMTAB or SHT_DYNSYM) and its string table,
 * both inside the file. Real files have at most one of each; looking at one only keeps the
 * work linear in the file size whatever the section table claims. */
static bool first_symtab(const struct hs_elf *elf, const struct shtab *t, uint32_t type,
                         Elf64_Shdr *sh, Elf64_Shdr *str)
{
    for (uint64_t s = 0; s < t->num; s++) {
        if (!read_shdr(elf, t, s, sh) || sh->sh_type != type)
            continue;
        if (sh->sh_entsize < sizeof(Elf64_Sym) || !in_bounds(elf, sh->sh_offset, sh->sh_size))
            continue;
        if (!read_shdr(elf, t, sh->sh_link, str) || str->sh_type != SHT_STRTAB ||
            !in_bounds(elf, str->sh_offset, str->sh_size) || str->sh_size == 0)
            continue;
        return true;
    }
    return false;
}

/* Copies symbol i of the table sh (strings in str) to *sym; true when it can name code: a
 * defined, sized function (or ifunc, or untyped symbol) with a non-empty name inside str. */
static bool function_symbol(const struct hs_elf *elf, const Elf64_Shdr *sh, const Elf64_Shdr *str,
                            uint64_t i, Elf64_Sym *sym)
{
    memcpy(sym, elf->data + sh->sh_offset + i * sh->sh_entsize, sizeof(*sym));
    unsigned char st_type = ELF64_ST_TYPE(sym->st_info);
    if (st_type != STT_FUNC && st_type != STT_GNU_IFUNC && st_type != STT_NOTYPE)
        return false;
    if (sym->st_shndx == SHN_UNDEF || sym->st_size == 0)
        return false;
    return sym->st_name < str->sh_size && elf->data[str->sh_offset + sym->st_name] != '\0';
}

/* Scans the symbol table of type `type` for symbols containing vaddr, updating *best. */
static void scan_symbols(const struct hs_elf *elf, const struct shtab *t, uint32_t type,
                         uint64_t vaddr, struct best *best)
{
    Elf64_Shdr sh, str;
    if (!first_symtab(elf, t, type, &sh, &str))
        return;
    const char *strtab = (const char *)elf->data + str.sh_offset;
    uint64_t count = sh.sh_size / sh.sh_entsize;
    for (uint64_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        if (!function_symbol(elf, &sh, &str, i, &sym))
            continue;
        if (vaddr < sym.st_value || vaddr - sym.st_value >= sym.st_size)
            continue;
        int rank = binding_rank(sym.st_info);
        if (best->found &&
            (sym.st_value < best->value || (sym.st_value == best->value && rank <= best->rank)))
            continue;
        best->found = true;
        best->value = sym.st_value;
        best->rank = rank;
        best->name = strtab + sym.st_name;
        best->name_max = (size_t)(str.sh_size - sym.st_name);
    }
}

bool hs_elf_lookup(const struct hs_elf *elf, uintptr_t vaddr, char *name, size_t name_cap,
                   uintptr_t *offset)
{
    Elf64_Ehdr eh;
    struct shtab t;
    if (!read_ehdr(elf, &eh) || !read_shtab(elf, &eh, &t))
        return false;
    struct best best = {0};
    scan_symbols(elf, &t, SHT_SYMTAB, vaddr, &best);
    if (!best.found)
        scan_symbols(elf, &t, SHT_DYNSYM, vaddr, &best);
    if (!best.found)
        return false;

    if (name_cap > 0) {
        size_t n = 0;
        while (n + 1 < name_cap && n < best.name_max && best.name[n] != '\0')
            n++;
        memcpy(name, best.name, n);
        name[n] = '\0';
    }
    if (offset)
        *offset = (uintptr_t)(vaddr - best.value);
    return true;
}

/* ---- the address-sorted index ---- */

struct hs_elf_sym_entry {
    uint64_t value, size;
    uint64_t name_off; /* into the string table's bytes in the image */
    uint64_t name_max; /* bytes from the name to the end of its string table */
    uint64_t file_order; /* index in the table: among equals the first wins, as in a scan */
    int rank;
};

static int entry_cmp(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct hs_elf_sym_entry *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->file_order < y->file_order ? -1 : x->file_order > y->file_order;
}

/* The entries of one table: what scan_symbols would consider. */
static bool index_table(const struct hs_elf *elf, const struct shtab *t, uint32_t type,
                        struct hs_arena *arena, struct hs_elf_index *ix, int which)
{
    Elf64_Shdr sh, str;
    if (!first_symtab(elf, t, type, &sh, &str))
        return true;
    uint64_t count = sh.sh_size / sh.sh_entsize, n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < count; i++) {
            Elf64_Sym sym;
            if (!function_symbol(elf, &sh, &str, i, &sym))
                continue;
            if (pass == 1) {
                ix->syms[which][n] = (struct hs_elf_sym_entry){
                    sym.st_value, sym.st_size, str.sh_offset + sym.st_name,
                    str.sh_size - sym.st_name, i, binding_rank(sym.st_info)};
                if (sym.st_size > ix->max_size[which])
                    ix->max_size[which] = sym.st_size;
            }
            n++;
        }
        if (pass == 0) {
            if (n == 0)
                return true;
            ix->syms[which] = hs_arena_alloc(arena, n * sizeof(struct hs_elf_sym_entry));
            if (!ix->syms[which])
                return false;
            ix->count[which] = n;
            n = 0;
        }
    }
    hs_sort(ix->syms[which], ix->count[which], sizeof(struct hs_elf_sym_entry), entry_cmp, NULL);
    return true;
}

bool hs_elf_index_build(const struct hs_elf *elf, struct hs_arena *arena, struct hs_elf_index *ix)
{
    memset(ix, 0, sizeof(*ix));
    Elf64_Ehdr eh;
    struct shtab t;
    if (!read_ehdr(elf, &eh) || !read_shtab(elf, &eh, &t))
        return true; /* no symbols: every lookup fails, as hs_elf_lookup's would */
    if (index_table(elf, &t, SHT_SYMTAB, arena, ix, 0) &&
        index_table(elf, &t, SHT_DYNSYM, arena, ix, 1))
        return true;
    hs_elf_index_free(ix, arena);
    return false;
}

void hs_elf_index_free(struct hs_elf_index *ix, struct hs_arena *arena)
{
    for (int w = 0; w < 2; w++)
        hs_arena_free(arena, ix->syms[w], ix->count[w] * sizeof(struct hs_elf_sym_entry));
    memset(ix, 0, sizeof(*ix));
}

/* The best entry of one table for vaddr, as scan_symbols picks it: of the symbols containing
 * it, the one starting highest, then the strongest binding, then the first in file order.
 * Walking down from the highest start, a later entry replaces the best only when strictly
 * better; entries of equal value are met in reverse file order, hence ">=" on rank there. */
static const struct hs_elf_sym_entry *index_find(const struct hs_elf_index *ix, int w,
                                                 uint64_t vaddr)
{
    const struct hs_elf_sym_entry *e = ix->syms[w];
    size_t lo = hs_range_upper_bound(e, ix->count[w], vaddr, value); /* first value > vaddr */
    const struct hs_elf_sym_entry *best = NULL;
    for (size_t i = lo; i-- > 0;) {
        if (vaddr - e[i].value >= ix->max_size[w])
            break; /* no symbol starting this low is big enough to reach vaddr */
        if (vaddr - e[i].value >= e[i].size)
            continue;
        if (best && (e[i].value < best->value ||
                     (e[i].value == best->value && e[i].rank < best->rank)))
            continue;
        best = &e[i];
    }
    return best;
}

bool hs_elf_index_lookup(const struct hs_elf *elf, const struct hs_elf_index *ix, uintptr_t vaddr,
                         char *name, size_t name_cap, uintptr_t *offset)
{
    const struct hs_elf_sym_entry *best = index_find(ix, 0, vaddr);
    if (!best)
        best = index_find(ix, 1, vaddr);
    if (!best)
        return false;
    const char *str = (const char *)elf->data + best->name_off;
    if (name_cap > 0) {
        size_t n = 0;
        while (n + 1 < name_cap && n < best->name_max && str[n] != '\0')
            n++;
        memcpy(name, str, n);
        name[n] = '\0';
    }
    if (offset)
        *offset = (uintptr_t)(vaddr - best->value);
    return true;
}

bool hs_elf_find_function(const struct hs_elf *elf, const char *name, uintptr_t *vaddr)
{
    Elf64_Ehdr eh;
    struct shtab t;
    Elf64_Shdr sh, str;
    if (!read_ehdr(elf, &eh) || !read_shtab(elf, &eh, &t) ||
        !first_symtab(elf, &t, SHT_DYNSYM, &sh, &str))
        return false;
    size_t name_len = strlen(name);
    const char *strtab = (const char *)elf->data + str.sh_offset;
    uint64_t count = sh.sh_size / sh.sh_entsize;
    for (uint64_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, elf->data + sh.sh_offset + i * sh.sh_entsize, sizeof(sym));
        unsigned char st_type = ELF64_ST_TYPE(sym.st_info);
        unsigned char bind = ELF64_ST_BIND(sym.st_info);
        if (st_type != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
            (bind != STB_GLOBAL && bind != STB_WEAK))
            continue;
        if (sym.st_name >= str.sh_size || str.sh_size - sym.st_name <= name_len ||
            memcmp(strtab + sym.st_name, name, name_len + 1) != 0)
            continue;
        *vaddr = (uintptr_t)sym.st_value;
        return true;
    }
    return false;
}

bool hs_elf_symbolize(const char *path, uintptr_t pc, char *name, size_t name_cap,
                      uintptr_t *offset)
{
    struct hs_elf elf;
    if (!hs_elf_open(&elf, path))
        return false;
    bool ok = hs_elf_lookup(&elf, pc, name, name_cap, offset);
    hs_elf_close(&elf);
    return ok;
}
