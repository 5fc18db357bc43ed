/* profiled_process.h: the daemon's side of one profiled process's session.
 *
 * Accepting a connection runs the handshake: the peer's credentials (SO_PEERCRED) must be
 * those of the daemon's user (any user when the daemon runs as root), the pid in the hello
 * must be the peer's, and the two descriptors must be that pid's /proc maps and mem; the
 * daemon then creates the shared buffer and answers with the configuration. A refusal is
 * answered with its reason.
 *
 * Then the daemon drains the buffer: each record is copied out of the shared memory (the
 * client can change it at any time), checked (records.h), and applied: a malloc sample is
 * unwound (unwinder.h; the maps are read again, at most every 500 ms, when an unwind meets an
 * unknown mapping) and given to the heap tracker with its stack; frees and heap
 * declarations go straight to the tracker. A broken buffer (corrupt, or a record left
 * unpublished) ends the session; so does the socket closing, once the buffer is drained.
 *
 * Dumps write the tracker's heaps as pprof (and, if asked, Android heap dump text) files
 * named DIR/PROGRAM.PID.LABEL[.HEAP].pb.gz, LABEL being a dump number, "final" or "max".
 */
#ifndef HEAPSCOPE_PROFILER_PROFILED_PROCESS_H
#define HEAPSCOPE_PROFILER_PROFILED_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct hs_daemon_config {
    uint64_t interval;     /* sampling interval, bytes */
    uint64_t max_interval; /* adaptive sampling's ceiling */
    uint32_t flags;        /* HS_CONFIG_* (handshake.h) */
    uint64_t block_timeout_ms;
    uint32_t max_stack;
    size_t buffer_size;
    const char *out_dir;
    bool android_dump; /* also write the Android heap dump text */
    bool dump_at_max;  /* at the end, also the dump at the peak */
    const pid_t *pids; /* only these processes (and their children when follow); NULL: any */
    size_t num_pids;
    /* Told of each profile file that could not be written (the reason: strerror's text), on
     * top of the log line: the daemon passes it on to whoever started it. May be NULL. */
    void (*write_failed)(pid_t pid, const char *path, const char *reason);
};

/* What a dump is. */
enum hs_dump_kind {
    HS_DUMP_NUMBERED, /* on demand or continuous: LABEL is the dump's number */
    HS_DUMP_FINAL,    /* the session ended: "final", and "max" with dump_at_max */
};

struct hs_profiled_process;

/* Accepts the connection sock (the daemon's end; taken over, closed on failure). Returns the
 * process, or NULL with the reason in err (the peer was told when it could be). */
struct hs_profiled_process *hs_process_accept(int sock, const struct hs_daemon_config *cfg,
                                              char *err, size_t err_cap);

/* Bytes of records applied since the last call (the data rate, for heapprofd --max-rate). */
uint64_t hs_process_take_bytes(struct hs_profiled_process *p);

/* Asks the client for a sampling interval of at least `interval` (0: no request), through its
 * buffer's metadata page; its adaptive sampling takes it at the next sample. */
void hs_process_request_interval(struct hs_profiled_process *p, uint64_t interval);

/* The socket to poll for input (wake-ups and the end of the session). */
int hs_process_socket(const struct hs_profiled_process *p);
pid_t hs_process_pid(const struct hs_profiled_process *p);

/* Reads what arrived on the socket: wake-up bytes, or the end of the connection. */
void hs_process_on_socket(struct hs_profiled_process *p);

/* What the buffer needs next, after a drain. */
enum hs_drain_state {
    HS_DRAIN_IDLE, /* the reader sleeps (marked paused): wait for the socket */
    HS_DRAIN_SOON, /* empty but records came recently, or the next one is being written:
                      look again in a few ms */
    HS_DRAIN_MORE, /* more records: look again at once */
};

/* Applies up to max records. While records keep coming the reader polls the buffer every few
 * milliseconds instead of sleeping: a sleeping reader costs the client a wake-up (a system
 * call) per record, the largest part of its cost when samples are rare. */
enum hs_drain_state hs_process_drain(struct hs_profiled_process *p, size_t max);

/* Stops the session from the daemon's side: the client sees its buffer shut down and stops
 * writing; what it published is still drained. */
void hs_process_stop(struct hs_profiled_process *p, const char *why);

/* True when the session is over: the client is gone (or stopped, or broken) and the buffer
 * was drained as far as it can be. */
bool hs_process_finished(const struct hs_profiled_process *p);

/* Writes a dump of every heap with samples. Logs each file written. Returns 0, or -1 when a
 * file could not be written (logged). */
int hs_process_dump(struct hs_profiled_process *p, enum hs_dump_kind kind);

/* The malloc profile the last dump wrote ("" before the first). */
const char *hs_process_last_profile(const struct hs_profiled_process *p);

/* Memory the process's bookkeeping holds (tracker, unwinder caches). */
size_t hs_process_memory(const struct hs_profiled_process *p);

void hs_process_free(struct hs_profiled_process *p);

/* The daemon's resident memory in bytes (0 when unknown). */
uint64_t hs_daemon_resident_bytes(void);

#endif
