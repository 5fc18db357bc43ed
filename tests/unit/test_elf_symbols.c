/* test_elf_symbols.c: ELF symbol lookup and load bias (src/common/elf_symbols.c).
 *
 * - Real files: this executable's static and global functions (from .symtab), libc's
 *   functions (from .dynsym) cross-checked with dladdr, load biases with dl_iterate_phdr.
 * - Crafted images: symbol selection rules and every kind of bad header field.
 * - Hostile input: every truncation of real binaries (every byte over the headers, then in
 *   steps) and random corruption of their headers and tables, each image placed so that it
 *   ends at (and starts after) an inaccessible page: any read outside the image crashes the test.
 */
#define _GNU_SOURCE
#include "check.h"
#include "arena.h"
#include "elf_symbols.h"
#include "proc_maps.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__clang__)
#define TEST_NOINLINE __attribute__((noinline))
#else
#define TEST_NOINLINE __attribute__((noinline, noipa))
#endif

/* ---- Functions looked up in this executable ---- */

static volatile int g_sink;

static TEST_NOINLINE int elf_test_static_fn(int x)
{
    for (int i = 0; i < x; i++)
        g_sink += i * x;
    return g_sink;
}

TEST_NOINLINE int elf_test_global_fn(int x)
{
    for (int i = 0; i < x; i++)
        g_sink ^= i + x;
    return g_sink + 1;
}

int elf_test_data_object = 42;

/* ---- Helpers ---- */

static unsigned char *read_whole(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    fstat(fd, &st);
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return buf;
}

/* A region with an inaccessible page on each side; images are copied to its end. */
struct guarded {
    unsigned char *data; /* first usable byte */
    size_t cap;          /* usable bytes (a multiple of the page size) */
};

static void guarded_init(struct guarded *g, size_t need)
{
    size_t page = (size_t)getpagesize();
    g->cap = (need + page - 1) / page * page + page;
    unsigned char *p =
        mmap(NULL, g->cap + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        abort();
    mprotect(p, page, PROT_NONE);
    mprotect(p + page + g->cap, page, PROT_NONE);
    g->data = p + page;
}

static void guarded_free(struct guarded *g)
{
    size_t page = (size_t)getpagesize();
    munmap(g->data - page, g->cap + 2 * page);
}

/* Copies n bytes of src so that they end exactly at the trailing guard page. */
static unsigned char *guarded_place(struct guarded *g, const void *src, size_t n)
{
    unsigned char *dst = g->data + g->cap - n;
    memcpy(dst, src, n);
    return dst;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

struct object {
    const char *name_part; /* "" for the main program */
    uintptr_t addr;        /* dlpi_addr: the load bias */
    char path[PATH_MAX];
    bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct object *o = arg;
    if (o->found)
        return 0;
    if ((o->name_part[0] == '\0' && info->dlpi_name[0] == '\0') ||
        (o->name_part[0] && strstr(info->dlpi_name, o->name_part))) {
        o->addr = info->dlpi_addr;
        snprintf(o->path, sizeof(o->path), "%s", info->dlpi_name);
        o->found = true;
    }
    return 0;
}

static char g_exe[PATH_MAX];

int main(void);

/* ---- Real files ---- */

static void test_exe(void)
{
    check_context("this executable");
    struct object self = {.name_part = ""};
    dl_iterate_phdr(find_object, &self);
    CHECK(self.found);
    uintptr_t static_vaddr = (uintptr_t)&elf_test_static_fn - self.addr;
    uintptr_t global_vaddr = (uintptr_t)&elf_test_global_fn - self.addr;

    char name[256];
    uintptr_t off = 99;
    CHECK(hs_elf_symbolize(g_exe, static_vaddr, name, sizeof(name), &off));
    CHECK_STREQ(name, "elf_test_static_fn");
    CHECK_EQ(off, 0);
    CHECK(hs_elf_symbolize(g_exe, static_vaddr + 7, name, sizeof(name), &off));
    CHECK_STREQ(name, "elf_test_static_fn");
    CHECK_EQ(off, 7);
    CHECK(hs_elf_symbolize(g_exe, global_vaddr + 3, name, sizeof(name), &off));
    CHECK_STREQ(name, "elf_test_global_fn");
    CHECK_EQ(off, 3);
    CHECK(hs_elf_symbolize(g_exe, (uintptr_t)&main - self.addr + 1, name, sizeof(name), &off));
    CHECK_STREQ(name, "main");

    /* Data objects and unmapped addresses have no function symbol. */
    CHECK(!hs_elf_symbolize(g_exe, (uintptr_t)&elf_test_data_object - self.addr, name, sizeof(name),
                            &off));
    CHECK(!hs_elf_symbolize(g_exe, 0, name, sizeof(name), &off));
    CHECK(!hs_elf_symbolize(g_exe, UINTPTR_MAX, name, sizeof(name), &off));

    /* Name truncation. */
    char small[5] = "zzzz";
    CHECK(hs_elf_symbolize(g_exe, static_vaddr, small, 4, &off));
    CHECK_STREQ(small, "elf");
    CHECK(hs_elf_symbolize(g_exe, static_vaddr, small, 1, &off));
    CHECK_STREQ(small, "");
    memcpy(small, "zzzz", 5);
    CHECK(hs_elf_symbolize(g_exe, static_vaddr, small, 0, NULL));
    CHECK_STREQ(small, "zzzz");

    /* Type and load bias, from the mapping of the function. */
    struct hs_elf elf;
    CHECK(hs_elf_open(&elf, g_exe));
    CHECK_EQ(hs_elf_type(&elf), self.addr ? ET_DYN : ET_EXEC);
    static struct hs_map m;
    CHECK(hs_maps_find(0, (uintptr_t)&elf_test_static_fn, &m));
    uintptr_t bias = 1;
    CHECK(hs_elf_load_bias(&elf, m.start, m.offset, true, &bias));
    CHECK_EQ(bias, self.addr);
    bias = 1;
    CHECK(hs_elf_load_bias(&elf, m.start, m.offset, false, &bias));
    CHECK_EQ(bias, self.addr);
    CHECK_EQ(elf.inode, m.inode);
    hs_elf_close(&elf);
    hs_elf_close(&elf); /* twice is fine */
    CHECK_EQ(hs_elf_type(&elf), (unsigned long long)-1);
}

struct bias_check {
    struct hs_elf *elf;
    const char *path;
    uintptr_t expect;
    int checked, wrong;
};

/* Every file mapping of the object must give the same load bias. */
static int check_bias_cb(const struct hs_map *m, void *arg)
{
    struct bias_check *b = arg;
    /* (Skip the mapping hs_elf_open made of the file itself.) */
    if (strcmp(m->path, b->path) != 0 || m->start == (uintptr_t)b->elf->data)
        return 0;
    uintptr_t bias;
    if (hs_elf_load_bias(b->elf, m->start, m->offset, m->perms & HS_MAP_EXEC, &bias)) {
        b->checked++;
        if (bias != b->expect) {
            b->wrong++;
            fprintf(stderr, "bias %lx for mapping %lx offset %lx of %s, expected %lx\n",
                    (unsigned long)bias, (unsigned long)m->start, (unsigned long)m->offset, m->path,
                    (unsigned long)b->expect);
        }
    }
    return 0;
}

static void check_index_agrees(const struct hs_elf *elf, uintptr_t lo, uintptr_t hi, size_t step);

static void test_libc(void)
{
    check_context("libc");
    struct object libc = {.name_part = "libc.so"};
    dl_iterate_phdr(find_object, &libc);
    CHECK(libc.found);
    static struct hs_map m;
    CHECK(hs_maps_find(0, (uintptr_t)&getpid, &m));
    struct hs_elf elf;
    CHECK(hs_elf_open(&elf, m.path));
    CHECK_EQ(hs_elf_type(&elf), ET_DYN);
    uintptr_t bias = 0;
    CHECK(hs_elf_load_bias(&elf, m.start, m.offset, true, &bias));
    CHECK_EQ(bias, libc.addr);

    struct bias_check bc = {&elf, m.path, libc.addr, 0, 0};
    hs_maps_foreach(0, check_bias_cb, &bc);
    CHECK(bc.checked >= 3);
    CHECK_EQ(bc.wrong, 0);

    /* The sorted index names every address of libc's text as the scan does. */
    uintptr_t mid = (uintptr_t)&getpid - bias;
    check_index_agrees(&elf, mid - 0x40000, mid + 0x40000, 13);
    hs_elf_close(&elf);

    /* Functions of libc (or of whatever interposes them, e.g. a sanitizer runtime). */
    void *fns[] = {(void *)&getpid,  (void *)&write,        (void *)&qsort,
                   (void *)&opendir, (void *)&pthread_self, (void *)&dl_iterate_phdr};
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        for (uintptr_t delta = 0; delta < 8; delta += 3) {
            uintptr_t pc = (uintptr_t)fns[i] + delta;
            Dl_info info;
            CHECK(dladdr((void *)pc, &info) != 0);
            char name[256];
            uintptr_t off = 0;
            bool ok = hs_maps_find(0, pc, &m) && hs_elf_open(&elf, m.path) &&
                      hs_elf_load_bias(&elf, m.start, m.offset, true, &bias) &&
                      hs_elf_lookup(&elf, pc - bias, name, sizeof(name), &off);
            hs_elf_close(&elf);
            CHECK(ok);
            if (!ok || !info.dli_saddr)
                continue;
            /* Aliases may be named differently; the symbol's address must agree. */
            CHECK_EQ(pc - off, (uintptr_t)info.dli_saddr);
            CHECK_EQ(off, delta);
        }
    }
}

static void test_open_failures(void)
{
    check_context("open failures");
    struct hs_elf elf;
    char name[64];
    uintptr_t off;
    CHECK(!hs_elf_open(&elf, "/nonexistent/file"));
    hs_elf_close(&elf);
    CHECK(!hs_elf_open(&elf, "/"));
    CHECK(!hs_elf_open(&elf, "/dev/null"));
    CHECK(!hs_elf_open(&elf, "/dev/zero"));
    CHECK(!hs_elf_open(&elf, "/proc/self/maps")); /* st_size 0 */
    CHECK(!hs_elf_symbolize("/etc/passwd", 0, name, sizeof(name), &off));

    char path[] = "/tmp/hs_elf_test_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(!hs_elf_open(&elf, path)); /* empty */
    CHECK(write(fd, ELFMAG, SELFMAG) == SELFMAG);
    CHECK(!hs_elf_open(&elf, path)); /* just the magic */
    close(fd);
    unlink(path);

    CHECK(!hs_elf_open_image(&elf, NULL, 100));
    CHECK(!hs_elf_open_image(&elf, "\177ELF", 4));
    CHECK(!hs_elf_lookup(&elf, 0, name, sizeof(name), &off));
    uintptr_t bias;
    CHECK(!hs_elf_load_bias(&elf, 0x1000, 0, true, &bias));
}

/* ---- Crafted images ---- */

struct sym_spec {
    const char *name; /* NULL: st_name is name_off */
    uint64_t value, size;
    unsigned char type, bind;
    uint16_t shndx;
    uint32_t name_off;
};

struct table_spec {
    uint32_t type; /* SHT_SYMTAB or SHT_DYNSYM */
    const struct sym_spec *syms;
    size_t n;
};

/* Where build_elf put things. */
struct layout {
    size_t size;
    size_t shoff;
    size_t phoff;
    size_t tab_shdr[2]; /* offsets of each table's section header */
    size_t str_shdr[2];
};

/* Builds [ehdr][phdrs][shdrs: null, (table, strtab) * ntab][tables and strtabs] into buf.
 * With unterminated, the last strtab loses its final NUL and ends the image. */
static size_t build_elf(unsigned char *buf, size_t cap, const struct table_spec *tabs, size_t ntab,
                        const Elf64_Phdr *phdrs, size_t nph, bool unterminated, struct layout *lay)
{
    memset(buf, 0, cap);
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = (uint16_t)nph;
    size_t pos = sizeof(Elf64_Ehdr);
    memcpy(buf + pos, phdrs, nph * sizeof(Elf64_Phdr));
    lay->phoff = pos;
    pos += nph * sizeof(Elf64_Phdr);
    eh.e_shoff = pos;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = (uint16_t)(1 + 2 * ntab);
    lay->shoff = pos;
    size_t sh_pos = pos;
    pos += (1 + 2 * ntab) * sizeof(Elf64_Shdr);

    for (size_t t = 0; t < ntab; t++) {
        /* String table: "\0" then the names. */
        size_t str_start = pos + (tabs[t].n + 1) * sizeof(Elf64_Sym);
        size_t str_len = 1;
        Elf64_Sym sym0 = {0};
        memcpy(buf + pos, &sym0, sizeof(sym0));
        for (size_t i = 0; i < tabs[t].n; i++) {
            const struct sym_spec *s = &tabs[t].syms[i];
            Elf64_Sym sym = {0};
            if (s->name) {
                sym.st_name = (uint32_t)str_len;
                size_t l = strlen(s->name) + 1;
                memcpy(buf + str_start + str_len, s->name, l);
                str_len += l;
            } else {
                sym.st_name = s->name_off;
            }
            sym.st_info = ELF64_ST_INFO(s->bind, s->type);
            sym.st_shndx = s->shndx;
            sym.st_value = s->value;
            sym.st_size = s->size;
            memcpy(buf + pos + (i + 1) * sizeof(Elf64_Sym), &sym, sizeof(sym));
        }
        if (unterminated && t == ntab - 1)
            str_len--;
        Elf64_Shdr tab = {0}, str = {0};
        tab.sh_type = tabs[t].type;
        tab.sh_offset = pos;
        tab.sh_size = (tabs[t].n + 1) * sizeof(Elf64_Sym);
        tab.sh_entsize = sizeof(Elf64_Sym);
        tab.sh_link = (uint32_t)(2 + 2 * t);
        str.sh_type = SHT_STRTAB;
        str.sh_offset = str_start;
        str.sh_size = str_len;
        lay->tab_shdr[t] = sh_pos + (1 + 2 * t) * sizeof(Elf64_Shdr);
        lay->str_shdr[t] = sh_pos + (2 + 2 * t) * sizeof(Elf64_Shdr);
        memcpy(buf + lay->tab_shdr[t], &tab, sizeof(tab));
        memcpy(buf + lay->str_shdr[t], &str, sizeof(str));
        pos = str_start + str_len;
    }
    memcpy(buf, &eh, sizeof(eh));
    lay->size = pos;
    return pos;
}

static void put64(unsigned char *img, size_t off, uint64_t v)
{
    memcpy(img + off, &v, 8);
}
static void put32(unsigned char *img, size_t off, uint32_t v)
{
    memcpy(img + off, &v, 4);
}
static void put16(unsigned char *img, size_t off, uint16_t v)
{
    memcpy(img + off, &v, 2);
}

/* Looks vaddr up in the image; returns the name or "" (static buffer). */
static struct hs_arena g_index_arena = HS_ARENA_INIT;

static const char *look(const unsigned char *img, size_t size, uintptr_t vaddr, uintptr_t *off)
{
    static char name[64];
    struct hs_elf elf;
    name[0] = '\0';
    if (!hs_elf_open_image(&elf, img, size))
        return "<bad>";
    uintptr_t o = 0;
    if (!hs_elf_lookup(&elf, vaddr, name, sizeof(name), &o))
        name[0] = '\0';
    if (off)
        *off = o;
    /* The sorted index must answer exactly the same. */
    struct hs_elf_index ix;
    CHECK(hs_elf_index_build(&elf, &g_index_arena, &ix));
    char name2[64] = "";
    uintptr_t o2 = 0;
    bool found2 = hs_elf_index_lookup(&elf, &ix, vaddr, name2, sizeof(name2), &o2);
    CHECK_STREQ(name2, name);
    CHECK_EQ(found2, name[0] != '\0');
    if (found2)
        CHECK_EQ(o2, o);
    hs_elf_index_free(&ix, &g_index_arena);
    return name;
}

/* Index and scan agree on every address of [lo, hi) at the given step (a real file). */
static void check_index_agrees(const struct hs_elf *elf, uintptr_t lo, uintptr_t hi, size_t step)
{
    struct hs_elf_index ix;
    CHECK(hs_elf_index_build(elf, &g_index_arena, &ix));
    size_t named = 0, mismatches = 0;
    for (uintptr_t a = lo; a < hi; a += step) {
        char n1[256] = "", n2[256] = "";
        uintptr_t o1 = 0, o2 = 0;
        bool f1 = hs_elf_lookup(elf, a, n1, sizeof(n1), &o1);
        bool f2 = hs_elf_index_lookup(elf, &ix, a, n2, sizeof(n2), &o2);
        named += f1;
        if (f1 != f2 || strcmp(n1, n2) != 0 || o1 != o2) {
            if (mismatches++ < 5)
                fprintf(stderr, "index differs at %#lx: scan %s+%lu, index %s+%lu\n",
                        (unsigned long)a, n1, (unsigned long)o1, n2, (unsigned long)o2);
        }
    }
    CHECK_EQ(mismatches, 0);
    CHECK(named > 100);
    hs_elf_index_free(&ix, &g_index_arena);
}

static const struct sym_spec k_syms[] = {
    {"outer", 0x1000, 0x1000, STT_NOTYPE, STB_GLOBAL, 1, 0},
    {"inner", 0x1100, 0x100, STT_FUNC, STB_LOCAL, 1, 0},
    {"alias_weak", 0x1100, 0x100, STT_FUNC, STB_WEAK, 1, 0},
    {"alias_global", 0x1100, 0x80, STT_FUNC, STB_GLOBAL, 1, 0},
    {"obj", 0x3000, 0x10, STT_OBJECT, STB_GLOBAL, 1, 0},
    {"undef", 0x4000, 0x10, STT_FUNC, STB_GLOBAL, SHN_UNDEF, 0},
    {"zero", 0x5000, 0, STT_FUNC, STB_GLOBAL, 1, 0},
    {"ifunc", 0x6000, 0x20, STT_GNU_IFUNC, STB_GLOBAL, 1, 0},
    {"", 0x7000, 0x10, STT_FUNC, STB_GLOBAL, 1, 0},
    {NULL, 0x8000, 0x10, STT_FUNC, STB_GLOBAL, 1, 100000}, /* name out of range */
    {"top", UINT64_MAX - 0xf, 0x10, STT_FUNC, STB_GLOBAL, 1, 0},
    {"wrap", UINT64_MAX - 0xf, 0x100, STT_FUNC, STB_LOCAL, 1, 0}, /* wraps past the end */
    {"last_unterminated", 0x9000, 0x10, STT_FUNC, STB_GLOBAL, 1, 0},
};

static void test_crafted_symbols(void)
{
    check_context("crafted symbols");
    static unsigned char buf[8192];
    struct guarded g;
    guarded_init(&g, sizeof(buf));
    struct layout lay;
    Elf64_Phdr ph = {.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_filesz = 0x10000};
    struct table_spec tab = {SHT_SYMTAB, k_syms, sizeof(k_syms) / sizeof(k_syms[0])};
    size_t size = build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, false, &lay);
    unsigned char *img = guarded_place(&g, buf, size);
    uintptr_t off;

    CHECK_STREQ(look(img, size, 0x1110, &off), "alias_global"); /* innermost, then global */
    CHECK_EQ(off, 0x10);
    CHECK_STREQ(look(img, size, 0x1190, &off), "alias_weak"); /* weak over local */
    CHECK_STREQ(look(img, size, 0x1050, &off), "outer");      /* sized NOTYPE */
    CHECK_EQ(off, 0x50);
    CHECK_STREQ(look(img, size, 0x1fff, &off), "outer");
    CHECK_STREQ(look(img, size, 0x2000, &off), "");
    CHECK_STREQ(look(img, size, 0x3005, &off), ""); /* object */
    CHECK_STREQ(look(img, size, 0x4005, &off), ""); /* undefined */
    CHECK_STREQ(look(img, size, 0x5000, &off), ""); /* zero size */
    CHECK_STREQ(look(img, size, 0x6001, &off), "ifunc");
    CHECK_STREQ(look(img, size, 0x7001, &off), ""); /* empty name */
    CHECK_STREQ(look(img, size, 0x8001, &off), ""); /* name out of range */
    CHECK_STREQ(look(img, size, UINT64_MAX, &off), "top");
    CHECK_EQ(off, 0xf);
    CHECK_STREQ(look(img, size, 0x50, &off), ""); /* "wrap" does not wrap around */
    CHECK_STREQ(look(img, size, 0x9008, &off), "last_unterminated");

    /* The last name runs into the end of the image without a NUL: it stops there. */
    size = build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, true, &lay);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x9008, &off), "last_unterminated");

    /* .dynsym is used when .symtab has nothing, and only then. */
    static const struct sym_spec only_dyn[] = {
        {"dyn_fn", 0x2000, 0x10, STT_FUNC, STB_GLOBAL, 1, 0},
        {"dyn_outer", 0x1000, 0x10, STT_FUNC, STB_GLOBAL, 1, 0}};
    struct table_spec both[2] = {tab, {SHT_DYNSYM, only_dyn, 2}};
    size = build_elf(buf, sizeof(buf), both, 2, &ph, 1, false, &lay);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x2004, &off), "dyn_fn");
    CHECK_STREQ(look(img, size, 0x1004, &off), "outer");
    both[0].type = SHT_PROGBITS;
    size = build_elf(buf, sizeof(buf), both, 2, &ph, 1, false, &lay);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x1004, &off), "dyn_outer");

    /* Bad header fields, one at a time. */
    size = build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, false, &lay);
    struct {
        const char *what;
        size_t at;
        int width;
        uint64_t value;
        const char *expect;
    } cases[] = {
        {"e_shoff 0", offsetof(Elf64_Ehdr, e_shoff), 8, 0, ""},
        {"e_shoff past the end", offsetof(Elf64_Ehdr, e_shoff), 8, 1u << 20, ""},
        {"e_shoff overflows", offsetof(Elf64_Ehdr, e_shoff), 8, UINT64_MAX - 10, ""},
        {"e_shentsize 0", offsetof(Elf64_Ehdr, e_shentsize), 2, 0, ""},
        {"e_shentsize small", offsetof(Elf64_Ehdr, e_shentsize), 2, 63, ""},
        {"e_shentsize big", offsetof(Elf64_Ehdr, e_shentsize), 2, 0xffff, ""},
        {"e_shnum huge", offsetof(Elf64_Ehdr, e_shnum), 2, 0xfeff, ""},
        {"class 32", EI_CLASS, 1, ELFCLASS32, "<bad>"},
        {"big endian", EI_DATA, 1, ELFDATA2MSB, "<bad>"},
        {"magic", 1, 1, 'X', "<bad>"},
        {"sh_link out of range", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_link), 4, 7, ""},
        {"sh_link to itself", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_link), 4, 1, ""},
        {"sh_entsize 0", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_entsize), 8, 0, ""},
        {"sh_entsize 23", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_entsize), 8, 23, ""},
        {"sh_size huge", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_size), 8, UINT64_MAX, ""},
        {"sh_offset huge", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_offset), 8, UINT64_MAX - 8,
         ""},
        {"sh_offset past", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_offset), 8, size, ""},
        {"symtab NOBITS", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_type), 4, SHT_NOBITS, ""},
        {"strtab not STRTAB", lay.str_shdr[0] + offsetof(Elf64_Shdr, sh_type), 4, SHT_PROGBITS, ""},
        {"strtab size 0", lay.str_shdr[0] + offsetof(Elf64_Shdr, sh_size), 8, 0, ""},
        {"strtab size huge", lay.str_shdr[0] + offsetof(Elf64_Shdr, sh_size), 8, UINT64_MAX, ""},
        {"strtab offset past", lay.str_shdr[0] + offsetof(Elf64_Shdr, sh_offset), 8, size - 2, ""},
        /* Shorter sh_size keeps the symbols that still fit. */
        {"symtab shortened", lay.tab_shdr[0] + offsetof(Elf64_Shdr, sh_size), 8,
         5 * sizeof(Elf64_Sym) + 5, "alias_global"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_context(cases[i].what);
        build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, false, &lay);
        if (cases[i].width == 1)
            buf[cases[i].at] = (unsigned char)cases[i].value;
        else if (cases[i].width == 2)
            put16(buf, cases[i].at, (uint16_t)cases[i].value);
        else if (cases[i].width == 4)
            put32(buf, cases[i].at, (uint32_t)cases[i].value);
        else
            put64(buf, cases[i].at, cases[i].value);
        img = guarded_place(&g, buf, size);
        CHECK_STREQ(look(img, size, 0x1110, &off), cases[i].expect);
        CHECK_STREQ(look(img, size, 0x6001, &off),
                    strcmp(cases[i].expect, "alias_global") == 0 ? "" : cases[i].expect);
    }

    /* Extended section numbering: e_shnum 0, the count in section 0's sh_size. */
    check_context("extended numbering");
    build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, false, &lay);
    put16(buf, offsetof(Elf64_Ehdr, e_shnum), 0);
    put64(buf, lay.shoff + offsetof(Elf64_Shdr, sh_size), 3);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x6001, &off), "ifunc");
    put64(buf, lay.shoff + offsetof(Elf64_Shdr, sh_size), UINT64_MAX);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x6001, &off), "");
    put64(buf, lay.shoff + offsetof(Elf64_Shdr, sh_size), 0);
    img = guarded_place(&g, buf, size);
    CHECK_STREQ(look(img, size, 0x6001, &off), "");

    /* Every truncation of the crafted image. */
    check_context("crafted truncations");
    size = build_elf(buf, sizeof(buf), &tab, 1, &ph, 1, false, &lay);
    int insane = 0;
    for (size_t len = 0; len <= size; len++) {
        img = guarded_place(&g, buf, len);
        const char *r = look(img, len, 0x1110, &off);
        if (len < size && strcmp(r, "alias_global") == 0 && len < lay.shoff)
            insane++;
    }
    CHECK_EQ(insane, 0);
    guarded_free(&g);
}

static void test_crafted_bias(void)
{
    check_context("crafted load bias");
    static unsigned char buf[4096];
    struct layout lay;
    /* Layout of a -z separate-code PIE whose read-only data segment and the page of its RW
     * segment start in the same page (0x3000). */
    Elf64_Phdr ph[] = {
        {.p_type = PT_PHDR, .p_offset = 0x40, .p_vaddr = 0x40, .p_filesz = 0x200},
        {.p_type = PT_LOAD, .p_flags = PF_R, .p_offset = 0, .p_vaddr = 0, .p_filesz = 0x5d0},
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_X,
         .p_offset = 0x1000,
         .p_vaddr = 0x1000,
         .p_filesz = 0x1800},
        {.p_type = PT_LOAD,
         .p_flags = PF_R,
         .p_offset = 0x3000,
         .p_vaddr = 0x3000,
         .p_filesz = 0x100},
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_W,
         .p_offset = 0x3df0,
         .p_vaddr = 0x4df0,
         .p_filesz = 0x200},
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_X,
         .p_offset = 0x5000,
         .p_vaddr = 0x5000,
         .p_filesz = 0},
    };
    struct table_spec tab = {SHT_SYMTAB, k_syms, 1};
    size_t size = build_elf(buf, sizeof(buf), &tab, 1, ph, 6, false, &lay);
    struct hs_elf elf;
    CHECK(hs_elf_open_image(&elf, buf, size));
    uintptr_t b = 0x7f0000000000, bias;
    CHECK(hs_elf_load_bias(&elf, b, 0, false, &bias) && bias == b);
    CHECK(hs_elf_load_bias(&elf, b + 0x1000, 0x1000, true, &bias) && bias == b);
    CHECK(hs_elf_load_bias(&elf, b + 0x2000, 0x2000, true, &bias) && bias == b);
    /* The RW mapping (file page 0x3000 at vaddr 0x4000). */
    CHECK(hs_elf_load_bias(&elf, b + 0x4000, 0x3000, false, &bias) && bias == b);
    /* Offsets in no segment. */
    CHECK(!hs_elf_load_bias(&elf, b + 0x9000, 0x9000, false, &bias));
    CHECK(!hs_elf_load_bias(&elf, b + 0x5000, 0x5000, true, &bias)); /* p_filesz 0 */
    /* Only executable segments for executable mappings. */
    CHECK(!hs_elf_load_bias(&elf, b, 0, true, &bias));

    /* ET_EXEC: p_vaddr 0x400000 at offset 0 gives bias 0. */
    Elf64_Phdr exec_ph[] = {
        {.p_type = PT_LOAD,
         .p_flags = PF_R | PF_X,
         .p_offset = 0,
         .p_vaddr = 0x400000,
         .p_filesz = 0x1800},
    };
    size = build_elf(buf, sizeof(buf), &tab, 1, exec_ph, 1, false, &lay);
    put16(buf, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
    CHECK(hs_elf_open_image(&elf, buf, size));
    CHECK_EQ(hs_elf_type(&elf), ET_EXEC);
    CHECK(hs_elf_load_bias(&elf, 0x400000, 0, true, &bias) && bias == 0);

    /* Bad program header fields. */
    put16(buf, offsetof(Elf64_Ehdr, e_phentsize), 10);
    CHECK(!hs_elf_load_bias(&elf, 0x400000, 0, true, &bias));
    put16(buf, offsetof(Elf64_Ehdr, e_phentsize), sizeof(Elf64_Phdr));
    put64(buf, offsetof(Elf64_Ehdr, e_phoff), UINT64_MAX - 20);
    CHECK(!hs_elf_load_bias(&elf, 0x400000, 0, true, &bias));
    put64(buf, offsetof(Elf64_Ehdr, e_phoff), size - 10);
    CHECK(!hs_elf_load_bias(&elf, 0x400000, 0, true, &bias));
    put64(buf, offsetof(Elf64_Ehdr, e_phoff), sizeof(Elf64_Ehdr));
    /* PN_XNUM: the count is in section 0's sh_info. */
    put16(buf, offsetof(Elf64_Ehdr, e_phnum), PN_XNUM);
    put32(buf, lay.shoff + offsetof(Elf64_Shdr, sh_info), 1);
    CHECK(hs_elf_load_bias(&elf, 0x400000, 0, true, &bias) && bias == 0);
    put32(buf, lay.shoff + offsetof(Elf64_Shdr, sh_info), 0xffffffff);
    CHECK(!hs_elf_load_bias(&elf, 0x400000, 0, true, &bias));
}

/* ---- Hostile versions of real files ---- */

/* Runs every entry point on an image; returns false if an answer is not sane. Counts the
 * lookups that found a symbol in *found. */
static bool exercise(const unsigned char *img, size_t len, const uintptr_t *addrs, size_t n,
                     const char (*expect)[64], size_t *found)
{
    struct hs_elf elf;
    bool sane = true;
    if (!hs_elf_open_image(&elf, img, len))
        return true;
    (void)hs_elf_type(&elf);
    uintptr_t bias;
    (void)hs_elf_load_bias(&elf, 0x7f0000001000, 0x1000, true, &bias);
    (void)hs_elf_load_bias(&elf, 0x7f0000000000, 0, false, &bias);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        memset(name, 0x55, sizeof(name));
        uintptr_t off = 0;
        if (hs_elf_lookup(&elf, addrs[i], name, sizeof(name), &off)) {
            (*found)++;
            if (memchr(name, '\0', sizeof(name)) == NULL || name[0] == '\0')
                sane = false;
            if (expect && strcmp(name, expect[i]) != 0)
                sane = false;
        }
    }
    return sane;
}

static void hostile_file(const char *path, const uintptr_t *addrs, size_t naddrs,
                         size_t corruptions)
{
    size_t size;
    unsigned char *file = read_whole(path, &size);
    CHECK(file != NULL && size > 4096);
    if (!file)
        return;
    struct guarded g;
    guarded_init(&g, size);

    /* What the whole file answers. */
    char expect[16][64];
    struct hs_elf elf;
    CHECK(hs_elf_open_image(&elf, file, size));
    for (size_t i = 0; i < naddrs; i++) {
        uintptr_t off;
        if (!hs_elf_lookup(&elf, addrs[i], expect[i], sizeof(expect[i]), &off))
            expect[i][0] = '\0';
    }

    /* Truncations: every length over the headers, then steps. A prefix either fails or
     * gives the whole file's answer (section headers are at the end, so it fails). */
    int insane = 0;
    size_t tried = 0;
    size_t step = size / 400 + 1;
    for (size_t len = 0; len < size; len += len < 8192 ? 1 : step) {
        const unsigned char *img = guarded_place(&g, file, len);
        struct hs_elf t;
        if (!hs_elf_open_image(&t, img, len))
            continue;
        tried++;
        for (size_t i = 0; i < naddrs; i++) {
            char name[64];
            uintptr_t off;
            if (hs_elf_lookup(&t, addrs[i], name, sizeof(name), &off) &&
                strcmp(name, expect[i]) != 0)
                insane++;
        }
        uintptr_t bias;
        (void)hs_elf_load_bias(&t, 0x7f0000001000, 0x1000, true, &bias);
    }
    CHECK(tried > 8000);
    CHECK_EQ(insane, 0);

    /* Random corruption of the headers and tables, restored after each round. */
    Elf64_Ehdr eh;
    memcpy(&eh, file, sizeof(eh));
    struct {
        size_t off, len;
    } regions[8];
    size_t nreg = 0;
    regions[nreg].off = 0, regions[nreg++].len = sizeof(eh);
    regions[nreg].off = eh.e_phoff, regions[nreg++].len = (size_t)eh.e_phnum * eh.e_phentsize;
    regions[nreg].off = eh.e_shoff, regions[nreg++].len = (size_t)eh.e_shnum * eh.e_shentsize;
    for (size_t i = 0; i < eh.e_shnum && nreg < 8; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, file + eh.e_shoff + i * sizeof(sh), sizeof(sh));
        if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_STRTAB) {
            regions[nreg].off = sh.sh_offset;
            regions[nreg++].len = sh.sh_size < 4096 ? sh.sh_size : 4096;
        }
    }
    unsigned char *img = guarded_place(&g, file, size);
    static const uint64_t interesting[] = {0,
                                           1,
                                           0x7f,
                                           0x80,
                                           0xff,
                                           0xffff,
                                           0x10000,
                                           0x7fffffff,
                                           0xffffffff,
                                           UINT64_MAX,
                                           UINT64_MAX - 63,
                                           0x8000000000000000ull};
    int insane_names = 0;
    size_t found = 0;
    for (size_t round = 0; round < corruptions; round++) {
        size_t offs[8];
        unsigned char saved[8][8];
        size_t k = 1 + rnd() % 8;
        for (size_t j = 0; j < k; j++) {
            size_t r = rnd() % nreg;
            size_t span = regions[r].len ? regions[r].len : 1;
            size_t o = regions[r].off + rnd() % span;
            if (o + 8 > size)
                o = size - 8;
            offs[j] = o;
            memcpy(saved[j], img + o, 8);
            uint64_t v;
            switch (rnd() % 3) {
            case 0:
                img[o] = (unsigned char)rnd();
                break;
            case 1:
                v = interesting[rnd() % (sizeof(interesting) / sizeof(interesting[0]))];
                memcpy(img + o, &v, 8);
                break;
            default:
                v = rnd() % (size * 2);
                memcpy(img + o, &v, rnd() % 2 ? 8 : 4);
                break;
            }
        }
        if (!exercise(img, size, addrs, naddrs, NULL, &found))
            insane_names++;
        while (k-- > 0)
            memcpy(img + offs[k], saved[k], 8);
    }
    CHECK_EQ(insane_names, 0);
    /* Many corrupted images must still be read far enough to find symbols. */
    CHECK(found > corruptions / 4);
    CHECK(memcmp(img, file, size) == 0);

    /* The file path: truncated and corrupted copies on disk. */
    char tmp[] = "/tmp/hs_elf_hostile_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    int bad = 0;
    for (int i = 0; i < 60 && fd >= 0; i++) {
        size_t len = i < 30 ? (size_t)i * 67 : size - (size_t)(i - 30) * (size / 31);
        unsigned char *copy = malloc(size);
        memcpy(copy, file, size);
        if (i % 2)
            for (int j = 0; j < 16; j++)
                copy[rnd() % (sizeof(eh) + (size_t)eh.e_phnum * eh.e_phentsize)] ^=
                    (unsigned char)rnd();
        if (ftruncate(fd, 0) != 0 || pwrite(fd, copy, len, 0) != (ssize_t)len)
            bad++;
        free(copy);
        for (size_t a = 0; a < naddrs; a++) {
            char name[64];
            uintptr_t off;
            if (hs_elf_symbolize(tmp, addrs[a], name, sizeof(name), &off) && name[0] == '\0')
                bad++;
        }
    }
    CHECK_EQ(bad, 0);
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    guarded_free(&g);
    free(file);
}

static void test_hostile(void)
{
    struct object self = {.name_part = ""};
    dl_iterate_phdr(find_object, &self);
    uintptr_t exe_addrs[] = {(uintptr_t)&elf_test_static_fn - self.addr,
                             (uintptr_t)&elf_test_global_fn - self.addr + 2,
                             (uintptr_t)&main - self.addr, 0, UINTPTR_MAX};
    check_context("hostile copies of this executable");
    hostile_file(g_exe, exe_addrs, 5, 20000);

    struct object libc = {.name_part = "libc.so"};
    dl_iterate_phdr(find_object, &libc);
    uintptr_t libc_addrs[] = {(uintptr_t)&getpid - libc.addr, (uintptr_t)&qsort - libc.addr + 5,
                              0x1000};
    check_context("hostile copies of libc");
    hostile_file(libc.path, libc_addrs, 3, 3000);
}

int main(void)
{
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
    g_exe[n > 0 ? n : 0] = '\0';
    g_sink = elf_test_static_fn(3) + elf_test_global_fn(4) + elf_test_data_object;

    test_exe();
    test_libc();
    test_open_failures();
    test_crafted_symbols();
    test_crafted_bias();
    test_hostile();
    return check_report();
}
