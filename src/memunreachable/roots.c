/* roots.c: classifies the captured mappings into roots (the rules are in roots.h).
 *
 * The maps text is parsed once (captured_maps.h); then each thread
 * contributes its registers and stack, and each mapping is classified on its own, looking only
 * at its predecessor (for .bss). Every range goes through add_cut(), which cuts out the
 * allocations and the excluded ranges.
 */
#include "roots.h"

#include "captured_maps.h"
#include "proc_maps.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

struct roots_ctx {
    const struct hs_mu_capture *capture;
    struct hs_mu_heap_walker *w;
    struct hs_arena *arena;
    struct hs_mu_maps maps;
    bool oom;
};

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
static uintptr_t elf_data_end(struct roots_ctx *c, const struct hs_mu_map *f)
{
    uintptr_t base = f->load_base;
    const struct hs_mu_map *h = hs_mu_maps_find(&c->maps, base);
    if (!h || h->kind != HS_MU_MAP_FILE || h->inode != f->inode || h->dev != f->dev ||
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
    struct hs_mu_map *m = hs_mu_maps_find(&c->maps, t->sp);
    if (!m || !(m->perms & HS_MAP_READ))
        return;
    if (hs_mu_heap_walker_find(c->w, t->sp) != HS_MU_NONE)
        return; /* a malloc'ed stack: reachable through the SP register */
    uintptr_t b = t->sp - m->start > HS_MU_RED_ZONE ? t->sp - HS_MU_RED_ZONE : m->start;
    add_cut(c, b, m->end, 0);
}

static void add_mapping(struct roots_ctx *c, size_t i)
{
    const struct hs_mu_map *m = &c->maps.maps[i];
    unsigned rw = HS_MAP_READ | HS_MAP_WRITE;
    if ((m->perms & rw) != rw || m->thread_stack)
        return;
    switch (m->kind) {
    case HS_MU_MAP_FILE:
        add_cut(c, m->start, m->end, m->libc ? HS_MU_ROOT_MALLOC_STATE : 0);
        return;
    case HS_MU_MAP_ANON:
    case HS_MU_MAP_HEAP:
        break;
    default:
        return;
    }

    uintptr_t p = m->start;
    const struct hs_mu_map *prev = i > 0 ? &c->maps.maps[i - 1] : NULL;
    if (prev && prev->kind == HS_MU_MAP_FILE && prev->end == m->start) {
        uintptr_t data_end = elf_data_end(c, prev);
        uintptr_t bss_end;
        if (data_end == 0)
            bss_end = m->kind == HS_MU_MAP_HEAP ? m->start : m->end;
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
    if (p >= m->end || m->kind == HS_MU_MAP_HEAP)
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
    int r = hs_mu_maps_load(&c.maps, capture, arena);
    if (r == 0) {
        for (size_t t = 0; t < capture->num_threads; t++)
            add_thread(&c, &capture->threads[t]);
        for (size_t i = 0; i < c.maps.num; i++)
            add_mapping(&c, i);
        if (c.oom)
            r = -ENOMEM;
    }
    hs_mu_maps_free(&c.maps, arena);
    return r;
}
