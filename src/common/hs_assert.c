/* hs_assert.c: the failure path of hs_assert (see hs_assert.h). */
#include "hs_assert.h"

#include "log.h"

#include <stdlib.h>
#include <unistd.h>

/* Set once a thread is logging a failure: a check failing inside that logging (the log or
 * the formatter is what broke) must not recurse. */
static __thread int t_failing __attribute__((tls_model("initial-exec")));

void hs_assert_fail(const char *cond, const char *file, int line, const char *func)
{
    if (!t_failing) {
        t_failing = 1;
        hs_log_fatal_tag("heapscope", "assertion failed: %s at %s:%d in %s()", cond, file, line,
                         func);
    } else {
        static const char msg[] = "heapscope: assertion failed while reporting a failed "
                                  "assertion\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
    }
    abort();
}
