/* test_suppressions.c: the suppression rules' parser and matcher (src/common/suppressions.c). */
#include "check.h"
#include "suppressions.h"

#include <stdlib.h>
#include <string.h>

static void *alloc(size_t size, void *ctx)
{
    (void)ctx;
    return malloc(size ? size : 1);
}

static bool parse(const char *text, struct hs_supp_set *set, char *err, size_t cap)
{
    return hs_supp_parse(text, strlen(text), set, alloc, NULL, err, cap);
}

static void free_set(struct hs_supp_set *set)
{
    free(set->rules);
    free(set->text);
}

static void test_patterns(void)
{
    check_context("patterns");
    CHECK(hs_supp_pattern_matches("leak", "make_leak_now")); /* anywhere inside */
    CHECK(hs_supp_pattern_matches("make_*_now", "make_leak_now"));
    CHECK(hs_supp_pattern_matches("*", "x"));
    CHECK(hs_supp_pattern_matches("a*b*c", "xxaxbxxcxx"));
    CHECK(!hs_supp_pattern_matches("a*b*c", "xxaxcxxbxx"));
    CHECK(hs_supp_pattern_matches("^make", "make_leak"));
    CHECK(!hs_supp_pattern_matches("^leak", "make_leak"));
    CHECK(hs_supp_pattern_matches("leak$", "make_leak"));
    CHECK(!hs_supp_pattern_matches("make$", "make_leak"));
    CHECK(hs_supp_pattern_matches("^make_leak$", "make_leak"));
    CHECK(!hs_supp_pattern_matches("^make_leak$", "make_leak2"));
    CHECK(hs_supp_pattern_matches("^*leak$", "make_leak"));
    CHECK(hs_supp_pattern_matches("libc.so*", "/usr/lib/x86_64-linux-gnu/libc.so.6"));
    CHECK(!hs_supp_pattern_matches("libstdc++", "/usr/lib/libc.so.6"));
    CHECK(!hs_supp_pattern_matches("abc", ""));
    CHECK(hs_supp_pattern_matches("a**", "a"));
    /* A long name and a pattern that backtracks a lot: still a plain loop. */
    char name[4097];
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    CHECK(!hs_supp_pattern_matches("*a*a*a*a*b", name));
}

static void test_parse(void)
{
    check_context("parse");
    struct hs_supp_set set;
    char err[256];
    CHECK(parse("# comment\n\n  leak:make_leak  \r\nerror:  bad_free\t\nleak:x", &set, err,
                sizeof(err)));
    CHECK_EQ(set.count, 3);
    CHECK_STREQ(set.rules[0].pattern, "make_leak");
    CHECK_EQ(set.rules[0].kind, HS_SUPP_LEAK);
    CHECK_EQ(set.rules[0].line, 3);
    CHECK_STREQ(set.rules[1].pattern, "bad_free");
    CHECK_EQ(set.rules[1].kind, HS_SUPP_ERROR);
    CHECK_STREQ(set.rules[2].pattern, "x"); /* no newline at the end */
    CHECK_EQ(set.rules[2].line, 5);

    const char *names[] = {"", NULL, "/lib/libfoo.so", "main"};
    struct hs_supp_rule *r = hs_supp_match(&set, HS_SUPP_LEAK, names, 4);
    CHECK(r == NULL);
    const char *leak_names[] = {"make_leak", "/bin/prog"};
    r = hs_supp_match(&set, HS_SUPP_LEAK, leak_names, 2);
    CHECK(r == &set.rules[0]);
    CHECK(hs_supp_match(&set, HS_SUPP_ERROR, leak_names, 2) == NULL); /* kinds apart */
    hs_supp_count(r, 100);
    hs_supp_count(r, 20);
    CHECK_EQ(set.rules[0].hits, 2);
    CHECK_EQ(set.rules[0].bytes, 120);
    free_set(&set);

    CHECK(parse("", &set, err, sizeof(err)));
    CHECK_EQ(set.count, 0);
    free_set(&set);

    CHECK(!parse("leak:a\nleek:b\n", &set, err, sizeof(err)));
    CHECK_STREQ(err, "2: not a rule: 'leek:b' (expected leak:PATTERN or error:PATTERN, or a # "
                     "comment)");
    free_set(&set);
    CHECK(!parse("error:   \n", &set, err, sizeof(err)));
    CHECK_STREQ(err, "1: the rule has no pattern");
    free_set(&set);
    CHECK(!parse("leak\n", &set, err, sizeof(err)));
    free_set(&set);
}

int main(void)
{
    test_patterns();
    test_parse();
    return check_report();
}
