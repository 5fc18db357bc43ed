/* roots.c: classifies the captured mappings into roots (the rules are in roots.h).
 *
 * The maps text is parsed once into a compact array (the kernel lists mappings in ascending
 * address order, so a thread's stack mapping is found by binary search); then each thread
 * contributes its registers and stack, and each mapping is classified on its own, looking only
 * at its predecessor (for .bss). Every range goes through add_cut(), which cuts out the
 * allocations and the excluded ranges.
 */
#include "roots.h"

#include "proc_maps.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

enum map_kind {
    MAP_ANON,   /* unnamed or [anon:...] */
    MAP_FILE,   /* a file (path with an inode) */
    MAP_HEAP,   /* [heap] */
    MAP_STACK,  /* [stack] */
    MAP_PSEUDO, /* [vvar], [vdso], [vsyscall], ... */
    MAP_DEVICE, /* /dev/... other than /dev/zero and /dev/shm/, anon_inode:... */
};

struct mu_map {
    uintptr_t start, end;
    uintptr_t load_base;
    uint64_t inode;
    dev_t dev;
    unsigned perms;
    enum map_kind kind;
    bool thread_stack; /* some thread's SP is in it */
    bool libc;         /* a mapping of glibc's libc.so */
};

struct roots_ctx {
    const struct hs_mu_capture *capture;
    struct hs_mu_heap_walker *w;
    struct hs_arena *arena;
    struct mu_map *maps;
    size_t num_maps, cap_maps;
    bool oom;
};

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static enum map_kind kind_of(const struct hs_map *m)
{
    const char *p = m->path;
    if (p[0] == '\0')
        return MAP_ANON;
    if (p[0] == '[') {
        if (strcmp(p, "[heap]") == 0)
            return MAP_HEAP;
        if (starts_with(p, "[stack"))
            return MAP_STACK;
        if (starts_with(p, "[anon:") || starts_with(p, "[anon_shmem:"))
            return MAP_ANON;
        return MAP_PSEUDO;
    }
    if (starts_with(p, "anon_inode:"))
        return MAP_DEVICE;
    if (starts_with(p, "/dev/") && strcmp(p, "/dev/zero") != 0 && !starts_with(p, "/dev/shm/"))
        return MAP_DEVICE;
    return MAP_FILE;
}

/* glibc's C library: "libc.so.6", or "libc-2.31.so" and the like in older releases. */
static bool is_libc(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return starts_with(base, "libc.so") ||
           (starts_with(base, "libc-") && strstr(base, ".so") != NULL);
}

static int add_map(const struct hs_map *m, void *arg)
{
    struct roots_ctx *c = arg;
    if (m->end <= m->start)
        return 0;
    if (c->num_maps == c->cap_maps) {
        size_t ncap = c->cap_maps ? c->cap_maps * 2 : 256;
        struct mu_map *n = hs_arena_alloc(c->arena, ncap * sizeof(*n));
        if (!n) {
            c->oom = true;
            return 1;
        }
        if (c->maps) {
            memcpy(n, c->maps, c->num_maps * sizeof(*n));
            hs_arena_free(c->arena, c->maps, c->cap_maps * sizeof(*n));
        }
        c->maps = n;
        c->cap_maps = ncap;
    }
    struct mu_map *d = &c->maps[c->num_maps++];
    d->start = m->start;
    d->end = m->end;
    d->load_base = m->load_base;
    d->inode = m->inode;
    d->dev = m->dev;
    d->perms = m->perms;
    d->kind = kind_of(m);
    d->thread_stack = false;
    d->libc = d->kind == MAP_FILE && is_libc(m->path);
    return 0;
}

static int parse_maps(struct roots_ctx *c)
{
    const struct hs_mu_capture *cap = c->capture;
    if (!cap->maps_text || cap->maps_len == 0)
        return 0;
    struct hs_map *scratch = hs_arena_alloc(c->arena, sizeof(*scratch));
    if (!scratch)
        return -ENOMEM;
    struct hs_maps_parser p;
    hs_maps_parser_init(&p, scratch);
    int r = hs_maps_parser_feed(&p, cap->maps_text, cap->maps_len, add_map, c);
    if (r == 0)
        hs_maps_parser_finish(&p, add_map, c);
    hs_arena_free(c->arena, scratch, sizeof(*scratch));
    return c->oom ? -ENOMEM : 0;
}

/* The mapping containing addr, or NULL. The kernel lists mappings in address order; a
 * text that is not sorted still works, by a linear search. */
static struct mu_map *map_at(struct roots_ctx *c, uintptr_t addr)
{
    size_t lo = 0, hi = c->num_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->maps[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->num_maps && c->maps[lo].start <= addr && addr < c->maps[lo].end)
        return &c->maps[lo];
    for (size_t i = 0; i < c->num_maps; i++)
        if (c->maps[i].start <= addr && addr < c->maps[i].end)
            return &c->maps[i];
    return NULL;
}

/* Adds [b, e) as roots (with HS_MU_ROOT_* flags) minus the allocations and the excluded
 * ranges in it. */
static void add_cut(struct roots_ctx *c, uintptr_t b, uintptr_t e, unsigned flags)
{
    const struct hs_mu_heap_walker *w = c->w;
    const struct hs_mu_capture *cap = c->capture;
    while (b < e) {
        /* The lowest hole overlapping [b, e): an excluded range or the next allocation. */
        uintptr_t hole_b = e, hole_e = e;
        for (size_t k = 0; k < cap->num_excluded; k++) {
            const struct hs_mu_range *x = &cap->excluded[k];
            if (x->end <= b || x->begin >= e || x->end <= x->begin)
                continue;
            uintptr_t xb = x->begin > b ? x->begin : b;
            if (xb < hole_b) {
                hole_b = xb;
                hole_e = x->end;
            }
        }
        size_t i = hs_mu_heap_walker_first_ending_after(w, b);
        if (i < w->num_allocs && w->allocs[i].begin < e) {
            uintptr_t ab = w->allocs[i].begin > b ? w->allocs[i].begin : b;
            if (ab < hole_b) {
                hole_b = ab;
                hole_e = w->allocs[i].end;
            }
        }
        if (hole_b > b && !hs_mu_heap_walker_add_root_flags(c->w, b, hole_b, flags))
            c->oom = true;
        if (hole_e <= b) /* cannot happen; never loop forever */
            break;
        b = hole_e;
    }
}

/* End of the data of the ELF object whose file mapping is f (bias + highest PT_LOAD end), or
 * 0 when its headers are not readable in memory. Only reads inside a readable mapping of the
 * same file. */
static uintptr_t elf_data_end(struct roots_ctx *c, const struct mu_map *f)
{
    uintptr_t base = f->load_base;
    const struct mu_map *h = map_at(c, base);
    if (!h || h->kind != MAP_FILE || h->inode != f->inode || h->dev != f->dev ||
        !(h->perms & HS_MAP_READ) || h->end - base < sizeof(Elf64_Ehdr))
        return 0;
    Elf64_Ehdr eh;
    hs_mu_read_guarded(&eh, base, sizeof(eh));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 256 ||
        eh.e_phoff >= h->end - base || eh.e_phnum * sizeof(Elf64_Phdr) > h->end - base - eh.e_phoff)
        return 0;
    uintptr_t lowest = UINTPTR_MAX, highest = 0;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        hs_mu_read_guarded(&ph, base + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type != PT_LOAD)
            continue;
        if (ph.p_vaddr < lowest)
            lowest = ph.p_vaddr;
        if (ph.p_vaddr + ph.p_memsz > highest)
            highest = ph.p_vaddr + ph.p_memsz;
    }
    if (highest == 0)
        return 0;
    /* The first PT_LOAD maps file offset 0 at its page: base is its page. */
    uintptr_t bias = base - (lowest & ~(uintptr_t)4095);
    return bias + highest;
}

/* True when [a, end) starts with a glibc heap_info whose mprotect_size is end - a. */
static bool is_arena_heap(uintptr_t a, uintptr_t end)
{
    uintptr_t hi[4]; /* ar_ptr, prev, size, mprotect_size */
    if (end - a < sizeof(hi))
        return false;
    hs_mu_read_guarded(hi, a, sizeof(hi));
    uintptr_t size = hi[2], mprotect_size = hi[3];
    return hi[0] != 0 && size != 0 && size <= mprotect_size && mprotect_size == end - a &&
           (size & 4095) == 0 && (mprotect_size & 4095) == 0 &&
           mprotect_size <= HS_MU_GLIBC_HEAP_MAX;
}

static void add_thread(struct roots_ctx *c, const struct hs_mu_thread *t)
{
    size_t nregs = t->num_regs < HS_MU_MAX_REGS ? t->num_regs : HS_MU_MAX_REGS;
    for (size_t r = 0; r < nregs; r++)
        if (!hs_mu_heap_walker_add_root_value(c->w, t->regs[r]))
            c->oom = true;
    struct mu_map *m = map_at(c, t->sp);
    if (!m)
        return;
    m->thread_stack = true;
    if (!(m->perms & HS_MAP_READ))
        return;
    if (hs_mu_heap_walker_find(c->w, t->sp) != HS_MU_NONE)
        return; /* a malloc'ed stack: reachable through the SP register */
    uintptr_t b = t->sp - m->start > HS_MU_RED_ZONE ? t->sp - HS_MU_RED_ZONE : m->start;
    add_cut(c, b, m->end, 0);
}

static void add_mapping(struct roots_ctx *c, size_t i)
{
    const struct mu_map *m = &c->maps[i];
    unsigned rw = HS_MAP_READ | HS_MAP_WRITE;
    if ((m->perms & rw) != rw || m->thread_stack)
        return;
    switch (m->kind) {
    case MAP_FILE:
        add_cut(c, m->start, m->end, m->libc ? HS_MU_ROOT_MALLOC_STATE : 0);
        return;
    case MAP_ANON:
    case MAP_HEAP:
        break;
    default:
        return;
    }

    uintptr_t p = m->start;
    const struct mu_map *prev = i > 0 ? &c->maps[i - 1] : NULL;
    if (prev && prev->kind == MAP_FILE && prev->end == m->start) {
        uintptr_t data_end = elf_data_end(c, prev);
        uintptr_t bss_end;
        if (data_end == 0)
            bss_end = m->kind == MAP_HEAP ? m->start : m->end;
        else if (data_end <= m->start)
            bss_end = m->start;
        else if (data_end >= m->end)
            bss_end = m->end;
        else
            bss_end = (data_end + 7) & ~(uintptr_t)7;
        if (bss_end > m->end)
            bss_end = m->end;
        add_cut(c, m->start, bss_end, prev->libc ? HS_MU_ROOT_MALLOC_STATE : 0);
        p = bss_end;
    }
    if (p >= m->end || m->kind == MAP_HEAP)
        return;
    uintptr_t a = (m->end - 1) & ~(HS_MU_GLIBC_HEAP_MAX - 1);
    if (a >= p && a > 0 && is_arena_heap(a, m->end)) {
        add_cut(c, p, a, 0);
        return;
    }
    add_cut(c, p, m->end, 0);
}

int hs_mu_roots_collect(const struct hs_mu_capture *capture, struct hs_mu_heap_walker *w,
                        struct hs_arena *arena)
{
    struct roots_ctx c = {.capture = capture, .w = w, .arena = arena};
    int r = parse_maps(&c);
    if (r == 0) {
        for (size_t t = 0; t < capture->num_threads; t++)
            add_thread(&c, &capture->threads[t]);
        for (size_t i = 0; i < c.num_maps; i++)
            add_mapping(&c, i);
        if (c.oom)
            r = -ENOMEM;
    }
    hs_arena_free(arena, c.maps, c.cap_maps * sizeof(*c.maps));
    return r;
}
