/* got_hooks.h: redirecting the allocation calls of every loaded object by rewriting its GOT.
 *
 * For a client that was dlopen'ed into a running process (attach with no prior setup): its
 * malloc & co. do not interpose, so the calls of every other object are redirected by writing
 * the replacement's address into their GOT slots (R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT
 * relocations against the hooked names), and written back when profiling stops.
 *
 * Life cycle: hs_got_init once; hs_got_scan (normal context) records the slots of the objects
 * loaded so far; hs_got_apply / hs_got_restore (any context, signal handlers included) switch
 * every recorded slot; whenever hs_got_rescan_wanted() the client calls hs_got_scan again from
 * a normal context, which also brings the slots of newly loaded objects (and any slot that
 * apply or restore had to defer) to the state last asked for.
 *
 * A slot is only ever rewritten when it holds the value the hook expects (glibc's function,
 * or for a lazily bound slot its own PLT stub when the name resolves to glibc's function),
 * and only written back when it still holds our replacement: slots bound to another
 * allocator, and slots someone else rewrote since, are left alone.
 *
 * dlopen, dlmopen and dlclose are redirected too (to trampolines that ask for a rescan), so
 * that objects loaded later are found. Everything is undone by hs_got_restore.
 *
 * Never allocates (it runs inside the allocator's paths). A forked child keeps the slots as
 * they are and may restore them. Supported on x86_64 (glibc 2.35 or later: _dl_find_object);
 * elsewhere hs_got_init fails with ENOSYS. The library holding the replacements must never be
 * unloaded (a thread may have read a slot just before restore).
 */
#ifndef HEAPSCOPE_PROFILER_GOT_HOOKS_H
#define HEAPSCOPE_PROFILER_GOT_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One redirected name. replacement: what the slots get (take its address through a hidden
 * alias: a library dlopen'ed RTLD_LOCAL that writes &malloc gets glibc's malloc). expected:
 * the function a slot must resolve to for it to be redirected (glibc's own, e.g. dlvsym on
 * libc.so.6: a slot bound to another allocator must stay as it is). */
struct hs_got_hook {
    const char *name;
    void *replacement;
    void *expected;
};

/* At most this many hooks (dlopen, dlmopen and dlclose are added internally). */
#define HS_GOT_MAX_HOOKS 32
/* Recorded slots and scanned objects; more are counted in slots_overflow, never a failure. */
#define HS_GOT_MAX_SLOTS 8192
#define HS_GOT_MAX_OBJECTS 1024

/* Diagnostics (monotonic counters except the *_now ones). */
struct hs_got_stats {
    uint64_t objects_scanned;    /* objects whose relocations were read */
    uint64_t objects_incomplete; /* times an object was skipped as not yet relocated */
    uint64_t objects_pruned;     /* records dropped because their object went away */
    uint64_t slots_recorded;
    uint64_t slots_patched;  /* writes of a replacement */
    uint64_t slots_restored; /* writes of an original back */
    uint64_t slots_changed;  /* a write skipped: the slot held something unexpected */
    uint64_t slots_deferred; /* apply/restore left for the next scan (object being closed) */
    uint64_t slots_overflow; /* slots not recorded: the table was full */
    uint64_t slots_foreign;  /* slots of a hooked name bound to something else: left alone */
    uint64_t trampoline_calls; /* dlopen, dlmopen and dlclose through a redirected slot */
    uint32_t objects_now;      /* objects in the table */
    uint32_t slots_now;        /* slots in the table */
    uint32_t slots_hooked_now; /* slots holding a replacement (as last written by us) */
};

/* One recorded slot, for tests and diagnostics. */
struct hs_got_slot_info {
    void **slot;
    void *original;     /* what the slot held when it was recorded */
    void *current;      /* what it holds now */
    unsigned hook;      /* index into the hooks given to hs_got_init */
    bool relro;         /* inside the object's read-only-after-relocation range */
    const char *object; /* dl_phdr_info's name ("" for the main program) */
                        /* current and object are NULL when the object is no longer loaded */
};

/* Sets up the module with n hooks (copied; the name strings must stay valid) and self_addr,
 * an address inside the calling library, whose own object is never patched. Not
 * async-signal-safe. Returns 0, or -1 with errno: EINVAL (bad hooks, n too large, self_addr
 * in no object), EBUSY (already initialized), ENOSYS (not x86_64, or glibc without
 * _dl_find_object). */
int hs_got_init(const struct hs_got_hook *hooks, size_t n, const void *self_addr);

/* fn (or NULL) runs before each dlclose made through a redirected slot, outside the module's
 * lock: the client waits there until the daemon has read the samples taken so far. */
void hs_got_set_before_dlclose(void (*fn)(void));

/* Walks every loaded object (dl_iterate_phdr) and records the slots of each relocated object
 * not scanned yet; drops the records of objects no longer loaded; brings every recorded slot
 * to the state last asked for (replaced after hs_got_apply, original after hs_got_restore).
 * Objects still being loaded by another thread are skipped and the rescan stays wanted. NOT
 * async-signal-safe; returns at once (0) when another thread is scanning. Returns the number
 * of slots newly recorded, or -1 before a successful hs_got_init. */
int hs_got_scan(void);

/* Async-signal-safe. Marks hooks active and writes the replacement into every recorded slot
 * that holds its expected value. Returns the number of slots deferred to the next scan
 * (objects of which a dlclose is in progress). A rescan is wanted afterwards: objects loaded
 * while the hooks were off were not seen by any scan. */
size_t hs_got_apply(void);

/* Async-signal-safe. Marks hooks inactive and writes back the original of every recorded
 * slot that still holds our replacement and whose object is still loaded. Returns the number
 * of slots deferred to the next scan, as hs_got_apply. */
size_t hs_got_restore(void);

/* True when a scan is due: a redirected dlopen, dlmopen or dlclose ran, an object was still
 * being loaded at the last scan, or apply/restore deferred slots. One relaxed load. */
bool hs_got_rescan_wanted(void);

/* True between hs_got_apply and hs_got_restore. */
bool hs_got_active(void);

/* Async-signal-safe snapshot of the counters. */
void hs_got_get_stats(struct hs_got_stats *out);

/* Copies up to max recorded slots into out; returns how many are recorded. Not
 * async-signal-safe (reads the slots under the module's lock). */
size_t hs_got_slots(struct hs_got_slot_info *out, size_t max);

#endif
