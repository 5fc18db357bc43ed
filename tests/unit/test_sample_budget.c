/* test_sample_budget.c: unit tests of sample_budget.h, how sample_guard's default rate backs
 * off when its sampled work costs more than its budget of the thread's time, and comes back
 * when it costs much less. */
#include "check.h"
#include "sample_budget.h"

#include <stdint.h>

int main(void)
{
    const uint64_t ms = 1000 * 1000, window = 100 * ms;
    const uint64_t budget = window * HS_MD_SAMPLE_BUDGET_PER_MILLE / 1000;
    /* Over the budget: twice the countdown, up to the cap. */
    CHECK_EQ(hs_md_sample_next_scale(1, budget + 1, window), 2);
    CHECK_EQ(hs_md_sample_next_scale(8, window, window), 16);
    CHECK_EQ(hs_md_sample_next_scale(HS_MD_SAMPLE_MAX_SCALE, window, window),
             HS_MD_SAMPLE_MAX_SCALE);
    CHECK_EQ(hs_md_sample_next_scale(HS_MD_SAMPLE_MAX_SCALE / 2 + 1, window, window),
             HS_MD_SAMPLE_MAX_SCALE);
    /* Within it: unchanged. */
    CHECK_EQ(hs_md_sample_next_scale(4, budget, window), 4);
    CHECK_EQ(hs_md_sample_next_scale(4, budget / 4, window), 4);
    /* Far under it: half, never below the configured rate (1). */
    CHECK_EQ(hs_md_sample_next_scale(4, budget / 4 - 1, window), 2);
    CHECK_EQ(hs_md_sample_next_scale(1, 0, window), 1);
    CHECK_EQ(hs_md_sample_next_scale(0, 0, window), 1);
    /* A run of windows settles where the cost fits: a sample costs 10 us, one every 1 ms at
     * scale 1 (1%): after doubling to 2 (0.5%) it stays. */
    uint32_t scale = 1;
    for (int i = 0; i < 10; i++) {
        uint64_t samples = window / (ms * scale);
        scale = hs_md_sample_next_scale(scale, samples * 10000, window);
    }
    CHECK_EQ(scale, 2);
    return check_report();
}
