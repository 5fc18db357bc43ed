/* symbolizer.c: pc -> function, file:line and inlined frames with elfutils (see symbolizer.h).
 *
 * Layout of the state:
 * - files: one record per distinct declared path, found through a hash table. A file is opened
 *   at most once, on the first lookup that needs it: its PT_LOAD headers, build-id and
 *   .gnu_debuglink are read with libelf, then it is reported to a Dwfl of its own at load bias
 *   0, so that libdwfl addresses are the file's vaddrs (rel_pc) whatever the mapping: one
 *   object mapped at several places is read once, and modules never overlap.
 * - maps: sorted by start, never overlapping (a new mapping trims what it overlaps). Runs
 *   (see symbolizer.h) are recomputed lazily after a change; the bias of a run is computed
 *   when first needed and kept in its first mapping.
 * - cache: a hash table (hash_table.h) on (pc, is_return_address) -> a slice of an
 *   append-only frame array. Any change of the mappings clears it (lazily, at the next lookup).
 * - strings we create (paths, build-id hex, demangled names) live in a chunked pool; the
 *   others point into libelf/libdw data of files that stay open until hs_symbolizer_free.
 */
#define _GNU_SOURCE
#include "symbolizer.h"

#include "hash.h"
#define HS_HASH_TABLE_LIBC
#include "hash_table.h"
#include "proc_maps.h"
#include "range_lookup.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Deepest scope nesting examined for one pc (deeper inline chains lose middle frames). */
#define MAX_CHAIN 128
#define DEFAULT_DEBUG_ROOT "/usr/lib/debug"

enum { FILE_UNTRIED = 0, FILE_LOADED = 1, FILE_FAILED = -1 };

struct sym_load {
    uint64_t offset, vaddr, filesz;
};

/* One function symbol, in libdwfl addresses (rel_pc + dwfl_bias). */
struct sym_ent {
    uint64_t addr, size; /* a symbol without st_size extends to the end of its section */
    const char *name;    /* version suffix removed */
    unsigned rank;       /* preference among symbols at one address */
    bool sized;          /* st_size was given */
};

/* Address range of a subprogram (a concrete function definition), in DWARF addresses. */
struct sub_range {
    Dwarf_Addr lo, hi;
    Dwarf_Die die;
};

/* The subprograms of one compilation unit, sorted by lo; built on the first pc in the CU. */
struct cu_index {
    Dwarf_Off cu_off; /* key; cu_used says whether the slot is taken */
    bool cu_used;
    struct sub_range *subs;
    size_t nsubs;
};

static inline uint64_t cu_off_hash(const Dwarf_Off *off, const void *ctx)
{
    (void)ctx;
    return *off;
}
static inline uint64_t cu_hash(const struct cu_index *c, const void *ctx)
{
    return cu_off_hash(&c->cu_off, ctx);
}
static inline bool cu_matches(const struct cu_index *c, const Dwarf_Off *off, const void *ctx)
{
    (void)ctx;
    return c->cu_off == *off;
}
static inline bool cu_is_empty(const struct cu_index *c)
{
    return !c->cu_used;
}
static inline void cu_clear(struct cu_index *c)
{
    c->cu_used = false;
}

/* CU offset -> its subprogram index (hash_table.h). */
HS_HASH_TABLE_DEFINE(cu_table, struct cu_index, Dwarf_Off, cu_off_hash, cu_hash, cu_matches,
                     cu_is_empty, cu_clear)

/* Address range of a compilation unit, from its DIE, in DWARF addresses. */
struct cu_range {
    Dwarf_Addr lo, hi;
    Dwarf_Die cudie;
};

struct sym_file {
    uint64_t hash;
    const char *path; /* as declared (pool) */
    size_t path_len;
    bool is_file; /* absolute path: may be opened */
    int state;    /* FILE_* */
    char *host_path;
    struct sym_load *loads;
    size_t nloads;
    unsigned char *build_id;
    size_t build_id_len;
    const char *build_id_hex; /* pool, or "" */
    char *debuglink;          /* .gnu_debuglink name, or NULL */
    uint32_t debuglink_crc;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    Dwarf_Addr dwfl_bias; /* libdwfl address = rel_pc + dwfl_bias (0 in practice) */
    struct hs_symbolizer *owner;
    /* Function symbols sorted by address, built on first use (libdwfl's own address lookup
     * scans the whole table for every address). */
    struct sym_ent *syms;
    size_t nsyms;
    bool syms_built;
    /* Per-CU subprogram indexes (by CU offset), so that the function containing a pc is
     * found by binary search instead of a walk over the CU's DIEs. */
    struct cu_table cus;
    /* CU ranges from the CU DIEs, for when .debug_aranges is missing or incomplete (clang
     * emits none by default, and libdwfl 0.188 then finds no CU), built on first need. */
    struct cu_range *curanges;
    size_t ncuranges;
    bool curanges_built;
    Dwarf_Addr curanges_bias;
    /* Run computation scratch. */
    bool run_open;
    size_t run_base;
    uint64_t run_last_offset;
};

/* path -> file record (hash_table.h): the table holds the records, keys read from them. */
typedef struct sym_file *sym_file_ref;
struct path_key {
    const char *path;
    size_t len;
    uint64_t hash;
};

static inline uint64_t path_key_hash(const struct path_key *k, const void *ctx)
{
    (void)ctx;
    return k->hash;
}
static inline uint64_t file_hash(const sym_file_ref *f, const void *ctx)
{
    (void)ctx;
    return (*f)->hash;
}
static inline bool file_matches(const sym_file_ref *f, const struct path_key *k, const void *ctx)
{
    (void)ctx;
    return (*f)->hash == k->hash && (*f)->path_len == k->len &&
           memcmp((*f)->path, k->path, k->len) == 0;
}
static inline bool file_is_empty(const sym_file_ref *f)
{
    return *f == NULL;
}
static inline void file_clear(sym_file_ref *f)
{
    *f = NULL;
}

HS_HASH_TABLE_DEFINE(file_table, sym_file_ref, struct path_key, path_key_hash, file_hash,
                     file_matches, file_is_empty, file_clear)

struct sym_map {
    uintptr_t start, end;
    uint64_t offset;
    struct sym_file *file; /* NULL for anonymous memory */
    size_t run_base;       /* index of the first mapping of the run */
    uintptr_t bias;        /* valid in the run's first mapping when bias_known */
    bool bias_known;
};

struct cache_slot {
    uintptr_t pc;
    size_t first; /* index in frames */
    uint32_t count;
    uint8_t used;
    uint8_t is_ret;
};

struct cache_key {
    uintptr_t pc;
    bool is_ret;
};

static inline uint64_t cache_key_hash(const struct cache_key *k, const void *ctx)
{
    (void)ctx;
    return (uint64_t)k->pc ^ (k->is_ret ? 0x5bd1e995u : 0);
}
static inline uint64_t cache_slot_hash(const struct cache_slot *c, const void *ctx)
{
    return cache_key_hash(&(struct cache_key){c->pc, c->is_ret}, ctx);
}
static inline bool cache_matches(const struct cache_slot *c, const struct cache_key *k,
                                 const void *ctx)
{
    (void)ctx;
    return c->pc == k->pc && c->is_ret == k->is_ret;
}
static inline bool cache_is_empty(const struct cache_slot *c)
{
    return !c->used;
}
static inline void cache_slot_clear(struct cache_slot *c)
{
    c->used = 0;
}

/* (pc, is_ret) -> its frames in s->frames (hash_table.h). */
HS_HASH_TABLE_DEFINE(cache_table, struct cache_slot, struct cache_key, cache_key_hash,
                     cache_slot_hash, cache_matches, cache_is_empty, cache_slot_clear)

struct str_chunk {
    struct str_chunk *next;
    size_t used, cap;
    char data[];
};

struct hs_symbolizer {
    char *sysroot; /* NULL when none */
    char **user_roots;
    size_t nuser_roots;
    char *debug_path; /* colon-separated roots, read by libdwfl through cb.debuginfo_path */
    Dwfl_Callbacks cb;
    bool demangle;

    struct sym_map *maps;
    size_t nmaps, cap_maps;
    bool runs_dirty;

    struct sym_file **files;
    size_t nfiles, cap_files;
    struct file_table by_path;

    struct cache_table cache;
    bool cache_stale;
    struct hs_frame_info *frames;
    size_t nframes, cap_frames;

    struct str_chunk *chunks;
};

/* ---- Process-wide setup ---- */

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static pthread_once_t g_elf_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_demangle_once = PTHREAD_ONCE_INIT;
static cxa_demangle_fn g_cxa_demangle;

static void elf_init_once(void)
{
    elf_version(EV_CURRENT);
}

static void demangle_init_once(void)
{
    void *fn = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!fn) {
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h)
            fn = dlsym(h, "__cxa_demangle");
    }
    /* A data pointer to function pointer conversion is fine on the platforms we target. */
    memcpy(&g_cxa_demangle, &fn, sizeof(fn));
}

/* ---- Small helpers ---- */

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(p, n * elem);
    if (!q)
        return NULL;
    *cap = n;
    return q;
}

/* Copies len bytes of str, NUL-terminated, into the string pool. */
static const char *pool_dup(struct hs_symbolizer *s, const char *str, size_t len)
{
    struct str_chunk *c = s->chunks;
    if (!c || c->cap - c->used < len + 1) {
        size_t cap = len + 1 > 65536 ? len + 1 : 65536;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = s->chunks;
        s->chunks = c;
    }
    char *p = c->data + c->used;
    memcpy(p, str, len);
    p[len] = '\0';
    c->used += len + 1;
    return p;
}

static char *join2(const char *a, const char *b)
{
    char *r;
    if (asprintf(&r, "%s%s", a, b) < 0)
        return NULL;
    return r;
}

/* Directory part of an absolute or relative path ("" for a bare name, "/" stays ""). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup("");
    return strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Opens path read-only if it is a regular file, without blocking on FIFOs or touching
 * devices (they are rejected by stat before any open). Returns the descriptor or -1. */
static int open_regular(const char *path, struct stat *st_out)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    if (st_out)
        *st_out = st;
    return fd;
}

static bool is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* CRC-32 of a whole file, with zlib's crc32() (the CRC .gnu_debuglink records: reflected
 * 0xEDB88320, the same as zlib's). */
static bool crc32_fd(int fd, uint32_t *out)
{
    unsigned char buf[65536];
    uLong crc = crc32(0L, Z_NULL, 0);
    off_t pos = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf), pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            break;
        crc = crc32(crc, buf, (uInt)n);
        pos += n;
    }
    *out = (uint32_t)crc;
    return true;
}

/* ---- Debug roots ---- */

/* Rebuilds s->debug_path: user roots (newest first), SYSROOT/usr/lib/debug, /usr/lib/debug. */
static int rebuild_debug_path(struct hs_symbolizer *s)
{
    size_t len = sizeof(DEFAULT_DEBUG_ROOT);
    for (size_t i = 0; i < s->nuser_roots; i++)
        len += strlen(s->user_roots[i]) + 1;
    if (s->sysroot)
        len += strlen(s->sysroot) + sizeof(DEFAULT_DEBUG_ROOT) + 1;
    char *p = malloc(len);
    if (!p)
        return -1;
    p[0] = '\0';
    for (size_t i = s->nuser_roots; i-- > 0;) {
        strcat(p, s->user_roots[i]);
        strcat(p, ":");
    }
    if (s->sysroot) {
        strcat(p, s->sysroot);
        strcat(p, DEFAULT_DEBUG_ROOT ":");
    }
    strcat(p, DEFAULT_DEBUG_ROOT);
    free(s->debug_path);
    s->debug_path = p;
    return 0;
}

/* ---- Separate debug files (replaces dwfl_standard_find_debuginfo, which may use
 *      debuginfod) ---- */

/* Opens candidate `path` as the debug file of f if it matches: same build-id when both have
 * one, else the debuglink CRC when check_crc. Never returns the main file itself. */
static int try_debug_candidate(struct sym_file *f, const char *path, bool check_crc, uint32_t crc,
                               const struct stat *main_st, char **name_out)
{
    struct stat st;
    int fd = open_regular(path, &st);
    if (fd < 0)
        return -1;
    if (main_st && st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino) {
        close(fd);
        return -1;
    }
    bool ok = false;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (e && elf_kind(e) == ELF_K_ELF) {
        const void *bid = NULL;
        ssize_t n = dwelf_elf_gnu_build_id(e, &bid);
        if (f->build_id_len > 0 && n > 0) {
            ok = (size_t)n == f->build_id_len && memcmp(bid, f->build_id, f->build_id_len) == 0;
        } else if (check_crc) {
            uint32_t got;
            ok = crc32_fd(fd, &got) && got == crc;
        } else {
            ok = true;
        }
    }
    if (e)
        elf_end(e);
    if (ok) {
        *name_out = strdup(path);
        if (*name_out)
            return fd;
    }
    close(fd);
    return -1;
}

/* Tries DIR/[SUB/]NAME. */
static int try_in_dir(struct sym_file *f, const char *dir, const char *sub, const char *name,
                      bool check_crc, uint32_t crc, const struct stat *main_st, char **name_out)
{
    char *path;
    int r = sub ? asprintf(&path, "%s/%s/%s", dir, sub, name) : asprintf(&path, "%s/%s", dir, name);
    if (r < 0)
        return -1;
    int fd = try_debug_candidate(f, path, check_crc, crc, main_st, name_out);
    free(path);
    return fd;
}

/* The debuglink search for the file whose directory is `dir` (from the file's host path,
 * declared path or real path): DIR/NAME, DIR/.debug/NAME, ROOT/DIR/NAME for each root. */
static int search_debuglink(struct hs_symbolizer *s, struct sym_file *f, const char *dir,
                            const char *name, bool check_crc, uint32_t crc,
                            const struct stat *main_st, char **name_out, bool local_dirs)
{
    int fd = -1;
    if (local_dirs) {
        fd = try_in_dir(f, dir[0] ? dir : ".", NULL, name, check_crc, crc, main_st, name_out);
        if (fd >= 0)
            return fd;
        fd = try_in_dir(f, dir[0] ? dir : ".", ".debug", name, check_crc, crc, main_st, name_out);
        if (fd >= 0)
            return fd;
    }
    if (dir[0] != '/')
        return -1; /* roots only apply to absolute directories */
    char *roots = strdup(s->debug_path);
    if (!roots)
        return -1;
    char *save = NULL;
    for (char *root = strtok_r(roots, ":", &save); root && fd < 0;
         root = strtok_r(NULL, ":", &save)) {
        char *rootdir = join2(root, dir);
        if (!rootdir)
            break;
        fd = try_in_dir(f, rootdir, NULL, name, check_crc, crc, main_st, name_out);
        free(rootdir);
    }
    free(roots);
    return fd;
}

/* Reads the build-id stored in the .gnu_debugaltlink section of the file at path. */
static ssize_t altlink_build_id(const char *path, unsigned char *out, size_t cap)
{
    int fd = open_regular(path, NULL);
    if (fd < 0)
        return -1;
    ssize_t result = -1;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t shstrndx;
    if (e && elf_kind(e) == ELF_K_ELF && elf_getshdrstrndx(e, &shstrndx) == 0) {
        for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh))
                continue;
            const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
            if (!nm || strcmp(nm, ".gnu_debugaltlink") != 0)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            if (!d || !d->d_buf)
                break;
            const char *p = d->d_buf;
            const char *nul = memchr(p, '\0', d->d_size);
            if (!nul)
                break;
            size_t idlen = d->d_size - (size_t)(nul + 1 - p);
            if (idlen == 0 || idlen > cap)
                break;
            memcpy(out, nul + 1, idlen);
            result = (ssize_t)idlen;
            break;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return result;
}

/* Main debug file: by build-id, then by debuglink (or FILE.debug when there is none) around
 * the host path, the declared path and the real path. */
static int find_main_debuginfo(struct hs_symbolizer *s, struct sym_file *f, Dwfl_Module *mod,
                               void **userdata, const char *modname, Dwarf_Addr base,
                               const char *file_name, const char *debuglink_file,
                               GElf_Word debuglink_crc, char **name_out)
{
    int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                          debuglink_crc, name_out);
    if (fd >= 0)
        return fd;

    const char *host = f->host_path;
    struct stat main_st;
    bool have_st = stat(host, &main_st) == 0;
    char *made = NULL;
    const char *name = debuglink_file;
    bool check_crc = debuglink_file != NULL;
    if (!name) {
        made = join2(base_of(host), ".debug");
        if (!made)
            return -1;
        name = made;
    }
    const struct stat *mst = have_st ? &main_st : NULL;

    char *hdir = dir_of(host);
    if (hdir)
        fd = search_debuglink(s, f, hdir, name, check_crc, debuglink_crc, mst, name_out, true);
    if (fd < 0 && strcmp(host, f->path) != 0) {
        char *ddir = dir_of(f->path);
        if (ddir)
            fd = search_debuglink(s, f, ddir, name, check_crc, debuglink_crc, mst, name_out, false);
        free(ddir);
    }
    if (fd < 0) {
        char *real = realpath(host, NULL);
        if (real && strcmp(real, host) != 0) {
            char *rdir = dir_of(real);
            if (rdir && (!hdir || strcmp(rdir, hdir) != 0))
                fd = search_debuglink(s, f, rdir, name, check_crc, debuglink_crc, mst, name_out,
                                      true);
            free(rdir);
        }
        free(real);
    }
    free(hdir);
    free(made);
    return fd;
}

/* dwz alternate file: by build-id in the roots, then SYSROOT/ALTNAME (its build-id checked
 * against the link). When this fails libdw still tries /usr/lib/debug/.build-id and the
 * link's own path. */
static int find_alt_debuginfo(struct hs_symbolizer *s, Dwfl_Module *mod, void **userdata,
                              const char *modname, Dwarf_Addr base, const char *file_name,
                              const char *altname, char **name_out)
{
    int fd =
        dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, altname, 0, name_out);
    if (fd >= 0 || !s->sysroot || !altname || altname[0] != '/' || !file_name)
        return fd;
    unsigned char want[64];
    ssize_t wlen = altlink_build_id(file_name, want, sizeof(want));
    if (wlen <= 0)
        return -1;
    char *path = join2(s->sysroot, altname);
    if (!path)
        return -1;
    fd = open_regular(path, NULL);
    bool ok = false;
    if (fd >= 0) {
        Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        const void *bid = NULL;
        if (e && elf_kind(e) == ELF_K_ELF) {
            ssize_t n = dwelf_elf_gnu_build_id(e, &bid);
            ok = n == wlen && memcmp(bid, want, (size_t)wlen) == 0;
        }
        if (e)
            elf_end(e);
    }
    if (ok) {
        *name_out = path;
        return fd;
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return -1;
}

/* Our Dwfl_Callbacks.find_debuginfo. libdwfl calls it for the main debug file (with the
 * file's .gnu_debuglink, or NULL) and for a dwz alternate file (with the .gnu_debugaltlink
 * name and crc 0); the two are told apart by comparing with the file's own debuglink. */
static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname,
                             Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                             GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    struct sym_file *f = userdata ? *userdata : NULL;
    if (!f || !f->owner || !f->host_path)
        return -1;
    bool is_main =
        debuglink_file == NULL || (f->debuglink && strcmp(debuglink_file, f->debuglink) == 0 &&
                                   debuglink_crc == f->debuglink_crc);
    int fd;
    if (is_main) {
        /* libdwfl asks again for a module whose debug file it could not use (a truncated
         * one), passing the name we gave it last time (the module's, which it frees only
         * with the module): drop it rather than overwrite it. */
        free(*debuginfo_file_name);
        *debuginfo_file_name = NULL;
        fd = find_main_debuginfo(f->owner, f, mod, userdata, modname, base, file_name,
                                 debuglink_file, debuglink_crc, debuginfo_file_name);
    } else {
        fd = find_alt_debuginfo(f->owner, mod, userdata, modname, base, file_name, debuglink_file,
                                debuginfo_file_name);
    }
    if (fd < 0)
        errno = 0; /* nothing found is not an error */
    return fd;
}

/* Our Dwfl_Callbacks.find_elf: never needed (files are reported with dwfl_report_elf), and
 * dwfl_build_id_find_elf is avoided because it may query debuginfod. */
static int find_elf_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                       char **file_name, Elf **elfp)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
    *elfp = NULL;
    return -1;
}

/* ---- Files ---- */

/* The record of path[0..len), created if new. */
static struct sym_file *file_get(struct hs_symbolizer *s, const char *path, size_t len)
{
    struct path_key key = {path, len, hs_hash_bytes(path, len)};
    struct sym_file **known = file_table_find(&s->by_path, &key);
    if (known)
        return *known;
    if (!file_table_reserve(&s->by_path, 1))
        return NULL;
    struct sym_file **fs = grow(s->files, &s->cap_files, s->nfiles + 1, sizeof(*fs));
    if (!fs)
        return NULL;
    s->files = fs;
    struct sym_file *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->path = pool_dup(s, path, len);
    if (!f->path) {
        free(f);
        return NULL;
    }
    f->path_len = len;
    f->hash = key.hash;
    cu_table_init(&f->cus, &hs_table_libc, NULL, 50);
    f->is_file = path[0] == '/';
    f->build_id_hex = "";
    f->owner = s;
    s->files[s->nfiles++] = f;
    file_table_put(&s->by_path, &f);
    return f;
}

/* Reads what we need of f's ELF headers with libelf. */
static bool file_read_elf(struct hs_symbolizer *s, struct sym_file *f)
{
    int fd = open_regular(f->host_path, NULL);
    if (fd < 0)
        return false;
    bool ok = false;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr eh;
    size_t phnum;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
        (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getphdrnum(e, &phnum) != 0 ||
        phnum == 0)
        goto out;
    f->loads = calloc(phnum, sizeof(*f->loads));
    if (!f->loads)
        goto out;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        f->loads[f->nloads++] = (struct sym_load){ph.p_offset, ph.p_vaddr, ph.p_filesz};
    }
    if (f->nloads == 0)
        goto out;

    const void *bid = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(e, &bid);
    if (n > 0 && n <= 64) {
        f->build_id = malloc((size_t)n);
        char hex[129];
        if (f->build_id) {
            memcpy(f->build_id, bid, (size_t)n);
            f->build_id_len = (size_t)n;
            for (ssize_t i = 0; i < n; i++) {
                hex[2 * i] = "0123456789abcdef"[f->build_id[i] >> 4];
                hex[2 * i + 1] = "0123456789abcdef"[f->build_id[i] & 15];
            }
            const char *h = pool_dup(s, hex, (size_t)n * 2);
            if (h)
                f->build_id_hex = h;
        }
    }
    GElf_Word crc = 0;
    const char *link = dwelf_elf_gnu_debuglink(e, &crc);
    if (link && link[0]) {
        f->debuglink = strdup(link);
        f->debuglink_crc = crc;
    }
    ok = true;
out:
    if (e)
        elf_end(e);
    close(fd);
    return ok;
}

/* Opens f (once) and reports it to a Dwfl of its own at bias 0. */
static void file_load(struct hs_symbolizer *s, struct sym_file *f)
{
    if (f->state != FILE_UNTRIED)
        return;
    f->state = FILE_FAILED;
    if (!f->is_file)
        return;
    if (s->sysroot) {
        char *p = join2(s->sysroot, f->path);
        if (p && is_regular(p))
            f->host_path = p;
        else
            free(p);
    }
    if (!f->host_path) {
        if (!is_regular(f->path))
            return;
        f->host_path = strdup(f->path);
        if (!f->host_path)
            return;
    }
    if (!file_read_elf(s, f))
        return;

    Dwfl *d = dwfl_begin(&s->cb);
    if (!d)
        return;
    dwfl_report_begin(d);
    Dwfl_Module *mod = dwfl_report_elf(d, base_of(f->path), f->host_path, -1, 0, true);
    dwfl_report_end(d, NULL, NULL);
    if (!mod) {
        dwfl_end(d);
        return;
    }
    void **ud = NULL;
    dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
    if (ud)
        *ud = f;
    Dwarf_Addr bias = 0;
    if (!dwfl_module_getelf(mod, &bias)) {
        dwfl_end(d);
        return;
    }
    f->dwfl = d;
    f->mod = mod;
    f->dwfl_bias = bias;
    f->state = FILE_LOADED;
}

static void file_free(struct sym_file *f)
{
    if (f->dwfl)
        dwfl_end(f->dwfl);
    free(f->host_path);
    free(f->loads);
    free(f->build_id);
    free(f->debuglink);
    free(f->syms);
    size_t pos = 0;
    for (struct cu_index *c; (c = cu_table_next(&f->cus, &pos)) != NULL;)
        free(c->subs);
    cu_table_destroy(&f->cus);
    free(f->curanges);
    free(f);
}

/* ---- Maps ---- */

/* Index of the first mapping whose end is above addr (ends are increasing too). */
static size_t maps_first_ending_after(const struct hs_symbolizer *s, uintptr_t addr)
{
    return hs_range_first_ending_after(s->maps, s->nmaps, addr, end);
}

static void maps_changed(struct hs_symbolizer *s)
{
    s->runs_dirty = true;
    s->cache_stale = true;
}

static void compute_runs(struct hs_symbolizer *s)
{
    for (size_t i = 0; i < s->nfiles; i++)
        s->files[i]->run_open = false;
    for (size_t i = 0; i < s->nmaps; i++) {
        struct sym_map *m = &s->maps[i];
        struct sym_file *f = m->file;
        m->bias_known = false;
        if (!f) {
            m->run_base = i;
            continue;
        }
        if (!f->run_open || m->offset <= f->run_last_offset) {
            f->run_open = true;
            f->run_base = i;
        }
        m->run_base = f->run_base;
        f->run_last_offset = m->offset;
    }
    s->runs_dirty = false;
}

/* The PT_LOAD a mapping at file offset `offset` comes from, for pages of size pg. */
static const struct sym_load *segment_for(const struct sym_file *f, uint64_t offset, uint64_t pg)
{
    const struct sym_load *best = NULL;
    uint64_t best_lo = 0;
    for (size_t i = 0; i < f->nloads; i++) {
        const struct sym_load *l = &f->loads[i];
        uint64_t lo = l->offset & ~(pg - 1);
        uint64_t hi = l->offset + (l->filesz ? l->filesz : 1);
        if (offset < lo || offset >= hi)
            continue;
        if (!best || lo >= best_lo) {
            best = l;
            best_lo = lo;
        }
    }
    return best;
}

/* Load bias of the run mapping i belongs to. */
static uintptr_t map_bias(struct hs_symbolizer *s, size_t i)
{
    struct sym_map *b = &s->maps[s->maps[i].run_base];
    if (b->bias_known)
        return b->bias;
    struct sym_file *f = b->file;
    if (f)
        file_load(s, f);
    uintptr_t bias = b->start - (uintptr_t)b->offset;
    if (f && f->nloads > 0) {
        long pg = sysconf(_SC_PAGESIZE);
        const struct sym_load *l = segment_for(f, b->offset, pg > 0 ? (uint64_t)pg : 4096);
        if (!l)
            l = segment_for(f, b->offset, 65536);
        if (l)
            bias = b->start - (uintptr_t)b->offset - (uintptr_t)(l->vaddr - l->offset);
    }
    b->bias = bias;
    b->bias_known = true;
    return bias;
}

int hs_symbolizer_add_map(struct hs_symbolizer *s, uintptr_t start, uintptr_t end, uint64_t offset,
                          const char *path)
{
    if (!s || !path || start >= end) {
        errno = EINVAL;
        return -1;
    }
    size_t len = strnlen(path, PATH_MAX);
    if (len >= PATH_MAX) {
        errno = EINVAL;
        return -1;
    }
    static const char deleted[] = " (deleted)";
    if (len >= sizeof(deleted) - 1 &&
        memcmp(path + len - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0)
        len -= sizeof(deleted) - 1;
    struct sym_file *f = NULL;
    if (len > 0) {
        f = file_get(s, path, len);
        if (!f) {
            errno = ENOMEM;
            return -1;
        }
    }

    size_t i = maps_first_ending_after(s, start);
    if (i < s->nmaps && s->maps[i].start == start && s->maps[i].end == end &&
        s->maps[i].offset == offset && s->maps[i].file == f)
        return 0;
    size_t j = i;
    while (j < s->nmaps && s->maps[j].start < end)
        j++;
    /* maps[i..j) overlap [start, end): replace them with what is left of them around it. */
    struct sym_map repl[3];
    size_t nrepl = 0;
    if (i < j && s->maps[i].start < start) {
        repl[nrepl] = s->maps[i];
        repl[nrepl++].end = start;
    }
    repl[nrepl++] = (struct sym_map){.start = start, .end = end, .offset = offset, .file = f};
    if (i < j && s->maps[j - 1].end > end) {
        struct sym_map r = s->maps[j - 1];
        r.offset += end - r.start;
        r.start = end;
        repl[nrepl++] = r;
    }
    struct sym_map *ms = grow(s->maps, &s->cap_maps, s->nmaps + 3, sizeof(*ms));
    if (!ms) {
        errno = ENOMEM;
        return -1;
    }
    s->maps = ms;
    size_t removed = j - i;
    memmove(&ms[i + nrepl], &ms[j], (s->nmaps - j) * sizeof(*ms));
    memcpy(&ms[i], repl, nrepl * sizeof(*ms));
    s->nmaps = s->nmaps - removed + nrepl;
    maps_changed(s);
    return 0;
}

static int add_map_cb(const struct hs_map *m, void *arg)
{
    struct hs_symbolizer *s = arg;
    if (m->start >= m->end)
        return 0;
    if (hs_symbolizer_add_map(s, m->start, m->end, m->offset, m->path) != 0)
        return errno == ENOMEM ? 1 : 0;
    return 0;
}

int hs_symbolizer_add_maps_of_pid(struct hs_symbolizer *s, pid_t pid)
{
    if (!s) {
        errno = EINVAL;
        return -1;
    }
    int r = hs_maps_foreach(pid, add_map_cb, s);
    if (r == 1) {
        errno = ENOMEM;
        return -1;
    }
    return r == 0 ? 0 : -1;
}

int hs_symbolizer_add_maps_text(struct hs_symbolizer *s, const char *text, size_t len)
{
    if (!s || (!text && len)) {
        errno = EINVAL;
        return -1;
    }
    struct hs_map *scratch = malloc(sizeof(*scratch));
    if (!scratch)
        return -1;
    struct hs_maps_parser p;
    hs_maps_parser_init(&p, scratch);
    int r = hs_maps_parser_feed(&p, text, len, add_map_cb, s);
    if (r == 0)
        r = hs_maps_parser_finish(&p, add_map_cb, s);
    free(scratch);
    if (r != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* The mapping containing pc, or SIZE_MAX. */
static size_t find_map(const struct hs_symbolizer *s, uintptr_t pc)
{
    size_t i = maps_first_ending_after(s, pc);
    if (i < s->nmaps && s->maps[i].start <= pc)
        return i;
    return SIZE_MAX;
}

/* ---- Symbols ---- */

static int sym_cmp(const void *a, const void *b)
{
    const struct sym_ent *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank > y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Facts about section shndx of elf, cached for runs of symbols of one section. */
struct scn_cache {
    Elf *elf;
    GElf_Word ndx;
    bool code;
    GElf_Addr end; /* sh_addr + sh_size */
};

static const struct scn_cache *section_info(Elf *elf, GElf_Word shndx, struct scn_cache *c)
{
    if (elf == c->elf && shndx == c->ndx)
        return c;
    GElf_Shdr sh;
    Elf_Scn *scn = elf_getscn(elf, shndx);
    bool ok = scn && gelf_getshdr(scn, &sh);
    c->elf = elf;
    c->ndx = shndx;
    c->code = ok && (sh.sh_flags & SHF_EXECINSTR);
    c->end = ok ? sh.sh_addr + sh.sh_size : 0;
    return c;
}

/* Collects the function symbols of f's module (.symtab of the file or of its debug file,
 * else .dynsym, plus MiniDebugInfo) into f->syms, sorted, one per address. */
static void build_syms(struct hs_symbolizer *s, struct sym_file *f)
{
    f->syms_built = true;
    int n = dwfl_module_getsymtab(f->mod);
    if (n <= 0)
        return;
    f->syms = malloc((size_t)n * sizeof(*f->syms));
    if (!f->syms)
        return;
    struct scn_cache sc = {0};
    size_t count = 0;
    for (int i = 0; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx = 0;
        Elf *elf = NULL;
        Dwarf_Addr bias;
        const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, &shndx, &elf, &bias);
        if (!name || !name[0] || shndx == SHN_UNDEF || shndx == SHN_ABS || !elf)
            continue;
        int type = GELF_ST_TYPE(sym.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
            continue;
        const struct scn_cache *si = section_info(elf, shndx, &sc);
        if (type == STT_NOTYPE && !si->code)
            continue;
        uint64_t size = sym.st_size;
        if (!size) {
            /* Up to the end of the section (the next symbol wins before that). */
            uint64_t end = si->end + (addr - sym.st_value);
            size = end > addr ? end - addr : 1;
        }
        const char *at = strchr(name, '@');
        if (at && at > name)
            name = pool_dup(s, name, (size_t)(at - name));
        if (!name)
            continue;
        int bind = GELF_ST_BIND(sym.st_info);
        unsigned rank = (sym.st_size ? 8u : 0u) + (type != STT_NOTYPE ? 4u : 0u) +
                        (bind == STB_GLOBAL ? 2u
                         : bind == STB_WEAK ? 1u
                                            : 0u);
        f->syms[count++] = (struct sym_ent){addr, size, name, rank, sym.st_size != 0};
    }
    if (count > 1)
        qsort(f->syms, count, sizeof(*f->syms), sym_cmp);
    size_t out = 0;
    for (size_t i = 0; i < count; i++)
        if (out == 0 || f->syms[out - 1].addr != f->syms[i].addr)
            f->syms[out++] = f->syms[i];
    f->nsyms = out;
}

/* The symbol holding addr: the nearest one at or below it if it covers addr (a symbol
 * without size covers up to the end of its section), else a sized one just before it that
 * encloses it. NULL if none. */
static const struct sym_ent *sym_lookup(struct hs_symbolizer *s, struct sym_file *f, uint64_t addr)
{
    if (!f->syms_built)
        build_syms(s, f);
    size_t lo = hs_range_upper_bound(f->syms, f->nsyms, addr, addr);
    if (lo == 0)
        return NULL;
    size_t i = lo - 1;
    const struct sym_ent *e = &f->syms[i];
    if (addr - e->addr < e->size)
        return e;
    for (size_t k = i; k-- > 0 && i - k <= 16;)
        if (f->syms[k].sized && addr - f->syms[k].addr < f->syms[k].size)
            return &f->syms[k];
    return NULL;
}

/* ---- DWARF ---- */

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    return n ? n : "";
}

/* DW_AT_call_file and DW_AT_call_line of an inlined_subroutine DIE. */
static void call_site(Dwarf_Die *inl, const char **file, unsigned *line)
{
    *file = "";
    *line = 0;
    Dwarf_Attribute attr;
    Dwarf_Word v;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &attr), &v) == 0)
        *line = (unsigned)v;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &attr), &v) != 0)
        return;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles;
    if (!dwarf_diecu(inl, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, &nfiles) != 0 ||
        v >= nfiles)
        return;
    const char *name = dwarf_filesrc(files, (size_t)v, NULL, NULL);
    if (name)
        *file = name;
}

/* Fills chain[] with the function DIEs (inlined_subroutine, then their callers, ending with
 * the subprogram) containing addr (in DWARF addresses), innermost first, with libdw's scope
 * walk over the whole CU. Returns how many. */
static size_t function_chain_slow(Dwarf_Die *cudie, Dwarf_Addr addr, Dwarf_Die *chain, size_t cap)
{
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes(cudie, addr, &scopes);
    size_t count = 0;
    if (n <= 0) {
        free(scopes);
        return 0;
    }
    int first = -1;
    for (int i = 0; i < n; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            first = i;
            break;
        }
    }
    if (first < 0) {
        free(scopes);
        return 0;
    }
    if (dwarf_tag(&scopes[first]) == DW_TAG_subprogram) {
        chain[count++] = scopes[first];
        free(scopes);
        return count;
    }
    /* dwarf_getscopes continues with the scopes of the inline function's abstract definition;
     * the concrete callers are the parents of the concrete inlined instance. */
    Dwarf_Die *parents = NULL;
    int np = dwarf_getscopes_die(&scopes[first], &parents);
    if (np <= 0) {
        chain[count++] = scopes[first];
    } else {
        for (int i = 0; i < np && count < cap; i++) {
            int tag = dwarf_tag(&parents[i]);
            if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
                continue;
            chain[count++] = parents[i];
            if (tag == DW_TAG_subprogram)
                break;
        }
    }
    free(parents);
    free(scopes);
    return count;
}

struct sub_vec {
    struct sub_range *v;
    size_t n, cap;
    bool failed;
};

/* Collects the subprograms with code among the children of parent, looking into namespaces
 * and types (C++ definitions may sit there) but not into functions. */
static void collect_subs(Dwarf_Die *parent, struct sub_vec *sv, int depth)
{
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0)
        return;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (lo >= hi)
                    continue;
                struct sub_range *v = grow(sv->v, &sv->cap, sv->n + 1, sizeof(*v));
                if (!v) {
                    sv->failed = true;
                    return;
                }
                sv->v = v;
                v[sv->n++] = (struct sub_range){lo, hi, child};
            }
        } else if (depth < 32 &&
                   (tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
                    tag == DW_TAG_structure_type || tag == DW_TAG_union_type)) {
            collect_subs(&child, sv, depth + 1);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

static int sub_cmp(const void *a, const void *b)
{
    const struct sub_range *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->hi > y->hi) - (x->hi < y->hi);
}

/* The index of the CU cudie, built if new; NULL when out of memory. */
static struct cu_index *cu_index_get(struct sym_file *f, Dwarf_Die *cudie)
{
    Dwarf_Off key = dwarf_dieoffset(cudie);
    struct cu_index *known = cu_table_find(&f->cus, &key);
    if (known)
        return known;
    if (!cu_table_reserve(&f->cus, 1))
        return NULL;
    struct sub_vec sv = {0};
    collect_subs(cudie, &sv, 0);
    if (sv.failed) {
        free(sv.v);
        return NULL;
    }
    if (sv.n > 1)
        qsort(sv.v, sv.n, sizeof(*sv.v), sub_cmp);
    return cu_table_put(
        &f->cus, &(struct cu_index){.cu_off = key, .cu_used = true, .subs = sv.v, .nsubs = sv.n});
}

/* The subprogram of the index containing addr, or NULL. */
static Dwarf_Die *cu_index_find(struct cu_index *c, Dwarf_Addr addr)
{
    size_t lo = hs_range_upper_bound(c->subs, c->nsubs, addr, lo);
    for (size_t i = lo; i-- > 0 && lo - i <= 16;)
        if (addr < c->subs[i].hi)
            return &c->subs[i].die;
    return NULL;
}

static bool is_scope_tag(int tag)
{
    return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
           tag == DW_TAG_subprogram || tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* Like function_chain_slow, but finds the subprogram through the CU's index and only walks
 * the scopes nested in it: the path from the subprogram down to the innermost scope holding
 * addr is the chain of concrete callers. */
static size_t function_chain(struct sym_file *f, Dwarf_Die *cudie, Dwarf_Addr addr,
                             Dwarf_Die *chain, size_t cap)
{
    struct cu_index *c = cu_index_get(f, cudie);
    Dwarf_Die *sub = c ? cu_index_find(c, addr) : NULL;
    if (!sub)
        return function_chain_slow(cudie, addr, chain, cap);
    Dwarf_Die path[MAX_CHAIN];
    size_t depth = 0;
    path[depth++] = *sub;
    while (depth < MAX_CHAIN) {
        Dwarf_Die child;
        bool found = false;
        if (dwarf_child(&path[depth - 1], &child) == 0) {
            do {
                if (is_scope_tag(dwarf_tag(&child)) && dwarf_haspc(&child, addr) > 0) {
                    found = true;
                    break;
                }
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        if (!found)
            break;
        path[depth++] = child;
    }
    size_t count = 0;
    for (size_t i = depth; i-- > 0 && count < cap;) {
        int tag = dwarf_tag(&path[i]);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        chain[count++] = path[i];
        if (tag == DW_TAG_subprogram)
            break;
    }
    return count;
}

static int cu_range_cmp(const void *a, const void *b)
{
    const struct cu_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static void build_cu_ranges(struct sym_file *f)
{
    f->curanges_built = true;
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(f->mod, &bias);
    if (!dw)
        return;
    f->curanges_bias = bias;
    size_t cap = 0;
    Dwarf_CU *cu = NULL;
    Dwarf_Half version;
    uint8_t unit_type;
    Dwarf_Die cudie;
    while (dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, NULL) == 0) {
        if (unit_type != DW_UT_compile && unit_type != DW_UT_skeleton)
            continue;
        Dwarf_Addr base, lo, hi;
        ptrdiff_t off = 0;
        while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
            if (lo >= hi)
                continue;
            struct cu_range *v = grow(f->curanges, &cap, f->ncuranges + 1, sizeof(*v));
            if (!v)
                return;
            f->curanges = v;
            v[f->ncuranges++] = (struct cu_range){lo, hi, cudie};
        }
    }
    if (f->ncuranges > 1)
        qsort(f->curanges, f->ncuranges, sizeof(*f->curanges), cu_range_cmp);
}

/* The CU holding addr (libdwfl address) from the CU DIEs' own ranges, or NULL. */
static Dwarf_Die *cu_from_ranges(struct sym_file *f, Dwarf_Addr addr, Dwarf_Addr *dwbias)
{
    if (!f->curanges_built)
        build_cu_ranges(f);
    Dwarf_Addr a = addr - f->curanges_bias;
    size_t lo = hs_range_upper_bound(f->curanges, f->ncuranges, a, lo);
    for (size_t i = lo; i-- > 0 && lo - i <= 16;) {
        if (a < f->curanges[i].hi) {
            *dwbias = f->curanges_bias;
            return &f->curanges[i].cudie;
        }
    }
    return NULL;
}

/* ---- Symbolization ---- */

static const char *demangled_name(struct hs_symbolizer *s, const char *name)
{
    if (!s->demangle || name[0] != '_' || name[1] != 'Z')
        return name;
    pthread_once(&g_demangle_once, demangle_init_once);
    if (!g_cxa_demangle)
        return name;
    int status = -1;
    char *d = g_cxa_demangle(name, NULL, NULL, &status);
    if (!d || status != 0) {
        free(d);
        return name;
    }
    const char *p = pool_dup(s, d, strlen(d));
    free(d);
    return p ? p : name;
}

/* Computes the frames of pc into out[HS_SYMBOLIZE_MAX_FRAMES]; returns how many. */
static size_t compute(struct hs_symbolizer *s, uintptr_t pc, bool is_ret, struct hs_frame_info *out)
{
    if (s->runs_dirty)
        compute_runs(s);
    size_t mi = find_map(s, pc);
    if (mi == SIZE_MAX)
        return 0;
    struct sym_map *m = &s->maps[mi];
    struct sym_file *f = m->file;
    struct hs_frame_info base = {
        .map_path = f ? f->path : "",
        .rel_pc = pc - m->start + (uintptr_t)m->offset,
        .build_id = "",
        .function = "",
        .demangled = "",
        .file = "",
    };
    out[0] = base;
    if (!f)
        return 1;
    file_load(s, f);
    uintptr_t rel = pc - map_bias(s, mi);
    base.rel_pc = rel;
    base.build_id = f->build_id_hex;
    out[0] = base;
    if (f->state != FILE_LOADED)
        return 1;

    Dwfl_Module *mod = f->mod;
    Dwarf_Addr addr = (Dwarf_Addr)rel - (is_ret ? 1 : 0) + f->dwfl_bias;

    const struct sym_ent *se = sym_lookup(s, f, addr);
    const char *sname = se ? se->name : NULL;
    uint64_t off = se ? addr - se->addr : 0;
    bool sym_covers = se && se->sized;

    Dwarf_Die chain[MAX_CHAIN];
    size_t nchain = 0;
    Dwarf_Addr dwbias = 0;
    Dwarf_Die *cudie = dwfl_module_addrdie(mod, addr, &dwbias);
    bool by_aranges = cudie != NULL;
    if (!cudie)
        cudie = cu_from_ranges(f, addr, &dwbias);
    if (cudie)
        nchain = function_chain(f, cudie, addr - dwbias, chain, MAX_CHAIN);

    /* Innermost location from the line table. */
    const char *line_file = "";
    int lineno = 0;
    const char *src = NULL;
    if (by_aranges) {
        Dwfl_Line *dl = dwfl_module_getsrc(mod, addr);
        if (dl)
            src = dwfl_lineinfo(dl, NULL, &lineno, NULL, NULL, NULL);
    } else if (cudie) {
        Dwarf_Line *dl = dwarf_getsrc_die(cudie, addr - dwbias);
        if (dl && dwarf_lineno(dl, &lineno) == 0)
            src = dwarf_linesrc(dl, NULL, NULL);
    }
    if (src)
        line_file = src;
    unsigned line_no = lineno > 0 ? (unsigned)lineno : 0;

    if (nchain == 0) {
        out[0].function = sname ? sname : "";
        out[0].function_offset = sname ? off + (is_ret ? 1 : 0) : 0;
        out[0].file = line_file;
        out[0].line = line_no;
        out[0].demangled = demangled_name(s, out[0].function);
        return 1;
    }

    /* Which chain entries become frames: all, or the innermost MAX-1 and the outermost. */
    size_t nout = nchain < HS_SYMBOLIZE_MAX_FRAMES ? nchain : HS_SYMBOLIZE_MAX_FRAMES;
    for (size_t k = 0; k < nout; k++) {
        size_t c = (k == nout - 1) ? nchain - 1 : k;
        struct hs_frame_info *fr = &out[k];
        *fr = base;
        bool outermost = c == nchain - 1;
        if (c == 0) {
            fr->file = line_file;
            fr->line = line_no;
        } else {
            call_site(&chain[c - 1], &fr->file, &fr->line);
        }
        fr->inlined = dwarf_tag(&chain[c]) == DW_TAG_inlined_subroutine;
        const char *dname = die_name(&chain[c]);
        if (!outermost || fr->inlined) {
            fr->function = dname;
        } else if (sym_covers || (sname && !dname[0])) {
            /* The real function: the symbol table's name when its symbol holds the pc. */
            fr->function = sname;
            fr->function_offset = off + (is_ret ? 1 : 0);
        } else {
            fr->function = dname;
            Dwarf_Addr lo;
            if (dname[0] && dwarf_lowpc(&chain[c], &lo) == 0 && lo + dwbias <= addr)
                fr->function_offset = addr + (is_ret ? 1 : 0) - (lo + dwbias);
        }
        fr->demangled = demangled_name(s, fr->function);
    }
    return nout;
}

/* ---- Cache ---- */

static void cache_clear(struct hs_symbolizer *s)
{
    cache_table_clear(&s->cache);
    s->nframes = 0;
    s->cache_stale = false;
}

static size_t copy_out(const struct hs_frame_info *fr, size_t n, struct hs_frame_info *out,
                       size_t max)
{
    if (n <= max) {
        memcpy(out, fr, n * sizeof(*out));
        return n;
    }
    memcpy(out, fr, (max - 1) * sizeof(*out));
    out[max - 1] = fr[n - 1];
    return max;
}

size_t hs_symbolize(struct hs_symbolizer *s, uintptr_t pc, int is_return_address,
                    struct hs_frame_info *out, size_t max)
{
    if (!s || !out || max == 0)
        return 0;
    bool is_ret = is_return_address != 0;
    if (s->cache_stale)
        cache_clear(s);
    const struct cache_slot *c = cache_table_find(&s->cache, &(struct cache_key){pc, is_ret});
    if (c)
        return copy_out(&s->frames[c->first], c->count, out, max);

    struct hs_frame_info tmp[HS_SYMBOLIZE_MAX_FRAMES];
    size_t n = compute(s, pc, is_ret, tmp);

    /* Remember it (best effort: on allocation failure the result is just not cached). */
    if (!cache_table_reserve(&s->cache, 1))
        return copy_out(tmp, n, out, max);
    struct hs_frame_info *fs = grow(s->frames, &s->cap_frames, s->nframes + n, sizeof(*fs));
    if (!fs)
        return copy_out(tmp, n, out, max);
    s->frames = fs;
    memcpy(&fs[s->nframes], tmp, n * sizeof(*fs));
    cache_table_put(
        &s->cache,
        &(struct cache_slot){
            .pc = pc, .first = s->nframes, .count = (uint32_t)n, .used = 1, .is_ret = is_ret});
    s->nframes += n;
    return copy_out(tmp, n, out, max);
}

/* ---- Lifetime and settings ---- */

struct hs_symbolizer *hs_symbolizer_new(const char *sysroot)
{
    pthread_once(&g_elf_once, elf_init_once);
    struct hs_symbolizer *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->demangle = true;
    cache_table_init(&s->cache, &hs_table_libc, NULL, 50);
    file_table_init(&s->by_path, &hs_table_libc, NULL, 50);
    if (sysroot && sysroot[0]) {
        size_t len = strlen(sysroot);
        while (len > 0 && sysroot[len - 1] == '/')
            len--;
        if (len > 0) { /* "/" is no sysroot at all */
            s->sysroot = strndup(sysroot, len);
            if (!s->sysroot)
                goto fail;
        }
    }
    if (rebuild_debug_path(s) != 0)
        goto fail;
    s->cb.find_elf = find_elf_cb;
    s->cb.find_debuginfo = find_debuginfo_cb;
    s->cb.section_address = dwfl_offline_section_address;
    s->cb.debuginfo_path = &s->debug_path;
    return s;
fail:
    free(s->sysroot);
    free(s);
    errno = ENOMEM;
    return NULL;
}

void hs_symbolizer_free(struct hs_symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nfiles; i++)
        file_free(s->files[i]);
    free(s->files);
    file_table_destroy(&s->by_path);
    free(s->maps);
    cache_table_destroy(&s->cache);
    free(s->frames);
    while (s->chunks) {
        struct str_chunk *c = s->chunks;
        s->chunks = c->next;
        free(c);
    }
    for (size_t i = 0; i < s->nuser_roots; i++)
        free(s->user_roots[i]);
    free(s->user_roots);
    free(s->debug_path);
    free(s->sysroot);
    free(s);
}

int hs_symbolizer_add_debug_dir(struct hs_symbolizer *s, const char *dir)
{
    if (!s || !dir || dir[0] != '/' || strchr(dir, ':')) {
        errno = EINVAL;
        return -1;
    }
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    char **roots = realloc(s->user_roots, (s->nuser_roots + 1) * sizeof(*roots));
    if (!roots)
        return -1;
    s->user_roots = roots;
    char *copy = strndup(dir, len);
    if (!copy)
        return -1;
    roots[s->nuser_roots++] = copy;
    if (rebuild_debug_path(s) != 0) {
        free(roots[--s->nuser_roots]);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void hs_symbolizer_set_demangle(struct hs_symbolizer *s, bool on)
{
    if (s && s->demangle != on) {
        s->demangle = on;
        s->cache_stale = true;
    }
}
