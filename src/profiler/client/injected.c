/* injected.c: the client loaded into a running process rather than preloaded.
 *
 * `heapscope profile -p PID` on a process started without the client loads it with ptrace
 * (src/cli/process_inject.h): one thread, stopped where it holds none of glibc's locks, calls
 * dlopen and then heapprofd_client_injected_init. A dlopen'ed library does not interpose, so
 * the program's allocation calls are redirected through the GOT (got_hooks.h) of every loaded
 * object, only while a session runs: at the end the slots get glibc's functions back and the
 * program runs exactly as before. Blocks allocated before the session are unknown to the
 * client; their frees find nothing in the sampled set and are never reported.
 *
 * Objects loaded later: a dlopen by path is scanned before it returns; for any other the
 * trampolines note the change and the next sampled allocation (a normal context, never a
 * signal handler of ours) scans the new objects. Objects loaded between two sessions are
 * found by the scan every session start asks for.
 */
#include "client.h"
#include "got_hooks.h"
#include "inject_status.h"
#include "symbol_binding.h"

#include <dlfcn.h>
#include <stdlib.h>

#define HS_EXPORT __attribute__((visibility("default")))

/* The functions the client replaces, by name. */
static const struct {
    const char *name;
    void *ours;
} k_functions[] = {
    {"malloc", (void *)hs_client_malloc},
    {"free", (void *)hs_client_free},
    {"calloc", (void *)hs_client_calloc},
    {"realloc", (void *)hs_client_realloc},
    {"reallocarray", (void *)hs_client_reallocarray},
    {"memalign", (void *)hs_client_memalign},
    {"aligned_alloc", (void *)hs_client_aligned_alloc},
    {"posix_memalign", (void *)hs_client_posix_memalign},
    {"valloc", (void *)hs_client_valloc},
    {"pvalloc", (void *)hs_client_pvalloc},
};
#define N_FUNCTIONS (sizeof(k_functions) / sizeof(k_functions[0]))

static bool g_injected;

bool hs_client_injected(void)
{
    return __atomic_load_n(&g_injected, __ATOMIC_ACQUIRE);
}

bool hs_client_interposes(void)
{
    /* Any one name will do: a non-PIE program that takes malloc's address makes its own PLT
     * entry malloc's global definition (a "canonical PLT"), which dlsym then returns (node
     * does so for malloc and free); it cannot have done so for all of them. */
    for (size_t i = 0; i < N_FUNCTIONS; i++)
        if (dlsym(RTLD_DEFAULT, k_functions[i].name) == k_functions[i].ours)
            return true;
    return false;
}

void hs_client_injected_on(void)
{
    if (hs_client_injected())
        hs_got_apply();
}

void hs_client_injected_off(void)
{
    if (hs_client_injected())
        hs_got_restore();
}

void hs_client_injected_rescan(void)
{
    /* The scan itself redirects the new slots while the hooks are applied. */
    if (hs_client_injected() && hs_got_rescan_wanted())
        hs_got_scan();
}

/* Fills hooks with glibc's function for each name as the one to replace. False when a name
 * is bound elsewhere in the global scope: the program runs another allocator. */
static bool glibc_hooks(struct hs_got_hook hooks[N_FUNCTIONS])
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc == NULL)
        return false;
    bool ok = true;
    for (size_t i = 0; i < N_FUNCTIONS && ok; i++) {
        void *fn = dlsym(libc, k_functions[i].name);
        hooks[i] = (struct hs_got_hook){k_functions[i].name, k_functions[i].ours, fn};
        ok = fn != NULL && hs_symbol_binds_to(k_functions[i].name, fn);
    }
    dlclose(libc); /* drops the reference NOLOAD took; libc stays */
    return ok;
}

HS_EXPORT int heapprofd_client_injected_init(void)
{
    if (hs_client_injected() || hs_client_interposes())
        return HS_INJECT_OK; /* loaded twice, or preloaded after all */
    struct hs_got_hook hooks[N_FUNCTIONS];
    if (!glibc_hooks(hooks))
        return HS_INJECT_OTHER_ALLOCATOR;
    if (hs_got_init(hooks, N_FUNCTIONS, (const void *)heapprofd_client_injected_init) != 0 ||
        hs_got_scan() <= 0)
        return HS_INJECT_NO_SLOTS;
    if (!hs_client_arm())
        return HS_INJECT_SIGNAL_TAKEN;
    hs_got_set_before_dlclose(hs_client_sync_before_unmap); /* as hooks.c's dlclose */
    __atomic_store_n(&g_injected, true, __ATOMIC_RELEASE);
    return HS_INJECT_OK;
}
