/* process_inject.c: dlopen inside a running process, driven with ptrace (process_inject.h). */
#define _GNU_SOURCE
#include "process_inject.h"

#include "cli.h"
#include "clock.h"
#include "elf_symbols.h"
#include "proc_maps.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

/* The kernel's "restart this system call" results, seen in rax of a thread stopped while
 * blocked in a system call (include/linux/errno.h; not exported to user space). */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

/* A malloc arena of a thread (not the main one) lives at the head of a heap aligned to this
 * (glibc's HEAP_MAX_SIZE on 64-bit): its mutex is in the first page. */
#define ARENA_HEAP_ALIGN (64ul << 20)

/* Instructions a thread running inside libc may be stepped before another is tried. */
#define MAX_STEPS_PER_THREAD 200000ul

const char *hs_inject_ptrace_refusal(int err, int yama_scope, bool as_root)
{
    if (err == ESRCH)
        return "the process exited";
    if (err != EPERM && err != EACCES)
        return "ptrace failed";
    if (yama_scope == 3)
        return "Yama's ptrace_scope is 3 on this machine: no process may be traced at all; "
               "start the program with the client preloaded instead";
    if (yama_scope == 2 && !as_root)
        return "Yama's ptrace_scope is 2: only root (CAP_SYS_PTRACE) may trace; run heapscope "
               "as root";
    if (yama_scope == 1 && !as_root)
        return "Yama's ptrace_scope is 1: a process may only be traced by its parent; run "
               "heapscope as root, or set /proc/sys/kernel/yama/ptrace_scope to 0";
    return as_root ? "the kernel refused ptrace (a security module, or the process is being "
                     "set up or torn down)"
                   : "the process is not dumpable (setuid, setgid, or prctl(PR_SET_DUMPABLE, 0)) "
                     "or runs with other credentials; run heapscope as root";
}

bool hs_inject_syscall_is_safe(long nr, bool futex_in_glibc_data, bool futex_in_arena_head)
{
    switch (nr) {
    case SYS_read:
    case SYS_write:
    case SYS_poll:
    case SYS_select:
    case SYS_pause:
    case SYS_nanosleep:
    case SYS_accept:
    case SYS_connect:
    case SYS_sendto:
    case SYS_recvfrom:
    case SYS_sendmsg:
    case SYS_recvmsg:
    case SYS_wait4:
    case SYS_msgrcv:
    case SYS_rt_sigtimedwait:
    case SYS_rt_sigsuspend:
    case SYS_io_getevents:
    case SYS_semtimedop:
    case SYS_clock_nanosleep:
    case SYS_epoll_wait:
    case SYS_waitid:
    case SYS_pselect6:
    case SYS_ppoll:
    case SYS_epoll_pwait:
    case SYS_accept4:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
        return true;
    case SYS_futex:
        /* The program's own mutexes, condition variables and pthread_join wait here; glibc's
         * internal locks (the loader's, malloc's arenas, stdio's) live in its data or at the
         * head of an arena heap. */
        return !futex_in_glibc_data && !futex_in_arena_head;
    default:
        return false;
    }
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool is_libc(const char *name)
{
    return strcmp(name, "libc.so.6") == 0 ||
           (strncmp(name, "libc-", 5) == 0 && strstr(name, ".so") != NULL);
}

static bool is_loader(const char *name)
{
    return strncmp(name, "ld-linux", 8) == 0 ||
           (strncmp(name, "ld-", 3) == 0 && strstr(name, ".so") != NULL);
}

/* Older glibc keeps dlopen in libdl and locks in libpthread. */
static bool is_glibc_part(const char *name)
{
    return is_libc(name) || is_loader(name) || strncmp(name, "libdl.so", 8) == 0 ||
           strncmp(name, "libdl-", 6) == 0 || strncmp(name, "libpthread", 10) == 0;
}

/* ---- Other allocators ------------------------------------------------------------------- */

/* True when the object mapped from m defines malloc: another allocator (jemalloc, tcmalloc,
 * a sanitizer's runtime, heapscope's malloc debug shim) preloaded or linked as a shared object,
 * whose locks a thread stopped in its code may hold, and which dlopen's own mallocs would then
 * wait for forever. */
static bool object_defines_malloc(pid_t pid, const struct hs_map *m)
{
    char file[PATH_MAX + 64];
    snprintf(file, sizeof(file), "/proc/%d/root%s", (int)pid, m->path);
    struct hs_elf elf;
    if (!hs_elf_open(&elf, file)) {
        snprintf(file, sizeof(file), "/proc/%d/map_files/%lx-%lx", (int)pid,
                 (unsigned long)m->start, (unsigned long)m->end);
        if (!hs_elf_open(&elf, file))
            return false;
    }
    uintptr_t vaddr;
    bool defines = hs_elf_find_function(&elf, "malloc", &vaddr);
    hs_elf_close(&elf);
    return defines;
}

/* object_defines_malloc over a walk of the maps, which lists an object's mappings together:
 * one look per object. */
struct malloc_probe {
    pid_t pid;
    char path[PATH_MAX]; /* the object looked at last ("" before the first) */
    bool defines;        /* whether it defines malloc */
};

static bool probe_defines_malloc(struct malloc_probe *p, const struct hs_map *m)
{
    if (strcmp(p->path, m->path) != 0) {
        snprintf(p->path, sizeof(p->path), "%s", m->path);
        p->defines = object_defines_malloc(p->pid, m);
    }
    return p->defines;
}

/* The code of an object other than glibc's: executable and mapped from a file. */
static bool other_code(const struct hs_map *m)
{
    return (m->perms & HS_MAP_EXEC) && m->path[0] == '/' && !is_glibc_part(base_name(m->path));
}

struct other_malloc {
    struct malloc_probe probe;
    char *path;
    size_t cap;
    bool found;
};

static int find_other_malloc(const struct hs_map *m, void *arg)
{
    struct other_malloc *o = arg;
    if (!other_code(m) || strncmp(base_name(m->path), "libheapprofd.so", 15) == 0 ||
        !probe_defines_malloc(&o->probe, m))
        return 0;
    snprintf(o->path, o->cap, "%s", m->path);
    o->found = true;
    return 1;
}

bool hs_inject_other_malloc(pid_t pid, char *path, size_t cap)
{
    struct other_malloc o = {{pid, "", false}, path, cap, false};
    hs_maps_foreach(pid, find_other_malloc, &o);
    return o.found;
}

#if defined(__x86_64__)

/* ---- The target's mappings ----------------------------------------------------------------- */

enum { MAX_RANGES = 64 };

struct target_layout {
    pid_t pid;
    char exe[PATH_MAX]; /* the program's path as its maps show it ("" when unknown) */
    struct malloc_probe probe; /* for note_allocator_code */
    /* libc's and the loader's mappings, and the code of a shared object that replaces malloc:
     * code there may hold their locks. */
    struct {
        uintptr_t start, end;
        bool data;
    } glibc[MAX_RANGES];
    unsigned num_glibc;
    bool has_loader;
    uintptr_t glibc_rw_end; /* end of the mapping just seen when it was glibc's writable data */
    /* dlopen, dlsym and dlerror inside the target (0 when not found). */
    uintptr_t dlopen_fn, dlsym_fn, dlerror_fn;
    char libc_path[PATH_MAX];
};

/* Finds dlopen, dlsym and dlerror in the object mapped from path at load_base. */
static void find_dl_functions(struct target_layout *t, const struct hs_map *m)
{
    char file[PATH_MAX + 64];
    snprintf(file, sizeof(file), "/proc/%d/root%s", (int)t->pid, m->path);
    struct hs_elf elf;
    if (!hs_elf_open(&elf, file)) {
        snprintf(file, sizeof(file), "/proc/%d/map_files/%lx-%lx", (int)t->pid,
                 (unsigned long)m->start, (unsigned long)m->end);
        if (!hs_elf_open(&elf, file))
            return;
    }
    uintptr_t bias, open_v, sym_v, err_v;
    if (hs_elf_load_bias(&elf, m->start, m->offset, (m->perms & HS_MAP_EXEC) != 0, &bias) &&
        hs_elf_find_function(&elf, "dlopen", &open_v) &&
        hs_elf_find_function(&elf, "dlsym", &sym_v) &&
        hs_elf_find_function(&elf, "dlerror", &err_v)) {
        t->dlopen_fn = bias + open_v;
        t->dlsym_fn = bias + sym_v;
        t->dlerror_fn = bias + err_v;
        snprintf(t->libc_path, sizeof(t->libc_path), "%s", m->path);
    }
    hs_elf_close(&elf);
}

/* The code of a shared object that replaces malloc counts as glibc's (see
 * object_defines_malloc). Not the program's own code, even when it links an allocator in:
 * its threads would then never be at a safe point outside a system call. */
static void note_allocator_code(struct target_layout *t, const struct hs_map *m)
{
    if (other_code(m) && strcmp(m->path, t->exe) != 0 && probe_defines_malloc(&t->probe, m) &&
        t->num_glibc < MAX_RANGES)
        t->glibc[t->num_glibc++] = (typeof(t->glibc[0])){m->start, m->end, false};
}

static int collect_layout(const struct hs_map *m, void *arg)
{
    struct target_layout *t = arg;
    const char *name = base_name(m->path);
    uintptr_t rw_end = t->glibc_rw_end;
    t->glibc_rw_end = 0;
    if (m->inode == 0) {
        /* The anonymous mapping right after an object's writable data is its .bss: glibc
         * keeps locks there too (stdio's, malloc's list_lock ...). */
        if (m->start == rw_end && m->path[0] == '\0' && (m->perms & HS_MAP_WRITE) &&
            t->num_glibc < MAX_RANGES)
            t->glibc[t->num_glibc++] = (typeof(t->glibc[0])){m->start, m->end, true};
        return 0;
    }
    if (!is_glibc_part(name)) {
        note_allocator_code(t, m);
        return 0;
    }
    if (m->perms & HS_MAP_WRITE)
        t->glibc_rw_end = m->end;
    if (is_loader(name))
        t->has_loader = true;
    if (t->num_glibc < MAX_RANGES) {
        t->glibc[t->num_glibc].start = m->start;
        t->glibc[t->num_glibc].end = m->end;
        t->glibc[t->num_glibc].data = (m->perms & HS_MAP_EXEC) == 0;
        t->num_glibc++;
    }
    if (m->offset == 0 && t->dlopen_fn == 0 && !is_loader(name))
        find_dl_functions(t, m);
    return 0;
}

static bool in_glibc(const struct target_layout *t, uintptr_t addr, bool data)
{
    for (unsigned i = 0; i < t->num_glibc; i++)
        if (addr >= t->glibc[i].start && addr < t->glibc[i].end && t->glibc[i].data == data)
            return true;
    return false;
}

/* True when addr is in the first page of an anonymous mapping aligned like an arena heap. */
static bool in_arena_head(pid_t pid, uintptr_t addr)
{
    struct hs_map m;
    uintptr_t head = addr & ~(ARENA_HEAP_ALIGN - 1);
    return (addr - head) < 4096 && hs_maps_find(pid, addr, &m) && m.inode == 0 && m.start == head;
}

/* ---- Status checks -------------------------------------------------------------------------- */

struct target_status {
    long uid;
    int seccomp;
};

static bool read_status(pid_t pid, struct target_status *st)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *text = hs_read_small_file(path, &len);
    if (!text)
        return false;
    st->uid = -1;
    st->seccomp = 0;
    for (char *line = text; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "Uid:", 4) == 0)
            st->uid = strtol(line + 4, NULL, 10);
        else if (strncmp(line, "Seccomp:", 8) == 0)
            st->seccomp = (int)strtol(line + 8, NULL, 10);
    }
    free(text);
    return true;
}

static int yama_scope(void)
{
    size_t len;
    char *text = hs_read_small_file("/proc/sys/kernel/yama/ptrace_scope", &len);
    int scope = text ? atoi(text) : -1;
    free(text);
    return scope;
}

static void process_name(pid_t pid, char *out, size_t cap)
{
    char path[64];
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    char *text = hs_read_small_file(path, &len);
    snprintf(out, cap, "%s", text ? text : "?");
    free(text);
    out[strcspn(out, "\n")] = '\0';
}

/* The parent of process pid (its /proc status PPid), 0 when unknown. */
static pid_t parent_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    return (pid_t)hs_proc_status_field(path, "PPid", 10);
}

/* The thread of pid that another process traces, and that tracer (0 when none). */
static long traced_thread(pid_t pid, pid_t *tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    long tracer = 0;
    struct dirent *e;
    while (tracer == 0 && (e = readdir(d))) {
        long t = strtol(e->d_name, NULL, 10);
        if (t <= 0)
            continue;
        char status[96];
        snprintf(status, sizeof(status), "/proc/%d/task/%ld/status", (int)pid, t);
        tracer = (long)hs_proc_status_field(status, "TracerPid", 10);
        if (tracer != 0)
            *tid = (pid_t)t;
    }
    closedir(d);
    return tracer;
}

/* Says who traces pid, when another process does (the main thread or any other): another
 * heapscope at work (loading its own library: `profile -p` and `leaks -p` racing), or a
 * debugger. Returns true when it did. */
static bool say_tracer(const char *command, pid_t pid, const char *name)
{
    pid_t tid = pid;
    long tracer = traced_thread(pid, &tid);
    if (tracer == 0)
        return false;
    char tracer_name[64], thread[48] = "";
    process_name((pid_t)tracer, tracer_name, sizeof(tracer_name));
    if (tid != pid)
        snprintf(thread, sizeof(thread), " (its thread %d)", (int)tid);
    if (strcmp(tracer_name, "heapscope") == 0)
        fprintf(stderr,
                "heapscope %s: process %d (%s) is being traced by another heapscope (process "
                "%ld)%s, which is loading its own library into it; try again when it is done\n",
                command, (int)pid, name, tracer, thread);
    else if (parent_of((pid_t)tracer) == pid)
        fprintf(stderr,
                "heapscope %s: process %d (%s) is being traced by its own child process %ld%s: "
                "a leak check running inside it (heapscope leaks -p), or a crash handler of the "
                "program's; try again when it is done\n",
                command, (int)pid, name, tracer, thread);
    else
        fprintf(stderr,
                "heapscope %s: process %d (%s) is already traced%s by process %ld (%s), a "
                "debugger or another tool; detach it first\n",
                command, (int)pid, name, thread, tracer, tracer_name);
    return true;
}

/* ---- The library as the target sees it ------------------------------------------------------ */

/* Sets loaded_path to the library's path inside pid's root. When pid lives in another mount
 * namespace where that path is another file or none, copies the library into its /tmp;
 * *copy_dir is then the directory to remove afterwards (as seen from here). */
static int library_for_target(const char *command, pid_t pid, const char *library,
                              char *loaded_path, size_t cap, char *copy_dir, size_t dir_cap)
{
    char there[PATH_MAX + 64];
    struct stat mine, theirs;
    copy_dir[0] = '\0';
    if (stat(library, &mine) != 0) {
        fprintf(stderr, "heapscope %s: cannot find %s: %s\n", command, library, strerror(errno));
        return -1;
    }
    snprintf(there, sizeof(there), "/proc/%d/root%s", (int)pid, library);
    if (stat(there, &theirs) == 0 && theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino) {
        snprintf(loaded_path, cap, "%s", library);
        return 0;
    }
    /* Another file system: copy the library in, readable by the process's user. */
    snprintf(copy_dir, dir_cap, "/proc/%d/root/tmp/heapscope-inject-XXXXXX", (int)pid);
    if (!mkdtemp(copy_dir) || chmod(copy_dir, 0755) != 0) {
        fprintf(stderr,
                "heapscope %s: process %d sees another file system (a container?) without %s, "
                "and its /tmp is not writable from here (%s): make the library visible inside it "
                "and pass its path there with --library\n",
                command, (int)pid, library, strerror(errno));
        copy_dir[0] = '\0';
        return -1;
    }
    char target[PATH_MAX + 96];
    snprintf(target, sizeof(target), "%s/%s", copy_dir, base_name(library));
    int in = open(library, O_RDONLY | O_CLOEXEC);
    int out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    bool ok = in >= 0 && out >= 0;
    char buf[65536];
    ssize_t n;
    while (ok && (n = read(in, buf, sizeof(buf))) != 0)
        ok = n > 0 && write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "heapscope %s: cannot copy %s into process %d's file system (%s): %s\n",
                command, library, (int)pid, target, strerror(errno));
        return -1;
    }
    size_t prefix = strlen(copy_dir) - strlen(strstr(copy_dir, "/tmp/heapscope-inject-"));
    snprintf(loaded_path, cap, "%s", target + prefix);
    return 0;
}

static void remove_copy(const char *copy_dir, const char *library)
{
    if (!copy_dir[0])
        return;
    char target[PATH_MAX + 96];
    snprintf(target, sizeof(target), "%s/%s", copy_dir, base_name(library));
    unlink(target);
    rmdir(copy_dir);
}

/* ---- Waiting with a deadline ---------------------------------------------------------------- */

static void on_alarm(int sig)
{
    (void)sig;
}

/* waitpid for thread tid until deadline_ns (hs_monotonic_ns). A repeating 10 ms timer breaks
 * the wait (the handler is installed without SA_RESTART), so a stop that never comes cannot
 * hang the command. Returns the waitpid result, or 0 on timeout. */
static pid_t wait_thread(pid_t tid, int *status, uint64_t deadline_ns)
{
    struct itimerval tick = {{0, 10000}, {0, 10000}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &tick, NULL);
    pid_t r;
    for (;;) {
        r = waitpid(tid, status, __WALL);
        if (r >= 0 || errno != EINTR)
            break;
        if (hs_monotonic_ns() >= deadline_ns) {
            r = 0;
            break;
        }
    }
    int saved = errno;
    setitimer(ITIMER_REAL, &off, NULL);
    errno = saved;
    return r;
}

/* ---- One thread under our control ----------------------------------------------------------- */

struct hijack {
    pid_t pid, tid;
    int mem_fd; /* /proc/PID/mem */
    struct user_regs_struct saved;
    int pending_signal; /* caught at the first stop: delivered at detach */
    uint64_t stopped_ns;
};

static bool stopped_by_interrupt(int status)
{
    return WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP;
}

/* Seizes and stops tid. Returns 0, or an errno value (EPERM & co. from PTRACE_SEIZE). */
static int stop_thread(struct hijack *h, pid_t tid, uint64_t deadline_ns)
{
    h->tid = tid;
    h->pending_signal = 0;
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0)
        return errno;
    h->stopped_ns = hs_monotonic_ns();
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0)
        return errno;
    int status;
    for (;;) {
        pid_t r = wait_thread(tid, &status, deadline_ns);
        if (r <= 0)
            return r == 0 ? ETIMEDOUT : errno;
        if (!WIFSTOPPED(status))
            return ESRCH;
        if (stopped_by_interrupt(status))
            break;
        /* A signal on its way to the thread: keep it for detach, and use this stop. */
        if ((status >> 16) == 0) {
            h->pending_signal = WSTOPSIG(status);
            break;
        }
        ptrace(PTRACE_CONT, tid, NULL, NULL);
    }
    if (ptrace(PTRACE_GETREGS, tid, NULL, &h->saved) != 0)
        return errno;
    return 0;
}

/* Brings the thread into a ptrace stop, which detaching needs. After a step or a call that
 * did not come back in time it may still run: left traced until this command exits (the
 * kernel then lets it go without clearing the trap flag), or with a step's SIGTRAP on its
 * way, it would die of that SIGTRAP. A signal of its own met on the way is kept for the
 * detach; the SIGTRAP of our steps is dropped. */
static void stop_for_detach(struct hijack *h)
{
    struct user_regs_struct now;
    if (ptrace(PTRACE_GETREGS, h->tid, NULL, &now) == 0 || errno != ESRCH)
        return; /* stopped already, or not ours any more */
    if (ptrace(PTRACE_INTERRUPT, h->tid, NULL, NULL) != 0)
        return; /* gone */
    int status;
    if (wait_thread(h->tid, &status, hs_monotonic_ns() + 2000000000ull) <= 0 ||
        !WIFSTOPPED(status))
        return;
    int sig = WSTOPSIG(status);
    if (!stopped_by_interrupt(status) && (status >> 16) == 0 && sig != SIGTRAP &&
        !h->pending_signal)
        h->pending_signal = sig;
}

/* SIGTRAP queued for the thread (its own pending set, /proc/PID/task/TID/status SigPnd). */
static bool trap_pending(const struct hijack *h)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)h->pid, (int)h->tid);
    return (hs_proc_status_field(path, "SigPnd", 16) & (1ull << (SIGTRAP - 1))) != 0;
}

/* A step over a system call that we interrupted leaves the step's SIGTRAP queued, to be
 * delivered once the thread runs: after the detach, where nothing would catch it and it would
 * kill the process. Lets the thread take it while still ours (a signal-delivery stop), and
 * drops it; a signal of its own met on the way is kept for the detach. */
static void drop_step_trap(struct hijack *h)
{
    for (int i = 0; i < 4 && trap_pending(h); i++) {
        int status;
        if (ptrace(PTRACE_CONT, h->tid, NULL, NULL) != 0 ||
            wait_thread(h->tid, &status, hs_monotonic_ns() + 1000000000ull) <= 0 ||
            !WIFSTOPPED(status))
            return;
        int sig = WSTOPSIG(status);
        if (!stopped_by_interrupt(status) && (status >> 16) == 0 && sig != SIGTRAP &&
            !h->pending_signal)
            h->pending_signal = sig;
    }
}

/* Gives the thread back: its registers as they were when stopped (restore), and a signal that
 * arrived meanwhile. */
static void detach_thread(struct hijack *h, bool restore)
{
    stop_for_detach(h);
    drop_step_trap(h);
    if (restore)
        ptrace(PTRACE_SETREGS, h->tid, NULL, &h->saved);
    ptrace(PTRACE_DETACH, h->tid, NULL, (void *)(long)h->pending_signal);
}

static void release_thread(struct hijack *h)
{
    detach_thread(h, true);
}

/* True when the thread, as stopped, may call dlopen (see the header comment). */
static bool at_safe_point(const struct target_layout *t, const struct user_regs_struct *r)
{
    long result = (long)r->rax;
    bool in_syscall =
        (long)r->orig_rax >= 0 &&
        (result == -ERESTARTSYS || result == -ERESTARTNOINTR || result == -ERESTARTNOHAND ||
         result == -ERESTART_RESTARTBLOCK || result == -EINTR);
    if (in_syscall) {
        bool glibc_data = false, arena_head = false;
        if ((long)r->orig_rax == SYS_futex) {
            glibc_data = in_glibc(t, r->rdi, true);
            arena_head = in_arena_head(t->pid, r->rdi);
        }
        return hs_inject_syscall_is_safe((long)r->orig_rax, glibc_data, arena_head);
    }
    return !in_glibc(t, r->rip, false);
}

/* Single-steps the thread until it stops at a safe point, up to max_steps. A blocking system
 * call met on the way is interrupted and judged like any other. */
static bool step_to_safe_point(struct hijack *h, const struct target_layout *t,
                               unsigned long *steps, uint64_t deadline_ns)
{
    struct user_regs_struct r = h->saved;
    for (unsigned long n = 0; n < MAX_STEPS_PER_THREAD; n++) {
        if (at_safe_point(t, &r))
            return true;
        if (ptrace(PTRACE_SINGLESTEP, h->tid, NULL, NULL) != 0)
            return false;
        (*steps)++;
        int status;
        uint64_t step_deadline = hs_monotonic_ns() + 20000000ull;
        pid_t w =
            wait_thread(h->tid, &status, step_deadline < deadline_ns ? step_deadline : deadline_ns);
        bool interrupted = w == 0;
        if (interrupted) {
            /* Blocked in a system call: interrupt it there. */
            ptrace(PTRACE_INTERRUPT, h->tid, NULL, NULL);
            w = wait_thread(h->tid, &status, deadline_ns);
        }
        if (w <= 0 || !WIFSTOPPED(status))
            return false;
        if (!stopped_by_interrupt(status) && WSTOPSIG(status) != SIGTRAP) {
            /* A signal arrived: it is delivered at detach (one at a time is enough: the
             * kernel queues the rest). */
            if (!h->pending_signal)
                h->pending_signal = WSTOPSIG(status);
        }
        if (ptrace(PTRACE_GETREGS, h->tid, NULL, &r) != 0)
            return false;
        h->saved = r;
        if (hs_monotonic_ns() >= deadline_ns)
            return false;
        /* Interrupted in a call that is not safe: the next step restarts it and blocks again
         * (a thread waiting on a lock until the others finish), so the next thread is tried
         * instead. Stepping on took 20 ms a step, up to the whole timeout (5 s on a python3
         * whose main thread waited in join). */
        if (interrupted && !at_safe_point(t, &r))
            return false;
    }
    return at_safe_point(t, &r);
}

/* Calls fn(a0, a1) in the thread; *ret is its return value. The stack below the red zone
 * holds the return address 0 and `data` (len bytes), whose address replaces argument
 * data_arg (0 or 1; -1 for none). Returns 0, -1 with *why set, or -2 when the process died. */
static int remote_call(struct hijack *h, uintptr_t fn, uintptr_t a0, uintptr_t a1, const void *data,
                       size_t len, int data_arg, uint64_t timeout_ns, uintptr_t *ret,
                       const char **why)
{
    struct user_regs_struct r = h->saved;
    uintptr_t sp = (h->saved.rsp - 256 - len) & ~(uintptr_t)15;
    uintptr_t data_at = sp;
    if (len && pwrite(h->mem_fd, data, len, (off_t)data_at) != (ssize_t)len) {
        *why = "cannot write into its stack";
        return -1;
    }
    sp -= 8; /* the return address: (sp + 8) is 16-byte aligned at the call, as the ABI wants */
    uint64_t zero = 0;
    if (pwrite(h->mem_fd, &zero, 8, (off_t)sp) != 8) {
        *why = "cannot write into its stack";
        return -1;
    }
    r.rsp = sp;
    r.rip = fn;
    r.rdi = data_arg == 0 ? data_at : a0;
    r.rsi = data_arg == 1 ? data_at : a1;
    r.rax = 0;
    r.orig_rax = (unsigned long)-1;   /* not in a system call: no restart on the way out */
    r.eflags &= ~(0x100ul | 0x400ul); /* TF (single step) and DF (string direction) clear */
    if (ptrace(PTRACE_SETREGS, h->tid, NULL, &r) != 0 ||
        ptrace(PTRACE_CONT, h->tid, NULL, NULL) != 0) {
        *why = "cannot set its registers";
        return -1;
    }
    uint64_t deadline = hs_monotonic_ns() + timeout_ns;
    for (;;) {
        int status;
        pid_t w = wait_thread(h->tid, &status, deadline);
        if (w == 0) {
            ptrace(PTRACE_INTERRUPT, h->tid, NULL, NULL);
            wait_thread(h->tid, &status, hs_monotonic_ns() + 1000000000ull);
            *why = "the call did not return in time (the thread was given back its registers; "
                   "the library may be half loaded)";
            return -1;
        }
        if (w < 0 || !WIFSTOPPED(status)) {
            *why = "the process exited during the call";
            return -2;
        }
        int sig = WSTOPSIG(status);
        if ((status >> 16) != 0) {
            ptrace(PTRACE_CONT, h->tid, NULL, NULL); /* a group stop or event: keep going */
            continue;
        }
        if (sig == SIGSEGV) {
            struct user_regs_struct after;
            if (ptrace(PTRACE_GETREGS, h->tid, NULL, &after) == 0 && after.rip == 0) {
                *ret = after.rax;
                return 0;
            }
            *why = "the call crashed (SIGSEGV inside it); the thread was given back its "
                   "registers";
            return -1;
        }
        /* The program's own signal: delivered now, as it would be during any call; but a
         * SIGTRAP is a step's of ours left queued (see drop_step_trap): dropped. */
        ptrace(PTRACE_CONT, h->tid, NULL, (void *)(long)(sig == SIGTRAP ? 0 : sig));
    }
}

/* Reads a NUL-terminated string of the target into out. */
static void read_string(int mem_fd, uintptr_t addr, char *out, size_t cap)
{
    ssize_t n = addr ? pread(mem_fd, out, cap - 1, (off_t)addr) : -1;
    out[n > 0 ? n : 0] = '\0';
}

/* ---- The sequence --------------------------------------------------------------------------- */

static int list_threads(pid_t pid, pid_t *tids, int cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    tids[n++] = pid; /* the main thread first: the most likely to be idle in a system call */
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid > 0 && tid != pid)
            tids[n++] = (pid_t)tid;
    }
    closedir(d);
    return n;
}

static int preflight(const char *command, pid_t pid, const struct hs_inject_options *opt,
                     struct target_layout *t)
{
    size_t len;
    char *maps = hs_target_maps(command, pid, &len);
    if (!maps)
        return -1;
    free(maps);
    struct target_status st;
    if (!read_status(pid, &st)) {
        fprintf(stderr, "heapscope %s: no process %d\n", command, (int)pid);
        return -1;
    }
    char name[64];
    process_name(pid, name, sizeof(name));
    if (getuid() != 0 && st.uid != (long)getuid()) {
        fprintf(stderr,
                "heapscope %s: process %d (%s) belongs to another user (uid %ld); run heapscope "
                "as that user or as root\n",
                command, (int)pid, name, st.uid);
        return -1;
    }
    if (say_tracer(command, pid, name))
        return -1;
    if (st.seccomp == 1 || (st.seccomp == 2 && !opt->allow_seccomp)) {
        fprintf(stderr,
                "heapscope %s: process %d (%s) runs under seccomp %s: loading the library "
                "makes it call openat, mmap, socket and connect, which %s; start it with the "
                "library preloaded instead%s\n",
                command, (int)pid, name, st.seccomp == 1 ? "strict mode" : "filtering",
                st.seccomp == 1 ? "strict mode forbids (it would be killed)"
                                : "its filter may forbid or punish by killing it",
                st.seccomp == 2 ? ", or pass --allow-seccomp to try anyway" : "");
        return -1;
    }
    memset(t, 0, sizeof(*t));
    t->pid = pid;
    t->probe.pid = pid;
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, t->exe, sizeof(t->exe) - 1);
    t->exe[n > 0 ? n : 0] = '\0';
    if (hs_maps_foreach(pid, collect_layout, t) != 0) {
        fprintf(stderr, "heapscope %s: cannot read process %d's maps: %s\n", command, (int)pid,
                strerror(errno));
        return -1;
    }
    if (!t->has_loader) {
        const char *exe = t->exe;
        fprintf(stderr,
                "heapscope %s: process %d (%s) runs a statically linked program (%s): there is no "
                "dynamic loader in it to load a library with, and its malloc cannot be "
                "redirected; heapscope needs a dynamically linked program\n",
                command, (int)pid, name, exe[0] ? exe : "?");
        return -1;
    }
    if (!t->dlopen_fn) {
        fprintf(stderr,
                "heapscope %s: process %d (%s) has no glibc dlopen (is its C library glibc?)\n",
                command, (int)pid, name);
        return -1;
    }
    return 0;
}

void hs_inject_describe_pause(const struct hs_inject_result *res, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "thread %d paused %.1f ms", (int)res->tid, res->pause_ms);
    if (res->threads_tried > 1 && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n,
                 "; %u other thread%s tried first, stopped %.1f ms in all", res->threads_tried - 1,
                 res->threads_tried == 2 ? "" : "s", res->tries_ms);
}

int hs_inject_library(const char *command, pid_t pid, const struct hs_inject_options *opt,
                      struct hs_inject_result *res)
{
    uint64_t start_ns = hs_monotonic_ns();
    memset(res, 0, sizeof(*res));
    struct target_layout t;
    if (preflight(command, pid, opt, &t) != 0)
        return -1;
    char copy_dir[PATH_MAX];
    if (library_for_target(command, pid, opt->library, res->loaded_path, sizeof(res->loaded_path),
                           copy_dir, sizeof(copy_dir)) != 0)
        return -1;

    /* Ctrl-C while a thread runs a call whose return address is 0 would crash the program:
     * such signals wait until the thread is given back. */
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction alarm_action, old_alarm;
    memset(&alarm_action, 0, sizeof(alarm_action));
    alarm_action.sa_handler = on_alarm; /* no SA_RESTART: it breaks waitpid */
    sigemptyset(&alarm_action.sa_mask);
    sigaction(SIGALRM, &alarm_action, &old_alarm);

    int rc = -1;
    struct hijack h = {.pid = pid, .mem_fd = -1};
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    h.mem_fd = open(path, O_RDWR | O_CLOEXEC);
    uint64_t deadline = hs_monotonic_ns() + (uint64_t)opt->timeout_ms * 1000000ull;
    pid_t tids[4096];
    int num_tids = list_threads(pid, tids, 4096);
    if (num_tids <= 0) {
        fprintf(stderr, "heapscope %s: no process %d\n", command, (int)pid);
        goto out;
    }

    /* A thread at a safe point, trying each in turn, for up to the timeout. */
    bool found = false;
    while (!found && hs_monotonic_ns() < deadline) {
        for (int i = 0; i < num_tids && !found; i++) {
            int err = stop_thread(&h, tids[i], deadline);
            res->threads_tried++;
            if (err == EPERM || err == EACCES) {
                /* Traced since the checks (another heapscope racing us), or refused. */
                char name[64];
                process_name(pid, name, sizeof(name));
                if (!say_tracer(command, pid, name))
                    fprintf(stderr, "heapscope %s: cannot trace process %d: %s\n", command,
                            (int)pid, hs_inject_ptrace_refusal(err, yama_scope(), getuid() == 0));
                goto out;
            }
            if (err != 0) {
                if (err != ESRCH)
                    detach_thread(&h, false); /* seized, but it would not stop in time */
                continue; /* that thread exited, or would not stop: try the next */
            }
            if (h.mem_fd < 0) {
                h.mem_fd = open(path, O_RDWR | O_CLOEXEC);
                if (h.mem_fd < 0) {
                    release_thread(&h);
                    fprintf(stderr, "heapscope %s: cannot open %s: %s\n", command, path,
                            strerror(errno));
                    goto out;
                }
            }
            found = step_to_safe_point(&h, &t, &res->steps, deadline);
            if (!found) {
                res->tries_ms += (double)(hs_monotonic_ns() - h.stopped_ns) / 1e6;
                release_thread(&h);
            }
        }
        if (!found) {
            struct timespec pause = {0, 10 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    if (!found) {
        fprintf(stderr,
                "heapscope %s: no thread of process %d stopped outside the C library and the "
                "loader within %d ms; try again, or preload the library\n",
                command, (int)pid, opt->timeout_ms);
        goto out;
    }

    const char *why = NULL;
    uintptr_t handle = 0, init_fn = 0, status = 0;
    uint64_t call_timeout = (uint64_t)opt->timeout_ms * 1000000ull;
    int call = remote_call(&h, t.dlopen_fn, 0, RTLD_NOW, res->loaded_path,
                           strlen(res->loaded_path) + 1, 0, call_timeout, &handle, &why);
    if (call == 0 && handle == 0) {
        char text[512] = "no reason given";
        uintptr_t msg = 0;
        if (remote_call(&h, t.dlerror_fn, 0, 0, NULL, 0, -1, call_timeout, &msg, &why) == 0)
            read_string(h.mem_fd, msg, text, sizeof(text));
        fprintf(stderr, "heapscope %s: process %d could not load %s: %s\n", command, (int)pid,
                res->loaded_path, text);
        call = -1;
        why = NULL;
    }
    if (call == 0 && opt->init_function) {
        call = remote_call(&h, t.dlsym_fn, handle, 0, opt->init_function,
                           strlen(opt->init_function) + 1, 1, call_timeout, &init_fn, &why);
        if (call == 0 && init_fn == 0) {
            fprintf(stderr, "heapscope %s: %s has no function %s\n", command, res->loaded_path,
                    opt->init_function);
            call = -1;
        }
        if (call == 0)
            call = remote_call(&h, init_fn, 0, 0, NULL, 0, -1, call_timeout, &status, &why);
        res->init_status = (int)(uint32_t)status;
    }
    res->tid = h.tid;
    res->pause_ms += (double)(hs_monotonic_ns() - h.stopped_ns) / 1e6;
    if (call == -2) {
        fprintf(stderr, "heapscope %s: process %d: %s\n", command, (int)pid, why);
        goto out;
    }
    release_thread(&h);
    if (call != 0) {
        if (why)
            fprintf(stderr, "heapscope %s: loading %s into process %d: %s\n", command,
                    res->loaded_path, (int)pid, why);
        goto out;
    }
    rc = 0;
out:
    if (h.mem_fd >= 0)
        close(h.mem_fd);
    remove_copy(copy_dir, opt->library);
    sigaction(SIGALRM, &old_alarm, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    res->total_ms = (double)(hs_monotonic_ns() - start_ns) / 1e6;
    return rc;
}

#else

int hs_inject_library(const char *command, pid_t pid, const struct hs_inject_options *opt,
                      struct hs_inject_result *res)
{
    (void)opt;
    memset(res, 0, sizeof(*res));
    fprintf(stderr,
            "heapscope %s: loading a library into a running process (%d) is implemented for "
            "x86-64 only; start the program with the library preloaded\n",
            command, (int)pid);
    return -1;
}

#endif
