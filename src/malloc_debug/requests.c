/* requests.c: the shim's signal handlers and the work they defer (see requests.h). */
#include "requests.h"

#include "allocator_stats.h"
#include "debug_state.h"
#include "errno_text.h"
#include "log.h"
#include "signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

int hs_md_requests;

void hs_md_request(int bits)
{
    __atomic_fetch_or(&hs_md_requests, bits, __ATOMIC_RELAXED);
}

void hs_md_serve_requests_slow(void)
{
    int bits = __atomic_exchange_n(&hs_md_requests, 0, __ATOMIC_ACQ_REL);
    if (bits & HS_MD_REQ_ALLOCATOR_STATS)
        hs_md_log_allocator_stats();
}

static void on_toggle_backtrace(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    __atomic_xor_fetch(&hs_md.backtrace_on, 1, __ATOMIC_RELAXED);
}

static void on_allocator_stats(int sig, siginfo_t *info, void *uc)
{
    (void)sig, (void)info, (void)uc;
    hs_md_request(HS_MD_REQ_ALLOCATOR_STATS);
}

static void install(int sig, void (*handler)(int, siginfo_t *, void *), const char *what)
{
    int err = hs_signal_install(sig, handler);
    if (err != 0) {
        hs_log("%s: unable to set up signal %d to %s: %s", hs_log_program_name(), sig, what,
               hs_errno_text(err));
        return;
    }
    if (hs_md.cfg.options & HS_OPT_VERBOSE)
        hs_log("%s: Run: 'kill -%d %d' to %s.", hs_log_program_name(), sig, (int)getpid(), what);
}

void hs_md_requests_init(void)
{
    const struct hs_md_config *cfg = &hs_md.cfg;
    if (cfg->backtrace_enable_on_signal)
        install(SIGRTMAX - 19, on_toggle_backtrace, "enable backtracing");
    if (cfg->options & HS_OPT_LOG_ALLOCATOR_STATS_ON_SIGNAL)
        install(SIGRTMAX - 15, on_allocator_stats, "log allocator stats");
}
