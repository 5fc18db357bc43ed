/* heap_dump.c: Android Native Heap Dump v1.2 files (see heap_dump.h for the format and the
 * triggers).
 *
 * A dump: take a snapshot of the live table (heap_snapshot.c: the table is locked only while
 * it is copied), read /proc/self/maps once into an arena buffer, write the header and the
 * records through a buffered writer, then the maps text verbatim and "END". With
 * backtrace_full the maps text is also parsed into a table, every distinct pc of the snapshot
 * is symbolised once (sorted, so a small cache of open ELF files suffices), and each record's
 * bt_info line is built from that table; the bt_info lines and the MAPS section therefore
 * describe the same address space.
 *
 * Memory: everything temporary comes from the shim's arena (hs_md_arena) and is returned
 * before the dump ends: the snapshot (32 bytes per live allocation), the maps text, the
 * 64 KiB write buffer and, with backtrace_full, the maps table and one entry per distinct pc.
 * Stack: about 5 KiB at the deepest (fingerprint: utsname + os-release buffer; symbolising:
 * a 512-byte name). Nothing here calls malloc or stdio.
 *
 * Signals: the SIGRTMAX-17 handler stores 1 into hs_md_heap_dump_pending and returns; all the
 * work happens at the next malloc or free, where locks may be taken. errno is preserved for
 * the program around dumps made from its malloc and free calls and at exit.
 */
#define _GNU_SOURCE
#include "heap_dump.h"

#include "arena.h"
#include "debug_state.h"
#include "elf_cache.h"
#include "elf_symbols.h"
#include "errno_text.h"
#include "format.h"
#include "heap_snapshot.h"
#include "log.h"
#include "options.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "signals.h"
#include "sort.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define WRITER_BUFFER 65536
#define SYMBOL_MAX 512

int hs_md_heap_dump_pending;

/* ---- Dump lock ------------------------------------------------------------------------- */

/* pid of the process whose thread is dumping, 0 when free. A child forked in the middle of a
 * dump sees its parent's pid here and takes the lock over. */
static int g_dump_owner;

static void dump_lock(void)
{
    int self = (int)getpid();
    for (;;) {
        int cur = 0;
        if (__atomic_compare_exchange_n(&g_dump_owner, &cur, self, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        if (cur != self && __atomic_compare_exchange_n(&g_dump_owner, &cur, self, false,
                                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

static void dump_unlock(void)
{
    __atomic_store_n(&g_dump_owner, 0, __ATOMIC_RELEASE);
}

/* ---- Small helpers ----------------------------------------------------------------------- */

static bool backtraces_on(void)
{
    return hs_md_mode_now() == HS_MD_DEBUG && (hs_md.cfg.options & HS_OPT_BACKTRACE);
}

/* A growable byte buffer in the arena. */
struct abuf {
    char *data;
    size_t len, cap;
};

static bool abuf_reserve(struct abuf *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    char *p = hs_arena_alloc(&hs_md_arena, cap);
    if (!p)
        return false;
    if (b->len)
        memcpy(p, b->data, b->len);
    hs_arena_free(&hs_md_arena, b->data, b->cap);
    b->data = p;
    b->cap = cap;
    return true;
}

static bool abuf_append(struct abuf *b, const void *data, size_t len)
{
    if (!abuf_reserve(b, len))
        return false;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return true;
}

static void abuf_free(struct abuf *b)
{
    hs_arena_free(&hs_md_arena, b->data, b->cap);
    memset(b, 0, sizeof(*b));
}

/* Reads a whole file (of unknown size, like /proc files) into b. Returns false on error. */
static bool read_file(const char *path, struct abuf *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = true;
    for (;;) {
        if (!abuf_reserve(b, 16384)) {
            ok = false;
            break;
        }
        ssize_t n = read(fd, b->data + b->len, b->cap - b->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            ok = false;
        if (n <= 0)
            break;
        b->len += (size_t)n;
    }
    close(fd);
    return ok;
}

/* ---- Buffered writer -------------------------------------------------------------------- */

struct writer {
    int fd;
    int error; /* first errno of a failed write, 0 while all is well */
    char *buf; /* WRITER_BUFFER bytes from the arena */
    size_t len;
};

static void write_all(struct writer *w, const char *p, size_t n)
{
    while (n > 0 && !w->error) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            w->error = r < 0 ? errno : EIO;
            return;
        }
        p += r;
        n -= (size_t)r;
    }
}

static void w_flush(struct writer *w)
{
    write_all(w, w->buf, w->len);
    w->len = 0;
}

static void w_put(struct writer *w, const char *s, size_t n)
{
    if (n > WRITER_BUFFER - w->len) {
        w_flush(w);
        if (n > WRITER_BUFFER) {
            write_all(w, s, n);
            return;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void w_str(struct writer *w, const char *s)
{
    w_put(w, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void w_fmt(struct writer *w, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    size_t n = hs_vformat(line, sizeof(line), fmt, ap);
    va_end(ap);
    w_put(w, line, n);
}

/* ---- Build fingerprint ------------------------------------------------------------------- */

/* Appends s to buf[*len..cap) without single quotes or control characters (they would end
 * or break the quoted fingerprint). */
static void append_clean(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i] && *len + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\'' || c < 0x20 || c == 0x7f)
            continue;
        buf[(*len)++] = (char)c;
    }
    buf[*len] = '\0';
}

/* Finds PRETTY_NAME in an os-release file; returns its length (0 if absent) and its start. */
static size_t pretty_name(const char *path, char *text, size_t cap, const char **value)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, text + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    text[len] = '\0';
    static const char key[] = "PRETTY_NAME=";
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        size_t line_len = end ? (size_t)(end - line) : strlen(line);
        if (line_len >= sizeof(key) - 1 && memcmp(line, key, sizeof(key) - 1) == 0) {
            const char *v = line + sizeof(key) - 1;
            size_t n = line_len - (sizeof(key) - 1);
            if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
                v++;
                n -= 2;
            }
            *value = v;
            return n;
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* "<sysname> <release> <version> <machine>; <PRETTY_NAME>", or "unknown". */
static void fingerprint(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    struct utsname u;
    if (uname(&u) == 0) {
        const char *parts[] = {u.sysname, u.release, u.version, u.machine};
        for (size_t i = 0; i < 4; i++) {
            if (i > 0)
                append_clean(buf, cap, &len, " ", 1);
            append_clean(buf, cap, &len, parts[i], strlen(parts[i]));
        }
    }
    char text[2048];
    const char *value = NULL;
    size_t n = pretty_name("/etc/os-release", text, sizeof(text), &value);
    if (n == 0)
        n = pretty_name("/usr/lib/os-release", text, sizeof(text), &value);
    if (n > 0) {
        if (len > 0)
            append_clean(buf, cap, &len, "; ", 2);
        append_clean(buf, cap, &len, value, n);
    }
    if (len == 0)
        append_clean(buf, cap, &len, "unknown", 7);
}

/* ---- Maps table and symbols (backtrace_full) ---------------------------------------------- */

struct dmap {
    uintptr_t start, end, load_base;
    uint64_t offset, inode;
    dev_t dev;
    unsigned perms;
    bool deleted;
    bool bias_known;
    uintptr_t bias;
    size_t path; /* offset of the NUL-terminated path in the string pool */
};

struct pc_info {
    uintptr_t pc;
    uintptr_t rel_pc;
    uintptr_t func_offset;
    size_t map;  /* index in the maps table, SIZE_MAX when in no mapping */
    size_t name; /* offset of the symbol in the string pool, SIZE_MAX when unknown */
};

struct symbols {
    struct abuf maps;    /* struct dmap[], in address order */
    struct abuf strings; /* paths and symbol names */
    struct abuf pcs;     /* struct pc_info[], sorted by pc, unique */
    size_t num_maps, num_pcs;
    bool failed; /* out of arena memory */
    struct hs_elf_cache files;
    bool vdso_ok;
    size_t vdso_map;
    struct hs_elf vdso;
};

static size_t add_string(struct symbols *sy, const char *s, size_t n)
{
    size_t off = sy->strings.len;
    if (!abuf_reserve(&sy->strings, n + 1)) {
        sy->failed = true;
        return SIZE_MAX;
    }
    memcpy(sy->strings.data + off, s, n);
    sy->strings.data[off + n] = '\0';
    sy->strings.len += n + 1;
    return off;
}

static int add_map(const struct hs_map *m, void *arg)
{
    struct symbols *sy = arg;
    struct dmap d = {
        .start = m->start,
        .end = m->end,
        .load_base = m->load_base,
        .offset = m->offset,
        .inode = m->inode,
        .dev = m->dev,
        .perms = m->perms,
        .deleted = m->deleted,
    };
    d.path = add_string(sy, m->path, strlen(m->path));
    if (d.path == SIZE_MAX || !abuf_append(&sy->maps, &d, sizeof(d))) {
        sy->failed = true;
        return 1;
    }
    sy->num_maps++;
    return 0;
}

static struct dmap *map_at(struct symbols *sy, size_t i)
{
    return &((struct dmap *)sy->maps.data)[i];
}

static const char *string_at(struct symbols *sy, size_t off)
{
    return sy->strings.data + off;
}

/* Index of the mapping containing addr, or SIZE_MAX (maps are in ascending address order). */
static size_t find_map(struct symbols *sy, uintptr_t addr)
{
    if (sy->num_maps == 0)
        return SIZE_MAX; /* and there is no array to point at */
    size_t i = hs_range_find(map_at(sy, 0), sy->num_maps, addr, start, end);
    return i < sy->num_maps ? i : SIZE_MAX;
}

/* The ELF object behind mapping i (a file or the vdso), or NULL. */
static const struct hs_elf *map_elf(struct symbols *sy, size_t i)
{
    const struct dmap *m = map_at(sy, i);
    const char *path = string_at(sy, m->path);
    if (strcmp(path, "[vdso]") == 0) {
        if (!sy->vdso_ok || sy->vdso_map != i) {
            sy->vdso_ok = hs_elf_open_image(&sy->vdso, (const void *)m->start, m->end - m->start);
            sy->vdso_map = i;
        }
        return sy->vdso_ok ? &sy->vdso : NULL;
    }
    if (path[0] != '/')
        return NULL;
    return hs_elf_cache_get(&sy->files, path, m->dev, m->inode, m->deleted);
}

static int compare_pcs(const void *a, const void *b, void *ctx)
{
    (void)ctx;
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void symbolize(struct symbols *sy, struct pc_info *p)
{
    p->rel_pc = p->pc;
    p->func_offset = 0;
    p->map = SIZE_MAX;
    p->name = SIZE_MAX;
    /* Frames are stored as call sites (or exact pcs): each lies in its function. */
    size_t i = find_map(sy, p->pc);
    if (i == SIZE_MAX)
        return;
    p->map = i;
    struct dmap *m = map_at(sy, i);
    const struct hs_elf *elf = map_elf(sy, i);
    if (!m->bias_known) {
        m->bias = m->load_base;
        if (elf && !hs_elf_load_bias(elf, m->start, m->offset, m->perms & HS_MAP_EXEC, &m->bias) &&
            hs_elf_type(elf) == ET_EXEC)
            m->bias = 0;
        m->bias_known = true;
    }
    p->rel_pc = p->pc - m->bias;
    char name[SYMBOL_MAX];
    uintptr_t offset;
    if (elf && hs_elf_lookup(elf, p->pc - m->bias, name, sizeof(name), &offset)) {
        p->name = add_string(sy, name, strlen(name));
        p->func_offset = offset;
    }
}

/* Builds the maps table from the maps text and symbolises every distinct pc of the
 * snapshot. Returns false when the arena ran out (the dump then has no bt_info lines). */
static bool symbols_build(struct symbols *sy, const struct abuf *maps_text,
                          const struct hs_md_snapshot *snap)
{
    struct hs_map *scratch = hs_arena_alloc(&hs_md_arena, sizeof(*scratch));
    if (!scratch)
        return false;
    struct hs_maps_parser parser;
    hs_maps_parser_init(&parser, scratch);
    if (hs_maps_parser_feed(&parser, maps_text->data, maps_text->len, add_map, sy) == 0)
        hs_maps_parser_finish(&parser, add_map, sy);
    hs_arena_free(&hs_md_arena, scratch, sizeof(*scratch));
    if (sy->failed)
        return false;

    /* Distinct pcs: collect, sort, squeeze. */
    size_t total = 0;
    for (size_t i = 0; i < snap->count; i++)
        if (snap->entries[i].bt)
            total += snap->entries[i].bt->num_frames;
    struct abuf raw = {0};
    if (total > 0 && !abuf_reserve(&raw, total * sizeof(uintptr_t)))
        return false;
    uintptr_t *pcs = (uintptr_t *)raw.data;
    size_t n = 0;
    for (size_t i = 0; i < snap->count; i++) {
        const struct hs_md_bt *bt = snap->entries[i].bt;
        for (uint32_t f = 0; bt && f < bt->num_frames; f++)
            pcs[n++] = bt->frames[f];
    }
    hs_sort(pcs, n, sizeof(uintptr_t), compare_pcs, NULL);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || pcs[unique - 1] != pcs[i])
            pcs[unique++] = pcs[i];

    if (unique > 0 && !abuf_reserve(&sy->pcs, unique * sizeof(struct pc_info))) {
        abuf_free(&raw);
        return false;
    }
    struct pc_info *info = (struct pc_info *)sy->pcs.data;
    for (size_t i = 0; i < unique; i++) {
        info[i].pc = pcs[i];
        symbolize(sy, &info[i]);
    }
    sy->num_pcs = unique;
    abuf_free(&raw);
    return !sy->failed;
}

static const struct pc_info *find_pc(struct symbols *sy, uintptr_t pc)
{
    const struct pc_info *info = (const struct pc_info *)sy->pcs.data;
    size_t i = hs_partition_point(sy->num_pcs, k, info[k].pc >= pc);
    return i < sy->num_pcs && info[i].pc == pc ? &info[i] : NULL;
}

static void symbols_free(struct symbols *sy)
{
    hs_elf_cache_close(&sy->files);
    abuf_free(&sy->maps);
    abuf_free(&sy->strings);
    abuf_free(&sy->pcs);
}

/* "  bt_info {"<path>" <rel pc> "<symbol>" <offset>} ..." */
static void write_bt_info(struct writer *w, struct symbols *sy, const struct hs_md_bt *bt)
{
    w_str(w, "  bt_info");
    for (uint32_t f = 0; f < bt->num_frames && bt->frames[f] != 0; f++) {
        const struct pc_info *p = find_pc(sy, bt->frames[f]);
        if (!p)
            continue; /* cannot happen: every pc was symbolised */
        w_str(w, " {\"");
        if (p->map != SIZE_MAX) {
            const struct dmap *m = map_at(sy, p->map);
            w_str(w, string_at(sy, m->path));
            if (m->deleted)
                w_str(w, " (deleted)");
        }
        w_fmt(w, "\" %lx \"", (unsigned long)p->rel_pc);
        if (p->name != SIZE_MAX) {
            w_str(w, string_at(sy, p->name));
            w_fmt(w, "\" %lx}", (unsigned long)p->func_offset);
        } else {
            w_str(w, "\" 0}");
        }
    }
    w_str(w, "\n");
}

/* ---- The dump ------------------------------------------------------------------------------ */

/* Writes the dump to fd. Returns 0, or an errno value. */
static int write_dump(int fd, const char *path)
{
    struct writer w = {fd, 0, hs_arena_alloc(&hs_md_arena, WRITER_BUFFER), 0};
    if (!w.buf)
        return ENOMEM;

    struct hs_md_snapshot snap;
    if (!hs_md_snapshot_take(&snap, 0)) {
        hs_arena_free(&hs_md_arena, w.buf, WRITER_BUFFER);
        return ENOMEM;
    }
    struct abuf maps_text = {0};
    bool have_maps = read_file("/proc/self/maps", &maps_text);

    struct symbols sy;
    memset(&sy, 0, sizeof(sy));
    bool full = (hs_md.cfg.options & HS_OPT_BACKTRACE_FULL) != 0;
    if (full && !(have_maps && symbols_build(&sy, &maps_text, &snap))) {
        full = false;
        hs_log("Heap dump %s: not enough memory for bt_info lines", path);
    }

    char fp[1024];
    fingerprint(fp, sizeof(fp));
    w_str(&w, "Android Native Heap Dump v1.2\n\n");
    w_str(&w, "Build fingerprint: '");
    w_str(&w, fp);
    w_str(&w, "'\n\n");
    w_fmt(&w, "Total memory: %zu\n", snap.total_memory);
    w_fmt(&w, "Allocation records: %zu\n", snap.count);
    w_fmt(&w, "Backtrace size: %zu\n\n", hs_md.cfg.backtrace_frames);

    for (size_t i = 0; i < snap.count && !w.error; i++) {
        const struct hs_md_snapshot_entry *e = &snap.entries[i];
        w_fmt(&w, "z 0  sz %8zu  num %4zu  bt", e->size, e->num);
        for (uint32_t f = 0; e->bt && f < e->bt->num_frames && e->bt->frames[f] != 0; f++)
            w_fmt(&w, " %lx", (unsigned long)e->bt->frames[f]);
        w_str(&w, "\n");
        if (full && e->bt)
            write_bt_info(&w, &sy, e->bt);
    }

    w_str(&w, "MAPS\n");
    if (have_maps) {
        w_flush(&w);
        write_all(&w, maps_text.data, maps_text.len);
    } else {
        w_str(&w, "Could not open /proc/self/maps\n");
    }
    w_str(&w, "END\n");
    w_flush(&w);

    if (full)
        symbols_free(&sy);
    abuf_free(&maps_text);
    hs_md_snapshot_release(&snap);
    hs_arena_free(&hs_md_arena, w.buf, WRITER_BUFFER);
    return w.error;
}

static const char not_available[] =
    "Native heap dump not available. To enable, run the program with the malloc debug\n"
    "option 'backtrace', e.g.:\n"
    "  LD_PRELOAD=libmalloc_debug.so LIBC_DEBUG_MALLOC_OPTIONS=backtrace <program>\n";

/* A dump that failed half-way (a full disk) is replaced by one line saying why, which is what
 * a reader waiting for the file (`heapscope dumpheap`) finds: emptying it gives the room. */
static void say_failure(int fd, int err)
{
    char line[160];
    size_t n = hs_format(line, sizeof(line), "%s%s\n", HS_MD_HEAP_DUMP_FAILED, hs_errno_text(err));
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        return;
    struct writer w = {fd, 0, NULL, 0};
    write_all(&w, line, n);
}

int hs_md_heap_dump_to(const char *path)
{
    int saved_errno = errno, err = 0;
    hs_md_in_shim++;
    dump_lock();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        err = errno;
        hs_log("Unable to create heap dump file %s: %s", path, hs_errno_text(err));
    } else {
        hs_log("Dumping to file: %s", path);
        if (backtraces_on()) {
            err = write_dump(fd, path);
            if (err) {
                hs_log("Unable to write heap dump file %s: %s", path, hs_errno_text(err));
                say_failure(fd, err);
            }
        } else {
            struct writer w = {fd, 0, NULL, 0};
            write_all(&w, not_available, sizeof(not_available) - 1);
            err = ENOTSUP;
        }
        close(fd);
    }
    dump_unlock();
    hs_md_in_shim--;
    errno = err ? err : saved_errno;
    return err ? -1 : 0;
}

/* Dumps to <prefix>.<pid><suffix>. */
static void dump_with_suffix(const char *suffix)
{
    int saved_errno = errno;
    char path[PATH_MAX];
    size_t n = hs_format(path, sizeof(path), "%s.%d%s", hs_md.cfg.backtrace_dump_prefix,
                         (int)getpid(), suffix);
    if (n >= sizeof(path) - 1) {
        hs_log("Unable to create heap dump file %s: %s", path, hs_errno_text(ENAMETOOLONG));
    } else {
        hs_md_heap_dump_to(path);
    }
    errno = saved_errno;
}

void hs_md_heap_dump_requested(void)
{
    if (hs_md_in_shim)
        return; /* the shim's own allocations never dump */
    if (!__atomic_exchange_n(&hs_md_heap_dump_pending, 0, __ATOMIC_ACQ_REL))
        return;
    dump_with_suffix(".txt");
}

void hs_md_heap_dump_signal_file(void)
{
    if (hs_md_in_shim || !backtraces_on())
        return;
    dump_with_suffix(".txt");
}

void hs_md_heap_dump_at_exit(void)
{
    uint32_t need = HS_OPT_BACKTRACE | HS_OPT_BACKTRACE_DUMP_ON_EXIT;
    if (hs_md_mode_now() != HS_MD_DEBUG || (hs_md.cfg.options & need) != need)
        return;
    dump_with_suffix(".exit.txt");
}

/* ---- Signal ---------------------------------------------------------------------------------- */

static void on_dump_signal(int sig, siginfo_t *info, void *ucontext)
{
    (void)sig;
    (void)info;
    (void)ucontext;
    __atomic_store_n(&hs_md_heap_dump_pending, 1, __ATOMIC_RELAXED);
}

void hs_md_heap_dump_init(void)
{
    if (!(hs_md.cfg.options & HS_OPT_BACKTRACE))
        return;
    int sig = SIGRTMAX - 17;
    int err = hs_signal_install(sig, on_dump_signal);
    if (err != 0) {
        hs_log("%s: Unable to set up the heap dump signal %d: %s", hs_log_program_name(), sig,
               hs_errno_text(err));
        return;
    }
    if (hs_md.cfg.options & HS_OPT_VERBOSE)
        hs_log("%s: Run: 'kill -%d %d' to dump the backtrace.", hs_log_program_name(), sig,
               (int)getpid());
}
