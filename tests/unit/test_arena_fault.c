/* test_arena_fault.c: the arena's fault injection (HEAPSCOPE_ARENA_FAIL_AFTER, arena.c).
 *
 * Run with HEAPSCOPE_ARENA_FAIL_AFTER=4 (CTest sets it): four mappings succeed (three size
 * classes' first chunks and a large block), every later one fails - a fourth class's chunk,
 * another large block, the large block's growth (which leaves it as it was) - while blocks
 * carved from the chunks already mapped still come. Run with "off" as argument and the
 * variable unset, the same calls all succeed.
 */
#include "check.h"

#include "arena.h"

#include <stdint.h>
#include <string.h>

#define CHUNK (256u << 10)
#define BIG (1u << 20)

static struct hs_arena g_arena;

int main(int argc, char **argv)
{
    bool armed = !(argc > 1 && strcmp(argv[1], "off") == 0);
    check_context(armed ? "HEAPSCOPE_ARENA_FAIL_AFTER=4" : "no fault injection");
    /* Mappings 1 to 4: three classes' chunks and a large block. */
    void *a = hs_arena_alloc(&g_arena, 16);
    void *b = hs_arena_alloc(&g_arena, 100);
    void *c = hs_arena_alloc(&g_arena, 1000);
    char *big = hs_arena_alloc(&g_arena, BIG);
    CHECK(a && b && c && big);
    CHECK_EQ(hs_arena_mapped_bytes(&g_arena), 3 * CHUNK + BIG);
    if (!big)
        return check_report();
    memset(big, 0x5a, BIG);
    /* A fourth class needs a fourth chunk; a large block is a mapping of its own. */
    void *d = hs_arena_alloc(&g_arena, 5000);
    void *big2 = hs_arena_calloc(&g_arena, 2 * BIG);
    CHECK(armed ? d == NULL : d != NULL);
    CHECK(armed ? big2 == NULL : big2 != NULL);
    /* Growing the large block needs a new mapping too; a failure leaves it as it was. */
    char *grown = hs_arena_grow(&g_arena, big, BIG, 4 * BIG);
    CHECK(armed ? grown == NULL : grown != NULL);
    if (!grown)
        grown = big;
    CHECK(grown[0] == 0x5a && grown[BIG - 1] == 0x5a);
    /* Blocks of the chunks already mapped still come, recycled or new. */
    hs_arena_free(&g_arena, a, 16);
    void *a2 = hs_arena_alloc(&g_arena, 16);
    void *b2 = hs_arena_alloc(&g_arena, 100);
    CHECK(a2 == a);
    CHECK(b2 != NULL && b2 != b);
    CHECK_EQ(hs_arena_mapped_bytes(&g_arena),
             armed ? 3 * CHUNK + BIG : 4 * CHUNK + 2 * BIG + 4 * BIG);
    return check_report();
}
