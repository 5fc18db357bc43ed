/* vfork_guard.c: telling a vfork child from its parent without a system call per sample.
 *
 * A vfork child borrows its parent's memory, thread-local storage included, until it execs or
 * exits; the client must not sample there (the stack is the child's, the pid another). Asking
 * getpid() at every sample cost 1.7-2.4 us on the VM measured, more than the rest of a sample,
 * and a sample is taken every 4 KiB allocated by default. So the client interposes vfork too:
 * it marks the calling thread ("a vfork may be running on this thread's storage") and jumps to
 * glibc's. While that mark is set, a sample asks getpid(); the parent, back from vfork, clears
 * it at its first sample. Other threads of the parent run on during a vfork and keep their own
 * (clear) marks.
 *
 * Only where the program's vfork is ours (preloaded): an injected client, or a program whose
 * vfork resolves elsewhere, asks getpid() at every sample as before.
 *
 * A child of clone(CLONE_VM | CLONE_VFORK) (posix_spawn's way) calls no vfork of ours, and it
 * too runs on its parent's thread-local storage, so the mark cannot tell it. It runs on a
 * stack of its own, though: a sample also needs the stack pointer inside the stack this thread
 * had at its first sample (stack_copy.h, a compare of two thread-local words); anywhere else
 * (such a child, an alternate signal stack, a thread's first sample) it asks getpid(). Still
 * not seen: a CLONE_VM child whose stack was carved out of its parent's stack, and a raw
 * syscall(SYS_vfork) child (which C cannot use safely anyway); such a child's allocations
 * would be sampled as its parent's (they are in its parent's heap). Tests: e2e.profiler
 * test_vfork_child_samples_nothing, test_clone_vm_child_allocating_runs_correctly.
 */
#include "client.h"
#include "stack_copy.h"

#include <dlfcn.h>
#include <unistd.h>

__thread int hs_client_vfork_mark __attribute__((tls_model("initial-exec")));
static bool g_vfork_ours;

/* The program's vfork: marks this thread, then a tail jump to glibc's, so that the child
 * returns to our caller on our caller's frame, as vfork requires (no frame of ours). */
__attribute__((naked, visibility("default"))) pid_t vfork(void)
{
    __asm__("movq hs_client_vfork_mark@gottpoff(%rip), %rax\n\t"
            "movl $1, %fs:(%rax)\n\t"
            "jmp *__vfork@GOTPCREL(%rip)\n\t");
}

__attribute__((constructor)) static void find_vfork(void)
{
    g_vfork_ours = dlsym(RTLD_DEFAULT, "vfork") == (void *)vfork;
}

bool hs_client_in_session_process(void)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (__builtin_expect(g_vfork_ours && !hs_client_vfork_mark && hs_stack_is_own(sp), 1))
        return true;
    bool same = getpid() == __atomic_load_n(&hs_client.pid, __ATOMIC_RELAXED);
    if (same)
        hs_client_vfork_mark = 0; /* the parent, back from its vfork */
    return same;
}
