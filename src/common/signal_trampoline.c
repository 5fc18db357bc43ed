/* signal_trampoline.c: glibc's rt_sigreturn trampoline (see signal_trampoline.h). */
#define _GNU_SOURCE
#include "signal_trampoline.h"

#include <link.h>
#include <string.h>

/* x86_64 "mov $__NR_rt_sigreturn, %rax; syscall", the whole of glibc's __restore_rt. */
static const unsigned char k_sigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

/* libc's executable segment [g_code_start, g_code_end), published by g_state. */
enum { LOOKUP_NOT_DONE = 0, LOOKUP_DONE = 1 };
static int g_state;
static uintptr_t g_code_start, g_code_end;

struct code_range {
    uintptr_t start, end;
};

static bool is_libc(const char *path)
{
    const char *base = strrchr(path, '/');
    return strcmp(base ? base + 1 : path, "libc.so.6") == 0;
}

static int find_libc_code(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct code_range *r = arg;
    if (!info->dlpi_name || !is_libc(info->dlpi_name))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            r->start = info->dlpi_addr + ph->p_vaddr;
            r->end = r->start + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* Racing first calls both look libc up and store the same range. */
static void lookup_libc(void)
{
    struct code_range r = {0, 0};
    dl_iterate_phdr(find_libc_code, &r);
    __atomic_store_n(&g_code_start, r.start, __ATOMIC_RELAXED);
    __atomic_store_n(&g_code_end, r.end, __ATOMIC_RELAXED);
    __atomic_store_n(&g_state, LOOKUP_DONE, __ATOMIC_RELEASE);
}

bool hs_is_signal_trampoline(uintptr_t pc)
{
    if (__builtin_expect(__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == LOOKUP_NOT_DONE, 0))
        lookup_libc();
    uintptr_t start = __atomic_load_n(&g_code_start, __ATOMIC_RELAXED);
    uintptr_t end = __atomic_load_n(&g_code_end, __ATOMIC_RELAXED);
    if (pc < start || end - start < sizeof(k_sigreturn) || pc > end - sizeof(k_sigreturn))
        return false;
    return memcmp((const void *)pc, k_sigreturn, sizeof(k_sigreturn)) == 0;
}
