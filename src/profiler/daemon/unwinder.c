/* unwinder.c: unwinding copied x86_64 stacks with cached DWARF CFI rules (see unwinder.h).
 *
 * Layout of the state:
 * - maps: every mapping of the last hs_unwinder_set_maps, sorted by start (as the kernel lists
 *   them), each with the index of its file's module (or -1).
 * - mods: one record per executable file mapping run (device, inode, load base), with the
 *   Dwfl_Module reported for it (NULL if the file could not be opened or is not ELF).
 * - rules: the shared open-addressing table (hash_table.h) on the lookup address; key 0 marks
 *   an empty slot.
 *   A rule is 32 bytes. The table is emptied when it reaches its limit or when code goes away.
 * - cur: the sample being unwound, read by the libdwfl callbacks (memory_read,
 *   set_initial_registers) and frame callbacks; it lives in the unwinder because libdwfl's
 *   process state is attached once per Dwfl with the unwinder as its argument.
 */
#define _GNU_SOURCE
#define HS_HASH_TABLE_LIBC
#include "unwinder.h"

#include "hash_table.h"
#include "hs_assert.h"
#include "proc_maps.h"
#include "range_lookup.h"
#include "signal_trampoline.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RSP HS_UNWIND_RSP
#define RIP HS_UNWIND_RIP
#define BIT(r) (1u << (r))
#define ALL_REGS ((1u << HS_UNWIND_NREGS) - 1)

/* A step that succeeded (the other results are enum hs_unwind_stop values). */
#define STEP_OK (-1)

/* ---- Rules ---------------------------------------------------------------------------- */

enum rule_kind {
    K_CFI = 1, /* simple rule: cfa_reg + cfa_off, registers at CFA + offset */
    K_SLOW,    /* the CFI needs expressions (or is otherwise unusual): one libdwfl step */
    K_FP,      /* no CFI: frame-pointer step */
    K_END,     /* the return address is undefined: outermost frame */
};

enum { RULE_SIGNAL = 1 }; /* the frame is a signal trampoline: its caller's pc is exact */

/* Offsets of saved registers are int16; these two values are not offsets. */
#define OFF_SAME INT16_MIN        /* the caller's value is this frame's */
#define OFF_UNDEF (INT16_MIN + 1) /* unknown in the caller */

/* The callee-saved registers a rule restores, in the order of rule.off. */
#define NSAVED 6
static const uint8_t saved_regnos[NSAVED] = {HS_UNWIND_RBX, HS_UNWIND_RBP, HS_UNWIND_R12,
                                             HS_UNWIND_R13, HS_UNWIND_R14, HS_UNWIND_R15};

struct rule {
    uint64_t key;    /* lookup address; 0: empty slot */
    int32_t cfa_off; /* CFA = reg[cfa_reg] + cfa_off */
    uint8_t kind;    /* enum rule_kind */
    uint8_t cfa_reg; /* DWARF register number (0..15) */
    uint8_t flags;   /* RULE_* */
    uint8_t pad;
    int16_t ra_off;      /* the return address is at CFA + ra_off */
    int16_t off[NSAVED]; /* saved_regnos[i] at CFA + off[i], or OFF_SAME / OFF_UNDEF */
};

_Static_assert(sizeof(struct rule) == 32, "a rule is 32 bytes");

#define RULES_MIN_SLOTS 1024

static inline uint64_t rule_key_hash(const uint64_t *key, const void *ctx)
{
    (void)ctx;
    return *key;
}
static inline uint64_t rule_entry_hash(const struct rule *r, const void *ctx)
{
    (void)ctx;
    return r->key;
}
static inline bool rule_matches(const struct rule *r, const uint64_t *key, const void *ctx)
{
    (void)ctx;
    return r->key == *key;
}
static inline bool rule_is_empty(const struct rule *r)
{
    return r->key == 0;
}
static inline void rule_clear(struct rule *r)
{
    r->key = 0;
}

HS_HASH_TABLE_DEFINE(rule_table, struct rule, uint64_t, rule_key_hash, rule_entry_hash,
                     rule_matches, rule_is_empty, rule_clear)

/* ---- Mappings and modules --------------------------------------------------------------- */

struct umap {
    uintptr_t start, end;
    uint64_t offset;
    uint64_t inode;
    uintptr_t load_base;
    dev_t dev;
    unsigned perms;
    int mod; /* index in mods of the module of this file and load base, or -1 */
};

struct umod {
    dev_t dev;
    uint64_t inode;
    uintptr_t load_base;
    bool deleted;
    bool tried;      /* reported to the Dwfl, or failed to */
    Dwfl_Module *dm; /* NULL: the file could not be found or reported */
    char *path;
};

/* Register state of a frame during an unwind. */
struct fstate {
    uint64_t r[HS_UNWIND_NREGS];
    uint32_t known; /* BIT(n): r[n] is known */
};

/* What libdwfl's callbacks work on during hs_unwind. */
enum dwfl_job { JOB_FULL, JOB_STEP };

/* Most reads of the copy an unwind keeps track of, to find the parts it did not read. */
#define MAX_READS 512

struct sample {
    const uint8_t *stack;
    uintptr_t base; /* address of the span's first byte (the sampled rsp) */
    size_t len;     /* bytes of the span: stack holds them minus the gaps' */
    const struct hs_stack_gap *gaps;
    unsigned ngaps;
    bool read_in_gap; /* a read fell into a gap (the unwind ends truncated) */
    size_t used;      /* the span's bytes up to the end of the highest word read (copy_read) */
    struct hs_unwind_word reads[MAX_READS]; /* the words read, in the order read */
    unsigned nreads;              /* how many are in reads; MAX_READS + 1 once it overflowed */
    bool keep_reads;              /* reads is kept (hs_unwinder_want_parts) */
    bool stack_map_known;         /* stack_lo/hi computed (lazily: only libdwfl needs them) */
    uintptr_t stack_lo, stack_hi; /* the mapping holding base, or 0, 0 */
    bool read_past_end;           /* a read fell past the copy inside the stack */
    /* libdwfl's initial frame */
    const uint64_t *init_regs;
    uint32_t init_known;
    uint64_t init_pc;
    enum dwfl_job job;
    unsigned frame_idx;
    /* JOB_STEP: the unwound caller */
    bool got_next;
    struct fstate next;
    /* JOB_FULL: the output */
    uintptr_t *pcs;
    size_t max, n;
    uint64_t last_sp;
    struct hs_unwind_result *res;
    bool stopped;          /* the frame callback decided res->stop */
    bool after_trampoline; /* the previous frame was a signal trampoline */
};

struct hs_unwinder {
    pid_t pid;
    int mem_fd;
    enum hs_unwind_mode mode;

    Dwfl *dwfl;
    Elf *arch_elf; /* an ELF header telling libdwfl the architecture */
    Elf64_Ehdr arch_ehdr;

    struct umap *maps;
    size_t nmaps;
    struct umod *mods;
    size_t nmods;

    uintptr_t skip_lo[HS_UNWIND_MAX_SKIP], skip_hi[HS_UNWIND_MAX_SKIP];
    unsigned nskip;

    struct rule_table rules;
    size_t rule_limit;

    struct hs_unwind_stats st;
    struct sample cur;
    bool no_parts; /* hs_unwinder_want_parts(false) */
};

/* ---- Small helpers ----------------------------------------------------------------------- */

/* Reads the word at addr from the copy: false when it is outside the span or (read_in_gap)
 * in a part of it the copy left out. */
static inline bool copy_read(struct sample *s, uint64_t addr, uint64_t *out)
{
    uint64_t off = addr - s->base; /* wraps to a huge value below the copy */
    if (off > s->len || s->len - off < 8)
        return false;
    uint64_t at = off; /* where the word is in the copy */
    for (unsigned i = 0; i < s->ngaps; i++) {
        const struct hs_stack_gap *g = &s->gaps[i];
        if (off + 8 <= g->off)
            break;
        if (off < (uint64_t)g->off + g->len) {
            s->read_in_gap = true;
            return false;
        }
        at -= g->len;
    }
    if (off + 8 > s->used)
        s->used = off + 8;
    memcpy(out, s->stack + at, 8);
    if (!s->keep_reads)
        return true;
    if (s->nreads < MAX_READS)
        s->reads[s->nreads++] = (struct hs_unwind_word){off, *out};
    else
        s->nreads = MAX_READS + 1;
    return true;
}

/* Why a read of addr from the copy failed. */
static inline int read_fail(const struct sample *s, uint64_t addr)
{
    return addr >= s->base + s->len || s->read_in_gap ? HS_UNWIND_TRUNCATED : HS_UNWIND_BAD_FRAME;
}

static const struct umap *map_find(const struct hs_unwinder *u, uintptr_t addr)
{
    size_t i = hs_range_find(u->maps, u->nmaps, addr, start, end);
    return i < u->nmaps ? &u->maps[i] : NULL;
}

static inline bool in_skip(const struct hs_unwinder *u, uintptr_t pc)
{
    for (unsigned i = 0; i < u->nskip; i++)
        if (pc >= u->skip_lo[i] && pc < u->skip_hi[i])
            return true;
    return false;
}

/* ---- Rule table --------------------------------------------------------------------------- */

static inline struct rule *rule_find(const struct hs_unwinder *u, uint64_t key)
{
    return rule_table_find(&u->rules, &key);
}

static void rules_clear(struct hs_unwinder *u)
{
    if (u->rules.count == 0)
        return;
    rule_table_clear(&u->rules);
    u->st.cache_flushes++;
}

/* Stores *r (whose key is not in the table) and returns its slot, or NULL when out of memory. */
static struct rule *rule_insert(struct hs_unwinder *u, const struct rule *r)
{
    if (u->rules.count >= u->rule_limit)
        rules_clear(u);
    if (!rule_table_reserve(&u->rules, 1))
        return NULL;
    return rule_table_put(&u->rules, r);
}

/* ---- Computing a rule with libdw ---------------------------------------------------------- */

enum reg_rule { RR_SAME, RR_UNDEF, RR_AT, RR_CFA, RR_OTHER };

/* Classifies the rule of register regno: unchanged, undefined, saved at CFA + *off, equal to
 * the CFA (val_offset 0), or anything else. */
static enum reg_rule reg_rule(Dwarf_Frame *fr, int regno, int64_t *off)
{
    Dwarf_Op mem[3], *ops = NULL;
    size_t nops = 0;
    if (dwarf_frame_register(fr, regno, mem, &ops, &nops) < 0)
        return RR_OTHER;
    if (nops == 0)
        return ops == NULL ? RR_SAME : RR_UNDEF;
    if (ops[0].atom != DW_OP_call_frame_cfa)
        return RR_OTHER;
    bool value = ops[nops - 1].atom == DW_OP_stack_value;
    size_t n = value ? nops - 1 : nops;
    int64_t k = 0;
    if (n == 2 && ops[1].atom == DW_OP_plus_uconst)
        k = (int64_t)ops[1].number;
    else if (n != 1)
        return RR_OTHER;
    *off = k;
    if (value)
        return k == 0 ? RR_CFA : RR_OTHER;
    return RR_AT;
}

/* Fills *r (kind and registers) from libdw's frame state. */
static void rule_from_frame(Dwarf_Frame *fr, struct rule *r)
{
    bool signal = false;
    int ra_reg = dwarf_frame_info(fr, NULL, NULL, &signal);
    r->flags = signal ? RULE_SIGNAL : 0;
    r->kind = K_SLOW;
    if (signal || ra_reg != RIP)
        return;

    Dwarf_Op *ops = NULL;
    size_t nops = 0;
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops != 1)
        return;
    uint64_t reg;
    int64_t cfa_off;
    if (ops[0].atom == DW_OP_bregx) {
        reg = ops[0].number;
        cfa_off = (int64_t)ops[0].number2;
    } else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
        reg = ops[0].atom - DW_OP_breg0;
        cfa_off = (int64_t)ops[0].number;
    } else {
        return;
    }
    if (reg >= 16 || cfa_off < INT32_MIN || cfa_off > INT32_MAX)
        return;

    int64_t off = 0;
    switch (reg_rule(fr, RIP, &off)) {
    case RR_UNDEF:
        r->kind = K_END;
        return;
    case RR_AT:
        if (off <= OFF_UNDEF || off > INT16_MAX)
            return;
        r->ra_off = (int16_t)off;
        break;
    default:
        return;
    }
    /* The caller's rsp is the CFA on x86_64; anything else is left to libdwfl. */
    enum reg_rule sp = reg_rule(fr, RSP, &off);
    if (sp != RR_CFA && sp != RR_SAME && sp != RR_UNDEF)
        return;
    for (int i = 0; i < NSAVED; i++) {
        switch (reg_rule(fr, saved_regnos[i], &off)) {
        case RR_SAME:
        case RR_UNDEF: /* elfutils' x86_64 ABI defaults leave rbx undefined; it is callee-saved */
            r->off[i] = OFF_SAME;
            break;
        case RR_AT:
            if (off <= OFF_UNDEF || off > INT16_MAX)
                return;
            r->off[i] = (int16_t)off;
            break;
        default:
            return;
        }
    }
    r->cfa_reg = (uint8_t)reg;
    r->cfa_off = (int32_t)cfa_off;
    r->kind = K_CFI;
}

/* Computes the rule for lookup address key. Returns STEP_OK with *r filled, or
 * HS_UNWIND_UNKNOWN_MAP / HS_UNWIND_NOT_CODE (nothing to cache). */
static int rule_compute(struct hs_unwinder *u, uint64_t key, struct rule *r)
{
    const struct umap *m = map_find(u, key);
    if (!m)
        return HS_UNWIND_UNKNOWN_MAP;
    if (!(m->perms & HS_MAP_EXEC))
        return HS_UNWIND_NOT_CODE;
    memset(r, 0, sizeof *r);
    r->key = key;
    r->kind = K_FP;
    Dwfl_Module *dm = m->mod >= 0 ? u->mods[m->mod].dm : NULL;
    if (!dm)
        return STEP_OK;
    for (int pass = 0; pass < 2; pass++) {
        Dwarf_Addr bias = 0;
        Dwarf_CFI *cfi =
            pass == 0 ? dwfl_module_eh_cfi(dm, &bias) : dwfl_module_dwarf_cfi(dm, &bias);
        Dwarf_Frame *fr = NULL;
        if (!cfi || dwarf_cfi_addrframe(cfi, key - bias, &fr) != 0)
            continue;
        rule_from_frame(fr, r);
        free(fr);
        return STEP_OK;
    }
    return STEP_OK;
}

/* ---- libdwfl ---------------------------------------------------------------------------- */

static int find_elf_none(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                         char **file_name, Elf **elfp)
{
    (void)mod, (void)userdata, (void)modname, (void)base;
    *file_name = NULL;
    *elfp = NULL;
    return -1;
}

/* Separate debug files are never looked for (no debuginfod, no /usr/lib/debug): .eh_frame and
 * a .debug_frame in the file itself are what unwinding uses. */
static int find_debuginfo_none(Dwfl_Module *mod, void **userdata, const char *modname,
                               Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                               GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)debuglink_file,
        (void)debuglink_crc;
    *debuginfo_file_name = NULL;
    return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = find_elf_none,
    .find_debuginfo = find_debuginfo_none,
    .section_address = dwfl_offline_section_address,
};

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    if (*thread_argp)
        return 0;
    *thread_argp = arg;
    return ((struct hs_unwinder *)arg)->pid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl, (void)tid;
    *thread_argp = arg;
    return true;
}

/* Reads 8 bytes from the ELF file mapped (read-only) at addr. */
static bool file_read(const struct hs_unwinder *u, uint64_t addr, uint64_t *out)
{
    const struct umap *m = map_find(u, addr);
    if (!m || m->mod < 0 || (m->perms & HS_MAP_WRITE) || !u->mods[m->mod].dm)
        return false;
    Dwarf_Addr bias;
    Elf *elf = dwfl_module_getelf(u->mods[m->mod].dm, &bias);
    size_t size = 0;
    const char *raw = elf ? elf_rawfile(elf, &size) : NULL;
    uint64_t off = addr - m->start + m->offset;
    if (!raw || off > size || size - off < 8 || addr + 8 > m->end)
        return false;
    memcpy(out, raw + off, 8);
    return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    struct hs_unwinder *u = arg;
    struct sample *s = &u->cur;
    uint64_t v;
    if (copy_read(s, addr, &v)) {
        *result = v;
        return true;
    }
    if (s->read_in_gap) {
        s->read_past_end = true; /* the word was there, but is not in the copy */
        return false;
    }
    if (!s->stack_map_known) {
        const struct umap *sm = map_find(u, s->base);
        s->stack_lo = sm ? sm->start : 0;
        s->stack_hi = sm ? sm->end : 0;
        s->stack_map_known = true;
    }
    if (addr >= s->base + s->len && (s->stack_hi == 0 || addr < s->stack_hi)) {
        /* past the copy: the live stack has moved on since the sample */
        s->read_past_end = true;
        return false;
    }
    if (addr >= s->stack_lo && addr < s->stack_hi)
        return false; /* below sp: dead */
    if (u->mem_fd >= 0 && addr < (uint64_t)INT64_MAX && pread(u->mem_fd, &v, 8, (off_t)addr) == 8) {
        *result = v;
        return true;
    }
    if (file_read(u, addr, &v)) {
        *result = v;
        return true;
    }
    return false;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
    struct hs_unwinder *u = thread_arg;
    const struct sample *s = &u->cur;
    if (s->init_known == (ALL_REGS & ~BIT(RIP)) || s->init_known == ALL_REGS) {
        if (!dwfl_thread_state_registers(thread, 0, 16, s->init_regs))
            return false;
    } else {
        for (int r = 0; r < 16; r++) {
            if (!(s->init_known & BIT(r)))
                continue;
            Dwarf_Word v = s->init_regs[r];
            if (!dwfl_thread_state_registers(thread, r, 1, &v))
                return false;
        }
    }
    dwfl_thread_state_register_pc(thread, s->init_pc);
    return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = cb_next_thread,
    .get_thread = cb_get_thread,
    .memory_read = cb_memory_read,
    .set_initial_registers = cb_set_initial_registers,
};

/* Opens the file of a mapping: by its path if that is still the mapped file (same inode and
 * device), else through /proc/PID/map_files or /proc/PID/root (another mount namespace), else
 * a file at the path with the same inode (overlay filesystems may show another device), else
 * the file at the path if the mapping is not marked deleted. Returns an fd or -1. */
static int open_mapped_file(const struct hs_unwinder *u, const struct umod *mod, uintptr_t start,
                            uintptr_t end)
{
    char buf[PATH_MAX + 64];
    int fallback = -1, fallback_rank = 0;
    for (int c = 0; c < 3; c++) {
        const char *p = buf;
        if (c == 0) {
            p = mod->path;
        } else if (c == 1) {
            snprintf(buf, sizeof buf, "/proc/%d/map_files/%lx-%lx", (int)u->pid,
                     (unsigned long)start, (unsigned long)end);
        } else {
            if (snprintf(buf, sizeof buf, "/proc/%d/root%s", (int)u->pid, mod->path) >=
                (int)sizeof buf)
                continue;
        }
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat sb;
        int rank = 0;
        if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_ino == mod->inode)
            rank = sb.st_dev == mod->dev ? 3 : 2;
        else if (c == 0 && !mod->deleted)
            rank = 1;
        if (rank == 3) {
            if (fallback >= 0)
                close(fallback);
            return fd;
        }
        if (rank > fallback_rank) {
            if (fallback >= 0)
                close(fallback);
            fallback = fd;
            fallback_rank = rank;
        } else {
            close(fd);
        }
    }
    return fallback;
}

/* Reports mods[i] to the Dwfl being built; start/end: its executable mapping. */
static void report_module(struct hs_unwinder *u, Dwfl *dwfl, struct umod *mod, uintptr_t start,
                          uintptr_t end)
{
    mod->dm = NULL;
    int fd = open_mapped_file(u, mod, start, end);
    if (fd < 0)
        return;
    /* ET_DYN: base is where the file's first PT_LOAD is placed; ET_EXEC ignores it. */
    Dwfl_Module *dm = dwfl_report_elf(dwfl, mod->path, mod->path, fd, mod->load_base, false);
    if (!dm) {
        close(fd);
        return;
    }
    mod->dm = dm;
}

static Dwfl *dwfl_new(struct hs_unwinder *u)
{
    Dwfl *d = dwfl_begin(&dwfl_callbacks);
    if (!d)
        return NULL;
    if (!dwfl_attach_state(d, u->arch_elf, u->pid, &thread_callbacks, u)) {
        dwfl_end(d);
        return NULL;
    }
    return d;
}

/* ---- Maps ------------------------------------------------------------------------------- */

struct maps_build {
    struct umap *maps;
    size_t nmaps, cap_maps;
    struct umod *mods;
    size_t nmods, cap_mods;
    bool oom;
};

static bool mod_key_eq(const struct umod *a, dev_t dev, uint64_t inode, uintptr_t load_base)
{
    return a->dev == dev && a->inode == inode && a->load_base == load_base;
}

/* Makes room for element n of the array *items of *cap elements of `size` bytes (doubling,
 * `first` at first). False when memory is short (the array is left as it was). */
static bool room_for_one(void **items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return true;
    size_t want = *cap ? *cap * 2 : first;
    void *grown = realloc(*items, want * size);
    if (!grown)
        return false;
    *items = grown;
    *cap = want;
    return true;
}

static int collect_map(const struct hs_map *m, void *arg)
{
    struct maps_build *b = arg;
    if (!room_for_one((void **)&b->maps, &b->cap_maps, b->nmaps, sizeof *b->maps, 256))
        goto oom;
    /* The kernel lists mappings in order; anything else is dropped. */
    if (m->end <= m->start || (b->nmaps && m->start < b->maps[b->nmaps - 1].end))
        return 0;
    struct umap *e = &b->maps[b->nmaps++];
    *e = (struct umap){.start = m->start,
                       .end = m->end,
                       .offset = m->offset,
                       .inode = m->inode,
                       .load_base = m->load_base,
                       .dev = m->dev,
                       .perms = m->perms,
                       .mod = -1};
    if (!(m->perms & HS_MAP_EXEC) || m->inode == 0 || m->path[0] != '/')
        return 0;
    for (size_t i = b->nmods; i-- > 0;)
        if (mod_key_eq(&b->mods[i], m->dev, m->inode, m->load_base))
            return 0;
    if (!room_for_one((void **)&b->mods, &b->cap_mods, b->nmods, sizeof *b->mods, 64))
        goto oom;
    char *path = strdup(m->path);
    if (!path)
        goto oom;
    b->mods[b->nmods++] = (struct umod){.dev = m->dev,
                                        .inode = m->inode,
                                        .load_base = m->load_base,
                                        .deleted = m->deleted,
                                        .path = path};
    return 0;
oom:
    b->oom = true;
    return 1;
}

static void free_mods(struct umod *mods, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(mods[i].path);
    free(mods);
}

/* Whether every executable mapping of old is in new (same range, offset and file). */
static bool exec_maps_kept(const struct umap *old, size_t nold, const struct umap *new, size_t nnew)
{
    size_t j = 0;
    for (size_t i = 0; i < nold; i++) {
        const struct umap *o = &old[i];
        if (!(o->perms & HS_MAP_EXEC))
            continue;
        while (j < nnew && new[j].start < o->start)
            j++;
        if (j == nnew)
            return false;
        const struct umap *n = &new[j];
        if (n->start != o->start || n->end != o->end || n->offset != o->offset ||
            n->inode != o->inode || n->dev != o->dev || n->load_base != o->load_base ||
            !(n->perms & HS_MAP_EXEC))
            return false;
    }
    return true;
}

int hs_unwinder_set_maps(struct hs_unwinder *u, const char *text, size_t len)
{
    struct maps_build b = {0};
    struct hs_map *scratch = malloc(sizeof *scratch);
    if (!scratch)
        return -1;
    struct hs_maps_parser p;
    hs_maps_parser_init(&p, scratch);
    if (hs_maps_parser_feed(&p, text, len, collect_map, &b) == 0)
        hs_maps_parser_finish(&p, collect_map, &b);
    free(scratch);
    if (b.oom) {
        free(b.maps);
        free_mods(b.mods, b.nmods);
        return -1;
    }

    /* Every file mapping points at its file's module (runs are consecutive). */
    int last = -1;
    for (size_t i = 0; i < b.nmaps; i++) {
        struct umap *m = &b.maps[i];
        if (!m->inode)
            continue;
        if (last >= 0 && mod_key_eq(&b.mods[last], m->dev, m->inode, m->load_base)) {
            m->mod = last;
            continue;
        }
        for (size_t k = 0; k < b.nmods; k++)
            if (mod_key_eq(&b.mods[k], m->dev, m->inode, m->load_base)) {
                m->mod = last = (int)k;
                break;
            }
    }

    bool rebuild = !u->dwfl || !exec_maps_kept(u->maps, u->nmaps, b.maps, b.nmaps);
    Dwfl *dwfl = u->dwfl;
    if (rebuild) {
        dwfl = dwfl_new(u);
        if (!dwfl) {
            free(b.maps);
            free_mods(b.mods, b.nmods);
            return -1;
        }
        dwfl_report_begin(dwfl);
    } else {
        /* Modules already reported keep their Dwfl_Module (and rules); a file that could not
         * be reported is not tried again until a rebuild. */
        for (size_t k = 0; k < b.nmods; k++)
            for (size_t j = 0; j < u->nmods; j++)
                if (mod_key_eq(&u->mods[j], b.mods[k].dev, b.mods[k].inode, b.mods[k].load_base)) {
                    b.mods[k].dm = u->mods[j].dm;
                    b.mods[k].tried = true;
                    break;
                }
        dwfl_report_begin_add(dwfl);
    }
    for (size_t i = 0; i < b.nmaps; i++) {
        const struct umap *m = &b.maps[i];
        if (m->mod < 0 || !(m->perms & HS_MAP_EXEC) || b.mods[m->mod].tried)
            continue;
        report_module(u, dwfl, &b.mods[m->mod], m->start, m->end);
        b.mods[m->mod].tried = true;
    }
    dwfl_report_end(dwfl, NULL, NULL);

    if (rebuild) {
        if (u->dwfl) {
            dwfl_end(u->dwfl);
            u->st.dwfl_rebuilds++;
        }
        u->dwfl = dwfl;
        rules_clear(u);
    }
    free(u->maps);
    free_mods(u->mods, u->nmods);
    u->maps = b.maps;
    u->nmaps = b.nmaps;
    u->mods = b.mods;
    u->nmods = b.nmods;
    u->st.modules = u->st.modules_failed = 0;
    for (size_t k = 0; k < u->nmods; k++) {
        if (u->mods[k].dm)
            u->st.modules++;
        else
            u->st.modules_failed++;
    }
    return 0;
}

/* ---- Lifetime and settings ---------------------------------------------------------------- */

struct hs_unwinder *hs_unwinder_new(pid_t pid, int proc_mem_fd)
{
    struct hs_unwinder *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->pid = pid > 0 ? pid : getpid();
    u->mem_fd = proc_mem_fd;
    u->rule_limit = HS_UNWIND_DEFAULT_CACHE_LIMIT;
    rule_table_init(&u->rules, &hs_table_libc, NULL, 50);
    if (!rule_table_reserve(&u->rules, RULES_MIN_SLOTS / 2))
        goto fail;

    elf_version(EV_CURRENT);
    Elf64_Ehdr *h = &u->arch_ehdr;
    memcpy(h->e_ident, ELFMAG, SELFMAG);
    h->e_ident[EI_CLASS] = ELFCLASS64;
    h->e_ident[EI_DATA] = ELFDATA2LSB;
    h->e_ident[EI_VERSION] = EV_CURRENT;
    h->e_type = ET_CORE;
    h->e_machine = EM_X86_64;
    h->e_version = EV_CURRENT;
    h->e_ehsize = sizeof *h;
    u->arch_elf = elf_memory((char *)h, sizeof *h);
    if (!u->arch_elf)
        goto fail;
    /* An empty Dwfl until the first maps, so that dwfl_getthread_frames always has one. */
    u->dwfl = dwfl_new(u);
    if (!u->dwfl)
        goto fail;
    dwfl_report_begin(u->dwfl);
    dwfl_report_end(u->dwfl, NULL, NULL);
    return u;
fail:
    hs_unwinder_free(u);
    return NULL;
}

void hs_unwinder_free(struct hs_unwinder *u)
{
    if (!u)
        return;
    if (u->dwfl)
        dwfl_end(u->dwfl);
    if (u->arch_elf)
        elf_end(u->arch_elf);
    free(u->maps);
    free_mods(u->mods, u->nmods);
    rule_table_destroy(&u->rules);
    free(u);
}

int hs_unwinder_skip_range(struct hs_unwinder *u, uintptr_t start, uintptr_t end)
{
    if (start == 0 && end == 0) {
        u->nskip = 0;
        return 0;
    }
    if (start > end || u->nskip == HS_UNWIND_MAX_SKIP)
        return -1;
    u->skip_lo[u->nskip] = start;
    u->skip_hi[u->nskip] = end;
    u->nskip++;
    return 0;
}

void hs_unwinder_set_mode(struct hs_unwinder *u, enum hs_unwind_mode mode)
{
    u->mode = mode;
}

void hs_unwinder_set_cache_limit(struct hs_unwinder *u, size_t max_rules)
{
    u->rule_limit = max_rules < 64 ? 64 : max_rules;
    if (u->rules.count > u->rule_limit)
        rules_clear(u);
}

void hs_unwinder_flush_cache(struct hs_unwinder *u)
{
    rules_clear(u);
}

void hs_unwinder_want_parts(struct hs_unwinder *u, bool want)
{
    u->no_parts = !want;
}

void hs_unwinder_stats(const struct hs_unwinder *u, struct hs_unwind_stats *out)
{
    *out = u->st;
    out->cache_entries = u->rules.count;
    out->cache_bytes = u->rules.cap * sizeof(struct rule);
}

/* ---- Steps ------------------------------------------------------------------------------- */

static int cfi_step(const struct rule *e, struct fstate *s, struct sample *smp)
{
    if (!(s->known & BIT(e->cfa_reg)))
        return HS_UNWIND_BAD_FRAME;
    uint64_t cfa = s->r[e->cfa_reg] + (uint64_t)(int64_t)e->cfa_off;
    if (cfa <= s->r[RSP])
        return HS_UNWIND_BAD_FRAME;
    uint64_t ra, at = cfa + (uint64_t)(int64_t)e->ra_off;
    if (!copy_read(smp, at, &ra))
        return read_fail(smp, at);
    uint32_t known = BIT(RSP) | BIT(RIP);
    for (int i = 0; i < NSAVED; i++) {
        int reg = saved_regnos[i];
        int16_t off = e->off[i];
        if (off == OFF_SAME) {
            known |= s->known & BIT(reg);
        } else if (off != OFF_UNDEF && copy_read(smp, cfa + (uint64_t)(int64_t)off, &s->r[reg])) {
            known |= BIT(reg);
        }
    }
    s->r[RSP] = cfa;
    s->r[RIP] = ra;
    s->known = known;
    return STEP_OK;
}

/* Without CFI: rbp points at the saved rbp, followed by the return address. */
static int fp_step(struct fstate *s, struct sample *smp)
{
    if (!(s->known & BIT(HS_UNWIND_RBP)))
        return HS_UNWIND_NO_INFO;
    uint64_t fp = s->r[HS_UNWIND_RBP], ra, saved;
    if (fp < s->r[RSP] || (fp & 7) || !copy_read(smp, fp, &saved) || !copy_read(smp, fp + 8, &ra))
        return HS_UNWIND_NO_INFO;
    s->r[HS_UNWIND_RBP] = saved;
    s->r[RSP] = fp + 16;
    s->r[RIP] = ra;
    s->known = BIT(HS_UNWIND_RBP) | BIT(RSP) | BIT(RIP);
    return STEP_OK;
}

static int cb_step_frame(Dwfl_Frame *f, void *arg)
{
    struct hs_unwinder *u = arg;
    struct sample *s = &u->cur;
    if (s->frame_idx++ == 0)
        return DWARF_CB_OK;
    Dwarf_Addr pc;
    if (!dwfl_frame_pc(f, &pc, NULL))
        return DWARF_CB_ABORT;
    struct fstate *n = &s->next;
    n->r[RIP] = pc;
    n->known = BIT(RIP);
    for (unsigned r = 0; r < 16; r++) {
        Dwarf_Word v;
        if (dwfl_frame_reg(f, r, &v) == 0) {
            n->r[r] = v;
            n->known |= BIT(r);
        }
    }
    s->got_next = true;
    return DWARF_CB_ABORT;
}

/* One frame with libdwfl: its initial state is *s, looked up at lookup_pc. */
static int dwfl_step(struct hs_unwinder *u, struct fstate *s, uint64_t lookup_pc)
{
    struct sample *c = &u->cur;
    c->job = JOB_STEP;
    c->init_regs = s->r;
    c->init_known = s->known;
    c->init_pc = lookup_pc;
    c->frame_idx = 0;
    c->got_next = false;
    c->read_past_end = false;
    int rc = dwfl_getthread_frames(u->dwfl, u->pid, cb_step_frame, u);
    if (!c->got_next) {
        /* libdwfl ends the walk (0) when the return address cannot be read, too. */
        if (c->read_past_end)
            return HS_UNWIND_TRUNCATED;
        return rc == 0 ? HS_UNWIND_END : HS_UNWIND_BAD_FRAME;
    }
    if (!(c->next.known & BIT(RSP)) || c->next.r[RSP] <= s->r[RSP])
        return HS_UNWIND_BAD_FRAME;
    *s = c->next;
    return STEP_OK;
}

/* ---- Unwinding ---------------------------------------------------------------------------- */

static size_t unwind_cached(struct hs_unwinder *u, const struct hs_unwind_regs *regs,
                            uintptr_t *pcs, size_t max, struct hs_unwind_result *res)
{
    struct fstate s;
    memcpy(s.r, regs->dwarf, sizeof s.r);
    s.known = ALL_REGS;
    bool exact = true; /* the pc is not a return address */
    size_t n = 0;
    for (;;) {
        uint64_t pc = s.r[RIP];
        if (pc == 0) {
            res->stop = res->steps ? HS_UNWIND_END : HS_UNWIND_NOT_CODE;
            break;
        }
        if (res->steps >= HS_UNWIND_MAX_STEPS) {
            res->stop = HS_UNWIND_MAX_FRAMES;
            break;
        }
        uint64_t key = exact ? pc : pc - 1;
        const struct rule *e = key ? rule_find(u, key) : NULL;
        struct rule tmp;
        if (e) {
            u->st.cache_hits++;
        } else {
            int rc = key ? rule_compute(u, key, &tmp) : HS_UNWIND_UNKNOWN_MAP;
            if (rc != STEP_OK) {
                res->stop = rc;
                res->stop_pc = pc;
                break;
            }
            res->cache_misses++;
            u->st.cache_misses++;
            e = rule_insert(u, &tmp);
            if (!e)
                e = &tmp;
        }
        /* Stored as the address looked up: the call site of a return address. */
        if (in_skip(u, key)) {
            res->dropped++;
        } else {
            pcs[n++] = key;
        }
        if (e->kind == K_END) {
            res->stop = HS_UNWIND_END;
            break;
        }
        if (n == max) {
            res->stop = HS_UNWIND_MAX_FRAMES;
            break;
        }
        uint8_t flags = e->flags;
        int rc;
        switch (e->kind) {
        case K_CFI:
            rc = cfi_step(e, &s, &u->cur);
            break;
        case K_FP:
            rc = fp_step(&s, &u->cur);
            if (rc == STEP_OK)
                res->fp_steps++;
            break;
        default:
            rc = dwfl_step(u, &s, key);
            if (rc == STEP_OK)
                res->slow_steps++;
            break;
        }
        /* A saved register may have been left unknown for want of its word: stop here. */
        if (u->cur.read_in_gap)
            rc = HS_UNWIND_TRUNCATED;
        if (rc != STEP_OK) {
            res->stop = rc;
            res->stop_pc = rc == HS_UNWIND_END ? 0 : pc;
            break;
        }
        res->steps++;
        exact = flags & RULE_SIGNAL;
    }
    return n;
}

static int cb_full_frame(Dwfl_Frame *f, void *arg)
{
    struct hs_unwinder *u = arg;
    struct sample *s = &u->cur;
    struct hs_unwind_result *res = s->res;
    Dwarf_Addr raw;
    bool activation;
    if (!dwfl_frame_pc(f, &raw, &activation))
        return DWARF_CB_ABORT;
    /* libdwfl calls a pc an activation when it is the innermost frame's, when the frame is
     * a signal trampoline and when the frame was interrupted by a signal. Only the first and
     * the last are exact; the trampoline's is a return address like the others (as the
     * cached mode, and libgcc, take it). */
    bool exact = s->frame_idx == 0 || s->after_trampoline;
    s->after_trampoline = activation && !exact;
    if (s->read_in_gap) { /* this frame's registers may lack a word the copy left out */
        res->stop = HS_UNWIND_TRUNCATED;
        res->stop_pc = raw;
        s->stopped = true;
        return DWARF_CB_ABORT;
    }
    uintptr_t pc = hs_call_site(raw, exact);
    if (s->frame_idx++ > 0) {
        res->steps++;
        res->slow_steps++;
        Dwarf_Word sp;
        if (dwfl_frame_reg(f, RSP, &sp) != 0 || sp <= s->last_sp) {
            res->stop = HS_UNWIND_BAD_FRAME;
            res->stop_pc = raw;
            s->stopped = true;
            return DWARF_CB_ABORT;
        }
        s->last_sp = sp;
    }
    const struct umap *m = map_find(u, pc);
    if (!m || !(m->perms & HS_MAP_EXEC)) {
        res->stop = m ? HS_UNWIND_NOT_CODE : HS_UNWIND_UNKNOWN_MAP;
        res->stop_pc = raw;
        s->stopped = true;
        return DWARF_CB_ABORT;
    }
    if (in_skip(u, pc))
        res->dropped++;
    else
        s->pcs[s->n++] = pc;
    if (s->n == s->max || res->steps >= HS_UNWIND_MAX_STEPS) {
        res->stop = HS_UNWIND_MAX_FRAMES;
        s->stopped = true;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

static size_t unwind_dwfl(struct hs_unwinder *u, const struct hs_unwind_regs *regs, uintptr_t *pcs,
                          size_t max, struct hs_unwind_result *res)
{
    struct sample *c = &u->cur;
    c->job = JOB_FULL;
    c->init_regs = regs->dwarf;
    c->init_known = ALL_REGS;
    c->init_pc = regs->rip;
    c->frame_idx = 0;
    c->read_past_end = false;
    c->pcs = pcs;
    c->max = max;
    c->n = 0;
    c->last_sp = regs->rsp;
    c->res = res;
    c->stopped = false;
    c->after_trampoline = false;
    if (regs->rip == 0) {
        res->stop = HS_UNWIND_NOT_CODE;
        return 0;
    }
    int rc = dwfl_getthread_frames(u->dwfl, u->pid, cb_full_frame, u);
    if (!c->stopped) {
        if (c->read_past_end) {
            /* libdwfl ends the walk (0) when the return address cannot be read, too. */
            res->stop = HS_UNWIND_TRUNCATED;
            res->stop_pc = c->n ? pcs[c->n - 1] : regs->rip;
        } else if (rc == 0) {
            res->stop = HS_UNWIND_END;
        } else {
            /* The last frame returned could not be unwound. */
            res->stop_pc = c->n ? pcs[c->n - 1] : regs->rip;
            const struct umap *m = map_find(u, res->stop_pc);
            if (m && (m->mod < 0 || !u->mods[m->mod].dm))
                res->stop = HS_UNWIND_NO_INFO;
            else
                res->stop = HS_UNWIND_BAD_FRAME;
        }
    }
    return c->n;
}

/* The largest parts of [8, used) that no read of a complete unwind touched, at least
 * HS_STACK_GAP_MIN bytes each, lowest first, into res->unread (stack_gap.h). */
static void find_unread(struct sample *c, struct hs_unwind_result *res)
{
    if (c->nreads > MAX_READS)
        return; /* some reads were not kept: any part may have been read */
    /* Insertion sort: the reads come nearly in order (frames go up the stack). */
    for (unsigned i = 1; i < c->nreads; i++) {
        struct hs_unwind_word v = c->reads[i];
        unsigned j = i;
        for (; j > 0 && c->reads[j - 1].off > v.off; j--)
            c->reads[j] = c->reads[j - 1];
        c->reads[j] = v;
    }
    struct hs_stack_gap best[HS_UNWIND_UNREAD] = {{0, 0}};
    uint64_t from = 8; /* the innermost word always stays in the copy */
    for (unsigned i = 0; i < c->nreads; i++) {
        uint64_t r = c->reads[i].off;
        uint64_t lo = (from + 7) & ~(uint64_t)7, hi = r & ~(uint64_t)7; /* whole words */
        if (hi > lo && hi - lo >= HS_STACK_GAP_MIN && hi <= UINT32_MAX) {
            struct hs_stack_gap g = {(uint32_t)lo, (uint32_t)(hi - lo)};
            /* Keep the HS_UNWIND_UNREAD longest, longest first. */
            for (unsigned k = 0; k < HS_UNWIND_UNREAD; k++) {
                if (g.len > best[k].len) {
                    struct hs_stack_gap t = best[k];
                    best[k] = g;
                    g = t;
                }
            }
        }
        if (r + 8 > from)
            from = r + 8;
    }
    unsigned n = 0;
    for (unsigned k = 0; k < HS_UNWIND_UNREAD; k++)
        if (best[k].len)
            res->unread[n++] = best[k];
    for (unsigned i = 1; i < n; i++) /* lowest first */
        for (unsigned j = i; j > 0 && res->unread[j - 1].off > res->unread[j].off; j--) {
            struct hs_stack_gap t = res->unread[j - 1];
            res->unread[j - 1] = res->unread[j];
            res->unread[j] = t;
        }
    res->nunread = n;
    hs_assert(hs_stack_gaps_in_order(res->unread, n, c->len));
    /* The highest words read, highest first (a word read twice counts once). */
    unsigned k = 0;
    for (unsigned i = c->nreads; i-- > 0 && k < HS_UNWIND_OUTER_READS;)
        if (k == 0 || res->outer[k - 1].off != c->reads[i].off)
            res->outer[k++] = c->reads[i];
    res->nouter = k;
}

size_t hs_unwind_gapped(struct hs_unwinder *u, const struct hs_unwind_regs *regs, const void *stack,
                        size_t stack_len, const struct hs_stack_gap *gaps, unsigned ngaps,
                        uintptr_t *pcs, size_t max, struct hs_unwind_result *res)
{
    struct hs_unwind_result local;
    if (!res)
        res = &local;
    memset(res, 0, offsetof(struct hs_unwind_result, nunread)); /* not the arrays: 1.1 KiB */
    res->nunread = res->nouter = 0;
    struct sample *c = &u->cur;
    c->stack = stack;
    c->base = regs->rsp;
    bool gaps_fit = ngaps <= HS_STACK_GAPS; /* (before anything reads them) */
    c->gaps = gaps;
    c->ngaps = stack && gaps_fit ? ngaps : 0;
    c->len = stack ? stack_len + hs_stack_gaps_bytes(gaps, c->ngaps) : 0;
    if (c->len > UINTPTR_MAX - c->base)
        c->len = UINTPTR_MAX - c->base;
    c->read_in_gap = false;
    c->keep_reads = !u->no_parts;
    c->nreads = 0;
    c->used = 0;
    c->stack_map_known = false;

    size_t n = 0;
    if (!gaps_fit || !hs_stack_gaps_valid(gaps, c->ngaps, c->len))
        res->stop = HS_UNWIND_BAD_FRAME; /* (records.c lets no such sample through) */
    else if (max == 0)
        res->stop = HS_UNWIND_MAX_FRAMES;
    else if (u->mode == HS_UNWIND_MODE_DWFL)
        n = unwind_dwfl(u, regs, pcs, max, res);
    else
        n = unwind_cached(u, regs, pcs, max, res);

    res->copy_used = c->used;
    res->read_in_gap = c->read_in_gap;
    if (res->stop == HS_UNWIND_END && c->keep_reads) {
        find_unread(c, res);
        res->parts_known = true;
    }
    c->stack = NULL;
    c->len = 0;
    c->gaps = NULL;
    c->ngaps = 0;
    u->st.unwinds++;
    u->st.frames += n;
    u->st.stops[res->stop]++;
    u->st.slow_steps += res->slow_steps;
    u->st.fp_steps += res->fp_steps;
    return n;
}

size_t hs_unwind(struct hs_unwinder *u, const struct hs_unwind_regs *regs, const void *stack,
                 size_t stack_len, uintptr_t *pcs, size_t max, struct hs_unwind_result *res)
{
    return hs_unwind_gapped(u, regs, stack, stack_len, NULL, 0, pcs, max, res);
}
