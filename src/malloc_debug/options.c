/* options.c: the malloc debug option table and the parser for LIBC_DEBUG_MALLOC_OPTIONS.
 *
 * Every option is one row of hs_md_options[] (name, alias, value kind, bits, default, range,
 * target). One generic loop tokenizes the string, finds the row and applies it; the few
 * options with side effects (guard rounding, "guard" and "fill" setting two values,
 * "free_track" turning on fill_on_free, "backtrace_size" setting min and max) have small
 * setters named in their rows.
 *
 * Grammar (Android's): options are separated by whitespace; a name runs to whitespace, '='
 * or the end; whitespace may surround '='; a value runs to whitespace or the end, and an
 * empty value is no value. Numbers are base 10 through strtol. Parsing stops at the first
 * error, which is logged with the two usage lines (one report, framed so it stays together).
 *
 * Runs inside the first malloc call of the process: no allocation, no stdio, no ctype
 * tables (whitespace is the C locale's six characters). Not thread-safe by itself (the
 * caller parses once, under its init lock). errno is preserved.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrordesc_np */
#endif
#include "options.h"

#include "errno_text.h"
#include "format.h"
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEAPSCOPE_DOCDIR
#define HEAPSCOPE_DOCDIR "/usr/local/share/doc/heapscope"
#endif

/* Defaults and limits (Android's values). */
#define HS_MD_GUARD_ALIGN 16 /* front guard keeps the user pointer 16-byte aligned */
#define HS_MD_DEFAULT_GUARD_BYTES 32
#define HS_MD_MAX_GUARD_BYTES 16384
#define HS_MD_DEFAULT_BACKTRACE_FRAMES 16
#define HS_MD_MAX_BACKTRACE_FRAMES 256
#define HS_MD_DEFAULT_EXPAND_BYTES 16
#define HS_MD_MAX_EXPAND_BYTES 16384
#define HS_MD_DEFAULT_FREE_TRACK_ALLOCATIONS 100
#define HS_MD_MAX_FREE_TRACK_ALLOCATIONS 16384
/* heapscope's own: leak_track=N lists N blocks one by one (Android lists every one). */
#define HS_MD_DEFAULT_LEAK_TRACK_LIST_MAX 1000
#define HS_MD_DEFAULT_RECORD_ALLOCS 8000000
#define HS_MD_MAX_RECORD_ALLOCS 50000000

_Static_assert(sizeof(((struct hs_md_config *)0)->backtrace_dump_prefix) == PATH_MAX,
               "string options are PATH_MAX buffers");
_Static_assert(sizeof(((struct hs_md_config *)0)->record_allocs_file) == PATH_MAX,
               "string options are PATH_MAX buffers");
_Static_assert(sizeof(((struct hs_md_config *)0)->suppressions) == PATH_MAX,
               "string options are PATH_MAX buffers");

enum hs_md_value_kind {
    HS_MD_VALUE_NONE,     /* a flag: giving a value is an error */
    HS_MD_VALUE_OPTIONAL, /* a number; no value means the row's default */
    HS_MD_VALUE_REQUIRED, /* a number that must be given */
    HS_MD_VALUE_STRING,   /* a path; no value means the row's default string */
    HS_MD_VALUE_WORD,     /* one of the row's words, stored as its index; no value: `def` */
};

/* One option. `field` is the offset of the size_t (numbers) or char[PATH_MAX] (strings)
 * the value is stored in; a number row with a setter stores through the setter instead. */
struct hs_md_option {
    const char *name;
    const char *alias; /* NULL when there is none */
    enum hs_md_value_kind kind;
    uint32_t bits;   /* HS_OPT_* bits set once the option is accepted */
    size_t def;      /* number given when the value is empty (OPTIONAL) */
    size_t min, max; /* accepted range, inclusive (OPTIONAL, REQUIRED) */
    size_t field;
    void (*set)(struct hs_md_config *cfg, size_t value);
    const char *def_str;      /* value when the string is empty (STRING) */
    const char *const *words; /* the accepted words, NULL-terminated (WORD) */
};

static size_t hs_md_round_guard(size_t n)
{
    return (n + HS_MD_GUARD_ALIGN - 1) & ~(size_t)(HS_MD_GUARD_ALIGN - 1);
}

static void hs_md_set_front_guard(struct hs_md_config *cfg, size_t n)
{
    cfg->front_guard_bytes = hs_md_round_guard(n);
}

static void hs_md_set_guard(struct hs_md_config *cfg, size_t n)
{
    cfg->rear_guard_bytes = n;
    cfg->front_guard_bytes = hs_md_round_guard(n);
}

static void hs_md_set_backtrace(struct hs_md_config *cfg, size_t n)
{
    cfg->backtrace_enabled = true;
    cfg->backtrace_frames = n;
}

static void hs_md_set_backtrace_on_signal(struct hs_md_config *cfg, size_t n)
{
    cfg->backtrace_enable_on_signal = true;
    cfg->backtrace_frames = n;
}

static void hs_md_set_backtrace_size(struct hs_md_config *cfg, size_t n)
{
    cfg->backtrace_min_size = n;
    cfg->backtrace_max_size = n;
}

static void hs_md_set_fill(struct hs_md_config *cfg, size_t n)
{
    cfg->fill_on_alloc_bytes = n;
    cfg->fill_on_free_bytes = n;
}

/* free_track implies fill_on_free of the whole allocation and resets the free backtrace
 * depth, overriding earlier fill_on_free / free_track_backtrace_num_frames (order matters). */
static void hs_md_set_free_track(struct hs_md_config *cfg, size_t n)
{
    cfg->free_track_allocations = n;
    cfg->fill_on_free_bytes = SIZE_MAX;
    cfg->free_track_backtrace_num_frames = HS_MD_DEFAULT_BACKTRACE_FRAMES;
}

/* sample_guard without a value (the row's default, 0) is the default rate, kept within a cost
 * budget (sample_budget.h); a value given is used as it is. */
static void hs_md_set_sample_guard(struct hs_md_config *cfg, size_t n)
{
    cfg->sample_guard_adaptive = n == 0;
    cfg->sample_guard_rate = n != 0 ? n : HS_MD_DEFAULT_SAMPLE_GUARD_RATE;
}

#define HS_MD_FIELD(f) offsetof(struct hs_md_config, f)

#define HS_MD_FLAG(name, alias, bits)                                                              \
    {                                                                                              \
        name, alias, HS_MD_VALUE_NONE, bits, 0, 0, 0, 0, NULL, NULL, NULL                          \
    }
#define HS_MD_NUMBER(name, alias, kind, bits, def, min, max, f)                                    \
    {                                                                                              \
        name, alias, kind, bits, def, min, max, HS_MD_FIELD(f), NULL, NULL, NULL                   \
    }
#define HS_MD_NUMBER_SET(name, alias, kind, bits, def, min, max, setter)                           \
    {                                                                                              \
        name, alias, kind, bits, def, min, max, 0, setter, NULL, NULL                              \
    }
#define HS_MD_STRING(name, alias, f, def_str)                                                      \
    {                                                                                              \
        name, alias, HS_MD_VALUE_STRING, 0, 0, 0, 0, HS_MD_FIELD(f), NULL, def_str, NULL           \
    }
#define HS_MD_WORD(name, bits, words, def, f)                                                      \
    {                                                                                              \
        name, NULL, HS_MD_VALUE_WORD, bits, def, 0, 0, HS_MD_FIELD(f), NULL, NULL, words           \
    }

#define OPT HS_MD_VALUE_OPTIONAL
#define REQ HS_MD_VALUE_REQUIRED

/* The words of the side options, in enum hs_md_guard_side order. */
static const char *const hs_md_page_guard_sides[] = {"rear", "front", NULL};
static const char *const hs_md_sample_guard_sides[] = {"rear", "front", "random", NULL};

static const struct hs_md_option hs_md_options[] = {
    HS_MD_NUMBER_SET("front_guard", NULL, OPT, HS_OPT_FRONT_GUARD, HS_MD_DEFAULT_GUARD_BYTES, 1,
                     HS_MD_MAX_GUARD_BYTES, hs_md_set_front_guard),
    HS_MD_NUMBER("rear_guard", NULL, OPT, HS_OPT_REAR_GUARD, HS_MD_DEFAULT_GUARD_BYTES, 1,
                 HS_MD_MAX_GUARD_BYTES, rear_guard_bytes),
    HS_MD_NUMBER_SET("guard", NULL, OPT, HS_OPT_FRONT_GUARD | HS_OPT_REAR_GUARD,
                     HS_MD_DEFAULT_GUARD_BYTES, 1, HS_MD_MAX_GUARD_BYTES, hs_md_set_guard),

    HS_MD_NUMBER_SET("backtrace", "bt", OPT, HS_OPT_BACKTRACE, HS_MD_DEFAULT_BACKTRACE_FRAMES, 1,
                     HS_MD_MAX_BACKTRACE_FRAMES, hs_md_set_backtrace),
    HS_MD_NUMBER_SET("backtrace_enable_on_signal", "bt_en_on_sig", OPT, HS_OPT_BACKTRACE,
                     HS_MD_DEFAULT_BACKTRACE_FRAMES, 1, HS_MD_MAX_BACKTRACE_FRAMES,
                     hs_md_set_backtrace_on_signal),
    HS_MD_FLAG("backtrace_dump_on_exit", "bt_dmp_on_ex", HS_OPT_BACKTRACE_DUMP_ON_EXIT),
    HS_MD_STRING("backtrace_dump_prefix", "bt_dmp_pre", backtrace_dump_prefix,
                 HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX),
    HS_MD_FLAG("backtrace_full", "bt_full", HS_OPT_BACKTRACE_FULL),
    HS_MD_NUMBER_SET("backtrace_size", "bt_sz", REQ, HS_OPT_BACKTRACE_SPECIFIC_SIZES, 0, 1,
                     SIZE_MAX, hs_md_set_backtrace_size),
    HS_MD_NUMBER("backtrace_min_size", "bt_min_sz", REQ, HS_OPT_BACKTRACE_SPECIFIC_SIZES, 0, 1,
                 SIZE_MAX, backtrace_min_size),
    HS_MD_NUMBER("backtrace_max_size", "bt_max_sz", REQ, HS_OPT_BACKTRACE_SPECIFIC_SIZES, 0, 1,
                 SIZE_MAX, backtrace_max_size),

    HS_MD_NUMBER("fill_on_alloc", NULL, OPT, HS_OPT_FILL_ON_ALLOC, SIZE_MAX, 1, SIZE_MAX,
                 fill_on_alloc_bytes),
    HS_MD_NUMBER("fill_on_free", NULL, OPT, HS_OPT_FILL_ON_FREE, SIZE_MAX, 1, SIZE_MAX,
                 fill_on_free_bytes),
    HS_MD_NUMBER_SET("fill", NULL, OPT, HS_OPT_FILL_ON_ALLOC | HS_OPT_FILL_ON_FREE, SIZE_MAX, 1,
                     SIZE_MAX, hs_md_set_fill),
    HS_MD_NUMBER("expand_alloc", NULL, OPT, HS_OPT_EXPAND_ALLOC, HS_MD_DEFAULT_EXPAND_BYTES, 1,
                 HS_MD_MAX_EXPAND_BYTES, expand_alloc_bytes),

    HS_MD_NUMBER_SET("free_track", NULL, OPT, HS_OPT_FREE_TRACK | HS_OPT_FILL_ON_FREE,
                     HS_MD_DEFAULT_FREE_TRACK_ALLOCATIONS, 1, HS_MD_MAX_FREE_TRACK_ALLOCATIONS,
                     hs_md_set_free_track),
    HS_MD_NUMBER("free_track_backtrace_num_frames", NULL, OPT, 0, HS_MD_DEFAULT_BACKTRACE_FRAMES, 0,
                 HS_MD_MAX_BACKTRACE_FRAMES, free_track_backtrace_num_frames),
    HS_MD_NUMBER("leak_track", NULL, OPT, HS_OPT_LEAK_TRACK, HS_MD_DEFAULT_LEAK_TRACK_LIST_MAX, 1,
                 SIZE_MAX, leak_track_list_max),

    HS_MD_NUMBER("record_allocs", NULL, OPT, HS_OPT_RECORD_ALLOCS, HS_MD_DEFAULT_RECORD_ALLOCS, 1,
                 HS_MD_MAX_RECORD_ALLOCS, record_allocs_num_entries),
    HS_MD_STRING("record_allocs_file", NULL, record_allocs_file, HS_MD_DEFAULT_RECORD_ALLOCS_FILE),
    HS_MD_FLAG("record_allocs_on_exit", NULL, HS_OPT_RECORD_ALLOCS_ON_EXIT),

    HS_MD_STRING("suppressions", NULL, suppressions, ""),

    HS_MD_FLAG("verify_pointers", NULL, HS_OPT_VERIFY_POINTERS),
    HS_MD_FLAG("abort_on_error", NULL, HS_OPT_ABORT_ON_ERROR),
    HS_MD_FLAG("verbose", NULL, HS_OPT_VERBOSE),
    HS_MD_FLAG("check_unreachable_on_signal", NULL, HS_OPT_CHECK_UNREACHABLE_ON_SIGNAL),
    HS_MD_FLAG("log_allocator_stats_on_signal", NULL, HS_OPT_LOG_ALLOCATOR_STATS_ON_SIGNAL),
    HS_MD_FLAG("log_allocator_stats_on_exit", NULL, HS_OPT_LOG_ALLOCATOR_STATS_ON_EXIT),

    /* heapscope's own: guarded memory, caught at the faulting access (docs/malloc_debug.md). */
    HS_MD_WORD("page_guard", HS_OPT_PAGE_GUARD, hs_md_page_guard_sides, HS_MD_SIDE_REAR,
               page_guard_side),
    HS_MD_NUMBER("page_guard_quarantine", NULL, OPT, 0, HS_MD_DEFAULT_PAGE_GUARD_QUARANTINE_MIB, 0,
                 HS_MD_MAX_PAGE_GUARD_QUARANTINE_MIB, page_guard_quarantine_mib),
    HS_MD_NUMBER_SET("sample_guard", NULL, OPT, HS_OPT_SAMPLE_GUARD, 0, 1,
                     HS_MD_MAX_SAMPLE_GUARD_RATE, hs_md_set_sample_guard),
    HS_MD_NUMBER("sample_guard_slots", NULL, OPT, 0, HS_MD_DEFAULT_SAMPLE_GUARD_SLOTS, 1,
                 HS_MD_MAX_SAMPLE_GUARD_SLOTS, sample_guard_slots),
    HS_MD_WORD("sample_guard_side", 0, hs_md_sample_guard_sides, HS_MD_SIDE_RANDOM,
               sample_guard_side),
    HS_MD_FLAG("sample_guard_recover", NULL, HS_OPT_SAMPLE_GUARD_RECOVER),
};

#undef OPT
#undef REQ

/* A piece of the options string: not NUL-terminated. */
struct hs_md_token {
    const char *p;
    size_t len;
};

/* Length to print for a token: log lines are truncated anyway, and %.*s takes an int. */
static int hs_md_print_len(struct hs_md_token t)
{
    return t.len > HS_LOG_LINE_MAX ? HS_LOG_LINE_MAX : (int)t.len;
}

/* Logs one error line (each format starts with "%s: " for the program name). It opens a log
 * report (see log.h) that hs_md_config_parse closes after the usage lines, so the error and
 * the usage stay together even when several threads log. */
static void hs_md_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void hs_md_error(const char *fmt, ...)
{
    char msg[HS_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    hs_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hs_log_begin();
    hs_log("%s", msg);
}

/* isspace() in the C locale (as bionic's ASCII-only ctype). Written out because isspace
 * reads a thread-local table that glibc sets up in __libc_early_init, which may not have
 * run at the first malloc, and because a later setlocale could otherwise change the grammar
 * (0xa0 is a space in Latin-1). */
static bool hs_md_is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r'); /* \t \n \v \f \r */
}

/* Reads the next "name[ = value]" from *cur and advances *cur past it. Returns false when
 * only whitespace is left. An absent or empty value comes back with len 0. */
static bool hs_md_next_option(const char **cur, struct hs_md_token *name, struct hs_md_token *value)
{
    const char *s = *cur;
    while (hs_md_is_space(*s))
        s++;
    if (*s == '\0') {
        *cur = s;
        return false;
    }
    name->p = s;
    while (*s != '\0' && *s != '=' && !hs_md_is_space(*s))
        s++;
    name->len = (size_t)(s - name->p);

    while (hs_md_is_space(*s))
        s++;
    value->p = s;
    value->len = 0;
    if (*s == '=') {
        s++;
        while (hs_md_is_space(*s))
            s++;
        value->p = s;
        while (*s != '\0' && !hs_md_is_space(*s))
            s++;
        value->len = (size_t)(s - value->p);
    }
    *cur = s;
    return true;
}

static bool hs_md_token_is(struct hs_md_token t, const char *word)
{
    return word != NULL && strlen(word) == t.len && memcmp(t.p, word, t.len) == 0;
}

static const struct hs_md_option *hs_md_find_option(struct hs_md_token name)
{
    for (size_t i = 0; i < sizeof(hs_md_options) / sizeof(hs_md_options[0]); i++) {
        const struct hs_md_option *o = &hs_md_options[i];
        if (hs_md_token_is(name, o->name) || hs_md_token_is(name, o->alias))
            return o;
    }
    return NULL;
}

/* Parses value (an empty one is an error) as a base-10 number in [min, max] for the option
 * spelled `name`; stores it in *out. Logs the error and returns false when it is not one.
 * Checks, in Android's order: strtol range error, no digits, trailing characters, sign,
 * min, max (compared as size_t once known non-negative).
 *
 * strtol reads straight from the options string: the value has no leading space and ends at
 * whitespace or NUL, and strtol stops at the first non-digit, so it never reads past it. */
static bool hs_md_parse_number(struct hs_md_token name, struct hs_md_token value, size_t min,
                               size_t max, size_t *out)
{
    int nlen = hs_md_print_len(name);
    const char *prog = hs_log_program_name();
    /* A value that cannot start a number has no digits. Checked before strtol so that its
     * locale-dependent skipping of leading spaces never applies. */
    char c = value.len != 0 ? value.p[0] : '\0';
    if (!(c == '+' || c == '-' || (c >= '0' && c <= '9'))) {
        hs_md_error("%s: bad value for option '%.*s'", prog, nlen, name.p);
        return false;
    }
    char *end;
    errno = 0;
    long v = strtol(value.p, &end, 10);
    if (errno != 0) {
        hs_md_error("%s: bad value for option '%.*s': %s", prog, nlen, name.p,
                    hs_errno_text(errno));
        return false;
    }
    if (end == value.p) {
        hs_md_error("%s: bad value for option '%.*s'", prog, nlen, name.p);
        return false;
    }
    const char *value_end = value.p + value.len;
    if (end != value_end) {
        struct hs_md_token rest = {end, (size_t)(value_end - end)};
        hs_md_error("%s: bad value for option '%.*s', non space found after option: %.*s", prog,
                    nlen, name.p, hs_md_print_len(rest), rest.p);
        return false;
    }
    if (v < 0) {
        hs_md_error("%s: bad value for option '%.*s', value cannot be negative: %ld", prog, nlen,
                    name.p, v);
        return false;
    }
    if ((size_t)v < min) {
        hs_md_error("%s: bad value for option '%.*s', value must be >= %zu: %ld", prog, nlen,
                    name.p, min, v);
        return false;
    }
    if ((size_t)v > max) {
        hs_md_error("%s: bad value for option '%.*s', value must be <= %zu: %ld", prog, nlen,
                    name.p, max, v);
        return false;
    }
    *out = (size_t)v;
    return true;
}

/* Stores a string option. Linux-specific check (Android's std::string has no limit): the
 * value must fit the PATH_MAX buffer with its NUL, else "value too long". */
static bool hs_md_set_string(struct hs_md_config *cfg, const struct hs_md_option *o,
                             struct hs_md_token name, struct hs_md_token value)
{
    char *dst = (char *)cfg + o->field;
    if (value.len == 0) {
        size_t n = strlen(o->def_str);
        memcpy(dst, o->def_str, n + 1);
        return true;
    }
    if (value.len > PATH_MAX - 1) {
        hs_md_error("%s: bad value for option '%.*s', value too long", hs_log_program_name(),
                    hs_md_print_len(name), name.p);
        return false;
    }
    memcpy(dst, value.p, value.len);
    dst[value.len] = '\0';
    return true;
}

/* Stores the index of the row's word that value spells; no value stores the row's default.
 * Any other word is a bad value (Android's message for a value that is not a number). */
static bool hs_md_set_word(struct hs_md_config *cfg, const struct hs_md_option *o,
                           struct hs_md_token name, struct hs_md_token value)
{
    size_t *dst = (size_t *)((char *)cfg + o->field);
    if (value.len == 0) {
        *dst = o->def;
        return true;
    }
    for (size_t i = 0; o->words[i] != NULL; i++) {
        if (hs_md_token_is(value, o->words[i])) {
            *dst = i;
            return true;
        }
    }
    hs_md_error("%s: bad value for option '%.*s'", hs_log_program_name(), hs_md_print_len(name),
                name.p);
    return false;
}

/* Applies one option found in the table. Logs and returns false on a bad value; the
 * option's bits are set only when it is accepted. */
static bool hs_md_apply(struct hs_md_config *cfg, const struct hs_md_option *o,
                        struct hs_md_token name, struct hs_md_token value)
{
    switch (o->kind) {
    case HS_MD_VALUE_NONE:
        if (value.len != 0) {
            hs_md_error("%s: value set for option '%.*s' which does not take a value",
                        hs_log_program_name(), hs_md_print_len(name), name.p);
            return false;
        }
        break;
    case HS_MD_VALUE_STRING:
        if (!hs_md_set_string(cfg, o, name, value))
            return false;
        break;
    case HS_MD_VALUE_WORD:
        if (!hs_md_set_word(cfg, o, name, value))
            return false;
        break;
    case HS_MD_VALUE_OPTIONAL:
    case HS_MD_VALUE_REQUIRED: {
        size_t n = o->def;
        if ((o->kind == HS_MD_VALUE_REQUIRED || value.len != 0) &&
            !hs_md_parse_number(name, value, o->min, o->max, &n))
            return false;
        if (o->set != NULL)
            o->set(cfg, n);
        else
            *(size_t *)((char *)cfg + o->field) = n;
        break;
    }
    }
    cfg->options |= o->bits;
    return true;
}

/* The state before any option: everything off, the fixed fill/guard byte values and the
 * default paths. free_track_backtrace_num_frames starts at its default of 16 (free_track
 * sets it to 16 again when parsed); the options that only tune another one
 * (page_guard_quarantine, sample_guard_slots, sample_guard_side) start at their defaults. */
static void hs_md_config_reset(struct hs_md_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->backtrace_min_size = 0;
    cfg->backtrace_max_size = SIZE_MAX;
    cfg->free_track_backtrace_num_frames = HS_MD_DEFAULT_BACKTRACE_FRAMES;
    cfg->leak_track_list_max = HS_MD_DEFAULT_LEAK_TRACK_LIST_MAX;
    cfg->page_guard_quarantine_mib = HS_MD_DEFAULT_PAGE_GUARD_QUARANTINE_MIB;
    cfg->sample_guard_slots = HS_MD_DEFAULT_SAMPLE_GUARD_SLOTS;
    cfg->sample_guard_side = HS_MD_SIDE_RANDOM;
    memcpy(cfg->backtrace_dump_prefix, HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX,
           sizeof(HS_MD_DEFAULT_BACKTRACE_DUMP_PREFIX));
    memcpy(cfg->record_allocs_file, HS_MD_DEFAULT_RECORD_ALLOCS_FILE,
           sizeof(HS_MD_DEFAULT_RECORD_ALLOCS_FILE));
    cfg->front_guard_value = 0xaa;
    cfg->rear_guard_value = 0xbb;
    cfg->fill_alloc_value = 0xeb;
    cfg->fill_free_value = 0xef;
}

void hs_md_config_log_usage(void)
{
    hs_log("For malloc debug option descriptions go to:");
    hs_log("  docs/malloc_debug.md in the heapscope sources, installed as %s/malloc_debug.md",
           HEAPSCOPE_DOCDIR);
}

/* See options.h. A NULL `options` is treated as the empty string. On failure exactly one
 * error line and the two usage lines are logged, as one report. */
bool hs_md_config_parse(struct hs_md_config *cfg, const char *options)
{
    int saved_errno = errno;
    hs_md_config_reset(cfg);

    const char *cur = options != NULL ? options : "";
    struct hs_md_token name, value;
    bool ok = true;
    while (ok && hs_md_next_option(&cur, &name, &value)) {
        const struct hs_md_option *o = hs_md_find_option(name);
        if (o == NULL) {
            hs_md_error("%s: unknown option %.*s", hs_log_program_name(), hs_md_print_len(name),
                        name.p);
            ok = false;
        } else {
            ok = hs_md_apply(cfg, o, name, value);
        }
    }
    if (!ok) {
        hs_md_config_log_usage();
        hs_log_end(); /* closes the report hs_md_error opened */
    }
    errno = saved_errno;
    return ok;
}

bool hs_md_option_describe(size_t i, struct hs_md_option_doc *doc)
{
    static const char *const kinds[] = {
        [HS_MD_VALUE_NONE] = "none",
        [HS_MD_VALUE_OPTIONAL] = "optional",
        [HS_MD_VALUE_REQUIRED] = "required",
        [HS_MD_VALUE_STRING] = "string",
        [HS_MD_VALUE_WORD] = "word",
    };
    if (i >= sizeof(hs_md_options) / sizeof(hs_md_options[0]))
        return false;
    const struct hs_md_option *o = &hs_md_options[i];
    doc->name = o->name;
    doc->alias = o->alias;
    doc->value = kinds[o->kind];
    doc->def = o->def;
    doc->min = o->min;
    doc->max = o->max;
    doc->def_str = o->def_str;
    doc->words = NULL;
    if (o->kind == HS_MD_VALUE_WORD) {
        doc->words = o->words;
        doc->def_str = o->words[o->def];
    }
    return true;
}
