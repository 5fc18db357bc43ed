/* sweep.c: hs_mu_sweep, the sweeper's whole job (see capture.h for where it runs).
 *
 * Steps: install the fault guard; let the heap source read the capture (heap->prepare, when
 * it has one); list the allocations (heap->iterate) into the walker and
 * index them; add the roots (roots.h); mark; fold the unmarked allocations into leaks
 * (leak_folding.h); group them by backtrace, sort and cut to the limit (leak_grouping.h);
 * write the result to fd (result_codec.h). Any failure is written to fd as a failed result
 * when possible, and returned.
 *
 * Runs in the forked, single-threaded sweeper: no malloc, no stdio, no locks of the program;
 * memory from `arena`. Stack: a few KiB (no recursion; hs_sort recurses O(log n) deep).
 * SIGPIPE is ignored while writing (the reader may have given up); the previous disposition
 * and the fault guard's handlers are restored before returning, so the function can also run
 * in a test process.
 */
#include "capture.h"

#include "errno_text.h"
#include "heap_walker.h"
#include "leak_folding.h"
#include "leak_grouping.h"
#include "log.h"
#include "result_codec.h"
#include "roots.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

static const char *step_name[] = {
    "installing the fault handlers", "listing the allocations", "indexing the allocations",
    "collecting the roots",          "folding the leaks",       "grouping the leaks",
    "reading the heap's layout"};

int hs_mu_sweep(const struct hs_mu_capture *capture, const struct hs_mu_heap_source *heap,
                size_t limit, int fd, struct hs_arena *arena)
{
    struct sigaction ign, old_pipe;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    bool pipe_saved = sigaction(SIGPIPE, &ign, &old_pipe) == 0;

    struct hs_mu_heap_walker w;
    struct hs_mu_folding folding;
    struct hs_mu_grouping grouping;
    hs_mu_heap_walker_init(&w, arena);
    memset(&folding, 0, sizeof(folding));
    memset(&grouping, 0, sizeof(grouping));

    int step = 0, r = -hs_mu_fault_guard_install();
    bool guarded = r == 0;
    if (r == 0 && heap->prepare)
        step = 6, r = heap->prepare(capture, arena);
    if (r == 0 && (step = 1, r = hs_mu_heap_walker_collect(&w, heap)) == 0 &&
        (step = 2, r = hs_mu_heap_walker_finish(&w)) == 0 &&
        (step = 3, r = hs_mu_roots_collect(capture, &w, arena)) == 0) {
        hs_mu_heap_walker_mark(&w);
        if ((step = 4, r = hs_mu_leak_folding_run(&w, arena, &folding)) == 0)
            step = 5, r = hs_mu_leak_grouping_run(&w, &folding, heap, limit, arena, &grouping);
    }

    if (r == 0) {
        struct hs_mu_result_summary s = {
            .num_leaks = folding.num_leaked,
            .leak_bytes = folding.leaked_bytes,
            .num_allocations = w.num_allocs,
            .allocation_bytes = w.allocation_bytes,
            .skipped_pages = hs_mu_fault_guard_skipped_pages(),
        };
        r = hs_mu_result_write(fd, 0, &s, grouping.leaks, grouping.num_leaks);
        if (r != 0)
            hs_log_tag(HS_MU_LOG_TAG, "cannot send the result: %s", hs_errno_text(-r));
    } else {
        hs_log_tag(HS_MU_LOG_TAG, "sweep failed while %s: %s", step_name[step], hs_errno_text(-r));
        hs_mu_result_write(fd, r, NULL, NULL, 0);
    }

    hs_mu_leak_grouping_free(&grouping, arena);
    hs_mu_leak_folding_free(&folding, arena);
    hs_mu_heap_walker_destroy(&w);
    if (guarded)
        hs_mu_fault_guard_remove();
    if (pipe_saved)
        sigaction(SIGPIPE, &old_pipe, NULL);
    return r;
}
