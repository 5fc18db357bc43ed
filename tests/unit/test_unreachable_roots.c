/* test_unreachable_roots.c: root classification (src/memunreachable/roots.c) from synthetic
 * /proc/PID/maps text describing real memory of this process: data of loaded objects, .bss
 * (from ELF program headers, also inside a merged [heap]), anonymous mappings minus their
 * allocations, [heap] and glibc arena heaps excluded, libc's data flagged as malloc state, thread
 * stacks from SP (red zone included), excluded ranges, pseudo and device mappings, registers.
 */
#define _GNU_SOURCE
#include "check.h"
#include "heap_walker.h"
#include "roots.h"
#include "sort.h"
#include "test_unreachable_fake_heap.h"

#include <elf.h>
#include <stdarg.h>
#include <unistd.h>

#define PG 4096ul

static struct hs_arena g_arena;
static char g_maps[8192];
static size_t g_maps_len;

static void line(uintptr_t b, uintptr_t e, const char *perms, uint64_t off, const char *dev,
                 unsigned long inode, const char *path)
{
    g_maps_len += (size_t)snprintf(g_maps + g_maps_len, sizeof(g_maps) - g_maps_len,
                                   "%lx-%lx %s %08lx %s %lu%s%s\n", (unsigned long)b,
                                   (unsigned long)e, perms, (unsigned long)off, dev, inode,
                                   path[0] ? "                          " : "", path);
}

/* A minimal ELF header at base with two PT_LOADs: [0, text_end) and [data_vaddr,
 * data_vaddr + data_memsz). */
static void write_elf(uint8_t *base, uint64_t text_end, uint64_t data_vaddr, uint64_t data_memsz)
{
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof(eh));
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_type = ET_DYN;
    eh.e_phoff = sizeof(eh);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 3;
    memcpy(base, &eh, sizeof(eh));
    Elf64_Phdr ph[3];
    memset(ph, 0, sizeof(ph));
    ph[0].p_type = PT_PHDR;
    ph[1].p_type = PT_LOAD;
    ph[1].p_memsz = text_end;
    ph[2].p_type = PT_LOAD;
    ph[2].p_vaddr = data_vaddr;
    ph[2].p_memsz = data_memsz;
    memcpy(base + sizeof(eh), ph, sizeof(ph));
}

static int by_begin(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    const struct hs_mu_root *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void test_classification(void)
{
    check_context("roots from synthetic maps");
    fake_reset();
    uint8_t *m = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
#define P(i) ((uintptr_t)m + (uintptr_t)(i)*PG)
    /* Arena heaps: two 64 MiB boundaries inside a 192 MiB reservation. */
    uint8_t *res =
        mmap(NULL, 192ul << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(res != MAP_FAILED);
    uintptr_t a1 = ((uintptr_t)res + HS_MU_GLIBC_HEAP_MAX) & ~(HS_MU_GLIBC_HEAP_MAX - 1);
    uintptr_t a2 = a1 + HS_MU_GLIBC_HEAP_MAX;
    CHECK(a1 > (uintptr_t)res && a2 + 0x21000 <= (uintptr_t)res + (192ul << 20));
    mprotect((void *)(a1 - 0x2000), 0x23000, PROT_READ | PROT_WRITE);
    mprotect((void *)a2, 0x21000, PROT_READ | PROT_WRITE);
    uintptr_t *hi1 = (uintptr_t *)a1, *hi2 = (uintptr_t *)a2;
    hi1[0] = a1 + 0x20; /* ar_ptr */
    hi1[2] = 0x20000;   /* size */
    hi1[3] = 0x21000;   /* mprotect_size == rw part */
    hi2[0] = a2 + 0x20;
    hi2[2] = 0x20000;
    hi2[3] = 0x10000; /* does not match the mapping: not an arena heap */

    write_elf(m, 0x3000, 0x3000, 0x1800);               /* libfoo: data ends at P(4) + 0x800 */
    write_elf((uint8_t *)P(7), 0x1000, 0x1000, 0x1100); /* bar: data ends at P(9) + 0x100 */

    fake_add((void *)(P(13) + 0x10), 0x100);
    fake_add((void *)P(14), PG);
    fake_add((void *)P(38), PG); /* thread 3's malloc'ed stack */

    g_maps_len = 0;
    line(P(0), P(1), "r--p", 0, "08:01", 1234, "/usr/lib/libfoo.so");
    line(P(1), P(3), "r-xp", 0x1000, "08:01", 1234, "/usr/lib/libfoo.so");
    line(P(3), P(4), "rw-p", 0x3000, "08:01", 1234, "/usr/lib/libfoo.so");
    line(P(4), P(6), "rw-p", 0, "00:00", 0, "");
    line(P(7), P(8), "r--p", 0, "08:01", 99, "/usr/bin/bar");
    line(P(8), P(9), "rw-p", 0x1000, "08:01", 99, "/usr/bin/bar");
    line(P(9), P(11), "rw-p", 0, "00:00", 0, "[heap]");
    line(P(12), P(16), "rw-p", 0, "00:00", 0, "[anon:scratch]");
    line(P(17), P(19), "rw-p", 0, "00:00", 0, "[heap]");
    line(P(19), P(20), "---p", 0, "00:00", 0, "");
    line(P(20), P(24), "rw-p", 0, "00:00", 0, "");
    line(P(25), P(27), "rw-p", 0, "00:00", 0, "[stack]");
    line(P(28), P(31), "rw-p", 0, "00:00", 0, "");
    line(P(31), P(32), "r--p", 0, "00:00", 0, "[vvar]");
    line(P(32), P(33), "r-xp", 0, "00:00", 0, "[vdso]");
    line(P(33), P(34), "r--p", 0, "00:00", 0, "");
    line(P(34), P(35), "---p", 0, "00:00", 0, "");
    line(P(35), P(36), "rw-s", 0, "00:06", 7, "/dev/dri/card0");
    line(P(36), P(37), "rw-s", 0, "00:01", 8, "/dev/zero (deleted)");
    line(P(37), P(38), "rw-s", 0, "00:0e", 9, "anon_inode:[io_uring]");
    line(P(38), P(40), "rw-p", 0, "00:00", 0, "");
    line(P(41), P(42), "rw-p", 0, "00:00", 0, "[stack]"); /* no thread in it */
    line(P(42), P(43), "rw-p", 0x1d3000, "08:01", 555, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    line(P(43), P(44), "rw-p", 0, "00:00", 0, "");
    line(a1 - 0x2000, a1 + 0x21000, "rw-p", 0, "00:00", 0, "");
    line(a1 + 0x21000, a2, "---p", 0, "00:00", 0, "");
    line(a2, a2 + 0x21000, "rw-p", 0, "00:00", 0, "");
    line(a2 + 0x21000, a2 + HS_MU_GLIBC_HEAP_MAX, "---p", 0, "00:00", 0, "");
    line(0xffffffffff600000ul, 0xffffffffff601000ul, "--xp", 0, "00:00", 0, "[vsyscall]");

    struct hs_mu_thread threads[4];
    memset(threads, 0, sizeof(threads));
    threads[0].sp = P(22) + 0x200;
    threads[0].num_regs = 3;
    threads[0].regs[0] = 11;
    threads[0].regs[1] = 12;
    threads[0].regs[2] = threads[0].sp;
    threads[1].sp = P(26) + 8;
    threads[1].num_regs = HS_MU_MAX_REGS;
    threads[1].regs[HS_MU_MAX_REGS - 1] = 77;
    threads[2].sp = P(38) + 0x100; /* inside an allocation */
    threads[2].num_regs = 1;
    threads[2].regs[0] = threads[2].sp;
    threads[3].sp = 0x10; /* in no mapping */
    threads[3].num_regs = 0;
    struct hs_mu_range excluded[] = {{P(29), P(30)}, {P(45), P(46)}};
    struct hs_mu_capture cap = {
        .pid = getpid(),
        .threads = threads,
        .num_threads = 4,
        .maps_text = g_maps,
        .maps_len = g_maps_len,
        .excluded = excluded,
        .num_excluded = 2,
    };

    struct hs_mu_heap_walker w;
    hs_mu_heap_walker_init(&w, &g_arena);
    CHECK_EQ(hs_mu_heap_walker_collect(&w, &g_fake_heap), 0);
    CHECK_EQ(hs_mu_heap_walker_finish(&w), 0);
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    CHECK_EQ(hs_mu_roots_collect(&cap, &w, &g_arena), 0);
    CHECK_EQ(hs_mu_fault_guard_skipped_pages(), 0);
    hs_mu_fault_guard_remove();

    const unsigned MS = HS_MU_ROOT_MALLOC_STATE;
    struct hs_mu_root expect[] = {
        {P(3), P(4), 0},          /* libfoo .data */
        {P(4), P(4) + 0x800, 0},  /* libfoo .bss */
        {P(4) + 0x800, P(6), 0},  /* anonymous after .bss */
        {P(8), P(9), 0},          /* bar .data */
        {P(9), P(9) + 0x100, 0},  /* bar .bss merged into [heap] */
        {P(12), P(13) + 0x10, 0}, /* anonymous minus allocations */
        {P(13) + 0x110, P(14), 0},
        {P(15), P(16), 0},
        {P(22) + 0x200 - HS_MU_RED_ZONE, P(24), 0}, /* thread 1 stack from SP */
        {P(26) + 8 - HS_MU_RED_ZONE, P(27), 0},     /* main thread [stack] from SP */
        {P(28), P(29), 0},                          /* minus an excluded range */
        {P(30), P(31), 0},
        {P(36), P(37), 0},     /* shared anonymous (/dev/zero) */
        {P(42), P(43), MS},    /* libc's data: malloc state */
        {P(43), P(44), MS},    /* libc's .bss (no headers: whole) */
        {a1 - 0x2000, a1, 0},  /* merged below an arena heap */
        {a2, a2 + 0x21000, 0}, /* heap_info does not match */
    };
    size_t ne = sizeof(expect) / sizeof(expect[0]);
    hs_sort(w.roots, w.num_roots, sizeof(*w.roots), by_begin, NULL);
    hs_sort(expect, ne, sizeof(*expect), by_begin, NULL);
    CHECK_EQ(w.num_roots, ne);
    for (size_t i = 0; i < ne && i < w.num_roots; i++) {
        if (!CHECK(w.roots[i].begin == expect[i].begin && w.roots[i].end == expect[i].end &&
                   w.roots[i].flags == expect[i].flags))
            fprintf(stderr, "    root %zu: got %lx-%lx/%u, want %lx-%lx/%u\n", i,
                    (unsigned long)w.roots[i].begin, (unsigned long)w.roots[i].end,
                    w.roots[i].flags, (unsigned long)expect[i].begin, (unsigned long)expect[i].end,
                    expect[i].flags);
    }
    if (w.num_roots != ne)
        for (size_t i = 0; i < w.num_roots; i++)
            fprintf(stderr, "    root %zu: %lx-%lx\n", i, (unsigned long)w.roots[i].begin,
                    (unsigned long)w.roots[i].end);

    CHECK_EQ(w.num_root_values, 3 + HS_MU_MAX_REGS + 1);
    CHECK_EQ(w.root_values[0], 11);
    CHECK_EQ(w.root_values[1], 12);
    CHECK_EQ(w.root_values[2], P(22) + 0x200);
    CHECK_EQ(w.root_values[3 + HS_MU_MAX_REGS - 1], 77);
    CHECK_EQ(w.root_values[3 + HS_MU_MAX_REGS], P(38) + 0x100);

    check_context("the malloc'ed stack is reached through the SP register");
    hs_mu_heap_walker_mark(&w);
    CHECK(hs_mu_heap_walker_is_marked(&w, hs_mu_heap_walker_find(&w, P(38))));
    hs_mu_heap_walker_destroy(&w);
    munmap(res, 192ul << 20);
    munmap(m, 64 * PG);
#undef P
}

static void test_no_elf_headers(void)
{
    check_context(".bss without readable ELF headers");
    fake_reset();
    uint8_t *m = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#define P(i) ((uintptr_t)m + (uintptr_t)(i)*PG)
    fake_add((void *)(P(2) + 0x40), 0x40); /* a block inside a file mapping: cut out */
    g_maps_len = 0;
    /* The run's first mapping (offset 0) is not in the text: headers cannot be read. */
    line(P(0), P(1), "rw-p", 0x5000, "08:01", 5, "/usr/lib/libz.so");
    line(P(1), P(2), "rw-p", 0, "00:00", 0, "");
    line(P(2), P(3), "rw-p", 0x6000, "08:01", 6, "/usr/lib/liby.so");
    line(P(3), P(4), "rw-p", 0, "00:00", 0, "[heap]");
    line(P(4), P(5), "rw-p", 0, "00:00", 0, "[stack]");
    struct hs_mu_capture cap = {.maps_text = g_maps, .maps_len = g_maps_len};
    struct hs_mu_heap_walker w;
    hs_mu_heap_walker_init(&w, &g_arena);
    hs_mu_heap_walker_collect(&w, &g_fake_heap);
    hs_mu_heap_walker_finish(&w);
    CHECK_EQ(hs_mu_fault_guard_install(), 0);
    CHECK_EQ(hs_mu_roots_collect(&cap, &w, &g_arena), 0);
    hs_mu_fault_guard_remove();
    hs_sort(w.roots, w.num_roots, sizeof(*w.roots), by_begin, NULL);
    /* libz data, its .bss as a whole, liby data minus the block; [heap] and the thread-less
     * [stack] nothing. */
    CHECK_EQ(w.num_roots, 4);
    if (w.num_roots == 4) {
        CHECK(w.roots[0].begin == P(0) && w.roots[0].end == P(1));
        CHECK(w.roots[1].begin == P(1) && w.roots[1].end == P(2));
        CHECK(w.roots[2].begin == P(2) && w.roots[2].end == P(2) + 0x40);
        CHECK(w.roots[3].begin == P(2) + 0x80 && w.roots[3].end == P(3));
    }
    hs_mu_heap_walker_destroy(&w);

    check_context("no maps text: registers only");
    struct hs_mu_thread t = {.sp = P(4) + 8, .num_regs = 1, .regs = {P(2) + 0x50}};
    struct hs_mu_capture cap2 = {.threads = &t, .num_threads = 1};
    hs_mu_heap_walker_init(&w, &g_arena);
    hs_mu_heap_walker_collect(&w, &g_fake_heap);
    hs_mu_heap_walker_finish(&w);
    CHECK_EQ(hs_mu_roots_collect(&cap2, &w, &g_arena), 0);
    CHECK_EQ(w.num_roots, 0);
    CHECK_EQ(w.num_root_values, 1);
    hs_mu_heap_walker_mark(&w);
    CHECK_EQ(w.num_marked, 1);
    hs_mu_heap_walker_destroy(&w);
    munmap(m, 8 * PG);
#undef P
}

int main(void)
{
    test_classification();
    test_no_elf_headers();
    return check_report();
}
