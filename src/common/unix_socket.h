/* unix_socket.h: UNIX stream sockets with descriptor passing, for the profiler's client and
 * daemon. Plain system calls only: no malloc, async-signal-safe (the client connects from a
 * signal handler).
 *
 * Addresses: "@NAME" is the abstract socket NAME (no file; gone with its listener), anything
 * else a path in the file system.
 */
#ifndef HEAPSCOPE_COMMON_UNIX_SOCKET_H
#define HEAPSCOPE_COMMON_UNIX_SOCKET_H

#include <stddef.h>
#include <sys/types.h>

/* Most descriptors one message carries. */
#define HS_SOCK_MAX_FDS 4

/* Connects to address with a close-on-exec socket whose sends and receives time out after
 * timeout_ms. Returns the socket, or -1 with errno set (ENAMETOOLONG for a long address). */
int hs_sock_connect(const char *address, int timeout_ms);

/* A close-on-exec, non-blocking listening socket bound to address (a path: an old socket
 * file there is replaced, the new one gets mode 0600 by the umask of the call). Returns the
 * socket, or -1 with errno set. */
int hs_sock_listen(const char *address);

/* Sends len bytes and nfds descriptors (SCM_RIGHTS) in one message. Returns 0, or -1 with
 * errno set (a short send is EMSGSIZE). Never raises SIGPIPE. */
int hs_sock_send(int sock, const void *buf, size_t len, const int *fds, int nfds);

/* Receives one message of at most len bytes and up to max_fds descriptors (made
 * close-on-exec; descriptors beyond max_fds are closed). Returns the bytes received (0: the
 * peer closed), or -1 with errno set; *nfds is the number of descriptors stored. */
ssize_t hs_sock_recv(int sock, void *buf, size_t len, int *fds, int max_fds, int *nfds);

/* Sets the send and receive timeouts of sock. Returns 0 or -1. */
int hs_sock_set_timeout(int sock, int timeout_ms);

#endif
