/* env.h: environment lookup that works before libc is set up and never allocates.
 *
 * The malloc shim may be initialised by the very first malloc call of a process, before
 * libc has published `environ`. So the value is read from `environ` when it is set, and from
 * /proc/self/environ (raw system calls, a stack buffer) otherwise.
 */
#ifndef HEAPSCOPE_COMMON_ENV_H
#define HEAPSCOPE_COMMON_ENV_H

#include <stddef.h>
#include <sys/types.h>

/* Copies the value of `name` into out (capacity cap >= 1). Returns -1 when the variable is
 * not set, otherwise the length of its value; a length >= cap means the value did not fit
 * and out is left empty. Async-signal-safe. */
ssize_t hs_env_get(const char *name, char *out, size_t cap);

#endif
