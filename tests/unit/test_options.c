/* test_options.c: unit tests of the malloc debug option parser (src/malloc_debug/options.c).
 *
 * Log lines are captured through hs_log_set_sink; each test compares the message body (the
 * part after "<prog>[<pid>] <tag>: ") with the exact text Android prints. A failed parse
 * must log exactly three lines: the error and the two usage lines.
 */
#include "check.h"
#include "log.h"
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEAPSCOPE_DOCDIR
#define HEAPSCOPE_DOCDIR "/usr/local/share/doc/heapscope"
#endif

#define USAGE1 "For malloc debug option descriptions go to:"
#define USAGE2                                                                                     \
    "  docs/malloc_debug.md in the heapscope sources, installed as " HEAPSCOPE_DOCDIR              \
    "/malloc_debug.md"

#define ALL_BITS ((uint32_t)((1u << 19) - 1))
#define GUARD_BITS (HS_OPT_PAGE_GUARD | HS_OPT_SAMPLE_GUARD | HS_OPT_SAMPLE_GUARD_RECOVER)

/* ---- log capture ---- */

#define MAX_LINES 8

static struct {
    int count;       /* lines logged since capture_reset() */
    int bad_framing; /* lines not of the form "<prog>[<pid>] <tag>: <body>\n", or too long */
    size_t longest;  /* longest line seen, newline included */
    char body[MAX_LINES][HS_LOG_LINE_MAX + 1];
} cap;

static void capture_reset(void)
{
    memset(&cap, 0, sizeof(cap));
}

static void capture_sink(const char *line, size_t len, void *ctx)
{
    (void)ctx;
    int i = cap.count++;
    if (len > cap.longest)
        cap.longest = len;
    if (len == 0 || len >= HS_LOG_LINE_MAX || line[len] != '\0' || strlen(line) != len ||
        line[len - 1] != '\n')
        cap.bad_framing++;
    if (i >= MAX_LINES)
        return;
    const char *close = strstr(line, "] ");
    const char *body = close ? strstr(close + 2, ": ") : NULL;
    if (body == NULL) {
        cap.bad_framing++;
        return;
    }
    body += 2;
    size_t n = (size_t)(line + len - body);
    if (n > 0 && body[n - 1] == '\n')
        n--;
    memcpy(cap.body[i], body, n);
    cap.body[i][n] = '\0';
}

/* ---- helpers ---- */

/* Context for failure messages: the options string, or a note when it is too long. */
static const char *ctx_of(const char *opts)
{
    return opts == NULL ? "(null)" : strlen(opts) < 200 ? opts : "(long options string)";
}

/* Expects `opts` to parse, with nothing logged. */
#define PARSE_OK(cfg, opts) expect_ok(__FILE__, __LINE__, (cfg), (opts))
static bool expect_ok(const char *file, int line, struct hs_md_config *cfg, const char *opts)
{
    check_context(ctx_of(opts));
    capture_reset();
    bool ok = hs_md_config_parse(cfg, opts);
    check_at(ok, file, line, "hs_md_config_parse returns true");
    check_eq_at((unsigned)cap.count, 0, file, line, "lines logged", "0");
    if (cap.count > 0)
        fprintf(stderr, "    first line: \"%s\"\n", cap.body[0]);
    check_context(NULL);
    return ok;
}

/* Expects `opts` to fail with exactly one error line "<prog>: <body>" and the usage. */
#define EXPECT_ERROR(opts, ...) expect_error(__FILE__, __LINE__, (opts), __VA_ARGS__)
static void expect_error(const char *file, int line, const char *opts, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void expect_error(const char *file, int line, const char *opts, const char *fmt, ...)
{
    char body[HS_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    char want[HS_LOG_LINE_MAX + 300];
    snprintf(want, sizeof(want), "%s: %s", hs_log_program_name(), body);

    struct hs_md_config cfg;
    check_context(ctx_of(opts));
    capture_reset();
    check_at(!hs_md_config_parse(&cfg, opts), file, line, "hs_md_config_parse returns false");
    check_eq_at((unsigned)cap.count, 3, file, line, "lines logged", "3");
    check_streq_at(cap.body[0], want, file, line, "error line", "expected");
    check_streq_at(cap.body[1], USAGE1, file, line, "usage line 1", "USAGE1");
    check_streq_at(cap.body[2], USAGE2, file, line, "usage line 2", "USAGE2");
    check_eq_at((unsigned)cap.bad_framing, 0, file, line, "badly framed lines", "0");
    check_context(NULL);
}

static size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

static char *fmt_opts(char *buf, size_t cap_, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static char *fmt_opts(char *buf, size_t cap_, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap_, fmt, ap);
    va_end(ap);
    return buf;
}

/* Checks every field of cfg against the state before any option. */
static void check_defaults(const struct hs_md_config *cfg)
{
    CHECK_EQ(cfg->options, 0);
    CHECK_EQ(cfg->front_guard_bytes, 0);
    CHECK_EQ(cfg->rear_guard_bytes, 0);
    CHECK_EQ(cfg->backtrace_frames, 0);
    CHECK(!cfg->backtrace_enabled);
    CHECK(!cfg->backtrace_enable_on_signal);
    CHECK_EQ(cfg->backtrace_min_size, 0);
    CHECK_EQ(cfg->backtrace_max_size, SIZE_MAX);
    CHECK_STREQ(cfg->backtrace_dump_prefix, HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX);
    CHECK_EQ(cfg->fill_on_alloc_bytes, 0);
    CHECK_EQ(cfg->fill_on_free_bytes, 0);
    CHECK_EQ(cfg->expand_alloc_bytes, 0);
    CHECK_EQ(cfg->free_track_allocations, 0);
    CHECK_EQ(cfg->free_track_backtrace_num_frames, 16);
    CHECK_EQ(cfg->leak_track_list_max, 1000);
    CHECK_EQ(cfg->record_allocs_num_entries, 0);
    CHECK_STREQ(cfg->record_allocs_file, HS_MD_DEFAULT_RECORD_ALLOCS_FILE);
    CHECK_EQ(cfg->front_guard_value, 0xaa);
    CHECK_EQ(cfg->rear_guard_value, 0xbb);
    CHECK_EQ(cfg->fill_alloc_value, 0xeb);
    CHECK_EQ(cfg->fill_free_value, 0xef);
    CHECK_EQ(cfg->page_guard_side, HS_MD_SIDE_REAR);
    CHECK_EQ(cfg->page_guard_quarantine_mib, 256);
    CHECK_EQ(cfg->sample_guard_rate, 0);
    CHECK(!cfg->sample_guard_adaptive);
    CHECK_EQ(cfg->sample_guard_slots, 64);
    CHECK_EQ(cfg->sample_guard_side, HS_MD_SIDE_RANDOM);
}

/* ---- defaults, empty strings, reset ---- */

static void test_empty_and_defaults(void)
{
    struct hs_md_config cfg;
    memset(&cfg, 0x5a, sizeof(cfg));
    PARSE_OK(&cfg, "");
    check_defaults(&cfg);

    memset(&cfg, 0x5a, sizeof(cfg));
    PARSE_OK(&cfg, " \t\n\v\f\r  ");
    check_defaults(&cfg);

    memset(&cfg, 0x5a, sizeof(cfg));
    PARSE_OK(&cfg, NULL); /* documented: NULL is the empty string */
    check_defaults(&cfg);

    /* A parse starts from the defaults, whatever an earlier parse left. */
    PARSE_OK(&cfg, "guard=64 backtrace=5 bt_en_on_sig=6 fill=3 free_track=7 record_allocs=9 "
                   "bt_dmp_pre=/x record_allocs_file=/y bt_sz=5 expand_alloc=4 verbose");
    CHECK(cfg.options != 0);
    PARSE_OK(&cfg, "");
    check_defaults(&cfg);

    /* Also after a failed parse. */
    EXPECT_ERROR("verbose leak_track bogus", "unknown option bogus");
    PARSE_OK(&cfg, "   ");
    check_defaults(&cfg);
}

/* ---- flags ---- */

struct flag_case {
    const char *name;
    uint32_t bit;
};

static const struct flag_case flag_cases[] = {
    {"backtrace_dump_on_exit", HS_OPT_BACKTRACE_DUMP_ON_EXIT},
    {"bt_dmp_on_ex", HS_OPT_BACKTRACE_DUMP_ON_EXIT},
    {"backtrace_full", HS_OPT_BACKTRACE_FULL},
    {"bt_full", HS_OPT_BACKTRACE_FULL},
    {"record_allocs_on_exit", HS_OPT_RECORD_ALLOCS_ON_EXIT},
    {"verify_pointers", HS_OPT_VERIFY_POINTERS},
    {"abort_on_error", HS_OPT_ABORT_ON_ERROR},
    {"verbose", HS_OPT_VERBOSE},
    {"check_unreachable_on_signal", HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL},
    {"log_allocator_stats_on_signal", HS_OPT_LOG_ALLOCATOR_STATS_ON_SIGNAL},
    {"log_allocator_stats_on_exit", HS_OPT_LOG_ALLOCATOR_STATS_ON_EXIT},
    {"sample_guard_recover", HS_OPT_SAMPLE_GUARD_RECOVER},
};

static void test_flags(void)
{
    struct hs_md_config cfg;
    char buf[256];
    for (size_t i = 0; i < sizeof(flag_cases) / sizeof(flag_cases[0]); i++) {
        const struct flag_case *c = &flag_cases[i];
        if (PARSE_OK(&cfg, c->name))
            CHECK_EQ(cfg.options, c->bit);
        /* An empty value is no value. */
        if (PARSE_OK(&cfg, fmt_opts(buf, sizeof(buf), "%s=", c->name)))
            CHECK_EQ(cfg.options, c->bit);
        if (PARSE_OK(&cfg, fmt_opts(buf, sizeof(buf), "  %s =  ", c->name)))
            CHECK_EQ(cfg.options, c->bit);
        EXPECT_ERROR(fmt_opts(buf, sizeof(buf), "%s=1", c->name),
                     "value set for option '%s' which does not take a value", c->name);
        EXPECT_ERROR(fmt_opts(buf, sizeof(buf), "%s = yes", c->name),
                     "value set for option '%s' which does not take a value", c->name);
    }
    /* A flag leaves every other field at its default. */
    PARSE_OK(&cfg, "verbose");
    cfg.options = 0;
    check_defaults(&cfg);

    /* Separators: any isspace character. */
    if (PARSE_OK(&cfg, "verbose\tleak_track\nabort_on_error\r\vverify_pointers\fbacktrace_full"))
        CHECK_EQ(cfg.options, HS_OPT_VERBOSE | HS_OPT_LEAK_TRACK | HS_OPT_ABORT_ON_ERROR |
                                  HS_OPT_VERIFY_POINTERS | HS_OPT_BACKTRACE_FULL);
}

/* ---- numeric options: defaults, ranges, every error form ---- */

typedef size_t (*getter)(const struct hs_md_config *);
#define GETTER(f)                                                                                  \
    static size_t get_##f(const struct hs_md_config *c)                                            \
    {                                                                                              \
        return (size_t)c->f;                                                                       \
    }
GETTER(front_guard_bytes)
GETTER(rear_guard_bytes)
GETTER(backtrace_frames)
GETTER(backtrace_min_size)
GETTER(backtrace_max_size)
GETTER(fill_on_alloc_bytes)
GETTER(fill_on_free_bytes)
GETTER(expand_alloc_bytes)
GETTER(leak_track_list_max)
GETTER(free_track_allocations)
GETTER(free_track_backtrace_num_frames)
GETTER(record_allocs_num_entries)
GETTER(page_guard_quarantine_mib)
GETTER(sample_guard_rate)
GETTER(sample_guard_slots)

struct num_case {
    const char *name;
    const char *alias; /* NULL: none */
    uint32_t bits;
    bool required;
    size_t def, min, max;
    getter get;  /* the field set to the value */
    bool round;  /* get() holds the value rounded up to 16 */
    getter get2; /* a second field set to the value, or NULL */
    bool round2; /* get2() holds it rounded up to 16 */
};

static const struct num_case num_cases[] = {
    {"front_guard", NULL, HS_OPT_FRONT_GUARD, false, 32, 1, 16384, get_front_guard_bytes, true,
     NULL, false},
    {"rear_guard", NULL, HS_OPT_REAR_GUARD, false, 32, 1, 16384, get_rear_guard_bytes, false, NULL,
     false},
    {"guard", NULL, HS_OPT_FRONT_GUARD | HS_OPT_REAR_GUARD, false, 32, 1, 16384,
     get_rear_guard_bytes, false, get_front_guard_bytes, true},
    {"backtrace", "bt", HS_OPT_BACKTRACE, false, 16, 1, 256, get_backtrace_frames, false, NULL,
     false},
    {"backtrace_enable_on_signal", "bt_en_on_sig", HS_OPT_BACKTRACE, false, 16, 1, 256,
     get_backtrace_frames, false, NULL, false},
    {"backtrace_size", "bt_sz", HS_OPT_BACKTRACE_SPECIFIC_SIZES, true, 0, 1, SIZE_MAX,
     get_backtrace_min_size, false, get_backtrace_max_size, false},
    {"backtrace_min_size", "bt_min_sz", HS_OPT_BACKTRACE_SPECIFIC_SIZES, true, 0, 1, SIZE_MAX,
     get_backtrace_min_size, false, NULL, false},
    {"backtrace_max_size", "bt_max_sz", HS_OPT_BACKTRACE_SPECIFIC_SIZES, true, 0, 1, SIZE_MAX,
     get_backtrace_max_size, false, NULL, false},
    {"fill_on_alloc", NULL, HS_OPT_FILL_ON_ALLOC, false, SIZE_MAX, 1, SIZE_MAX,
     get_fill_on_alloc_bytes, false, NULL, false},
    {"fill_on_free", NULL, HS_OPT_FILL_ON_FREE, false, SIZE_MAX, 1, SIZE_MAX,
     get_fill_on_free_bytes, false, NULL, false},
    {"fill", NULL, HS_OPT_FILL_ON_ALLOC | HS_OPT_FILL_ON_FREE, false, SIZE_MAX, 1, SIZE_MAX,
     get_fill_on_alloc_bytes, false, get_fill_on_free_bytes, false},
    {"expand_alloc", NULL, HS_OPT_EXPAND_ALLOC, false, 16, 1, 16384, get_expand_alloc_bytes, false,
     NULL, false},
    {"free_track", NULL, HS_OPT_FREE_TRACK | HS_OPT_FILL_ON_FREE, false, 100, 1, 16384,
     get_free_track_allocations, false, NULL, false},
    {"free_track_backtrace_num_frames", NULL, 0, false, 16, 0, 256,
     get_free_track_backtrace_num_frames, false, NULL, false},
    {"record_allocs", NULL, HS_OPT_RECORD_ALLOCS, false, 8000000, 1, 50000000,
     get_record_allocs_num_entries, false, NULL, false},
    {"leak_track", NULL, HS_OPT_LEAK_TRACK, false, 1000, 1, SIZE_MAX, get_leak_track_list_max,
     false, NULL, false},
    {"page_guard_quarantine", NULL, 0, false, 256, 0, 1048576, get_page_guard_quarantine_mib, false,
     NULL, false},
    {"sample_guard", NULL, HS_OPT_SAMPLE_GUARD, false, 5000, 1, 1000000000, get_sample_guard_rate,
     false, NULL, false},
    {"sample_guard_slots", NULL, 0, false, 64, 1, 4096, get_sample_guard_slots, false, NULL, false},
};

/* Parses "<name>=<value>" (value NULL: just "<name>") and checks the stored value. */
static void check_stored(const char *file, int line, const struct num_case *c, const char *name,
                         const char *value, size_t want)
{
    char opts[512];
    if (value)
        snprintf(opts, sizeof(opts), "%s=%s", name, value);
    else
        snprintf(opts, sizeof(opts), "%s", name);
    struct hs_md_config cfg;
    if (!expect_ok(file, line, &cfg, opts))
        return;
    check_context(opts);
    check_eq_at(c->get(&cfg), c->round ? round16(want) : want, file, line, "stored value",
                "expected");
    if (c->get2)
        check_eq_at(c->get2(&cfg), c->round2 ? round16(want) : want, file, line,
                    "second stored value", "expected");
    check_eq_at(cfg.options, c->bits, file, line, "options", "bits");
    check_context(NULL);
}
#define CHECK_STORED(c, name, value, want) check_stored(__FILE__, __LINE__, c, name, value, want)

static void test_numeric_option(const struct num_case *c, const char *name)
{
    char opts[512], v[64];

    /* No value, and the empty value, which counts as no value. */
    const char *no_value_forms[] = {"%s", "%s=", "%s =", " %s = ", "%s=\t"};
    for (size_t i = 0; i < sizeof(no_value_forms) / sizeof(no_value_forms[0]); i++) {
        fmt_opts(opts, sizeof(opts), no_value_forms[i], name);
        if (c->required)
            EXPECT_ERROR(opts, "bad value for option '%s'", name);
        else
            CHECK_STORED(c, opts, NULL, c->def);
    }

    /* Range edges. */
    CHECK_STORED(c, name, fmt_opts(v, sizeof(v), "%zu", c->min), c->min);
    CHECK_STORED(c, name, fmt_opts(v, sizeof(v), "%zu", c->min + 1), c->min + 1);
    if (c->min == 0)
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-1", name),
                     "bad value for option '%s', value cannot be negative: -1", name);
    else
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=%zu", name, c->min - 1),
                     "bad value for option '%s', value must be >= %zu: %zu", name, c->min,
                     c->min - 1);
    if (c->max == SIZE_MAX) {
        /* Any non-negative long is accepted; one more is out of strtol's range. */
        CHECK_STORED(c, name, "9223372036854775807", (size_t)LONG_MAX);
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=9223372036854775808", name),
                     "bad value for option '%s': Numerical result out of range", name);
    } else {
        CHECK_STORED(c, name, fmt_opts(v, sizeof(v), "%zu", c->max), c->max);
        CHECK_STORED(c, name, fmt_opts(v, sizeof(v), "%zu", c->max - 1), c->max - 1);
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=%zu", name, c->max + 1),
                     "bad value for option '%s', value must be <= %zu: %zu", name, c->max,
                     c->max + 1);
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=9223372036854775807", name),
                     "bad value for option '%s', value must be <= %zu: 9223372036854775807", name,
                     c->max);
    }

    /* strtol forms: sign, leading zeros. */
    CHECK_STORED(c, name, "+5", 5);
    CHECK_STORED(c, name, "0005", 5);
    /* "-0" is zero, not negative. */
    if (c->min == 0)
        CHECK_STORED(c, name, "-0", 0);
    else
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-0", name),
                     "bad value for option '%s', value must be >= %zu: 0", name, c->min);

    /* Every error form, with the name as typed. */
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-5", name),
                 "bad value for option '%s', value cannot be negative: -5", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s= -1", name),
                 "bad value for option '%s', value cannot be negative: -1", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=10x", name),
                 "bad value for option '%s', non space found after option: x", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=10xy leak_track", name),
                 "bad value for option '%s', non space found after option: xy", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=0x10", name),
                 "bad value for option '%s', non space found after option: x10", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=5=6", name),
                 "bad value for option '%s', non space found after option: =6", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=abc", name), "bad value for option '%s'", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-", name), "bad value for option '%s'", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=+", name), "bad value for option '%s'", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=99999999999999999999", name),
                 "bad value for option '%s': Numerical result out of range", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-99999999999999999999", name),
                 "bad value for option '%s': Numerical result out of range", name);
    /* Check order: range error before trailing characters, trailing characters before the
     * sign and the range checks. */
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=99999999999999999999x", name),
                 "bad value for option '%s': Numerical result out of range", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=-5x", name),
                 "bad value for option '%s', non space found after option: x", name);
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s=99999999x", name),
                 "bad value for option '%s', non space found after option: x", name);
    /* Whitespace after '=' is skipped, so the next word becomes the value. */
    EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "%s= verbose", name), "bad value for option '%s'",
                 name);
}

static void test_numeric_options(void)
{
    for (size_t i = 0; i < sizeof(num_cases) / sizeof(num_cases[0]); i++) {
        const struct num_case *c = &num_cases[i];
        test_numeric_option(c, c->name);
        if (c->alias)
            test_numeric_option(c, c->alias);
    }
}

/* ---- special behaviours ---- */

static void test_guards(void)
{
    struct hs_md_config cfg;
    static const size_t in[] = {1, 2, 15, 16, 17, 31, 32, 33, 100, 16368, 16369, 16383, 16384};
    static const size_t out[] = {16, 16, 16, 16, 32, 32, 32, 48, 112, 16368, 16384, 16384, 16384};
    char opts[64];
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        if (PARSE_OK(&cfg, fmt_opts(opts, sizeof(opts), "front_guard=%zu", in[i]))) {
            CHECK_EQ(cfg.front_guard_bytes, out[i]);
            CHECK_EQ(cfg.rear_guard_bytes, 0);
            CHECK_EQ(cfg.options, HS_OPT_FRONT_GUARD);
        }
        if (PARSE_OK(&cfg, fmt_opts(opts, sizeof(opts), "rear_guard=%zu", in[i]))) {
            CHECK_EQ(cfg.rear_guard_bytes, in[i]);
            CHECK_EQ(cfg.front_guard_bytes, 0);
            CHECK_EQ(cfg.options, HS_OPT_REAR_GUARD);
        }
        if (PARSE_OK(&cfg, fmt_opts(opts, sizeof(opts), "guard=%zu", in[i]))) {
            CHECK_EQ(cfg.front_guard_bytes, out[i]);
            CHECK_EQ(cfg.rear_guard_bytes, in[i]);
            CHECK_EQ(cfg.options, HS_OPT_FRONT_GUARD | HS_OPT_REAR_GUARD);
        }
    }
    if (PARSE_OK(&cfg, "front_guard=1 rear_guard=100")) {
        CHECK_EQ(cfg.front_guard_bytes, 16);
        CHECK_EQ(cfg.rear_guard_bytes, 100);
    }
    if (PARSE_OK(&cfg, "guard=40 rear_guard=8")) {
        CHECK_EQ(cfg.front_guard_bytes, 48);
        CHECK_EQ(cfg.rear_guard_bytes, 8);
    }
    if (PARSE_OK(&cfg, "guard")) {
        CHECK_EQ(cfg.front_guard_bytes, 32);
        CHECK_EQ(cfg.rear_guard_bytes, 32);
    }
}

/* page_guard[=rear|front] and sample_guard_side=rear|front|random: words, not numbers. */
static void test_guard_sides(void)
{
    struct hs_md_config cfg;
    static const char *const forms[] = {"page_guard", "page_guard=", " page_guard = "};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        if (PARSE_OK(&cfg, forms[i])) {
            CHECK_EQ(cfg.options, HS_OPT_PAGE_GUARD);
            CHECK_EQ(cfg.page_guard_side, HS_MD_SIDE_REAR);
        }
    }
    if (PARSE_OK(&cfg, "page_guard=rear"))
        CHECK_EQ(cfg.page_guard_side, HS_MD_SIDE_REAR);
    if (PARSE_OK(&cfg, "page_guard = front")) {
        CHECK_EQ(cfg.page_guard_side, HS_MD_SIDE_FRONT);
        CHECK_EQ(cfg.options, HS_OPT_PAGE_GUARD);
    }
    EXPECT_ERROR("page_guard=random", "bad value for option 'page_guard'");
    EXPECT_ERROR("page_guard=1", "bad value for option 'page_guard'");
    EXPECT_ERROR("page_guard=fronts", "bad value for option 'page_guard'");
    EXPECT_ERROR("page_guard=Front", "bad value for option 'page_guard'");

    if (PARSE_OK(&cfg, "sample_guard_side")) {
        CHECK_EQ(cfg.sample_guard_side, HS_MD_SIDE_RANDOM);
        CHECK_EQ(cfg.options, 0); /* it only tunes sample_guard */
    }
    if (PARSE_OK(&cfg, "sample_guard_side=rear"))
        CHECK_EQ(cfg.sample_guard_side, HS_MD_SIDE_REAR);
    if (PARSE_OK(&cfg, "sample_guard_side=front"))
        CHECK_EQ(cfg.sample_guard_side, HS_MD_SIDE_FRONT);
    if (PARSE_OK(&cfg, "sample_guard_side=random"))
        CHECK_EQ(cfg.sample_guard_side, HS_MD_SIDE_RANDOM);
    EXPECT_ERROR("sample_guard_side=left", "bad value for option 'sample_guard_side'");

    /* sample_guard alone: the default rate, kept within its budget; a rate given: exact. */
    if (PARSE_OK(&cfg, "sample_guard")) {
        CHECK_EQ(cfg.sample_guard_rate, 5000);
        CHECK(cfg.sample_guard_adaptive);
    }
    if (PARSE_OK(&cfg, "sample_guard=5000")) {
        CHECK_EQ(cfg.sample_guard_rate, 5000);
        CHECK(!cfg.sample_guard_adaptive);
    }

    if (PARSE_OK(&cfg, "sample_guard=1 sample_guard_slots=8 sample_guard_side=front "
                       "sample_guard_recover page_guard=front page_guard_quarantine=0")) {
        CHECK_EQ(cfg.options, GUARD_BITS);
        CHECK_EQ(cfg.sample_guard_rate, 1);
        CHECK_EQ(cfg.sample_guard_slots, 8);
        CHECK_EQ(cfg.sample_guard_side, HS_MD_SIDE_FRONT);
        CHECK_EQ(cfg.page_guard_side, HS_MD_SIDE_FRONT);
        CHECK_EQ(cfg.page_guard_quarantine_mib, 0);
    }
}

static void test_free_track_order(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "free_track")) {
        CHECK_EQ(cfg.options, HS_OPT_FREE_TRACK | HS_OPT_FILL_ON_FREE);
        CHECK_EQ(cfg.free_track_allocations, 100);
        CHECK_EQ(cfg.fill_on_free_bytes, SIZE_MAX);
        CHECK_EQ(cfg.fill_on_alloc_bytes, 0);
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 16);
    }
    if (PARSE_OK(&cfg, "free_track free_track_backtrace_num_frames=0")) {
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 0);
        CHECK_EQ(cfg.free_track_allocations, 100);
    }
    if (PARSE_OK(&cfg, "free_track_backtrace_num_frames=0 free_track"))
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 16);
    if (PARSE_OK(&cfg, "free_track_backtrace_num_frames=200 free_track=3"))
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 16);
    if (PARSE_OK(&cfg, "free_track=5 free_track_backtrace_num_frames=200")) {
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 200);
        CHECK_EQ(cfg.free_track_allocations, 5);
    }
    if (PARSE_OK(&cfg, "fill_on_free=10 free_track")) {
        CHECK_EQ(cfg.fill_on_free_bytes, SIZE_MAX);
        CHECK_EQ(cfg.options, HS_OPT_FREE_TRACK | HS_OPT_FILL_ON_FREE);
    }
    if (PARSE_OK(&cfg, "fill=10 free_track")) {
        CHECK_EQ(cfg.fill_on_free_bytes, SIZE_MAX);
        CHECK_EQ(cfg.fill_on_alloc_bytes, 10);
    }
    if (PARSE_OK(&cfg, "free_track fill_on_free=10"))
        CHECK_EQ(cfg.fill_on_free_bytes, 10);
    /* free_track_backtrace_num_frames alone sets no bit and no fill. */
    if (PARSE_OK(&cfg, "free_track_backtrace_num_frames=5")) {
        CHECK_EQ(cfg.options, 0);
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 5);
        CHECK_EQ(cfg.fill_on_free_bytes, 0);
    }
}

static void test_backtrace(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "backtrace=10")) {
        CHECK(cfg.backtrace_enabled);
        CHECK(!cfg.backtrace_enable_on_signal);
        CHECK_EQ(cfg.backtrace_frames, 10);
        CHECK_EQ(cfg.options, HS_OPT_BACKTRACE);
    }
    if (PARSE_OK(&cfg, "bt_en_on_sig=20")) {
        CHECK(!cfg.backtrace_enabled);
        CHECK(cfg.backtrace_enable_on_signal);
        CHECK_EQ(cfg.backtrace_frames, 20);
        CHECK_EQ(cfg.options, HS_OPT_BACKTRACE);
    }
    if (PARSE_OK(&cfg, "backtrace=10 backtrace_enable_on_signal")) {
        CHECK(cfg.backtrace_enabled);
        CHECK(cfg.backtrace_enable_on_signal);
        CHECK_EQ(cfg.backtrace_frames, 16);
    }
    if (PARSE_OK(&cfg, "bt_en_on_sig=20 bt=7")) {
        CHECK(cfg.backtrace_enabled);
        CHECK(cfg.backtrace_enable_on_signal);
        CHECK_EQ(cfg.backtrace_frames, 7);
    }
    if (PARSE_OK(&cfg, "backtrace=5 backtrace=7"))
        CHECK_EQ(cfg.backtrace_frames, 7);

    /* Specific sizes. */
    if (PARSE_OK(&cfg, "backtrace_size=1000")) {
        CHECK_EQ(cfg.backtrace_min_size, 1000);
        CHECK_EQ(cfg.backtrace_max_size, 1000);
        CHECK_EQ(cfg.options, HS_OPT_BACKTRACE_SPECIFIC_SIZES);
        CHECK(!cfg.backtrace_enabled);
    }
    if (PARSE_OK(&cfg, "bt_min_sz=10 bt_max_sz=20")) {
        CHECK_EQ(cfg.backtrace_min_size, 10);
        CHECK_EQ(cfg.backtrace_max_size, 20);
    }
    if (PARSE_OK(&cfg, "bt_sz=5 bt_max_sz=50")) {
        CHECK_EQ(cfg.backtrace_min_size, 5);
        CHECK_EQ(cfg.backtrace_max_size, 50);
    }
    if (PARSE_OK(&cfg, "bt_max_sz=50 bt_sz=5")) {
        CHECK_EQ(cfg.backtrace_min_size, 5);
        CHECK_EQ(cfg.backtrace_max_size, 5);
    }
    if (PARSE_OK(&cfg, "backtrace_min_size=300")) {
        CHECK_EQ(cfg.backtrace_min_size, 300);
        CHECK_EQ(cfg.backtrace_max_size, SIZE_MAX);
    }
    if (PARSE_OK(&cfg, "backtrace_max_size=300")) {
        CHECK_EQ(cfg.backtrace_min_size, 0);
        CHECK_EQ(cfg.backtrace_max_size, 300);
    }
    /* min > max is not an error (as on Android). */
    if (PARSE_OK(&cfg, "bt_min_sz=50 bt_max_sz=10")) {
        CHECK_EQ(cfg.backtrace_min_size, 50);
        CHECK_EQ(cfg.backtrace_max_size, 10);
    }
}

static void test_fill(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "fill=7")) {
        CHECK_EQ(cfg.fill_on_alloc_bytes, 7);
        CHECK_EQ(cfg.fill_on_free_bytes, 7);
        CHECK_EQ(cfg.options, HS_OPT_FILL_ON_ALLOC | HS_OPT_FILL_ON_FREE);
    }
    if (PARSE_OK(&cfg, "fill_on_alloc=3")) {
        CHECK_EQ(cfg.fill_on_alloc_bytes, 3);
        CHECK_EQ(cfg.fill_on_free_bytes, 0);
        CHECK_EQ(cfg.options, HS_OPT_FILL_ON_ALLOC);
    }
    if (PARSE_OK(&cfg, "fill_on_free=4")) {
        CHECK_EQ(cfg.fill_on_alloc_bytes, 0);
        CHECK_EQ(cfg.fill_on_free_bytes, 4);
        CHECK_EQ(cfg.options, HS_OPT_FILL_ON_FREE);
    }
    if (PARSE_OK(&cfg, "fill=7 fill_on_alloc=3")) {
        CHECK_EQ(cfg.fill_on_alloc_bytes, 3);
        CHECK_EQ(cfg.fill_on_free_bytes, 7);
    }
    if (PARSE_OK(&cfg, "expand_alloc=1024")) {
        CHECK_EQ(cfg.expand_alloc_bytes, 1024);
        CHECK_EQ(cfg.options, HS_OPT_EXPAND_ALLOC);
    }
    if (PARSE_OK(&cfg, "record_allocs=100 record_allocs_on_exit")) {
        CHECK_EQ(cfg.record_allocs_num_entries, 100);
        CHECK_EQ(cfg.options, HS_OPT_RECORD_ALLOCS | HS_OPT_RECORD_ALLOCS_ON_EXIT);
    }
}

/* ---- string options ---- */

static void test_strings(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "backtrace_dump_prefix=/data/x")) {
        CHECK_STREQ(cfg.backtrace_dump_prefix, "/data/x");
        CHECK_EQ(cfg.options, 0);
    }
    if (PARSE_OK(&cfg, "bt_dmp_pre = /a/b verbose")) {
        CHECK_STREQ(cfg.backtrace_dump_prefix, "/a/b");
        CHECK_EQ(cfg.options, HS_OPT_VERBOSE);
    }
    if (PARSE_OK(&cfg, "bt_dmp_pre=/a bt_dmp_pre="))
        CHECK_STREQ(cfg.backtrace_dump_prefix, HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX);
    if (PARSE_OK(&cfg, "backtrace_dump_prefix"))
        CHECK_STREQ(cfg.backtrace_dump_prefix, HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX);
    if (PARSE_OK(&cfg, "record_allocs_file=/tmp/r.txt")) {
        CHECK_STREQ(cfg.record_allocs_file, "/tmp/r.txt");
        CHECK_STREQ(cfg.backtrace_dump_prefix, HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX);
        CHECK_EQ(cfg.options, 0);
    }
    if (PARSE_OK(&cfg, "record_allocs_file=/a record_allocs_file="))
        CHECK_STREQ(cfg.record_allocs_file, HS_MD_DEFAULT_RECORD_ALLOCS_FILE);
    if (PARSE_OK(&cfg, "record_allocs_file"))
        CHECK_STREQ(cfg.record_allocs_file, HS_MD_DEFAULT_RECORD_ALLOCS_FILE);
    if (PARSE_OK(&cfg, "record_allocs_file=/a=b,c"))
        CHECK_STREQ(cfg.record_allocs_file, "/a=b,c");
    /* "-5" and numbers are just strings here. */
    if (PARSE_OK(&cfg, "record_allocs_file=-5"))
        CHECK_STREQ(cfg.record_allocs_file, "-5");

    /* Linux-specific: the value must fit PATH_MAX with its NUL. */
    static char opts[PATH_MAX + 64];
    static char value[PATH_MAX + 1];
    memset(value, 'p', PATH_MAX - 1);
    value[PATH_MAX - 1] = '\0';
    snprintf(opts, sizeof(opts), "record_allocs_file=%s verbose", value);
    if (PARSE_OK(&cfg, opts)) {
        CHECK_EQ(strlen(cfg.record_allocs_file), PATH_MAX - 1);
        CHECK_STREQ(cfg.record_allocs_file, value);
        CHECK_EQ(cfg.options, HS_OPT_VERBOSE);
    }
    memset(value, 'p', PATH_MAX);
    value[PATH_MAX] = '\0';
    snprintf(opts, sizeof(opts), "record_allocs_file=%s", value);
    EXPECT_ERROR(opts, "bad value for option 'record_allocs_file', value too long");
    snprintf(opts, sizeof(opts), "bt_dmp_pre=%s", value);
    EXPECT_ERROR(opts, "bad value for option 'bt_dmp_pre', value too long");
}

/* ---- grammar ---- */

static void test_whitespace_forms(void)
{
    struct hs_md_config cfg;
    static const char *const forms[] = {
        "backtrace=10",     "backtrace  =10",   "backtrace=  10",       "backtrace = 10",
        "backtrace\t=\t10", "  backtrace=10  ", "\nbacktrace\n=\n10\n",
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        if (PARSE_OK(&cfg, forms[i])) {
            CHECK_EQ(cfg.backtrace_frames, 10);
            CHECK_EQ(cfg.options, HS_OPT_BACKTRACE);
        }
    }
    if (PARSE_OK(&cfg, "backtrace = 10 leak_track   verbose")) {
        CHECK_EQ(cfg.backtrace_frames, 10);
        CHECK_EQ(cfg.options, HS_OPT_BACKTRACE | HS_OPT_LEAK_TRACK | HS_OPT_VERBOSE);
    }
    if (PARSE_OK(&cfg, "backtrace leak_track")) {
        CHECK_EQ(cfg.backtrace_frames, 16);
        CHECK_EQ(cfg.options, HS_OPT_BACKTRACE | HS_OPT_LEAK_TRACK);
    }
    /* A value needs '='; a second word is the next option. */
    EXPECT_ERROR("backtrace 10", "unknown option 10");
    EXPECT_ERROR("backtrace=10 20", "unknown option 20");
    EXPECT_ERROR("backtrace_size 10", "bad value for option 'backtrace_size'");
    EXPECT_ERROR("bt_min_sz\t=\t", "bad value for option 'bt_min_sz'");
    /* "front_guard=" then end of string: the default. */
    if (PARSE_OK(&cfg, "front_guard="))
        CHECK_EQ(cfg.front_guard_bytes, 32);
    if (PARSE_OK(&cfg, "front_guard= "))
        CHECK_EQ(cfg.front_guard_bytes, 32);
}

static void test_unknown_options(void)
{
    static const char *const names[] = {"BACKTRACE", "backtrace_", "back", "bt_", "guards",
                                        "Verbose",   "fill_on",    "b",    "-",   "\xff\xfe"};
    char opts[64];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        EXPECT_ERROR(names[i], "unknown option %s", names[i]);
        EXPECT_ERROR(fmt_opts(opts, sizeof(opts), "verbose %s=5 leak_track", names[i]),
                     "unknown option %s", names[i]);
    }
    /* Empty name: "=10", "=", "= x". */
    EXPECT_ERROR("=10", "unknown option ");
    EXPECT_ERROR("=", "unknown option ");
    EXPECT_ERROR("  = x", "unknown option ");
    EXPECT_ERROR("verbose =10", "value set for option 'verbose' which does not take a value");
}

static void test_stops_at_first_error(void)
{
    /* Later errors are not logged: exactly one error line plus the usage. */
    EXPECT_ERROR("bogus1 bogus2", "unknown option bogus1");
    EXPECT_ERROR("backtrace=0 verbose=1",
                 "bad value for option 'backtrace', value must be >= 1: 0");
    EXPECT_ERROR("verbose backtrace=0 leak_track=1 bogus",
                 "bad value for option 'backtrace', value must be >= 1: 0");
    EXPECT_ERROR("verbose=1 backtrace=0",
                 "value set for option 'verbose' which does not take a value");
    EXPECT_ERROR("leak_track guard=16385 bt=1000",
                 "bad value for option 'guard', value must be <= 16384: 16385");
}

static void test_usage_lines(void)
{
    capture_reset();
    hs_md_config_log_usage();
    CHECK_EQ(cap.count, 2);
    CHECK_STREQ(cap.body[0], USAGE1);
    CHECK_STREQ(cap.body[1], USAGE2);
    CHECK_EQ(cap.bad_framing, 0);
}

static void test_all_options_together(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "front_guard=20 rear_guard=24 guard backtrace=8 bt_en_on_sig=9 "
                       "bt_dmp_on_ex bt_dmp_pre=/p bt_full bt_sz=64 bt_min_sz=32 bt_max_sz=128 "
                       "fill_on_alloc=1 fill_on_free=2 fill=3 expand_alloc=4 free_track=5 "
                       "free_track_backtrace_num_frames=6 leak_track record_allocs=7 "
                       "record_allocs_file=/r record_allocs_on_exit verify_pointers "
                       "abort_on_error verbose check_unreachable_on_signal "
                       "log_allocator_stats_on_signal log_allocator_stats_on_exit")) {
        CHECK_EQ(cfg.options, ALL_BITS);
        CHECK_EQ(cfg.front_guard_bytes, 32);
        CHECK_EQ(cfg.rear_guard_bytes, 32);
        CHECK_EQ(cfg.backtrace_frames, 9);
        CHECK(cfg.backtrace_enabled);
        CHECK(cfg.backtrace_enable_on_signal);
        CHECK_STREQ(cfg.backtrace_dump_prefix, "/p");
        CHECK_EQ(cfg.backtrace_min_size, 32);
        CHECK_EQ(cfg.backtrace_max_size, 128);
        CHECK_EQ(cfg.fill_on_alloc_bytes, 3);
        CHECK_EQ(cfg.fill_on_free_bytes, SIZE_MAX);
        CHECK_EQ(cfg.expand_alloc_bytes, 4);
        CHECK_EQ(cfg.free_track_allocations, 5);
        CHECK_EQ(cfg.free_track_backtrace_num_frames, 6);
        CHECK_EQ(cfg.record_allocs_num_entries, 7);
        CHECK_STREQ(cfg.record_allocs_file, "/r");
    }
}

/* ---- robustness ---- */

static void test_errno_preserved(void)
{
    struct hs_md_config cfg;
    errno = EBADF;
    capture_reset();
    CHECK(!hs_md_config_parse(&cfg, "backtrace=99999999999999999999"));
    CHECK_EQ(errno, EBADF);
    errno = EBADF;
    CHECK(hs_md_config_parse(&cfg, "backtrace=10"));
    CHECK_EQ(errno, EBADF);
}

static void test_long_strings(void)
{
    enum { N = 10 * 1024 };
    static char s[N + 64];
    struct hs_md_config cfg;

    /* 10 KB of valid options. */
    s[0] = '\0';
    for (size_t len = 0; len + 20 < N;)
        len += (size_t)sprintf(s + len, "verbose leak_track ");
    if (PARSE_OK(&cfg, s))
        CHECK_EQ(cfg.options, HS_OPT_VERBOSE | HS_OPT_LEAK_TRACK);
    s[0] = '\0';
    for (size_t len = 0; len + 20 < N;)
        len += (size_t)sprintf(s + len, "backtrace = 16 ");
    if (PARSE_OK(&cfg, s))
        CHECK_EQ(cfg.backtrace_frames, 16);
    /* ... with an error at the very end. */
    strcat(s, "bogus");
    EXPECT_ERROR(s, "unknown option bogus");

    /* A 10 KB name: the error line is truncated but still one bounded line. */
    memset(s, 'a', N);
    s[N] = '\0';
    check_context("10 KB name");
    capture_reset();
    CHECK(!hs_md_config_parse(&cfg, s));
    CHECK_EQ(cap.count, 3);
    CHECK_EQ(cap.bad_framing, 0);
    CHECK(cap.longest < HS_LOG_LINE_MAX);
    char want[64];
    snprintf(want, sizeof(want), "%s: unknown option aaaa", hs_log_program_name());
    CHECK(strncmp(cap.body[0], want, strlen(want)) == 0);
    CHECK_STREQ(cap.body[2], USAGE2);

    /* A 10 KB name given a value. */
    strcpy(s + N, "=5");
    capture_reset();
    CHECK(!hs_md_config_parse(&cfg, s));
    CHECK_EQ(cap.count, 3);
    CHECK_EQ(cap.bad_framing, 0);

    /* Values: 10 KB of digits (out of range), leading zeros (valid), trailing garbage. */
    strcpy(s, "backtrace=");
    memset(s + 10, '1', N);
    s[N + 10] = '\0';
    EXPECT_ERROR(s, "bad value for option 'backtrace': Numerical result out of range");
    memset(s + 10, '0', N);
    strcpy(s + N + 10, "5");
    if (PARSE_OK(&cfg, s))
        CHECK_EQ(cfg.backtrace_frames, 5);
    strcpy(s, "backtrace=5");
    memset(s + 11, 'x', N);
    s[N + 11] = '\0';
    check_context("10 KB trailing garbage");
    capture_reset();
    CHECK(!hs_md_config_parse(&cfg, s));
    CHECK_EQ(cap.count, 3);
    CHECK_EQ(cap.bad_framing, 0);
    CHECK(cap.longest < HS_LOG_LINE_MAX);
    snprintf(want, sizeof(want), "%s: bad value for option 'backtrace', non space found after",
             hs_log_program_name());
    CHECK(strncmp(cap.body[0], want, strlen(want)) == 0);

    /* 10 KB of whitespace only. */
    memset(s, ' ', N);
    s[N] = '\0';
    if (PARSE_OK(&cfg, s))
        CHECK_EQ(cfg.options, 0);
    check_context(NULL);
}

/* Inputs from a 60 s fuzz/fuzz_options.c run (2.8 M executions, no crash): shapes of the
 * corpus it grew, kept as regressions. */
static void test_fuzz_regressions(void)
{
    struct hs_md_config cfg;
    if (PARSE_OK(&cfg, "\t\r "))
        CHECK_EQ(cfg.options, 0);
    /* Control characters other than whitespace are part of a name. */
    EXPECT_ERROR("\x03\x03"
                 "0",
                 "unknown option \x03\x03"
                 "0");
    EXPECT_ERROR("\xb7=", "unknown option \xb7");
    EXPECT_ERROR("b\x8ar ", "unknown option b\x8ar");
    /* 0xa0 (no-break space in Latin-1) is not whitespace in the C locale. */
    EXPECT_ERROR("bt=5\xa0", "bad value for option 'bt', non space found after option: \xa0");
    EXPECT_ERROR("=\t\t\t\t3", "unknown option ");
    EXPECT_ERROR("btbt\vbt", "unknown option btbt");
    EXPECT_ERROR("fillfill", "unknown option fillfill");
    EXPECT_ERROR("bt=r", "bad value for option 'bt'");
    EXPECT_ERROR("_=bz-zbt\"x", "unknown option _");
    /* The string ends at the first NUL, as the fuzzer's copy does. */
    if (PARSE_OK(&cfg, "verbose\0bogus"))
        CHECK_EQ(cfg.options, HS_OPT_VERBOSE);
}

int main(void)
{
    hs_log_init("malloc_debug");
    hs_log_set_sink(capture_sink, NULL);

    test_empty_and_defaults();
    test_flags();
    test_numeric_options();
    test_guards();
    test_guard_sides();
    test_free_track_order();
    test_backtrace();
    test_fill();
    test_strings();
    test_whitespace_forms();
    test_unknown_options();
    test_stops_at_first_error();
    test_usage_lines();
    test_all_options_together();
    test_errno_preserved();
    test_long_strings();
    test_fuzz_regressions();

    hs_log_set_sink(NULL, NULL);
    return check_report();
}
