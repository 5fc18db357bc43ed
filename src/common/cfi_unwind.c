/* cfi_unwind.c: stack walking with cached CFA rules (see cfi_unwind.h).
 *
 * A rule packs into 17 bits beside a 47-bit pc (user-space x86_64 addresses), so that a
 * cache slot is one word: written by one store, read by one load, never torn.
 *   bit 0      CFA register: 0 rsp, 1 rbp
 *   bits 1-10  CFA offset / 8 (1..1023: frames up to 8 KiB); 0 marks a special rule (below)
 *   bits 11-16 k: rbp saved at CFA - 8k (1..63), or 0: rbp unchanged
 * Special rules: offset 0 with register 0 "fall back to libunwind", with register 1 "last
 * frame" (return address undefined).
 */
#define _GNU_SOURCE
#include "cfi_unwind.h"
#include "signal_trampoline.h"

#include <link.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)

#define CACHE_SLOTS 4096
#define PC_BITS 47
#define PC_MASK ((1ull << PC_BITS) - 1)
#define RULE_FALLBACK 0u
#define RULE_LAST 1u
/* A walk never follows more frames than this (a corrupt stack can loop). */
#define MAX_DEPTH 4096
/* remember_state nesting the interpreter keeps. */
#define MAX_REMEMBER 8

/* DWARF register numbers (x86_64 psABI). */
#define DW_RBP 6
#define DW_RSP 7

static uint64_t g_cache[CACHE_SLOTS];
static unsigned long long g_subs; /* dlpi_subs seen at the last miss */

static inline size_t slot_of(uintptr_t pc)
{
    return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 52); /* top 12 bits: CACHE_SLOTS */
}

void hs_cfi_cache_clear(void)
{
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        __atomic_store_n(&g_cache[i], 0, __ATOMIC_RELAXED);
}

/* ---- reading .eh_frame ---- */

struct cursor {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (c->p >= c->end || shift > 63) {
            c->bad = true;
            return 0;
        }
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t sleb(struct cursor *c)
{
    uint64_t v = 0; /* unsigned: shifting into the sign bit is defined */
    unsigned shift = 0;
    uint8_t b;
    do {
        if (c->p >= c->end || shift > 63) {
            c->bad = true;
            return 0;
        }
        b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

static uint64_t fixed(struct cursor *c, size_t n)
{
    if ((size_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little endian */
    c->p += n;
    return v;
}

static inline int32_t s32_at(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* DW_EH_PE_* pointer encodings. */
#define PE_OMIT 0xff
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_DATAREL 0x30
#define PE_INDIRECT 0x80

/* Reads a pointer of encoding enc; datarel is relative to data_base. Indirect pointers are
 * read but not followed (only personality routines use them, and their value is skipped). */
static uint64_t encoded(struct cursor *c, uint8_t enc, uintptr_t data_base)
{
    uintptr_t at = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case PE_ABSPTR:
    case PE_UDATA8:
    case PE_SDATA8:
        v = fixed(c, 8);
        break;
    case PE_ULEB128:
        v = uleb(c);
        break;
    case PE_UDATA2:
        v = fixed(c, 2);
        break;
    case PE_UDATA4:
        v = fixed(c, 4);
        break;
    case PE_SLEB128:
        v = (uint64_t)sleb(c);
        break;
    case PE_SDATA2:
        v = (uint64_t)(int64_t)(int16_t)fixed(c, 2);
        break;
    case PE_SDATA4:
        v = (uint64_t)(int64_t)(int32_t)fixed(c, 4);
        break;
    default:
        c->bad = true;
        return 0;
    }
    switch (enc & 0x70) {
    case 0:
        break;
    case PE_PCREL:
        v += at;
        break;
    case PE_DATAREL:
        v += data_base;
        break;
    default:
        c->bad = true;
    }
    return v;
}

/* How a register is recovered, as far as the walker cares. */
enum reg_how { REG_SAME, REG_AT_CFA, REG_UNDEFINED, REG_OTHER };

struct reg_rule {
    enum reg_how how;
    int64_t offset; /* REG_AT_CFA: saved at CFA + offset */
};

struct frame_state {
    uint64_t cfa_reg;
    int64_t cfa_offset;
    bool cfa_other; /* an expression: not modelled */
    struct reg_rule rbp, ra;
};

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    bool has_z;
    bool signal_frame;
    const uint8_t *insns, *end;
};

static bool parse_cie(const uint8_t *at, const uint8_t *limit, struct cie *out)
{
    struct cursor c = {at, limit, false};
    uint64_t len = fixed(&c, 4);
    if (c.bad || len == 0 || len == 0xffffffffu || len > (uint64_t)(limit - c.p))
        return false;
    c.end = c.p + len;
    if (fixed(&c, 4) != 0) /* a CIE's id is 0 in .eh_frame */
        return false;
    uint8_t version = (uint8_t)fixed(&c, 1);
    if (c.bad || (version != 1 && version != 3))
        return false;
    const char *aug = (const char *)c.p;
    size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
    if (aug_len == (size_t)(c.end - c.p))
        return false;
    c.p += aug_len + 1;
    out->code_align = uleb(&c);
    out->data_align = sleb(&c);
    out->ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
    out->fde_enc = PE_ABSPTR;
    out->has_z = aug[0] == 'z';
    out->signal_frame = false;
    if (aug[0] && !out->has_z)
        return false; /* an augmentation whose data length is unknown */
    if (out->has_z) {
        uint64_t data_len = uleb(&c);
        if (c.bad || data_len > (uint64_t)(c.end - c.p))
            return false;
        const uint8_t *data_end = c.p + data_len;
        for (const char *a = aug + 1; *a && !c.bad; a++) {
            if (*a == 'R') {
                out->fde_enc = (uint8_t)fixed(&c, 1);
            } else if (*a == 'P') {
                uint8_t enc = (uint8_t)fixed(&c, 1);
                encoded(&c, enc & 0x7f, 0);
            } else if (*a == 'L') {
                fixed(&c, 1);
            } else if (*a == 'S') {
                out->signal_frame = true;
            } else {
                break; /* the rest is skipped with the data length */
            }
        }
        c.p = data_end;
    }
    out->insns = c.p;
    out->end = c.end;
    return !c.bad;
}

/* Runs CFA instructions until the location passes pc (FDE instructions) or the end (the
 * CIE's, with pc == UINTPTR_MAX). initial: the state after the CIE's, for restore. */
static bool run(struct frame_state *st, const struct frame_state *initial, const struct cie *cie,
                const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t pc)
{
    struct cursor c = {p, end, false};
    struct frame_state stack[MAX_REMEMBER];
    size_t depth = 0;
    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++;
        uint64_t reg = 0, delta = 0;
        struct reg_rule rule = {REG_OTHER, 0};
        bool set_reg = false;
        switch (op >> 6) {
        case 1:
            delta = (op & 0x3f) * cie->code_align;
            goto advance;
        case 2:
            reg = op & 0x3f;
            rule = (struct reg_rule){REG_AT_CFA, (int64_t)uleb(&c) * cie->data_align};
            set_reg = true;
            goto apply;
        case 3:
            reg = op & 0x3f;
            goto restore;
        default:
            break;
        }
        switch (op) {
        case 0x00: /* nop */
            continue;
        case 0x01: /* set_loc */
            loc = (uintptr_t)encoded(&c, cie->fde_enc, 0);
            if (loc > pc)
                return !c.bad;
            continue;
        case 0x02:
            delta = fixed(&c, 1) * cie->code_align;
            goto advance;
        case 0x03:
            delta = fixed(&c, 2) * cie->code_align;
            goto advance;
        case 0x04:
            delta = fixed(&c, 4) * cie->code_align;
            goto advance;
        case 0x05: /* offset_extended */
            reg = uleb(&c);
            rule = (struct reg_rule){REG_AT_CFA, (int64_t)uleb(&c) * cie->data_align};
            set_reg = true;
            goto apply;
        case 0x06: /* restore_extended */
            reg = uleb(&c);
            goto restore;
        case 0x07: /* undefined */
            reg = uleb(&c);
            rule = (struct reg_rule){REG_UNDEFINED, 0};
            set_reg = true;
            goto apply;
        case 0x08: /* same_value */
            reg = uleb(&c);
            rule = (struct reg_rule){REG_SAME, 0};
            set_reg = true;
            goto apply;
        case 0x09: /* register */
            reg = uleb(&c);
            uleb(&c);
            set_reg = true;
            goto apply;
        case 0x0a: /* remember_state */
            if (depth == MAX_REMEMBER)
                return false;
            stack[depth++] = *st;
            continue;
        case 0x0b: /* restore_state */
            if (depth == 0)
                return false;
            *st = stack[--depth];
            continue;
        case 0x0c: /* def_cfa */
            st->cfa_reg = uleb(&c);
            st->cfa_offset = (int64_t)uleb(&c);
            st->cfa_other = false;
            continue;
        case 0x0d: /* def_cfa_register */
            st->cfa_reg = uleb(&c);
            continue;
        case 0x0e: /* def_cfa_offset */
            st->cfa_offset = (int64_t)uleb(&c);
            continue;
        case 0x0f: { /* def_cfa_expression */
            uint64_t n = uleb(&c);
            if (n > (uint64_t)(c.end - c.p))
                return false;
            c.p += n;
            st->cfa_other = true;
            continue;
        }
        case 0x10:   /* expression */
        case 0x16: { /* val_expression */
            reg = uleb(&c);
            uint64_t n = uleb(&c);
            if (c.bad || n > (uint64_t)(c.end - c.p))
                return false;
            c.p += n;
            set_reg = true;
            goto apply;
        }
        case 0x11: /* offset_extended_sf */
            reg = uleb(&c);
            rule = (struct reg_rule){REG_AT_CFA, sleb(&c) * cie->data_align};
            set_reg = true;
            goto apply;
        case 0x12: /* def_cfa_sf */
            st->cfa_reg = uleb(&c);
            st->cfa_offset = sleb(&c) * cie->data_align;
            st->cfa_other = false;
            continue;
        case 0x13: /* def_cfa_offset_sf */
            st->cfa_offset = sleb(&c) * cie->data_align;
            continue;
        case 0x14: /* val_offset */
            reg = uleb(&c);
            uleb(&c);
            set_reg = true;
            goto apply;
        case 0x15: /* val_offset_sf */
            reg = uleb(&c);
            sleb(&c);
            set_reg = true;
            goto apply;
        case 0x2e: /* GNU_args_size */
            uleb(&c);
            continue;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(&c);
            rule = (struct reg_rule){REG_AT_CFA, -(int64_t)uleb(&c) * cie->data_align};
            set_reg = true;
            goto apply;
        default:
            return false; /* not an opcode this walker knows */
        }
    advance:
        loc += delta;
        if (loc > pc)
            return !c.bad;
        continue;
    restore:
        if (!initial)
            return false; /* restore inside the CIE's own instructions */
        if (reg == DW_RBP)
            st->rbp = initial->rbp;
        else if (reg == cie->ra_reg)
            st->ra = initial->ra;
        continue;
    apply:
        if (!set_reg)
            continue;
        if (reg == DW_RBP)
            st->rbp = rule;
        else if (reg == cie->ra_reg)
            st->ra = rule;
    }
    return !c.bad;
}

/* The packed rule of a frame state; RULE_FALLBACK for anything the walker does not model. */
static uint32_t pack(const struct frame_state *st)
{
    if (st->ra.how == REG_UNDEFINED)
        return RULE_LAST;
    if (st->cfa_other || (st->cfa_reg != DW_RSP && st->cfa_reg != DW_RBP))
        return RULE_FALLBACK;
    if (st->ra.how != REG_AT_CFA || st->ra.offset != -8)
        return RULE_FALLBACK;
    if (st->cfa_offset <= 0 || st->cfa_offset % 8 != 0 || st->cfa_offset / 8 > 1023)
        return RULE_FALLBACK;
    uint32_t k = 0;
    if (st->rbp.how == REG_AT_CFA) {
        if (st->rbp.offset >= 0 || st->rbp.offset % 8 != 0 || -st->rbp.offset / 8 > 63)
            return RULE_FALLBACK;
        k = (uint32_t)(-st->rbp.offset / 8);
    } else if (st->rbp.how != REG_SAME) {
        return RULE_FALLBACK;
    }
    return (st->cfa_reg == DW_RBP ? 1u : 0u) | (uint32_t)(st->cfa_offset / 8) << 1 | k << 11;
}

/* The rule at pc from the FDE that covers it, given the object's .eh_frame_hdr. */
static uint32_t rule_from_hdr(const uint8_t *hdr, uintptr_t pc)
{
    /* version 1; eh_frame_ptr encoding; fde_count encoding; table encoding (datarel sdata4,
     * what the linkers write, is the only one searched). */
    if (hdr[0] != 1 || hdr[3] != (PE_DATAREL | PE_SDATA4))
        return RULE_FALLBACK;
    struct cursor c = {hdr + 4, hdr + 4 + 16, false};
    encoded(&c, hdr[1], (uintptr_t)hdr);
    uint64_t count = encoded(&c, hdr[2], (uintptr_t)hdr);
    if (c.bad || hdr[1] == PE_OMIT || hdr[2] == PE_OMIT || count == 0)
        return RULE_FALLBACK;
    const uint8_t *table = c.p; /* (start, FDE) pairs of int32, relative to hdr */
    /* The last entry whose start is <= pc. */
    size_t lo = 0, hi = (size_t)count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)hdr + s32_at(table + 8 * mid) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if ((uintptr_t)hdr + s32_at(table + 8 * lo) > pc)
        return RULE_FALLBACK;
    const uint8_t *fde = hdr + s32_at(table + 8 * lo + 4);
    /* The FDE: length, CIE pointer (back from here), pc_begin, pc_range, augmentation. */
    struct cursor f = {fde, fde + 8, false};
    uint64_t len = fixed(&f, 4);
    if (len == 0 || len == 0xffffffffu)
        return RULE_FALLBACK;
    f.end = fde + 4 + len;
    const uint8_t *id_at = f.p;
    uint32_t cie_off = (uint32_t)fixed(&f, 4);
    if (cie_off == 0)
        return RULE_FALLBACK;
    struct cie cie;
    if (!parse_cie(id_at - cie_off, id_at, &cie) || cie.signal_frame)
        return RULE_FALLBACK;
    uintptr_t begin = (uintptr_t)encoded(&f, cie.fde_enc, 0);
    uintptr_t range = (uintptr_t)encoded(&f, cie.fde_enc & 0x0f, 0);
    if (f.bad || pc < begin || pc - begin >= range)
        return RULE_FALLBACK;
    if (cie.has_z) {
        uint64_t n = uleb(&f);
        if (f.bad || n > (uint64_t)(f.end - f.p))
            return RULE_FALLBACK;
        f.p += n;
    }
    /* Callee-saved registers start as "same value"; the return address must get a rule. */
    struct frame_state st = {DW_RSP, 8, false, {REG_SAME, 0}, {REG_OTHER, 0}};
    if (!run(&st, NULL, &cie, cie.insns, cie.end, 0, UINTPTR_MAX))
        return RULE_FALLBACK;
    struct frame_state initial = st;
    if (!run(&st, &initial, &cie, f.p, f.end, begin, pc))
        return RULE_FALLBACK;
    return pack(&st);
}

/* Caches pc's rule in its pair of slots (the home slot, slot_of, and its neighbour): in the
 * first that is empty or holds pc, else in the home slot. Why two: with one, two pcs of hot
 * stacks that share a slot evict each other on every capture, and each eviction sends the
 * next capture through the dynamic loader (miss) or libunwind (a walk that may not miss). */
static void store_rule(uintptr_t pc, uint32_t rule)
{
    size_t s = slot_of(pc);
    uint64_t home = __atomic_load_n(&g_cache[s], __ATOMIC_RELAXED);
    if (home != 0 && (home & PC_MASK) != pc) {
        uint64_t next = __atomic_load_n(&g_cache[s ^ 1], __ATOMIC_RELAXED);
        if (next == 0 || (next & PC_MASK) == pc)
            s ^= 1;
    }
    __atomic_store_n(&g_cache[s], (uint64_t)pc | (uint64_t)rule << PC_BITS, __ATOMIC_RELAXED);
}

struct find {
    uintptr_t pc;
    const uint8_t *hdr;
    uintptr_t start, end; /* the object's loaded segments, lowest to highest */
    unsigned long long subs;
};

/* The object this file is linked into (found by the first miss in it): its .eh_frame_hdr
 * is read without the loader's lock, because it cannot be unloaded while its code runs. */
static const uint8_t *g_self_hdr;
static uintptr_t g_self_start, g_self_end;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find *f = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
        f->subs = info->dlpi_subs;
    const ElfW(Phdr) *eh = NULL;
    bool covers = false;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            covers |= f->pc >= start && f->pc - start < ph->p_memsz;
            lo = start < lo ? start : lo;
            hi = start + ph->p_memsz > hi ? start + ph->p_memsz : hi;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            eh = ph;
        }
    }
    if (!covers)
        return 0;
    f->hdr = eh ? (const uint8_t *)(info->dlpi_addr + eh->p_vaddr) : NULL;
    f->start = lo;
    f->end = hi;
    return 1;
}

/* A cache miss: the rule from the CFI, stored in the cache. */
static __attribute__((noinline)) uint32_t miss(uintptr_t pc)
{
    struct find f = {pc, NULL, 0, 0, 0};
    if (!dl_iterate_phdr(find_object, &f))
        return RULE_FALLBACK; /* in no object: libunwind decides (not cached) */
    uintptr_t self = (uintptr_t)hs_cfi_capture;
    if (f.hdr && self >= f.start && self < f.end && !__atomic_load_n(&g_self_hdr, __ATOMIC_ACQUIRE)) {
        g_self_start = f.start;
        g_self_end = f.end;
        __atomic_store_n(&g_self_hdr, f.hdr, __ATOMIC_RELEASE);
    }
    /* An object went away since the last miss: its pcs may belong to another one now. */
    if (f.subs != __atomic_load_n(&g_subs, __ATOMIC_RELAXED)) {
        hs_cfi_cache_clear();
        __atomic_store_n(&g_subs, f.subs, __ATOMIC_RELAXED);
    }
    /* pc is a return address minus 1 (or this function's own pc, never a trampoline's
     * neighbour): a frame returning into glibc's signal trampoline is a signal frame. */
    uint32_t rule = !f.hdr || hs_is_signal_trampoline(pc + 1) ? RULE_FALLBACK
                                                              : rule_from_hdr(f.hdr, pc);
    store_rule(pc, rule);
    return rule;
}

/* A miss of a walk that may take no lock: the rule is read only for a pc of this object
 * (the shim's own frames, on top of every capture), whose CFI is known without the loader. */
static __attribute__((noinline)) uint32_t miss_in_self(uintptr_t pc)
{
    const uint8_t *hdr = __atomic_load_n(&g_self_hdr, __ATOMIC_ACQUIRE);
    if (!hdr || pc < g_self_start || pc >= g_self_end)
        return RULE_FALLBACK;
    uint32_t rule = rule_from_hdr(hdr, pc); /* no signal trampoline here: that is libc's */
    store_rule(pc, rule);
    return rule;
}

/* The rule at pc; a miss reads the CFI (may_miss), or only this object's. */
static inline __attribute__((always_inline)) uint32_t rule_of(uintptr_t pc, bool may_miss)
{
    /* An empty slot (0) can only match pc 0, and its rule bits are RULE_FALLBACK. A pc above
     * PC_MASK never matches, and the misses below turn it away. */
    size_t slot = slot_of(pc);
    uint64_t e = __atomic_load_n(&g_cache[slot], __ATOMIC_RELAXED);
    if (__builtin_expect((e & PC_MASK) == pc, 1))
        return (uint32_t)(e >> PC_BITS);
    e = __atomic_load_n(&g_cache[slot ^ 1], __ATOMIC_RELAXED); /* store_rule's second slot */
    if ((e & PC_MASK) == pc)
        return (uint32_t)(e >> PC_BITS);
    if (pc > PC_MASK)
        return RULE_FALLBACK;
    if (may_miss)
        return miss(pc);
    return miss_in_self(pc);
}

/* One step of a walk: from the frame at *pc (its state *sp, *bp) to its caller, whose call
 * site (return address - 1) becomes *pc. A return address's rule is its call instruction's
 * (ra - 1: a call can be the last instruction of a function). */
enum step { STEP_OK, STEP_END, STEP_FALLBACK };

static inline __attribute__((always_inline)) enum step step(uintptr_t *pc, uintptr_t *sp,
                                                            uintptr_t *bp, bool may_miss)
{
    uint32_t rule = rule_of(*pc, may_miss);
    if (rule <= RULE_LAST) /* RULE_FALLBACK or RULE_LAST */
        return rule == RULE_LAST ? STEP_END : STEP_FALLBACK;
    uintptr_t offset = (uintptr_t)(rule << 2) & (1023u << 3); /* bits 1-10, times 8 */
    uintptr_t cfa;
    if (rule & 1) {
        cfa = *bp + offset;
        if (cfa - *sp - 1 >= ((uintptr_t)1 << 24))
            return STEP_FALLBACK; /* the stack must grow up, in sane steps */
    } else {
        cfa = *sp + offset; /* 8 to 8184 bytes up (a rule's offset is never 0): no test */
    }
    uintptr_t ra = *(const uintptr_t *)(cfa - 8);
    uint32_t k = rule >> 11;
    if (k)
        *bp = *(const uintptr_t *)(cfa - 8 * (uintptr_t)k);
    *sp = cfa;
    if (ra == 0)
        return STEP_END;
    /* A return address into a signal trampoline makes the next lookup (ra - 1) fall back
     * (miss() caches that), before any further frame is stored. */
    *pc = ra - 1;
    return STEP_OK;
}

/* The walk from (pc, sp, bp), the state at instruction pc of the frame it starts at. Frame 0
 * is that frame at pc itself; the others are return addresses, whose call sites are stored.
 * Two loops: the leading frames that are skipped or dropped, then the ones stored, which
 * test nothing but the end of the stack and of frames. The walk stops once frames is full:
 * every frame stored came from a cached CFI rule, so it is libunwind's whatever lies above.
 * at_call_site: (pc, sp, bp) is already a caller's state at a call site, where frame 0's
 * first step would have led (HS_CFI_GET_CALLER): the walk starts as if after that step. */
static inline __attribute__((always_inline)) size_t walk(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                                         uintptr_t *frames, size_t max,
                                                         size_t skip, uintptr_t drop_start,
                                                         uintptr_t drop_end, bool may_miss,
                                                         bool at_call_site)
{
    if (max == 0)
        return 0;
    size_t depth = 1;
    enum step s;
    if (!at_call_site) { /* frame 0 */
        s = step(&pc, &sp, &bp, may_miss);
        if (s != STEP_OK)
            return s == STEP_END ? 0 : HS_CFI_FALLBACK;
    }
    /* The skipped frames, then the leading call sites in the drop range. */
    while (depth <= skip || pc - drop_start < drop_end - drop_start) {
        s = step(&pc, &sp, &bp, may_miss);
        if (s != STEP_OK)
            return s == STEP_END ? 0 : HS_CFI_FALLBACK;
        if (++depth >= MAX_DEPTH)
            return 0;
    }
    /* Both bounds in one: the frames left, and the steps left before MAX_DEPTH. */
    size_t room = MAX_DEPTH - depth < max ? MAX_DEPTH - depth : max;
    uintptr_t *out = frames, *const end = frames + room;
    *out++ = pc;
    while (out != end) {
        s = step(&pc, &sp, &bp, may_miss);
        if (s != STEP_OK) {
            if (s == STEP_END)
                break;
            return HS_CFI_FALLBACK;
        }
        *out++ = pc;
    }
    return (size_t)(out - frames);
}

/* One function for both modes, so that the rule of its own frame (frame 0), cached by a walk
 * that may miss, serves the walks that may not. */
__attribute__((noinline)) size_t hs_cfi_capture(uintptr_t *frames, size_t max, size_t skip,
                                                bool may_miss)
{
    struct hs_cfi_context self;
    /* This function's own state, as unw_getcontext would take it. */
    HS_CFI_GET_CONTEXT(&self);
    return walk(self.pc, self.sp, self.bp, frames, max, skip, 0, 0, may_miss, false);
}

size_t hs_cfi_capture_from(const struct hs_cfi_context *ctx, uintptr_t *frames, size_t max,
                           size_t skip, uintptr_t drop_start, uintptr_t drop_end, bool may_miss)
{
    if (ctx->pc == 0)
        return HS_CFI_FALLBACK;
    return walk(ctx->pc, ctx->sp, ctx->bp, frames, max, skip, drop_start, drop_end, may_miss,
                false);
}

size_t hs_cfi_capture_from_caller(const struct hs_cfi_context *site, uintptr_t *frames,
                                  size_t max, uintptr_t drop_start, uintptr_t drop_end)
{
    if (site->pc + 1 == 0) /* no return address */
        return HS_CFI_FALLBACK;
    return walk(site->pc, site->sp, site->bp, frames, max, 0, drop_start, drop_end, false, true);
}

#else /* not x86_64: libunwind walks every stack */

size_t hs_cfi_capture_from(const struct hs_cfi_context *ctx, uintptr_t *frames, size_t max,
                           size_t skip, uintptr_t drop_start, uintptr_t drop_end, bool may_miss)
{
    (void)ctx;
    (void)drop_start;
    (void)drop_end;
    (void)frames;
    (void)max;
    (void)skip;
    (void)may_miss;
    return HS_CFI_FALLBACK;
}

size_t hs_cfi_capture(uintptr_t *frames, size_t max, size_t skip, bool may_miss)
{
    (void)frames;
    (void)max;
    (void)skip;
    (void)may_miss;
    return HS_CFI_FALLBACK;
}

size_t hs_cfi_capture_from_caller(const struct hs_cfi_context *site, uintptr_t *frames,
                                  size_t max, uintptr_t drop_start, uintptr_t drop_end)
{
    (void)site;
    (void)frames;
    (void)max;
    (void)drop_start;
    (void)drop_end;
    return HS_CFI_FALLBACK;
}

void hs_cfi_cache_clear(void)
{
}

#endif
