/* got_hooks.c: redirecting the allocation calls of every loaded object through its GOT
 * (got_hooks.h).
 *
 * Tables: one record per slot (the GOT entry of a JUMP_SLOT or GLOB_DAT relocation against a
 * hooked name), grouped by object in a fixed array, and one entry per scanned object (its
 * link map, base, dynamic section, program headers and name hash: a link map address reused
 * by another object after a dlclose is noticed). No malloc anywhere.
 *
 * Which objects: every object dl_iterate_phdr reports, except the vDSO, objects without a
 * dynamic section, the calling library's own object, and objects not yet relocated. glibc
 * (2.35 and later) enters an object into _dl_find_object's table in dlopen after relocating it
 * (elf/dl-open.c: _dl_find_object_update comes after the relocation loop, update_scopes, and
 * before the constructors), while dl_iterate_phdr reports it as soon as it is mapped: an
 * object _dl_find_object does not know yet is skipped and the rescan stays wanted.
 *
 * Which slots: a slot is recorded when it holds the hook's expected function, or, lazily
 * bound, the object's own PLT stub while the name resolves to the expected function in the
 * global scope, the object is in the base namespace and does not define the name itself.
 *
 * Writes: every write of a slot is made under g.lock, a spin lock taken with every signal
 * blocked (its holders never block, so a signal handler spinning on another thread waits for
 * a few stores and mprotect calls), as a compare-and-swap, so that a thread calling through
 * the slot sees the old or the new pointer and a slot someone else rewrote is left alone. A
 * slot inside the object's PT_GNU_RELRO range (rounded down at both ends to pages, as glibc's
 * _dl_protect_relro does: only those pages were made read-only) is written between
 * mprotect(PROT_READ | PROT_WRITE) and mprotect(PROT_READ).
 *
 * Unloading: glibc unmaps an object under dl_load_write_lock, the lock dl_iterate_phdr holds
 * for its whole walk, so the scan (which writes from its callback) never meets an unmapped
 * object. apply and restore, which must be async-signal-safe, check with _dl_find_object that
 * the object is still there, and defer every object but the main program while a dlclose
 * redirected to us is in progress (the dlclose wrapper enters under g.lock, so no such
 * dlclose starts during a write); the next scan finishes the deferred writes. A dlclose that
 * does not go through a redirected slot (glibc's own, an unpatched object's) can still unmap
 * an object between the check and the write: an async-signal-safe apply or restore cannot
 * exclude that; the scan can. A dlclose through the wrapper scans once it returns, so that
 * the unloaded object's record is gone before the object can be loaded again: back at the
 * same place (base, link map, dynamic section, name), it would pass for the object recorded.
 *
 * Threads: hs_got_scan runs in one thread at a time (a trylock: a second scanner returns at
 * once, which also keeps a scan started from inside a dl_iterate_phdr callback of the program
 * from deadlocking against a scan waiting for that lock). fork handlers keep the child from
 * inheriting either lock held.
 */
#define _GNU_SOURCE
#include "got_hooks.h"
#include "hash.h"
#include "symbol_binding.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

/* ---- Architecture --------------------------------------------------------------------------- */

#if __ELF_NATIVE_CLASS == 64
#define R_TYPE_OF(info) ELF64_R_TYPE(info)
#define R_SYM_OF(info) ELF64_R_SYM(info)
#else
#define R_TYPE_OF(info) ELF32_R_TYPE(info)
#define R_SYM_OF(info) ELF32_R_SYM(info)
#endif

#if defined(__x86_64__)
#define HS_GOT_SUPPORTED 1
/* The relocations that fill a GOT entry with a function's address (never R_X86_64_64, which
 * writes program data). */
static bool is_got_reloc(uint32_t type)
{
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT;
}
/* aarch64 would be: type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT, plus the
 * three trampolines below in its assembly. */
#else
#define HS_GOT_SUPPORTED 0
static bool is_got_reloc(uint32_t type)
{
    (void)type;
    return false;
}
#endif

/* The module's own entries (after the caller's hooks). */
enum { HOOK_DLOPEN, HOOK_DLMOPEN, HOOK_DLCLOSE, N_INTERNAL_HOOKS };
#define MAX_HOOKS (HS_GOT_MAX_HOOKS + N_INTERNAL_HOOKS)

/* The most slots one object can contribute (one per relocation naming a hook). */
#define MAX_OBJECT_SLOTS 512

struct got_object {
    const struct link_map *lm; /* NULL: a free entry */
    uintptr_t base;            /* its load bias (dlpi_addr, lm->l_addr) */
    const void *ld;            /* its dynamic section (lm->l_ld) */
    const void *phdr;          /* dlpi_phdr */
    const char *name;          /* dlpi_name (valid while the object is loaded) */
    uint64_t name_hash;
    uint32_t first, count; /* its records: g.slots[first, first + count) */
    uint32_t seen;         /* the last scan that saw it */
    uint32_t done_gen;     /* the apply/restore generation its slots were brought to */
    bool permanent;        /* the main program: never unloaded */
};

struct got_slot {
    void **slot;
    void *original; /* what it held when recorded */
    void *saved;    /* what the last write of the replacement replaced */
    uint16_t hook;
    uint16_t obj;
    bool relro;  /* the page is read-only: mprotect around a write */
    bool hooked; /* holds our replacement (as last written by us) */
};

/* What a scan found in one object, before it is entered into the tables. */
struct staged_slot {
    void **slot;
    void *original;
    uint16_t hook;
    bool relro;
};

static struct {
    bool ready;
    int lock;             /* guards the tables and every slot write; see lock_acquire */
    pthread_mutex_t scan; /* one scanner at a time (trylock) */
    int active;           /* hooks asked for (apply) or not (restore); atomic */
    int closing;          /* dlclose calls through the wrapper in progress; under lock */
    uint32_t want_gen;    /* bumped by every apply and restore; under lock */
    uint32_t epoch;       /* scans so far; scan mutex */
    size_t nhooks;        /* the caller's hooks plus N_INTERNAL_HOOKS */
    struct hs_got_hook hooks[MAX_HOOKS];
    bool lazy_ok[MAX_HOOKS]; /* the name resolves to expected in the global scope */
    int (*find_object)(void *, struct dl_find_object *);
    int (*real_dlclose)(void *);
    const struct link_map *self;
    uintptr_t vdso;
    uintptr_t page;
    uint32_t nslots;   /* under lock */
    uint32_t nobjects; /* high-water mark of objects[]; under lock */
    uint32_t hooked_now;
    struct got_object objects[HS_GOT_MAX_OBJECTS];
    struct got_slot slots[HS_GOT_MAX_SLOTS];
    struct staged_slot staged[MAX_OBJECT_SLOTS]; /* scan mutex */
    struct hs_got_stats stats;
} g = {.scan = PTHREAD_MUTEX_INITIALIZER};

/* Read by the trampolines (hidden, for RIP-relative addressing from the assembly). */
__attribute__((visibility("hidden"))) int hs_got_rescan_flag;
__attribute__((visibility("hidden"))) uint64_t hs_got_tramp_calls;
__attribute__((visibility("hidden"))) void *hs_got_real_dlopen;
__attribute__((visibility("hidden"))) void *hs_got_real_dlmopen;

#define STAT_ADD(field, n) __atomic_fetch_add(&g.stats.field, (n), __ATOMIC_RELAXED)

/* ---- Trampolines ------------------------------------------------------------------------------
 *
 * dlopen and dlmopen find the calling object from their return address (its RUNPATH, $ORIGIN,
 * and for dlopen the namespace: glibc passes __LM_ID_CALLER). A dlopen whose result does not
 * depend on its caller (a path with a slash and no $, or NULL, called from an object of the
 * base namespace: dlopen_is_plain) is made by dlopen_then_scan, which scans as soon as it
 * returns, so the new object's calls are redirected from its first one on. Any other dlopen,
 * and every dlmopen, must leave the stack as the caller made it: the trampoline asks for a
 * rescan and jumps to glibc's function. The flag is set to 2, i.e. two scans: a scan that runs
 * while the dlopen is still before mapping its object cannot see it, and nothing runs after
 * the jump to say that the dlopen is over; the second scan (at the next opportunity of the
 * client) narrows that window, it does not close it.
 *
 * dlclose takes no return address: its wrapper is plain C and counts itself in g.closing for
 * as long as it runs, so that apply and restore never write into an object it may unmap. */
#if HS_GOT_SUPPORTED
__attribute__((visibility("hidden"))) void hs_got_tramp_dlopen(void);
__attribute__((visibility("hidden"))) int hs_got_dlopen_is_plain(const char *file, int mode,
                                                                 void *caller);
__attribute__((visibility("hidden"))) void *hs_got_dlopen_then_scan(const char *file, int mode);
__attribute__((visibility("hidden"))) void hs_got_tramp_dlmopen(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl hs_got_tramp_dlopen\n"
        ".hidden hs_got_tramp_dlopen\n"
        ".type hs_got_tramp_dlopen, @function\n"
        "hs_got_tramp_dlopen:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  lock incq hs_got_tramp_calls(%rip)\n"
        /* dlopen_is_plain(file, mode, return address), the arguments kept around it. */
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  movq 24(%rsp), %rdx\n"
        "  call hs_got_dlopen_is_plain\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  testl %eax, %eax\n"
        "  jnz hs_got_dlopen_then_scan\n"
        "  movl $2, hs_got_rescan_flag(%rip)\n"
        "  jmp *hs_got_real_dlopen(%rip)\n"
        "  .cfi_endproc\n"
        ".size hs_got_tramp_dlopen, .-hs_got_tramp_dlopen\n"
        ".p2align 4\n"
        ".globl hs_got_tramp_dlmopen\n"
        ".hidden hs_got_tramp_dlmopen\n"
        ".type hs_got_tramp_dlmopen, @function\n"
        "hs_got_tramp_dlmopen:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  lock incq hs_got_tramp_calls(%rip)\n"
        "  movl $2, hs_got_rescan_flag(%rip)\n"
        "  jmp *hs_got_real_dlmopen(%rip)\n"
        "  .cfi_endproc\n"
        ".size hs_got_tramp_dlmopen, .-hs_got_tramp_dlmopen\n");
#endif

/* ---- The lock ---------------------------------------------------------------------------------
 */

/* Blocks every signal, then spins: a handler can never interrupt a holder on its own thread,
 * and holders only store, compare and call mprotect, so the wait is short. */
static void lock_acquire(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, old);
    while (__atomic_exchange_n(&g.lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void lock_release(const sigset_t *old)
{
    __atomic_store_n(&g.lock, 0, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void want_rescan(int scans)
{
    int cur = __atomic_load_n(&hs_got_rescan_flag, __ATOMIC_RELAXED);
    while (cur < scans && !__atomic_compare_exchange_n(&hs_got_rescan_flag, &cur, scans, true,
                                                       __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
}

/* Called before each redirected dlclose (hs_got_set_before_dlclose), or NULL. */
static void (*g_before_dlclose)(void);

void hs_got_set_before_dlclose(void (*fn)(void))
{
    __atomic_store_n(&g_before_dlclose, fn, __ATOMIC_RELEASE);
}

static int hs_got_dlclose(void *handle)
{
    sigset_t old;
    __atomic_fetch_add(&hs_got_tramp_calls, 1, __ATOMIC_RELAXED);
    /* Under the lock: no apply or restore is writing when a dlclose starts. */
    lock_acquire(&old);
    __atomic_fetch_add(&g.closing, 1, __ATOMIC_ACQ_REL);
    lock_release(&old);
    void (*before)(void) = __atomic_load_n(&g_before_dlclose, __ATOMIC_ACQUIRE);
    if (before)
        before();
    int ret = g.real_dlclose(handle);
    want_rescan(1);
    __atomic_fetch_sub(&g.closing, 1, __ATOMIC_RELEASE);
    /* Drop the unloaded object's record now: loaded again at the same address with its link
     * map at the same place (a plug-in reloaded in a loop), it would pass for the object
     * recorded, and its fresh slots, no longer holding what was recorded, stayed glibc's. */
    int saved_errno = errno;
    hs_got_scan();
    errno = saved_errno;
    return ret;
}

#if HS_GOT_SUPPORTED
/* True when dlopen(file) gives the same result whoever calls it: no search path of the
 * caller's and no $ORIGIN are involved, and the caller is in the base namespace. */
int hs_got_dlopen_is_plain(const char *file, int mode, void *caller)
{
    (void)mode;
    if (file != NULL && (strchr(file, '/') == NULL || strchr(file, '$') != NULL))
        return 0;
    struct dl_find_object r;
    Lmid_t lmid;
    return g.find_object(caller, &r) == 0 &&
           dlinfo((void *)r.dlfo_link_map, RTLD_DI_LMID, &lmid) == 0 && lmid == LM_ID_BASE;
}

/* glibc's dlopen, then the scan that redirects the new objects before anyone calls them. */
void *hs_got_dlopen_then_scan(const char *file, int mode)
{
    void *handle = ((void *(*)(const char *, int))hs_got_real_dlopen)(file, mode);
    if (handle != NULL) {
        int saved_errno = errno;
        want_rescan(1); /* left for the next chance when another thread is scanning */
        hs_got_scan();
        errno = saved_errno;
    }
    return handle;
}
#endif

/* ---- Slot writes (g.lock held) ------------------------------------------------------------- */

enum store_result { STORE_DONE, STORE_CHANGED, STORE_FAILED };

/* Replaces from by to in s's slot, the page made writable for the time of the store when
 * it is a RELRO page. The slot is read before anything is changed: a slot that does not
 * hold from is left as it is (and its page's protection too). */
static enum store_result store_slot(const struct got_slot *s, void *from, void *to)
{
    void *cur = __atomic_load_n(s->slot, __ATOMIC_ACQUIRE);
    if (cur != from)
        return STORE_CHANGED;
    void *page = (void *)((uintptr_t)s->slot & ~(g.page - 1));
    if (s->relro && mprotect(page, g.page, PROT_READ | PROT_WRITE) != 0)
        return STORE_FAILED;
    bool ok =
        __atomic_compare_exchange_n(s->slot, &cur, to, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    if (s->relro)
        mprotect(page, g.page, PROT_READ);
    return ok ? STORE_DONE : STORE_CHANGED;
}

static void hook_slot(struct got_slot *s)
{
    if (s->hooked)
        return;
    const struct hs_got_hook *h = &g.hooks[s->hook];
    void *cur = __atomic_load_n(s->slot, __ATOMIC_ACQUIRE);
    if (cur != s->original && cur != h->expected) {
        STAT_ADD(slots_changed, 1);
        return;
    }
    enum store_result r = store_slot(s, cur, h->replacement);
    if (r == STORE_DONE) {
        s->saved = cur;
        s->hooked = true;
        g.hooked_now++;
        STAT_ADD(slots_patched, 1);
    } else if (r == STORE_CHANGED) {
        STAT_ADD(slots_changed, 1);
    }
}

static void unhook_slot(struct got_slot *s)
{
    if (!s->hooked)
        return;
    enum store_result r = store_slot(s, g.hooks[s->hook].replacement, s->saved);
    if (r == STORE_FAILED)
        return; /* still ours: tried again by the next restore or scan */
    s->hooked = false;
    g.hooked_now--;
    if (r == STORE_DONE)
        STAT_ADD(slots_restored, 1);
    else
        STAT_ADD(slots_changed, 1); /* rewritten by someone else (a lazy fixup): theirs now */
}

/* Brings o's slots to the state asked for. The object must be mapped. */
static void reconcile_object(struct got_object *o, bool active)
{
    for (uint32_t i = o->first; i < o->first + o->count; i++) {
        if (active)
            hook_slot(&g.slots[i]);
        else
            unhook_slot(&g.slots[i]);
    }
    o->done_gen = g.want_gen;
}

/* True while o is still loaded: _dl_find_object (async-signal-safe, lock-free) knows its
 * dynamic section as part of the same link map, at the same base. */
static bool object_live(const struct got_object *o)
{
    struct dl_find_object r;
    if (g.find_object((void *)o->ld, &r) != 0 || r.dlfo_link_map != o->lm)
        return false;
    return r.dlfo_link_map->l_addr == o->base && (const void *)r.dlfo_link_map->l_ld == o->ld;
}

/* Drops object i and its records (nothing is written: the object is gone or replaced). */
static void remove_object(uint32_t i)
{
    struct got_object *o = &g.objects[i];
    uint32_t first = o->first, count = o->count;
    for (uint32_t k = first; k < first + count; k++)
        if (g.slots[k].hooked)
            g.hooked_now--;
    memmove(&g.slots[first], &g.slots[first + count],
            (g.nslots - first - count) * sizeof(g.slots[0]));
    g.nslots -= count;
    for (uint32_t j = 0; j < g.nobjects; j++)
        if (g.objects[j].lm != NULL && g.objects[j].first > first)
            g.objects[j].first -= count;
    memset(o, 0, sizeof(*o));
    while (g.nobjects > 0 && g.objects[g.nobjects - 1].lm == NULL)
        g.nobjects--;
}

/* ---- apply / restore (async-signal-safe) --------------------------------------------------- */

static size_t switch_all(bool active)
{
    if (!g.ready)
        return 0;
    int saved_errno = errno;
    size_t deferred = 0;
    bool gone = false;
    sigset_t old;
    lock_acquire(&old);
    __atomic_store_n(&g.active, active, __ATOMIC_RELEASE);
    g.want_gen++;
    bool closing = __atomic_load_n(&g.closing, __ATOMIC_ACQUIRE) != 0;
    for (uint32_t i = 0; i < g.nobjects; i++) {
        struct got_object *o = &g.objects[i];
        if (o->lm == NULL)
            continue;
        if (closing && !o->permanent) {
            for (uint32_t k = o->first; k < o->first + o->count; k++)
                deferred += g.slots[k].hooked != active;
            continue;
        }
        if (!object_live(o)) {
            gone = true; /* pruned by the next scan; nothing of it is written */
            continue;
        }
        reconcile_object(o, active);
    }
    lock_release(&old);
    if (deferred) {
        STAT_ADD(slots_deferred, deferred);
        want_rescan(1);
    }
    if (gone)
        want_rescan(1);
    errno = saved_errno;
    return deferred;
}

size_t hs_got_apply(void)
{
    size_t deferred = switch_all(true);
    /* Objects loaded while the hooks were off (dlopen not redirected) are not known yet. */
    want_rescan(1);
    return deferred;
}

size_t hs_got_restore(void)
{
    return switch_all(false);
}

bool hs_got_rescan_wanted(void)
{
    return __atomic_load_n(&hs_got_rescan_flag, __ATOMIC_RELAXED) != 0;
}

bool hs_got_active(void)
{
    return __atomic_load_n(&g.active, __ATOMIC_ACQUIRE) != 0;
}

/* ---- Reading an object's relocations (scan) -------------------------------------------------- */

/* The PT_LOAD segment holding [addr, addr + len), or NULL. */
static const ElfW(Phdr) * segment_of(const struct dl_phdr_info *info, uintptr_t addr, size_t len)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (addr >= start && len <= ph->p_memsz && addr - start <= ph->p_memsz - len)
            return ph;
    }
    return NULL;
}

/* A d_ptr of the dynamic section as an address: glibc relocates most of them in place
 * (elf/get-dynamic-info.h adds l_addr on targets whose dynamic section is writable, x86_64
 * included), other loaders or entries may not; whichever reading lands inside one of the
 * object's segments (len bytes) is taken. 0 when neither does. */
static uintptr_t dyn_address(const struct dl_phdr_info *info, ElfW(Addr) value, size_t len)
{
    if (segment_of(info, value, len))
        return value;
    if (info->dlpi_addr != 0 && segment_of(info, info->dlpi_addr + value, len))
        return info->dlpi_addr + value;
    return 0;
}

static uint64_t hash_name(const char *s)
{
    return hs_hash_string(s ? s : "");
}

static int hook_index(const char *name)
{
    for (size_t i = 0; i < g.nhooks; i++)
        if (g.hooks[i].name[0] == name[0] && strcmp(g.hooks[i].name, name) == 0)
            return (int)i;
    return -1;
}

struct object_scan {
    const struct dl_phdr_info *info;
    const struct link_map *lm;
    uintptr_t symtab, strtab;
    size_t strsz;
    uintptr_t relro_start, relro_end;
    int base_ns; /* -1 unknown, 0 no, 1 yes */
    size_t n;
    uint64_t overflow, foreign;
};

static bool in_base_namespace(struct object_scan *os)
{
    if (os->base_ns < 0) {
        Lmid_t lmid = -1;
        /* glibc's handles are link maps; RTLD_DI_LMID only reads l_ns (no lock taken, which
         * matters inside dl_iterate_phdr). */
        os->base_ns = dlinfo((void *)os->lm, RTLD_DI_LMID, &lmid) == 0 && lmid == LM_ID_BASE;
    }
    return os->base_ns == 1;
}

/* Stages the slot of one relocation when it names a hook and qualifies. */
static void stage_reloc(struct object_scan *os, const ElfW(Rela) * r)
{
    if (!is_got_reloc((uint32_t)R_TYPE_OF(r->r_info)))
        return;
    size_t symidx = R_SYM_OF(r->r_info);
    if (symidx == 0)
        return;
    const struct dl_phdr_info *info = os->info;
    uintptr_t symaddr = os->symtab + symidx * sizeof(ElfW(Sym));
    if (!segment_of(info, symaddr, sizeof(ElfW(Sym))))
        return;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)symaddr;
    if (sym->st_name >= os->strsz)
        return;
    const char *name = (const char *)(os->strtab + sym->st_name);
    if (memchr(name, '\0', os->strsz - sym->st_name) == NULL)
        return;
    int h = hook_index(name);
    if (h < 0)
        return;
    uintptr_t slot = info->dlpi_addr + r->r_offset;
    const ElfW(Phdr) *seg = segment_of(info, slot, sizeof(void *));
    if (seg == NULL || !(seg->p_flags & PF_W) || slot % sizeof(void *) != 0)
        return;
    void *value = __atomic_load_n((void **)slot, __ATOMIC_ACQUIRE);
    bool ok = value == g.hooks[h].expected;
    if (!ok) {
        /* Lazily bound: still its own PLT stub, in one of its executable segments. Its
         * first call binds it in the global scope (the expected function: lazy_ok), unless
         * the object was loaded RTLD_DEEPBIND and defines the name itself (then only when
         * its own definition is the expected one, as in libc.so.6), or it lives in another
         * namespace, with a libc of its own. */
        const ElfW(Phdr) *vseg = segment_of(info, (uintptr_t)value, 1);
        bool own_ok = sym->st_shndx == SHN_UNDEF ||
                      (void *)(info->dlpi_addr + sym->st_value) == g.hooks[h].expected;
        ok = vseg != NULL && (vseg->p_flags & PF_X) && g.lazy_ok[h] && own_ok &&
             in_base_namespace(os);
    }
    if (!ok) {
        os->foreign++;
        return;
    }
    for (size_t i = 0; i < os->n; i++)
        if (g.staged[i].slot == (void **)slot)
            return;
    if (os->n == MAX_OBJECT_SLOTS) {
        os->overflow++;
        return;
    }
    g.staged[os->n++] = (struct staged_slot){
        .slot = (void **)slot,
        .original = value,
        .hook = (uint16_t)h,
        .relro = slot >= os->relro_start && slot < os->relro_end,
    };
}

static void stage_relocs(struct object_scan *os, uintptr_t table, size_t size, size_t entsize)
{
    if (table == 0 || size == 0 || entsize < sizeof(ElfW(Rela)))
        return;
    if (!segment_of(os->info, table, size))
        return;
    for (size_t off = 0; off + sizeof(ElfW(Rela)) <= size; off += entsize)
        stage_reloc(os, (const ElfW(Rela) *)(table + off));
}

/* Reads the dynamic section of an object and stages its slots into g.staged. Returns false
 * when the object cannot be read (no tables, a layout this module does not handle). */
static bool stage_object(struct object_scan *os, const ElfW(Phdr) * dyn_ph)
{
    const struct dl_phdr_info *info = os->info;
    const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + dyn_ph->p_vaddr);
    size_t ndyn = dyn_ph->p_memsz / sizeof(ElfW(Dyn));
    ElfW(Addr) jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltrelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela)), strsz = 0;
    ElfW(Sxword) pltrel = DT_RELA;
    for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
        switch (dyn[i].d_tag) {
        case DT_JMPREL:
            jmprel = dyn[i].d_un.d_ptr;
            break;
        case DT_PLTRELSZ:
            pltrelsz = dyn[i].d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (ElfW(Sxword))dyn[i].d_un.d_val;
            break;
        case DT_RELA:
            rela = dyn[i].d_un.d_ptr;
            break;
        case DT_RELASZ:
            relasz = dyn[i].d_un.d_val;
            break;
        case DT_RELAENT:
            relaent = dyn[i].d_un.d_val;
            break;
        case DT_SYMTAB:
            symtab = dyn[i].d_un.d_ptr;
            break;
        case DT_STRTAB:
            strtab = dyn[i].d_un.d_ptr;
            break;
        case DT_STRSZ:
            strsz = dyn[i].d_un.d_val;
            break;
        default:
            break;
        }
    }
    os->symtab = dyn_address(info, symtab, sizeof(ElfW(Sym)));
    os->strtab = dyn_address(info, strtab, strsz ? strsz : 1);
    os->strsz = strsz;
    if (os->symtab == 0 || os->strtab == 0 || strsz == 0)
        return false;
    /* x86_64 and aarch64 use RELA only; an object with REL PLT relocations is not read. */
    if (jmprel != 0 && pltrelsz != 0 && pltrel == DT_RELA)
        stage_relocs(os, dyn_address(info, jmprel, pltrelsz), pltrelsz, sizeof(ElfW(Rela)));
    if (rela != 0 && relasz != 0)
        stage_relocs(os, dyn_address(info, rela, relasz), relasz, relaent);
    return true;
}

static int find_object_entry(const struct link_map *lm)
{
    for (uint32_t i = 0; i < g.nobjects; i++)
        if (g.objects[i].lm == lm)
            return (int)i;
    return -1;
}

/* Enters a staged object into the tables and, hooks being active, writes its slots (we are
 * inside dl_iterate_phdr: the object cannot be unmapped meanwhile). Lock held. */
static uint32_t enter_object(const struct object_scan *os, bool permanent)
{
    uint32_t idx = 0;
    while (idx < HS_GOT_MAX_OBJECTS && g.objects[idx].lm != NULL)
        idx++;
    if (idx == HS_GOT_MAX_OBJECTS || g.nslots + os->n > HS_GOT_MAX_SLOTS) {
        STAT_ADD(slots_overflow, os->n); /* the object is tried again by the next scan */
        return 0;
    }
    const struct dl_phdr_info *info = os->info;
    struct got_object *o = &g.objects[idx];
    *o = (struct got_object){
        .lm = os->lm,
        .base = info->dlpi_addr,
        .ld = os->lm->l_ld,
        .phdr = info->dlpi_phdr,
        .name = info->dlpi_name,
        .name_hash = hash_name(info->dlpi_name),
        .first = g.nslots,
        .count = (uint32_t)os->n,
        .seen = g.epoch,
        .permanent = permanent,
    };
    if (idx >= g.nobjects)
        g.nobjects = idx + 1;
    for (size_t i = 0; i < os->n; i++)
        g.slots[g.nslots++] = (struct got_slot){
            .slot = g.staged[i].slot,
            .original = g.staged[i].original,
            .hook = g.staged[i].hook,
            .obj = (uint16_t)idx,
            .relro = g.staged[i].relro,
        };
    reconcile_object(o, __atomic_load_n(&g.active, __ATOMIC_ACQUIRE));
    STAT_ADD(objects_scanned, 1);
    STAT_ADD(slots_recorded, os->n);
    return (uint32_t)os->n;
}

struct scan_ctx {
    size_t index;    /* of the object in the walk */
    uint32_t added;  /* slots recorded */
    bool incomplete; /* an object was not relocated yet */
};

static int scan_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct scan_ctx *ctx = arg;
    bool first = ctx->index++ == 0;
    if (size < offsetof(struct dl_phdr_info, dlpi_adds))
        return 0;
    const ElfW(Phdr) *dyn_ph = NULL;
    uintptr_t ehdr = 0;
    struct object_scan os = {.info = info, .base_ns = -1};
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn_ph = ph;
        else if (ph->p_type == PT_LOAD && ph->p_offset == 0)
            ehdr = info->dlpi_addr + ph->p_vaddr;
        else if (ph->p_type == PT_GNU_RELRO) {
            uintptr_t start = info->dlpi_addr + ph->p_vaddr;
            os.relro_start = start & ~(g.page - 1);
            os.relro_end = (start + ph->p_memsz) & ~(g.page - 1);
        }
    }
    if (dyn_ph == NULL || (g.vdso != 0 && ehdr == g.vdso))
        return 0;
    const void *ld = (const void *)(info->dlpi_addr + dyn_ph->p_vaddr);

    /* Relocated yet? glibc enters a dlopen'ed object into _dl_find_object's data only after
     * relocating it. */
    struct dl_find_object r;
    if (g.find_object((void *)ld, &r) != 0 || r.dlfo_link_map->l_addr != info->dlpi_addr ||
        (const void *)r.dlfo_link_map->l_ld != ld) {
        ctx->incomplete = true;
        STAT_ADD(objects_incomplete, 1);
        return 0;
    }
    os.lm = r.dlfo_link_map;
    if (os.lm == g.self)
        return 0;

    sigset_t old;
    int known = find_object_entry(os.lm);
    if (known >= 0) {
        struct got_object *o = &g.objects[known];
        if (o->base == info->dlpi_addr && o->ld == ld && o->phdr == info->dlpi_phdr &&
            o->name_hash == hash_name(info->dlpi_name)) {
            o->seen = g.epoch;
            if (__atomic_load_n(&o->done_gen, __ATOMIC_RELAXED) !=
                __atomic_load_n(&g.want_gen, __ATOMIC_RELAXED)) {
                lock_acquire(&old);
                reconcile_object(o, __atomic_load_n(&g.active, __ATOMIC_ACQUIRE));
                lock_release(&old);
            }
            return 0;
        }
        /* Another object at a reused link map: the old one is gone. */
        lock_acquire(&old);
        remove_object((uint32_t)known);
        lock_release(&old);
        STAT_ADD(objects_pruned, 1);
    }

    if (!stage_object(&os, dyn_ph))
        os.n = 0; /* entered without slots all the same: not read again */
    STAT_ADD(slots_overflow, os.overflow);
    STAT_ADD(slots_foreign, os.foreign);
    lock_acquire(&old);
    ctx->added += enter_object(&os, first && info->dlpi_name[0] == '\0');
    lock_release(&old);
    return 0;
}

int hs_got_scan(void)
{
    if (!g.ready) {
        errno = EINVAL;
        return -1;
    }
    if (pthread_mutex_trylock(&g.scan) != 0)
        return 0;
    int saved_errno = errno; /* called from allocation functions */
    /* Consume one requested scan first: a request made during this scan stays. */
    int cur = __atomic_load_n(&hs_got_rescan_flag, __ATOMIC_ACQUIRE);
    while (cur > 0 && !__atomic_compare_exchange_n(&hs_got_rescan_flag, &cur, cur - 1, true,
                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    g.epoch++;
    struct scan_ctx ctx = {0};
    dl_iterate_phdr(scan_callback, &ctx);

    /* Objects the walk no longer reports are gone: drop their records unwritten. */
    sigset_t old;
    lock_acquire(&old);
    for (uint32_t i = 0; i < g.nobjects; i++) {
        if (g.objects[i].lm != NULL && g.objects[i].seen != g.epoch) {
            remove_object(i);
            STAT_ADD(objects_pruned, 1);
        }
    }
    lock_release(&old);
    if (ctx.incomplete)
        want_rescan(1);
    pthread_mutex_unlock(&g.scan);
    errno = saved_errno;
    return (int)ctx.added;
}

/* ---- Setup and diagnostics ---------------------------------------------------------------------
 */

/* fork: the lock is held across it, so that the child does not inherit it held by a thread
 * it does not have; the scan mutex is made anew in the child for the same reason (a scan in
 * another thread at the time of the fork). */
static sigset_t fork_mask;

static void fork_prepare(void)
{
    lock_acquire(&fork_mask);
}

static void fork_parent(void)
{
    lock_release(&fork_mask);
}

static void fork_child(void)
{
    pthread_mutex_init(&g.scan, NULL);
    lock_release(&fork_mask);
}

int hs_got_init(const struct hs_got_hook *hooks, size_t n, const void *self_addr)
{
    if (!HS_GOT_SUPPORTED) {
        errno = ENOSYS;
        return -1;
    }
    if (g.ready) {
        errno = EBUSY;
        return -1;
    }
    if (n > HS_GOT_MAX_HOOKS || (n > 0 && hooks == NULL) || self_addr == NULL) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (hooks[i].name == NULL || hooks[i].name[0] == '\0' || hooks[i].replacement == NULL ||
            hooks[i].expected == NULL) {
            errno = EINVAL;
            return -1;
        }
    }
    /* Looked up, not linked: a glibc without it (before 2.35) makes init fail cleanly. */
    g.find_object =
        (int (*)(void *, struct dl_find_object *))dlsym(RTLD_DEFAULT, "_dl_find_object");
    if (g.find_object == NULL) {
        errno = ENOSYS;
        return -1;
    }
    struct dl_find_object r;
    if (g.find_object((void *)self_addr, &r) != 0) {
        errno = EINVAL;
        return -1;
    }
    g.self = r.dlfo_link_map;
    g.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    g.page = (uintptr_t)getauxval(AT_PAGESZ);
    if (g.page == 0)
        g.page = 4096;

    memcpy(g.hooks, hooks, n * sizeof(*hooks));
    size_t k = n;
#if HS_GOT_SUPPORTED
    void *real_dlopen = dlsym(RTLD_DEFAULT, "dlopen");
    void *real_dlmopen = dlsym(RTLD_DEFAULT, "dlmopen");
    void *real_dlclose = dlsym(RTLD_DEFAULT, "dlclose");
    /* Always three entries, so that HOOK_DLCLOSE's index is fixed; a missing function gets
     * a name no relocation carries. */
    g.hooks[k++] = (struct hs_got_hook){real_dlopen ? "dlopen" : "\1", (void *)hs_got_tramp_dlopen,
                                        real_dlopen ? real_dlopen : (void *)hs_got_tramp_dlopen};
    g.hooks[k++] =
        (struct hs_got_hook){real_dlmopen ? "dlmopen" : "\1", (void *)hs_got_tramp_dlmopen,
                             real_dlmopen ? real_dlmopen : (void *)hs_got_tramp_dlmopen};
    g.hooks[k++] = (struct hs_got_hook){real_dlclose ? "dlclose" : "\1", (void *)hs_got_dlclose,
                                        real_dlclose ? real_dlclose : (void *)hs_got_dlclose};
    hs_got_real_dlopen = real_dlopen;
    hs_got_real_dlmopen = real_dlmopen;
    g.real_dlclose = (int (*)(void *))real_dlclose;
#endif
    g.nhooks = k;
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < k; i++)
        g.lazy_ok[i] = hs_symbol_binds_to(g.hooks[i].name, g.hooks[i].expected);
    __atomic_store_n(&g.ready, true, __ATOMIC_RELEASE);
    return 0;
}

void hs_got_get_stats(struct hs_got_stats *out)
{
    memset(out, 0, sizeof(*out));
#define COPY(f) out->f = __atomic_load_n(&g.stats.f, __ATOMIC_RELAXED)
    COPY(objects_scanned);
    COPY(objects_incomplete);
    COPY(objects_pruned);
    COPY(slots_recorded);
    COPY(slots_patched);
    COPY(slots_restored);
    COPY(slots_changed);
    COPY(slots_deferred);
    COPY(slots_overflow);
    COPY(slots_foreign);
#undef COPY
    out->trampoline_calls = __atomic_load_n(&hs_got_tramp_calls, __ATOMIC_RELAXED);
    uint32_t objects = 0;
    for (uint32_t i = 0; i < __atomic_load_n(&g.nobjects, __ATOMIC_RELAXED); i++)
        objects += __atomic_load_n(&g.objects[i].lm, __ATOMIC_RELAXED) != NULL;
    out->objects_now = objects;
    out->slots_now = __atomic_load_n(&g.nslots, __ATOMIC_RELAXED);
    out->slots_hooked_now = __atomic_load_n(&g.hooked_now, __ATOMIC_RELAXED);
}

size_t hs_got_slots(struct hs_got_slot_info *out, size_t max)
{
    if (!g.ready)
        return 0;
    sigset_t old;
    lock_acquire(&old);
    size_t n = g.nslots;
    for (size_t i = 0; i < n && i < max; i++) {
        const struct got_slot *s = &g.slots[i];
        const struct got_object *o = &g.objects[s->obj];
        out[i] = (struct hs_got_slot_info){
            .slot = s->slot,
            .original = s->original,
            .hook = s->hook,
            .relro = s->relro,
        };
        if (object_live(o)) {
            out[i].current = __atomic_load_n(s->slot, __ATOMIC_ACQUIRE);
            out[i].object = o->name;
        }
    }
    lock_release(&old);
    return n;
}
