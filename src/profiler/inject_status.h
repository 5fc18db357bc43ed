/* inject_status.h: what the profiler client's injected init (heapprofd_client_injected_init,
 * called by `heapscope profile -p` after loading the client into a process that was started
 * without it) returns, and what the command prints for each. */
#ifndef HEAPSCOPE_PROFILER_INJECT_STATUS_H
#define HEAPSCOPE_PROFILER_INJECT_STATUS_H

/* The exported name of the init function. */
#define HS_CLIENT_INJECTED_INIT "heapprofd_client_injected_init"

enum hs_inject_status {
    HS_INJECT_OK = 0,
    HS_INJECT_OTHER_ALLOCATOR = 1, /* malloc is not glibc's (jemalloc, tcmalloc, a shim) */
    HS_INJECT_SIGNAL_TAKEN = 2,    /* the program handles the profiling signal itself */
    HS_INJECT_NO_SLOTS = 3,        /* no object calls malloc through a GOT slot */
};

static inline const char *hs_inject_status_text(int status)
{
    switch (status) {
    case HS_INJECT_OTHER_ALLOCATOR:
        return "its malloc is not glibc's (another allocator is linked or preloaded), and the "
               "client only wraps glibc's";
    case HS_INJECT_SIGNAL_TAKEN:
        return "the program handles the profiling signal (36) itself";
    case HS_INJECT_NO_SLOTS:
        return "no loaded object calls malloc through its relocation table (GOT), so there is "
               "nothing to redirect";
    default:
        return "the client's init failed";
    }
}

#endif
