/* handshake.h: how a profiled process joins the profiler daemon.
 *
 * The client connects to the daemon's UNIX socket and sends a hello with two descriptors,
 * its /proc/self/maps and /proc/self/mem (the daemon checks that they belong to the peer's
 * pid, which the kernel vouches for). The daemon answers with a config: accepted or not
 * (with a reason), the sampling parameters, and the shared ring buffer's memfd. From then on
 * the socket only carries wake-up bytes from the client (when the daemon's reader sleeps, see
 * ring_buffer.h); either side closing it ends the session. Each message is one sendmsg of a
 * fixed-size struct; socket I/O times out after HS_HANDSHAKE_TIMEOUT_MS.
 */
#ifndef HEAPSCOPE_PROFILER_HANDSHAKE_H
#define HEAPSCOPE_PROFILER_HANDSHAKE_H

#include <stdint.h>

#define HS_HANDSHAKE_MAGIC 0x52505348u /* "HSPR" */
/* The wire format: the messages here, and the records (records.h) and the ring buffer's layout
 * (ring_buffer.h, stack_hints.h) that client and daemon share. 2: the stack gaps. */
#define HS_HANDSHAKE_VERSION 2u
#define HS_HANDSHAKE_TIMEOUT_MS 1000

/* Client -> daemon, with the descriptors of /proc/self/maps and /proc/self/mem. */
struct hs_hello {
    uint32_t magic, version;
    int32_t pid;
    uint32_t reserved;
    uint64_t client_pc; /* an address in the client library: its frames are dropped */
};

/* Config flags. */
#define HS_CONFIG_BLOCK_CLIENT 1u /* wait for room in a full buffer (up to block_timeout) */
#define HS_CONFIG_ADAPTIVE 2u     /* raise the interval while the buffer is over half full */

/* Daemon -> client, with the ring buffer's memfd when accepted. */
struct hs_config {
    uint32_t magic, version;
    uint32_t accepted; /* 0: refused, see reason */
    uint32_t flags;
    uint64_t interval;     /* sampling interval in bytes (1: every allocation) */
    uint64_t max_interval; /* the adaptive interval's ceiling */
    uint64_t block_timeout_ms;
    uint32_t max_stack; /* most bytes of stack copied per sample */
    uint32_t reserved;
    char reason[128];
};

#endif
