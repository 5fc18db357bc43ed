/* test_perf_map.c: JIT code names from perf map files (src/common/perf_map.c). */
#include "check.h"
#include "perf_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_lookup(void)
{
    check_context("lookup");
    const char text[] = "7f0000001000 100 JS:~first /a.js:1:1\n"
                        "0x7f0000002000 0x80 LazyCompile:*second b.js:2\n"
                        "7f0000003000 40 Stub:CEntry\n"
                        "7f0000003000 40 Stub:CEntry again\n" /* re-emitted: this one wins */
                        "7f0000004000 1000 outer\n"
                        "7f0000004100 10 inner\n"; /* later, inside outer */
    struct hs_perf_map *m = hs_perf_map_parse(text, strlen(text));
    CHECK(m != NULL);
    CHECK_EQ(hs_perf_map_size(m), 6);
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f0000001000), "JS:~first /a.js:1:1");
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f00000010ff), "JS:~first /a.js:1:1");
    CHECK(hs_perf_map_lookup(m, 0x7f0000001100) == NULL); /* one past the end */
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f0000002010), "LazyCompile:*second b.js:2");
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f0000003020), "Stub:CEntry again");
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f0000004108), "inner");
    CHECK_STREQ(hs_perf_map_lookup(m, 0x7f0000004200), "outer");
    CHECK(hs_perf_map_lookup(m, 0x1000) == NULL);
    CHECK(hs_perf_map_lookup(NULL, 0x7f0000001000) == NULL);
    hs_perf_map_free(m);
}

static void test_hostile_text(void)
{
    check_context("hostile text");
    /* Malformed lines are skipped; names are cut; no line end at the end is fine. */
    char big[2000];
    memset(big, 'n', sizeof(big));
    char text[4096];
    int n = snprintf(text, sizeof(text),
                     "garbage\n\n1000\n1000 \n1000 zz name\n1000 0 empty\n"
                     "ffffffffffffff00 1000 wraps\n12345678901234567890 10 too long\n"
                     "2000 10 %.*s\n3000 10 last without newline",
                     (int)sizeof(big), big);
    struct hs_perf_map *m = hs_perf_map_parse(text, (size_t)n);
    CHECK(m != NULL);
    CHECK_EQ(hs_perf_map_size(m), 2);
    const char *name = hs_perf_map_lookup(m, 0x2005);
    CHECK(name != NULL && strlen(name) == HS_PERF_MAP_NAME_MAX);
    CHECK_STREQ(hs_perf_map_lookup(m, 0x3000), "last without newline");
    hs_perf_map_free(m);
    /* Random bytes never crash. */
    srand(7);
    for (int round = 0; round < 200; round++) {
        char junk[512];
        for (size_t i = 0; i < sizeof(junk); i++)
            junk[i] = "0123456789abcdefx \n"[rand() % 19];
        m = hs_perf_map_parse(junk, sizeof(junk));
        CHECK(m != NULL);
        for (int i = 0; i < 50; i++)
            hs_perf_map_lookup(m, (uintptr_t)rand() * (uintptr_t)rand());
        hs_perf_map_free(m);
    }
}

static void test_load_by_pid(void)
{
    check_context("load");
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "5000 20 JS:mine\n");
    fclose(f);
    struct hs_perf_map *m = hs_perf_map_load(getpid());
    CHECK_STREQ(hs_perf_map_lookup(m, 0x5010), "JS:mine");
    hs_perf_map_free(m);
    unlink(path);
    CHECK(hs_perf_map_load(getpid()) == NULL);
}

int main(void)
{
    test_lookup();
    test_hostile_text();
    test_load_by_pid();
    return check_report();
}
