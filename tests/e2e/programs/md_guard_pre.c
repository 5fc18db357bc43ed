/* md_guard_pre.c: a preloaded library that installs a SIGSEGV handler in its constructor,
 * before malloc debug starts (LD_PRELOAD="libmalloc_debug.so libmd_guard_pre.so": this one is
 * initialised first). The handler says so and exits with status 42. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void pre_handler(int sig)
{
    (void)sig;
    static const char msg[] = "pre_handler\n";
    write(STDOUT_FILENO, msg, sizeof(msg) - 1);
    _exit(42);
}

__attribute__((constructor)) static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = pre_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}
