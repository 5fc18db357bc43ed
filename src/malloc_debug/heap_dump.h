/* heap_dump.h: Android's native heap dump ("Android Native Heap Dump v1.2") for malloc debug.
 *
 * A dump lists every live tracked allocation, sorted and merged as heap_snapshot.h describes,
 * followed by a verbatim copy of /proc/self/maps:
 *
 *     Android Native Heap Dump v1.2
 *
 *     Build fingerprint: '<uname sysname release version machine>; <os-release PRETTY_NAME>'
 *
 *     Total memory: <bytes of all live allocations listed>
 *     Allocation records: <number of z lines>
 *     Backtrace size: <the backtrace option's frame count>
 *
 *     z 0  sz <size, %8zu>  num <count, %4zu>  bt <pc> <pc> ...      (pcs absolute, %x)
 *       bt_info {"<map path>" <rel pc %x> "<symbol>" <offset %x>} ...  (backtrace_full only)
 *     MAPS
 *     <contents of /proc/self/maps>
 *     END
 *
 * "z" (Android's zygote-child flag) is always 0 on Linux. In bt_info, the map path is the
 * mapping's path (with " (deleted)" if the kernel says so; "" for a pc in no mapping),
 * rel pc is the pc minus the load bias of the object (the address addr2line expects; the
 * absolute pc for a pc in no mapping), and the symbol is the mangled name of the function
 * holding the pc, "" with offset 0 when unknown. As in Android, the offset is printed in hex.
 * Frames are call sites (return address - 1, hs_backtrace_capture), as bionic stores them:
 * the bt pcs, rel pcs and offsets all point inside the call instructions.
 * A dump is complete when its last line is "END".
 *
 * Triggers (only with the backtrace option, which records allocation backtraces):
 *  - SIGRTMAX-17 (47 with glibc): the handler only sets a flag; the next malloc or free of any
 *    thread writes <backtrace_dump_prefix>.<pid>.txt (hs_md_heap_dump_if_requested);
 *  - exit, with backtrace_dump_on_exit: <backtrace_dump_prefix>.<pid>.exit.txt;
 *  - hs_md_heap_dump_to(path), any time.
 * Each dump logs "Dumping to file: <path>", or "Unable to create heap dump file <path>:
 * <error>" when the file cannot be created. A dump whose writing fails (a full disk) logs
 * "Unable to write heap dump file <path>: <error>" and leaves in the file, instead of a part
 * of the dump, the one line HS_MD_HEAP_DUMP_FAILED "<error>" (for `heapscope dumpheap`).
 *
 * Threading and signals: dumps are serialised by a lock of their own (stolen by a forked
 * child whose parent was dumping). A dump never calls malloc or stdio: it writes with
 * write(2) from a buffer in the shim's arena, where its tables live too; it sets the re-entry
 * guard (hs_md_in_shim) so that anything it calls that allocates goes to glibc. It must not
 * run in a signal handler (it takes the table spinlocks); only the trigger handler does, and
 * it touches nothing but an atomic flag.
 */
#ifndef HEAPSCOPE_MALLOC_DEBUG_HEAP_DUMP_H
#define HEAPSCOPE_MALLOC_DEBUG_HEAP_DUMP_H

#include <stdbool.h>

/* The start of the only line of a dump file whose writing failed. */
#define HS_MD_HEAP_DUMP_FAILED "Native heap dump failed: "

/* Set by the SIGRTMAX-17 handler; read by hs_md_heap_dump_if_requested. */
extern int hs_md_heap_dump_pending;

/* Installs the SIGRTMAX-17 handler when hs_md.cfg has the backtrace option (and, with
 * verbose, logs "<program>: Run: 'kill -47 <pid>' to dump the backtrace."); does nothing
 * otherwise. Call once from initialisation, after hs_md.cfg is parsed. Never allocates. */
void hs_md_heap_dump_init(void);

/* Writes the signal-requested dump (slow path of hs_md_heap_dump_if_requested). */
void hs_md_heap_dump_requested(void);

/* Call at the start of every malloc debug allocation and free: when SIGRTMAX-17 has arrived
 * since the last dump, writes <prefix>.<pid>.txt (exactly one caller does). Otherwise costs
 * one relaxed load and one predicted branch. Does nothing inside the shim's own code. */
static inline void hs_md_heap_dump_if_requested(void)
{
    if (__builtin_expect(__atomic_load_n(&hs_md_heap_dump_pending, __ATOMIC_RELAXED), 0))
        hs_md_heap_dump_requested();
}

/* Writes <prefix>.<pid>.txt now (what the signal asks for), when backtraces are recorded and
 * the caller is not the shim's own code. For a caller that routes SIGRTMAX-17 through its own
 * request mechanism instead of hs_md_heap_dump_init's handler. Preserves errno. */
void hs_md_heap_dump_signal_file(void);

/* Writes <prefix>.<pid>.exit.txt when the options include backtrace and
 * backtrace_dump_on_exit; does nothing otherwise. Call from the shim's exit hook. */
void hs_md_heap_dump_at_exit(void);

/* Writes a dump to path (created or truncated, mode 0644, not following a final symlink).
 * Returns 0 on success; -1 with errno set when the file cannot be created or written (the
 * file then holds the HS_MD_HEAP_DUMP_FAILED line when it can), or,
 * with errno ENOTSUP, when backtraces are not being recorded (the file then holds a short
 * explanation instead of a dump, as on Android). Thread-safe; not async-signal-safe. */
int hs_md_heap_dump_to(const char *path);

#endif
