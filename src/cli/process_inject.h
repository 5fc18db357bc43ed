/* process_inject.h: loading a library into a running process with ptrace, without gdb and
 * without any setup in the process (`heapscope profile -p` and `heapscope leaks -p` on a
 * program started with nothing preloaded).
 *
 * How: one thread of the process is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT; the other
 * threads keep running) at a point where it holds none of the C library's locks, made to call
 * dlopen(library, RTLD_NOW) and then the library's init function, and given back its
 * registers exactly as they were; a system call it was blocked in is restarted by the kernel.
 * A call "returns" to address 0: the fault stops the thread for the tracer, and is discarded.
 *
 * Safe points: dlopen takes the loader's locks and mallocs, so the thread must not be inside
 * malloc or the loader. A thread qualifies when it is blocked in a system call that the C
 * library never makes while holding those locks (sleeping, polling, reading a socket, waiting
 * on a futex of the program's own), or when its program counter is outside libc, the dynamic
 * loader and any shared object that defines malloc (another allocator, preloaded or linked:
 * jemalloc, tcmalloc, a sanitizer's runtime, the malloc debug shim; not the program itself
 * when it links one in, whose threads would then never qualify outside a system call); a
 * thread running inside them is single-stepped until it leaves them. A
 * thread given back is always detached from a ptrace stop, with the SIGTRAP a step over a
 * system call leaves queued dropped first: never left to kill the process once we are gone.
 *
 * Refusals, each with a clear message: no such process; another user's process (without
 * root); a statically linked program (no loader to call); a process one thread of which is
 * traced already (the tracer named: another heapscope loading its own library, or a
 * debugger; looked at again when PTRACE_SEIZE is refused, for one that came since); a seccomp
 * filter (unless allowed: dlopen's and the library's system calls might be forbidden, and a
 * filter may kill the process for them); ptrace refused (Yama's ptrace_scope, a
 * non-dumpable process). A process in another mount namespace (a container) gets a copy of
 * the library inside its own file system (/proc/PID/root/tmp), removed once loaded.
 *
 * x86-64 only; elsewhere hs_inject_library fails with a message saying so.
 */
#ifndef HEAPSCOPE_CLI_PROCESS_INJECT_H
#define HEAPSCOPE_CLI_PROCESS_INJECT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct hs_inject_options {
    const char *library;       /* absolute path of the library in this mount namespace */
    const char *init_function; /* exported by the library, `int f(void)`; NULL for none */
    bool allow_seccomp;        /* inject into a process under a seccomp filter anyway */
    int timeout_ms;            /* for finding a safe point and for each call */
};

struct hs_inject_result {
    int init_status;            /* what init_function returned */
    pid_t tid;                  /* the thread that made the calls */
    double pause_ms;            /* how long that thread was stopped, stepping included */
    double tries_ms;            /* how long the threads tried before it were stopped, in all */
    double total_ms;            /* the whole injection, checks included */
    unsigned threads_tried;     /* threads stopped before one was at a safe point */
    unsigned long steps;        /* instructions single-stepped to reach it */
    char loaded_path[PATH_MAX]; /* the path dlopen was given (inside the target's root) */
};

/* What the injection cost the process, for the command's message: "thread T paused X ms",
 * and when other threads were stopped first (none of them was at a safe point), "; N other
 * threads tried first, stopped Y ms in all". */
void hs_inject_describe_pause(const struct hs_inject_result *res, char *buf, size_t cap);

/* Loads opt->library into process pid and calls its init function. Returns 0 (result filled
 * in), or -1 after printing "heapscope COMMAND: ..." with the reason; the process is left
 * running as it was. */
int hs_inject_library(const char *command, pid_t pid, const struct hs_inject_options *opt,
                      struct hs_inject_result *result);

/* Whether an object mapped in process pid other than glibc's and the profiler client
 * (libheapprofd.so) defines malloc: another allocator, linked (the program itself included)
 * or preloaded, whose malloc the client cannot wrap. Its path goes to path (cap bytes). For
 * the reason a client loaded by an earlier attach stays silent. */
bool hs_inject_other_malloc(pid_t pid, char *path, size_t cap);

/* Why PTRACE_SEIZE of pid failed with err, as a sentence for the user: yama_scope is
 * /proc/sys/kernel/yama/ptrace_scope (-1 when the kernel has no Yama), as_root whether we run
 * as root. Public for the unit test. */
const char *hs_inject_ptrace_refusal(int err, int yama_scope, bool as_root);

/* True when a thread blocked in system call nr (x86-64 numbers) with first argument arg0 can
 * safely be made to call dlopen: the C library never makes that call holding malloc's or the
 * loader's locks. For futex, arg0 is the futex word: unsafe when in_glibc_data says it lies in
 * the C library's or the loader's data, .bss included (their internal locks), or
 * in_arena_head says it is at the head of a malloc arena heap. Public for the unit test. */
bool hs_inject_syscall_is_safe(long nr, bool futex_in_glibc_data, bool futex_in_arena_head);

#endif
