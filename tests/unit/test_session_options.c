/* test_session_options.c: the profiling session's option table (src/profiler/session_options.c),
 * which heapprofd and `heapscope profile` both parse from: the getopt tables of the two
 * commands, the value rules, and the --help lines written from it.
 */
#define _GNU_SOURCE
#include "check.h"

#include "session_options.h"

#include <stdlib.h>
#include <string.h>

static void test_rows(void)
{
    check_context("every row: a long name, a help text, a sane range and an error text");
    for (int id = 0; id < HS_SOPT_COUNT; id++) {
        const struct hs_sopt *o = &hs_sopts[id];
        CHECK(o->name && strncmp(o->name, "--", 2) == 0 && o->name[2]);
        CHECK(o->help && o->help[0] && o->help[strlen(o->help) - 1] != '\n');
        if (o->arg) {
            CHECK(o->min <= o->max);
            CHECK(o->takes != NULL);
        } else {
            CHECK(o->takes == NULL);
        }
        for (int other = 0; other < id; other++)
            CHECK(strcmp(hs_sopts[other].name, o->name) != 0);
    }
}

static void test_getopt_tables(void)
{
    check_context("the profile command's options are the daemon's rows marked in_profile");
    struct option daemon[HS_SOPT_COUNT], profile[HS_SOPT_COUNT];
    int nd = hs_sopt_longopts(daemon, false), np = hs_sopt_longopts(profile, true);
    CHECK_EQ(nd, HS_SOPT_COUNT);
    int marked = 0;
    for (int id = 0; id < HS_SOPT_COUNT; id++)
        marked += hs_sopts[id].in_profile;
    CHECK_EQ(np, marked);
    for (int i = 0; i < np; i++) {
        int id = hs_sopt_of(profile[i].val, true);
        CHECK(id >= 0 && hs_sopts[id].in_profile);
        CHECK_EQ(hs_sopt_of(profile[i].val, false), id);
        CHECK_STREQ(profile[i].name, hs_sopts[id].name + 2);
        CHECK_EQ(profile[i].has_arg, hs_sopts[id].arg ? required_argument : no_argument);
    }
    CHECK_EQ(hs_sopt_of('i', true), HS_SOPT_INTERVAL);
    CHECK_STREQ(hs_sopt_shortopts(false), "i:");
    CHECK_STREQ(hs_sopt_shortopts(true), "i:");
    CHECK_EQ(hs_sopt_of('x', false), -1);
    CHECK_EQ(hs_sopt_of(HS_SOPT_VAL + HS_SOPT_MAX_RATE, true), -1); /* the daemon's only */
    CHECK_EQ(hs_sopt_of(HS_SOPT_VAL + HS_SOPT_MAX_RATE, false), HS_SOPT_MAX_RATE);
}

static void test_values(void)
{
    check_context("values: ranges, powers of two, junk");
    uint64_t v = 0;
    CHECK(hs_sopt_parse(HS_SOPT_INTERVAL, "1", &v) && v == 1);
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "0", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "1099511627777", &v)); /* 2^40 + 1 */
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "-1", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "12k", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_INTERVAL, "99999999999999999999999", &v));
    CHECK(hs_sopt_parse(HS_SOPT_BUFFER_SIZE, "8192", &v) && v == 8192);
    CHECK(!hs_sopt_parse(HS_SOPT_BUFFER_SIZE, "12288", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_BUFFER_SIZE, "2048", &v));
    CHECK(hs_sopt_parse(HS_SOPT_BUFFER_SIZE, "268435456", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_BUFFER_SIZE, "536870912", &v));
    CHECK(!hs_sopt_parse(HS_SOPT_MAX_RATE, "1023", &v));
}

static void test_help(void)
{
    check_context("help: one line per row starting with its spelling, text at the column");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hs_sopt_help(f, true, 24);
    fclose(f);
    CHECK(strstr(text, "  -i, --interval BYTES  average bytes between samples") != NULL);
    CHECK(strstr(text, "      --no-block        drop samples") != NULL);
    CHECK(strstr(text, "      --buffer-size BYTES\n                        shared buffer") != NULL);
    CHECK(strstr(text, "--max-rate") == NULL);
    free(text);
    f = open_memstream(&text, &len);
    hs_sopt_help(f, false, 27);
    fclose(f);
    for (int id = 0; id < HS_SOPT_COUNT; id++)
        CHECK(strstr(text, hs_sopts[id].name) != NULL);
    CHECK(strstr(text, "      --max-interval BYTES ceiling") != NULL);
    free(text);
}

int main(void)
{
    test_rows();
    test_getopt_tables();
    test_values();
    test_help();
    return check_report();
}
